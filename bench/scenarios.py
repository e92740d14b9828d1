"""Sync requests for the latency benchmark, built by running the real hooks on a fake cluster.

Each case starts from a stored DisaggregatedSet with no children. `Cluster` plays Metacontroller
and the LWS controller at once: it sends a sync request, turns every desired child of the answer
into the object Metacontroller would observe next time (namespace, `controller-uid` label,
ownerReference, the last-applied annotation as compact sorted-keys JSON, uid, resourceVersion,
managedFields, server-side defaults and a status block), deletes the children the answer left
out, and writes the answer's status onto the parent with `observedGeneration`. Every LWS becomes
ready at its spec replicas straight away. Repeating this until a request no longer changes gives
the exact steady-state request; a rollout is driven the same way after a template change.

The objects are serialised the way Metacontroller sends them: Kubernetes objects are
unstructured maps in Go, so their keys come out sorted and compact.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from hooks import api
from hooks.core import records, sync
from hooks.edge import envelope

JsonObject = dict[str, Any]
ChildKey = tuple[str, str]

SET_NAME: Final = "llm"
NAMESPACE: Final = "inference"
DS_UID: Final = "5d1c2f0e-7a43-4b8e-9f61-2c8d3e4a5b6c"
NOW: Final = "2026-11-29T12:00:00Z"
MAX_SETTLE_PASSES: Final = 20
MAX_ROLLOUT_PASSES: Final = 200

_CHILD_KINDS: Final = (
    records.ChildKind.SCALER,
    records.ChildKind.LWS,
    records.ChildKind.SERVICE,
)
_RESOURCES: Final = {
    records.ChildKind.SCALER: api.SCALER_PLURAL,
    records.ChildKind.LWS: "leaderworkersets",
    records.ChildKind.SERVICE: "services",
}


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


def parent(
    shapes: Sequence[RoleShape],
    *,
    slices: int,
    placement: JsonObject | None = None,
    generation: int = 1,
) -> JsonObject:
    """A stored DisaggregatedSet without status, as a kubectl client-side apply leaves it."""
    spec: JsonObject = {"roles": [role(shape) for shape in shapes], "slices": slices}
    if placement is not None:
        spec["placementPolicy"] = placement
    applied = {
        "apiVersion": api.API_VERSION,
        "kind": api.DS_KIND,
        "metadata": {"annotations": {}, "name": SET_NAME, "namespace": NAMESPACE},
        "spec": spec,
    }
    return {
        "apiVersion": api.API_VERSION,
        "kind": api.DS_KIND,
        "metadata": {
            "name": SET_NAME,
            "namespace": NAMESPACE,
            "uid": DS_UID,
            "resourceVersion": "1000",
            "generation": generation,
            "creationTimestamp": "2026-11-29T10:00:00Z",
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": orjson.dumps(
                    applied, option=orjson.OPT_SORT_KEYS
                ).decode()
                + "\n"
            },
            "managedFields": [
                _managed_entry(
                    "kubectl-client-side-apply",
                    api.API_VERSION,
                    {"metadata": {"annotations": {}}, "spec": spec},
                    time="2026-11-29T10:00:00Z",
                )
            ],
        },
        "spec": spec,
    }


# --- what Metacontroller observes ----------------------------------------------------------------


def fields_v1(value: object) -> JsonObject:
    """A managedFields `fieldsV1` tree shaped like `value` (list items keyed by name or port)."""
    if isinstance(value, dict):
        tree: JsonObject = {".": {}}
        for key, item in value.items():
            tree[f"f:{key}"] = fields_v1(item)
        return tree
    if isinstance(value, list) and all(isinstance(item, dict) for item in value):
        tree = {".": {}}
        for item in value:
            if "name" in item:
                key = orjson.dumps({"name": item["name"]}).decode()
            elif "containerPort" in item:
                key = orjson.dumps(
                    {"containerPort": item["containerPort"], "protocol": item.get("protocol")}
                ).decode()
            else:
                return {}  # an atomic list: owned as a whole
            tree[f"k:{key}"] = fields_v1(item)
        return tree
    return {}


def _managed_entry(
    manager: str,
    api_version: str,
    shape: JsonObject,
    *,
    time: str,
    subresource: str | None = None,
) -> JsonObject:
    entry: JsonObject = {
        "apiVersion": api_version,
        "fieldsType": "FieldsV1",
        "fieldsV1": {key: fields_v1(value) for key, value in shape.items()},
        "manager": manager,
        "operation": "Update",
        "time": time,
    }
    if subresource is not None:
        entry["subresource"] = subresource
    return entry


def _lws_status(replicas: int, *, time: str) -> JsonObject:
    conditions = [
        {
            "type": "Available",
            "status": "True",
            "reason": "AllGroupsReady",
            "message": "All replicas are ready",
            "lastTransitionTime": time,
        },
        {
            "type": "Progressing",
            "status": "False",
            "reason": "Ready",
            "message": "Replicas are progressing",
            "lastTransitionTime": time,
        },
    ]
    return {
        "conditions": conditions,
        "hpaPodSelector": "leaderworkerset.sigs.k8s.io/worker-index=0",
        "readyReplicas": replicas,
        "replicas": replicas,
        "updatedReplicas": replicas,
    }


_SERVICE_DEFAULTS: Final[JsonObject] = {
    "clusterIPs": ["None"],
    "internalTrafficPolicy": "Cluster",
    "ipFamilies": ["IPv4"],
    "ipFamilyPolicy": "SingleStack",
    "sessionAffinity": "None",
    "type": "ClusterIP",
}


def _sorted(value: Any) -> Any:
    """A copy with every map's keys in sorted order, as Go writes an unstructured object."""
    if isinstance(value, dict):
        return {key: _sorted(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted(item) for item in value]
    return value


@dataclass(slots=True)
class _Stored:
    """One child as the fake API server holds it."""

    applied_text: str
    observed: JsonObject


class Cluster:
    """Metacontroller plus an LWS controller that makes every group ready at once."""

    def __init__(self, stored_parent: JsonObject) -> None:
        self.parent = copy.deepcopy(stored_parent)
        self.status: JsonObject | None = None
        self.children: dict[ChildKey, _Stored] = {}
        self.minute = 0
        self.resource_version = 2000

    def request(self) -> JsonObject:
        """The sync request Metacontroller would send now (hook version v1: keyed by name)."""
        observed_parent = dict(self.parent)
        if self.status is not None:
            observed_parent["status"] = self.status
        grouped: dict[str, dict[str, JsonObject]] = {kind.value: {} for kind in _CHILD_KINDS}
        for (_, name), stored in sorted(self.children.items()):
            child = stored.observed
            grouped[f"{child['kind']}.{child['apiVersion']}"][name] = child
        return {
            "controller": _CONTROLLER,
            "parent": _sorted(observed_parent),
            "children": grouped,
            "related": self._related(),
            "finalizing": False,
        }

    def _related(self) -> dict[str, dict[str, JsonObject]]:
        """What Metacontroller sends as related: every object that a rule of the customize hook
        selects, by name or by labels (the set's own children among them)."""
        customized = sync.customize(envelope.parse_customize_request({"parent": self.parent}))
        related: dict[str, dict[str, JsonObject]] = {}
        for rule in envelope.render_answer(customized.answer)["relatedResources"]:
            kind = next(k for k in _CHILD_KINDS if _RESOURCES[k] == rule["resource"])
            names = rule.get("names")
            wanted = rule.get("labelSelector", {}).get("matchLabels", {})
            group = related.setdefault(kind.value, {})
            for (child_kind, name), stored in sorted(self.children.items()):
                labels = stored.observed["metadata"].get("labels", {})
                if child_kind != kind.kind or (names is not None and name not in names):
                    continue
                if all(labels.get(key) == value for key, value in wanted.items()):
                    group[name] = stored.observed
        return related

    def apply(self, response: Mapping[str, Any]) -> None:
        """Create or update every desired child, delete the rest, write the parent's status."""
        self.minute += 1
        time = f"2026-11-29T{10 + self.minute // 60:02d}:{self.minute % 60:02d}:00Z"
        desired: dict[ChildKey, JsonObject] = {}
        for child in response["children"]:
            desired[(child["kind"], child["metadata"]["name"])] = child
        self.children = {
            key: self._apply_child(child, self.children.get(key), time=time)
            for key, child in desired.items()
        }
        status = dict(response["status"])
        status["observedGeneration"] = self.parent["metadata"]["generation"]
        self.status = _sorted(status)

    def _apply_child(self, desired: JsonObject, previous: _Stored | None, *, time: str) -> _Stored:
        applied = copy.deepcopy(desired)
        metadata = applied["metadata"]
        metadata["namespace"] = NAMESPACE
        metadata.setdefault("labels", {})[api.CONTROLLER_UID_LABEL] = DS_UID
        applied_text = orjson.dumps(applied, option=orjson.OPT_SORT_KEYS).decode()
        if previous is not None and previous.applied_text == applied_text:
            return previous
        self.resource_version += 1
        observed = copy.deepcopy(applied)
        meta = observed["metadata"]
        meta.setdefault("annotations", {})[api.LAST_APPLIED_ANNOTATION] = applied_text
        old_meta = previous.observed["metadata"] if previous is not None else None
        meta["uid"] = old_meta["uid"] if old_meta else f"uid-{self.resource_version:012d}"
        meta["creationTimestamp"] = old_meta["creationTimestamp"] if old_meta else time
        meta["generation"] = old_meta["generation"] + 1 if old_meta else 1
        meta["resourceVersion"] = str(self.resource_version)
        meta["ownerReferences"] = [
            {
                "apiVersion": api.API_VERSION,
                "blockOwnerDeletion": True,
                "controller": True,
                "kind": api.DS_KIND,
                "name": SET_NAME,
                "uid": DS_UID,
            }
        ]
        owned = {
            "metadata": {
                "annotations": {api.LAST_APPLIED_ANNOTATION: ""},
                "labels": applied["metadata"].get("labels", {}),
                "ownerReferences": {},
            },
            "spec": applied.get("spec", {}),
        }
        managed = [_managed_entry("metacontroller", applied["apiVersion"], owned, time=time)]
        kind = observed["kind"]
        if kind == api.LWS_KIND:
            replicas = observed["spec"].get("replicas", 1)
            observed["status"] = _lws_status(replicas, time=time)
            managed.append(
                _managed_entry(
                    "lws-controller",
                    applied["apiVersion"],
                    {"status": observed["status"]},
                    time=time,
                    subresource="status",
                )
            )
        elif kind == api.SERVICE_KIND:
            observed["spec"] = {**observed["spec"], **_SERVICE_DEFAULTS}
            observed["status"] = {"loadBalancer": {}}
        elif kind == api.SCALER_KIND:
            name_label = f"{api.LABEL_NAME}={SET_NAME}"
            role_label = f"{api.LABEL_ROLE}={observed['metadata']['labels'][api.LABEL_ROLE]}"
            observed["status"] = {
                "observedGeneration": meta["generation"],
                "replicas": observed["spec"].get("replicas", 0),
                "selector": f"{name_label},{role_label},leaderworkerset.sigs.k8s.io/worker-index=0",
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "Bound",
                        "message": "bound to its DisaggregatedSet",
                        "lastTransitionTime": time,
                        "observedGeneration": meta["generation"],
                    }
                ],
            }
        meta["managedFields"] = managed
        return _Stored(applied_text=applied_text, observed=_sorted(observed))


_CONTROLLER: Final[JsonObject] = {
    "kind": "CompositeController",
    "apiVersion": "metacontroller.k8s.io/v1alpha1",
    "metadata": {
        "name": "disaggregatedset-controller",
        "uid": "88aeea21-eaa9-4bad-8f28-fd5752474380",
        "resourceVersion": "224",
        "generation": 1,
        "creationTimestamp": "2026-11-29T09:00:00Z",
    },
    "spec": {
        "parentResource": {"apiVersion": api.API_VERSION, "resource": "disaggregatedsets"},
        "childResources": [
            {
                "apiVersion": api_version,
                "resource": resource,
                "updateStrategy": {"method": "InPlace", "statusChecks": {}},
            }
            for api_version, resource in (
                (api.LWS_API_VERSION, "leaderworkersets"),
                (api.SERVICE_API_VERSION, "services"),
                (api.API_VERSION, api.SCALER_PLURAL),
            )
        ],
        "hooks": {
            hook: {"version": "v1", "webhook": {"url": f"http://disaggregatedset-hooks/{hook}"}}
            for hook in ("customize", "sync")
        },
        "generateSelector": True,
    },
    "status": {},
}


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


def _passes(cluster: Cluster, *, limit: int) -> list[JsonObject]:
    """Sync and apply until a request repeats; every distinct request, the steady one last."""
    requests: list[JsonObject] = []
    previous: bytes | None = None
    for _ in range(limit):
        request = cluster.request()
        encoded = orjson.dumps(request)
        if encoded == previous:
            return requests
        requests.append(request)
        previous = encoded
        cluster.apply(envelope.render_answer(run_sync(request).answer))
    raise RuntimeError(f"no steady state after {limit} passes")


@dataclass(frozen=True, slots=True)
class Scenario:
    """One benchmark case: its request body and what it holds."""

    name: str
    description: str
    body: bytes
    children: int


def _scenario(name: str, description: str, request: JsonObject) -> Scenario:
    count = sum(len(group) for group in request["children"].values())
    return Scenario(name=name, description=description, body=orjson.dumps(request), children=count)


def _steady(name: str, description: str, stored: JsonObject) -> Scenario:
    request = _passes(Cluster(stored), limit=MAX_SETTLE_PASSES)[-1]
    summary = run_sync(request).summary
    if set(slice_phases(summary).values()) != {"steady"} or summary["deleted"] != 0:
        raise RuntimeError(f"{name}: the settled request is not steady: {summary}")
    return _scenario(name, description, request)


_SMALL: Final = (
    RoleShape("prefill", "vllm", "meta-llama/Llama-3.1-8B-Instruct", replicas=2, gpus=1),
    RoleShape("decode", "vllm", "meta-llama/Llama-3.1-8B-Instruct", replicas=1, external=True),
)
_MEDIUM: Final = (
    RoleShape("encode", "vllm", "Qwen/Qwen2.5-VL-7B-Instruct", replicas=2, gpus=1),
    RoleShape("prefill", "sglang", "deepseek-ai/DeepSeek-V3", replicas=4, size=2),
    RoleShape("decode", "sglang", "deepseek-ai/DeepSeek-V3", replicas=3, size=2),
)
_LARGE: Final = tuple(
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
)
_MEDIUM_PLACEMENT: Final = {"type": "ExclusiveSlice", "topology": "network.example.com/nvl-domain"}
_LARGE_PLACEMENT: Final = {"type": "ExclusiveTopology", "topology": "network.example.com/block"}


def small() -> Scenario:
    """2 roles (one External, so a scaler), 1 slice, steady."""
    return _steady("small", "2 roles (decode External), 1 slice, steady", parent(_SMALL, slices=1))


def medium() -> Scenario:
    """3 roles x 8 slices, ExclusiveSlice placement, steady."""
    return _steady(
        "medium",
        "3 roles x 8 slices, steady",
        parent(_MEDIUM, slices=8, placement=_MEDIUM_PLACEMENT),
    )


def _rollout_passes(
    shapes: Sequence[RoleShape], *, slices: int, placement: JsonObject
) -> list[JsonObject]:
    """The sync requests of a rollout of a new engine image on every role of a settled set."""
    cluster = Cluster(parent(shapes, slices=slices, placement=placement))
    _passes(cluster, limit=MAX_SETTLE_PASSES)
    updated = tuple(dataclasses.replace(shape, image_tag="v0.11.1") for shape in shapes)
    status = cluster.status
    cluster.parent = parent(updated, slices=slices, placement=placement, generation=2)
    cluster.status = status
    return _passes(cluster, limit=MAX_ROLLOUT_PASSES)


def medium_rollout() -> Scenario:
    """The medium set halfway through a rollout of a new engine image on every role."""
    requests = _rollout_passes(_MEDIUM, slices=8, placement=_MEDIUM_PLACEMENT)
    request = requests[len(requests) // 2]
    phase = slice_phases(run_sync(request).summary)["0"]
    if not phase.startswith("stepping"):
        raise RuntimeError(f"medium-rollout: the middle pass is not stepping: {phase}")
    description = f"3 roles x 8 slices, pass {len(requests) // 2 + 1}/{len(requests)} of a rollout"
    return _scenario("medium-rollout", description, request)


def large() -> Scenario:
    """10 roles x 100 slices with realistic templates, ExclusiveTopology placement, steady."""
    return _steady(
        "large",
        "10 roles x 100 slices, steady",
        parent(_LARGE, slices=100, placement=_LARGE_PLACEMENT),
    )


def large_rollout() -> Scenario:
    """The largest request of the large set's rollout: both revisions in every slice."""
    requests = _rollout_passes(_LARGE, slices=100, placement=_LARGE_PLACEMENT)
    request = max(requests, key=lambda item: len(orjson.dumps(item)))
    description = "10 roles x 100 slices mid-rollout (two revisions per slice), largest pass"
    return _scenario("large-rollout", description, request)


CASES: Final[Mapping[str, Callable[[], Scenario]]] = {
    "small": small,
    "medium": medium,
    "medium-rollout": medium_rollout,
    "large": large,
    "large-rollout": large_rollout,
}
