"""Property tests of the rolling-update planner over whole rollouts with instant readiness.

Every rollout starts at `(initial_old, zeros)` and applies `next_step` until it returns None, as the
controller does when each step becomes ready before the next pass. The bounds below were found by
experiment (hundreds of thousands of random rollouts) and each is the strongest simple statement
that held; the counterexamples to the stronger ones are pinned in tests/unit/test_planner.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import example, given
from hypothesis import strategies as st

from hooks.core import planner
from hooks.core.planner import RoleConfig, Step, StepRule

MAX_ROLES = 5
MAX_REPLICAS = 20
MAX_BUDGET = 5


@dataclass(frozen=True, slots=True)
class Rollout:
    """A generated rollout: the inputs and every state `rollout_sequence` produced."""

    initial_old: tuple[int, ...]
    target: tuple[int, ...]
    config: tuple[RoleConfig, ...]
    steps: list[Step]


def pass_bound(initial_old: tuple[int, ...], target: tuple[int, ...]) -> int:
    """Passes that always suffice: see test_rollout_terminates_at_target."""
    return sum(initial_old) + sum(target)


def run(
    initial_old: tuple[int, ...], target: tuple[int, ...], config: tuple[RoleConfig, ...]
) -> Rollout:
    steps = planner.rollout_sequence(
        initial_old=initial_old,
        target=target,
        config=config,
        max_passes=pass_bound(initial_old, target),
    )
    return Rollout(initial_old=initial_old, target=target, config=config, steps=steps)


_replicas = st.integers(min_value=0, max_value=MAX_REPLICAS)
_configs = st.tuples(
    st.integers(min_value=0, max_value=MAX_BUDGET), st.integers(min_value=0, max_value=MAX_BUDGET)
).filter(lambda pair: pair != (0, 0))


@st.composite
def rollouts(draw: st.DrawFn) -> Rollout:
    roles = draw(st.integers(min_value=1, max_value=MAX_ROLES))
    initial_old = tuple(draw(st.lists(_replicas, min_size=roles, max_size=roles)))
    target = tuple(draw(st.lists(_replicas, min_size=roles, max_size=roles)))
    pairs = draw(st.lists(_configs, min_size=roles, max_size=roles))
    config = tuple(RoleConfig(max_surge=s, max_unavailable=u) for s, u in pairs)
    return run(initial_old, target, config)


# Cases the experiments found at the edges of each bound, always checked.
_UPSTREAM_LIMIT_TOO_SHORT = run(
    (18, 9, 4, 20, 16),
    (4, 1, 4, 20, 17),
    (
        RoleConfig(max_surge=1, max_unavailable=4),
        RoleConfig(max_surge=0, max_unavailable=4),
        RoleConfig(max_surge=2, max_unavailable=4),
        RoleConfig(max_surge=4, max_unavailable=1),
        RoleConfig(max_surge=5, max_unavailable=0),
    ),
)
_SURGE_ZERO_KEEP_ONE = run(
    (1, 2),
    (1, 2),
    (RoleConfig(max_surge=0, max_unavailable=1), RoleConfig(max_surge=1, max_unavailable=0)),
)
_FORCE_DRAIN_DIP = run(
    (6, 2),
    (1, 2),
    (RoleConfig(max_surge=0, max_unavailable=2), RoleConfig(max_surge=4, max_unavailable=0)),
)


def _transitions(rollout: Rollout) -> list[tuple[Step, Step]]:
    return list(zip(rollout.steps, rollout.steps[1:], strict=False))


@given(rollouts())
@example(_UPSTREAM_LIMIT_TOO_SHORT)
def test_rollout_terminates_at_target(rollout: Rollout) -> None:
    """The rollout ends at old all 0 and new == target within sum(initial_old) + sum(target) passes.

    Why that bound: with the potential sum(old) + sum(target - new), which starts at
    sum(initial_old) + sum(target) and is never negative (new never passes target), every step
    lowers it by at least 1 because some count moves and old never grows nor new shrinks (all three
    are checked here and in test_counts_move_one_way). Upstream's test helper stops at
    2 * max(max(initial_old), max(target)) + 10, which the example above exceeds (51 > 50 passes).
    """
    last = rollout.steps[-1]
    assert last.old == (0,) * len(rollout.target)
    assert last.new == rollout.target
    assert len(rollout.steps) - 1 <= pass_bound(rollout.initial_old, rollout.target)
    assert (
        planner.next_step(
            initial_old=rollout.initial_old,
            current_old=last.old,
            current_new=last.new,
            target=rollout.target,
            config=rollout.config,
        )
        is None
    )
    for before, after in _transitions(rollout):
        assert (after.old, after.new) != (before.old, before.new)
        assert after.rule is not StepRule.ABNORMAL


@given(rollouts())
def test_counts_move_one_way(rollout: Rollout) -> None:
    """New never decreases nor passes target; old never increases; only rule 6 moves both sides.

    "Only one side moves per step" is false for upstream's planner: a force drain
    (rule 6) also scales new up to the rule-4 candidate in the same pass.
    """
    for before, after in _transitions(rollout):
        assert all(a >= b for a, b in zip(after.new, before.new, strict=True))
        assert all(a <= b for a, b in zip(after.old, before.old, strict=True))
        assert all(n <= t for n, t in zip(after.new, rollout.target, strict=True))
        if after.old != before.old and after.new != before.new:
            assert after.rule is StepRule.FORCE_DRAIN


@given(rollouts())
@example(_SURGE_ZERO_KEEP_ONE)
def test_surge_bound(rollout: Rollout) -> None:
    """Per role and at every state: old + new <= max(initial_old, target + max(max_surge, 1)).

    So with max_surge >= 1, old + new <= max(initial_old, target) + max_surge holds. With max_surge
    0 it can be exceeded by one: orphan prevention in a force drain keeps 1 old replica of a role
    whose new count already reached its target (the example: old 1 + new 1 with target 1).
    """
    for step in rollout.steps:
        for old, new, initial, target, config in zip(
            step.old, step.new, rollout.initial_old, rollout.target, rollout.config, strict=True
        ):
            assert old + new <= max(initial, target + max(config.max_surge, 1))
            if config.max_surge >= 1:
                assert old + new <= max(initial, target) + config.max_surge


@given(rollouts())
@example(_FORCE_DRAIN_DIP)
def test_availability_bound(rollout: Rollout) -> None:
    """For every role with initial_old >= target: old + new >= target - max_unavailable at every
    state, and, for every step except a force drain, also while the step is under way
    (next old + previous new, the replicas ready before the new ones start).

    What is not guaranteed: a force drain computes its floor with the new replicas it creates in
    the same pass, so until they are ready a role can dip below target - max_unavailable (the
    example: 1 of 2 replicas with max_unavailable 0). A role that grows (initial_old < target) has
    no floor at all: its old replicas drain with the others, possibly to 0 before any new one runs.
    """
    for before, after in _transitions(rollout):
        for i, (initial, target, config) in enumerate(
            zip(rollout.initial_old, rollout.target, rollout.config, strict=True)
        ):
            if initial < target:
                continue
            floor = target - config.max_unavailable
            assert after.old[i] + after.new[i] >= floor
            if after.rule is not StepRule.FORCE_DRAIN:
                assert after.old[i] + before.new[i] >= floor
