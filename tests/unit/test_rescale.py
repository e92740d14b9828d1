"""Scaling while a rollout runs (docs/rollout.md): scaled passes one by one, and whole slices
played through the reconcile's slice planner against the design's scenario tables."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from hooks.cli import trajectory
from hooks.core import planner, rescale

DEFAULT = planner.DEFAULT_CONFIG
SURGE_2 = planner.RoleConfig(max_surge=2, max_unavailable=1)
State = tuple[str, str]
"""(old P/D, new P/D) after a pass, as the scenario tables write them."""


def _walk(
    old: tuple[int, int],
    *,
    rescale_at: Mapping[int, Mapping[str, int]],
    config: planner.RoleConfig = DEFAULT,
    hold_at: int | None = None,
) -> list[State]:
    roles = [
        trajectory.Role(name, count, count, lambda _target, c=config: c)
        for name, count in zip(("prefill", "decode"), old, strict=True)
    ]
    rows = trajectory.simulate(
        roles, rescale=rescale_at, ready_after=1, hold_at=hold_at, max_passes=40
    )
    return [("/".join(map(str, row.old)), "/".join(map(str, row.new))) for row in rows[1:]]


# The scenario tables of the design sketch (prefill P, decode D; maxSurge 1, maxUnavailable 0
# unless stated; a new group is Ready by the next pass), from the pass the target moves on.
SCENARIOS = {
    "raise-prefill-4-to-8-before-pass-4": (
        (4, 2),
        {4: {"prefill": 8}},
        DEFAULT,
        [("3/1", "6/1"), ("2/1", "6/2"), ("2/1", "7/2"), ("1/1", "7/2"), ("1/1", "8/2"),
         ("0/0", "8/2")],
    ),
    "lower-prefill-8-to-4-before-pass-6": (
        (8, 4),
        {6: {"prefill": 4}},
        DEFAULT,
        [("4/3", "2/2"), ("2/2", "2/2"), ("2/2", "3/3"), ("1/1", "3/3"), ("1/1", "4/4"),
         ("0/0", "4/4")],
    ),
    "lower-prefill-8-to-4-with-new-at-5": (
        (8, 4),
        {12: {"prefill": 4}},
        DEFAULT,
        [("1/1", "4/3"), ("1/1", "4/4"), ("0/0", "4/4")],
    ),
    "static-decode-2-to-4-before-pass-4": (
        (4, 2),
        {4: {"decode": 4}},
        DEFAULT,
        [("3/2", "2/3"), ("2/1", "2/3"), ("2/1", "3/4"), ("1/1", "3/4"), ("1/1", "4/4"),
         ("0/0", "4/4")],
    ),
    "prefill-8-to-12-to-5-to-9": (
        (8, 4),
        {4: {"prefill": 12}, 6: {"prefill": 5}, 8: {"prefill": 9}},
        DEFAULT,
        [("7/3", "6/1"), ("6/3", "6/2"), ("2/2", "5/2"), ("2/2", "5/3"), ("2/1", "8/3"),
         ("1/1", "8/4"), ("1/1", "9/4"), ("0/0", "9/4")],
    ),
    "back-to-the-record-above-it": (
        (4, 2),
        {4: {"prefill": 8}, 6: {"prefill": 4}},
        DEFAULT,
        [("3/1", "6/1"), ("2/1", "6/2"), ("0/0", "5/2"), ("0/0", "4/2")],
    ),
    "prefill-lowered-decode-raised": (
        (8, 4),
        {4: {"prefill": 4, "decode": 8}},
        DEFAULT,
        [("6/4", "1/4"), ("5/4", "1/4"), ("4/4", "1/4"), ("3/4", "1/4"), ("3/4", "2/5"),
         ("3/3", "2/5"), ("3/3", "2/6"), ("2/2", "2/6"), ("2/2", "3/7"), ("1/1", "3/7"),
         ("1/1", "4/8"), ("0/0", "4/8")],
    ),
    "surge-2-unavailable-1-prefill-5-to-9": (
        (5, 2),
        {3: {"prefill": 9}},
        SURGE_2,
        [("5/1", "6/2"), ("2/1", "6/2"), ("2/1", "9/2"), ("0/0", "9/2")],
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_a_slice_whose_target_moves_follows_the_design_table(name: str) -> None:
    old, moves, config, expected = SCENARIOS[name]
    states = _walk(old, rescale_at=moves, config=config)
    first = min(moves) - 1
    assert states[first : first + len(expected)] == expected
    assert states[-1] == ("0/0", expected[-1][1])


def test_back_to_the_record_below_it_resumes_upstreams_steps() -> None:
    """Prefill 8 → 4 before pass 6, back to 8 before pass 8: from pass 8 the slice is in parity
    mode again and takes the planner's steps (the design's S6b)."""
    states = _walk((8, 4), rescale_at={6: {"prefill": 4}, 8: {"prefill": 8}})
    assert states[5:] == [
        ("4/3", "2/2"), ("2/2", "2/2"), ("2/2", "3/2"), ("2/2", "4/2"), ("2/2", "5/3"),
        ("2/2", "6/3"), ("2/1", "6/3"), ("2/1", "7/4"), ("1/1", "7/4"), ("1/1", "8/4"),
        ("0/0", "8/4"), ("0/0", "8/4"),
    ]  # fmt: skip


def test_a_raise_while_held_is_served_the_old_revision_serving_the_rest() -> None:
    """Held at 50% with old 3/2 and new 2/1, prefill raised 4 → 8: new prefill goes to its share
    of 8, old prefill grows to serve the rest, decode's surge is given back, and the slice holds."""
    states = _walk((4, 2), rescale_at={6: {"prefill": 8}}, hold_at=50)
    assert states[4] == ("3/2", "2/1")
    assert states[5:] == [("4/1", "4/1"), ("4/1", "4/1"), ("4/1", "4/1")]


def test_growth_counts_the_old_groups_from_before_the_pass() -> None:
    """Old 3 beside new 2 Ready of a target raised to 8 (maxSurge 1): the new revision grows to
    8 + 1 - 3, never more, whatever the pass drains."""
    roles = [
        rescale.Role(target=8, config=DEFAULT, new=2, new_ready=2, initial_old=4),
        rescale.Role(target=2, config=DEFAULT, new=1, new_ready=1, initial_old=2),
    ]
    result = rescale.rolling(roles, [rescale.Old(replicas=(3, 2), ready=(3, 2))])
    assert result.new == (6, 1)
    assert result.old == ((3, 1),)
    assert result.moves == {rescale.Move.GROW, rescale.Move.DRAIN}


def test_a_removal_counts_every_removed_group_as_ready() -> None:
    """Two of four old groups are not Ready and the new revision has none Ready: the floor (4)
    needs every old group, since the ones removed might be the Ready ones."""
    roles = [
        rescale.Role(target=4, config=DEFAULT, new=1, new_ready=0, initial_old=4),
        rescale.Role(target=1, config=DEFAULT, new=1, new_ready=1, initial_old=1),
    ]
    result = rescale.rolling(roles, [rescale.Old(replicas=(4, 1), ready=(2, 1))])
    assert result.old == ((4, 1),)
    assert result.new == (1, 1)
    assert result.waits == (
        (0, rescale.Wait.SURGE),
        (1, rescale.Wait.STEP),
    )


def test_an_old_revision_keeps_a_group_of_each_role_until_it_goes_whole() -> None:
    roles = [
        rescale.Role(target=2, config=DEFAULT, new=2, new_ready=2, initial_old=2),
        rescale.Role(target=4, config=DEFAULT, new=2, new_ready=2, initial_old=4),
    ]
    result = rescale.rolling(roles, [rescale.Old(replicas=(1, 3), ready=(1, 3))])
    (old,) = result.old
    assert old[0] == 1 and old[1] is not None and old[1] >= 1


def test_a_paused_raise_is_split_in_proportion_to_what_each_revision_runs() -> None:
    roles = [
        rescale.Role(target=8, config=DEFAULT, new=1, new_ready=1, initial_old=4),
        rescale.Role(target=2, config=DEFAULT, new=1, new_ready=1, initial_old=2),
    ]
    result = rescale.stopped(roles, [rescale.Old(replicas=(3, 1), ready=(3, 1))])
    assert result.new == (2, 1)
    assert result.old == ((6, 1),)


def test_a_paused_lower_comes_out_of_the_old_revision_first() -> None:
    roles = [
        rescale.Role(target=3, config=DEFAULT, new=2, new_ready=2, initial_old=6),
        rescale.Role(target=2, config=DEFAULT, new=1, new_ready=1, initial_old=2),
    ]
    result = rescale.stopped(roles, [rescale.Old(replicas=(4, 1), ready=(4, 1))])
    assert result.new == (2, 1)
    assert result.old == ((1, 1),)
    assert result.waits == ()


@pytest.mark.parametrize(
    ("target", "recorded", "new", "scaled"),
    [
        (4, 4, 2, False),
        (4, 4, 4, False),
        (8, 4, 2, True),
        (3, 4, 2, True),
        (2, 2, 3, True),
        (None, 4, 5, False),
        (4, None, 2, False),
        (4, None, 5, True),
    ],
)
def test_scaled_mode_engages_on_a_moved_target_or_a_new_revision_above_it(
    target: int | None, recorded: int | None, new: int, scaled: bool
) -> None:
    assert rescale.is_scaled([(target, recorded, new)]) is scaled


def test_keep_for_counts_every_removed_group_as_ready() -> None:
    assert planner.keep_for(floor=4, old=4, old_ready=4, new_ready=1) == 3
    assert planner.keep_for(floor=4, old=4, old_ready=2, new_ready=1) == 4
    assert planner.keep_for(floor=4, old=4, old_ready=4, new_ready=4) == 0
