"""DisaggregatedSetRoleScalers: the children for External roles, and the RoleScaler controller.

Rules: docs/rollout.md, "One pass" (step 2: created once, seeded, returned with the observed
replicas, dropped with the role; a foreign one never taken over) and "External roles" (the
RoleScaler controller); the cap by the name budget: "Names and their budget".
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
    """External role -> its scaler name, held by a foreign object."""


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
    kept = {wanted[scaler.name]: scaler for scaler in observed if scaler.name in wanted}
    dropped = [scaler.name for scaler in observed if scaler.name not in wanted]
    result = [children.reemit_scaler(scaler) for scaler in kept.values()]
    targets = {role: scaler.spec_replicas or 0 for role, scaler in kept.items()}
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
    """Each spec role's replicas per slice (an External one's None when unknown, capped by its
    name budget, which admission checks for Static roles only), and a problem per role capped."""
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


def _seed(role: str, lws: Sequence[records.ObservedObject]) -> int:
    """1 for a new role; a role that was Static keeps what it runs (the switch never drains it)."""
    running = [item.replicas for item in lws if item.labels.get(api.LABEL_ROLE) == role]
    return sum(running) if running else 1


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
    owner = next((o for o in request.owners if o.uid == scaler.owner_uid), None)
    replicas = 0 if owner is None else owner.role_replicas.get(role, 0)
    reason, message = _readiness(owner, set_name=set_name, role=role)
    ready = reason is api.Reason.BOUND
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


def _readiness(owner: records.Parent | None, *, set_name: str, role: str) -> tuple[api.Reason, str]:
    """Ready's reason and message: Bound when the owning set drives the role, else why not."""
    if not set_name or not role:
        return api.Reason.LABELS_MISSING, (
            f"The scaler needs the labels {api.LABEL_NAME} and {api.LABEL_ROLE}; "
            "it is created by its DisaggregatedSet, do not create scalers by hand"
        )
    if owner is None:
        return api.Reason.OWNER_NOT_FOUND, (
            f"DisaggregatedSet {set_name!r} that owns this scaler was not found"
        )
    if owner.spec is None:
        return api.Reason.OWNER_SPEC_INVALID, (
            f"DisaggregatedSet {set_name!r} has an invalid spec; see its Degraded condition"
        )
    spec_role = owner.spec.role(role)
    if spec_role is None or not spec_role.is_external:
        return api.Reason.ROLE_NOT_EXTERNAL, (
            f"Role {role!r} of DisaggregatedSet {set_name!r} is not scaling.mode External"
        )
    return api.Reason.BOUND, f"Drives role {role!r} of DisaggregatedSet {set_name!r}"


def _key(scaler: records.ScalerParent) -> str:
    return f"{scaler.namespace}/{scaler.name}"
