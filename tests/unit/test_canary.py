"""Canary rules (`hooks.core.canary`, and the held and partitioned phases of `rollout`); the
history's part (rollbacks, the stable revision) is tests/unit/test_history.py's.

The hold is checked against the planner's own tables: a slice held at P% follows the planner's
trajectory (the golden sequences of upstream's planner when they are present, the worked examples
otherwise) up to the first state where every role's new replicas reach P% of their target, and
stays there.
"""

from __future__ import annotations

import pytest

from hooks import api
from hooks.core import canary, controls, planner, rollout, stock
from tests import builders
from tests.shared import golden_params

OLD = "aaaaaaaa"
NEW = "cccccccc"
ROLES = ("prefill", "decode")
SURGE_2 = planner.RoleConfig(max_surge=2, max_unavailable=1)


def _role(name: str, target: int, config: planner.RoleConfig) -> stock.RoleInput:
    return stock.RoleInput(name=name, target=target, config=config)


def _names(count: int) -> tuple[str, ...]:
    return ROLES if count == len(ROLES) else tuple(f"role{index}" for index in range(count))


def _state(
    old: tuple[int, ...], new: tuple[int, ...], initial: tuple[int, ...]
) -> list[builders.JsonObject]:
    """A slice's LWS: old and new replicas per role, every group ready, the snapshot taken."""
    lws = []
    names = _names(len(old))
    for role, replicas, start in zip(names, old, initial, strict=True):
        lws.append(builders.make_lws(role, revision=OLD, replicas=replicas, initial=start))
    for role, replicas in zip(names, new, strict=True):
        lws.append(builders.make_lws(role, revision=NEW, replicas=replicas))
    return lws


def _pass(
    old: tuple[int, ...],
    new: tuple[int, ...],
    *,
    initial: tuple[int, ...],
    target: tuple[int, ...],
    configs: tuple[planner.RoleConfig, ...],
    control: rollout.SliceControl,
) -> rollout.SlicePlan:
    names = _names(len(target))
    roles = [_role(n, t, c) for n, t, c in zip(names, target, configs, strict=True)]
    return rollout.plan_slice(
        set_name="llm",
        slice_index=0,
        revision=NEW,
        roles=roles,
        lws=builders.parse_children(*_state(old, new, initial)),
        control=control,
    )


def _held_trajectory(
    initial: tuple[int, ...],
    target: tuple[int, ...],
    configs: tuple[planner.RoleConfig, ...],
    percent: int,
) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """The (old, new) states a held slice passes through, by running `plan_slice` pass after
    pass with every group ready, until it holds or completes."""
    old, new = initial, tuple(0 for _ in initial)
    states = [(old, new)]
    for _ in range(4 * sum(initial) + 4 * sum(target) + 10):
        result = _pass(
            old,
            new,
            initial=initial,
            target=target,
            configs=configs,
            control=rollout.SliceControl(hold_at_percent=percent),
        )
        if result.phase is rollout.Phase.HELD or result.step is None:
            return states
        old, new = tuple(result.step.old), tuple(result.step.new)
        states.append((old, new))
    raise AssertionError("no hold and no end")


def _reached(new: tuple[int, ...], target: tuple[int, ...], percent: int) -> bool:
    return all(have * 100 >= percent * wanted for have, wanted in zip(new, target, strict=True))


def _planner_prefix(
    initial: tuple[int, ...],
    target: tuple[int, ...],
    configs: tuple[planner.RoleConfig, ...],
    percent: int,
) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """The planner's own trajectory (with each role's floor, the hooks' parity mode) cut at the
    first state at or past the hold's share, or where the old revision is gone (its LWS are then
    deleted: the slice is steady, there is nothing left to hold beside)."""
    sequence = planner.rollout_sequence(
        initial_old=list(initial),
        target=list(target),
        config=list(configs),
        max_passes=200,
        floor=True,
    )
    states = []
    for state in sequence:
        old, new = tuple(state.old), tuple(state.new)
        states.append((old, new))
        if _reached(new, target, percent) or not any(old):
            break
    return states


@pytest.mark.parametrize("percent", [0, 10, 25, 40, 50, 75, 90, 99])
@pytest.mark.parametrize(
    ("initial", "target", "configs"),
    [
        ((5, 2), (5, 2), (SURGE_2, SURGE_2)),  # the worked example
        ((10, 2), (6, 8), (planner.RoleConfig(2, 0), planner.RoleConfig(2, 0))),
        ((4, 4), (4, 4), (planner.RoleConfig(0, 2), planner.RoleConfig(0, 2))),
        ((4, 2), (4, 2), (planner.DEFAULT_CONFIG, planner.DEFAULT_CONFIG)),
        ((3, 1), (6, 2), (planner.RoleConfig(1, 1), planner.RoleConfig(1, 0))),
    ],
    ids=["5-2-to-5-2", "10-2-to-6-8", "4-4-unavailable-2", "4-2-defaults", "3-1-to-6-2"],
)
def test_a_held_slice_follows_the_planner_until_the_share_and_holds(
    initial: tuple[int, ...],
    target: tuple[int, ...],
    configs: tuple[planner.RoleConfig, ...],
    percent: int,
) -> None:
    assert _held_trajectory(initial, target, configs, percent) == _planner_prefix(
        initial, target, configs, percent
    )


@pytest.mark.parametrize("vector", golden_params("planner_sequences.json", lambda i, v: v["name"]))
def test_the_hold_cuts_every_upstream_sequence_at_its_share(vector: dict[str, object]) -> None:
    initial = tuple(vector["initialOld"])  # type: ignore[arg-type]
    target = tuple(vector["target"])  # type: ignore[arg-type]
    configs = tuple(
        planner.RoleConfig(c["maxSurge"], c["maxUnavailable"])
        for c in vector["config"]  # type: ignore[attr-defined]
    )
    for percent in (25, 50):
        assert _held_trajectory(initial, target, configs, percent) == _planner_prefix(
            initial, target, configs, percent
        )


def test_a_hold_reached_in_the_middle_of_a_batch_holds_past_the_share() -> None:
    """25% of prefill 5 is 2 groups (rounded up); the first step brings 2 and decode 1 of 2:
    the planner's step is never cut short, so the slice holds at 40% and 50%."""
    states = _held_trajectory((5, 2), (5, 2), (SURGE_2, SURGE_2), 25)
    assert states[-1] == ((5, 2), (2, 1))


def test_a_lowered_share_holds_where_the_rollout_stands() -> None:
    result = _pass(
        (2, 1),
        (4, 2),
        initial=(5, 2),
        target=(5, 2),
        configs=(SURGE_2, SURGE_2),
        control=rollout.SliceControl(hold_at_percent=10),
    )
    assert result.phase is rollout.Phase.HELD
    assert result.created == {} and result.initial_replicas == {}
    # Nothing moves: every LWS keeps its replicas.
    assert set(result.replicas.values()) <= {2, 1, 4}


def test_a_hold_waits_for_readiness_like_any_rollout() -> None:
    lws = _state((5, 2), (2, 1), (5, 2))
    lws[2]["status"]["readyReplicas"] = 1  # new prefill: one of two groups ready
    result = rollout.plan_slice(
        set_name="llm",
        slice_index=0,
        revision=NEW,
        roles=[_role("prefill", 5, SURGE_2), _role("decode", 2, SURGE_2)],
        lws=builders.parse_children(*lws),
        control=rollout.SliceControl(hold_at_percent=25),
    )
    assert result.phase is rollout.Phase.WAITING


# --- the partition ----------------------------------------------------------------------------


def _partitioned(*lws: builders.JsonObject, targets: tuple[int, int] = (2, 1)) -> rollout.SlicePlan:
    return rollout.plan_slice(
        set_name="llm",
        slice_index=0,
        revision=NEW,
        roles=[_role(n, t, planner.DEFAULT_CONFIG) for n, t in zip(ROLES, targets, strict=True)],
        lws=builders.parse_children(*lws),
        control=rollout.SliceControl(partitioned=True, hold_at_percent=0),
    )


def test_a_partitioned_slice_on_its_old_revision_scales_but_never_rolls() -> None:
    result = _partitioned(
        builders.make_lws("prefill", revision=OLD, replicas=2),
        builders.make_lws("decode", revision=OLD, replicas=1),
        targets=(3, 1),
    )
    assert result.phase is rollout.Phase.PARTITIONED
    assert result.created == {} and result.initial_replicas == {}
    assert result.replicas == {f"llm-0-{OLD}-prefill": 3, f"llm-0-{OLD}-decode": 1}


def test_a_partitioned_slice_in_the_middle_of_a_rollout_stays_as_it_is() -> None:
    lws = _state((4, 2), (2, 1), (5, 2))
    result = _partitioned(*lws, targets=(5, 2))
    assert result.phase is rollout.Phase.PARTITIONED
    assert result.created == {}
    observed = {item.name: item.replicas for item in builders.parse_children(*lws)}
    assert dict(result.replicas) == observed


def test_a_partitioned_slice_already_on_the_new_revision_stays_steady() -> None:
    result = _partitioned(
        builders.make_lws("prefill", revision=NEW, replicas=2),
        builders.make_lws("decode", revision=NEW, replicas=1),
    )
    assert result.phase is rollout.Phase.STEADY


def test_slice_controls_follow_the_annotations() -> None:
    control = controls.control_of(
        {api.ANNOTATION_ROLLOUT_PARTITION: "1", api.ANNOTATION_ROLLOUT_HOLD_AT: "25%"}
    )
    assert canary.slice_control(control, 0, rollback=False) == rollout.SliceControl(
        hold_at_percent=25
    )
    assert canary.slice_control(control, 1, rollback=False).partitioned
    assert canary.slice_control(control, 0, rollback=True).hold_at_percent is None


# --- what the status says -------------------------------------------------------------------


def test_a_rollback_says_that_the_hold_does_not_apply() -> None:
    held = controls.control_of({api.ANNOTATION_ROLLOUT_HOLD_AT: "25%"})
    note = canary.rollback_note(held, rollback=True, revision=OLD)
    assert note == (
        f"a rollback to revision {OLD}, which annotation {api.ANNOTATION_ROLLOUT_HOLD_AT} (25%)"
        " does not hold"
    )
    assert canary.rollback_note(held, rollback=False, revision=OLD) == ""
    assert canary.rollback_note(controls.Control(), rollback=True, revision=OLD) == ""


def test_held_and_partitioned_slices_read_as_standing_on_purpose() -> None:
    held = rollout.SlicePlan(slice_index=0, phase=rollout.Phase.HELD, replicas={})
    parted = rollout.SlicePlan(slice_index=1, phase=rollout.Phase.PARTITIONED, replicas={})
    steady = rollout.SlicePlan(slice_index=2, phase=rollout.Phase.STEADY, replicas={})
    moving = rollout.SlicePlan(slice_index=3, phase=rollout.Phase.WAITING, replicas={})
    hold = controls.control_of({api.ANNOTATION_ROLLOUT_HOLD_AT: "25%"})
    share = canary.Share("prefill 2/5, decode 1/2", groups=3)
    both = canary.progressing([held, parted, steady], revision=NEW, control=hold, share=share)
    assert both is not None
    assert (both.status, both.reason) == (api.ConditionStatus.UNKNOWN, api.Reason.ROLLOUT_HELD)
    assert (
        "slice 0 holds at 25% of revision cccccccc (prefill 2/5, decode 1/2), both revisions"
        " serving" in both.message
    )
    assert "slice 1 is past annotation" in both.message
    assert both.message.endswith(
        f"raise or remove annotation {api.ANNOTATION_ROLLOUT_HOLD_AT} or"
        f" {api.ANNOTATION_ROLLOUT_PARTITION} to roll on"
    )
    only = canary.progressing([parted, steady], revision=NEW, control=NONE, share=NOTHING)
    assert only is not None and only.reason is api.Reason.ROLLOUT_PARTITIONED
    assert canary.progressing([held, moving], revision=NEW, control=hold, share=NOTHING) is None


def test_one_slice_reads_in_the_singular_and_only_the_annotation_set_is_named() -> None:
    """Regression (issue 35 item 8): "slices 0 hold at 25%", and both annotations named when
    only the hold was set."""
    held = rollout.SlicePlan(slice_index=0, phase=rollout.Phase.HELD, replicas={})
    hold = controls.control_of({api.ANNOTATION_ROLLOUT_HOLD_AT: "25%"})
    share = canary.Share("prefill 1/4, decode 1/1", groups=2)
    condition = canary.progressing([held], revision=NEW, control=hold, share=share)
    assert condition is not None
    assert condition.message == (
        "slice 0 holds at 25% of revision cccccccc (prefill 1/4, decode 1/1), both revisions"
        f" serving; raise or remove annotation {api.ANNOTATION_ROLLOUT_HOLD_AT} to roll on"
    )
    parted = [
        rollout.SlicePlan(slice_index=index, phase=rollout.Phase.PARTITIONED, replicas={})
        for index in (1, 2)
    ]
    partitioned = canary.progressing(parted, revision=NEW, control=NONE, share=NOTHING)
    assert partitioned is not None
    assert partitioned.message == (
        f"slices 1-2 are past annotation {api.ANNOTATION_ROLLOUT_PARTITION} and keep the revision"
        f" they run; raise or remove annotation {api.ANNOTATION_ROLLOUT_PARTITION} to roll on"
    )


def test_a_malformed_hold_says_how_it_is_read_and_that_nothing_new_serves_yet() -> None:
    """Regression: a hold of "150%" read "hold at 0% ... both revisions serving" with the new
    revision at 0 groups."""
    held = rollout.SlicePlan(slice_index=0, phase=rollout.Phase.HELD, replicas={})
    malformed = controls.control_of({api.ANNOTATION_ROLLOUT_HOLD_AT: "150%"})
    share = canary.Share("prefill 0/4, decode 0/2", groups=0)
    condition = canary.progressing([held], revision=NEW, control=malformed, share=share)
    assert condition is not None
    assert (
        f"slice 0 holds at 0% (annotation {api.ANNOTATION_ROLLOUT_HOLD_AT} is malformed: read as"
        " 0%) of revision cccccccc (prefill 0/4, decode 0/2), the new revision runs no group yet"
    ) in condition.message


NONE = controls.Control()
NOTHING = canary.Share("", groups=0)


def test_a_message_about_a_hundred_slices_stays_short() -> None:
    plans = [
        rollout.SlicePlan(slice_index=index, phase=rollout.Phase.PARTITIONED, replicas={})
        for index in range(1, 100, 2)  # fifty separate ranges
    ]
    condition = canary.progressing(plans, revision=NEW, control=NONE, share=NOTHING)
    assert condition is not None
    assert "slices 1; 3; 5; 7; 9; and 45 more are past" in condition.message
    assert len(condition.message) < 1000
