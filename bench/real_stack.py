"""The whole stack under load: many DisaggregatedSets on a real control plane.

    python bench/real_stack.py [--sets 1,100,300] [--profiles default,large] [--delay 0.25]
                               [--external]

Each run starts a fresh control plane from `tests/cluster` (etcd, kube-apiserver, the garbage
collector, Metacontroller and `python -m hooks serve`, the kit installed as `kubectl apply -k .`
installs it; the programs are found as the cluster tests find them) and plays the
LeaderWorkerSet controller: every LWS reports ready `--delay` seconds after a change. Then:

- create: N sets (prefill 2 + decode 1 groups, one slice; with `--external`, decode is scaled
  by its RoleScaler) are created at once; the phase ends when every set is Available for its
  generation;
- idle: every set gets an unrelated annotation at once, so each is synced with nothing to change;
  the phase ends 2 s after the hook answered that many syncs (Metacontroller should write nothing);
- rollout: every set's image changes at once; the phase ends when every set is Available at a
  new revision and only the new revision's LWS remain.

For each phase it prints the time from the first write to each milestone (the arrival of the
watch event that completed it), the CPU seconds of Metacontroller, the hook server,
kube-apiserver and etcd (from /proc, whole process groups), the hook calls by hook with their
mean latency (the server's own histogram), the syncs per set and how many of them answered the
observed state (`disaggregatedset_sync_unchanged_total`), and Metacontroller's API requests by
method with its writes per set. After the phases: each process's peak resident memory. With one
set, the create and rollout phases are also printed event by event: each watch event of the
set, its LWS and Services, merged with the hook server's log line of each call (with what the
call made Metacontroller write), which shows where the time of a rollout goes.

Metacontroller profiles (its command-line flags):

- default: none (5 workers, 5 API requests/s, burst 10);
- qps: the request rate and burst of `components/metacontroller-scale`, 5 workers;
- large: all flags of `components/metacontroller-scale` (as it patches Metacontroller's install);
- unthrottled: 8 workers, 500 requests/s, burst 500: a rate limit no run here reaches, so the
  CPU decides.

Exit status: 0 when every phase of every run completed within `--timeout`, 1 otherwise, 2 for a
usage error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from prometheus_client.parser import text_string_to_metric_families

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from hooks import api  # noqa: E402
from tests.cluster import assets, kube, processes, sets  # noqa: E402 (needs the root on sys.path)
from tests.cluster.controlplane import ControlPlane, scale_flags  # noqa: E402
from tests.cluster.lws import FakeLwsController  # noqa: E402

JsonObject = dict[str, Any]

PROCESSES: Final = ("metacontroller", "hooks", "kube-apiserver", "etcd")
NAMESPACE: Final = "bench"
SETTLE_SECONDS: Final = 2.0
CLOCK_TICKS: Final = os.sysconf("SC_CLK_TCK")


PROFILES: Final[Mapping[str, Callable[[], tuple[str, ...]]]] = {
    "default": lambda: (),
    "qps": lambda: tuple(flag for flag in scale_flags() if not flag.startswith("--workers")),
    "large": scale_flags,
    "unthrottled": lambda: ("--workers=8", "--client-go-qps=500", "--client-go-burst=500"),
}


# --- measuring ---------------------------------------------------------------------------------


def _group_stats(pgid: int) -> tuple[float, int]:
    """CPU seconds (with reaped children) and the largest peak RSS (KiB) of a process group."""
    cpu_ticks, peak_kib = 0, 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[2]) != pgid:
                continue
            cpu_ticks += sum(int(value) for value in fields[11:15])
            for line in Path(f"/proc/{entry}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak_kib = max(peak_kib, int(line.split()[1]))
        except (OSError, ValueError):
            continue  # exited meanwhile
    return cpu_ticks / CLOCK_TICKS, peak_kib


def _samples(url: str) -> list[tuple[str, dict[str, str], float]]:
    text = processes.local_get(url).text
    return [
        (sample.name, sample.labels, sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]


WRITE_METHODS: Final = ("POST", "PUT", "PATCH", "DELETE")


@dataclass(frozen=True)
class Snapshot:
    """Counters at one moment; phases are differences of two snapshots."""

    wall: float
    cpu: Mapping[str, float]
    peak_kib: Mapping[str, int]
    hook_calls: Mapping[str, float]
    hook_seconds: Mapping[str, float]
    unchanged: float
    api_requests: Mapping[str, float]

    @classmethod
    def take(cls, plane: ControlPlane) -> Snapshot:
        cpu, peak = {}, {}
        for name in PROCESSES:
            cpu[name], peak[name] = _group_stats(plane.running[name].pid)
        calls: dict[str, float] = {}
        seconds: dict[str, float] = {}
        unchanged = 0.0
        for name, labels, value in _samples(f"{plane.hook_url}/metrics"):
            if name == "disaggregatedset_hook_duration_seconds_count":
                calls[labels["hook"]] = calls.get(labels["hook"], 0) + value
            elif name == "disaggregatedset_hook_duration_seconds_sum":
                seconds[labels["hook"]] = seconds.get(labels["hook"], 0) + value
            elif name == "disaggregatedset_sync_unchanged_total":
                unchanged += value
        requests: dict[str, float] = {}
        for name, labels, value in _samples(plane.metacontroller_metrics):
            if name == "rest_client_requests_total":
                method = labels.get("method", "?")
                requests[method] = requests.get(method, 0) + value
        return cls(time.time(), cpu, peak, calls, seconds, unchanged, requests)


@dataclass(frozen=True)
class Phase:
    name: str
    milestones: Mapping[str, float | None]
    """Seconds from the phase's start to each milestone; None when it was not reached."""
    cpu: Mapping[str, float]
    hook_calls: Mapping[str, float]
    hook_mean_ms: Mapping[str, float]
    unchanged: float
    api_requests: Mapping[str, float]

    @property
    def completed(self) -> bool:
        return all(value is not None for value in self.milestones.values())


def phase_between(
    name: str, reached: Mapping[str, float | None], before: Snapshot, after: Snapshot
) -> Phase:
    calls = {
        hook: after.hook_calls[hook] - before.hook_calls.get(hook, 0) for hook in after.hook_calls
    }
    mean = {
        hook: 1000 * (after.hook_seconds[hook] - before.hook_seconds.get(hook, 0)) / count
        for hook, count in calls.items()
        if count
    }
    return Phase(
        name=name,
        milestones={
            milestone: None if at is None else at - before.wall for milestone, at in reached.items()
        },
        cpu={process: after.cpu[process] - before.cpu[process] for process in PROCESSES},
        hook_calls={hook: count for hook, count in calls.items() if count},
        hook_mean_ms=mean,
        unchanged=after.unchanged - before.unchanged,
        api_requests={
            method: count - before.api_requests.get(method, 0)
            for method, count in after.api_requests.items()
            if count - before.api_requests.get(method, 0)
        },
    )


# --- watching --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """One watch event or hook call, at wall-clock time `at`."""

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
            if lws["metadata"]["labels"].get(api.LABEL_REVISION)
            != besides.get(lws["metadata"]["labels"].get(api.LABEL_NAME, ""))
        ]
        return len(fresh) == 2 * count

    return done


def _all_available(count: int) -> Callable[[Recorder], bool]:
    def done(recorder: Recorder) -> bool:
        listed = recorder.objects["ds"].values()
        return len(listed) == count and all(sets.is_available(ds) for ds in listed)

    return done


def _rolled(old: Mapping[str, str]) -> Callable[[Recorder], bool]:
    def done(recorder: Recorder) -> bool:
        for ds in recorder.objects["ds"].values():
            revision = ds.get("status", {}).get("revision")
            if revision == old[ds["metadata"]["name"]] or not sets.is_available(ds):
                return False
        return len(recorder.objects["lws"]) == 2 * len(old)

    return done


@dataclass(frozen=True)
class Run:
    phases: list[Phase]
    timelines: dict[str, list[Event]]
    """With one set: the create and rollout phases' watch events and hook calls, in time order."""
    peaks: Mapping[str, int]


class Workload:
    """The sets of one run on one control plane, and what was measured so far."""

    def __init__(
        self, plane: ControlPlane, recorder: Recorder, count: int, timeout: float, external: bool
    ):
        self.plane, self.recorder, self.count, self.timeout = plane, recorder, count, timeout
        self.external = external
        self.phases: list[Phase] = []
        self.timelines: dict[str, list[Event]] = {}

    def _measure(
        self,
        name: str,
        act: Callable[[], None],
        milestones: Mapping[str, Callable[[], float | None]],
    ) -> bool:
        """Run `act`, wait for each milestone in turn, and record the phase; whether all came."""
        before = Snapshot.take(self.plane)
        started = len(self.recorder.events)
        act()
        reached = {}
        for milestone, wait in milestones.items():
            reached[milestone] = wait()
        after = Snapshot.take(self.plane)
        self.phases.append(phase_between(name, reached, before, after))
        if self.count == 1 and name != "idle":
            calls = hook_calls(self.plane.running["hooks"].log, before.wall, after.wall)
            watched = self.recorder.events[started:]
            self.timelines[name] = sorted([*watched, *calls], key=lambda event: event.at)
        return self.phases[-1].completed

    def _each(self, change: Callable[[kube.Client, str], None]) -> Callable[[], None]:
        def act() -> None:
            for index in range(self.count):
                change(self.plane.client, f"llm-{index:04d}")

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

        synced = Snapshot.take(self.plane).hook_calls.get("sync", 0)
        return self._measure(
            "idle",
            self._each(touch),
            {"synced": lambda: _wait_syncs(self.plane, synced + self.count, self.timeout)},
        )

    def rollout(self) -> bool:
        old = {name: ds["status"]["revision"] for name, ds in self.recorder.objects["ds"].items()}

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
        )


def _wait_syncs(plane: ControlPlane, calls: float, timeout: float) -> float | None:
    """The time by which the hook answered `calls` syncs in all, then was quiet for a while."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if Snapshot.take(plane).hook_calls.get("sync", 0) >= calls:
            reached = time.time()
            time.sleep(SETTLE_SECONDS)  # let any write they cause happen within the phase
            return reached
        time.sleep(0.1)
    return None


def run(
    count: int, flags: Sequence[str], *, delay: float, timeout: float, external: bool = False
) -> Run:
    """One fresh control plane: create `count` sets, sync them idle, then roll them all."""
    found = assets.find_assets()
    workdir = Path(tempfile.mkdtemp(prefix="ds-bench-"))
    plane = ControlPlane.start(found, workdir, metacontroller_flags=flags)
    controller = FakeLwsController(plane.client, delay=delay)
    controller.start()
    client = plane.client
    client.create(
        kube.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    )
    # The API server's first DisaggregatedSet write compiles the CRD's validation rules (about 2 s
    # here); a dry run pays that before anything is timed.
    client.create(kube.DISAGGREGATED_SETS, _set("llm-warm-up", sets.IMAGE_V1), dry_run=True)
    recorder = Recorder(client)
    try:
        workload = Workload(plane, recorder, count, timeout, external)
        if workload.create():
            time.sleep(SETTLE_SECONDS)
            workload.idle()
            workload.rollout()
        if controller.errors:
            print(f"  fake LWS controller errors: {controller.errors[:3]}")
        return Run(workload.phases, workload.timelines, Snapshot.take(plane).peak_kib)
    finally:
        recorder.stop()
        controller.stop()
        plane.stop()


# --- output ------------------------------------------------------------------------------------


def _print_peaks(peaks: Mapping[str, int]) -> None:
    print(
        "  peak memory: " + ", ".join(f"{name} {kib / 1024:.0f} MiB" for name, kib in peaks.items())
    )


def _print_phase(count: int, phase: Phase) -> None:
    reached = "  ".join(
        f"{milestone} {'NOT REACHED' if at is None else f'{at:.2f} s'}"
        for milestone, at in phase.milestones.items()
    )
    cpu = "  ".join(f"{name} {seconds:.1f}" for name, seconds in phase.cpu.items())
    controller = phase.cpu["metacontroller"] + phase.cpu["hooks"]
    calls = ", ".join(
        f"{hook} {int(n)} ({phase.hook_mean_ms.get(hook, 0):.1f} ms)"
        for hook, n in sorted(phase.hook_calls.items())
    )
    syncs = phase.hook_calls.get("sync", 0)
    changing = syncs - phase.unchanged
    writes = sum(phase.api_requests.get(method, 0) for method in WRITE_METHODS)
    requests = ", ".join(f"{method} {int(n)}" for method, n in sorted(phase.api_requests.items()))
    print(f"  {phase.name:<8} {reached}")
    print(f"           CPU s: {cpu}  (controller: Metacontroller + hooks {controller:.1f})")
    print(f"           hook calls: {calls}")
    per_pass = f"{syncs / changing:.1f}" if changing else "-"
    print(
        f"           syncs per set {syncs / count:.1f}: {changing / count:.1f} passes that changed"
        f" something, {phase.unchanged / count:.1f} answered the observed state;"
        f" {per_pass} syncs per pass"
    )
    print(
        f"           Metacontroller API requests: {requests}; writes per set {writes / count:.1f}"
    )


def _print_timeline(name: str, timeline: Sequence[Event]) -> None:
    if not timeline:
        return
    print(f"  {name}, event by event (s from the first; a hook line is logged as its call ends):")
    first = timeline[0].at
    for event in timeline:
        print(f"    {event.at - first:7.3f}  {event.source:<4} {event.name:<34} {event.what}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default="1,100,300", help="comma-separated numbers of sets")
    parser.add_argument(
        "--profiles", default="default,large", help=f"comma-separated: {', '.join(PROFILES)}"
    )
    parser.add_argument("--delay", type=float, default=0.25, help="LWS readiness delay, seconds")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per phase")
    parser.add_argument(
        "--external",
        action="store_true",
        help="decode scaled by its RoleScaler (scaling: External): one scaler per set",
    )
    args = parser.parse_args(argv)
    try:
        counts = [int(value) for value in args.sets.split(",")]
        profiles = args.profiles.split(",")
        unknown = [name for name in profiles if name not in PROFILES]
        if unknown or any(count < 1 for count in counts):
            raise ValueError(f"unknown profile {unknown}" if unknown else "sets must be >= 1")
    except ValueError as error:
        parser.error(str(error))
    all_done = True
    for profile in profiles:
        flags = PROFILES[profile]()
        for count in counts:
            print(f"{count} sets, Metacontroller {profile} ({' '.join(flags) or 'no flags'}):")
            result = run(
                count, flags, delay=args.delay, timeout=args.timeout, external=args.external
            )
            for phase in result.phases:
                _print_phase(count, phase)
                all_done = all_done and phase.completed
            _print_peaks(result.peaks)
            for name, timeline in result.timelines.items():
                _print_timeline(name, timeline)
            sys.stdout.flush()
    return 0 if all_done else 1


if __name__ == "__main__":
    sys.exit(main())
