"""Random histories in the simulated cluster: the invariants hold on every pass and every tick, and
the set converges once faults clear.

A history is a random role set (2..4 roles, one of them possibly External), a readiness delay,
and a list of events at random ticks: template changes of some roles (mid-rollout too), replica
changes, autoscaler writes, roles added or removed, slice count and placement changes, a spec
made invalid for a few ticks, readiness faults on a template (never ready, slow, only one
group ready) that later clear, and the canary controls and the history (issue 25, item 9): pause
and resume, a hold set or released, a partition set, moved or cleared (slice changes then happen
during a partition), a malformed annotation, an undo to the first template, a history limit, and
records planted that do not count. `tests.sim.invariants` and `tests.sim.canary_invariants` check
every sync and tick; at the end all faults and controls clear and the set must settle on one
revision at its targets within a bound, with an idle sync that changes nothing.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from hooks import api
from hooks.gocompat import revision
from tests.builders import make_ds, make_role
from tests.sim import views
from tests.sim.cluster import Cluster
from tests.sim.metacontroller import LWS_TYPE, REVISION_TYPE, SERVICE_TYPE
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

ROLE_POOL = ("prefill", "decode", "encode", "embed", "rerank")
SETTLE_TICKS = 600
SIM = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


_configs = st.one_of(
    st.none(),
    st.sampled_from([(s, u) for s in range(3) for u in range(3) if (s, u) != (0, 0)]),
)


@st.composite
def histories(draw: st.DrawFn, *, canary: bool = False) -> Walk:
    """A random history; `canary`: Static roles only, a partition set early, a template change
    and slice changes while it holds, among the other events."""
    count = draw(st.integers(2, 4))
    names = draw(st.permutations(ROLE_POOL))[:count]
    external_index = None if canary else draw(st.one_of(st.none(), st.integers(0, count - 1)))
    roles = tuple(
        RoleDraw(
            name=name,
            replicas=draw(st.integers(1, 4)),
            budget=draw(_configs),
            external=index == external_index,
        )
        for index, name in enumerate(names)
    )
    slices = 1 if external_index is not None else draw(st.integers(1, 2))
    event = st.one_of(
        st.builds(
            Event,
            st.integers(0, 25),
            st.just("image"),
            st.tuples(st.integers(2, 4), st.lists(st.integers(0, 3), min_size=1, max_size=4)),
        ),
        st.builds(
            Event,
            st.integers(0, 25),
            st.just("replicas"),
            st.tuples(st.integers(0, 3), st.integers(1, 4)),
        ),
        st.builds(Event, st.integers(0, 25), st.just("hpa"), st.tuples(st.integers(0, 5))),
        st.builds(
            Event,
            st.integers(0, 25),
            st.just("fault"),
            st.tuples(st.sampled_from(["never", "slow", "one"]), st.integers(2, 4)),
        ),
        st.builds(Event, st.integers(0, 25), st.just("clear"), st.just(())),
        st.builds(Event, st.integers(0, 25), st.just("add"), st.tuples(st.integers(1, 3))),
        st.builds(Event, st.integers(0, 25), st.just("remove"), st.tuples(st.integers(0, 3))),
        st.builds(Event, st.integers(0, 25), st.just("slices"), st.tuples(st.integers(1, 3))),
        st.builds(Event, st.integers(0, 25), st.just("placement"), st.just(())),
        st.builds(Event, st.integers(0, 25), st.just("invalid"), st.tuples(st.integers(1, 6))),
        *CANARY_EVENTS,
    )
    drawn = draw(st.lists(event, max_size=8))
    if canary:
        slices = draw(st.integers(1, 3))
        drawn += [
            Event(draw(st.integers(0, 3)), "partition", (draw(st.sampled_from(["1", "2"])),)),
            Event(draw(st.integers(4, 8)), "image", (2, [0, 1, 2, 3])),
            Event(draw(st.integers(6, 20)), "slices", (draw(st.integers(1, 3)),)),
            Event(draw(st.integers(10, 25)), "slices", (draw(st.integers(2, 4)),)),
        ]
    events = tuple(sorted(drawn, key=lambda e: e.tick))
    return Walk(
        seed=draw(st.integers(0, 2**16)),
        hook_version=draw(st.sampled_from(["v1", "v2"])),
        delay=draw(st.integers(0, 2)),
        slices=slices,
        roles=roles,
        events=events,
    )


CONTROLS = {
    "pause": api.ANNOTATION_PAUSED,
    "hold": api.ANNOTATION_ROLLOUT_HOLD_AT,
    "partition": api.ANNOTATION_ROLLOUT_PARTITION,
    "limit": api.ANNOTATION_HISTORY_LIMIT,
}
CANARY_EVENTS = (
    st.builds(
        Event,
        st.integers(0, 25),
        st.just("pause"),
        st.tuples(st.sampled_from(["true", None, "yes"])),
    ),
    st.builds(
        Event,
        st.integers(0, 25),
        st.just("hold"),
        st.tuples(st.sampled_from(["0%", "25%", "50%", "100%", None, "25"])),
    ),
    st.builds(
        Event,
        st.integers(0, 25),
        st.just("partition"),
        st.tuples(st.sampled_from(["0", "1", "2", None, "one"])),
    ),
    st.builds(
        Event, st.integers(0, 25), st.just("limit"), st.tuples(st.sampled_from(["0", "1", None]))
    ),
    st.builds(Event, st.integers(0, 25), st.just("undo"), st.just(())),
    st.builds(
        Event,
        st.integers(0, 25),
        st.just("forge"),
        st.tuples(st.sampled_from(["mislabelled", "other-roles", "orphan", "first-late"])),
    ),
)


def forged_record(cluster: Cluster, kind: str) -> JsonObject:
    """A record of the set that does not count (docs/safety.md, "Hostile records"), as someone
    with write access to records would plant it: carrying the set's label and (but for an
    orphan) the set as its controller, at a name no revision of the history uses."""
    ds = cluster.ds()
    roles = copy.deepcopy(ds["spec"]["roles"])
    label = revision.compute_revision(
        [(role["name"], role["spec"]["leaderWorkerTemplate"]) for role in roles]
    )
    if kind == "other-roles":
        set_image(ds["spec"], "evil/miner:latest")
        roles = ds["spec"]["roles"]
    metadata: JsonObject = {
        "name": f"llm-forged-{kind}",
        "labels": {
            api.LABEL_NAME: "llm",
            api.LABEL_REVISION: label,
            api.CONTROLLER_UID_LABEL: ds["metadata"]["uid"],
        },
    }
    if kind != "orphan":
        metadata["ownerReferences"] = [
            {
                "apiVersion": api.API_VERSION,
                "kind": api.DS_KIND,
                "name": "llm",
                "uid": ds["metadata"]["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    return {
        "apiVersion": api.API_VERSION,
        "kind": api.REVISION_KIND,
        "metadata": metadata,
        "revision": 9 if kind != "first-late" else 1,
        "firstRevision": 9 if kind != "first-late" else 2,
        "completedAs": 9 if kind != "first-late" else 1,
        "roles": roles,
    }


def build_role(draw: RoleDraw, version: int = 1) -> JsonObject:
    surge, unavailable = draw.budget if draw.budget is not None else (None, None)
    return make_role(
        draw.name,
        replicas=draw.replicas,
        image=image(version),
        external=draw.external,
        max_surge=surge,
        max_unavailable=unavailable,
    )


def apply_event(cluster: Cluster, event: Event) -> None:
    spec = cluster.ds()["spec"]
    roles = spec["roles"]
    external = [role["name"] for role in roles if views.is_external(role)]
    if event.kind == "image":
        version, picks = event.args
        chosen = sorted({roles[pick % len(roles)]["name"] for pick in picks})
        cluster.edit("llm", lambda s: set_image(s, image(version), roles=chosen))
    elif event.kind == "replicas":
        index, value = event.args
        role = roles[index % len(roles)]
        if not views.is_external(role):
            cluster.edit("llm", lambda s: set_replicas(s, {role["name"]: value}))
    elif event.kind == "hpa":
        for name in external:
            if cluster.scaler(f"llm-{name}") is not None:
                write_scaler(cluster, f"llm-{name}", event.args[0])
    elif event.kind == "fault":
        mode, version = event.args
        add_fault(cluster, mode, image(version), slow=4)
    elif event.kind == "clear":
        cluster.set_readiness([])
    elif event.kind == "add" and len(roles) < 4:
        used = {role["name"] for role in roles}
        name = next(name for name in ROLE_POOL if name not in used)
        static = [role for role in roles if not views.is_external(role)]
        template_image = static[0]["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"][
            "containers"
        ][0]["image"]
        added = make_role(name, replicas=event.args[0], image=template_image)
        cluster.edit("llm", lambda s: s["roles"].append(added))
    elif event.kind == "slices" and not external:
        cluster.edit("llm", lambda s: s.update(slices=event.args[0]))
    elif event.kind == "placement":
        policy = {"type": "ExclusiveTopology", "topology": "example.com/rack"}
        cluster.edit("llm", lambda s: s.update(placementPolicy=policy))
    elif event.kind == "invalid":
        # A spec that bypassed the CRD (partition is rejected), fixed a few ticks later.
        strategy = {
            "type": "RollingUpdate",
            "rollingUpdateConfiguration": {"maxSurge": 1, "maxUnavailable": 0, "partition": 1},
        }
        name = roles[0]["name"]

        def restore(spec: JsonObject) -> None:
            for role in spec["roles"]:
                config = (role["spec"].get("rolloutStrategy") or {}).get(
                    "rollingUpdateConfiguration"
                )
                if role["name"] == name and config is not None:
                    config["partition"] = 0

        cluster.edit("llm", lambda s: s["roles"][0]["spec"].update(rolloutStrategy=strategy))
        cluster.at(
            cluster.tick + event.args[0],
            lambda c: c.edit("llm", restore),
            label=f"fix the spec of {name}",
        )
    elif event.kind in CONTROLS:
        cluster.annotate("llm", CONTROLS[event.kind], event.args[0])
    elif event.kind == "undo":
        cluster.edit("llm", lambda s: set_image(s, image(1)))
    elif event.kind == "forge":
        key = (REVISION_TYPE, cluster.namespace, f"llm-forged-{event.args[0]}")
        if cluster.store.peek(key) is None:
            cluster.create(forged_record(cluster, event.args[0]))
    elif event.kind == "remove" and len(roles) > 2:
        index = event.args[0] % len(roles)
        if [role for i, role in enumerate(roles) if i != index and not views.is_external(role)]:
            cluster.edit("llm", lambda s: s["roles"].pop(index))


def applying(event: Event) -> Callable[[Cluster], None]:
    return lambda cluster: apply_event(cluster, event)


def role_target(cluster: Cluster, role: JsonObject) -> int:
    if views.is_external(role):
        scaler = cluster.scaler(f"llm-{role['name']}")
        assert scaler is not None
        value: int = scaler["spec"]["replicas"]
        return value
    return views.static_target(role)


@SIM
@given(histories())
def test_random_histories_keep_the_invariants_and_converge(history: Walk) -> None:
    run_history(history)


@SIM
@given(histories(canary=True))
def test_issue25_item9_canary_histories_keep_the_invariants_and_converge(history: Walk) -> None:
    """Slices added, removed and added again while a partition holds a rollout back, with
    pauses, holds, undos and planted records in between."""
    run_history(history)


def run_history(history: Walk) -> None:
    cluster = Cluster(
        seed=history.seed, hook_version=history.hook_version, readiness_delay=history.delay
    )
    cluster.create(
        make_ds(roles=[build_role(role) for role in history.roles], slices=history.slices)
    )
    cluster.run(max_ticks=100)
    start = cluster.tick
    for event in history.events:
        cluster.at(start + event.tick, applying(event), label=f"{event.kind} {event.args}")
    cluster.run_for(max((event.tick for event in history.events), default=0) + 1)
    cluster.set_readiness([])
    for key in (
        api.ANNOTATION_PAUSED,
        api.ANNOTATION_ROLLOUT_HOLD_AT,
        api.ANNOTATION_ROLLOUT_PARTITION,
    ):
        cluster.annotate("llm", key, None)
    cluster.run(max_ticks=SETTLE_TICKS)

    spec = cluster.ds()["spec"]
    target = cluster.revision()
    targets = [role_target(cluster, role) for role in spec["roles"]]
    available = cluster.condition("Available") or {}
    # A role at 0 beside busy ones (an HPA scaled an External role to 0) cannot serve.
    expected = ("False", "RoleScaledToZero") if 0 in targets and any(targets) else ("True",)
    seen = (available.get("status"), available.get("reason"))[: len(expected)]
    assert seen == expected, cluster.failure(f"settled with Available {seen}")
    assert cluster.revisions() == {target}
    for index, state in cluster.slice_states().items():
        assert index < spec["slices"]
        assert not state.old
        assert dict(state.new) == {
            role["name"]: role_target(cluster, role) for role in spec["roles"]
        }
    services = {obj["metadata"]["name"] for obj in cluster.objects(SERVICE_TYPE)}
    if all(role_target(cluster, role) >= 1 for role in spec["roles"]):
        assert services == {
            f"llm-{index}-{target}-{role['name']}-prv"
            for index in range(spec["slices"])
            for role in spec["roles"]
        }
    # A role at 0 replicas never has a ready LWS, so the target revision is never "ready on all
    # spec roles" (docs/rollout.md) and the Services of the slice stay as they were, even
    # those of revisions that are gone (upstream's service manager does the same).
    for name, value in cluster.hpa.written.items():
        scaler = cluster.scaler(name)
        if scaler is not None:
            assert scaler["spec"]["replicas"] == value
    for lws in cluster.objects(LWS_TYPE):
        assert views.labels_of(lws)[api.LABEL_REVISION] == target
    for role in spec["roles"]:
        scaler = cluster.scaler(f"llm-{role['name']}")
        assert (scaler is not None) == views.is_external(role)
        if scaler is not None:
            groups = sum(
                lws["status"]["replicas"]
                for lws in cluster.objects(LWS_TYPE)
                if views.labels_of(lws)[api.LABEL_ROLE] == role["name"]
            )
            assert scaler["status"]["replicas"] == groups
            ready = [c for c in scaler["status"]["conditions"] if c["type"] == "Ready"]
            assert ready[0]["status"] == "True"
    for event in history.events:  # planted records stay (the invariants saw them unchanged)
        if event.kind == "forge":
            name = f"llm-forged-{event.args[0]}"
            assert cluster.store.peek((REVISION_TYPE, cluster.namespace, name)) is not None
    first, second = cluster.idle_sync()
    assert first == second
    assert cluster.invariants.passes_checked > 0 and cluster.canary.passes_checked > 0
