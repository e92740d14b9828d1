"""One slice, one pass: its rollout step (`rollout.plan_slice`), its LWS (`children`) and its
Services (`services`), and where it stands; observed children sorted by slice (`split_by_slice`).
The rules are docs/rollout.md's ("One pass", "Canary rollouts"). Pure: reads its arguments only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from hooks import api
from hooks.api import naming
from hooks.core import (
    canary,
    children,
    controls,
    desired,
    history,
    records,
    rollout,
    services,
    stock,
)

JsonObject = api.JsonObject
Objects = Sequence[records.ObservedObject]


@dataclass(frozen=True, slots=True)
class SetContext:
    """What every slice of one pass shares."""

    set_name: str
    spec: api.DisaggregatedSetSpec
    revision: str
    roles: tuple[stock.RoleInput, ...]
    control: controls.Control
    rollback: bool = False
    """The target is a revision the set ran before another one: no hold (`history`)."""
    stable: history.Stable | None = None
    """The stable revision, for a slice past the partition that runs nothing it may keep."""
    services: bool = True
    """Whether Services are a child type of the set (`services.is_child_type`)."""


@dataclass(frozen=True, slots=True)
class SliceTarget:
    """The revision a slice plans for, its roles, and the role specs its new LWS render from."""

    revision: str
    roles: tuple[stock.RoleInput, ...]
    specs: Mapping[str, api.Role]


NOTHING: Final = SliceTarget(revision="", roles=(), specs={})
"""What a slice past the partition plans for when it runs nothing and no revision is stable."""


@dataclass(frozen=True, slots=True)
class SliceResult:
    """One slice's part of the answer."""

    plan: rollout.SlicePlan
    children: tuple[JsonObject, ...]
    """The slice's LWS (kept and new) and Services."""
    deletions: tuple[desired.ChildKey, ...]
    """Observed children this slice lets go: drained LWS, Services that stopped serving."""
    kept_lws: tuple[records.ObservedObject, ...]
    """Observed LWS that stay (for the status)."""
    created: Mapping[str, str]
    """LWS name -> role, for the LWS this slice creates."""
    revision: str
    """The revision the slice planned for (`_slice_target`; empty when none)."""


def reconcile_slice(
    context: SetContext, index: int, *, lws: Objects, services_: Objects
) -> SliceResult:
    """One slice, one pass: its rollout step, its LWS and its Services."""
    control = canary.slice_control(context.control, index, rollback=context.rollback)
    target = _slice_target(context, index, partitioned=control.partitioned, lws=lws)
    if target is NOTHING:
        plan = rollout.SlicePlan(
            slice_index=index,
            phase=rollout.Phase.PARTITIONED,
            replicas={item.name: item.replicas for item in lws},
        )
    else:
        plan = rollout.plan_slice(
            set_name=context.set_name,
            slice_index=index,
            revision=target.revision,
            roles=target.roles,
            lws=lws,
            control=control,
        )
    if target.revision != context.revision:
        plan = dataclasses.replace(plan, phase=rollout.Phase.PARTITIONED)
    dropped = set(plan.dropped)
    kept = tuple(item for item in lws if item.name not in dropped)
    existing = [
        children.reemit_lws(
            item, replicas=plan.replicas[item.name], annotations=_annotations(plan, item.name)
        )
        for item in kept
    ]
    new, created = _new_lws(context, index, plan, target)
    slice_services, dropped_services = (
        _services(context, index, plan, target, kept, services_) if context.services else ([], [])
    )
    return SliceResult(
        plan=plan,
        children=(*existing, *new, *slice_services),
        deletions=(
            *((api.LWS_KIND, name) for name in sorted(dropped)),
            *((api.SERVICE_KIND, name) for name in dropped_services),
        ),
        kept_lws=kept,
        created=created,
        revision=target.revision,
    )


def _annotations(plan: rollout.SlicePlan, name: str) -> dict[str, str | None]:
    """The rollout's annotations a pass writes on (or, None, removes from) an existing LWS."""
    edits: dict[str, str | None] = {}
    if name in plan.initial_replicas:
        edits[api.ANNOTATION_INITIAL_REPLICAS] = str(plan.initial_replicas[name])
    if name in plan.records:
        record = plan.records[name]
        edits[api.ANNOTATION_ROLLOUT_TARGET] = None if record is None else str(record)
    return edits


def _slice_target(
    context: SetContext, index: int, *, partitioned: bool, lws: Objects
) -> SliceTarget:
    """The spec's revision; for a slice past the partition that runs nothing it may keep (no LWS
    of the spec's revision, no old revision serving a spec role), the stable revision, or
    `NOTHING` when none is known."""
    spec_target = SliceTarget(
        revision=context.revision,
        roles=context.roles,
        specs={role.name: role for role in context.spec.roles},
    )
    if not partitioned:
        return spec_target
    state = stock.take_stock(
        lws, set_name=context.set_name, slice_index=index, revision=context.revision
    )
    if state.new or stock.serves_spec_roles(state, [role.name for role in context.roles]):
        return spec_target
    stable = context.stable
    if stable is None:
        return NOTHING
    if stable.revision == context.revision:
        return spec_target
    targets = {role.name: role.target for role in context.roles}
    roles = []
    for role in stable.roles:
        wanted = targets.get(role.name)
        per_slice = role.replicas_or_default if wanted is None else wanted
        roles.append(
            stock.RoleInput(
                name=role.name, target=per_slice, config=rollout.role_config(role, per_slice)
            )
        )
    return SliceTarget(
        revision=stable.revision,
        roles=tuple(roles),
        specs={role.name: role for role in stable.roles},
    )


def _services(
    context: SetContext,
    index: int,
    plan: rollout.SlicePlan,
    target: SliceTarget,
    kept: Objects,
    observed: Objects,
) -> tuple[list[JsonObject], list[str]]:
    """The slice's Services. A slice whose LWS all run one revision other than the one it plans
    for gets that revision's, and lets none go; one mid-way between revisions keeps its Services
    as they are while paused or partitioned; every other slice plans for its target."""
    groups = stock.group(kept, set_name=context.set_name, slice_index=index).groups
    standing = len(groups) == 1 and target.revision not in groups
    revision, role_names = target.revision, [role.name for role in target.roles]
    if standing:
        ((revision, by_role),) = groups.items()
        spec_roles = [role.name for role in context.spec.roles if role.name in by_role]
        role_names = [*spec_roles, *sorted(set(by_role) - set(spec_roles))]
    return services.plan_slice(
        set_name=context.set_name,
        slice_index=index,
        revision=revision,
        role_names=role_names,
        lws=kept,
        services=observed,
        frozen=not standing and plan.phase in (rollout.Phase.PAUSED, rollout.Phase.PARTITIONED),
        keep_others=standing,
    )


def _new_lws(
    context: SetContext, index: int, plan: rollout.SlicePlan, target: SliceTarget
) -> tuple[list[JsonObject], dict[str, str]]:
    """The LWS the plan creates, rendered; and by name, the roles created."""
    rendered: list[JsonObject] = []
    created: dict[str, str] = {}
    for role_name, replicas in plan.created.items():
        name = naming.lws_name(
            set_name=context.set_name, slice_index=index, revision=target.revision, role=role_name
        )
        role = target.specs.get(role_name)
        if role is None:
            raise ValueError(f"planned a new LWS for unknown role {role_name!r}")
        created[name] = role_name
        rendered.append(
            children.render_lws(
                set_name=context.set_name,
                role=role,
                slice_index=index,
                revision=target.revision,
                replicas=replicas,
                policy=context.spec.placement_policy,
                record=plan.created_records.get(role_name),
            )
        )
    return rendered, created


@dataclass(frozen=True, slots=True)
class BySlice:
    by_slice: Mapping[int, Objects]
    """Objects of kept slices, by index (every index present)."""
    elsewhere: Objects
    """Objects whose slice label is not a number: kept unchanged, never planned."""
    removed: Objects
    """Objects of slices >= spec.slices: deleted."""


def split_by_slice(objects: Iterable[records.ObservedObject], *, slices: int) -> BySlice:
    by_slice: dict[int, list[records.ObservedObject]] = {index: [] for index in range(slices)}
    elsewhere = []
    removed = []
    for item in objects:
        if item.slice_index is None:
            elsewhere.append(item)
        elif item.slice_index >= slices:
            removed.append(item)
        else:
            by_slice[item.slice_index].append(item)
    return BySlice(by_slice=by_slice, elsewhere=tuple(elsewhere), removed=tuple(removed))


def rollout_slice(result: SliceResult) -> api.RolloutSlice:
    """Where a slice that is not steady stands, for status.rollout."""
    revisions = {item.labels.get(api.LABEL_REVISION, "") for item in result.kept_lws}
    if result.created:
        revisions.add(result.revision)
    return api.RolloutSlice(
        index=result.plan.slice_index,
        phase=_SLICE_PHASES.get(result.plan.phase, "Rolling"),
        revisions=sorted(revision for revision in revisions if revision),
    )


# Whether a slice moves, not each pass's phase (one waiting between two steps is rolling), so
# that status.rollout changes only when that does.
_SLICE_PHASES: Final = {
    rollout.Phase.STALLED: "Stalled",
    rollout.Phase.PAUSED: "Paused",
    rollout.Phase.HELD: "Held",
    rollout.Phase.PARTITIONED: "Partitioned",
}
