"""DisaggregatedSetRoleScalers: the children for External roles, and the RoleScaler controller.

For the DisaggregatedSet sync (docs/rollout.md):

- An External role without an owned scaler gets one named `<set>-<role>`, seeded with 1 when the
  role has no LWS at all, else with the sum of replicas over all its LWS (all slices and
  revisions), so a Static to External switch never drains a serving role. The seed already drives
  the LWS replicas of the pass that creates the scaler.
- An owned scaler is returned with its observed `spec.replicas`: the autoscaler owns the value
  after creation, and leaving the field out would make Metacontroller remove it.
- Owned scalers that match no External role (the role went Static or away) are deleted.
- A scaler name held by an object this set does not control is never adopted or overwritten: the
  role is reported as a conflict and its target stays unknown (the LWS keep their replicas).
- An External role's target in each slice is its scaler's replicas, capped at the most groups
  whose pods' names fit (`per_slice_targets`, `Degraded=NameBudgetExceeded` beyond them).

For the RoleScaler controller (docs/rollout.md): customize asks for the owning set by name; sync
reports the role's groups, the leader-only selector and a Ready condition. The groups are the
set's own count (`status.roleStatuses[].replicas`: the replicas of every LWS of the role the set
controls, all slices and revisions), which its sync refreshes on every change of those LWS; so
the scaler follows its LWS one status write later, and Metacontroller never matches LWS events
against every scaler's label selector (docs/operations.md, "Where Metacontroller's CPU goes").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hooks import api
from hooks.api import naming
from hooks.core import children, problems, records, status


@dataclass(frozen=True, slots=True)
class ScalerPlan:
    """The scaler children of one pass and what they say about External roles."""

    children: tuple[api.JsonObject, ...]
    created: tuple[str, ...]
    dropped: tuple[str, ...]
    targets: Mapping[str, int]
    """External role -> replicas per slice from its scaler (observed, or this pass's seed)."""
    conflicts: Mapping[str, str]
    """External role -> name of the foreign object that holds its scaler name."""


def plan(
    *,
    set_name: str,
    spec: api.DisaggregatedSetSpec,
    observed: Sequence[records.ObservedObject],
    lws: Sequence[records.ObservedObject],
    foreign_names: frozenset[str],
) -> ScalerPlan:
    """Scaler children for the set's External roles (`observed` are the owned scalers)."""
    wanted = {
        naming.scaler_name(set_name=set_name, role=role.name): role.name
        for role in spec.roles
        if role.is_external
    }
    kept: dict[str, records.ObservedObject] = {}
    dropped = []
    for scaler in observed:
        if scaler.name in wanted:
            kept[wanted[scaler.name]] = scaler
        else:
            dropped.append(scaler.name)
    result = [children.reemit_scaler(scaler) for scaler in kept.values()]
    targets = {role: _replicas(scaler) for role, scaler in kept.items()}
    created = []
    conflicts = {}
    for name, role in wanted.items():
        if role in kept:
            continue
        if name in foreign_names:
            conflicts[role] = name
            continue
        seed = _seed(role, lws)
        result.append(children.render_scaler(set_name=set_name, role=role, replicas=seed))
        targets[role] = seed
        created.append(name)
    return ScalerPlan(
        children=tuple(result),
        created=tuple(sorted(created)),
        dropped=tuple(sorted(dropped)),
        targets=targets,
        conflicts=conflicts,
    )


def per_slice_targets(
    set_name: str, spec: api.DisaggregatedSetSpec, scaler_plan: ScalerPlan
) -> tuple[dict[str, int | None], tuple[problems.Problem, ...]]:
    """Each spec role's replicas per slice: spec.replicas (default applied) for Static roles;
    for External ones the scaler's (None when unknown), capped at the most groups whose pods'
    names fit (admission checks a Static role's replicas; an autoscaler's are never admitted),
    with a problem for each role capped."""
    targets: dict[str, int | None] = {}
    capped = []
    for role in spec.roles:
        if not role.is_external:
            targets[role.name] = role.replicas_or_default
            continue
        wanted = scaler_plan.targets.get(role.name)
        longest = naming.lws_name(
            set_name=set_name,
            slice_index=spec.slices - 1,
            revision="0" * naming.REVISION_LENGTH,
            role=role.name,
        )
        most = naming.max_fitting_replicas(lws=longest)
        if wanted is not None and wanted > most:
            capped.append(
                problems.Problem(
                    api.Reason.NAME_BUDGET_EXCEEDED,
                    f"External role {role.name!r} is scaled to {wanted} groups, but the pods of"
                    f" group {most} and beyond would carry a controller-revision-hash label"
                    f" longer than {naming.DNS1035_LABEL_MAX} characters and never start: it"
                    f" runs {most}; shorten the DisaggregatedSet name or the role name",
                )
            )
            wanted = most
        targets[role.name] = wanted
    return targets, tuple(capped)


def _replicas(scaler: records.ObservedObject) -> int:
    return scaler.spec_replicas if scaler.spec_replicas is not None else 0


def _seed(role: str, lws: Sequence[records.ObservedObject]) -> int:
    own = [item for item in lws if item.labels.get(api.LABEL_ROLE) == role]
    if not own:
        return 1
    return sum(1 if item.spec_replicas is None else item.spec_replicas for item in own)


# --- the RoleScaler controller -------------------------------------------------------------------


def customize(request: records.ScalerCustomizeRequest) -> records.HookResult:
    """Related objects for a scaler: the owning DisaggregatedSet, by name."""
    scaler = request.scaler
    set_name = scaler.labels.get(api.LABEL_NAME) or scaler.owner_name
    rules = []
    if set_name:
        rules.append(
            records.RelatedRule(
                api_version=api.API_VERSION,
                resource=api.DS_PLURAL,
                namespace=scaler.namespace,
                names=(set_name,),
            )
        )
    return records.HookResult(
        answer=records.CustomizeAnswer(related=tuple(rules)),
        summary={"hook": "rolescaler-customize", "object": _key(scaler), "rules": len(rules)},
    )


def sync(request: records.ScalerSyncRequest, *, now: str) -> records.HookResult:
    """Status of a scaler: observed groups, the leader-only selector and Ready."""
    scaler = request.scaler
    set_name = scaler.labels.get(api.LABEL_NAME) or scaler.owner_name or ""
    role = scaler.labels.get(api.LABEL_ROLE, "")
    owner = _owner(scaler, request.owners)
    replicas = 0 if owner is None else owner.role_replicas.get(role, 0)
    ready, reason, message = _readiness(scaler, owner, set_name=set_name, role=role)
    condition = status.carry_over(
        [status.new_condition(api.ConditionType.READY, true=ready, reason=reason, message=message)],
        observed=scaler.conditions,
        generation=scaler.generation,
        now=now,
    )
    scaler_status = api.DisaggregatedSetRoleScalerStatus(
        observed_generation=scaler.generation,
        replicas=replicas,
        selector=naming.leader_selector(set_name=set_name, role=role)
        if set_name and role
        else None,
        conditions=condition,
    )
    known = api.json_names(api.DisaggregatedSetRoleScalerStatus)
    return records.HookResult(
        answer=records.SyncAnswer(
            status=scaler_status, status_kept=status.unknown_fields(scaler.status, known=known)
        ),
        summary={
            "hook": "rolescaler-sync",
            "object": _key(scaler),
            "generation": scaler.generation,
            "replicas": replicas,
            "ready_reason": reason,
        },
    )


def _owner(scaler: records.ScalerParent, owners: Sequence[records.Parent]) -> records.Parent | None:
    for owner in owners:
        if scaler.owner_uid is not None and owner.uid == scaler.owner_uid:
            return owner
    return None


def _readiness(
    scaler: records.ScalerParent,
    owner: records.Parent | None,
    *,
    set_name: str,
    role: str,
) -> tuple[bool, api.Reason, str]:
    if not set_name or not role:
        return (
            False,
            api.Reason.LABELS_MISSING,
            f"The scaler needs the labels {api.LABEL_NAME} and {api.LABEL_ROLE}; "
            "it is created by its DisaggregatedSet, do not create scalers by hand",
        )
    if owner is None:
        return (
            False,
            api.Reason.OWNER_NOT_FOUND,
            f"DisaggregatedSet {set_name!r} that owns this scaler was not found",
        )
    if owner.spec is None:
        return (
            False,
            api.Reason.OWNER_SPEC_INVALID,
            f"DisaggregatedSet {set_name!r} has an invalid spec; see its Degraded condition",
        )
    spec_role = owner.spec.role(role)
    if spec_role is None or not spec_role.is_external:
        return (
            False,
            api.Reason.ROLE_NOT_EXTERNAL,
            f"Role {role!r} of DisaggregatedSet {set_name!r} is not scaling.mode External",
        )
    return (
        True,
        api.Reason.BOUND,
        f"Drives role {role!r} of DisaggregatedSet {set_name!r}",
    )


def _key(scaler: records.ScalerParent) -> str:
    return f"{scaler.namespace}/{scaler.name}"
