"""Status of a DisaggregatedSet: role statuses and the Available, Progressing, Degraded conditions.

Computed from observed LWS and the decisions of the pass; the clock is injected (`now`). Rules
(docs/rollout.md, "One pass"; each reason in docs/troubleshooting.md):

- `roleStatuses` lists the spec roles in order: `replicas` and `readyReplicas` summed over every
  LWS, `updatedReplicas` over target-revision LWS only.
- A role is available when replicas == readyReplicas == updatedReplicas == target x slices; a
  role whose target is unknown (no usable scaler, its LWS not created) never is.
- Roles at 0 groups beside roles at more: Available False, RoleScaledToZero (upstream says
  Available), and Progressing too once no role lags. All roles at 0 is Available.
- Otherwise Available is True exactly when no role lags and Progressing is its opposite, with
  the true one's reason and message, as upstream. A pass may replace Progressing (paused, held,
  partitioned, past the deadline: `hooks.core.progress`); held or partitioned is never Available.
- Degraded: True with the first problem's reason and message, else False (AsExpected).
- Every condition carries observedGeneration; lastTransitionTime moves only when the status flips.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from hooks import api
from hooks.core import problems, records

_STANDING_STILL = frozenset({api.Reason.ROLLOUT_HELD, api.Reason.ROLLOUT_PARTITIONED})


@dataclass(frozen=True, slots=True)
class ConditionUpdate:
    """A condition's new status, before `carry_over` decides its transition time."""

    type: api.ConditionType
    status: api.ConditionStatus
    reason: api.Reason
    message: str


def compute(
    *,
    desired: Mapping[str, int | None],
    lws: Iterable[records.ObservedObject],
    revision: str,
    generation: int,
    problems: Sequence[problems.Problem],
    observed: Sequence[records.ObservedCondition],
    now: str,
    progressing: ConditionUpdate | None = None,
    rollout: api.RolloutStatus | None = None,
    creating: Sequence[api.CreatingChild] = (),
    note: str = "",
    warnings: Sequence[str] = (),
    history: str | None = None,
) -> api.DisaggregatedSetStatus:
    """The status of a set whose LWS after this pass are `lws`; `desired`: each spec role's
    groups over all slices, in spec order (None when unknown: never available); `progressing`
    replaces the Progressing condition readiness implies, `note` ends a rollout's message."""
    role_statuses = _role_statuses(desired, lws, revision=revision)
    conditions = [
        *_available_and_progressing(role_statuses, desired, revision=revision, note=note),
        _degraded(problems),
    ]
    if progressing is not None:
        conditions[1] = progressing
        if progressing.reason in _STANDING_STILL:
            conditions[0] = new_condition(
                api.ConditionType.AVAILABLE,
                true=False,
                reason=progressing.reason,
                message=progressing.message,
            )
    degraded = conditions[2]
    return api.DisaggregatedSetStatus(
        observed_generation=generation,
        revision=revision,
        ready=_ready(role_statuses, list(desired.values())),
        ready_by_role=", ".join(
            f"{status.name} {_ready([status], [desired[status.name]])}" for status in role_statuses
        ),
        degraded=degraded.reason if degraded.status is api.ConditionStatus.TRUE else None,
        role_statuses=role_statuses,
        conditions=carry_over(conditions, observed=observed, generation=generation, now=now),
        rollout=rollout,
        creating=list(creating) or None,
        warnings=list(warnings) or None,
        history=history,
    )


def _available_and_progressing(
    role_statuses: Sequence[api.RoleStatus],
    desired: Mapping[str, int | None],
    *,
    revision: str,
    note: str,
) -> tuple[ConditionUpdate, ConditionUpdate]:
    """Available and Progressing as readiness and the roles' targets have them."""
    lagging = [
        _describe_lag(status, wanted)
        for status, wanted in zip(role_statuses, desired.values(), strict=True)
        if wanted is None
        or not (status.replicas == status.ready_replicas == status.updated_replicas == wanted)
    ]
    available = not lagging
    if available:
        reason = api.Reason.ALL_ROLES_READY
        message = f"All roles run revision {revision} with every replica ready"
    else:
        reason = api.Reason.ROLLOUT_IN_PROGRESS
        message = "Waiting for " + "; ".join(lagging) + (f" ({note})" if note else "")
    idle = _idle_beside_busy(desired)
    progress_reason, progress_message = idle if idle and available else (reason, message)
    if idle:
        reason, message = idle
    return (
        new_condition(
            api.ConditionType.AVAILABLE,
            true=available and idle is None,
            reason=reason,
            message=message,
        ),
        new_condition(
            api.ConditionType.PROGRESSING,
            true=not available,
            reason=progress_reason,
            message=progress_message,
        ),
    )


def _idle_beside_busy(desired: Mapping[str, int | None]) -> tuple[api.Reason, str] | None:
    """RoleScaledToZero's reason and message when some roles are at 0 groups and others not."""
    idle = [role for role, groups in desired.items() if groups == 0]
    busy = [f"{role} {groups}" for role, groups in desired.items() if groups]
    if not idle or not busy:
        return None
    message = (
        f"{', '.join(idle)} {'is' if len(idle) == 1 else 'are'} at 0 groups while"
        f" {', '.join(busy)} run: the set cannot serve; scale the External role's"
        " DisaggregatedSetRoleScaler up, or every role to 0"
    )
    return api.Reason.ROLE_SCALED_TO_ZERO, message


def _ready(role_statuses: Sequence[api.RoleStatus], wanted: Sequence[int | None]) -> str:
    """Ready over desired groups (`?` desired when a target is unknown)."""
    ready = sum(status.ready_replicas for status in role_statuses)
    desired = "?" if None in wanted else str(sum(value or 0 for value in wanted))
    return f"{ready}/{desired}"


def _role_statuses(
    desired: Mapping[str, int | None], lws: Iterable[records.ObservedObject], *, revision: str
) -> list[api.RoleStatus]:
    totals = {role: [0, 0, 0] for role in desired}
    for item in lws:
        sums = totals.get(item.labels.get(api.LABEL_ROLE, ""))
        if sums is None:
            continue
        sums[0] += item.status.replicas
        sums[1] += item.status.ready_replicas
        if item.labels.get(api.LABEL_REVISION) == revision:
            sums[2] += item.status.updated_replicas
    return [
        api.RoleStatus(
            name=role, replicas=sums[0], ready_replicas=sums[1], updated_replicas=sums[2]
        )
        for role, sums in totals.items()
    ]


def compute_held(
    *,
    status: api.JsonObject,
    problems: Sequence[problems.Problem],
    observed: Sequence[records.ObservedCondition],
    generation: int,
    now: str,
) -> records.HeldStatus:
    """The observed status kept as it is, with Degraded set from `problems` (the hold path)."""
    (degraded,) = carry_over(
        [_degraded(problems)], observed=observed, generation=generation, now=now
    )
    return records.HeldStatus(observed=status, degraded=degraded)


def unknown_fields(observed: api.JsonObject, *, known: frozenset[str]) -> api.JsonObject:
    """The fields of an observed status this version does not compute, as they are (kept while
    two versions answer: docs/operations.md, "Upgrading the hook server")."""
    return {key: value for key, value in observed.items() if key not in known}


def carry_over(
    conditions: Sequence[ConditionUpdate],
    *,
    observed: Sequence[records.ObservedCondition],
    generation: int,
    now: str,
) -> list[api.Condition]:
    """Conditions with lastTransitionTime kept from `observed` unless their status flipped."""
    previous = {condition.type: condition for condition in observed}
    result = []
    for condition in conditions:
        before = previous.get(condition.type)
        kept = before.last_transition_time if before and before.status == condition.status else ""
        result.append(
            api.Condition(
                type=condition.type,
                status=condition.status,
                observed_generation=generation,
                last_transition_time=kept or now,
                reason=condition.reason,
                message=condition.message,
            )
        )
    return result


def new_condition(
    condition_type: api.ConditionType, *, true: bool, reason: api.Reason, message: str
) -> ConditionUpdate:
    """A True or False condition update."""
    status = api.ConditionStatus.TRUE if true else api.ConditionStatus.FALSE
    return ConditionUpdate(type=condition_type, status=status, reason=reason, message=message)


def _degraded(found: Sequence[problems.Problem]) -> ConditionUpdate:
    if not found:
        return new_condition(
            api.ConditionType.DEGRADED,
            true=False,
            reason=api.Reason.AS_EXPECTED,
            message="No problems detected",
        )
    first, *others = found
    message = problems.cut(first.message)
    if others:
        message += f" (and {len(others)} more: {problems.summarise([p.message for p in others])})"
    return new_condition(
        api.ConditionType.DEGRADED, true=True, reason=first.reason, message=message
    )


def _describe_lag(status: api.RoleStatus, desired: int | None) -> str:
    if desired is None:
        return f"{status.name}: target unknown (see Degraded)"
    return (
        f"{status.name}: {status.updated_replicas} updated, {status.ready_replicas} ready, "
        f"{status.replicas} total of {desired}"
    )


def role_progress(
    roles: Sequence[api.Role], targets: Mapping[str, int | None], *, slices: int
) -> dict[str, int | None]:
    """Per spec role in order, its per-slice target times the slice count (None when unknown)."""
    desired = {name: None if value is None else value * slices for name, value in targets.items()}
    return {role.name: desired.get(role.name) for role in roles}
