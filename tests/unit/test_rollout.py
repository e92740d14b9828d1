"""One slice, one pass: steady state and the coordinated rollout (docs/rollout.md)."""

from __future__ import annotations

import pytest

from hooks import api
from hooks.core import planner, rescale, rollout, stock
from tests import builders

OLD = "aaaaaaaa"
OLDER = "bbbbbbbb"
NEW = "cccccccc"
LATER = "2026-11-29T11:00:00Z"


def role(
    name: str,
    target: int | None,
    *,
    config: planner.RoleConfig = planner.DEFAULT_CONFIG,
) -> stock.RoleInput:
    return stock.RoleInput(name=name, target=target, config=config)


def plan(roles: list[stock.RoleInput], *lws: builders.JsonObject) -> rollout.SlicePlan:
    return rollout.plan_slice(
        set_name="llm",
        slice_index=0,
        revision=NEW,
        roles=roles,
        lws=builders.parse_children(*lws),
    )


def name(revision: str, role_name: str) -> str:
    return f"llm-0-{revision}-{role_name}"


def test_empty_slice_creates_every_role_at_its_target() -> None:
    result = plan([role("prefill", 2), role("decode", 1)])
    assert result.phase is rollout.Phase.STEADY
    assert dict(result.created) == {"prefill": 2, "decode": 1}
    assert result.replicas == {}


def test_steady_state_scales_in_place() -> None:
    result = plan(
        [role("prefill", 4), role("decode", 1)],
        builders.make_lws("prefill", revision=NEW, replicas=2),
        builders.make_lws("decode", revision=NEW, replicas=1),
    )
    assert result.phase is rollout.Phase.STEADY
    assert result.replicas == {name(NEW, "prefill"): 4, name(NEW, "decode"): 1}
    assert result.created == {}


def test_unknown_target_keeps_current_replicas() -> None:
    result = plan(
        [role("prefill", 2), role("decode", None)],
        builders.make_lws("prefill", revision=NEW, replicas=2),
        builders.make_lws("decode", revision=NEW, replicas=3),
    )
    assert result.replicas[name(NEW, "decode")] == 3


def test_unknown_target_without_lws_creates_it_at_zero() -> None:
    result = plan([role("prefill", 2), role("decode", None)])
    assert dict(result.created) == {"prefill": 2, "decode": 0}


def test_drained_old_revision_is_dropped_whole() -> None:
    result = plan(
        [role("prefill", 1), role("decode", 1)],
        builders.make_lws("prefill", revision=NEW),
        builders.make_lws("decode", revision=NEW),
        builders.make_lws("prefill", revision=OLD, replicas=0),
        builders.make_lws("decode", revision=OLD, replicas=0),
    )
    assert result.dropped == (name(OLD, "decode"), name(OLD, "prefill"))
    assert set(result.replicas) == {name(NEW, "prefill"), name(NEW, "decode")}


def test_old_revision_with_one_role_left_is_not_dropped() -> None:
    result = plan(
        [role("prefill", 1), role("decode", 1)],
        builders.make_lws("prefill", revision=NEW, replicas=0),
        builders.make_lws("decode", revision=NEW, replicas=0),
        builders.make_lws("prefill", revision=OLD, replicas=0),
        builders.make_lws("decode", revision=OLD, replicas=1),
    )
    assert result.dropped == ()
    assert result.phase is not rollout.Phase.STEADY


def test_start_pass_snapshots_initial_replicas_and_creates_target_at_zero() -> None:
    result = plan(
        [role("prefill", 5), role("decode", 2)],
        builders.make_lws("prefill", revision=OLD, replicas=5, initial=9),
        builders.make_lws("decode", revision=OLD, replicas=2),
    )
    assert result.phase is rollout.Phase.STARTING
    assert result.initial_replicas == {name(OLD, "prefill"): 5, name(OLD, "decode"): 2}
    assert dict(result.created) == {"prefill": 0, "decode": 0}
    assert result.replicas == {name(OLD, "prefill"): 5, name(OLD, "decode"): 2}


def test_gate_waits_until_target_lws_are_ready() -> None:
    result = plan(
        [role("prefill", 5), role("decode", 2)],
        builders.make_lws("prefill", revision=OLD, replicas=5, initial=5),
        builders.make_lws("decode", revision=OLD, replicas=2, initial=2),
        builders.make_lws("prefill", revision=NEW, replicas=2, ready=1),
        builders.make_lws("decode", revision=NEW, replicas=1),
    )
    assert result.phase is rollout.Phase.WAITING
    assert result.step is None
    assert result.replicas[name(NEW, "prefill")] == 2
    assert result.replicas[name(OLD, "prefill")] == 5


def test_missing_target_lws_mid_rollout_is_recreated_at_zero() -> None:
    result = plan(
        [role("prefill", 5), role("decode", 2)],
        builders.make_lws("prefill", revision=OLD, replicas=5, initial=5),
        builders.make_lws("decode", revision=OLD, replicas=2, initial=2),
        builders.make_lws("prefill", revision=NEW, replicas=2),
    )
    assert result.phase is rollout.Phase.WAITING
    assert dict(result.created) == {"decode": 0}


def test_worked_example_first_step_scales_new_up() -> None:
    config = planner.RoleConfig(max_surge=2, max_unavailable=1)
    result = plan(
        [role("prefill", 5, config=config), role("decode", 2, config=config)],
        builders.make_lws("prefill", revision=OLD, replicas=5, initial=5),
        builders.make_lws("decode", revision=OLD, replicas=2, initial=2),
        builders.make_lws("prefill", revision=NEW, replicas=0),
        builders.make_lws("decode", revision=NEW, replicas=0),
    )
    assert result.phase is rollout.Phase.STEPPING
    assert result.replicas[name(NEW, "prefill")] == 2
    assert result.replicas[name(NEW, "decode")] == 1
    assert result.replicas[name(OLD, "prefill")] == 5


def test_drain_visits_the_newest_old_revision_first() -> None:
    # Two old revisions hold 2 groups per role; the planner drains 1 per role this pass, and
    # that budget goes to the newer revision (OLD) while the older one (OLDER) is untouched.
    config = planner.RoleConfig(max_surge=0, max_unavailable=1)
    result = plan(
        [role("prefill", 4, config=config), role("decode", 4, config=config)],
        builders.make_lws("prefill", revision=OLDER, replicas=2, initial=2),
        builders.make_lws("decode", revision=OLDER, replicas=2, initial=2),
        builders.make_lws("prefill", revision=OLD, replicas=2, initial=2, created=LATER),
        builders.make_lws("decode", revision=OLD, replicas=2, initial=2, created=LATER),
        builders.make_lws("prefill", revision=NEW, replicas=3),
        builders.make_lws("decode", revision=NEW, replicas=3),
    )
    assert result.step is not None
    assert result.step.old == (3, 3)
    assert result.replicas[name(OLD, "prefill")] == 1
    assert result.replicas[name(OLD, "decode")] == 1
    assert result.replicas[name(OLDER, "prefill")] == 2
    assert result.replicas[name(OLDER, "decode")] == 2


def test_revisions_created_at_the_same_time_drain_in_name_order() -> None:
    config = planner.RoleConfig(max_surge=0, max_unavailable=1)
    result = plan(
        [role("prefill", 4, config=config), role("decode", 4, config=config)],
        builders.make_lws("prefill", revision=OLDER, replicas=2, initial=2),
        builders.make_lws("decode", revision=OLDER, replicas=2, initial=2),
        builders.make_lws("prefill", revision=OLD, replicas=2, initial=2),
        builders.make_lws("decode", revision=OLD, replicas=2, initial=2),
        builders.make_lws("prefill", revision=NEW, replicas=3),
        builders.make_lws("decode", revision=NEW, replicas=3),
    )
    assert result.replicas[name(OLD, "prefill")] == 1
    assert result.replicas[name(OLDER, "prefill")] == 2


def test_coordinated_drain_takes_the_whole_revision_to_zero_together() -> None:
    # Budget 1 on prefill only: prefill's old LWS reaches 0 by itself, so decode goes with it.
    result = plan(
        [role("prefill", 1), role("decode", 3)],
        builders.make_lws("prefill", revision=OLD, replicas=1, initial=1),
        builders.make_lws("decode", revision=OLD, replicas=1, initial=3),
        builders.make_lws("prefill", revision=NEW, replicas=1),
        builders.make_lws("decode", revision=NEW, replicas=3),
    )
    assert result.replicas[name(OLD, "prefill")] == 0
    assert result.replicas[name(OLD, "decode")] == 0


def _old_and_new(
    result: rollout.SlicePlan, lws: tuple[builders.JsonObject, ...], role: str
) -> tuple[int, int]:
    """A role's old and new replicas after the pass (what the plan leaves each LWS at)."""
    counts = {"old": 0, "new": 0}
    for item in lws:
        labels = item["metadata"]["labels"]
        if labels[api.LABEL_ROLE] != role:
            continue
        after = result.replicas.get(item["metadata"]["name"], item["spec"]["replicas"])
        counts["new" if labels[api.LABEL_REVISION] == NEW else "old"] += after
    return counts["old"], counts["new"]


def test_old_groups_the_floor_keeps_count_against_the_surge_ceiling() -> None:
    # Old prefill is not Ready, so its floor keeps all 6; upstream's force drain would still
    # grow new to 4 (old 6 + new 4 > target 6 + maxSurge 2): new stays at 2.
    config = planner.RoleConfig(max_surge=2, max_unavailable=0)
    lws = (
        builders.make_lws("prefill", revision=OLD, replicas=6, ready=0, initial=6),
        builders.make_lws("decode", revision=OLD, replicas=2, ready=0, initial=2),
        builders.make_lws("prefill", revision=NEW, replicas=2, record=6),
        builders.make_lws("decode", revision=NEW, replicas=1, record=2),
    )
    result = plan([role("prefill", 6, config=config), role("decode", 2, config=config)], *lws)
    old, new = _old_and_new(result, lws, "prefill")
    assert old == 6
    assert new <= 2


def test_a_drain_across_revisions_keeps_each_roles_floor() -> None:
    # OLD retires whole when decode reaches 0 there (encode 2 -> 0 too, budget 1); the budget
    # encode has left may not take OLDER's encode below its floor: min(5, 3) - 0 = 3 old.
    config = planner.RoleConfig(max_surge=2, max_unavailable=0)
    lws = (
        builders.make_lws("encode", revision=OLD, replicas=2, initial=2),
        builders.make_lws("decode", revision=OLD, replicas=1, initial=1),
        builders.make_lws("encode", revision=OLDER, replicas=3, initial=3),
        builders.make_lws("decode", revision=OLDER, replicas=2, initial=2),
        builders.make_lws("encode", revision=NEW, replicas=0, record=3),
        builders.make_lws("decode", revision=NEW, replicas=0, record=2),
    )
    result = plan([role("encode", 3, config=config), role("decode", 2, config=config)], *lws)
    assert _old_and_new(result, lws, "encode")[0] >= 3
    assert _old_and_new(result, lws, "decode")[0] >= 2


def test_a_revision_pinned_for_another_roles_floor_keeps_the_step_from_growing_new() -> None:
    # The step drains prefill 2 -> 1 and grows its new to 1; each old revision would retire
    # whole with it, taking encode below its floor, so prefill keeps both old groups and its new
    # revision may not grow past target 1 + maxSurge 0.
    lws = (
        builders.make_lws("encode", revision=OLD, replicas=1, initial=1),
        builders.make_lws("decode", revision=OLD, replicas=1, initial=1),
        builders.make_lws("prefill", revision=OLD, replicas=1, initial=1),
        builders.make_lws("encode", revision=OLDER, replicas=2, initial=2),
        builders.make_lws("decode", revision=OLDER, replicas=1, initial=1),
        builders.make_lws("prefill", revision=OLDER, replicas=1, initial=1),
        builders.make_lws("encode", revision=NEW, replicas=0, record=3),
        builders.make_lws("decode", revision=NEW, replicas=0, record=2),
        builders.make_lws("prefill", revision=NEW, replicas=0, record=1),
    )
    roles = [
        role("encode", 3),
        role("decode", 2, config=planner.RoleConfig(max_surge=1, max_unavailable=1)),
        role("prefill", 1, config=planner.RoleConfig(max_surge=0, max_unavailable=2)),
    ]
    result = plan(roles, *lws)
    for name_, target, surge in (("encode", 3, 1), ("decode", 2, 1), ("prefill", 1, 0)):
        old, new = _old_and_new(result, lws, name_)
        assert new == 0 or old + new <= target + surge, (name_, old, new)
    assert _old_and_new(result, lws, "encode")[0] == 3


def test_removed_role_drains_with_its_revision() -> None:
    result = plan(
        [role("prefill", 2), role("decode", 1)],
        builders.make_lws("prefill", revision=OLD, replicas=2, initial=2),
        builders.make_lws("decode", revision=OLD, replicas=1, initial=1),
        builders.make_lws("encode", revision=OLD, replicas=1, initial=1),
        builders.make_lws("prefill", revision=NEW, replicas=2),
        builders.make_lws("decode", revision=NEW, replicas=1),
    )
    assert result.phase is rollout.Phase.STEPPING
    assert result.replicas[name(OLD, "encode")] == 0
    assert result.replicas[name(OLD, "prefill")] == 0


def test_a_role_lowered_below_its_new_replicas_mid_rollout_takes_a_scaled_pass() -> None:
    """Decode's target is 1 while its new LWS runs 3 (a Static edit mid-rollout; upstream's
    planner stalls there for good): the old revision drains first, every role keeping one group
    of it, and the new revision sheds what runs over target + maxSurge, never below the target
    (docs/rollout.md, "Scaling while a rollout runs")."""
    result = plan(
        [role("prefill", 2), role("decode", 1)],
        builders.make_lws("prefill", revision=OLD, replicas=2, initial=2),
        builders.make_lws("decode", revision=OLD, replicas=3, initial=3),
        builders.make_lws("prefill", revision=NEW, replicas=1),
        builders.make_lws("decode", revision=NEW, replicas=3),
    )
    assert result.phase is rollout.Phase.STEPPING and result.step is None
    assert result.moves == {rescale.Move.DRAIN, rescale.Move.SHRINK}
    assert result.replicas == {
        name(OLD, "prefill"): 1,
        name(OLD, "decode"): 1,
        name(NEW, "prefill"): 1,
        name(NEW, "decode"): 1,
    }


def test_lws_without_role_or_revision_label_is_kept_unplanned() -> None:
    stray = builders.make_lws("prefill", revision=NEW, labels={"app": "x"})
    result = plan([role("prefill", 1), role("decode", 1)], stray)
    assert result.replicas == {name(NEW, "prefill"): 1}  # kept as it is, in no group
    assert dict(result.created) == {"prefill": 1, "decode": 1}


def test_replicas_default_to_one_and_initial_falls_back() -> None:
    unset, bad = builders.parse_children(
        builders.make_lws("decode", revision=OLD, replicas=None),
        builders.make_lws("prefill", revision=OLD, replicas=3, initial="many"),
    )
    assert unset.replicas == 1
    assert stock.initial_of(bad) == 3


def test_duplicate_lws_keeps_its_revision_until_every_copy_is_drained() -> None:
    legacy = builders.make_lws("decode", revision=OLD, replicas=2)
    legacy["metadata"]["name"] = f"llm-{OLD}-decode"
    result = plan(
        [role("prefill", 1), role("decode", 1)],
        builders.make_lws("prefill", revision=NEW),
        builders.make_lws("decode", revision=NEW),
        builders.make_lws("decode", revision=OLD, replicas=0),
        legacy,
    )
    assert result.dropped == ()
    assert result.replicas[f"llm-{OLD}-decode"] == 2  # the duplicate is kept as it is


def test_canonical_name_is_planned_over_a_duplicate() -> None:
    legacy = builders.make_lws("decode", revision=NEW, replicas=5)
    legacy["metadata"]["name"] = f"llm-{NEW}-decode"
    result = plan(
        [role("prefill", 1), role("decode", 3)],
        builders.make_lws("prefill", revision=NEW),
        builders.make_lws("decode", revision=NEW, replicas=1),
        legacy,
    )
    assert result.replicas[name(NEW, "decode")] == 3
    assert result.replicas[f"llm-{NEW}-decode"] == 5


def test_a_paused_rolling_slice_keeps_everything_as_it_is() -> None:
    lws = (
        builders.make_lws("prefill", revision=OLD, replicas=2, initial=2),
        builders.make_lws("decode", revision=OLD, replicas=1, initial=1),
        builders.make_lws("prefill", revision=NEW, replicas=1),
        builders.make_lws("decode", revision=NEW, replicas=1),
    )
    roles = [role("prefill", 2), role("decode", 1)]
    result = rollout.plan_slice(
        set_name="llm",
        slice_index=0,
        revision=NEW,
        roles=roles,
        lws=builders.parse_children(*lws),
        control=rollout.SliceControl(paused=True),
    )
    assert result.phase is rollout.Phase.PAUSED
    assert result.replicas == {
        name(OLD, "prefill"): 2,
        name(OLD, "decode"): 1,
        name(NEW, "prefill"): 1,
        name(NEW, "decode"): 1,
    }
    assert (dict(result.created), dict(result.initial_replicas), result.step) == ({}, {}, None)


def test_a_paused_steady_slice_still_scales_in_place() -> None:
    result = rollout.plan_slice(
        set_name="llm",
        slice_index=0,
        revision=NEW,
        roles=[role("prefill", 3), role("decode", 1)],
        lws=builders.parse_children(
            builders.make_lws("prefill", revision=NEW, replicas=2),
            builders.make_lws("decode", revision=NEW, replicas=1),
        ),
        control=rollout.SliceControl(paused=True),
    )
    assert result.phase is rollout.Phase.STEADY
    assert result.replicas[name(NEW, "prefill")] == 3


# --- the record of each role's target (docs/rollout.md, "Scaling while a rollout runs") ------


def test_the_start_pass_records_each_target_and_takes_the_record_off_the_old_lws() -> None:
    result = plan(
        [role("prefill", 5), role("decode", None)],
        builders.make_lws("prefill", revision=OLD, replicas=5, record=3),
        builders.make_lws("decode", revision=OLD, replicas=2),
    )
    assert result.phase is rollout.Phase.STARTING
    assert dict(result.created_records) == {"prefill": 5}
    assert dict(result.records) == {name(OLD, "prefill"): None}


@pytest.mark.parametrize("written", [None, "", " 4", "4 ", "+4", "-4", "٤", "4.0", "99999999999"])
def test_a_missing_or_malformed_record_is_written_at_the_current_target(
    written: str | None,
) -> None:
    result = plan(
        [role("prefill", 4), role("decode", 2)],
        builders.make_lws("prefill", revision=OLD, replicas=3, initial=4),
        builders.make_lws("decode", revision=OLD, replicas=2, initial=2),
        builders.make_lws("prefill", revision=NEW, replicas=1, record=written),
        builders.make_lws("decode", revision=NEW, replicas=1, record=2),
    )
    assert dict(result.records) == {name(NEW, "prefill"): 4}
    assert result.moved == ()
    assert result.step is not None and result.moves == frozenset()


def test_a_record_below_the_target_makes_the_pass_a_scaled_one_and_says_so() -> None:
    result = plan(
        [role("prefill", 8), role("decode", 2)],
        builders.make_lws("prefill", revision=OLD, replicas=3, initial=4),
        builders.make_lws("decode", revision=OLD, replicas=2, initial=2),
        builders.make_lws("prefill", revision=NEW, replicas=2, record=4),
        builders.make_lws("decode", revision=NEW, replicas=1, record=2),
    )
    assert result.moved == (rollout.TargetMove(role="prefill", recorded=4, target=8),)
    assert result.step is None
    assert result.replicas[name(NEW, "prefill")] == 6
    assert result.replicas[name(OLD, "decode")] == 1


def test_a_paused_slice_whose_target_rose_splits_the_raise_between_its_revisions() -> None:
    result = rollout.plan_slice(
        set_name="llm",
        slice_index=0,
        revision=NEW,
        roles=[role("prefill", 8), role("decode", 2)],
        lws=builders.parse_children(
            builders.make_lws("prefill", revision=OLD, replicas=3, initial=4),
            builders.make_lws("decode", revision=OLD, replicas=1, initial=2),
            builders.make_lws("prefill", revision=NEW, replicas=1, record=4),
            builders.make_lws("decode", revision=NEW, replicas=1, record=2),
        ),
        control=rollout.SliceControl(paused=True),
    )
    assert result.phase is rollout.Phase.PAUSED
    assert result.replicas[name(OLD, "prefill")] == 6
    assert result.replicas[name(NEW, "prefill")] == 2


def test_a_paused_slice_whose_targets_never_moved_stays_as_it_is() -> None:
    lws = builders.parse_children(
        builders.make_lws("prefill", revision=OLD, replicas=3, initial=4),
        builders.make_lws("decode", revision=OLD, replicas=2, initial=2),
        builders.make_lws("prefill", revision=NEW, replicas=2, record=4),
        builders.make_lws("decode", revision=NEW, replicas=1, record=2),
    )
    result = rollout.plan_slice(
        set_name="llm",
        slice_index=0,
        revision=NEW,
        roles=[role("prefill", 4), role("decode", 2)],
        lws=lws,
        control=rollout.SliceControl(paused=True),
    )
    assert result.phase is rollout.Phase.PAUSED
    assert result.replicas == {item.name: item.replicas for item in lws}
    assert result.records == {}
