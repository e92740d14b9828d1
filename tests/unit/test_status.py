"""Role statuses and conditions (docs/rollout.md)."""

from __future__ import annotations

import pytest

from hooks import api
from hooks.core import problems, records, status
from hooks.wire import answers
from tests import builders

NEW = "cccccccc"
OLD = "aaaaaaaa"
EARLIER = "2026-11-29T09:00:00Z"


def compute(
    lws: list[records.ObservedObject],
    *,
    desired: dict[str, int | None] | None = None,
    problems: tuple[problems.Problem, ...] = (),
    observed: tuple[records.ObservedCondition, ...] = (),
    progressing: status.ConditionUpdate | None = None,
) -> api.DisaggregatedSetStatus:
    targets = desired if desired is not None else {"prefill": 2, "decode": 1}
    return status.compute(
        progressing=progressing,
        desired=targets,
        lws=lws,
        revision=NEW,
        generation=4,
        problems=problems,
        observed=observed,
        now=builders.NOW,
    )


def conditions(result: api.DisaggregatedSetStatus) -> dict[str, api.Condition]:
    return {c.type: c for c in result.conditions}


def ready_set() -> list[records.ObservedObject]:
    return builders.parse_children(
        builders.make_lws("prefill", revision=NEW, replicas=2),
        builders.make_lws("decode", revision=NEW, replicas=1),
    )


def test_role_statuses_sum_all_revisions_and_count_updated_only_at_target() -> None:
    lws = builders.parse_children(
        builders.make_lws("prefill", revision=NEW, replicas=1),
        builders.make_lws("prefill", revision=OLD, replicas=2, ready=1),
        builders.make_lws("decode", revision=NEW, replicas=1),
        builders.make_lws("encode", revision=OLD, replicas=3),
    )
    result = compute(lws)
    assert [r.model_dump() for r in result.role_statuses] == [
        {"name": "prefill", "replicas": 3, "ready_replicas": 2, "updated_replicas": 1},
        {"name": "decode", "replicas": 1, "ready_replicas": 1, "updated_replicas": 1},
    ]


def test_available_when_every_role_is_at_target() -> None:
    found = conditions(compute(ready_set()))
    assert found["Available"].status == "True"
    assert found["Available"].reason == api.Reason.ALL_ROLES_READY
    assert found["Progressing"].status == "False"
    assert found["Progressing"].reason == found["Available"].reason
    assert found["Progressing"].message == found["Available"].message
    assert found["Degraded"].status == "False"
    assert all(c.observed_generation == 4 for c in found.values())


def test_progressing_while_a_role_lags() -> None:
    lws = builders.parse_children(
        builders.make_lws("prefill", revision=NEW, replicas=2, ready=1),
        builders.make_lws("decode", revision=NEW, replicas=1),
    )
    found = conditions(compute(lws))
    assert found["Progressing"].status == "True"
    assert found["Progressing"].reason == api.Reason.ROLLOUT_IN_PROGRESS
    assert found["Available"].status == "False"
    assert "prefill" in found["Progressing"].message


def test_unknown_target_is_never_available_even_at_zero() -> None:
    found = conditions(compute([], desired={"prefill": 0, "decode": None}))
    assert found["Available"].status == "False"


def test_an_external_role_at_zero_beside_busy_roles_is_never_available() -> None:
    """Regression (issue 35 item 7): prefill 4, decode 0 read Available=True AllRolesReady."""
    lws = builders.parse_children(
        builders.make_lws("prefill", revision=NEW, replicas=4),
        builders.make_lws("decode", revision=NEW, replicas=0),
    )
    found = conditions(compute(lws, desired={"prefill": 4, "decode": 0}))
    for kind in ("Available", "Progressing"):  # settled, and not available
        assert (found[kind].status, found[kind].reason) == ("False", "RoleScaledToZero")
    assert found["Available"].message == (
        "decode is at 0 groups while prefill 4 run: the set cannot serve; scale the External"
        " role's DisaggregatedSetRoleScaler up, or every role to 0"
    )
    assert found["Degraded"].status == "False"


def test_static_roles_at_zero_beside_a_busy_external_role_name_every_idle_role() -> None:
    lws = builders.parse_children(builders.make_lws("decode", revision=NEW, replicas=2))
    desired = {"prefill": 0, "encode": 0, "decode": 2}
    available = conditions(compute(lws, desired=desired))["Available"]
    assert (available.status, available.reason) == ("False", "RoleScaledToZero")
    assert available.message.startswith("prefill, encode are at 0 groups while decode 2 run:")


def test_a_rollout_beside_an_idle_role_reads_as_in_progress_until_it_settles() -> None:
    lws = builders.parse_children(builders.make_lws("prefill", revision=NEW, replicas=4, ready=2))
    found = conditions(compute(lws, desired={"prefill": 4, "decode": 0}))
    assert (found["Available"].status, found["Available"].reason) == ("False", "RoleScaledToZero")
    progressing = found["Progressing"]
    assert (progressing.status, progressing.reason) == ("True", "RolloutInProgress")
    assert progressing.message == "Waiting for prefill: 4 updated, 2 ready, 4 total of 4"


def test_every_role_at_zero_is_available() -> None:
    """A set scaled to zero on purpose (all roles, External included) is where it should be."""
    found = conditions(compute([], desired={"prefill": 0, "decode": 0}))
    assert (found["Available"].status, found["Available"].reason) == ("True", "AllRolesReady")


@pytest.mark.parametrize("reason", [api.Reason.ROLLOUT_PARTITIONED, api.Reason.ROLLOUT_HELD])
def test_a_set_standing_still_is_never_available_even_at_zero(reason: api.Reason) -> None:
    # Scaled to 0 while a partition keeps slices on the old revision: every count is at its
    # target, but the set does not run its revision everywhere (the scaling walks found it).
    standing = status.ConditionUpdate(
        type=api.ConditionType.PROGRESSING,
        status=api.ConditionStatus.UNKNOWN,
        reason=reason,
        message="slices 1-2 stand still",
    )
    found = conditions(compute([], desired={"prefill": 0, "decode": 0}, progressing=standing))
    assert found["Available"].status is api.ConditionStatus.FALSE
    assert found["Available"].reason == reason
    assert found["Progressing"].status is api.ConditionStatus.UNKNOWN


def test_degraded_lists_problems() -> None:
    found = (
        problems.Problem(api.Reason.CHILD_NOT_CREATED, "first"),
        problems.Problem(api.Reason.SCALER_CONFLICT, "second"),
    )
    degraded = conditions(compute(ready_set(), problems=found))["Degraded"]
    assert degraded.status == "True"
    assert degraded.reason == api.Reason.CHILD_NOT_CREATED
    assert degraded.message == "first (and 1 more: second)"


def test_transition_time_is_carried_over_when_status_does_not_flip() -> None:
    observed = (
        records.ObservedCondition("Available", "True", EARLIER, "AllRolesReady", "m", 3),
        records.ObservedCondition("Progressing", "True", EARLIER, "RolloutInProgress", "m", 3),
    )
    found = conditions(compute(ready_set(), observed=observed))
    assert found["Available"].last_transition_time == EARLIER
    assert found["Progressing"].last_transition_time == builders.NOW
    assert found["Degraded"].last_transition_time == builders.NOW


def test_idle_sync_returns_identical_status() -> None:
    first = compute(ready_set())
    observed = tuple(
        records.ObservedCondition(
            c.type, c.status, c.last_transition_time, c.reason, c.message, c.observed_generation
        )
        for c in first.conditions
    )
    again = status.compute(
        desired={"prefill": 2, "decode": 1},
        lws=ready_set(),
        revision=NEW,
        generation=4,
        problems=(),
        observed=observed,
        now="2030-01-01T00:00:00Z",
    )
    assert again == first


def test_held_status_keeps_everything_but_degraded() -> None:
    kept = {
        "roleStatuses": [{"name": "prefill", "replicas": 1}],
        "conditions": [
            {"type": "Available", "status": "True", "reason": "AllRolesReady"},
            {"type": "Degraded", "status": "False", "reason": "AsExpected"},
        ],
    }
    held = status.compute_held(
        status=kept,
        problems=[problems.Problem(api.Reason.INVALID_SPEC, "spec.slices: too many")],
        observed=(),
        generation=2,
        now=builders.NOW,
    )
    assert held.observed == kept
    assert (held.degraded.status, held.degraded.reason) == ("True", "InvalidSpec")
    assert held.degraded.observed_generation == 2
    rendered = answers.render_status(held)  # written at the edge: Degraded replaced in place
    assert rendered["roleStatuses"] == kept["roleStatuses"]
    assert [c["type"] for c in rendered["conditions"]] == ["Available", "Degraded"]
    assert rendered["conditions"][1]["reason"] == "InvalidSpec"


@pytest.mark.parametrize(("target", "slices", "desired"), [(2, 3, 6), (None, 3, None), (0, 2, 0)])
def test_role_progress_multiplies_targets_by_slices(
    target: int | None, slices: int, desired: int | None
) -> None:
    role = api.Role.model_validate(builders.make_role("prefill"))
    assert status.role_progress([role], {"prefill": target}, slices=slices) == {"prefill": desired}
