"""Scaling while a rollout runs, on the real control plane (docs/rollout.md, "Scaling while a
rollout runs"): `kubectl scale` up and down while the LWS become ready slowly, a Static edit of a
role's replicas, and a raise while the rollout holds.

Every state the namespace's LWS pass through is seen through a watch (`Fleet`), and the
invariants a cluster can observe are checked on each: a role's Ready groups (each LWS's ready
replicas, capped at its replicas) never below `min(old target, new target) - maxUnavailable`,
and no role past `target + maxSurge` groups. Where a test needs the rollout to stand still at a
given state, the fake LWS controller holds readiness: a hold entered from the watch's own thread
(`Fleet.hold_readiness_when`) starts before the controller could make the groups just asked for
Ready.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

import pytest

from hooks import api
from hooks.gocompat import revision
from hooks.sandbox import kube
from hooks.sandbox.controlplane import ControlPlane
from hooks.sandbox.lws import FakeLwsController
from tests.cluster import sets

JsonObject = dict[str, Any]

pytestmark = pytest.mark.usefixtures("lws_controller")

# Four times the session's readiness delay: every pass that asks for groups waits for them.
SLOW_READINESS_SECONDS: Final = 1.0
IMAGE_V3: Final = "vllm/vllm-openai:v0.11.2"


@dataclass(frozen=True, slots=True)
class Group:
    """One LWS as a state shows it."""

    role: str
    revision: str
    replicas: int
    ready: int
    """Ready groups, capped at `replicas` (a scaled-down LWS reports its old count a while)."""
    record: str | None
    """The `rollout-target-replicas` annotation."""


@dataclass(frozen=True, slots=True)
class State:
    """The namespace's LWS after one watch event, and when that event arrived."""

    at: float
    lws: Mapping[str, Group]

    def replicas(self, role: str, *, revision: str | None = None) -> int:
        """The role's groups, on one revision or (None) on every one."""
        return sum(g.replicas for g in self._of(role, revision))

    def ready(self, role: str, *, revision: str | None = None) -> int:
        return sum(g.ready for g in self._of(role, revision))

    def revisions(self) -> set[str]:
        return {group.revision for group in self.lws.values()}

    def records(self, revision: str) -> dict[str, str | None]:
        return {g.role: g.record for g in self.lws.values() if g.revision == revision}

    def _of(self, role: str, revision: str | None) -> list[Group]:
        return [
            group
            for group in self.lws.values()
            if group.role == role and revision in (None, group.revision)
        ]


def _group(lws: JsonObject) -> Group:
    labels = lws["metadata"]["labels"]
    replicas = lws["spec"].get("replicas", 1)
    return Group(
        role=labels[api.LABEL_ROLE],
        revision=labels[api.LABEL_REVISION],
        replicas=replicas,
        ready=min(replicas, (lws.get("status") or {}).get("readyReplicas", 0)),
        record=(lws["metadata"].get("annotations") or {}).get(api.ANNOTATION_ROLLOUT_TARGET),
    )


class Fleet:
    """Every state the LWS of a namespace pass through, in the order of a watch's events."""

    def __init__(self, client: kube.Client, namespace: str) -> None:
        self._client = client
        self._namespace = namespace
        self._lock = threading.Lock()
        self._lws: dict[str, Group] = {}
        self.states: list[State] = []
        self._trigger: tuple[FakeLwsController, Callable[[State], bool]] | None = None
        self.triggered: State | None = None
        self._holding = contextlib.ExitStack()
        self._listed = False
        self._watch = kube.Watch(client, kube.LWS, self._record, namespace=namespace)
        with self._lock:  # The first state: everything listed (one event per LWS).
            self._listed = True
            self.states.append(State(at=time.monotonic(), lws=dict(self._lws)))

    def _record(self, event: JsonObject) -> None:
        lws = event["object"]
        with self._lock:
            if event["type"] == "DELETED":
                self._lws.pop(lws["metadata"]["name"], None)
            else:
                self._lws[lws["metadata"]["name"]] = _group(lws)
            if not self._listed:
                return
            state = State(at=time.monotonic(), lws=dict(self._lws))
            self.states.append(state)
            if self._trigger is not None and self._trigger[1](state):
                controller, _ = self._trigger
                self._holding.enter_context(controller.held(self._namespace))
                self._trigger, self.triggered = None, state

    def hold_readiness_when(
        self, controller: FakeLwsController, condition: Callable[[State], bool]
    ) -> None:
        """Hold the namespace's readiness from the first state that meets `condition`."""
        with self._lock:
            self._trigger = (controller, condition)

    def release(self) -> None:
        """Let readiness move again."""
        with self._lock:
            self._holding.close()

    def latest(self) -> State:
        with self._lock:
            return self.states[-1]

    def stop(self) -> None:
        """Stop watching once the watch has caught up with the API server (a test that saw a
        state by polling may be ahead of the watch's events); raises if recording failed."""
        self.release()
        try:
            kube.wait_for(
                lambda: (self.latest().lws, _listed(self._client, self._namespace).lws),
                until=lambda seen: seen[0] == seen[1],
                timeout=sets.WAIT_SECONDS,
                message="the LWS watch catching up with the API server (watched, listed)",
            )
        finally:
            self._watch.stop()
            self._watch.check()


@contextlib.contextmanager
def _watching(client: kube.Client, namespace: str) -> Iterator[Fleet]:
    fleet = Fleet(client, namespace)
    try:
        yield fleet
    finally:
        fleet.stop()


@contextlib.contextmanager
def _slow_readiness(controller: FakeLwsController, seconds: float) -> Iterator[None]:
    before = controller.delay
    controller.delay = seconds
    try:
        yield
    finally:
        controller.delay = before


def _revision_of(manifest: JsonObject) -> str:
    roles = [(r["name"], r["spec"]["leaderWorkerTemplate"]) for r in manifest["spec"]["roles"]]
    return revision.compute_revision(roles)


def _scale(plane: ControlPlane, namespace: str, role: str, replicas: int) -> None:
    plane.kubectl("scale", "-n", namespace, f"dsrs/llm-{role}", f"--replicas={replicas}")


def _listed(client: kube.Client, namespace: str) -> State:
    """The namespace's LWS as the API server lists them now."""
    return State(
        at=time.monotonic(),
        lws={name: _group(lws) for name, lws in sets.lws_by_name(client, namespace).items()},
    )


def _wait_lws(
    client: kube.Client, namespace: str, until: Callable[[State], bool], message: str
) -> State:
    """Poll the namespace's LWS until their state meets `until`."""
    return kube.wait_for(
        lambda: _listed(client, namespace),
        until=until,
        timeout=sets.WAIT_SECONDS,
        message=message,
    )


def _wait_progressing(client: kube.Client, namespace: str, reason: str, text: str) -> JsonObject:
    """The set once its Progressing condition has `reason` and says `text`."""

    def meets(ds: JsonObject) -> bool:
        progressing = sets.condition(ds, "Progressing") or {}
        return progressing.get("reason") == reason and text in progressing.get("message", "")

    return kube.wait_for(
        lambda: client.get(kube.DISAGGREGATED_SETS, "llm", namespace=namespace),
        until=meets,
        timeout=sets.WAIT_SECONDS,
        message=f"Progressing {reason}, saying {text!r}",
    )


def _wait_rolled_out(client: kube.Client, namespace: str, new: str) -> JsonObject:
    """The set Available with only the `new` revision's LWS left."""
    seen: JsonObject = kube.wait_for(
        lambda: sets.observe(client, namespace),
        until=lambda seen: (
            sets.is_available(seen["set"])
            and seen["set"]["status"]["revision"] == new
            and all(
                lws["metadata"]["labels"][api.LABEL_REVISION] == new for lws in seen["lws"].values()
            )
        ),
        timeout=sets.WAIT_SECONDS,
        message=f"the rollout to {new} complete",
    )
    return seen


def _check_budgets(
    states: list[State],
    role: str,
    *,
    floor: Callable[[float], int],
    ceiling: Callable[[float], int],
) -> None:
    """At every state, the role's Ready groups at least `floor(at)` and its groups at most
    `ceiling(at)`, both read at the time the state's event arrived."""
    for index, state in enumerate(states):
        context = f"{role}, state {index} of {len(states)}: {state.lws}"
        assert state.ready(role) >= floor(state.at), context
        assert state.replicas(role) <= ceiling(state.at), context


def test_kubectl_scale_up_then_down_mid_rollout_keeps_the_floor_and_releases_with_readiness_held(
    control_plane: ControlPlane, lws_controller: FakeLwsController, namespace: str
) -> None:
    """prefill (External) 3 -> 6 -> 2 while a new image rolls out, decode 2, maxSurge 1,
    maxUnavailable 0, each LWS Ready a second after a change. The raise goes to the new revision
    within the surge ceiling; once the new revision runs the raised target, readiness stands
    still, and the lower is served anyway: the role comes down to 2 + 1 groups without a single
    group becoming Ready (so not on the rollout's schedule). Released, the rollout completes with
    exactly 2 on the new revision."""
    client = control_plane.client

    def manifest(image: str) -> JsonObject:
        return sets.small_set(
            namespace, image=image, decode=2, external="prefill", max_surge=1, max_unavailable=0
        )

    sets.apply_set(control_plane, manifest(sets.IMAGE_V1))
    sets.wait_available(client, namespace, "llm")  # the scaler is there
    _scale(control_plane, namespace, "prefill", 3)
    old = _revision_of(manifest(sets.IMAGE_V1))
    _wait_lws(
        client,
        namespace,
        lambda state: (state.ready("prefill", revision=old), state.ready("decode")) == (3, 2),
        "prefill at 3 and decode at 2, Ready",
    )
    new = _revision_of(manifest(sets.IMAGE_V2))
    with (
        _slow_readiness(lws_controller, SLOW_READINESS_SECONDS),
        _watching(client, namespace) as fleet,
    ):
        sets.apply_set(control_plane, manifest(sets.IMAGE_V2))
        _wait_lws(
            client,
            namespace,
            lambda state: state.replicas("prefill", revision=new) >= 1,
            "the rollout's first new prefill group",
        )
        fleet.hold_readiness_when(
            lws_controller, lambda state: state.replicas("prefill", revision=new) == 6
        )
        raised_at = time.monotonic()
        _scale(control_plane, namespace, "prefill", 6)
        ds = _wait_progressing(
            client,
            namespace,
            "RolloutInProgress",
            "target changed during the rollout: prefill 3 → 6",
        )
        kube.wait_for(
            lambda: fleet.triggered,
            timeout=sets.WAIT_SECONDS,
            message="the new revision at 6 prefill groups, readiness held",
            show=lambda _: str(fleet.latest().lws),
        )
        at_raised = fleet.triggered
        assert at_raised is not None
        # The new revision runs the raised target while the rollout still runs: its last group
        # is not Ready and one old prefill group stays until the old revision goes whole.
        assert at_raised.replicas("prefill", revision=old) == 1, at_raised.lws
        assert at_raised.ready("prefill", revision=new) < 6, at_raised.lws
        assert at_raised.records(new) == {"prefill": "3", "decode": "2"}
        assert set(at_raised.records(old).values()) == {None}

        lowered_at = time.monotonic()
        _scale(control_plane, namespace, "prefill", 2)
        _wait_lws(
            client,
            namespace,
            lambda state: state.replicas("prefill") <= 2 + 1,
            "prefill released to at most 2 + maxSurge groups, readiness held",
        )
        fleet.release()
        rolled_out = _wait_rolled_out(client, namespace, new)
    assert {name: lws["spec"]["replicas"] for name, lws in rolled_out["lws"].items()} == {
        f"llm-0-{new}-prefill": 2,
        f"llm-0-{new}-decode": 2,
    }
    assert ds["status"]["revision"] == new
    states = fleet.states
    _check_budgets(
        states,
        "prefill",
        floor=lambda at: 3 if at < lowered_at else 2,
        ceiling=lambda at: 3 + 1 if at < raised_at else 6 + 1,
    )
    _check_budgets(states, "decode", floor=lambda _: 2, ceiling=lambda _: 2 + 1)
    released = next(
        i for i, s in enumerate(states) if s.at > lowered_at and s.replicas("prefill") <= 3
    )
    assert all(state.replicas("prefill") <= 2 + 1 for state in states[released:])


def test_a_static_edit_mid_rollout_is_served_and_the_record_moves_to_the_new_revision(
    control_plane: ControlPlane, lws_controller: FakeLwsController, namespace: str
) -> None:
    """A set rolled out once (its LWS carry the record of that rollout's targets) rolls again;
    mid-way, `kubectl apply` raises prefill's spec.replicas 2 -> 4. The record is written on the
    new LWS at the targets the rollout started with and removed from the old ones; the raise is
    served at once within the surge ceiling; the rollout completes with exactly 4 on the new
    revision, never below 2 Ready."""
    client = control_plane.client

    def manifest(image: str, prefill: int = 2) -> JsonObject:
        return sets.small_set(
            namespace, image=image, prefill=prefill, decode=2, max_surge=1, max_unavailable=0
        )

    sets.apply_set(control_plane, manifest(sets.IMAGE_V1))
    sets.wait_available(client, namespace, "llm")
    second = _revision_of(manifest(sets.IMAGE_V2))
    sets.apply_set(control_plane, manifest(sets.IMAGE_V2))
    _wait_rolled_out(client, namespace, second)
    third = _revision_of(manifest(IMAGE_V3))
    with _watching(client, namespace) as fleet:
        before = fleet.latest()
        with lws_controller.held(namespace):
            sets.apply_set(control_plane, manifest(IMAGE_V3))
            _wait_lws(
                client,
                namespace,
                lambda state: state.replicas("prefill", revision=third) >= 1,
                "the rollout's first new prefill group (not Ready: readiness held)",
            )
            edited_at = time.monotonic()
            sets.apply_set(control_plane, manifest(IMAGE_V3, prefill=4))
            _wait_progressing(
                client,
                namespace,
                "RolloutInProgress",
                "target changed during the rollout: prefill 2 → 4",
            )
            served = _wait_lws(
                client,
                namespace,
                lambda state: state.replicas("prefill") == 4 + 1,
                "the raise served up to 4 + maxSurge groups, readiness held",
            )
        rolled_out = _wait_rolled_out(client, namespace, third)
    assert before.records(second) == {"prefill": "2", "decode": "2"}
    assert served.records(third) == {"prefill": "2", "decode": "2"}
    assert set(served.records(second).values()) == {None}
    assert served.replicas("prefill", revision=second) == 2  # nothing Ready to replace them
    assert {name: lws["spec"]["replicas"] for name, lws in rolled_out["lws"].items()} == {
        f"llm-0-{third}-prefill": 4,
        f"llm-0-{third}-decode": 2,
    }
    _check_budgets(
        fleet.states,
        "prefill",
        floor=lambda _: 2,
        ceiling=lambda at: 2 + 1 if at < edited_at else 4 + 1,
    )
    _check_budgets(fleet.states, "decode", floor=lambda _: 2, ceiling=lambda _: 2 + 1)


def test_a_raise_while_held_is_served_by_the_old_revision_and_the_hold_stays(
    control_plane: ControlPlane, namespace: str
) -> None:
    """The issue's new user: a rollout held at 25%, then `kubectl scale dsrs llm-decode
    --replicas 4`. The new revision keeps its share of the new target (1 of 4), the old one
    grows to serve the rest, every group is Ready, and Progressing stays RolloutHeld, saying
    why the old revision grew. Released, the rollout completes at the new target."""
    client = control_plane.client

    def manifest(image: str) -> JsonObject:
        return sets.small_set(
            namespace, image=image, decode=2, external="decode", max_surge=1, max_unavailable=0
        )

    sets.apply_set(control_plane, manifest(sets.IMAGE_V1))
    sets.wait_available(client, namespace, "llm")  # the scaler is there
    _scale(control_plane, namespace, "decode", 2)
    old, new = _revision_of(manifest(sets.IMAGE_V1)), _revision_of(manifest(sets.IMAGE_V2))
    _wait_lws(
        client,
        namespace,
        lambda state: (state.ready("prefill"), state.ready("decode", revision=old)) == (2, 2),
        "prefill and decode at 2, Ready",
    )
    held = manifest(sets.IMAGE_V2)
    held["metadata"]["annotations"] = {api.ANNOTATION_ROLLOUT_HOLD_AT: "25%"}
    sets.apply_set(control_plane, held)
    _wait_progressing(client, namespace, "RolloutHeld", "holds at 25%")
    at_hold = _wait_lws(client, namespace, lambda state: bool(state.lws), "the held LWS")
    assert at_hold.replicas("decode", revision=old) == 2, at_hold.lws

    _scale(control_plane, namespace, "decode", 4)
    served = _wait_lws(
        client,
        namespace,
        lambda state: state.ready("decode") == 4 and state.replicas("decode") == 4,
        "decode served at 4 groups, all Ready",
    )
    ds = _wait_progressing(
        client, namespace, "RolloutHeld", "target changed during the rollout: decode 2 → 4"
    )
    assert ds["status"]["rollout"]["slices"][0]["phase"] == "Held"
    assert (served.replicas("decode", revision=old), served.replicas("decode", revision=new)) == (
        3,
        1,
    )
    patch = {"metadata": {"annotations": {api.ANNOTATION_ROLLOUT_HOLD_AT: None}}}
    control_plane.kubectl(
        "patch", "dset", "llm", "-n", namespace, "--type=merge", "-p", json.dumps(patch)
    )
    rolled_out = _wait_rolled_out(client, namespace, new)
    assert {name: lws["spec"]["replicas"] for name, lws in rolled_out["lws"].items()} == {
        f"llm-0-{new}-prefill": 2,
        f"llm-0-{new}-decode": 4,
    }
