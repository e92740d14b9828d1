"""Scaling while a rollout runs: how soon a raise and a lower of a role's target are served, and
the role's lowest Ready count on the way, for this build and for the build before issue 34.

    python bench/scaling_mid_rollout.py [--before DIR] [--stacks sim,real] [--ready-after 1,2]
                                        [--delay 2] [--timeout 300] [--trace]

The scenarios: prefill (P) and decode (D), maxSurge 1 and maxUnavailable 0 on both, a new image
on every role, and prefill's spec.replicas edited while the rollout runs (a Static edit;
`kubectl scale` and an autoscaler are served alike). The first two are the issue's worked
examples; the third lowers below what the new revision already runs:

- raise: P 4, D 2; P raised to 8, read first by pass 4 (in the simulation), or once the old
  revision's prefill is drained to 3 (on the real stack: the state pass 3 leaves);
- lower: P 8, D 4; P lowered to 4, read first by pass 6, or once old prefill is drained to 6;
- lower-2: P 8, D 4; P lowered to 2 once the new revision's prefill runs 3 groups (both stacks:
  the first pass after that state reads it).

Milestones, per run: the raise is served when prefill's Ready groups (every LWS's ready
replicas, capped at its replicas, old and new revisions together) reach the new target; the
lower is served when prefill runs at most `new target + maxSurge` groups. Each is given twice:
when first met, and from when it holds until the end ("for good"; a raise served one planner
step at a time may fall back below its target). "Done" is the end of the rollout: the old
revision runs no group, the new one runs every role's target, all Ready. "Lowest" is prefill's
lowest Ready count from the new image to the end, beside its floor `min(old target, new target)
- maxUnavailable`; "most" the most groups prefill ran from the change on, beside its ceiling
`max(old, new) + maxSurge`.

Two stacks:

- sim: the pass model of the issue's tables, through each build's own `/sync` hook and the
  simulation's fake Metacontroller, store and LWS controller (`tests/sim`): each pass, the fake
  LWS controller updates readiness, then the set is synced once and the answer applied. A group
  is Ready `--ready-after` passes after the pass that asked for it (each value of the list is
  a run). Figures are pass numbers, counted from the new image's first pass; deterministic.
- real: a fresh control plane per build (`tools/sandbox`: etcd, kube-apiserver, the garbage
  collector, Metacontroller, the build's `python -m hooks serve` and kit), the LWS ready
  `--delay` seconds after a change. The change is written from the LWS watch's own thread
  the moment it sees the trigger state. Figures are seconds from that write (the arrival of
  the watch event that met the milestone), with the hook's syncs of the set meanwhile
  (passes) and those that changed a child (steps), from the hook server's log.

`--before DIR` names a checkout of the build before issue 34 (`git worktree add /tmp/before
226763a`; the same virtualenv serves it): every stack then runs that build too ("parity", the
no-shrink guard and one planner step at a time), after this one ("scaled"). Each build runs in a
child process of this script whose imports, hook server and kit come from that checkout (its
directory first on the path, and its working directory, which `python -m hooks` puts first).

Exit status: 0 when every run ended its rollout within `--timeout` seconds (the real stack) or
the pass limit (the simulation), 1 otherwise.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final, NamedTuple

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
BUILD_VARIABLE: Final = "DS_BENCH_BUILD"
# The checkout whose hooks are measured: this one, or the one a parent run names for its child.
BUILD_ROOT: Final = Path(os.environ.get(BUILD_VARIABLE) or REPO_ROOT)
if str(BUILD_ROOT) not in sys.path:
    sys.path.insert(0, str(BUILD_ROOT))

from hooks import api  # noqa: E402 (needs the build on sys.path)
from hooks.gocompat import revision  # noqa: E402 (as above)
from tests import builders  # noqa: E402 (as above)
from tests.cluster import sets  # noqa: E402 (as above)
from tools.sandbox import assets, kube  # noqa: E402 (as above)
from tools.sandbox.controlplane import ControlPlane  # noqa: E402 (as above)
from tools.sandbox.lws import FakeLwsController  # noqa: E402 (as above)

JsonObject = dict[str, Any]

ROLE: Final = "prefill"
MAX_SURGE: Final = 1
MAX_UNAVAILABLE: Final = 0
MAX_PASSES: Final = 60
ASSET_DIRS_VARIABLE: Final = "DS_BENCH_ASSET_DIRS"


@dataclass(frozen=True, slots=True)
class Scenario:
    """A set of prefill and decode, rolled to a new image, and prefill's change meanwhile."""

    name: str
    prefill: int
    decode: int
    new: int
    """Prefill's target after the change."""
    trigger: tuple[str, int]
    """When the change is written: once prefill's old (or new) revision runs this many groups
    (on the real stack; in the simulation too unless `change_pass` is given)."""
    change_pass: int | None = None
    """The simulation: the first pass that reads the new target."""

    def triggers(self, moment: Moment) -> bool:
        side, count = self.trigger
        return bool(getattr(moment, side) == count)

    @property
    def floor(self) -> int:
        return min(self.prefill, self.new) - MAX_UNAVAILABLE

    @property
    def ceiling(self) -> int:
        return max(self.prefill, self.new) + MAX_SURGE

    def served(self, moment: Moment) -> bool:
        """The milestone: a raise Ready at its target, a lower down to target + maxSurge."""
        if self.new > self.prefill:
            return moment.ready >= self.new
        return moment.old + moment.new <= self.new + MAX_SURGE


SCENARIOS: Final = (
    Scenario("raise", prefill=4, decode=2, new=8, trigger=("old", 3), change_pass=4),
    Scenario("lower", prefill=8, decode=4, new=4, trigger=("old", 6), change_pass=6),
    Scenario("lower-2", prefill=8, decode=4, new=2, trigger=("new", 3)),
)


class Group(NamedTuple):
    """One LWS: its role, revision, replicas and the ready replicas its status reports."""

    role: str
    revision: str
    replicas: int
    ready: int

    @property
    def ready_groups(self) -> int:
        """Ready groups, capped at replicas (a scaled-down LWS reports its old count a while)."""
        return min(self.replicas, self.ready)


@dataclass(frozen=True, slots=True)
class Moment:
    """Prefill after one pass (sim) or one watch event (real)."""

    at: float
    old: int
    new: int
    new_ready: int
    ready: int
    done: bool
    """The old revision runs no group, the new one runs every role's target, all Ready."""


@dataclass(frozen=True, slots=True)
class Sync:
    at: float
    changed: bool
    """It made Metacontroller create, update or delete a child."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """One run's figures (pass numbers in the simulation, seconds on the real stack)."""

    scenario: str
    build: str
    stack: str
    ready_after: int | None
    change: float
    first: float | None
    for_good: float | None
    done: float | None
    passes: int | None
    """Syncs of the set from the change until served for good (the real stack)."""
    steps: int | None
    lowest: int
    floor: int
    most: int
    ceiling: int
    trace: list[str]


def measure(
    scenario: Scenario,
    moments: Sequence[Moment],
    syncs: Sequence[Sync] | None,
    *,
    change: float,
    build: str,
    stack: str,
    ready_after: int | None = None,
) -> Outcome:
    """The figures of one run from what it saw: `moments` from the new image on, in order, and
    the hook's syncs of the set (the real stack)."""
    after = [moment for moment in moments if moment.at >= change]
    first = next((m.at for m in after if scenario.served(m)), None)
    for_good = None
    for moment in reversed(after):
        if not scenario.served(moment):
            break
        for_good = moment.at
    done = next((m.at for m in after if m.done), None)
    counted = None
    if syncs is not None and for_good is not None:
        counted = [sync for sync in syncs if change < sync.at <= for_good]
    return Outcome(
        scenario=scenario.name,
        build=build,
        stack=stack,
        ready_after=ready_after,
        change=change,
        first=first,
        for_good=for_good if done is not None else None,
        done=done,
        passes=None if counted is None else len(counted),
        steps=None if counted is None else sum(sync.changed for sync in counted),
        lowest=min(moment.ready for moment in moments),
        floor=scenario.floor,
        most=max(moment.old + moment.new for moment in after),
        ceiling=scenario.ceiling,
        trace=[],
    )


def _roles(scenario: Scenario, image: str, *, prefill: int | None = None) -> list[JsonObject]:
    return [
        builders.make_role(
            name,
            replicas=replicas,
            image=image,
            max_surge=MAX_SURGE,
            max_unavailable=MAX_UNAVAILABLE,
        )
        for name, replicas in (
            (ROLE, scenario.prefill if prefill is None else prefill),
            ("decode", scenario.decode),
        )
    ]


def _revision_of(roles: Sequence[JsonObject]) -> str:
    return revision.compute_revision(
        [(r["name"], r["spec"]["leaderWorkerTemplate"]) for r in roles]
    )


def _moment(at: float, groups: Sequence[Group], *, new: str, targets: dict[str, int]) -> Moment:
    """Prefill's counts, and whether the rollout is done, from every LWS of the set."""
    mine = [group for group in groups if group.role == ROLE]
    done = all(
        group.replicas == (group.ready_groups if group.revision == new else 0) for group in groups
    ) and all(
        sum(g.replicas for g in groups if g.role == role and g.revision == new) == target
        for role, target in targets.items()
    )
    return Moment(
        at=at,
        old=sum(group.replicas for group in mine if group.revision != new),
        new=sum(group.replicas for group in mine if group.revision == new),
        new_ready=sum(group.ready_groups for group in mine if group.revision == new),
        ready=sum(group.ready_groups for group in mine),
        done=done,
    )


# --- the simulation -------------------------------------------------------------------------


def simulate(scenario: Scenario, *, ready_after: int, build: str) -> Outcome:
    """The scenario pass by pass through the build's `/sync` (see the module docstring)."""
    from tests.sim import views
    from tests.sim.cluster import Cluster
    from tests.sim.metacontroller import LWS_TYPE
    from tests.sim.scenarios import set_image, set_replicas

    # The fake LWS controller counts a group from its first run after the sync that asked for
    # it, which is the next pass's: Ready `ready_after` passes after that sync.
    cluster = Cluster(readiness_delay=ready_after - 1)
    cluster.create(builders.make_ds(roles=_roles(scenario, sets.IMAGE_V1)))
    cluster.run()
    cluster.metacontroller.observers.clear()  # measured only: the tests check the invariants
    new = _revision_of(_roles(scenario, sets.IMAGE_V2))
    targets = {ROLE: scenario.new, "decode": scenario.decode}
    cluster.edit("llm", lambda spec: set_image(spec, sets.IMAGE_V2))
    moments: list[Moment] = []
    trace = []
    change = scenario.change_pass
    for index in range(1, MAX_PASSES + 1):
        if index == change:
            cluster.edit("llm", lambda spec: set_replicas(spec, {ROLE: scenario.new}))
        cluster.lws.run(cluster.tick)
        record = cluster.metacontroller.sync_once(cluster.ds(), tick=cluster.tick)
        cluster.store.drain_writes()
        cluster.tick += 1
        cluster.clock.advance()
        groups = [
            Group(
                role=views.labels_of(lws)[api.LABEL_ROLE],
                revision=views.labels_of(lws)[api.LABEL_REVISION],
                replicas=views.replicas_of(lws),
                ready=views.ready_of(lws),
            )
            for lws in cluster.objects(LWS_TYPE)
        ]
        moment = _moment(index, groups, new=new, targets=targets)
        moments.append(moment)
        trace.append(_trace_line(str(index), moment, record.summary.get("slices", {}).get("0", "")))
        if change is None and scenario.triggers(moment):
            change = index + 1
        if moment.done and change is not None and index >= change:
            break
    if change is None:
        raise RuntimeError(f"{scenario.name}: prefill never ran {scenario.trigger}")
    outcome = measure(
        scenario,
        moments,
        None,
        change=change,
        build=build,
        stack="sim",
        ready_after=ready_after,
    )
    return dataclasses.replace(outcome, trace=trace)


def _trace_line(label: str, moment: Moment, what: str = "") -> str:
    new = f"{moment.new}" if moment.new == moment.new_ready else f"{moment.new}({moment.new_ready})"
    return f"{label:>8}  old {moment.old:>2}  new {new:>6}  Ready {moment.ready:>2}  {what}"


# --- the real stack -------------------------------------------------------------------------


class Watcher:
    """Prefill's moments from a watch of a namespace's LWS; writes the change from the watch's
    thread the moment prefill runs what `scenario.trigger` names."""

    def __init__(
        self,
        client: kube.Client,
        namespace: str,
        scenario: Scenario,
        *,
        new: str,
        change: Callable[[], None],
    ) -> None:
        self._scenario, self._new, self._change = scenario, new, change
        self._targets = {ROLE: scenario.new, "decode": scenario.decode}
        self._lock = threading.Lock()
        self._lws: dict[str, Group] = {}
        self.moments: list[Moment] = []
        self.changed_at: float | None = None
        self._listed = False
        self._watch = kube.Watch(client, kube.LWS, self._record, namespace=namespace)
        with self._lock:  # The first moment: everything listed (one event per LWS).
            self._listed = True
            self.moments.append(self._moment())

    def _moment(self) -> Moment:
        return _moment(time.time(), list(self._lws.values()), new=self._new, targets=self._targets)

    def _record(self, event: JsonObject) -> None:
        lws = event["object"]
        name = lws["metadata"]["name"]
        with self._lock:
            if event["type"] == "DELETED":
                self._lws.pop(name, None)
            else:
                labels = lws["metadata"]["labels"]
                self._lws[name] = Group(
                    role=labels[api.LABEL_ROLE],
                    revision=labels[api.LABEL_REVISION],
                    replicas=lws["spec"].get("replicas", 1),
                    ready=(lws.get("status") or {}).get("readyReplicas", 0),
                )
            if not self._listed:
                return
            moment = self._moment()
            self.moments.append(moment)
            if self.changed_at is None and self._scenario.triggers(moment):
                self.changed_at = time.time()
                self._change()

    def latest(self) -> Moment:
        with self._lock:
            return self.moments[-1]

    def stop(self) -> None:
        self._watch.stop()
        self._watch.check()


def _hook_syncs(log: Path, obj: str) -> list[Sync]:
    """The hook server's `/sync` calls for `obj` ("namespace/name"), from its log."""
    syncs = []
    for line in log.read_text(errors="replace").splitlines():
        if not line.startswith("{"):
            continue
        entry = json.loads(line)
        if entry.get("hook") != "sync" or entry.get("object") != obj:
            continue
        writes = entry.get("writes") or {}
        at = datetime.fromisoformat(entry["time"].replace("Z", "+00:00")).timestamp()
        syncs.append(
            Sync(at=at, changed=any(writes.get(k) for k in ("create", "update", "delete")))
        )
    return syncs


def play(
    plane: ControlPlane, scenario: Scenario, *, run: int, timeout: float, build: str
) -> Outcome:
    """The scenario on a started stack, in a namespace of its own; a rollout that does not end
    within `timeout` seconds has no "done" (raises when the trigger state never came)."""
    client = plane.client
    namespace = f"bench-{scenario.name}-{run}"
    client.create(
        kube.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    )
    client.create(
        kube.DISAGGREGATED_SETS, sets.manifest(namespace, roles=_roles(scenario, sets.IMAGE_V1))
    )
    sets.wait_available(client, namespace, "llm")
    rolled = _roles(scenario, sets.IMAGE_V2)
    changed = _roles(scenario, sets.IMAGE_V2, prefill=scenario.new)

    def write(roles: list[JsonObject]) -> None:
        client.patch(
            kube.DISAGGREGATED_SETS, "llm", {"spec": {"roles": roles}}, namespace=namespace
        )

    watcher = Watcher(
        client, namespace, scenario, new=_revision_of(rolled), change=lambda: write(changed)
    )
    try:
        write(rolled)
        kube.wait_for(
            lambda: watcher.latest(),
            until=lambda moment: watcher.changed_at is not None and moment.done,
            timeout=timeout,
            message=f"the {scenario.name} rollout done",
        )
    except AssertionError as error:
        print(f"  {build} {scenario.name}: {error}", file=sys.stderr)
    finally:
        watcher.stop()
    changed_at = watcher.changed_at
    if changed_at is None:
        raise RuntimeError(f"{scenario.name}: prefill never ran {scenario.trigger}")
    moments = [dataclasses.replace(m, at=m.at - changed_at) for m in watcher.moments]
    syncs = [
        dataclasses.replace(sync, at=sync.at - changed_at)
        for sync in _hook_syncs(plane.running["hooks"].log, f"{namespace}/llm")
    ]
    outcome = measure(scenario, moments, syncs, change=0.0, build=build, stack="real")
    counts = [(m.old, m.new, m.new_ready, m.ready) for m in moments]
    trace = [
        _trace_line(f"{m.at:+.2f} s", m)
        for i, m in enumerate(moments)
        if i == 0 or counts[i] != counts[i - 1]
    ]
    return dataclasses.replace(outcome, trace=trace)


def run_real(*, runs: int, delay: float, timeout: float, build: str) -> list[Outcome]:
    """Every scenario `runs` times on one fresh control plane running the build's hooks and
    kit."""
    fallbacks = [Path(p) for p in os.environ.get(ASSET_DIRS_VARIABLE, "").split(os.pathsep) if p]
    plane = ControlPlane.start(
        assets.find_assets(fallbacks=fallbacks),
        Path(tempfile.mkdtemp(prefix="ds-bench-scaling-")),
        kit=BUILD_ROOT,
    )
    controller = FakeLwsController(plane.client, delay=delay)
    try:
        controller.start()
        return [
            play(plane, scenario, run=run, timeout=timeout, build=build)
            for run in range(runs)
            for scenario in SCENARIOS
        ]
    finally:
        controller.stop()
        plane.stop()


# --- the parent: one child per build, and the tables ------------------------------------------


def _child(args: argparse.Namespace) -> int:
    results: list[Outcome]
    if args.child == "sim":
        results = [
            simulate(scenario, ready_after=ready_after, build=args.build)
            for ready_after in args.ready_after
            for scenario in SCENARIOS
        ]
    else:
        results = run_real(runs=args.runs, delay=args.delay, timeout=args.timeout, build=args.build)
    print(json.dumps([dataclasses.asdict(result) for result in results]))
    return 0


def _run_build(stack: str, build: str, root: Path, args: argparse.Namespace) -> list[Outcome]:
    """One stack's runs of one build, in a child process that imports that build; none when
    the child failed."""
    from tests import shared

    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        *("--child", stack, "--build", build, "--runs", str(args.runs)),
        *("--ready-after", ",".join(map(str, args.ready_after))),
        *("--delay", str(args.delay), "--timeout", str(args.timeout)),
    ]
    env = {
        **os.environ,
        BUILD_VARIABLE: str(root),
        "PYTHONPATH": str(root),
        ASSET_DIRS_VARIABLE: os.pathsep.join(map(str, shared.testcluster_dirs())),
    }
    done = subprocess.run(command, cwd=root, env=env, stdout=subprocess.PIPE, text=True)
    if done.returncode != 0:
        print(f"{build} {stack}: the child failed ({done.returncode})", file=sys.stderr)
        return []
    return [Outcome(**item) for item in json.loads(done.stdout.splitlines()[-1])]


def _spread(values: Sequence[float | None], *, digits: int) -> str:
    """The median of the runs that got there, with the range when they differ; "-" for none,
    and how many got there when not all did."""
    known = sorted(value for value in values if value is not None)
    if not known:
        return "-"
    text = f"{statistics.median(known):.{digits}f}"
    if known[0] != known[-1]:
        text += f" ({known[0]:.{digits}f}-{known[-1]:.{digits}f})"
    if len(known) < len(values):
        text += f" [{len(known)} of {len(values)}]"
    return text


def print_table(outcomes: Sequence[Outcome], *, stack: str, delay: float, trace: bool) -> None:
    """One row per scenario, readiness and build: medians over the runs (real), with ranges;
    the lowest Ready and the most groups of all runs."""
    groups: dict[tuple[str, int | None, str], list[Outcome]] = {}
    order = {scenario.name: index for index, scenario in enumerate(SCENARIOS)}
    for outcome in sorted(outcomes, key=lambda o: (order[o.scenario], o.ready_after or 0)):
        groups.setdefault((outcome.scenario, outcome.ready_after, outcome.build), []).append(
            outcome
        )
    if stack == "sim":
        print("simulation (pass numbers from the new image's first pass)")
        header = ["scenario", "ready after", "build", "change", "first", "for good", "done"]
    else:
        count = max(len(runs) for runs in groups.values())
        print(
            f"real stack (seconds from the change, LWS ready {delay:g} s after a change; ", end=""
        )
        print(f"medians of {count} run{'s' if count != 1 else ''}, their range in parentheses)")
        header = ["scenario", "build", "first s", "for good s", "passes", "steps", "done s"]
    rows = [[*header, "lowest (floor)", "most (ceiling)"]]
    for (scenario, ready_after, build), runs in groups.items():
        digits = 0 if stack == "sim" else 1
        figures = [
            _spread([getattr(o, name) for o in runs], digits=digits)
            for name in ("first", "for_good", "done")
        ]
        if stack == "sim":
            row = [scenario, str(ready_after), build, f"{runs[0].change:.0f}", *figures]
        else:
            counts = [
                _spread([getattr(o, name) for o in runs], digits=0) for name in ("passes", "steps")
            ]
            row = [scenario, build, *figures[:2], *counts, figures[2]]
        lowest, most = min(o.lowest for o in runs), max(o.most for o in runs)
        rows.append([*row, f"{lowest} ({runs[0].floor})", f"{most} ({runs[0].ceiling})"])
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    left = {header.index("scenario"), header.index("build")}
    for row in rows:
        cells = [
            cell.ljust(width) if column in left else cell.rjust(width)
            for column, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        print("  ".join(cells))
    if trace:
        for outcome in outcomes:
            label = f"ready after {outcome.ready_after}" if stack == "sim" else "seconds"
            print(f"\n{outcome.scenario}, {outcome.build}, {label}: prefill")
            print("\n".join(outcome.trace))


def _numbers(text: str) -> list[int]:
    return [int(item) for item in text.split(",") if item]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="a checkout of the build before issue 34")
    parser.add_argument("--stacks", default="sim,real", help="comma-separated: sim, real")
    parser.add_argument("--ready-after", type=_numbers, default=[1, 2], metavar="PASSES,...")
    parser.add_argument("--runs", type=int, default=3, help="runs of each scenario (real)")
    parser.add_argument("--delay", type=float, default=2.0, help="LWS readiness delay (real)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per real run")
    parser.add_argument(
        "--trace",
        action="store_true",
        help="print prefill pass by pass (sim), event by event (real)",
    )
    parser.add_argument("--child", choices=("sim", "real"), help=argparse.SUPPRESS)
    parser.add_argument("--build", default="scaled", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(args)
    builds = [("scaled", REPO_ROOT)]
    if args.before is not None:
        builds.append(("parity", args.before.resolve()))
    complete = True
    for stack in args.stacks.split(","):
        outcomes = []
        for build, root in builds:
            found = _run_build(stack, build, root, args)
            complete = complete and bool(found) and all(o.done is not None for o in found)
            outcomes.extend(found)
        print_table(outcomes, stack=stack, delay=args.delay, trace=args.trace)
        print()
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main())
