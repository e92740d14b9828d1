"""Unit tests of the planner: golden vectors, docs/rollout.md examples, upstream quirks."""

from __future__ import annotations

from typing import Any

import pytest

from hooks.core import planner
from hooks.core.planner import DEFAULT_CONFIG, RoleConfig, Step, StepRule
from tests.shared import by_name, golden_params
from tests.spec_examples import WorkedExample, worked_example_params

Vector = tuple[int, ...]


def _configs(raw: list[dict[str, int]]) -> list[RoleConfig]:
    return [RoleConfig(max_surge=c["maxSurge"], max_unavailable=c["maxUnavailable"]) for c in raw]


def _states(steps: list[Step]) -> list[tuple[Vector, Vector]]:
    return [(step.old, step.new) for step in steps]


def _upstream_pass_limit(initial_old: list[int], target: list[int]) -> int:
    """The pass limit of upstream's ComputeAllSteps test helper."""
    return 2 * max(max(initial_old), max(target)) + 10


# --- golden vectors (../shared/golden; each test skips, naming the file, when it is absent) ---


def _nextstep_id(index: int, vector: Any) -> str:
    return (
        f"{index:03d}-initial{vector['initialOld']}-old{vector['currentOld']}"
        f"-new{vector['currentNew']}-target{vector['target']}"
    ).replace(" ", "")


def _config_id(index: int, row: Any) -> str:
    return (
        f"{index:02d}-replicas{row['replicas']}-surge{row['maxSurge']}"
        f"-unavailable{row['maxUnavailable']}" + ("-error" if "error" in row else "")
    )


@pytest.mark.parametrize("vector", golden_params("planner_nextstep.json", _nextstep_id))
def test_next_step_matches_upstream_vector(vector: dict[str, Any]) -> None:
    step = planner.next_step(
        initial_old=vector["initialOld"],
        current_old=vector["currentOld"],
        current_new=vector["currentNew"],
        target=vector["target"],
        config=_configs(vector["config"]),
    )
    expected = vector["next"]
    if expected is None:
        assert step is None
    else:
        assert step is not None
        assert (list(step.old), list(step.new)) == (expected["past"], expected["new"])


@pytest.mark.parametrize("case", golden_params("planner_sequences.json", by_name))
def test_rollout_sequence_matches_upstream_sequence(case: dict[str, Any]) -> None:
    steps = planner.rollout_sequence(
        initial_old=case["initialOld"],
        target=case["target"],
        config=_configs(case["config"]),
        max_passes=_upstream_pass_limit(case["initialOld"], case["target"]),
    )
    assert [[list(s.old), list(s.new)] for s in steps] == [
        [s["past"], s["new"]] for s in case["steps"]
    ]


@pytest.mark.parametrize("row", golden_params("rollout_config.json", _config_id))
def test_resolve_config_matches_upstream(row: dict[str, Any]) -> None:
    config = planner.resolve_config(
        replicas=row["replicas"], max_surge=row["maxSurge"], max_unavailable=row["maxUnavailable"]
    )
    expected = row["config"]
    assert config == RoleConfig(
        max_surge=expected["maxSurge"], max_unavailable=expected["maxUnavailable"]
    )


# --- docs/rollout.md worked examples, as literal data (tests/spec_examples.py) ---

SURGE2_UNAVAILABLE1 = RoleConfig(max_surge=2, max_unavailable=1)


@pytest.mark.parametrize("example", worked_example_params())
def test_spec_worked_example(example: WorkedExample) -> None:
    config = RoleConfig(max_surge=example.max_surge, max_unavailable=example.max_unavailable)
    steps = planner.rollout_sequence(
        initial_old=example.initial_old,
        target=example.target,
        config=[config, config],
        max_passes=50,
    )
    assert _states(steps) == list(example.states)


def test_design_doc_example_rule_6_scales_new_in_the_same_pass_as_the_drain() -> None:
    step = planner.next_step(
        initial_old=(5, 2),
        current_old=(4, 2),
        current_new=(2, 1),
        target=(5, 2),
        config=[SURGE2_UNAVAILABLE1] * 2,
    )
    assert step == Step(old=(3, 2), new=(4, 2), rule=StepRule.FORCE_DRAIN)


def test_rules_of_design_doc_example() -> None:
    steps = planner.rollout_sequence(
        initial_old=(5, 2), target=(5, 2), config=[SURGE2_UNAVAILABLE1] * 2, max_passes=50
    )
    assert [s.rule for s in steps] == [
        StepRule.START,
        StepRule.SCALE_UP,
        StepRule.DRAIN,
        StepRule.FORCE_DRAIN,
        StepRule.DRAIN,
        StepRule.SCALE_UP,
        StepRule.NEW_AT_TARGET,
    ]


# --- single rules ---


def _step(
    *, initial_old: Vector, current_old: Vector, current_new: Vector, target: Vector
) -> Step | None:
    return planner.next_step(
        initial_old=initial_old,
        current_old=current_old,
        current_new=current_new,
        target=target,
        config=[DEFAULT_CONFIG] * len(target),
    )


def test_complete_rollout_has_no_step() -> None:
    assert _step(initial_old=(3, 1), current_old=(0, 0), current_new=(3, 1), target=(3, 1)) is None


def test_new_above_target_with_no_old_is_complete() -> None:
    assert _step(initial_old=(3, 1), current_old=(0, 0), current_new=(4, 2), target=(3, 1)) is None


def test_zero_step_count_has_no_step() -> None:
    assert _step(initial_old=(0, 0), current_old=(0, 0), current_new=(0, 0), target=(0, 0)) is None


def test_empty_role_list_has_no_step() -> None:
    assert _step(initial_old=(), current_old=(), current_new=(), target=()) is None


def test_old_above_initial_is_clamped_to_initial() -> None:
    step = _step(initial_old=(3, 2), current_old=(5, 1), current_new=(1, 1), target=(3, 2))
    assert step == Step(old=(3, 1), new=(1, 1), rule=StepRule.ABNORMAL)


def test_new_at_target_drains_every_role_at_once() -> None:
    step = _step(initial_old=(3, 2), current_old=(2, 1), current_new=(3, 2), target=(3, 2))
    assert step == Step(old=(0, 0), new=(3, 2), rule=StepRule.NEW_AT_TARGET)


def test_scale_up_moves_every_role_to_the_slowest_role_next_index() -> None:
    # steps = 6; decode's index (0) is the slowest, so both go to index 1.
    step = _step(initial_old=(6, 2), current_old=(5, 2), current_new=(1, 0), target=(6, 2))
    assert step == Step(old=(5, 2), new=(1, 1), rule=StepRule.SCALE_UP)


def test_scale_up_ignores_the_surge_of_roles_with_target_zero() -> None:
    step = _step(initial_old=(2, 5), current_old=(2, 5), current_new=(0, 0), target=(2, 0))
    assert step == Step(old=(2, 5), new=(1, 0), rule=StepRule.SCALE_UP)


def test_surge_blocked_scale_up_drains_proportionally() -> None:
    step = _step(initial_old=(2, 2), current_old=(2, 2), current_new=(1, 1), target=(2, 2))
    assert step == Step(old=(1, 1), new=(1, 1), rule=StepRule.DRAIN)


def test_orphan_prevention_keeps_one_old_replica_while_another_role_drains() -> None:
    # Rule 4 is blocked by role 0's surge (1 old + 1 new > 1 + 0). The drain candidate is (0, 1):
    # role 1 keeps 1 for its floor, so role 0 would be orphaned at 0 and keeps 1 as well.
    step = planner.next_step(
        initial_old=(1, 2),
        current_old=(1, 2),
        current_new=(0, 0),
        target=(1, 1),
        config=[
            RoleConfig(max_surge=0, max_unavailable=1),
            RoleConfig(max_surge=2, max_unavailable=0),
        ],
    )
    assert step == Step(old=(1, 1), new=(0, 0), rule=StepRule.DRAIN)


def test_orphan_prevention_drains_all_when_new_covers_the_unavailability_floor() -> None:
    # Force drain: role 0 drains to 0, role 1 would keep 1; the candidate new counts (1, 2) already
    # cover every floor, so both go to 0.
    step = planner.next_step(
        initial_old=(6, 2),
        current_old=(1, 1),
        current_new=(1, 1),
        target=(1, 2),
        config=[
            RoleConfig(max_surge=0, max_unavailable=2),
            RoleConfig(max_surge=4, max_unavailable=0),
        ],
    )
    assert step == Step(old=(0, 0), new=(1, 2), rule=StepRule.FORCE_DRAIN)


# --- upstream quirks ---


def test_rule_5_checks_after_orphan_prevention_and_rule_6_before() -> None:
    """Rule 5's only drain is undone by orphan prevention, so it yields nothing; rule 6 sees a drain
    before orphan prevention undoes it the same way, and returns a step with old unchanged whose new
    counts pass rule 4's surge check (role 0: 1 old + 1 new > target 1 + surge 0)."""
    step = planner.next_step(
        initial_old=(1, 0, 4),
        current_old=(1, 0, 2),
        current_new=(0, 0, 0),
        target=(1, 0, 4),
        config=[
            RoleConfig(max_surge=0, max_unavailable=2),
            RoleConfig(max_surge=0, max_unavailable=2),
            RoleConfig(max_surge=2, max_unavailable=1),
        ],
    )
    assert step == Step(old=(1, 0, 2), new=(1, 0, 2), rule=StepRule.FORCE_DRAIN)


def test_unavailability_floor_is_not_capped_at_current_old() -> None:
    step = planner.next_step(
        initial_old=(6, 5, 6),
        current_old=(2, 3, 4),
        current_new=(2, 3, 4),
        target=(6, 3, 4),
        config=[
            RoleConfig(max_surge=0, max_unavailable=1),
            RoleConfig(max_surge=2, max_unavailable=0),
            RoleConfig(max_surge=1, max_unavailable=2),
        ],
    )
    assert step == Step(old=(3, 1, 1), new=(2, 3, 4), rule=StepRule.DRAIN)


def test_orphan_prevention_lifts_a_role_already_at_zero_old() -> None:
    step = planner.next_step(
        initial_old=(1, 1, 2),
        current_old=(0, 1, 2),
        current_new=(4, 4, 0),
        target=(6, 4, 2),
        config=[
            RoleConfig(max_surge=1, max_unavailable=0),
            RoleConfig(max_surge=0, max_unavailable=1),
            RoleConfig(max_surge=2, max_unavailable=0),
        ],
    )
    assert step == Step(old=(1, 1, 2), new=(4, 4, 1), rule=StepRule.FORCE_DRAIN)


def test_force_drain_can_dip_below_the_floor_while_its_new_replicas_start() -> None:
    """Decode (2 -> 2, max_unavailable 0) loses its last old replica in the pass that creates its
    second new one: until that one is ready, 1 of 2 serves."""
    config = [
        RoleConfig(max_surge=0, max_unavailable=2),
        RoleConfig(max_surge=4, max_unavailable=0),
    ]
    steps = planner.rollout_sequence(
        initial_old=(6, 2), target=(1, 2), config=config, max_passes=50
    )
    assert _states(steps) == [
        ((6, 2), (0, 0)),
        ((4, 2), (0, 0)),
        ((2, 2), (0, 0)),
        ((1, 2), (0, 0)),
        ((1, 2), (1, 1)),
        ((1, 1), (1, 1)),
        ((0, 0), (1, 2)),
    ]
    assert steps[-1].rule == StepRule.FORCE_DRAIN
    assert steps[-1].old[1] + steps[-2].new[1] == 1


def test_growing_role_gets_no_availability_floor() -> None:
    config = [
        RoleConfig(max_surge=0, max_unavailable=1),
        RoleConfig(max_surge=2, max_unavailable=0),
    ]
    steps = planner.rollout_sequence(
        initial_old=(1, 2), target=(1, 3), config=config, max_passes=50
    )
    assert _states(steps) == [
        ((1, 2), (0, 0)),
        ((1, 1), (0, 0)),
        ((0, 0), (0, 0)),
        ((0, 0), (1, 2)),
        ((0, 0), (1, 3)),
    ]


def test_orphan_prevention_with_surge_zero_can_exceed_target_by_one() -> None:
    config = [
        RoleConfig(max_surge=0, max_unavailable=1),
        RoleConfig(max_surge=1, max_unavailable=0),
    ]
    steps = planner.rollout_sequence(
        initial_old=(1, 2), target=(1, 2), config=config, max_passes=50
    )
    assert _states(steps) == [
        ((1, 2), (0, 0)),
        ((1, 2), (1, 1)),
        ((1, 1), (1, 1)),
        ((0, 0), (1, 2)),
    ]
    assert steps[1].old[0] + steps[1].new[0] == 2


def test_upstream_pass_limit_can_cut_a_rollout_short() -> None:
    initial_old, target = [18, 9, 4, 20, 16], [4, 1, 4, 20, 17]
    config = [
        RoleConfig(max_surge=1, max_unavailable=4),
        RoleConfig(max_surge=0, max_unavailable=4),
        RoleConfig(max_surge=2, max_unavailable=4),
        RoleConfig(max_surge=4, max_unavailable=1),
        RoleConfig(max_surge=5, max_unavailable=0),
    ]
    limit = _upstream_pass_limit(initial_old, target)
    cut = planner.rollout_sequence(
        initial_old=initial_old, target=target, config=config, max_passes=limit
    )
    full = planner.rollout_sequence(
        initial_old=initial_old, target=target, config=config, max_passes=sum(initial_old + target)
    )
    assert len(cut) == limit + 1
    assert cut[-1].new != tuple(target)
    assert len(full) == limit + 2
    assert full[-1] == Step(old=(0, 0, 0, 0, 0), new=tuple(target), rule=StepRule.SCALE_UP)


# --- rollout_sequence and input checks ---


def test_rollout_sequence_starts_with_the_start_state() -> None:
    steps = planner.rollout_sequence(
        initial_old=[2, 1], target=[2, 1], config=[DEFAULT_CONFIG] * 2, max_passes=0
    )
    assert steps == [Step(old=(2, 1), new=(0, 0), rule=StepRule.START)]


def test_rollout_sequence_of_a_fresh_deploy_only_scales_up() -> None:
    steps = planner.rollout_sequence(
        initial_old=[0, 0], target=[3, 3], config=[DEFAULT_CONFIG] * 2, max_passes=20
    )
    assert _states(steps) == [
        ((0, 0), (0, 0)),
        ((0, 0), (1, 1)),
        ((0, 0), (2, 2)),
        ((0, 0), (3, 3)),
    ]


def test_steps_hold_tuples() -> None:
    step = planner.next_step(
        initial_old=[1], current_old=[1], current_new=[0], target=[1], config=[DEFAULT_CONFIG]
    )
    assert step == Step(old=(1,), new=(1,), rule=StepRule.SCALE_UP)
    assert isinstance(step.old, tuple)
    assert isinstance(step.new, tuple)


@pytest.mark.parametrize("field", ["initial_old", "current_old", "current_new", "target", "config"])
def test_next_step_rejects_vectors_of_different_lengths(field: str) -> None:
    arguments: dict[str, Any] = {
        "initial_old": (1, 1),
        "current_old": (1, 1),
        "current_new": (0, 0),
        "target": (1, 1),
        "config": [DEFAULT_CONFIG, DEFAULT_CONFIG],
    }
    arguments[field] = arguments[field][:1]
    with pytest.raises(ValueError, match="differ in length"):
        planner.next_step(**arguments)


def test_rollout_sequence_rejects_vectors_of_different_lengths() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        planner.rollout_sequence(
            initial_old=(1, 1), target=(1,), config=[DEFAULT_CONFIG] * 2, max_passes=5
        )


# --- scaled_value and resolve_config ---


@pytest.mark.parametrize(
    ("value", "total", "round_up", "expected"),
    [
        pytest.param(3, 10, True, 3, id="int-as-is"),
        pytest.param(7, 2, False, 7, id="int-ignores-total"),
        pytest.param(-2, 10, True, -2, id="negative-int-as-is"),
        pytest.param("25%", 10, True, 3, id="25%-of-10-up"),
        pytest.param("25%", 10, False, 2, id="25%-of-10-down"),
        pytest.param("20%", 10, True, 2, id="exact-up"),
        pytest.param("20%", 10, False, 2, id="exact-down"),
        pytest.param("1%", 1, True, 1, id="1%-of-1-up"),
        pytest.param("99%", 1, False, 0, id="99%-of-1-down"),
        pytest.param("0%", 10, True, 0, id="0%-up"),
        pytest.param("0%", 10, False, 0, id="0%-down"),
        pytest.param("100%", 7, True, 7, id="100%-up"),
        pytest.param("100%", 7, False, 7, id="100%-down"),
        pytest.param("150%", 7, True, 11, id="150%-of-7-up"),
        pytest.param("150%", 7, False, 10, id="150%-of-7-down"),
        pytest.param("50%", 0, True, 0, id="of-zero"),
        pytest.param("+50%", 4, True, 2, id="plus-sign"),
        pytest.param("-10%", 7, True, 0, id="negative-percent-up"),
        pytest.param("-10%", 7, False, -1, id="negative-percent-down"),
        pytest.param("007%", 100, True, 7, id="leading-zeros"),
    ],
)
def test_scaled_value(value: int | str, total: int, round_up: bool, expected: int) -> None:
    assert planner.scaled_value(value, total=total, round_up=round_up) == expected


@pytest.mark.parametrize(
    "value",
    ["0", "5", "", "%", "abc%", "5.5%", " 5%", "5 %", "5%%", "1_0%", "\u0665%", "+%", "1e2%"],
)
def test_scaled_value_rejects_strings_that_are_not_percentages(value: str) -> None:
    with pytest.raises(ValueError, match="IntOrString"):
        planner.scaled_value(value, total=10, round_up=True)


def test_scaled_value_rejects_percentages_outside_64_bits() -> None:
    with pytest.raises(ValueError, match="IntOrString"):
        planner.scaled_value(f"{2**63}%", total=1, round_up=True)


@pytest.mark.parametrize("value", [True, 1.5, None])
def test_scaled_value_rejects_other_types(value: Any) -> None:
    with pytest.raises(TypeError):
        planner.scaled_value(value, total=10, round_up=True)


@pytest.mark.parametrize(
    ("replicas", "max_surge", "max_unavailable", "expected"),
    [
        pytest.param(5, None, None, DEFAULT_CONFIG, id="both-absent"),
        pytest.param(5, 0, 0, DEFAULT_CONFIG, id="both-zero"),
        pytest.param(5, 3, None, RoleConfig(max_surge=3, max_unavailable=0), id="surge-only"),
        pytest.param(5, None, 2, RoleConfig(max_surge=0, max_unavailable=2), id="unavailable-only"),
        pytest.param(5, 2, 1, RoleConfig(max_surge=2, max_unavailable=1), id="both"),
        pytest.param(4, "50%", "25%", RoleConfig(max_surge=2, max_unavailable=1), id="percentages"),
        pytest.param(
            3, "10%", "10%", RoleConfig(max_surge=1, max_unavailable=0), id="round-up-down"
        ),
        pytest.param(3, "100%", "0", RoleConfig(max_surge=3, max_unavailable=0), id="bad-string"),
        pytest.param(3, "abc", "abc%", DEFAULT_CONFIG, id="both-bad-strings"),
        pytest.param(0, "50%", "50%", DEFAULT_CONFIG, id="zero-replicas"),
    ],
)
def test_resolve_config(
    replicas: int,
    max_surge: int | str | None,
    max_unavailable: int | str | None,
    expected: RoleConfig,
) -> None:
    assert (
        planner.resolve_config(
            replicas=replicas, max_surge=max_surge, max_unavailable=max_unavailable
        )
        == expected
    )
