"""The worked rollout examples of docs/rollout.md as literal data, for planner and sim tests.

Each example: two roles (prefill, decode), their old replicas, their targets, the surge and
unavailability both roles use, and every state of the rollout as (old, new) per role, written here
as ((oldP, oldD), (newP, newD)).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

Vector = tuple[int, int]
State = tuple[Vector, Vector]


@dataclass(frozen=True)
class WorkedExample:
    initial_old: Vector
    target: Vector
    max_surge: int
    max_unavailable: int
    states: tuple[State, ...]


WORKED_EXAMPLES = {
    # The design document shows 7 passes; the code lets rule 6 scale new up while it drains.
    "5p2d-surge2-unavailable1-6-passes": WorkedExample(
        initial_old=(5, 2),
        target=(5, 2),
        max_surge=2,
        max_unavailable=1,
        states=(
            ((5, 2), (0, 0)),
            ((5, 2), (2, 1)),
            ((4, 2), (2, 1)),
            ((3, 2), (4, 2)),
            ((2, 1), (4, 2)),
            ((2, 1), (5, 2)),
            ((0, 0), (5, 2)),
        ),
    ),
    "10-2-to-6-8-surge2": WorkedExample(
        initial_old=(10, 2),
        target=(6, 8),
        max_surge=2,
        max_unavailable=0,
        states=(
            ((10, 2), (0, 0)),
            ((8, 2), (0, 0)),
            ((6, 2), (0, 0)),
            ((6, 2), (2, 2)),
            ((4, 1), (2, 2)),
            ((4, 1), (3, 4)),
            ((4, 1), (4, 5)),
            ((2, 1), (4, 5)),
            ((2, 1), (5, 7)),
            ((2, 1), (6, 8)),
            ((0, 0), (6, 8)),
        ),
    ),
    "4-4-surge0-unavailable2": WorkedExample(
        initial_old=(4, 4),
        target=(4, 4),
        max_surge=0,
        max_unavailable=2,
        states=(
            ((4, 4), (0, 0)),
            ((2, 2), (0, 0)),
            ((2, 2), (2, 2)),
            ((0, 0), (2, 2)),
            ((0, 0), (4, 4)),
        ),
    ),
}


def worked_example_params() -> list[object]:
    """The examples as pytest parameters, with their names as ids."""
    return [pytest.param(example, id=name) for name, example in WORKED_EXAMPLES.items()]
