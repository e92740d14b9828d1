"""Status of a DisaggregatedSet: role statuses and the Available, Progressing, Degraded conditions.

Computed from observed LWS and the decisions of the pass; the clock is injected (`now`), never read.

Rules (docs/rollout.md):

- `roleStatuses` lists the spec roles in spec order. `replicas` and `readyReplicas` sum the LWS
  `status` over all slices and revisions; `updatedReplicas` sums only target-revision LWS. A role
  removed from the spec has no entry, even while its old LWS drain.
- A role is available when replicas == readyReplicas == updatedReplicas == target x slices. An
  External role without a usable scaler, or a role whose LWS name is held by a foreign object, is
  never available (its target is unknown, and a coincidental match must not read as success).
- A role at 0 groups beside roles at more (only an External role can make that mix: Static
  roles are all 0 or all positive) leaves the set unable to serve: Available is False with
  reason RoleScaledToZero naming the roles, and so is Progressing once no role lags. Upstream
  calls such a set Available; a set whose roles are all at 0 is Available, on purpose.
- Otherwise Available is True exactly when no role lags, and Progressing is then False, else
  True: the false one carries the true one's reason and message, as upstream does. A pass may
  replace Progressing (`progressing`): Unknown while a rollout stands still on purpose (paused,
  held, partitioned), False past the progress deadline (`hooks.core.progress`).
- Degraded is True with the first problem's reason and message, else False (reason AsExpected).
- Every condition carries observedGeneration = metadata.generation. lastTransitionTime is carried
  over from the observed condition unless the status flipped, so an idle sync returns the same
  bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from hooks import api
from hooks.core import problems, records

_STANDING_STILL = frozenset({api.Reason.ROLLOUT_HELD, api.Reason.ROLLOUT_PARTITIONED})


@dataclass(frozen=True, slots=True)
class RoleProgress:
    """What one spec role should have, summed over all slices."""

    name: str
    desired: int | None
    """Target replicas x slices, or None when the target is unknown (never available then)."""


def compute(
    *,
    roles: Sequence[RoleProgress],
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
    """The status of a set whose children are `lws` (the LWS that remain after this pass).

    `progressing` replaces the Progressing condition readiness implies (a paused rollout, one
    past its progress deadline, or one standing still on purpose: held or partitioned, never
    Available, even where every count is already at its target, as at 0); `rollout` is the
    rollout record to keep (`core/progress.py`); `creating` the children asked for and not
    observed yet (`core/creations.py`); `note` ends the message of a rollout in progress (a hold
    that does not apply, `core/canary.py`); `warnings` what the spec asks for that is ignored
    (`validation.warnings`); `history` what the revision history does not record
    (`core/history.py`).
    """
    role_statuses = role_statuses_of(roles, lws, revision=revision)
    conditions = [
        *_available_and_progressing(role_statuses, roles, revision=revision, note=note),
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
        ready=_ready(role_statuses, roles),
        ready_by_role=", ".join(
            f"{status.name} {_ready([status], [role])}"
            for status, role in zip(role_statuses, roles, strict=True)
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
    roles: Sequence[RoleProgress],
    *,
    revision: str,
    note: str,
) -> tuple[ConditionUpdate, ConditionUpdate]:
    """Available and Progressing as readiness and the roles' targets have them (see the
    module): Progressing says the rollout while one runs, then why the set is not Available."""
    available, reason, message = _availability(role_statuses, roles, revision=revision, note=note)
    idle = _idle_beside_busy(roles)
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


def _availability(
    role_statuses: Sequence[api.RoleStatus],
    roles: Sequence[RoleProgress],
    *,
    revision: str,
    note: str,
) -> tuple[bool, api.Reason, str]:
    """Whether every role is available, and the reason and message Available and Progressing
    share: what each lagging role waits for (then `note`), or that all roles are ready."""
    lagging = [
        _describe_lag(status, role)
        for status, role in zip(role_statuses, roles, strict=True)
        if role.desired is None
        or not (status.replicas == status.ready_replicas == status.updated_replicas == role.desired)
    ]
    if not lagging:
        return (
            True,
            api.Reason.ALL_ROLES_READY,
            (f"All roles run revision {revision} with every replica ready"),
        )
    message = "Waiting for " + "; ".join(lagging) + (f" ({note})" if note else "")
    return False, api.Reason.ROLLOUT_IN_PROGRESS, message


def _idle_beside_busy(roles: Sequence[RoleProgress]) -> tuple[api.Reason, str] | None:
    """The reason and message of a set some of whose roles are at 0 groups while others are not
    (see the module), or None. At most 10 roles of at most 63 characters: a bounded message."""
    idle = [role.name for role in roles if role.desired == 0]
    busy = [f"{role.name} {role.desired}" for role in roles if role.desired]
    if not idle or not busy:
        return None
    message = (
        f"{', '.join(idle)} {'is' if len(idle) == 1 else 'are'} at 0 groups while"
        f" {', '.join(busy)} run: the set cannot serve; scale the External role's"
        " DisaggregatedSetRoleScaler up, or every role to 0"
    )
    return api.Reason.ROLE_SCALED_TO_ZERO, message


def _ready(role_statuses: Sequence[api.RoleStatus], roles: Sequence[RoleProgress]) -> str:
    """Ready groups over desired groups, summed over the spec roles (`?` when a target is
    unknown)."""
    ready = sum(status.ready_replicas for status in role_statuses)
    wanted = [role.desired for role in roles]
    desired = "?" if None in wanted else str(sum(value or 0 for value in wanted))
    return f"{ready}/{desired}"


def role_statuses_of(
    roles: Sequence[RoleProgress], lws: Iterable[records.ObservedObject], *, revision: str
) -> list[api.RoleStatus]:
    """Per spec role: replicas and ready summed over every LWS, updated over the target's."""
    totals = {role.name: [0, 0, 0] for role in roles}
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
            name=role.name,
            replicas=totals[role.name][0],
            ready_replicas=totals[role.name][1],
            updated_replicas=totals[role.name][2],
        )
        for role in roles
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


@dataclass(frozen=True, slots=True)
class ConditionUpdate:
    """A condition's new status, before `carry_over` decides its transition time."""

    type: api.ConditionType
    status: api.ConditionStatus
    reason: api.Reason
    message: str


def unknown_fields(observed: api.JsonObject, *, known: frozenset[str]) -> api.JsonObject:
    """The fields of an observed status that this version does not compute, as they are.

    During an upgrade of the hook server two versions answer for a while (docs/operations.md,
    "Upgrading the hook server"): a field a newer version writes is kept by an older one, which
    answers it unchanged, instead of being dropped until the newer version writes it again.
    """
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
        unchanged = (
            before is not None
            and before.status == condition.status
            and bool(before.last_transition_time)
        )
        result.append(
            api.Condition(
                type=condition.type,
                status=condition.status,
                observed_generation=generation,
                last_transition_time=before.last_transition_time if before and unchanged else now,
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


def _describe_lag(status: api.RoleStatus, role: RoleProgress) -> str:
    if role.desired is None:
        return f"{role.name}: target unknown (see Degraded)"
    return (
        f"{role.name}: {status.updated_replicas} updated, {status.ready_replicas} ready, "
        f"{status.replicas} total of {role.desired}"
    )


def role_progress(
    roles: Sequence[api.Role], targets: Mapping[str, int | None], *, slices: int
) -> list[RoleProgress]:
    """Per spec role, its per-slice target times the slice count (None when unknown)."""
    progress = []
    for role in roles:
        target = targets.get(role.name)
        progress.append(
            RoleProgress(name=role.name, desired=None if target is None else target * slices)
        )
    return progress
