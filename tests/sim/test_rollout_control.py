"""Pausing and the progress deadline in whole simulated histories (docs/rollout.md).

Every pass is checked by the simulation's invariants; these tests add what pausing and the
deadline promise: a paused-and-resumed rollout takes the same states as an uninterrupted one, a
template change made while paused starts only on resume, External scaling and replica changes of
a steady set keep working while paused, and a stalled rollout turns Progressing False after its
deadline and back to True when it moves again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hooks import api
from tests.sim import views
from tests.sim.cluster import Cluster
from tests.sim.lws_controller import Readiness
from tests.sim.metacontroller import LWS_TYPE
from tests.sim.scenarios import set_image, set_replicas, write_scaler
from tests.sim.test_rollouts import V2, pair, started

JsonObject = dict[str, Any]
State = tuple[tuple[int, ...], tuple[int, ...]]
ROLES = ("prefill", "decode")


def trajectory(cluster: Cluster) -> list[State]:
    """The distinct (old, new) states of slice 0 after each pass, repeats removed."""
    states: list[State] = []
    for record in cluster.passes:
        lws = [obj for key, obj in record.after.items() if key[0] == LWS_TYPE]
        target = str(record.summary.get("revision", ""))
        slice0 = views.slice_states(lws, target=target).get(0)
        if slice0 is None:
            continue
        state = slice0.vector(ROLES)
        if not states or states[-1] != state:
            states.append(state)
    return states


def to_v2(spec: JsonObject) -> None:
    set_image(spec, V2)


def rollout_set() -> JsonObject:
    return pair(prefill=4, decode=2, surge=1, unavailable=0)


def pause(cluster: Cluster) -> None:
    cluster.annotate("llm", api.ANNOTATION_PAUSED, "true")


def resume(cluster: Cluster) -> None:
    cluster.annotate("llm", api.ANNOTATION_PAUSED, None)


def progressing(cluster: Cluster) -> tuple[str, str]:
    condition = cluster.condition("Progressing")
    assert condition is not None
    return condition["status"], condition["reason"]


def test_a_paused_and_resumed_rollout_takes_the_uninterrupted_trajectory() -> None:
    plain = started(rollout_set())
    start = len(plain.passes)
    plain.edit("llm", to_v2)
    plain.run(max_ticks=300)
    plain.passes[:] = plain.passes[start:]
    expected = trajectory(plain)

    paused = started(rollout_set())
    start = len(paused.passes)
    paused.edit("llm", to_v2)
    paused.run(until=lambda c: c.slice_states()[0].new.get("prefill", 0) >= 2)
    pause(paused)
    frozen = {obj["metadata"]["name"]: obj["spec"]["replicas"] for obj in paused.objects(LWS_TYPE)}
    paused.run_for(30)
    assert {
        obj["metadata"]["name"]: obj["spec"]["replicas"] for obj in paused.objects(LWS_TYPE)
    } == frozen
    assert progressing(paused) == ("Unknown", "RolloutPaused")
    resume(paused)
    paused.run(max_ticks=300)
    paused.passes[:] = paused.passes[start:]
    assert trajectory(paused) == expected
    assert progressing(paused) == ("False", "AllRolesReady")


def test_a_template_change_made_while_paused_starts_only_on_resume() -> None:
    cluster = started(rollout_set())
    old_names = set(cluster.lws_names())
    pause(cluster)
    cluster.edit("llm", to_v2)
    cluster.run_for(20)
    assert set(cluster.lws_names()) == old_names  # nothing of the new revision exists
    assert progressing(cluster) == ("Unknown", "RolloutPaused")
    resume(cluster)
    cluster.run(max_ticks=300)
    assert set(cluster.lws_names()).isdisjoint(old_names)
    assert cluster.is_true("Available")


def test_external_scaling_and_steady_replica_changes_work_while_paused() -> None:
    cluster = started(pair(prefill=2, decode=1, decode_external=True))
    pause(cluster)
    write_scaler(cluster, "llm-decode", 3)
    cluster.edit("llm", lambda spec: set_replicas(spec, {"prefill": 4}))
    cluster.run(max_ticks=100)
    state = cluster.slice_states()[0]
    assert dict(state.new) == {"prefill": 4, "decode": 3}
    assert cluster.is_true("Available")


def _deadline(seconds: int) -> Callable[[Cluster], None]:
    return lambda c: c.annotate("llm", api.ANNOTATION_PROGRESS_DEADLINE, str(seconds))


def test_a_stalled_rollout_passes_its_deadline_then_recovers_when_it_moves() -> None:
    cluster = started(rollout_set())
    _deadline(30)(cluster)
    cluster.set_readiness([Readiness(delay=None, image=V2)])  # the new revision never becomes ready
    cluster.edit("llm", to_v2)
    cluster.run(until=lambda c: c.slice_states()[0].new.get("prefill", 0) >= 1, max_ticks=50)
    cluster.run(until=lambda c: progressing(c)[1] == "ProgressDeadlineExceeded", max_ticks=60)
    status, _ = progressing(cluster)
    assert status == "False"
    condition = cluster.condition("Progressing")
    assert condition is not None
    assert "llm-0-" in condition["message"] and "prefill" in condition["message"]
    assert not cluster.is_true("Available")
    rollout = cluster.ds()["status"]["rollout"]
    assert rollout["revision"] == cluster.revision()
    # Readiness comes back: the rollout moves, Progressing is True again, then it completes.
    cluster.set_readiness([])
    cluster.run(until=lambda c: progressing(c) == ("True", "RolloutInProgress"), max_ticks=60)
    cluster.run(max_ticks=300)
    assert cluster.is_true("Available")
    assert "rollout" not in cluster.ds()["status"]


def test_a_paused_rollout_never_passes_its_deadline() -> None:
    cluster = started(rollout_set())
    _deadline(5)(cluster)
    cluster.edit("llm", to_v2)
    cluster.run(until=lambda c: c.slice_states()[0].new.get("prefill", 0) >= 1, max_ticks=50)
    pause(cluster)
    cluster.run_for(40)
    assert progressing(cluster) == ("Unknown", "RolloutPaused")
    resume(cluster)
    cluster.run(max_ticks=300)
    assert cluster.is_true("Available")
    assert all(
        (record.response["status"].get("conditions") or [{}])[1].get("reason")
        != "ProgressDeadlineExceeded"
        for record in cluster.passes
    )
