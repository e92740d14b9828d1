"""Sync requests for the latency benchmark, built by running the real hooks in the simulation.

Every case runs in `tests.sim.cluster.Cluster`, the repository's one fake Metacontroller
(`tests.sim.metacontroller`) with its API server (`tests.sim.store`: uids, resourceVersions,
generations, managedFields), Metacontroller's three-way apply (`tests.sim.apply`), the LWS
controller (every group ready as soon as it exists) and the RoleScaler controller, with the
simulation's invariants checked on every pass. A case creates its DisaggregatedSet as `kubectl
apply` leaves it and runs the cluster until it is quiet. A steady case's request is the one
Metacontroller sends next (`FakeMetacontroller.build_request`); a rollout case applies a new
engine image on every role and keeps one pass's request, as the fake Metacontroller sent it.

The simulated clock ends before `NOW`, the time the benchmark calls the hook at, so every
timestamp of a request precedes it and a rollout is still within its progress deadline.

The body is serialised the way Metacontroller sends it: Kubernetes objects are unstructured maps
in Go, so their keys come out sorted and compact.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from hooks import api
from hooks.core import records, sync
from hooks.server import bodies
from hooks.wire import envelope
from tests.sim.cluster import Cluster
from tests.sim.metacontroller import PassRecord
from tests.sim.store import FakeClock

JsonObject = dict[str, Any]

SET_NAME: Final = "llm"
NAMESPACE: Final = "inference"
DS_UID: Final = "5d1c2f0e-7a43-4b8e-9f61-2c8d3e4a5b6c"
NOW: Final = "2026-11-29T12:00:00Z"
"""When the benchmark calls the hook: the simulation's epoch (`tests.sim.store.EPOCH`)."""
START_SECONDS: Final = -1200
"""The simulated clock's start, in seconds from `NOW`: every case ends before `NOW`."""
SEED: Final = 0
KUBECTL: Final = "kubectl-client-side-apply"
MAX_SETTLE_TICKS: Final = 50
MAX_ROLLOUT_TICKS: Final = 600

# --- pod templates -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RoleShape:
    """What one role of a case runs: engine, model, size and hardware."""

    name: str
    engine: str
    """"vllm" or "sglang"."""
    model: str
    replicas: int
    size: int = 1
    gpus: int = 8
    external: bool = False
    image_tag: str = "v0.11.0"


def _env(shape: RoleShape) -> list[JsonObject]:
    worker_index = "metadata.labels['leaderworkerset.sigs.k8s.io/worker-index']"
    env: list[JsonObject] = [
        {
            "name": "HF_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token", "optional": False}},
        },
        {
            "name": "S3_ACCESS_KEY",
            "valueFrom": {"secretKeyRef": {"name": "model-bucket", "key": "access-key"}},
        },
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "WORKER_INDEX", "valueFrom": {"fieldRef": {"fieldPath": worker_index}}},
        {"name": "NCCL_DEBUG", "value": "WARN"},
        {"name": "NCCL_IB_HCA", "value": "mlx5_0,mlx5_1,mlx5_2,mlx5_3"},
        {"name": "NCCL_SOCKET_IFNAME", "value": "eth0"},
        {"name": "UCX_TLS", "value": "rc,cuda_copy,cuda_ipc"},
        {"name": "OTEL_EXPORTER_OTLP_ENDPOINT", "value": "http://otel-collector.obs:4317"},
        {"name": "OTEL_SERVICE_NAME", "value": f"{SET_NAME}-{shape.name}"},
    ]
    if shape.engine == "vllm":
        env += [
            {"name": "VLLM_LOGGING_LEVEL", "value": "INFO"},
            {"name": "VLLM_USE_V1", "value": "1"},
            {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "value": "$(POD_IP)"},
        ]
    else:
        env += [
            {"name": "SGLANG_LOG_LEVEL", "value": "info"},
            {"name": "SGL_ENABLE_JIT_DEEPGEMM", "value": "1"},
            {"name": "MC_TE_METRIC", "value": "true"},
        ]
    return env


def _args(shape: RoleShape, *, leader: bool) -> tuple[list[str], list[str]]:
    mode = "prefill" if "prefill" in shape.name else "decode"
    model_path = f"/models/{shape.model}"
    if shape.engine == "vllm":
        command = ["python3", "-m", "vllm.entrypoints.openai.api_server"]
        args = [
            "--model",
            model_path,
            "--served-model-name",
            shape.model.rsplit("/", 1)[-1].lower(),
            "--tensor-parallel-size",
            str(shape.gpus),
            "--pipeline-parallel-size",
            str(shape.size),
            "--host",
            "0.0.0.0",
            "--port",
            "8000",
            "--max-model-len",
            "32768",
            "--max-num-seqs",
            "256",
            "--gpu-memory-utilization",
            "0.92",
            "--kv-transfer-config",
            '{"kv_connector":"NixlConnector","kv_role":"kv_both"}',
            "--enable-prefix-caching",
            "--disable-log-requests",
        ]
        return command, args
    command = ["python3", "-m", "sglang.launch_server"]
    args = [
        "--model-path",
        model_path,
        "--disaggregation-mode",
        mode,
        "--disaggregation-transfer-backend",
        "mooncake",
        "--disaggregation-ib-device",
        "mlx5_0,mlx5_1,mlx5_2,mlx5_3",
        "--tp-size",
        str(shape.gpus * shape.size),
        "--dist-init-addr",
        "$(LWS_LEADER_ADDRESS):20000",
        "--nnodes",
        "$(LWS_GROUP_SIZE)",
        "--node-rank",
        "$(LWS_WORKER_INDEX)",
        "--host",
        "0.0.0.0",
        "--port",
        "30000",
        "--mem-fraction-static",
        "0.85",
        "--trust-remote-code",
    ]
    if not leader:
        args.append("--skip-server-warmup")
    return command, args


def _probe(path: str, port: int, *, period: int, failures: int, delay: int = 0) -> JsonObject:
    return {
        "httpGet": {"path": path, "port": port, "scheme": "HTTP"},
        "initialDelaySeconds": delay,
        "periodSeconds": period,
        "timeoutSeconds": 5,
        "successThreshold": 1,
        "failureThreshold": failures,
    }


def _engine_container(shape: RoleShape, *, leader: bool) -> JsonObject:
    command, args = _args(shape, leader=leader)
    port = 8000 if shape.engine == "vllm" else 30000
    image = (
        f"vllm/vllm-openai:{shape.image_tag}"
        if shape.engine == "vllm"
        else f"lmsysorg/sglang:{shape.image_tag}-cu126"
    )
    resources = {
        "cpu": "48",
        "memory": "512Gi",
        "ephemeral-storage": "200Gi",
        "nvidia.com/gpu": str(shape.gpus),
        "rdma/ib": "4",
    }
    return {
        "name": "engine",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": command,
        "args": args,
        "env": _env(shape),
        "ports": [
            {"name": "http", "containerPort": port, "protocol": "TCP"},
            {"name": "dist", "containerPort": 20000, "protocol": "TCP"},
        ],
        "resources": {"limits": resources, "requests": dict(resources)},
        "startupProbe": _probe("/health", port, period=10, failures=180),
        "readinessProbe": _probe("/health", port, period=10, failures=3, delay=5),
        "livenessProbe": _probe("/health", port, period=30, failures=5, delay=60),
        "volumeMounts": [
            {"name": "model-cache", "mountPath": "/models", "readOnly": True},
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": "engine-config", "mountPath": "/etc/engine", "readOnly": True},
        ],
        "securityContext": {"capabilities": {"add": ["IPC_LOCK", "SYS_RESOURCE"]}},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }


def _init_container(shape: RoleShape) -> JsonObject:
    return {
        "name": "model-sync",
        "image": "ghcr.io/example/model-sync:1.4.2",
        "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/sh", "-c"],
        "args": [
            f"huggingface-cli download {shape.model} --local-dir /models/{shape.model} "
            "--exclude '*.pth' && touch /models/.ready"
        ],
        "env": [
            {
                "name": "HF_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}},
            },
            {"name": "HF_HUB_ENABLE_HF_TRANSFER", "value": "1"},
        ],
        "resources": {
            "limits": {"cpu": "4", "memory": "16Gi"},
            "requests": {"cpu": "2", "memory": "8Gi"},
        },
        "volumeMounts": [{"name": "model-cache", "mountPath": "/models"}],
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }


def pod_template(shape: RoleShape, *, leader: bool) -> JsonObject:
    """A vLLM- or SGLang-like pod template, with the defaults a kube-apiserver would store."""
    return {
        "metadata": {
            "labels": {"app.kubernetes.io/component": shape.name, "model": "served"},
            "annotations": {
                "prometheus.io/scrape": "true",
                "prometheus.io/port": "8000" if shape.engine == "vllm" else "30000",
                "kubectl.kubernetes.io/default-container": "engine",
            },
        },
        "spec": {
            "serviceAccountName": "llm-inference",
            "priorityClassName": "inference-high",
            "terminationGracePeriodSeconds": 120,
            "schedulerName": "default-scheduler",
            "dnsPolicy": "ClusterFirst",
            "restartPolicy": "Always",
            "initContainers": [_init_container(shape)],
            "containers": [_engine_container(shape, leader=leader)],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "nvidia.com/gpu.product",
                                        "operator": "In",
                                        "values": ["NVIDIA-H100-80GB-HBM3", "NVIDIA-H200"],
                                    },
                                    {"key": "node.example.com/pool", "operator": "Exists"},
                                ]
                            }
                        ]
                    }
                },
                "podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 100,
                            "podAffinityTerm": {
                                "labelSelector": {
                                    "matchLabels": {"app.kubernetes.io/component": shape.name}
                                },
                                "topologyKey": "kubernetes.io/hostname",
                            },
                        }
                    ]
                },
            },
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                {
                    "key": "dedicated",
                    "operator": "Equal",
                    "value": "inference",
                    "effect": "NoSchedule",
                },
            ],
            "volumes": [
                {
                    "name": "model-cache",
                    "persistentVolumeClaim": {"claimName": "model-cache", "readOnly": True},
                },
                {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}},
                {
                    "name": "engine-config",
                    "configMap": {"name": f"{SET_NAME}-{shape.name}-config", "defaultMode": 420},
                },
            ],
        },
    }


def role(shape: RoleShape) -> JsonObject:
    """A role as the API server stores it (the LWS CRD defaults filled in)."""
    template: JsonObject = {
        "restartPolicy": "RecreateGroupOnPodRestart",
        "size": shape.size,
        "workerTemplate": pod_template(shape, leader=False),
    }
    if shape.size > 1:
        template["leaderTemplate"] = pod_template(shape, leader=True)
    stored: JsonObject = {
        "name": shape.name,
        "metadata": {
            "labels": {"team": "inference", "engine": shape.engine},
            "annotations": {"example.com/owner": "serving-platform"},
        },
        "spec": {
            "replicas": shape.replicas,
            "leaderWorkerTemplate": template,
            "rolloutStrategy": {
                "type": "RollingUpdate",
                "rollingUpdateConfiguration": {"maxSurge": 1, "maxUnavailable": 0, "partition": 0},
            },
            "startupPolicy": "LeaderCreated",
            "networkConfig": {"subdomainPolicy": "Shared"},
        },
    }
    if shape.external:
        stored["scaling"] = {"mode": "External"}
    return stored


@dataclass(frozen=True, slots=True)
class SetShape:
    """One case's DisaggregatedSet: its roles, slices and placement."""

    roles: tuple[RoleShape, ...]
    slices: int
    placement: JsonObject | None = None

    def with_image_tag(self, tag: str) -> SetShape:
        roles = tuple(dataclasses.replace(shape, image_tag=tag) for shape in self.roles)
        return dataclasses.replace(self, roles=roles)


def parent(shape: SetShape) -> JsonObject:
    """The DisaggregatedSet of `shape` as `kubectl apply` sends it: a manifest with kubectl's
    last-applied annotation (the API server adds the rest)."""
    spec: JsonObject = {"roles": [role(item) for item in shape.roles], "slices": shape.slices}
    if shape.placement is not None:
        spec["placementPolicy"] = shape.placement
    applied = {
        "apiVersion": api.API_VERSION,
        "kind": api.DS_KIND,
        "metadata": {"annotations": {}, "name": SET_NAME, "namespace": NAMESPACE},
        "spec": spec,
    }
    annotation = orjson.dumps(applied, option=orjson.OPT_SORT_KEYS).decode() + "\n"
    return {
        "apiVersion": api.API_VERSION,
        "kind": api.DS_KIND,
        "metadata": {
            "name": SET_NAME,
            "namespace": NAMESPACE,
            "uid": DS_UID,
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": annotation},
        },
        "spec": spec,
    }


SMALL: Final = SetShape(
    roles=(
        RoleShape("prefill", "vllm", "meta-llama/Llama-3.1-8B-Instruct", replicas=2, gpus=1),
        RoleShape("decode", "vllm", "meta-llama/Llama-3.1-8B-Instruct", replicas=1, external=True),
    ),
    slices=1,
)
MEDIUM: Final = SetShape(
    roles=(
        RoleShape("encode", "vllm", "Qwen/Qwen2.5-VL-7B-Instruct", replicas=2, gpus=1),
        RoleShape("prefill", "sglang", "deepseek-ai/DeepSeek-V3", replicas=4, size=2),
        RoleShape("decode", "sglang", "deepseek-ai/DeepSeek-V3", replicas=3, size=2),
    ),
    slices=8,
    placement={"type": "ExclusiveSlice", "topology": "network.example.com/nvl-domain"},
)
LARGE: Final = SetShape(
    roles=tuple(
        RoleShape(
            name,
            "sglang" if index % 2 else "vllm",
            model,
            replicas=1 + index % 3,
            size=2 if index % 4 == 1 else 1,
            gpus=1 if name in ("encode", "embed") else 8,
        )
        for index, (name, model) in enumerate(
            [
                ("encode", "Qwen/Qwen2.5-VL-72B-Instruct"),
                ("prefill-chat", "meta-llama/Llama-3.3-70B-Instruct"),
                ("decode-chat", "meta-llama/Llama-3.3-70B-Instruct"),
                ("prefill-code", "Qwen/Qwen2.5-Coder-32B-Instruct"),
                ("decode-code", "Qwen/Qwen2.5-Coder-32B-Instruct"),
                ("prefill-long", "deepseek-ai/DeepSeek-V3"),
                ("decode-long", "deepseek-ai/DeepSeek-V3"),
                ("prefill-vision", "Qwen/Qwen2.5-VL-72B-Instruct"),
                ("decode-vision", "Qwen/Qwen2.5-VL-72B-Instruct"),
                ("embed", "BAAI/bge-m3"),
            ]
        )
    ),
    slices=100,
    placement={"type": "ExclusiveTopology", "topology": "network.example.com/block"},
)
ROLLOUT_TAG: Final = "v0.11.1"


# --- the simulated cluster -----------------------------------------------------------------------


def settled(shape: SetShape) -> Cluster:
    """A simulated cluster in which the set of `shape` was created and has settled: Available,
    every LWS ready, nothing left to do."""
    cluster = Cluster(
        seed=SEED,
        namespace=NAMESPACE,
        clock=FakeClock(seconds=START_SECONDS),
        keep_passes=False,
    )
    cluster.create(parent(shape), actor=KUBECTL)
    cluster.run(max_ticks=MAX_SETTLE_TICKS)
    if not cluster.is_true("Available", SET_NAME):
        raise cluster.failure("the set did not become Available")
    return cluster


def next_request(cluster: Cluster) -> JsonObject:
    """The sync request the simulated Metacontroller would send for the set now."""
    request: JsonObject = cluster.metacontroller.build_request(cluster.ds(SET_NAME))
    return request


def roll_out(cluster: Cluster, shape: SetShape, keep: Callable[[PassRecord], None]) -> None:
    """Apply `shape` over the settled set, run the rollout to its end, hand `keep` every pass."""
    stored = cluster.ds(SET_NAME)
    applied = parent(shape)
    stored["spec"] = applied["spec"]
    stored["metadata"]["annotations"] = applied["metadata"]["annotations"]
    cluster.metacontroller.observers.append(keep)
    cluster.update(stored, actor=KUBECTL)
    cluster.run(max_ticks=MAX_ROLLOUT_TICKS)
    cluster.metacontroller.observers.remove(keep)
    target = cluster.revision(SET_NAME)
    if not cluster.is_true("Available", SET_NAME) or cluster.revisions(SET_NAME) != {target}:
        raise cluster.failure("the rollout did not finish on its target revision")


def _check_clock(cluster: Cluster) -> None:
    if cluster.clock.iso() > NOW:
        raise RuntimeError(f"the simulation ran past NOW ({cluster.clock.iso()} > {NOW})")


# --- cases ---------------------------------------------------------------------------------------


def run_sync(request: JsonObject) -> records.HookResult:
    """The hook as the server runs it, minus HTTP and JSON."""
    return sync.sync(envelope.parse_sync_request(request), now=NOW)


def slice_phases(summary: Mapping[str, object]) -> dict[str, str]:
    """The per-slice step descriptions of a sync summary, by slice index."""
    slices = summary.get("slices")
    if not isinstance(slices, Mapping):
        raise RuntimeError(f"the sync summary has no per-slice steps: {summary}")
    return {str(index): str(step) for index, step in slices.items()}


@dataclass(frozen=True, slots=True)
class Scenario:
    """One benchmark case: its request body and what it holds."""

    name: str
    description: str
    body: bytes
    children: int


def encode(request: JsonObject) -> bytes:
    """A request body as Metacontroller sends it (compact, every map's keys sorted)."""
    return orjson.dumps(request, option=orjson.OPT_SORT_KEYS)


def _scenario(name: str, description: str, body: bytes) -> Scenario:
    request = orjson.loads(body)
    count = sum(len(group) for group in request["children"].values())
    return Scenario(name=name, description=description, body=body, children=count)


def _steady(name: str, description: str, shape: SetShape) -> Scenario:
    # The simulation's objects are acyclic JSON, freed by reference counting: the cyclic
    # collector would walk the ever larger heap for nothing (half the large cases' time).
    with bodies.collector_paused():
        cluster = settled(shape)
        _check_clock(cluster)
        request = next_request(cluster)
    summary = run_sync(request).summary
    if set(slice_phases(summary).values()) != {"steady"} or summary["deleted"] != 0:
        raise RuntimeError(f"{name}: the settled request is not steady: {summary}")
    return _scenario(name, description, encode(request))


@dataclass(slots=True)
class _Passes:
    """The rollout passes a case keeps: every body, or only the largest."""

    only_largest: bool
    bodies: list[bytes] = dataclasses.field(default_factory=list)
    count: int = 0

    def __call__(self, record: PassRecord) -> None:
        self.count += 1
        body = encode(record.request)
        if not self.only_largest:
            self.bodies.append(body)
        elif not self.bodies or len(body) > len(self.bodies[0]):
            self.bodies[:] = [body]


def _rollout(shape: SetShape, *, only_largest: bool) -> _Passes:
    with bodies.collector_paused():  # as in _steady
        cluster = settled(shape)
        passes = _Passes(only_largest=only_largest)
        roll_out(cluster, shape.with_image_tag(ROLLOUT_TAG), passes)
        _check_clock(cluster)
    return passes


def small() -> Scenario:
    """2 roles (one External, so a scaler), 1 slice, steady."""
    return _steady("small", "2 roles (decode External), 1 slice, steady", SMALL)


def medium() -> Scenario:
    """3 roles x 8 slices, ExclusiveSlice placement, steady."""
    return _steady("medium", "3 roles x 8 slices, steady", MEDIUM)


def medium_rollout() -> Scenario:
    """The medium set halfway through a rollout of a new engine image on every role."""
    passes = _rollout(MEDIUM, only_largest=False)
    middle = len(passes.bodies) // 2
    body = passes.bodies[middle]
    phase = slice_phases(run_sync(orjson.loads(body)).summary)["0"]
    if not phase.startswith("stepping"):
        raise RuntimeError(f"medium-rollout: the middle pass is not stepping: {phase}")
    description = f"3 roles x 8 slices, pass {middle + 1}/{passes.count} of a rollout"
    return _scenario("medium-rollout", description, body)


def large() -> Scenario:
    """10 roles x 100 slices with realistic templates, ExclusiveTopology placement, steady."""
    return _steady("large", "10 roles x 100 slices, steady", LARGE)


def large_rollout() -> Scenario:
    """The largest request of the large set's rollout: both revisions in every slice."""
    passes = _rollout(LARGE, only_largest=True)
    description = "10 roles x 100 slices mid-rollout (two revisions per slice), largest pass"
    return _scenario("large-rollout", description, passes.bodies[0])


CASES: Final[Mapping[str, Callable[[], Scenario]]] = {
    "small": small,
    "medium": medium,
    "medium-rollout": medium_rollout,
    "large": large,
    "large-rollout": large_rollout,
}
