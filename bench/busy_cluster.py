"""What a busy cluster costs the controller: objects that no set owns, of the kinds Metacontroller
watches for the sets, side by side with upstream's Go controller.

    python bench/busy_cluster.py [--sets 50] [--services 10000] [--revisions 10000]
                                 [--churn 2000] [--per-workload 6]
                                 [--wirings default,no-services]
                                 [--peer PATH] [--delay 0.25] [--timeout 900] [--pprof]

Metacontroller keeps one cluster-wide cache of whole objects per child type of a
CompositeController and decodes every change of it, whether a set owns the object or not. A real
LeaderWorkerSet cluster holds many objects of the kinds a controller of the sets may watch: every
LWS and every StatefulSet records its template revisions in ControllerRevisions, and every
workload has its Services. This benchmark puts them beside N Available sets and measures what
they cost each controller. The sets keep their history in DisaggregatedSetRevisions, so
Metacontroller watches no ControllerRevision; Services are a child type unless the wiring leaves
them out.

Each setup runs on a fresh control plane (`bench/real_stack.py` starts it, the same way as the
fleet benchmark; Metacontroller with its `unthrottled` flags, upstream's controller as there):

1. create N sets (prefill 2 + decode 1 groups), wait until every one is Available, then
   `SETTLE_SECONDS` more for the last syncs and writes;
2. create the foreign workloads' owners: one StatefulSet per workload, in namespaces of their
   own, which neither controller watches (the objects below are controller-owned by them, as
   real ones are, so the garbage collector keeps them);
3. idle: the controller side's CPU over 60 s, its background rate;
4. revisions: `--revisions` ControllerRevisions of about 3 KiB, `--per-workload` per workload,
   each shaped like a StatefulSet's (the pod template of a vLLM-like server as a strategic merge
   patch, its hash in the name and label, a revision number);
5. churn: `--churn` of those ControllerRevisions replaced (each deleted and a new one created
   for the next revision, as a StatefulSet's template change does);
6. services: `--services` headless Services, spread over the workloads (named and labelled as
   an LWS names its headless Service).

A phase starts with its first write and ends once the controller side's CPU has stayed within
0.05 s per second of its idle rate for 3 s. Per phase it prints the controller side's resident
memory (VmRSS summed over its process groups, and PSS) before and after, its CPU seconds, and
the CPU net of the idle rate over the phase; then per 1,000 objects. The controller side is ours
= Metacontroller + the hook server, upstream = its one process (`bench/real_stack.py`). Before
that, what the sets themselves added to its memory, and the stored size of a set, of one of its
LWS and of each foreign kind. At the end it compares every set's status, its LWS (uid,
generation, replicas), Services (uid) and, for ours, history records (DisaggregatedSetRevisions:
uid, generation, number) with what they were before the first foreign object: nothing may have
moved, and every set must still be Available.

A Go program's resident memory follows its heap with a lag: the garbage collector lets the heap
grow to twice what is live before it collects, so a phase may still grow the memory of the one
before it. Measure each target's kind in a run of its own (`--revisions 0 --churn 0` for
Services), or first (the order above).

Wirings of ours (`--wirings`, comma-separated; each is a setup of its own):

- default: the kit as shipped;
- no-services: the kit with `components/no-services` (Services are not a child type, and the
  hooks answer without them).

With `--peer PATH` (upstream's controller, `../shared/peer/README.md`) it runs last, on the same
workload, and the table compares each wiring with it: the targets are that 10,000 foreign
ControllerRevisions (in every wiring) and, with no-services, 10,000 foreign Services cost ours
no more than upstream's (within 10 MB and 1 CPU s, scaled to the counts run); with the default
install the cost of a Service is measured, not held to a target. With `--pprof`,
Metacontroller's heap is profiled (after a garbage collection) at the idle phase and after each
phase, for `go tool pprof -base` (bench/README.md), and its live heap after each collection is
printed; the collections change the resident memory, so take the table's figures from a run
without it.

Exit status: 0 when every phase completed, no set moved and every target that applies was met;
1 otherwise; 2 for a usage error.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import requests

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench import real_stack  # noqa: E402 (needs the root on sys.path)
from tests import shared  # noqa: E402 (as above)
from tests.cluster import sets  # noqa: E402 (as above)
from tools.sandbox import assets, kube, processes  # noqa: E402 (as above)
from tools.sandbox.controlplane import ControlPlane  # noqa: E402 (as above)
from tools.sandbox.lws import FakeLwsController  # noqa: E402 (as above)

JsonObject = dict[str, Any]

NAMESPACE: Final = real_stack.NAMESPACE
FOREIGN_NAMESPACES: Final = 10
WRITERS: Final = 8
IDLE_SECONDS: Final = 60.0
QUIET_SECONDS: Final = 3
QUIET_MARGIN: Final = 0.05
"""CPU seconds per second above the idle rate that still count as quiet."""
QUIET_TIMEOUT_SECONDS: Final = 300.0
SETTLE_SECONDS: Final = 30
"""After the last set is Available: its last syncs and status writes, before the memory reading."""
TARGET_MB: Final = 10.0
TARGET_CPU_SECONDS: Final = 1.0
TARGET_COUNT: Final = 10_000
MB: Final = 1_000_000

STATEFULSETS: Final = kube.Resource("apps", "v1", "statefulsets")
CONTROLLER_REVISIONS: Final = kube.Resource("apps", "v1", "controllerrevisions")
LWS_NAME_LABEL: Final = "leaderworkerset.sigs.k8s.io/name"
HASH_LABEL: Final = "controller-revision-hash"
COMPONENTS: Final = REPO_ROOT / "components"


# --- wirings -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Wiring:
    components: tuple[Path, ...] = ()
    """The kit's components installed with it."""
    services: bool = True
    """Whether Metacontroller watches Services in this wiring (it never watches
    ControllerRevisions)."""


WIRINGS: Final = {
    "default": Wiring(),
    "no-services": Wiring(components=(COMPONENTS / "no-services",), services=False),
}


# --- the foreign objects -------------------------------------------------------------------------


def _digest(*parts: object) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()


def pod_template(workload: str, revision: int) -> JsonObject:
    """A vLLM-like server's pod template: what a StatefulSet of an LWS carries (about 2.5 KiB)."""
    image = f"vllm/vllm-openai:v0.{revision}.0"
    return {
        "metadata": {
            "labels": {LWS_NAME_LABEL: workload, "leaderworkerset.sigs.k8s.io/worker-index": "0"},
            "annotations": {"leaderworkerset.sigs.k8s.io/size": "2"},
        },
        "spec": {
            "containers": [
                {
                    "name": "vllm-leader",
                    "image": image,
                    "command": ["sh", "-c"],
                    "args": [
                        "python3 -m vllm.entrypoints.openai.api_server --port 8080"
                        " --model meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 8"
                        " --pipeline-parallel-size 2 --max-model-len 32768"
                        " --gpu-memory-utilization 0.92 --enable-prefix-caching"
                        ' --kv-transfer-config \'{"kv_connector":"NixlConnector"}\''
                    ],
                    "env": [
                        {"name": "HF_HOME", "value": "/models/cache"},
                        {
                            "name": "VLLM_HOST_IP",
                            "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
                        },
                        {
                            "name": "HF_TOKEN",
                            "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}},
                        },
                        {"name": "NCCL_DEBUG", "value": "WARN"},
                        {"name": "UCX_TLS", "value": "rc,cuda_copy,cuda_ipc"},
                    ],
                    "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                    "resources": {
                        "limits": {"nvidia.com/gpu": "8", "rdma/ib": "8", "memory": "1600Gi"},
                        "requests": {"cpu": "96", "memory": "1600Gi", "nvidia.com/gpu": "8"},
                    },
                    "readinessProbe": {
                        "httpGet": {"path": "/health", "port": 8080, "scheme": "HTTP"},
                        "initialDelaySeconds": 15,
                        "periodSeconds": 10,
                    },
                    "startupProbe": {
                        "httpGet": {"path": "/health", "port": 8080, "scheme": "HTTP"},
                        "failureThreshold": 360,
                        "periodSeconds": 10,
                    },
                    "volumeMounts": [
                        {"name": "models", "mountPath": "/models"},
                        {"name": "dshm", "mountPath": "/dev/shm"},
                    ],
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "volumes": [
                {"name": "models", "persistentVolumeClaim": {"claimName": "models"}},
                {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}},
            ],
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
            ],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "nvidia.com/gpu.product",
                                        "operator": "In",
                                        "values": ["NVIDIA-H100-80GB-HBM3"],
                                    }
                                ]
                            }
                        ]
                    }
                }
            },
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "schedulerName": "default-scheduler",
            "subdomain": workload,
        },
    }


@dataclass(frozen=True)
class Workload:
    """One foreign workload: a StatefulSet in a namespace of its own, owner of the rest."""

    name: str
    namespace: str

    def statefulset(self) -> JsonObject:
        return {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "labels": {LWS_NAME_LABEL: self.name},
            },
            "spec": {
                "replicas": 1,
                "serviceName": self.name,
                "selector": {"matchLabels": {LWS_NAME_LABEL: self.name}},
                "template": pod_template(self.name, 0),
            },
        }

    def owner(self, stored: JsonObject) -> list[JsonObject]:
        return [
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "name": self.name,
                "uid": stored["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]

    def service(self, index: int, owner: list[JsonObject]) -> JsonObject:
        """A headless Service, as an LWS makes one for its pods."""
        name = self.name if index == 0 else f"{self.name}-{index}"
        return {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "labels": {LWS_NAME_LABEL: self.name},
                "ownerReferences": owner,
            },
            "spec": {
                "clusterIP": "None",
                "publishNotReadyAddresses": True,
                "selector": {LWS_NAME_LABEL: self.name},
            },
        }

    def revision(self, number: int, owner: list[JsonObject]) -> JsonObject:
        """The StatefulSet's ControllerRevision for its template at `number` (about 3 KiB)."""
        template = pod_template(self.name, number)
        hash_ = _digest(self.name, number)[:10]
        return {
            "apiVersion": "apps/v1",
            "kind": "ControllerRevision",
            "metadata": {
                "name": f"{self.name}-{hash_}",
                "namespace": self.namespace,
                "labels": {LWS_NAME_LABEL: self.name, HASH_LABEL: f"{self.name}-{hash_}"},
                "ownerReferences": owner,
            },
            "data": {"spec": {"template": {**template, "$patch": "replace"}}},
            "revision": number,
        }


def workloads(count: int) -> list[Workload]:
    return [
        Workload(f"serving-{index:05d}", f"busy-{index % FOREIGN_NAMESPACES}")
        for index in range(count)
    ]


def write_all(client: kube.Client, work: Sequence[Callable[[kube.Client], Any]]) -> list[Any]:
    """Run every item of `work` from `WRITERS` threads (each keeps its own connection alive),
    retrying a transient failure; the results in order."""

    def run(item: Callable[[kube.Client], Any]) -> Any:
        for attempt in range(10):
            try:
                return item(client)
            except (kube.ApiError, *processes.TRANSPORT_ERRORS) as error:
                if not kube.is_transient(error) or attempt == 9:
                    raise
                time.sleep(0.2 * (attempt + 1))
        raise AssertionError("unreachable")

    with ThreadPoolExecutor(max_workers=WRITERS) as pool:
        return list(pool.map(run, work))


# --- measuring -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reading:
    """The controller side at one moment."""

    wall: float
    cpu: float
    rss_kib: int
    pss_kib: int
    by_process_rss_kib: Mapping[str, int]
    syncs: float


def read(stack: real_stack.Stack) -> Reading:
    cpu, rss, pss = 0.0, 0, 0
    by_process = {}
    for name in stack.controllers:
        pgid = stack.plane.running[name].pid
        cpu += real_stack.group_stats(pgid)[0]
        process_rss, process_pss = real_stack.group_memory_kib(pgid)
        rss, pss = rss + process_rss, pss + process_pss
        by_process[name] = process_rss
    return Reading(time.time(), cpu, rss, pss, by_process, stack.syncs())


def controller_cpu(stack: real_stack.Stack) -> float:
    return sum(
        real_stack.group_stats(stack.plane.running[name].pid)[0] for name in stack.controllers
    )


def wait_quiet(stack: real_stack.Stack, idle_rate: float) -> bool:
    """Until the controller side's CPU stays near its idle rate for `QUIET_SECONDS` in a row."""
    deadline = time.monotonic() + QUIET_TIMEOUT_SECONDS
    last, quiet = controller_cpu(stack), 0
    while quiet < QUIET_SECONDS:
        if time.monotonic() > deadline:
            return False
        time.sleep(1.0)
        now = controller_cpu(stack)
        quiet = quiet + 1 if now - last <= idle_rate + QUIET_MARGIN else 0
        last = now
    return True


@dataclass(frozen=True)
class Phase:
    name: str
    objects: int
    before: Reading
    after: Reading
    idle_rate: float
    quiet: bool
    """Whether the controller became quiet again (else the phase ended at its timeout)."""

    @property
    def seconds(self) -> float:
        return self.after.wall - self.before.wall

    @property
    def cpu(self) -> float:
        return self.after.cpu - self.before.cpu

    @property
    def net_cpu(self) -> float:
        return self.cpu - self.idle_rate * self.seconds

    @property
    def rss_delta_bytes(self) -> int:
        return 1024 * (self.after.rss_kib - self.before.rss_kib)

    @property
    def syncs(self) -> float:
        return self.after.syncs - self.before.syncs


class HeapProfiles:
    """Metacontroller heap profiles (after a garbage collection), one per moment asked for."""

    def __init__(self, plane: ControlPlane, label: str) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix=f"ds-busy-heap-{label}-"))
        self._plane = plane

    def take(self, name: str) -> float:
        """Write the profile `name`; the live heap (bytes) right after its collection."""
        with requests.Session() as session:
            session.trust_env = False
            answer = session.get(
                f"{self._plane.metacontroller_pprof}/heap", params={"gc": "1"}, timeout=120
            )
            answer.raise_for_status()
        (self.directory / f"{name}.pb.gz").write_bytes(answer.content)
        return sum(
            value
            for name, _, value in real_stack.samples(self._plane.metacontroller_metrics)
            if name == "go_memstats_heap_alloc_bytes"
        )


# --- the sets must not move --------------------------------------------------------------------


def sets_state(client: kube.Client, *, history: bool) -> dict[str, Any]:
    """What a foreign object must never change: each set's status, and its children (with
    `history`, its history records too: upstream's controller keeps none)."""
    found: dict[str, Any] = {
        "status": {
            ds["metadata"]["name"]: ds.get("status")
            for ds in client.list(kube.DISAGGREGATED_SETS, namespace=NAMESPACE)
        },
        "lws": {
            lws["metadata"]["name"]: (
                lws["metadata"]["uid"],
                lws["metadata"]["generation"],
                lws["spec"].get("replicas"),
            )
            for lws in client.list(kube.LWS, namespace=NAMESPACE)
        },
        "services": {
            svc["metadata"]["name"]: svc["metadata"]["uid"]
            for svc in client.list(kube.SERVICES, namespace=NAMESPACE)
        },
    }
    if history:
        found["records"] = {
            record["metadata"]["name"]: (
                record["metadata"]["uid"],
                record["metadata"]["generation"],
                record["revision"],
            )
            for record in client.list(kube.REVISIONS, namespace=NAMESPACE)
        }
    return found


def moved(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """What differs between two `sets_state`s, by part and name."""
    differences = []
    for part, old in before.items():
        new = after[part]
        for name in sorted(set(old) | set(new)):
            if old.get(name) != new.get(name):
                differences.append(f"{part} {name}: {old.get(name)!r} -> {new.get(name)!r}")
    return differences


# --- one setup ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Counts:
    sets: int
    services: int
    revisions: int
    churn: int
    per_workload: int

    @property
    def workloads(self) -> int:
        return max(1, math.ceil(max(self.revisions, self.services) / self.per_workload))


@dataclass
class Result:
    label: str
    created: real_stack.Phase | None = None
    empty: Reading | None = None
    """The controller side before the first set."""
    settled: Reading | None = None
    """After the sets were created and settled, before the first foreign object."""
    idle_rate: float = 0.0
    phases: list[Phase] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)
    available: int = 0
    children: Mapping[str, int] = field(default_factory=dict)
    sizes: Mapping[str, int] = field(default_factory=dict)
    """Bytes of compact JSON of one object of each kind, as the API server stores it."""
    live_heap: dict[str, float] = field(default_factory=dict)
    """With `--pprof`: Metacontroller's live heap (bytes) after a collection, idle and after
    each phase."""
    profiles: Path | None = None

    def phase(self, name: str) -> Phase | None:
        return next((phase for phase in self.phases if phase.name == name), None)

    @property
    def completed(self) -> bool:
        return (
            self.created is not None
            and self.created.completed
            and all(phase.quiet for phase in self.phases)
        )


def _play(
    stack: real_stack.Stack,
    counts: Counts,
    *,
    delay: float,
    timeout: float,
    heap: HeapProfiles | None = None,
) -> Result:
    plane = stack.plane
    result = Result(stack.label, profiles=heap.directory if heap else None)
    controller = FakeLwsController(plane.client, delay=delay)
    try:
        real_stack.wait_for_watches(plane)
        controller.start()
        real_stack.prepare(plane)
        recorder = real_stack.Recorder(plane.client)
        try:
            fleet = real_stack.Workload(stack, recorder, counts.sets, timeout, external=False)
            result.empty = read(stack)
            fleet.create()
            result.created = fleet.phases[-1]
            if not result.created.completed:
                return result
            time.sleep(SETTLE_SECONDS)
            result.settled = read(stack)
            _foreign(stack, counts, result, heap)
        finally:
            recorder.stop()
        if controller.errors:
            print(f"  fake LWS controller errors: {controller.errors[:3]}")
        return result
    finally:
        controller.stop()
        plane.stop()


def _foreign(
    stack: real_stack.Stack,
    counts: Counts,
    result: Result,
    heap: HeapProfiles | None,
) -> None:
    """The owners, the idle rate, then the three phases of foreign objects; then the check."""
    client = stack.plane.client
    for index in range(FOREIGN_NAMESPACES):
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"busy-{index}"}}
        client.create(kube.NAMESPACES, namespace)
    owners = workloads(counts.workloads)
    stored = write_all(client, [_creating(STATEFULSETS, w.statefulset()) for w in owners])
    refs = [w.owner(obj) for w, obj in zip(owners, stored, strict=True)]
    history = isinstance(stack, real_stack.Ours)
    baseline = sets_state(client, history=history)
    start = read(stack)
    time.sleep(IDLE_SECONDS)
    idle = read(stack)
    result.idle_rate = (idle.cpu - start.cpu) / (idle.wall - start.wall)
    if heap is not None:
        result.live_heap["idle"] = heap.take("0-idle")

    services = [
        _creating(
            kube.SERVICES, owners[i % len(owners)].service(i // len(owners), refs[i % len(owners)])
        )
        for i in range(counts.services)
    ]
    revisions = [(w, number) for number in range(counts.per_workload) for w in range(len(owners))][
        : counts.revisions
    ]
    created = [
        _creating(CONTROLLER_REVISIONS, owners[w].revision(number, refs[w]))
        for w, number in revisions
    ]
    churn = []
    for w, number in revisions[: counts.churn]:
        old = owners[w].revision(number, refs[w])["metadata"]
        churn.append(_deleting(CONTROLLER_REVISIONS, old["name"], old["namespace"]))
        churn.append(
            _creating(
                CONTROLLER_REVISIONS, owners[w].revision(number + counts.per_workload, refs[w])
            )
        )
    for index, (name, work) in enumerate(
        (("revisions", created), ("churn", churn), ("services", services))
    ):
        if not work:
            continue
        before = read(stack)
        write_all(client, work)
        quiet = wait_quiet(stack, result.idle_rate)
        objects = len(work) // 2 if name == "churn" else len(work)
        result.phases.append(Phase(name, objects, before, read(stack), result.idle_rate, quiet))
        if heap is not None:
            result.live_heap[name] = heap.take(f"{index + 1}-{name}")
    samples = [owners[0].service(0, refs[0])] if counts.services else []
    if revisions:
        w, number = revisions[-1]
        if counts.churn == len(revisions):
            number += counts.per_workload
        samples.append(owners[w].revision(number, refs[w]))
    result.sizes = _sizes(client, samples)
    after = sets_state(client, history=history)
    result.moved = moved(baseline, after)
    listed = client.list(kube.DISAGGREGATED_SETS, namespace=NAMESPACE)
    result.available = sum(sets.is_available(ds) for ds in listed)
    result.children = {part: len(found) for part, found in after.items() if part != "status"}


def _sizes(client: kube.Client, samples: Sequence[JsonObject]) -> dict[str, int]:
    """The stored size of a set, one of its LWS, and each foreign sample (by kind)."""
    found = {}
    for obj in samples:
        metadata = obj["metadata"]
        resource = kube.SERVICES if obj["kind"] == "Service" else CONTROLLER_REVISIONS
        stored = client.get(resource, metadata["name"], namespace=metadata["namespace"])
        found[f"foreign {obj['kind']}"] = len(json.dumps(stored, separators=(",", ":")))
    for label, resource in (("set", kube.DISAGGREGATED_SETS), ("set's LWS", kube.LWS)):
        first = client.list(resource, namespace=NAMESPACE)[0]
        found[label] = len(json.dumps(first, separators=(",", ":")))
    return found


def _creating(resource: kube.Resource, obj: JsonObject) -> Callable[[kube.Client], JsonObject]:
    return lambda client: client.create(resource, obj)


def _deleting(resource: kube.Resource, name: str, namespace: str) -> Callable[[kube.Client], Any]:
    return lambda client: client.delete(resource, name, namespace=namespace)


def run_ours(wiring: str, counts: Counts, *, delay: float, timeout: float, pprof: bool) -> Result:
    chosen = WIRINGS[wiring]
    plane = ControlPlane.start(
        assets.find_assets(fallbacks=shared.testcluster_dirs()),
        Path(tempfile.mkdtemp(prefix="ds-busy-")),
        kit=REPO_ROOT,
        metacontroller_flags=real_stack.PROFILES["unthrottled"](),
        pprof=pprof,
        audit=True,
        kit_components=chosen.components,
    )
    heap = HeapProfiles(plane, wiring) if pprof else None
    result = _play(real_stack.Ours(plane), counts, delay=delay, timeout=timeout, heap=heap)
    result.label = f"ours {wiring}"
    return result


def run_upstream(
    binary: Path, counts: Counts, *, reconciles: int, delay: float, timeout: float
) -> Result:
    plane = real_stack.start_upstream(binary, reconciles=reconciles, prefix="ds-busy-peer-")
    return _play(real_stack.Upstream(plane), counts, delay=delay, timeout=timeout)


# --- output --------------------------------------------------------------------------------------


def _mib(kib: int) -> str:
    return f"{kib / 1024:.0f}"


def _by_process(reading: Reading) -> str:
    return ", ".join(f"{name} {_mib(kib)}" for name, kib in reading.by_process_rss_kib.items())


def print_result(result: Result, counts: Counts) -> None:
    created = result.created
    if created is not None:
        reached = "  ".join(
            f"{name} {'NOT REACHED' if at is None else f'{at:.1f} s'}"
            for name, at in created.milestones.items()
        )
        print(f"  create {counts.sets} sets: {reached}")
    if result.empty is not None and result.settled is not None:
        added = result.settled.rss_kib - result.empty.rss_kib
        print(
            f"  sets: controller RSS {_mib(result.empty.rss_kib)} ->"
            f" {_mib(result.settled.rss_kib)} MiB ({1024 * added / counts.sets / MB:.2f} MB per"
            f" set; {_by_process(result.empty)} -> {_by_process(result.settled)})"
        )
    print(f"  idle: controller CPU {result.idle_rate:.3f} s per second")
    print(
        f"  {'phase':<10} {'objects':>7} {'s':>6}  {'controller RSS MiB':<20} {'PSS MiB':<14}"
        f" {'CPU s':>6} {'net':>6}  syncs  by process (RSS MiB after)"
    )
    for phase in result.phases:
        before, after = phase.before, phase.after
        added = phase.rss_delta_bytes / 2**20
        rss = f"{_mib(before.rss_kib)} -> {_mib(after.rss_kib)} ({added:+.0f})"
        pss = f"{_mib(before.pss_kib)} -> {_mib(after.pss_kib)}"
        processes = _by_process(after)
        quiet = "" if phase.quiet else "  NOT QUIET"
        print(
            f"  {phase.name:<10} {phase.objects:>7} {phase.seconds:>6.1f}  {rss:<20} {pss:<14}"
            f" {phase.cpu:>6.2f} {phase.net_cpu:>6.2f}  {phase.syncs:>5.0f}  {processes}{quiet}"
        )
    children = ", ".join(f"{n} {part}" for part, n in result.children.items())
    sizes = ", ".join(f"{label} {size / 1000:.1f}" for label, size in result.sizes.items())
    print(f"  stored JSON, kB: {sizes}")
    if result.moved:
        print(f"  SETS MOVED ({len(result.moved)} differences):")
        for line in result.moved[:10]:
            print(f"    {line}")
    else:
        print(f"  sets: none moved ({result.available} Available; {children} unchanged)")
    if result.profiles is not None:
        heap = result.live_heap
        after = [name for name in heap if name != "idle"]
        added = ", ".join(
            f"{name} {(heap[name] - heap[before]) / MB:+.1f} MB"
            for before, name in zip(["idle", *after], after, strict=False)
        )
        idle = heap["idle"] / MB
        print(f"  Metacontroller live heap after a collection: idle {idle:.1f} MB, {added}")
        print(f"  its heap profiles: {result.profiles}")


def per_thousand(results: Sequence[Result]) -> None:
    """Per 1,000 foreign objects: the controller side's added RSS (MB) and net CPU seconds."""
    names = [phase.name for phase in results[0].phases] if results else []
    if not names:
        return
    print("per 1,000 foreign objects (controller RSS added, MB; CPU net of idle, s):")
    header = "  ".join(f"{name + ' MB':>13} {name + ' CPU':>14}" for name in names)
    width = max(len(result.label) for result in results)
    print(f"  {'':<{width}}  {header}")
    for result in results:
        cells = []
        for name in names:
            phase = result.phase(name)
            if phase is None or not phase.objects:
                cells.append(f"{'-':>13} {'-':>14}")
                continue
            thousands = phase.objects / 1000
            cells.append(
                f"{phase.rss_delta_bytes / MB / thousands:>13.2f}"
                f" {phase.net_cpu / thousands:>14.3f}"
            )
        print(f"  {result.label:<{width}}  {'  '.join(cells)}")


def targets(results: Sequence[Result], peer_result: Result) -> list[str]:
    """The issue's targets that apply to the wirings run: the foreign ControllerRevisions in
    every wiring, the foreign Services where Services are not watched; the missed ones."""
    missed = []
    for result in results:
        wiring = WIRINGS[result.label.removeprefix("ours ")]
        for name in ("revisions", *(() if wiring.services else ("services",))):
            ours, theirs = result.phase(name), peer_result.phase(name)
            if ours is None or theirs is None:
                continue
            scale = TARGET_COUNT / ours.objects
            memory = (ours.rss_delta_bytes - theirs.rss_delta_bytes) * scale / MB
            cpu = (ours.net_cpu - theirs.net_cpu) * scale
            met = memory <= TARGET_MB and cpu <= TARGET_CPU_SECONDS
            print(
                f"  target, {result.label}, {TARGET_COUNT:,} foreign {name}: ours costs"
                f" {memory:+.1f} MB and {cpu:+.2f} CPU s beside upstream's"
                f" (within {TARGET_MB:.0f} MB and {TARGET_CPU_SECONDS:.0f} s):"
                f" {'met' if met else 'MISSED'}"
            )
            if not met:
                missed.append(f"{result.label} {name}")
    return missed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", type=int, default=50, help="Available sets beside the objects")
    parser.add_argument("--services", type=int, default=10_000, help="foreign Services")
    parser.add_argument("--revisions", type=int, default=10_000, help="foreign ControllerRevisions")
    parser.add_argument(
        "--churn", type=int, default=2000, help="ControllerRevisions replaced afterwards"
    )
    parser.add_argument(
        "--per-workload", type=int, default=6, help="ControllerRevisions per foreign workload"
    )
    parser.add_argument("--wirings", default=",".join(WIRINGS), help=", ".join(WIRINGS))
    parser.add_argument("--peer", type=Path, default=None, help="upstream's controller binary")
    parser.add_argument("--peer-reconciles", type=int, default=8)
    parser.add_argument("--delay", type=float, default=0.25, help="LWS readiness delay, seconds")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds to create the sets")
    parser.add_argument("--pprof", action="store_true", help="Metacontroller heap profiles")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    wirings = [name for name in args.wirings.split(",") if name]
    try:
        unknown = [name for name in wirings if name not in WIRINGS]
        if unknown:
            raise ValueError(f"unknown wiring {unknown}")
        counts = Counts(args.sets, args.services, args.revisions, args.churn, args.per_workload)
        if (
            min(counts.sets, counts.per_workload) < 1
            or min(counts.services, counts.revisions, counts.churn) < 0
        ):
            raise ValueError("--sets and --per-workload must be >= 1, the counts >= 0")
        if counts.churn > counts.revisions:
            raise ValueError("--churn replaces revisions: at most --revisions")
    except ValueError as error:
        parser.error(str(error))
    binary: Path | None = args.peer
    if binary is not None and not binary.is_file():
        print(f"upstream's controller: skipped, {binary} does not exist")
        binary = None
    print(
        f"{counts.sets} sets; foreign: {counts.services} Services, {counts.revisions}"
        f" ControllerRevisions ({counts.per_workload} per workload, {counts.workloads}"
        f" StatefulSet owners in {FOREIGN_NAMESPACES} namespaces), {counts.churn} replaced"
    )
    results = []
    for wiring in wirings:
        print(f"ours, wiring {wiring}:")
        started = time.monotonic()
        result = run_ours(wiring, counts, delay=args.delay, timeout=args.timeout, pprof=args.pprof)
        print_result(result, counts)
        print(f"  (run took {time.monotonic() - started:.0f} s)")
        results.append(result)
        sys.stdout.flush()
    peer_result = None
    if binary is not None:
        print(f"upstream ({binary.name}, {args.peer_reconciles} reconciles at once):")
        started = time.monotonic()
        peer_result = run_upstream(
            binary,
            counts,
            reconciles=args.peer_reconciles,
            delay=args.delay,
            timeout=args.timeout,
        )
        print_result(peer_result, counts)
        print(f"  (run took {time.monotonic() - started:.0f} s)")
    else:
        print("upstream's controller: not run (give its binary with --peer PATH to compare)")
    everything = [*results, *([peer_result] if peer_result is not None else [])]
    per_thousand(everything)
    missed = targets(results, peer_result) if peer_result is not None else []
    failed = [r.label for r in everything if not r.completed or r.moved]
    if failed:
        print(f"incomplete or moved: {', '.join(failed)}", file=sys.stderr)
    if missed:
        print(f"targets missed: {', '.join(missed)}", file=sys.stderr)
    return 1 if failed or missed else 0


if __name__ == "__main__":
    sys.exit(main())
