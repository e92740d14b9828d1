"""Walks of a rolling set whose targets move (issue 34, item 8): the scaling invariants hold on
every pass, and every walk settles once its faults and controls clear.

A walk is drawn from its seed alone (`draw_walk`): 2 or 3 roles, Static or External (a set with
an External role has one slice, others 1 to 3), each with a random budget and starting count, a
readiness delay, and events at random ticks of the run:

- templates: A -> B early, and often a second change mid-way, to C (A -> B -> C) or back to A (a
  revert to the previous template, whose old LWS may still run);
- targets: Static edits of one role, scaler writes as an HPA makes them (0 included), and the
  whole set to 0 and back (every Static role to 0, an External role's scaler to 0, then up);
- controls: a hold (`rollout-hold-at`), a pause, a partition, each set at one tick and released
  at a later one (or left for the end);
- readiness faults on a template (never Ready, slow, one group Ready), cleared later;
- records: a target LWS's record of its rollout's targets removed, made malformed or forged (a
  `kubectl replace`, an upgrade, a hostile write: docs/rollout.md, "Scaling while a rollout
  runs").

`tests.sim.invariants` (with `tests.sim.scaling_invariants`) and `tests.sim.canary_invariants`
check every pass and tick. At the end every fault and control clears, and the walk must settle
on the spec's revision at its targets: one revision left, every slice's roles at their targets,
Available (or, with a role at 0 beside busy ones, RoleScaledToZero), an idle sync that changes
nothing. A walk that breaks an invariant fails with its seed and trace; one that does not settle
within `SETTLE_TICKS` is stuck.

`DS_SCALING_WALKS=N` runs walks 0 to N-1 (`A:B`: walks A to B-1) instead of the suite's share
(`SUITE_WALKS`); each records its passes, scaled passes and ticks (`--junitxml` with
`-o junit_family=xunit1` keeps them as properties).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from hooks import api
from tests.builders import make_ds, make_role
from tests.sim import views
from tests.sim.cluster import Cluster
from tests.sim.metacontroller import LWS_TYPE, PassRecord
from tests.sim.scenarios import (
    Event,
    RoleDraw,
    Walk,
    add_fault,
    image,
    set_image,
    set_replicas,
    write_scaler,
)

JsonObject = dict[str, Any]

SUITE_WALKS = 40
"""The suite's share: walks 0 to 39, about half a minute."""
ROLE_POOL = ("prefill", "decode", "encode")
BUDGETS: tuple[tuple[int | str, int | str] | None, ...] = (
    None,
    (1, 0),
    (0, 1),
    (2, 0),
    (1, 1),
    (2, 1),
    (0, 2),
    ("50%", 0),
    (1, "50%"),
    ("25%", "25%"),
)
"""maxSurge, maxUnavailable (None: no rollingUpdateConfiguration); never both resolving to 0."""
EVENT_TICKS = 40
"""Events happen within this many ticks of the first template change."""
SETTLE_TICKS = 600
CONTROLS = {
    "hold": api.ANNOTATION_ROLLOUT_HOLD_AT,
    "pause": api.ANNOTATION_PAUSED,
    "partition": api.ANNOTATION_ROLLOUT_PARTITION,
}


def draw_walk(seed: int) -> Walk:
    """The walk of `seed` (the same on every machine)."""
    rng = random.Random(seed)
    names = rng.sample(ROLE_POOL, rng.choice((2, 3)))
    external = [rng.random() < 0.3 for _ in names]
    if all(external):
        external[0] = False
    roles = tuple(
        RoleDraw(
            name=name,
            replicas=rng.randint(1, 4),
            budget=rng.choice(BUDGETS),
            external=is_external,
        )
        for name, is_external in zip(names, external, strict=True)
    )
    slices = 1 if any(external) else rng.randint(1, 3)
    events = [Event(rng.randint(0, 3), "template", (2,))]
    if rng.random() < 0.6:
        events.append(Event(rng.randint(2, EVENT_TICKS // 2), "template", (rng.choice((1, 3)),)))
    for _ in range(rng.randint(3, 8)):
        events += _draw_target_change(rng, roles)
    for kind in CONTROLS:
        if rng.random() < 0.4:
            events += _draw_control(rng, kind, slices)
    for _ in range(rng.choice((0, 0, 1, 2))):
        start = rng.randint(0, EVENT_TICKS)
        mode = rng.choice(("never", "slow", "one"))
        events.append(Event(start, "fault", (mode, rng.choice((2, 3)))))
        events.append(Event(start + rng.randint(1, 15), "heal"))
    if rng.random() < 0.2:
        value = rng.choice((None, "many", rng.randint(0, 5)))
        events.append(Event(rng.randint(0, EVENT_TICKS), "record", (rng.randint(0, 2), value)))
    return Walk(
        seed=seed,
        hook_version=rng.choice(("v1", "v2")),
        delay=rng.randint(0, 3),
        slices=slices,
        roles=roles,
        events=tuple(sorted(events, key=lambda event: event.tick)),
    )


def _draw_target_change(rng: random.Random, roles: tuple[RoleDraw, ...]) -> list[Event]:
    tick = rng.randint(0, EVENT_TICKS)
    index = rng.randrange(len(roles))
    if rng.random() < 0.15:
        back = tuple(rng.randint(1, 5) for _ in roles)
        return [Event(tick, "zero", (index,)), Event(tick + rng.randint(1, 12), "back", back)]
    kind = "scaler" if roles[index].external else "static"
    return [Event(tick, kind, (index, rng.randint(0 if kind == "scaler" else 1, 6)))]


def _draw_control(rng: random.Random, kind: str, slices: int) -> list[Event]:
    value = {
        "hold": lambda: rng.choice(("0%", "25%", "50%", "75%")),
        "pause": lambda: "true",
        "partition": lambda: str(rng.randint(0, max(0, slices - 1))),
    }[kind]()
    start = rng.randint(0, EVENT_TICKS)
    events = [Event(start, kind, (value,))]
    if rng.random() < 0.75:
        events.append(Event(start + rng.randint(1, 15), kind, (None,)))
    return events


def apply_event(cluster: Cluster, walk: Walk, event: Event) -> None:
    """What `event` does to the cluster now (a no-op where the set no longer allows it)."""
    spec = cluster.ds()["spec"]
    static = [role["name"] for role in spec["roles"] if not views.is_external(role)]
    zeroed = all(views.static_target(role) == 0 for role in spec["roles"] if role["name"] in static)
    if event.kind == "template":
        cluster.edit("llm", lambda s: set_image(s, image(event.args[0])))
    elif event.kind == "static" and not zeroed:
        name = walk.roles[event.args[0]].name
        cluster.edit("llm", lambda s: set_replicas(s, {name: event.args[1]}))
    elif event.kind == "scaler":
        write_scaler(cluster, f"llm-{walk.roles[event.args[0]].name}", event.args[1])
    elif event.kind == "zero":
        role = walk.roles[event.args[0]]
        if role.external:
            write_scaler(cluster, f"llm-{role.name}", 0)
        else:
            cluster.edit("llm", lambda s: set_replicas(s, dict.fromkeys(static, 0)))
    elif event.kind == "back":
        for role, value in zip(walk.roles, event.args, strict=True):
            if role.external:
                write_scaler(cluster, f"llm-{role.name}", value)
        if zeroed:
            values = {role.name: value for role, value in zip(walk.roles, event.args, strict=True)}
            cluster.edit("llm", lambda s: set_replicas(s, {name: values[name] for name in static}))
    elif event.kind in CONTROLS:
        cluster.annotate("llm", CONTROLS[event.kind], event.args[0])
    elif event.kind == "fault":
        mode, version = event.args
        add_fault(cluster, mode, image(version), slow=6)
    elif event.kind == "heal":
        cluster.set_readiness([])
    elif event.kind == "record":
        _rewrite_record(cluster, walk, *event.args)


def _rewrite_record(cluster: Cluster, walk: Walk, index: int, value: int | str | None) -> None:
    """Remove, break or forge the record on one role's target LWS in slice 0, as a `kubectl
    replace` of it or a hostile write would."""
    role = walk.roles[index % len(walk.roles)].name
    revision = cluster.revision()
    for lws in cluster.objects(LWS_TYPE):
        labels = views.labels_of(lws)
        if (labels.get(api.LABEL_ROLE), labels.get(api.LABEL_REVISION)) != (role, revision):
            continue
        if views.slice_of(lws) != 0:
            continue
        annotations = lws["metadata"].setdefault("annotations", {})
        if value is None:
            annotations.pop(api.ANNOTATION_ROLLOUT_TARGET, None)
        else:
            annotations[api.ANNOTATION_ROLLOUT_TARGET] = str(value)
        cluster.update(lws, actor="kubectl")


def applying(walk: Walk, event: Event) -> Callable[[Cluster], None]:
    return lambda cluster: apply_event(cluster, walk, event)


@dataclass
class ScaledPasses:
    """Counts the passes in which some slice took a scaled pass (its phase says `:scaled`)."""

    count: int = 0

    def __call__(self, record: PassRecord) -> None:
        phases = (record.summary.get("slices") or {}).values()
        if any(":scaled" in str(phase) for phase in phases):
            self.count += 1


@dataclass(frozen=True, slots=True)
class Outcome:
    passes: int
    scaled: int
    ticks: int


def run_walk(walk: Walk) -> Outcome:
    """Play `walk`, then clear every fault and control and let it settle; raises
    `SimulationFailure` (seed and trace) on a broken invariant or a walk that does not settle."""
    cluster = Cluster(
        seed=walk.seed,
        hook_version=walk.hook_version,
        readiness_delay=walk.delay,
        keep_passes=False,
    )
    scaled = ScaledPasses()
    cluster.metacontroller.observers.append(scaled)
    cluster.create(make_ds(roles=[_role(role) for role in walk.roles], slices=walk.slices))
    for role in walk.roles:
        if role.external:
            cluster.hpa.scale(tick=0, scaler=f"llm-{role.name}", replicas=role.replicas)
    cluster.run(max_ticks=100)
    start = cluster.tick
    for event in walk.events:
        cluster.at(start + event.tick, applying(walk, event), label=f"{event.kind} {event.args}")
    cluster.run_for(walk.events[-1].tick + 1)
    cluster.set_readiness([])
    for key in CONTROLS.values():
        cluster.annotate("llm", key, None)
    cluster.run(max_ticks=SETTLE_TICKS)
    _check_settled(cluster)
    return Outcome(
        passes=cluster.invariants.passes_checked, scaled=scaled.count, ticks=cluster.tick
    )


def _role(draw: RoleDraw) -> JsonObject:
    surge, unavailable = draw.budget if draw.budget is not None else (None, None)
    return make_role(
        draw.name,
        replicas=None if draw.external else draw.replicas,
        image=image(1),
        external=draw.external,
        max_surge=surge,
        max_unavailable=unavailable,
    )


def _check_settled(cluster: Cluster) -> None:
    """The walk's end: one revision, the spec's, every slice's roles at their targets."""
    spec = cluster.ds()["spec"]
    target = cluster.revision()
    targets = {}
    for role in spec["roles"]:
        if views.is_external(role):
            scaler = cluster.scaler(f"llm-{role['name']}")
            targets[role["name"]] = None if scaler is None else scaler["spec"]["replicas"]
        else:
            targets[role["name"]] = views.static_target(role)
    states = cluster.slice_states()
    problems = []
    if cluster.revisions() != {target}:
        problems.append(f"revisions {sorted(cluster.revisions())} left, target {target}")
    if sorted(states) != list(range(spec["slices"])):
        problems.append(f"slices {sorted(states)}, spec {spec['slices']}")
    for index, state in states.items():
        if state.old or dict(state.new) != targets:
            problems.append(f"slice {index} runs old {state.old} new {state.new}, not {targets}")
    idle = {name for name, value in targets.items() if value == 0}
    if idle and len(idle) < len(targets):  # a role at 0 beside busy ones: docs/rollout.md
        reason = (cluster.condition("Available") or {}).get("reason")
        if reason != api.Reason.ROLE_SCALED_TO_ZERO:
            problems.append(f"{sorted(idle)} at 0 beside busy roles, Available says {reason}")
    elif not cluster.is_true("Available"):
        problems.append(f"not Available: {cluster.condition('Available')}")
    if problems:  # the Progressing message says what the set waits for
        problems.append(f"Progressing: {cluster.condition('Progressing')}")
        raise cluster.failure("stuck: " + "; ".join(problems))
    first, second = cluster.idle_sync()
    if first != second:
        raise cluster.failure("two idle syncs answered differently")


def _walk_seeds() -> range:
    """`DS_SCALING_WALKS`: N runs walks 0 to N-1, A:B walks A to B-1 (a share of a long run)."""
    value = os.environ.get("DS_SCALING_WALKS", str(SUITE_WALKS))
    first, _, last = value.rpartition(":")
    return range(int(first or 0), int(last))


def test_the_suites_walks_draw_every_kind_of_event() -> None:
    drawn = {event.kind for seed in range(SUITE_WALKS) for event in draw_walk(seed).events}
    templates = {
        event.args[0]
        for seed in range(SUITE_WALKS)
        for event in draw_walk(seed).events
        if event.kind == "template"
    }
    assert drawn == {
        "template",
        "static",
        "scaler",
        "zero",
        "back",
        "fault",
        "heal",
        "record",
        *CONTROLS,
    }
    assert templates == {1, 2, 3}  # A -> B, then -> C or back to A


@pytest.mark.parametrize("seed", _walk_seeds(), ids=lambda seed: f"walk{seed}")
def test_scaling_walk_keeps_the_invariants_and_settles(
    seed: int, record_property: Callable[[str, object], None]
) -> None:
    outcome = run_walk(draw_walk(seed))
    record_property("passes", outcome.passes)
    record_property("scaled_passes", outcome.scaled)
    record_property("ticks", outcome.ticks)
