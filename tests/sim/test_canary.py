"""Canary rollouts in whole simulated histories: holds and partitions (docs/rollout.md).

Every pass is checked by the simulation's invariants (no serving child dropped, surge bounds,
coordinated drain, status); these tests add what the canary controls promise: a held rollout's
trajectory is the planner's cut at the hold, and released it goes on exactly as the uninterrupted
one, through readiness stalls, pauses, target and template changes and reverts; a partition rolls
only the slices below it, leaves the others untouched (but scaling), gives a new slice past it the
stable revision, and rolls on when raised; standing still never trips the progress deadline. The
regression tests of issue 25 (items 1, 2 and 10) end the file.
"""

from __future__ import annotations

from typing import Any

from hooks import api
from tests.sim import views
from tests.sim.cluster import Cluster
from tests.sim.lws_controller import Readiness
from tests.sim.metacontroller import LWS_TYPE, REVISION_TYPE, SERVICE_TYPE
from tests.sim.scenarios import set_image, set_replicas
from tests.sim.test_rollout_control import ROLES, progressing, to_v2, trajectory
from tests.sim.test_rollouts import V1, V2, pair, started

JsonObject = dict[str, Any]
V3 = "vllm/vllm-openai:v0.13.0"


def hold(cluster: Cluster, percent: str | None) -> None:
    cluster.annotate("llm", api.ANNOTATION_ROLLOUT_HOLD_AT, percent)


def partition(cluster: Cluster, value: str | None) -> None:
    cluster.annotate("llm", api.ANNOTATION_ROLLOUT_PARTITION, value)


def canary_set(*, slices: int = 1) -> JsonObject:
    return pair(prefill=4, decode=2, surge=1, unavailable=0, slices=slices)


def held_now(cluster: Cluster) -> bool:
    return progressing(cluster) == ("Unknown", "RolloutHeld")


def _rollout_states(cluster: Cluster, start: int) -> list[tuple[tuple[int, ...], ...]]:
    cluster.passes[:] = cluster.passes[start:]
    return trajectory(cluster)


def _uninterrupted() -> list[tuple[tuple[int, ...], ...]]:
    plain = started(canary_set())
    start = len(plain.passes)
    plain.edit("llm", to_v2)
    plain.run(max_ticks=300)
    return _rollout_states(plain, start)


def _share(state: views.SliceState, percent: int) -> bool:
    targets = {"prefill": 4, "decode": 2}
    return all(state.new.get(role, 0) * 100 >= percent * targets[role] for role in ROLES)


def test_a_held_rollout_is_the_planners_cut_at_the_hold_and_released_goes_on_unchanged() -> None:
    expected = _uninterrupted()
    cluster = started(canary_set())
    hold(cluster, "25%")
    start = len(cluster.passes)
    cluster.edit("llm", to_v2)
    cluster.run(until=held_now, max_ticks=200)
    frozen = {obj["metadata"]["name"]: obj["spec"]["replicas"] for obj in cluster.objects(LWS_TYPE)}
    cluster.run_for(30)  # held: nothing moves, both revisions serve
    assert {
        obj["metadata"]["name"]: obj["spec"]["replicas"] for obj in cluster.objects(LWS_TYPE)
    } == frozen
    state = cluster.slice_states()[0]
    assert state.old_revisions and _share(state, 25)
    condition = cluster.condition("Progressing")
    assert condition is not None and "holds at 25%" in condition["message"]
    assert cluster.ds()["status"]["rollout"]["slices"][0]["phase"] == "Held"
    # The new revision's Services exist: traffic reaches the canary.
    assert any(cluster.revision() in name for name in cluster.service_names())
    held_states = _rollout_states(cluster, start)
    # Up to the hold: the planner's trajectory, cut at its first state at or past 25%.
    cut = next(i for i, (_, new) in enumerate(expected) if _share_of(new, 25))
    assert held_states == expected[: cut + 1]
    start = len(cluster.passes)
    hold(cluster, None)
    cluster.run(max_ticks=300)
    # Released: the rest of the uninterrupted trajectory, from where it stood.
    assert _rollout_states(cluster, start) == expected[cut + 1 :]
    assert cluster.is_true("Available")


def _share_of(new: tuple[int, ...], percent: int) -> bool:
    return all(have * 100 >= percent * wanted for have, wanted in zip(new, (4, 2), strict=True))


def test_holds_interleaved_with_readiness_stalls_and_pauses_keep_the_trajectory() -> None:
    expected = _uninterrupted()
    cluster = started(canary_set(), delay=2)
    start = len(cluster.passes)
    hold(cluster, "50%")
    cluster.edit("llm", to_v2)
    cluster.run(until=lambda c: c.slice_states()[0].new.get("prefill", 0) >= 1, max_ticks=100)
    cluster.annotate("llm", api.ANNOTATION_PAUSED, "true")
    cluster.run_for(10)
    assert progressing(cluster) == ("Unknown", "RolloutPaused")  # a pause goes before the hold
    cluster.annotate("llm", api.ANNOTATION_PAUSED, None)
    cluster.run(until=held_now, max_ticks=200)
    assert _share(cluster.slice_states()[0], 50)
    hold(cluster, "75%")
    cluster.run(until=held_now, max_ticks=200)
    assert _share(cluster.slice_states()[0], 75)
    hold(cluster, "100%")  # no hold
    cluster.run(max_ticks=400)
    assert _rollout_states(cluster, start) == expected
    assert cluster.is_true("Available")


def test_a_hold_lowered_below_where_the_rollout_is_holds_there() -> None:
    cluster = started(canary_set())
    hold(cluster, "75%")
    cluster.edit("llm", to_v2)
    cluster.run(until=held_now, max_ticks=200)
    before = cluster.slice_states()[0]
    hold(cluster, "10%")
    cluster.run_for(20)
    after = cluster.slice_states()[0]
    assert (after.old, after.new) == (before.old, before.new)  # it never rolls back by itself
    assert held_now(cluster)


def test_a_target_change_while_held_moves_the_share_through_the_planner() -> None:
    cluster = started(canary_set())
    hold(cluster, "50%")
    cluster.edit("llm", to_v2)
    cluster.run(until=held_now, max_ticks=200)
    cluster.edit("llm", lambda spec: set_replicas(spec, {"prefill": 8}))
    cluster.run(until=held_now, max_ticks=300)
    state = cluster.slice_states()[0]
    assert state.new.get("prefill", 0) * 2 >= 8  # 50% of the new target
    hold(cluster, None)
    cluster.run(max_ticks=400)
    assert cluster.is_true("Available")
    assert dict(cluster.slice_states()[0].new) == {"prefill": 8, "decode": 2}


def test_a_template_change_while_held_rolls_to_it_and_holds_there_newest_old_first() -> None:
    cluster = started(canary_set())
    first = cluster.revision()
    hold(cluster, "50%")
    cluster.edit("llm", to_v2)
    cluster.run(until=held_now, max_ticks=200)
    second = cluster.revision()
    cluster.edit("llm", lambda spec: set_image(spec, V3))
    cluster.run(until=lambda c: held_now(c) and c.revision() not in (first, second), max_ticks=300)
    hold(cluster, None)
    drained: list[str] = []
    for record in cluster.passes:
        for key in record.deleted:
            if key[0] == LWS_TYPE:
                revision = key[2].split("-")[2]
                if revision not in drained:
                    drained.append(revision)
    cluster.run(max_ticks=400)
    for record in cluster.passes:
        for key in record.deleted:
            if key[0] == LWS_TYPE:
                revision = key[2].split("-")[2]
                if revision not in drained:
                    drained.append(revision)
    assert drained == [second, first]  # B drains before A
    assert cluster.is_true("Available")


def test_a_revert_while_held_is_a_rollback_that_completes_without_holding() -> None:
    cluster = started(canary_set())
    first = cluster.revision()
    hold(cluster, "25%")
    cluster.edit("llm", to_v2)
    cluster.run(until=held_now, max_ticks=200)
    cluster.edit("llm", lambda spec: set_image(spec, V1))
    cluster.run(max_ticks=300)
    assert cluster.revision() == first
    assert cluster.is_true("Available")
    assert cluster.revisions() == {first}  # the canary is gone, the hold notwithstanding


def test_holding_never_trips_the_progress_deadline() -> None:
    cluster = started(canary_set())
    cluster.annotate("llm", api.ANNOTATION_PROGRESS_DEADLINE, "5")
    hold(cluster, "25%")
    cluster.edit("llm", to_v2)
    cluster.run(until=held_now, max_ticks=200)
    cluster.run_for(60)
    assert held_now(cluster)
    assert "resyncAfterSeconds" not in cluster.passes[-1].response
    hold(cluster, None)
    cluster.run(max_ticks=300)
    assert all(
        c.get("reason") != "ProgressDeadlineExceeded"
        for record in cluster.passes
        for c in record.response["status"].get("conditions") or []
    )
    assert cluster.is_true("Available")


def test_a_hold_waits_through_a_readiness_stall_and_the_deadline_counts_until_it_holds() -> None:
    cluster = started(canary_set())
    cluster.annotate("llm", api.ANNOTATION_PROGRESS_DEADLINE, "20")
    hold(cluster, "50%")
    cluster.set_readiness([Readiness(delay=None, image=V2)])  # the canary never becomes ready
    cluster.edit("llm", to_v2)
    cluster.run(until=lambda c: progressing(c)[1] == "ProgressDeadlineExceeded", max_ticks=100)
    cluster.set_readiness([])
    cluster.run(until=held_now, max_ticks=200)
    hold(cluster, None)
    cluster.run(max_ticks=300)
    assert cluster.is_true("Available")


# --- the partition ----------------------------------------------------------------------------


def _replicas(cluster: Cluster, index: int) -> dict[str, int]:
    return {
        obj["metadata"]["name"]: obj["spec"]["replicas"]
        for obj in cluster.objects(LWS_TYPE)
        if views.slice_of(obj) == index
    }


def _services(cluster: Cluster, index: int) -> set[str]:
    return {
        obj["metadata"]["name"]
        for obj in cluster.objects(SERVICE_TYPE)
        if views.slice_of(obj) == index
    }


def test_a_partition_rolls_only_the_slices_below_it_then_the_rest_when_raised() -> None:
    cluster = started(canary_set(slices=3))
    first = cluster.revision()
    untouched = {index: (_replicas(cluster, index), _services(cluster, index)) for index in (1, 2)}
    partition(cluster, "1")
    cluster.edit("llm", to_v2)
    cluster.run(until=lambda c: progressing(c) == ("Unknown", "RolloutPartitioned"), max_ticks=300)
    second = cluster.revision()
    states = cluster.slice_states()
    assert not states[0].old_revisions  # slice 0 is a whole canary pipeline on the new revision
    for index in (1, 2):
        assert (_replicas(cluster, index), _services(cluster, index)) == untouched[index]
    slices = cluster.ds()["status"]["rollout"]["slices"]
    assert [(s["index"], s["phase"], s["revisions"]) for s in slices] == [
        (1, "Partitioned", [first]),
        (2, "Partitioned", [first]),
    ]
    condition = cluster.condition("Progressing")
    assert condition is not None and "slices 1-2 are past annotation" in condition["message"]
    partition(cluster, "3")
    cluster.run(max_ticks=400)
    assert cluster.is_true("Available")
    assert cluster.revisions() == {second}


def test_partitioned_slices_keep_scaling() -> None:
    cluster = started(canary_set(slices=2))
    first = cluster.revision()
    partition(cluster, "1")
    cluster.edit("llm", to_v2)
    cluster.run(max_ticks=300)
    cluster.edit("llm", lambda spec: set_replicas(spec, {"decode": 3}))
    cluster.run(max_ticks=300)
    assert _replicas(cluster, 1)[f"llm-1-{first}-decode"] == 3
    assert _replicas(cluster, 0)[f"llm-0-{cluster.revision()}-decode"] == 3


def test_a_slice_added_while_partitioned_gets_the_stable_revision() -> None:
    cluster = started(canary_set(slices=2))
    first = cluster.revision()
    partition(cluster, "1")
    cluster.edit("llm", to_v2)
    cluster.run(max_ticks=300)
    cluster.edit("llm", lambda spec: spec.update(slices=3))
    cluster.run(max_ticks=300)
    assert set(_replicas(cluster, 2)) == {f"llm-2-{first}-prefill", f"llm-2-{first}-decode"}
    assert all(replicas > 0 for replicas in _replicas(cluster, 2).values())
    partition(cluster, None)
    cluster.run(max_ticks=500)
    assert cluster.is_true("Available")
    assert cluster.revisions() == {cluster.revision()}


def test_a_partition_and_a_hold_together_make_a_held_canary_in_slice_zero() -> None:
    cluster = started(canary_set(slices=2))
    partition(cluster, "1")
    hold(cluster, "50%")
    cluster.edit("llm", to_v2)
    cluster.run(until=held_now, max_ticks=300)
    assert _share(cluster.slice_states()[0], 50)
    condition = cluster.condition("Progressing")
    assert condition is not None
    assert "slice 0 holds at 50%" in condition["message"]
    assert "slice 1 is past annotation" in condition["message"]
    partition(cluster, None)
    hold(cluster, None)
    cluster.run(max_ticks=500)
    assert cluster.is_true("Available")


# --- issue 25: no input widens, releases or breaks a canary --------------------------------


def _revisions_in(cluster: Cluster, index: int) -> set[str]:
    return {
        views.labels_of(obj)[api.LABEL_REVISION]
        for obj in cluster.objects(LWS_TYPE)
        if views.slice_of(obj) == index
    }


def test_issue25_item1_a_slice_added_mid_rollout_past_the_partition_gets_the_stable_revision() -> (
    None
):
    cluster = started(canary_set(slices=1), delay=3)
    first = cluster.revision()
    partition(cluster, "1")
    cluster.edit("llm", to_v2)
    cluster.run(
        until=lambda c: (
            len(c.slice_states()[0].old_revisions) == 1
            and c.slice_states()[0].new.get("prefill", 0) >= 1
        ),
        max_ticks=100,
    )
    assert cluster.slice_states()[0].old_revisions  # slice 0 still runs both revisions
    cluster.edit("llm", lambda spec: spec.update(slices=2))
    cluster.run(until=lambda c: progressing(c) == ("Unknown", "RolloutPartitioned"), max_ticks=300)
    assert _revisions_in(cluster, 1) == {first}
    assert {
        obj["spec"]["replicas"] for obj in cluster.objects(LWS_TYPE) if views.slice_of(obj) == 1
    } <= {4, 2}
    partition(cluster, None)
    cluster.run(max_ticks=500)
    assert cluster.is_true("Available") and cluster.revisions() == {cluster.revision()}


def test_issue25_item1_a_slice_re_added_past_the_partition_gets_the_stable_revision() -> None:
    cluster = started(canary_set(slices=3))
    first = cluster.revision()
    partition(cluster, "2")
    cluster.edit("llm", to_v2)
    cluster.run(until=lambda c: progressing(c) == ("Unknown", "RolloutPartitioned"), max_ticks=300)
    cluster.edit("llm", lambda spec: spec.update(slices=2))
    cluster.run(max_ticks=300)
    assert _revisions_in(cluster, 2) == set()
    cluster.edit("llm", lambda spec: spec.update(slices=3))
    cluster.run(until=lambda c: progressing(c) == ("Unknown", "RolloutPartitioned"), max_ticks=300)
    assert _revisions_in(cluster, 2) == {first}


def _partitioned_at_one() -> tuple[Cluster, str]:
    """A 2-slice set rolled to v2 under partition 1, standing partitioned; and its first
    revision, which slice 1 still runs."""
    cluster = started(canary_set(slices=2))
    first = cluster.revision()
    partition(cluster, "1")
    cluster.edit("llm", to_v2)
    cluster.run(until=lambda c: progressing(c) == ("Unknown", "RolloutPartitioned"), max_ticks=300)
    return cluster, first


def test_issue25_item1_a_partitioned_slice_whose_lws_were_deleted_gets_the_stable_revision() -> (
    None
):
    cluster, first = _partitioned_at_one()
    for obj in cluster.objects(LWS_TYPE):
        if views.slice_of(obj) == 1:
            cluster.store.delete(
                (LWS_TYPE, cluster.namespace, obj["metadata"]["name"]), actor="user"
            )
    cluster.note("user: delete slice 1's LWS")
    cluster.run(until=lambda c: _revisions_in(c, 1) == {first}, max_ticks=100)
    cluster.run_for(10)
    assert _revisions_in(cluster, 1) == {first}


def test_issue25_item2_a_partitioned_slice_gets_back_a_deleted_service_and_a_new_one_its_own() -> (
    None
):
    cluster, first = _partitioned_at_one()
    wanted = {f"llm-1-{first}-prefill-prv", f"llm-1-{first}-decode-prv"}
    assert _services(cluster, 1) == wanted
    cluster.store.delete(
        (SERVICE_TYPE, cluster.namespace, f"llm-1-{first}-decode-prv"), actor="user"
    )
    cluster.note("user: delete a Service of slice 1")
    cluster.run(until=lambda c: _services(c, 1) == wanted, max_ticks=100)
    cluster.edit("llm", lambda spec: spec.update(slices=3))  # a new slice past the partition
    cluster.run(until=lambda c: len(_services(c, 2)) == 2, max_ticks=300)
    assert _services(cluster, 2) == {f"llm-2-{first}-prefill-prv", f"llm-2-{first}-decode-prv"}


def test_issue25_item10_an_undo_to_a_record_created_again_after_pruning_is_never_held() -> None:
    """History limit 1: A, B, C (A's record pruned), A again (its record created anew, newer
    than C's), C again; then a hold, and an undo to A: a rollback, never held."""
    cluster = started(canary_set())
    cluster.annotate("llm", api.ANNOTATION_HISTORY_LIMIT, "1")
    first = cluster.revision()
    for image in (V2, V3, V1, V3):
        cluster.edit("llm", lambda spec, image=image: set_image(spec, image))
        cluster.run(max_ticks=300)
        assert cluster.is_true("Available")
    records = {
        obj["metadata"]["name"]: (obj["revision"], obj["firstRevision"])
        for obj in cluster.objects(REVISION_TYPE)
    }
    assert records[f"llm-{first}"] == (4, 4)  # created again after its pruning
    hold(cluster, "25%")
    start = len(cluster.passes)
    cluster.edit("llm", lambda spec: set_image(spec, V1))  # kubectl ds rollout undo
    cluster.run(max_ticks=300)
    assert cluster.is_true("Available") and cluster.revision() == first
    reasons = {
        c["reason"]
        for record in cluster.passes[start:]
        for c in record.response["status"]["conditions"]
        if c["type"] == "Progressing"
    }
    assert "RolloutHeld" not in reasons
    messages = [
        c["message"]
        for record in cluster.passes[start:]
        for c in record.response["status"]["conditions"]
        if c["type"] == "Progressing" and c["reason"] == "RolloutInProgress"
    ]
    assert any(f"a rollback to revision {first}" in message for message in messages)
