"""The whole stack under load: many DisaggregatedSets on a real control plane.

    python bench/real_stack.py [--sets 1,100,300] [--profiles default,large] [--delay 0.25]

Each run starts a fresh control plane from `tests/cluster` (etcd, kube-apiserver, the garbage
collector, Metacontroller and `python -m hooks serve`, the kit installed as `kubectl apply -k .`
installs it; the programs are found as the cluster tests find them) and plays the
LeaderWorkerSet controller: every LWS reports ready `--delay` seconds after a change. Then:

- create: N sets (prefill 2 + decode 1 groups, one slice) are created at once; the phase ends
  when every set is Available for its generation;
- rollout: every set's image changes at once; the phase ends when every set is Available at a
  new revision and only the new revision's LWS remain.

For each phase it prints the wall time, the CPU seconds of Metacontroller, the hook server,
kube-apiserver and etcd (from /proc, whole process groups), the hook calls by hook with their
mean latency (the server's own histogram), the sync calls per set and Metacontroller's API
requests. After both phases: each process's peak resident memory.

Metacontroller profiles (its command-line flags):

- default: none (5 workers, 5 API requests/s, burst 10);
- qps: the request rate and burst of `components/metacontroller-scale`, 5 workers;
- large: all flags of `components/metacontroller-scale` (as it patches Metacontroller's install).

Exit status: 0 when every phase of every run completed within `--timeout`, 1 otherwise, 2 for a
usage error.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from prometheus_client.parser import text_string_to_metric_families

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from tests.cluster import assets, kube, processes, sets  # noqa: E402 (needs the root on sys.path)
from tests.cluster.controlplane import ControlPlane, scale_flags  # noqa: E402
from tests.cluster.lws import FakeLwsController  # noqa: E402

JsonObject = dict[str, Any]

PROCESSES: Final = ("metacontroller", "hooks", "kube-apiserver", "etcd")
NAMESPACE: Final = "bench"
POLL_SECONDS: Final = 1.0
CLOCK_TICKS: Final = os.sysconf("SC_CLK_TCK")


PROFILES: Final[Mapping[str, Callable[[], tuple[str, ...]]]] = {
    "default": lambda: (),
    "qps": lambda: tuple(flag for flag in scale_flags() if not flag.startswith("--workers")),
    "large": scale_flags,
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


@dataclass(frozen=True)
class Snapshot:
    """Counters at one moment; phases are differences of two snapshots."""

    at: float
    cpu: Mapping[str, float]
    peak_kib: Mapping[str, int]
    hook_calls: Mapping[str, float]
    hook_seconds: Mapping[str, float]
    api_requests: float

    @classmethod
    def take(cls, plane: ControlPlane) -> Snapshot:
        cpu, peak = {}, {}
        for name in PROCESSES:
            cpu[name], peak[name] = _group_stats(plane.running[name].pid)
        calls: dict[str, float] = {}
        seconds: dict[str, float] = {}
        for name, labels, value in _samples(f"{plane.hook_url}/metrics"):
            if name == "disaggregatedset_hook_duration_seconds_count":
                calls[labels["hook"]] = calls.get(labels["hook"], 0) + value
            elif name == "disaggregatedset_hook_duration_seconds_sum":
                seconds[labels["hook"]] = seconds.get(labels["hook"], 0) + value
        requests = sum(
            value
            for name, _, value in _samples(plane.metacontroller_metrics)
            if name == "rest_client_requests_total"
        )
        return cls(time.monotonic(), cpu, peak, calls, seconds, requests)


@dataclass(frozen=True)
class Phase:
    name: str
    completed: bool
    seconds: float
    cpu: Mapping[str, float]
    hook_calls: Mapping[str, float]
    hook_mean_ms: Mapping[str, float]
    api_requests: float


def phase_between(name: str, completed: bool, before: Snapshot, after: Snapshot) -> Phase:
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
        completed=completed,
        seconds=after.at - before.at,
        cpu={process: after.cpu[process] - before.cpu[process] for process in PROCESSES},
        hook_calls={hook: count for hook, count in calls.items() if count},
        hook_mean_ms=mean,
        api_requests=after.api_requests - before.api_requests,
    )


# --- the workload ------------------------------------------------------------------------------


def _set(index: int, image: str) -> JsonObject:
    manifest = sets.small_set(NAMESPACE, image=image)
    manifest["metadata"]["name"] = f"llm-{index:04d}"
    return manifest


def _wait(check: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(POLL_SECONDS)
    return False


def _all_available(client: kube.Client, count: int) -> bool:
    listed = client.list(kube.DISAGGREGATED_SETS, namespace=NAMESPACE)
    return len(listed) == count and all(sets.is_available(ds) for ds in listed)


def _rolled(client: kube.Client, old: Mapping[str, str]) -> bool:
    listed = client.list(kube.DISAGGREGATED_SETS, namespace=NAMESPACE)
    for ds in listed:
        revision = ds.get("status", {}).get("revision")
        if revision == old[ds["metadata"]["name"]] or not sets.is_available(ds):
            return False
    lws = client.list(kube.LWS, namespace=NAMESPACE)
    return len(lws) == 2 * len(old)


def run(count: int, flags: Sequence[str], *, delay: float, timeout: float) -> list[Phase]:
    """One fresh control plane: create `count` sets, then roll them all."""
    found = assets.find_assets()
    workdir = Path(tempfile.mkdtemp(prefix="ds-bench-"))
    plane = ControlPlane.start(found, workdir, metacontroller_flags=flags)
    controller = FakeLwsController(plane.client, delay=delay)
    controller.start()
    try:
        client = plane.client
        client.create(
            kube.NAMESPACES,
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        )
        phases = []
        before = Snapshot.take(plane)
        for index in range(count):
            client.create(kube.DISAGGREGATED_SETS, _set(index, sets.IMAGE_V1))
        done = _wait(lambda: _all_available(client, count), timeout)
        after = Snapshot.take(plane)
        phases.append(phase_between("create", done, before, after))
        if done:
            old = {
                ds["metadata"]["name"]: ds["status"]["revision"]
                for ds in client.list(kube.DISAGGREGATED_SETS, namespace=NAMESPACE)
            }
            before = Snapshot.take(plane)
            for index in range(count):
                spec = _set(index, sets.IMAGE_V2)["spec"]
                client.patch(
                    kube.DISAGGREGATED_SETS, f"llm-{index:04d}", {"spec": spec}, namespace=NAMESPACE
                )
            done = _wait(lambda: _rolled(client, old), timeout)
            after = Snapshot.take(plane)
            phases.append(phase_between("rollout", done, before, after))
        _print_peaks(after)
        if controller.errors:
            print(f"  fake LWS controller errors: {controller.errors[:3]}")
        return phases
    finally:
        controller.stop()
        plane.stop()


# --- output ------------------------------------------------------------------------------------


def _print_peaks(snapshot: Snapshot) -> None:
    peaks = ", ".join(f"{name} {kib / 1024:.0f} MiB" for name, kib in snapshot.peak_kib.items())
    print(f"  peak memory: {peaks}")


def _print_phase(count: int, phase: Phase) -> None:
    status = "" if phase.completed else "  NOT COMPLETED"
    cpu = "  ".join(f"{name} {seconds:.1f}" for name, seconds in phase.cpu.items())
    total = sum(phase.cpu.values())
    share = 100 * phase.cpu["metacontroller"] / total if total else 0.0
    calls = ", ".join(
        f"{hook} {int(n)} ({phase.hook_mean_ms.get(hook, 0):.1f} ms)"
        for hook, n in sorted(phase.hook_calls.items())
    )
    syncs = phase.hook_calls.get("sync", 0) / count
    print(f"  {phase.name:<8} {phase.seconds:7.1f} s{status}")
    print(f"           CPU s: {cpu}  (Metacontroller {share:.0f}% of these)")
    print(f"           hook calls: {calls}; {syncs:.1f} syncs per set")
    print(f"           Metacontroller API requests: {int(phase.api_requests)}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default="1,100,300", help="comma-separated numbers of sets")
    parser.add_argument(
        "--profiles", default="default,large", help=f"comma-separated: {', '.join(PROFILES)}"
    )
    parser.add_argument("--delay", type=float, default=0.25, help="LWS readiness delay, seconds")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per phase")
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
            for phase in run(count, flags, delay=args.delay, timeout=args.timeout):
                _print_phase(count, phase)
                all_done = all_done and phase.completed
            sys.stdout.flush()
    return 0 if all_done else 1


if __name__ == "__main__":
    sys.exit(main())
