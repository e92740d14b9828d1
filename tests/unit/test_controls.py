"""The controls of a set's annotations (`hooks.core.controls`): values, defaults, malformed."""

from __future__ import annotations

import pytest

from hooks import api
from hooks.core import controls


def test_no_annotations_mean_the_defaults() -> None:
    control = controls.control_of({})
    assert control == controls.Control()
    assert (control.paused, control.deadline_seconds, control.history_limit) == (False, 1800, 10)
    assert (control.partition, control.hold_at_percent) == (None, None)


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({api.ANNOTATION_PAUSED: "true"}, {"paused": True}),
        ({api.ANNOTATION_PROGRESS_DEADLINE: "0"}, {"deadline_seconds": 0}),
        ({api.ANNOTATION_HISTORY_LIMIT: "3"}, {"history_limit": 3}),
        ({api.ANNOTATION_HISTORY_LIMIT: "0"}, {"history_limit": 0}),
        ({api.ANNOTATION_ROLLOUT_PARTITION: "1"}, {"partition": 1}),
        ({api.ANNOTATION_ROLLOUT_PARTITION: "0"}, {"partition": 0}),
        ({api.ANNOTATION_ROLLOUT_HOLD_AT: "25%"}, {"hold_at_percent": 25}),
        ({api.ANNOTATION_ROLLOUT_HOLD_AT: "0%"}, {"hold_at_percent": 0}),
        ({api.ANNOTATION_ROLLOUT_HOLD_AT: "100%"}, {"hold_at_percent": None}),  # no hold
    ],
    ids=lambda value: str(value),
)
def test_well_formed_values(annotations: dict[str, str], expected: dict[str, object]) -> None:
    control = controls.control_of(annotations)
    assert {key: getattr(control, key) for key in expected} == expected
    assert control.problems == ()


@pytest.mark.parametrize(
    ("key", "text", "expected"),
    [
        # Paused, like the canary controls: a mistake never lets a rollout run.
        (api.ANNOTATION_PAUSED, "yes", {"paused": True}),
        (api.ANNOTATION_PAUSED, "True", {"paused": True}),
        (api.ANNOTATION_PROGRESS_DEADLINE, "15m", {"deadline_seconds": 1800}),
        (api.ANNOTATION_HISTORY_LIMIT, "-1", {"history_limit": 10}),
        (api.ANNOTATION_HISTORY_LIMIT, "ten", {"history_limit": 10}),
        # The canary controls read cautiously: nothing more rolls until the value is fixed.
        (api.ANNOTATION_ROLLOUT_PARTITION, "one", {"partition": 0}),
        (api.ANNOTATION_ROLLOUT_PARTITION, "-1", {"partition": 0}),
        (api.ANNOTATION_ROLLOUT_HOLD_AT, "25", {"hold_at_percent": 0}),
        (api.ANNOTATION_ROLLOUT_HOLD_AT, "101%", {"hold_at_percent": 0}),
        (api.ANNOTATION_ROLLOUT_HOLD_AT, "2.5%", {"hold_at_percent": 0}),
    ],
)
def test_issue25_item6_malformed_values_are_reported_and_read_cautiously(
    key: str, text: str, expected: dict[str, object]
) -> None:
    control = controls.control_of({key: text})
    assert {name: getattr(control, name) for name in expected} == expected
    (problem,) = control.problems
    assert problem.reason is api.Reason.INVALID_ANNOTATION
    assert key in problem.message and repr(text) in problem.message


def test_a_long_malformed_value_is_quoted_short() -> None:
    (problem,) = controls.control_of({api.ANNOTATION_ROLLOUT_HOLD_AT: "x" * 100_000}).problems
    assert len(problem.message) < 400
