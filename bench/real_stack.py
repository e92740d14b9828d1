"""The whole stack under load: many DisaggregatedSets on a real control plane, side by side with
upstream's Go controller when its binary is given.

    python bench/real_stack.py [--sets 1,100,300] [--profiles default,large] [--delay 0.25]
                               [--external] [--peer PATH [--peer-reconciles 8]]
                               [--pprof [--pprof-seconds 10]]

Each run starts a fresh control plane from `tools/sandbox` (etcd, kube-apiserver, the garbage
collector, Metacontroller and `python -m hooks serve`, the kit installed as `kubectl apply -k .`
installs it; the programs are found as the cluster tests find them; the API server writes an
audit log) and plays the LeaderWorkerSet controller: every LWS reports ready `--delay` seconds
after a change. Then:

- create: N sets (prefill 2 + decode 1 groups, one slice; with `--external`, decode is scaled
  by its RoleScaler) are created at once; the phase ends when every set is Available for its
  generation;
- idle: every set gets an unrelated annotation at once, so each is synced with nothing to change;
  the phase ends 2 s after the controller answered that many more syncs (it should write
  nothing);
- rollout: every set's image changes at once; the phase ends when every set is Available for its
  new generation, only the new revision's LWS remain and each is ready at its replicas.

For each phase it prints the time from the first write to each milestone (the arrival of the
watch event that completed it), the CPU seconds of each process group (from /proc), the hook
calls by hook with their mean latency (the server's own histogram), the syncs per set and how
many of them answered the observed state (`disaggregatedset_sync_unchanged_total`),
Metacontroller's API requests by method (its own metrics) with its writes per set, and the
controller's API requests per set by verb from the audit log. After the phases: each process
group's peak resident memory, two ways: the sum of its processes' peaks (VmHWM, which counts
twice the pages a forked worker shares with gunicorn's arbiter), and the highest sum of their
proportional set sizes sampled every half second (PSS: a shared page counted once across the
processes that share it, close to what the pod's memory cgroup is charged). With one set, the
create and rollout phases are also printed event by event: each watch event of the set, its LWS
and Services, merged with the hook server's log line of each call (with what the call made
Metacontroller write), which shows where the time of a rollout goes.

With `--peer PATH` (upstream's controller, `../shared/peer/README.md`), every set count also runs
on a second fresh control plane with upstream's CRDs and that binary in place of Metacontroller
and the hooks (its webhooks registered, `--max-concurrent-reconciles` from `--peer-reconciles`,
500 requests/s), with the same sets and the same fake LWS controller, right after ours; then a
table of both with the ratio ours / upstream, and at the end the per-set cost by fleet size.
Upstream's reconciles are counted from its log ("Reconciling DisaggregatedSet", one line at the
start of each). Without `--peer`, or when the file is missing, only our stack runs.

With `--pprof`, Metacontroller serves /debug/pprof and the rollout phase is profiled in
consecutive CPU profiles of `--pprof-seconds` each, written to a temporary directory whose files
`go tool pprof -top` reads together.

Metacontroller profiles (its command-line flags):

- default: none (5 workers, 5 API requests/s, burst 10);
- qps: the request rate and burst of `components/metacontroller-scale`, 5 workers;
- large: all flags of `components/metacontroller-scale` (as it patches Metacontroller's install);
- unthrottled: 8 workers, 500 requests/s, burst 500: a rate limit no run here reaches, so the
  CPU decides (the fair setting beside upstream's controller, and the default with `--peer`).

Exit status: 0 when every phase of every run completed within `--timeout`, 1 otherwise, 2 for a
usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import requests
from prometheus_client.parser import text_string_to_metric_families

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench import audit, peer  # noqa: E402 (needs the root on sys.path)
from tests import shared  # noqa: E402 (as above)
from tests.cluster import sets, upstream  # noqa: E402 (as above)
from tools.sandbox import assets, kube, processes  # noqa: E402 (as above)
from tools.sandbox.controlplane import ControlPlane, scale_flags  # noqa: E402 (as above)
from tools.sandbox.lws import FakeLwsController  # noqa: E402 (as above)

JsonObject = dict[str, Any]

NAMESPACE: Final = "bench"
SETTLE_SECONDS: Final = 2.0
PSS_PERIOD_SECONDS: Final = 0.5
CLOCK_TICKS: Final = os.sysconf("SC_CLK_TCK")
# The labels both controllers put on every LWS (the API's, so upstream's too).
LABEL_NAME: Final = "disaggregatedset.x-k8s.io/name"
LABEL_REVISION: Final = "disaggregatedset.x-k8s.io/revision"
PHASES: Final = ("create", "idle", "rollout")


PROFILES: Final[Mapping[str, Callable[[], tuple[str, ...]]]] = {
    "default": lambda: (),
    "qps": lambda: tuple(
        flag for flag in scale_flags(REPO_ROOT) if not flag.startswith("--workers")
    ),
    "large": lambda: scale_flags(REPO_ROOT),
    "unthrottled": lambda: ("--workers=8", "--client-go-qps=500", "--client-go-burst=500"),
}


# --- measuring ---------------------------------------------------------------------------------


def _group_processes(pgid: int) -> Iterator[tuple[Path, list[str]]]:
    """Each process of a process group: its /proc directory and the fields of its stat after
    the command name (skipping processes that exit meanwhile)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid:
            yield Path(f"/proc/{entry}"), fields


def _status_kib(directory: Path, file: str, field: str) -> int:
    """A KiB figure of a /proc file of one process (0 once it has exited)."""
    try:
        lines = (directory / file).read_text().splitlines()
    except OSError:
        return 0
    return sum(int(line.split()[1]) for line in lines if line.startswith(f"{field}:"))


def group_stats(pgid: int) -> tuple[float, int]:
    """CPU seconds (with reaped children) and the summed peak RSS (KiB) of a process group.

    The sum counts pages that a forked worker shares with its parent (gunicorn) twice.
    """
    cpu_ticks, peak_kib = 0, 0
    for directory, fields in _group_processes(pgid):
        cpu_ticks += sum(int(value) for value in fields[11:15])
        peak_kib += _status_kib(directory, "status", "VmHWM")
    return cpu_ticks / CLOCK_TICKS, peak_kib


def group_memory_kib(pgid: int) -> tuple[int, int]:
    """The summed resident memory (VmRSS) and proportional set size (KiB) of a process group's
    processes now."""
    rss, pss = 0, 0
    for directory, _ in _group_processes(pgid):
        rss += _status_kib(directory, "status", "VmRSS")
        pss += _status_kib(directory, "smaps_rollup", "Pss")
    return rss, pss


def _group_pss_kib(pgid: int) -> int:
    """The summed proportional set size (KiB) of a process group's processes now."""
    return sum(
        _status_kib(directory, "smaps_rollup", "Pss") for directory, _ in _group_processes(pgid)
    )


class PssSampler:
    """The highest summed PSS of each named process group, sampled every `PSS_PERIOD_SECONDS`."""

    def __init__(self, groups: Mapping[str, int]) -> None:
        self._groups = dict(groups)
        self.peaks: dict[str, int] = dict.fromkeys(groups, 0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pss", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> dict[str, int]:
        self._stop.set()
        self._thread.join(timeout=10)
        return self.peaks

    def _run(self) -> None:
        while not self._stop.wait(PSS_PERIOD_SECONDS):
            for name, pgid in self._groups.items():
                self.peaks[name] = max(self.peaks[name], _group_pss_kib(pgid))


def samples(url: str) -> list[tuple[str, dict[str, str], float]]:
    """Every sample of a Prometheus text exposition at `url`: (name, labels, value)."""
    text = processes.local_get(url).text
    return [
        (sample.name, sample.labels, sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]


WRITE_METHODS: Final = ("POST", "PUT", "PATCH", "DELETE")


@dataclass(frozen=True)
class HookCounters:
    """Our stack's own counters: the hook server's metrics and Metacontroller's requests."""

    calls: Mapping[str, float]
    seconds: Mapping[str, float]
    unchanged: float
    api_requests: Mapping[str, float]

    @classmethod
    def take(cls, plane: ControlPlane) -> HookCounters:
        calls: dict[str, float] = {}
        seconds: dict[str, float] = {}
        unchanged = 0.0
        for name, labels, value in samples(f"{plane.hook_url}/metrics"):
            if name == "disaggregatedset_hook_duration_seconds_count":
                calls[labels["hook"]] = calls.get(labels["hook"], 0) + value
            elif name == "disaggregatedset_hook_duration_seconds_sum":
                seconds[labels["hook"]] = seconds.get(labels["hook"], 0) + value
            elif name == "disaggregatedset_sync_unchanged_total":
                unchanged += value
        requests_: dict[str, float] = {}
        for name, labels, value in samples(plane.metacontroller_metrics):
            if name == "rest_client_requests_total":
                method = labels.get("method", "?")
                requests_[method] = requests_.get(method, 0) + value
        return cls(calls, seconds, unchanged, requests_)


@dataclass(frozen=True)
class HookPhase:
    """What our stack's own counters say about one phase."""

    calls: Mapping[str, float]
    mean_ms: Mapping[str, float]
    unchanged: float
    api_requests: Mapping[str, float]

    @classmethod
    def between(cls, before: HookCounters, after: HookCounters) -> HookPhase:
        calls = {hook: after.calls[hook] - before.calls.get(hook, 0) for hook in after.calls}
        mean = {
            hook: 1000 * (after.seconds[hook] - before.seconds.get(hook, 0)) / count
            for hook, count in calls.items()
            if count
        }
        requests_ = {
            method: count - before.api_requests.get(method, 0)
            for method, count in after.api_requests.items()
            if count - before.api_requests.get(method, 0)
        }
        return cls(
            calls={hook: count for hook, count in calls.items() if count},
            mean_ms=mean,
            unchanged=after.unchanged - before.unchanged,
            api_requests=requests_,
        )


@dataclass(frozen=True)
class Snapshot:
    """Counters at one moment; phases are differences of two snapshots."""

    wall: float
    cpu: Mapping[str, float]
    peak_kib: Mapping[str, int]
    syncs: float
    requests: audit.Requests
    hooks: HookCounters | None

    @classmethod
    def take(cls, stack: Stack) -> Snapshot:
        wall = time.time()
        cpu, peak = {}, {}
        for name in stack.processes:
            cpu[name], peak[name] = group_stats(stack.plane.running[name].pid)
        return cls(wall, cpu, peak, stack.syncs(), stack.audit.read(), stack.hook_counters())


@dataclass(frozen=True)
class Phase:
    name: str
    milestones: Mapping[str, float | None]
    """Seconds from the phase's start to each milestone; None when it was not reached."""
    cpu: Mapping[str, float]
    syncs: float
    requests: audit.Requests
    """The controller's API requests (from the audit log)."""
    hooks: HookPhase | None

    @property
    def completed(self) -> bool:
        return all(value is not None for value in self.milestones.values())


def phase_between(
    name: str, reached: Mapping[str, float | None], before: Snapshot, after: Snapshot
) -> Phase:
    return Phase(
        name=name,
        milestones={
            milestone: None if at is None else at - before.wall for milestone, at in reached.items()
        },
        cpu={process: after.cpu[process] - before.cpu[process] for process in after.cpu},
        syncs=after.syncs - before.syncs,
        requests=after.requests.minus(before.requests),
        hooks=(
            HookPhase.between(before.hooks, after.hooks)
            if before.hooks is not None and after.hooks is not None
            else None
        ),
    )


class Profiler:
    """Consecutive CPU profiles of a Go program's /debug/pprof while a phase runs."""

    def __init__(self, url: str, directory: Path, prefix: str, seconds: int) -> None:
        self._url, self._directory, self._prefix, self._seconds = url, directory, prefix, seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pprof", daemon=True)
        self.files: list[Path] = []
        self.errors: list[str] = []

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> list[Path]:
        """Wait for the profile under way (up to `seconds`); the files written."""
        self._stop.set()
        self._thread.join(timeout=self._seconds + 30)
        return self.files

    def _run(self) -> None:
        with requests.Session() as session:
            session.trust_env = False
            while not self._stop.is_set():
                try:
                    answer = session.get(
                        f"{self._url}/profile",
                        params={"seconds": str(self._seconds)},
                        timeout=self._seconds + 30,
                    )
                    answer.raise_for_status()
                except requests.RequestException as error:
                    self.errors.append(str(error))
                    return
                path = self._directory / f"{self._prefix}-{len(self.files):02d}.pb.gz"
                path.write_bytes(answer.content)
                self.files.append(path)


# --- the two stacks ------------------------------------------------------------------------------


class Stack:
    """One implementation on its own control plane: what runs, and how it is counted."""

    label: str
    controllers: tuple[str, ...]
    """The process groups of the controller side (CPU and memory are summed over them)."""
    processes: tuple[str, ...]

    def __init__(self, plane: ControlPlane, user_agent: str) -> None:
        if plane.audit_log is None:
            raise ValueError("the bench needs the API server's audit log")
        self.plane = plane
        self.audit = audit.AuditCounter(plane.audit_log, user_agent)

    def syncs(self) -> float:
        """Syncs (ours) or reconciles (upstream's) so far."""
        raise NotImplementedError

    def hook_counters(self) -> HookCounters | None:
        return None

    def calls(self, since: float, until: float) -> list[Event]:
        """The controller's own log of its work between `since` and `until`, for a timeline."""
        raise NotImplementedError


class Ours(Stack):
    label = "ours"
    controllers = ("metacontroller", "hooks")
    processes = (*controllers, "kube-apiserver", "etcd")

    def __init__(self, plane: ControlPlane) -> None:
        super().__init__(plane, user_agent="metacontroller")

    def syncs(self) -> float:
        counters = HookCounters.take(self.plane)
        return counters.calls.get("sync", 0)

    def hook_counters(self) -> HookCounters:
        return HookCounters.take(self.plane)

    def calls(self, since: float, until: float) -> list[Event]:
        return hook_calls(self.plane.running["hooks"].log, since, until)


class Upstream(Stack):
    label = "upstream"
    controllers = (upstream.NAME,)
    processes = (*controllers, "kube-apiserver", "etcd")

    def __init__(self, plane: ControlPlane) -> None:
        super().__init__(plane, user_agent=upstream.USER_AGENT)
        self._reconciles = peer.ReconcileCounter(plane.running[upstream.NAME].log)

    def syncs(self) -> float:
        return self._reconciles.read()[0]

    def calls(self, since: float, until: float) -> list[Event]:
        log = self.plane.running[upstream.NAME].log
        return [
            Event(at, "peer", name, what) for at, name, what in peer.log_events(log, since, until)
        ]


# --- watching --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """One watch event or logged controller step, at wall-clock time `at`."""

    at: float
    source: str
    name: str
    what: str


class Recorder:
    """Watches the sets, their LWS and Services; waits on what it saw and keeps a timeline.

    Completion times are the arrival times of the watch events that completed a phase, so they
    are not rounded to a polling interval.
    """

    def __init__(self, client: kube.Client) -> None:
        self._condition = threading.Condition()
        self.objects: dict[str, dict[str, JsonObject]] = {"ds": {}, "lws": {}, "svc": {}}
        self.events: list[Event] = []
        self._watches = [
            kube.Watch(client, resource, self._handler(source), namespace=NAMESPACE)
            for source, resource in (
                ("ds", kube.DISAGGREGATED_SETS),
                ("lws", kube.LWS),
                ("svc", kube.SERVICES),
            )
        ]

    def _handler(self, source: str) -> Callable[[JsonObject], None]:
        def on_event(event: JsonObject) -> None:
            obj = event["object"]
            name = obj["metadata"]["name"]
            with self._condition:
                previous = self.objects[source].get(name)
                if event["type"] == "DELETED":
                    self.objects[source].pop(name, None)
                else:
                    self.objects[source][name] = obj
                what = _describe_change(source, event["type"], previous, obj)
                self.events.append(Event(time.time(), source, name, what))
                self._condition.notify_all()

        return on_event

    def wait(self, done: Callable[[Recorder], bool], timeout: float) -> float | None:
        """The wall time of the event after which `done` held, or None after `timeout`."""
        deadline = time.monotonic() + timeout
        with self._condition:
            while not done(self):
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._condition.wait(left)
            return self.events[-1].at if self.events else time.time()

    def revisions(self) -> dict[str, str]:
        """Each set's name to the revision label of its LWS (the last seen, with several)."""
        with self._condition:
            return {
                lws["metadata"]["labels"][LABEL_NAME]: lws["metadata"]["labels"][LABEL_REVISION]
                for lws in self.objects["lws"].values()
            }

    def stop(self) -> None:
        for watch in self._watches:
            watch.stop()


def _describe_change(source: str, kind: str, previous: JsonObject | None, obj: JsonObject) -> str:
    if kind == "DELETED":
        return "deleted"
    if source == "ds":
        status = obj.get("status") or {}
        reasons = ",".join(
            f"{c['type']}={c['status']}" for c in status.get("conditions", []) if "type" in c
        )
        return f"{kind.lower()} gen {obj['metadata']['generation']} status {reasons or '-'}"
    if source == "svc":
        return kind.lower()
    spec = obj.get("spec", {}).get("replicas", 1)
    ready = (obj.get("status") or {}).get("readyReplicas", 0)
    if previous is None:
        return f"{kind.lower()} replicas {spec}"
    old_spec = previous.get("spec", {}).get("replicas", 1)
    old_ready = (previous.get("status") or {}).get("readyReplicas", 0)
    changes = []
    if old_spec != spec:
        changes.append(f"replicas {old_spec}->{spec}")
    if old_ready != ready:
        changes.append(f"ready {old_ready}->{ready}")
    return ", ".join(changes) or "metadata"


def hook_calls(log: Path, since: float, until: float) -> list[Event]:
    """The hook server's log lines for calls that ended between `since` and `until`."""
    calls = []
    for line in log.read_text(errors="replace").splitlines():
        if not line.startswith("{"):
            continue
        entry = json.loads(line)
        if "hook" not in entry:
            continue
        at = datetime.fromisoformat(entry["time"].replace("Z", "+00:00")).timestamp()
        if since <= at <= until + 1:
            described = entry["hook"]
            writes = entry.get("writes")
            if isinstance(writes, dict):
                changes = " ".join(f"{key}={value}" for key, value in writes.items() if value)
                described += f" {changes or 'unchanged'}"
            calls.append(Event(at, "hook", entry.get("object", ""), described))
    return calls


# --- the workload ------------------------------------------------------------------------------


def _set(name: str, image: str, *, external: bool = False) -> JsonObject:
    manifest = sets.small_set(NAMESPACE, image=image, external="decode" if external else None)
    manifest["metadata"]["name"] = name
    return manifest


def _all_lws(count: int, *, besides: Mapping[str, str]) -> Callable[[Recorder], bool]:
    """Every set has its two LWS at a revision other than `besides` (its old one)."""

    def done(recorder: Recorder) -> bool:
        fresh = [
            lws
            for lws in recorder.objects["lws"].values()
            if lws["metadata"]["labels"].get(LABEL_REVISION)
            != besides.get(lws["metadata"]["labels"].get(LABEL_NAME, ""))
        ]
        return len(fresh) == 2 * count

    return done


def _all_available(count: int) -> Callable[[Recorder], bool]:
    def done(recorder: Recorder) -> bool:
        listed = recorder.objects["ds"].values()
        return len(listed) == count and all(sets.is_available(ds) for ds in listed)

    return done


def _is_ready(lws: JsonObject) -> bool:
    replicas: int = lws.get("spec", {}).get("replicas", 1)
    ready: int | None = (lws.get("status") or {}).get("readyReplicas")
    return ready == replicas


def _rolled(old: Mapping[str, str]) -> Callable[[Recorder], bool]:
    """Every set Available for its generation; only new-revision LWS, two per set, all ready."""

    def done(recorder: Recorder) -> bool:
        if not _all_available(len(old))(recorder) or len(recorder.objects["lws"]) != 2 * len(old):
            return False
        return all(
            _is_ready(lws)
            and lws["metadata"]["labels"].get(LABEL_REVISION)
            != old[lws["metadata"]["labels"][LABEL_NAME]]
            for lws in recorder.objects["lws"].values()
        )

    return done


@dataclass(frozen=True)
class Run:
    label: str
    """"ours" or "upstream"."""
    controllers: tuple[str, ...]
    phases: list[Phase]
    timelines: dict[str, list[Event]]
    """With one set: the create and rollout phases' watch events and controller steps."""
    peaks: Mapping[str, int]
    pss_peaks: Mapping[str, int]
    profiles: list[Path] = field(default_factory=list)

    def phase(self, name: str) -> Phase | None:
        return next((phase for phase in self.phases if phase.name == name), None)

    @property
    def controller_peak_kib(self) -> int:
        return sum(self.peaks[name] for name in self.controllers)

    @property
    def controller_pss_kib(self) -> int:
        return sum(self.pss_peaks[name] for name in self.controllers)


class Workload:
    """The sets of one run on one stack, and what was measured so far."""

    def __init__(
        self,
        stack: Stack,
        recorder: Recorder,
        count: int,
        timeout: float,
        external: bool,
        profiler: Profiler | None = None,
    ):
        self.stack, self.recorder, self.count, self.timeout = stack, recorder, count, timeout
        self.external = external
        self.profiler = profiler
        self.phases: list[Phase] = []
        self.timelines: dict[str, list[Event]] = {}

    def _measure(
        self,
        name: str,
        act: Callable[[], None],
        milestones: Mapping[str, Callable[[], float | None]],
        *,
        profiled: bool = False,
    ) -> bool:
        """Run `act`, wait for each milestone in turn, and record the phase; whether all came."""
        profiler = self.profiler if profiled else None
        before = Snapshot.take(self.stack)
        started = len(self.recorder.events)
        if profiler is not None:
            profiler.start()
        act()
        reached = {}
        for milestone, wait in milestones.items():
            reached[milestone] = wait()
        after = Snapshot.take(self.stack)
        if profiler is not None:
            profiler.stop()
        self.phases.append(phase_between(name, reached, before, after))
        if self.count == 1 and name != "idle":
            calls = self.stack.calls(before.wall, after.wall)
            watched = self.recorder.events[started:]
            self.timelines[name] = sorted([*watched, *calls], key=lambda event: event.at)
        return self.phases[-1].completed

    def _each(self, change: Callable[[kube.Client, str], None]) -> Callable[[], None]:
        def act() -> None:
            for index in range(self.count):
                change(self.stack.plane.client, f"llm-{index:04d}")

        return act

    def create(self) -> bool:
        def create(client: kube.Client, name: str) -> None:
            client.create(
                kube.DISAGGREGATED_SETS, _set(name, sets.IMAGE_V1, external=self.external)
            )

        wait = self.recorder.wait
        return self._measure(
            "create",
            self._each(create),
            {
                "all LWS": lambda: wait(_all_lws(self.count, besides={}), self.timeout),
                "Available": lambda: wait(_all_available(self.count), self.timeout),
            },
        )

    def idle(self) -> bool:
        """An annotation on every set: a sync each that has nothing to change."""

        def touch(client: kube.Client, name: str) -> None:
            patch = {"metadata": {"annotations": {"example.com/touched": str(time.time())}}}
            client.patch(kube.DISAGGREGATED_SETS, name, patch, namespace=NAMESPACE)

        synced = self.stack.syncs()
        return self._measure(
            "idle",
            self._each(touch),
            {"synced": lambda: _wait_syncs(self.stack, synced + self.count, self.timeout)},
        )

    def rollout(self) -> bool:
        old = self.recorder.revisions()

        def upgrade(client: kube.Client, name: str) -> None:
            spec = _set(name, sets.IMAGE_V2, external=self.external)["spec"]
            client.patch(kube.DISAGGREGATED_SETS, name, {"spec": spec}, namespace=NAMESPACE)

        wait = self.recorder.wait
        return self._measure(
            "rollout",
            self._each(upgrade),
            {
                "new LWS": lambda: wait(_all_lws(self.count, besides=old), self.timeout),
                "rolled out": lambda: wait(_rolled(old), self.timeout),
            },
            profiled=True,
        )


def _wait_syncs(stack: Stack, calls: float, timeout: float) -> float | None:
    """The time by which the controller made `calls` syncs in all, then was quiet for a while."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if stack.syncs() >= calls:
            reached = time.time()
            time.sleep(SETTLE_SECONDS)  # let any write they cause happen within the phase
            return reached
        time.sleep(0.1)
    return None


WATCHED: Final = (kube.DISAGGREGATED_SETS, kube.LWS, kube.SERVICES)
WATCH_READY_TIMEOUT_SECONDS: Final = 60.0


def wait_for_watches(plane: ControlPlane) -> None:
    """Until the API server serves watches of the watched kinds.

    Right after a CRD is established, its watch cache is still initialising and a watch is
    answered 429 ("storage is (re)initializing"); the bench's watches must not start before.
    """
    with requests.Session() as session:
        session.trust_env = False
        session.headers["Authorization"] = f"Bearer {plane.token}"
        session.verify = str(plane.workdir / "ca.crt")
        params = {"watch": "1", "timeoutSeconds": "1", "resourceVersion": "0"}
        deadline = time.monotonic() + WATCH_READY_TIMEOUT_SECONDS
        for resource in WATCHED:
            url = plane.server + resource.path(namespace=NAMESPACE)
            while session.get(url, params=params, timeout=10).status_code != 200:
                if time.monotonic() > deadline:
                    raise processes.ProcessError(f"no watch of {resource.plural} is served")
                time.sleep(0.2)


def prepare(plane: ControlPlane) -> None:
    """The namespace, and the API server's one-time compilation of the set CRD's rules."""
    plane.client.create(
        kube.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    )
    # The API server's first DisaggregatedSet write compiles the CRD's validation rules (about 2 s
    # here); a dry run pays that before anything is timed.
    plane.client.create(kube.DISAGGREGATED_SETS, _set("llm-warm-up", sets.IMAGE_V1), dry_run=True)


def _play(
    stack: Stack,
    count: int,
    *,
    delay: float,
    timeout: float,
    external: bool,
    profiler: Profiler | None = None,
) -> Run:
    """Create `count` sets on a started stack, sync them idle, then roll them all; stop it."""
    plane = stack.plane
    controller = FakeLwsController(plane.client, delay=delay)
    try:
        wait_for_watches(plane)
        controller.start()
        prepare(plane)
        recorder = Recorder(plane.client)
        sampler = PssSampler({name: plane.running[name].pid for name in stack.processes})
        sampler.start()
        try:
            workload = Workload(stack, recorder, count, timeout, external, profiler)
            if workload.create():
                time.sleep(SETTLE_SECONDS)
                workload.idle()
                workload.rollout()
            if controller.errors:
                print(f"  fake LWS controller errors: {controller.errors[:3]}")
            return Run(
                stack.label,
                stack.controllers,
                workload.phases,
                workload.timelines,
                Snapshot.take(stack).peak_kib,
                sampler.stop(),
                profiler.files if profiler is not None else [],
            )
        finally:
            sampler.stop()
            recorder.stop()
    finally:
        controller.stop()
        plane.stop()


def run(
    count: int,
    flags: Sequence[str],
    *,
    delay: float,
    timeout: float,
    external: bool = False,
    pprof_seconds: int | None = None,
) -> Run:
    """Our stack on a fresh control plane: create `count` sets, sync them idle, roll them all.

    With `pprof_seconds`, the rollout phase is profiled in CPU profiles of that length.
    """
    workdir = Path(tempfile.mkdtemp(prefix="ds-bench-"))
    plane = ControlPlane.start(
        assets.find_assets(fallbacks=shared.testcluster_dirs()),
        workdir,
        kit=REPO_ROOT,
        metacontroller_flags=flags,
        pprof=pprof_seconds is not None,
        audit=True,
    )
    profiler = None
    if pprof_seconds is not None:
        directory = Path(tempfile.mkdtemp(prefix="ds-bench-pprof-"))
        profiler = Profiler(
            plane.metacontroller_pprof, directory, f"metacontroller-{count}-rollout", pprof_seconds
        )
    return _play(
        Ours(plane), count, delay=delay, timeout=timeout, external=external, profiler=profiler
    )


def run_upstream(
    count: int,
    binary: Path,
    *,
    reconciles: int,
    delay: float,
    timeout: float,
    external: bool = False,
) -> Run:
    """Upstream's controller on a fresh control plane, with the same workload as `run`."""
    plane = start_upstream(binary, reconciles=reconciles, prefix="ds-bench-peer-")
    return _play(Upstream(plane), count, delay=delay, timeout=timeout, external=external)


def start_upstream(binary: Path, *, reconciles: int, prefix: str) -> ControlPlane:
    """A bare control plane (upstream's CRDs, an audit log, its work directory named from
    `prefix`) with upstream's controller running; stopped again when the controller fails to
    start."""
    plane = ControlPlane.start_bare(
        assets.find_assets(fallbacks=shared.testcluster_dirs()),
        Path(tempfile.mkdtemp(prefix=prefix)),
        crds=upstream.CRDS,
        audit=True,
    )
    try:
        upstream.start(plane, binary, max_concurrent_reconciles=reconciles)
    except BaseException:
        plane.stop()
        raise
    return plane


# --- output ------------------------------------------------------------------------------------


def _print_peaks(peaks: Mapping[str, int], pss_peaks: Mapping[str, int]) -> None:
    print(
        "  peak memory: " + ", ".join(f"{name} {kib / 1024:.0f} MiB" for name, kib in peaks.items())
    )
    print(
        "  peak PSS:    "
        + ", ".join(f"{name} {kib / 1024:.0f} MiB" for name, kib in pss_peaks.items())
    )


def _verbs(requests_: audit.Requests, count: int) -> str:
    verbs = requests_.by_verb()
    ordered = [verb for verb in audit.VERBS if verb in verbs] + sorted(
        verb for verb in verbs if verb not in audit.VERBS
    )
    listed = ", ".join(f"{verb} {verbs[verb] / count:.2f}" for verb in ordered)
    return (
        f"{requests_.total / count:.2f} ({listed or 'none'});"
        f" 409 conflicts {requests_.conflicts / count:.2f}"
    )


def _print_phase(count: int, run_: Run, phase: Phase) -> None:
    reached = "  ".join(
        f"{milestone} {'NOT REACHED' if at is None else f'{at:.2f} s'}"
        for milestone, at in phase.milestones.items()
    )
    cpu = "  ".join(f"{name} {seconds:.1f}" for name, seconds in phase.cpu.items())
    controller = sum(phase.cpu[name] for name in run_.controllers)
    print(f"  {phase.name:<8} {reached}")
    print(f"           CPU s: {cpu}  (controller: {' + '.join(run_.controllers)} {controller:.1f})")
    hooks = phase.hooks
    if hooks is not None:
        calls = ", ".join(
            f"{hook} {int(n)} ({hooks.mean_ms.get(hook, 0):.1f} ms)"
            for hook, n in sorted(hooks.calls.items())
        )
        syncs = hooks.calls.get("sync", 0)
        changing = syncs - hooks.unchanged
        writes = sum(hooks.api_requests.get(method, 0) for method in WRITE_METHODS)
        methods = ", ".join(
            f"{method} {int(n)}" for method, n in sorted(hooks.api_requests.items())
        )
        print(f"           hook calls: {calls}")
        per_pass = f"{syncs / changing:.1f}" if changing else "-"
        print(
            f"           syncs per set {syncs / count:.1f}: {changing / count:.1f} passes that"
            f" changed something, {hooks.unchanged / count:.1f} answered the observed state;"
            f" {per_pass} syncs per pass"
        )
        print(
            f"           Metacontroller API requests: {methods};"
            f" writes per set {writes / count:.1f}"
        )
    else:
        print(f"           reconciles per set {phase.syncs / count:.1f}")
    print(f"           API requests per set (audit log): {_verbs(phase.requests, count)}")
    by_resource = sorted(phase.requests.sent.items(), key=lambda item: (-item[1], item[0]))
    listed = ", ".join(f"{verb} {resource} {n / count:.2f}" for (verb, resource), n in by_resource)
    print(f"             by resource: {listed or 'none'}")


def _print_timeline(name: str, timeline: Sequence[Event]) -> None:
    if not timeline:
        return
    print(f"  {name}, event by event (s from the first; a log line is written as its step ends):")
    first = timeline[0].at
    for event in timeline:
        print(f"    {event.at - first:7.3f}  {event.source:<4} {event.name:<34} {event.what}")


def _print_run(count: int, result: Run) -> bool:
    """The run's phases, peaks and timelines; whether every phase completed."""
    for phase in result.phases:
        _print_phase(count, result, phase)
    _print_peaks(result.peaks, result.pss_peaks)
    for name, timeline in result.timelines.items():
        _print_timeline(name, timeline)
    if result.profiles:
        print(f"  Metacontroller CPU profiles of the rollout: {len(result.profiles)} files in")
        print(f"    {result.profiles[0].parent}")
        print(f"    read with: go tool pprof -top {result.profiles[0].parent}/*.pb.gz")
    return len(result.phases) == len(PHASES) and all(phase.completed for phase in result.phases)


# The side-by-side table: (row label, value of a run for `count` sets, format).
def _milestone(phase: str, milestone: str) -> Callable[[Run, int], float | None]:
    def value(run_: Run, count: int) -> float | None:
        found = run_.phase(phase)
        return None if found is None else found.milestones.get(milestone)

    return value


def _controller_cpu(phase: str, *, per_set: bool = False) -> Callable[[Run, int], float | None]:
    def value(run_: Run, count: int) -> float | None:
        found = run_.phase(phase)
        if found is None:
            return None
        seconds = sum(found.cpu[name] for name in run_.controllers)
        return 1000 * seconds / count if per_set else seconds

    return value


def _syncs(phase: str) -> Callable[[Run, int], float | None]:
    def value(run_: Run, count: int) -> float | None:
        found = run_.phase(phase)
        return None if found is None else found.syncs / count

    return value


def _requests(phase: str, verb: str | None = None) -> Callable[[Run, int], float | None]:
    """API requests per set in `phase`: of `verb`, all (None), "writes" or "409"."""

    def value(run_: Run, count: int) -> float | None:
        found = run_.phase(phase)
        if found is None:
            return None
        requests_ = found.requests
        if verb is None:
            return requests_.total / count
        if verb == "writes":
            return requests_.writes / count
        if verb == "409":
            return requests_.conflicts / count
        return requests_.by_verb().get(verb, 0) / count

    return value


Row = tuple[str, Callable[[Run, int], float | None], str]


def _comparison_rows(ours: Run, upstream: Run) -> list[Row]:
    rows: list[Row] = [
        ("create: all LWS, s", _milestone("create", "all LWS"), ".2f"),
        ("create: Available, s", _milestone("create", "Available"), ".2f"),
        ("rollout: new LWS, s", _milestone("rollout", "new LWS"), ".2f"),
        ("rollout: rolled out, s", _milestone("rollout", "rolled out"), ".2f"),
    ]
    for phase in PHASES:
        rows.append((f"controller CPU, {phase}, s", _controller_cpu(phase), ".2f"))
    for phase in PHASES:
        rows.append(
            (f"controller CPU, {phase}, ms/set", _controller_cpu(phase, per_set=True), ".1f")
        )
    rows.append(
        ("peak RSS, controller side, MiB", lambda run_, _: run_.controller_peak_kib / 1024, ".0f")
    )
    rows.append(
        ("peak PSS, controller side, MiB", lambda run_, _: run_.controller_pss_kib / 1024, ".0f")
    )
    for phase in PHASES:
        rows.append((f"syncs/reconciles per set, {phase}", _syncs(phase), ".2f"))
    for phase in PHASES:
        verbs = set()
        for run_ in (ours, upstream):
            found = run_.phase(phase)
            if found is not None:
                verbs |= set(found.requests.by_verb())
        ordered = [verb for verb in audit.VERBS if verb in verbs] + sorted(verbs - set(audit.VERBS))
        rows.append((f"API requests/set, {phase}, all", _requests(phase), ".2f"))
        rows += [
            (f"API requests/set, {phase}, {verb}", _requests(phase, verb), ".2f")
            for verb in ordered
        ]
        rows.append((f"API requests/set, {phase}, 409 answers", _requests(phase, "409"), ".2f"))
    return rows


def _cell(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _ratio(ours: float | None, upstream: float | None) -> str:
    if ours is None or upstream is None or upstream == 0:
        return "-"
    return f"{ours / upstream:.2f}"


def print_comparison(count: int, profile: str, ours: Run, upstream: Run) -> None:
    """Both stacks' figures for `count` sets, and ours / upstream."""
    rows = _comparison_rows(ours, upstream)
    width = max(len(label) for label, _, _ in rows)
    print(f"{count} sets, side by side (Metacontroller {profile}; ratio = ours / upstream):")
    print(f"  {'':<{width}}  {'ours':>9}  {'upstream':>9}  {'ratio':>6}")
    for label, value, spec in rows:
        mine, theirs = value(ours, count), value(upstream, count)
        print(
            f"  {label:<{width}}  {_cell(mine, spec):>9}  {_cell(theirs, spec):>9}"
            f"  {_ratio(mine, theirs):>6}"
        )


def print_growth(results: Sequence[tuple[int, str, Run]]) -> None:
    """Per-set cost by fleet size: it should stay flat (or fall) as the fleet grows."""
    columns: list[tuple[str, Callable[[Run, int], float | None], str]] = [
        ("rolled out s", _milestone("rollout", "rolled out"), ".1f"),
        ("CPU create", _controller_cpu("create", per_set=True), ".1f"),
        ("CPU idle", _controller_cpu("idle", per_set=True), ".1f"),
        ("CPU rollout", _controller_cpu("rollout", per_set=True), ".1f"),
        ("req create", _requests("create"), ".1f"),
        ("req idle", _requests("idle"), ".1f"),
        ("req rollout", _requests("rollout"), ".1f"),
        ("syncs create", _syncs("create"), ".1f"),
        ("syncs rollout", _syncs("rollout"), ".1f"),
    ]
    print(
        "per-set cost by fleet size (controller CPU ms per set, API requests per set from the"
        " audit log, syncs or reconciles per set):"
    )
    header = "  ".join(f"{title:>{max(len(title), 7)}}" for title, _, _ in columns)
    width = max(len(name) for _, name, _ in results)
    print(f"  {'sets':>5}  {'stack':<{width}}  {header}")
    for count, name, result in results:
        cells = "  ".join(
            f"{_cell(value(result, count), spec):>{max(len(title), 7)}}"
            for title, value, spec in columns
        )
        print(f"  {count:>5}  {name:<{width}}  {cells}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default="1,100,300", help="comma-separated numbers of sets")
    parser.add_argument(
        "--profiles",
        default=None,
        help=f"comma-separated: {', '.join(PROFILES)} (default: default,large; with --peer,"
        " unthrottled)",
    )
    parser.add_argument("--delay", type=float, default=0.25, help="LWS readiness delay, seconds")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per phase")
    parser.add_argument(
        "--external",
        action="store_true",
        help="decode scaled by its RoleScaler (scaling: External): one scaler per set",
    )
    parser.add_argument(
        "--peer",
        type=Path,
        default=None,
        help="upstream's controller binary (../shared/peer): run it on the same sets too",
    )
    parser.add_argument(
        "--peer-reconciles",
        type=int,
        default=8,
        help="the peer's --max-concurrent-reconciles (8: as many as Metacontroller's workers)",
    )
    parser.add_argument(
        "--pprof", action="store_true", help="profile Metacontroller's CPU during each rollout"
    )
    parser.add_argument(
        "--pprof-seconds", type=int, default=10, help="length of each consecutive CPU profile"
    )
    args = parser.parse_args(argv)
    # A SIGTERM (`timeout`, a job's cancel) unwinds like Ctrl-C, so every control plane stops.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        counts = [int(value) for value in args.sets.split(",")]
        default_profiles = "unthrottled" if args.peer is not None else "default,large"
        profiles = (args.profiles or default_profiles).split(",")
        unknown = [name for name in profiles if name not in PROFILES]
        if unknown or any(count < 1 for count in counts):
            raise ValueError(f"unknown profile {unknown}" if unknown else "sets must be >= 1")
        if args.pprof_seconds < 1 or args.peer_reconciles < 1:
            raise ValueError("--pprof-seconds and --peer-reconciles must be >= 1")
    except ValueError as error:
        parser.error(str(error))
    binary: Path | None = args.peer
    if binary is None:
        print("upstream's controller: not run (give its binary with --peer PATH to compare)")
    elif not binary.is_file():
        print(f"upstream's controller: skipped, {binary} does not exist")
        binary = None
    all_done = True
    growth: list[tuple[int, str, Run]] = []
    for count in counts:
        for profile in profiles:
            flags = PROFILES[profile]()
            print(
                f"{count} sets, ours, Metacontroller {profile} ({' '.join(flags) or 'no flags'}):"
            )
            started = time.monotonic()
            ours = run(
                count,
                flags,
                delay=args.delay,
                timeout=args.timeout,
                external=args.external,
                pprof_seconds=args.pprof_seconds if args.pprof else None,
            )
            all_done = _print_run(count, ours) and all_done
            print(f"  (run took {time.monotonic() - started:.0f} s)")
            growth.append((count, f"ours {profile}" if len(profiles) > 1 else "ours", ours))
            sys.stdout.flush()
        if binary is None:
            continue
        print(f"{count} sets, upstream ({binary.name}, {args.peer_reconciles} reconciles at once):")
        started = time.monotonic()
        upstream = run_upstream(
            count,
            binary,
            reconciles=args.peer_reconciles,
            delay=args.delay,
            timeout=args.timeout,
            external=args.external,
        )
        all_done = _print_run(count, upstream) and all_done
        print(f"  (run took {time.monotonic() - started:.0f} s)")
        for profile, (_, _, result) in zip(profiles, growth[-len(profiles) :], strict=True):
            print_comparison(count, profile, result, upstream)
        growth.append((count, "upstream", upstream))
        sys.stdout.flush()
    if len(growth) > 1:
        print_growth(growth)
    return 0 if all_done else 1


if __name__ == "__main__":
    sys.exit(main())
