"""One slice's LWS decisions for one pass: steady state, or one step of a coordinated rollout.

Input: the slice's observed LWS (already known to belong to this set and slice), the target
revision and per-role targets. Output: a `SlicePlan` saying which LWS keep which replicas, which
get the `initial-replicas` annotation, which target LWS are created and which LWS are deleted.
It never renders objects (that is `children`) and never reads anything but its arguments.

The rules, in order (SPEC §5 step 3 and §5a):

1. A revision other than the target whose LWS are all at 0 replicas is deleted, all roles at once.
   Several LWS for one (revision, role) in a slice (for example an old, unsliced name next to the
   canonical one) all count here; only one of them, the canonical name first, is planned, and the
   others are kept unchanged.
2. When no old revision has replicas on a spec role, the slice is steady: each spec role gets a
   target LWS, created with its target or scaled to it. Old LWS that only hold removed roles are
   kept as they are (upstream does the same).
3. Otherwise a rollout runs. Start: when no target LWS exists, every old LWS gets the annotation
   `initial-replicas` = its current replicas (a fresh snapshot per rollout) and the target LWS of
   every spec role is created at 0; nothing else moves in that pass. A target LWS that is missing
   later (deleted by hand) is created at 0 as well; upstream would wait for it forever.
4. Stability gate: every spec role needs a target LWS whose spec replicas equal its ready
   replicas; otherwise nothing changes and the caller asks for a resync.
5. The planner gets, per role (spec roles in order, then removed roles by name): initial old
   (annotation, else replicas), current old, current new, target and the resolved surge and
   unavailable config. A spec role's target never drops below its current new replicas while old
   revisions exist. Upstream applies this guard to External roles only; for a Static role whose
   replicas are lowered below its new LWS mid-rollout, upstream's planner can find no step and
   the rollout stalls forever. Here the rollout completes and the steady state then scales the
   role down.
6. The step is applied: target LWS scale up to the step's new counts; old LWS drain by a budget
   of (current old - step old) per role, visiting old revisions newest first (latest LWS
   creationTimestamp, ties by revision name). Within a revision each role drains min(budget,
   replicas); if any role would reach 0 (a role already at 0 counts), every role of the revision
   goes to 0 together, and the budget is charged only for the roles that reached 0 by themselves
   (or for every role when none did). Old LWS are never scaled up.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypedDict

from hooks import api
from hooks.core import naming, planner, records


class Phase(StrEnum):
    STEADY = "steady"
    STARTING = "starting"
    WAITING = "waiting"
    STEPPING = "stepping"
    STALLED = "stalled"


@dataclass(frozen=True, slots=True)
class RoleInput:
    """A spec role as the slice planner sees it."""

    name: str
    target: int | None
    """Target replicas per slice; None when unknown (External role whose scaler name is taken)."""
    config: planner.RoleConfig


@dataclass(frozen=True, slots=True)
class SlicePlan:
    """What happens to one slice's LWS in this pass."""

    slice_index: int
    phase: Phase
    replicas: Mapping[str, int]
    """Desired spec.replicas of every kept existing LWS, by name."""
    initial_replicas: Mapping[str, int] = field(default_factory=dict)
    """`initial-replicas` annotation values to write, by LWS name."""
    created: Mapping[str, int] = field(default_factory=dict)
    """Target LWS to create, role -> replicas."""
    dropped: tuple[str, ...] = ()
    """LWS deleted because their revision finished draining."""
    unplanned: tuple[str, ...] = ()
    """LWS kept unchanged: their role or revision label is missing, or they duplicate another."""
    step: planner.Step | None = None


def replicas_of(lws: records.ObservedObject) -> int:
    """`spec.replicas`, 1 when unset (the LWS default)."""
    return 1 if lws.spec_replicas is None else lws.spec_replicas


def initial_of(lws: records.ObservedObject) -> int:
    """The `initial-replicas` annotation when it is an integer, else the current replicas."""
    value = lws.annotations.get(api.ANNOTATION_INITIAL_REPLICAS, "")
    try:
        return int(value)
    except ValueError:
        return replicas_of(lws)


Group = Mapping[str, records.ObservedObject]
"""The LWS of one revision in one slice, by role."""


def plan_slice(
    *,
    set_name: str,
    slice_index: int,
    revision: str,
    roles: Sequence[RoleInput],
    lws: Sequence[records.ObservedObject],
) -> SlicePlan:
    """Decide this pass for one slice (see the module docstring for the rules)."""
    grouping = _group(lws, set_name=set_name, slice_index=slice_index)
    groups = grouping.groups
    # A revision is drained only when every LWS labelled with it is at 0, duplicates included.
    drained = {
        rev
        for rev, items in grouping.members.items()
        if rev != revision and all(replicas_of(item) == 0 for item in items)
    }
    dropped = tuple(sorted(item.name for rev in drained for item in grouping.members[rev]))
    unplanned = tuple(sorted(x.name for x in grouping.unplanned if x.name not in dropped))
    replicas = {item.name: replicas_of(item) for item in lws if item.name not in dropped}
    old = {rev: group for rev, group in groups.items() if rev != revision and rev not in drained}
    current = groups.get(revision, {})

    def result(
        phase: Phase,
        *,
        created: Mapping[str, int] | None = None,
        initial: Mapping[str, int] | None = None,
        step: planner.Step | None = None,
    ) -> SlicePlan:
        return SlicePlan(
            slice_index=slice_index,
            phase=phase,
            replicas=replicas,
            initial_replicas=initial or {},
            created=created or {},
            dropped=dropped,
            unplanned=unplanned,
            step=step,
        )

    if not _serves_spec_roles(old, roles):
        created = {}
        for role in roles:
            existing = current.get(role.name)
            target = role.target
            if target is None:
                target = replicas_of(existing) if existing is not None else 0
            if existing is None:
                created[role.name] = target
            else:
                replicas[existing.name] = target
        return result(Phase.STEADY, created=created)

    if not current:
        initial = {
            item.name: replicas_of(item) for group in old.values() for item in group.values()
        }
        return result(Phase.STARTING, created={role.name: 0 for role in roles}, initial=initial)

    missing = {role.name: 0 for role in roles if role.name not in current}
    if missing or any(
        replicas_of(current[role.name]) != current[role.name].status.ready_replicas
        for role in roles
    ):
        return result(Phase.WAITING, created=missing)

    order = _role_order(roles, old)
    vectors = _vectors(order, roles=roles, old=old, current=current)
    step = planner.next_step(**vectors)
    if step is None:
        return result(Phase.STALLED)
    for name, now_new, next_new in zip(order, vectors["current_new"], step.new, strict=True):
        if name in current and next_new > now_new:
            replicas[current[name].name] = next_new
    budget = {
        name: now_old - next_old
        for name, now_old, next_old in zip(order, vectors["current_old"], step.old, strict=True)
    }
    for group in _newest_first(old):
        if all(value <= 0 for value in budget.values()):
            break
        _drain_revision(group, budget=budget, replicas=replicas, order=order)
    return result(Phase.STEPPING, step=step)


def _serves_spec_roles(old: Mapping[str, Group], roles: Sequence[RoleInput]) -> bool:
    """Whether an old revision still has replicas on a spec role (removed roles do not count)."""
    return any(
        replicas_of(group[role.name]) > 0
        for group in old.values()
        for role in roles
        if role.name in group
    )


def _role_order(roles: Sequence[RoleInput], old: Mapping[str, Group]) -> list[str]:
    """Spec roles in spec order, then roles found only in old revisions, by name."""
    spec_names = [role.name for role in roles]
    removed = {name for group in old.values() for name in group} - set(spec_names)
    return [*spec_names, *sorted(removed)]


class _Vectors(TypedDict):
    initial_old: tuple[int, ...]
    current_old: tuple[int, ...]
    current_new: tuple[int, ...]
    target: tuple[int, ...]
    config: tuple[planner.RoleConfig, ...]


def _vectors(
    order: Sequence[str],
    *,
    roles: Sequence[RoleInput],
    old: Mapping[str, Group],
    current: Group,
) -> _Vectors:
    """The planner's inputs, one entry per role of `order` (removed roles target 0)."""
    by_name = {role.name: role for role in roles}
    initial_old = []
    current_old = []
    current_new = []
    target = []
    config = []
    for name in order:
        groups = [group[name] for group in old.values() if name in group]
        initial_old.append(sum(initial_of(item) for item in groups))
        current_old.append(sum(replicas_of(item) for item in groups))
        role = by_name.get(name)
        new = replicas_of(current[name]) if role is not None else 0
        current_new.append(new)
        if role is None:
            target.append(0)
            config.append(planner.DEFAULT_CONFIG)
            continue
        wanted = new if role.target is None else role.target
        target.append(max(wanted, new))
        config.append(role.config)
    return _Vectors(
        initial_old=tuple(initial_old),
        current_old=tuple(current_old),
        current_new=tuple(current_new),
        target=tuple(target),
        config=tuple(config),
    )


def _drain_revision(
    by_role: Group,
    *,
    budget: dict[str, int],
    replicas: dict[str, int],
    order: Sequence[str],
) -> None:
    present = [name for name in order if name in by_role]
    planned = {name: min(budget[name], replicas_of(by_role[name])) for name in present}
    reaching_zero = {name for name in present if replicas_of(by_role[name]) - planned[name] == 0}
    for name in present:
        item = by_role[name]
        now = replicas_of(item)
        after = 0 if reaching_zero else now - planned[name]
        if now <= after:
            continue
        replicas[item.name] = after
        if name in reaching_zero or not reaching_zero:
            budget[name] -= planned[name]


def _newest_first(old: Mapping[str, Group]) -> list[Group]:
    def newest(rev: str) -> str:
        return max(item.creation_timestamp for item in old[rev].values())

    # Sorting is stable, so revisions created at the same second keep their name order.
    ordered = sorted(sorted(old), key=newest, reverse=True)
    return [old[rev] for rev in ordered]


@dataclass(frozen=True, slots=True)
class _Grouping:
    groups: dict[str, dict[str, records.ObservedObject]]
    """revision -> role -> the LWS planned for it."""
    members: dict[str, list[records.ObservedObject]]
    """revision -> every LWS labelled with it, duplicates included."""
    unplanned: tuple[records.ObservedObject, ...]
    """LWS without role or revision label, and duplicates of a planned LWS."""


def _group(lws: Sequence[records.ObservedObject], *, set_name: str, slice_index: int) -> _Grouping:
    """Group by revision and role; of several LWS for one (revision, role), plan the one with the
    canonical name (else the first by name) and keep the others unchanged."""
    groups: dict[str, dict[str, records.ObservedObject]] = {}
    members: dict[str, list[records.ObservedObject]] = {}
    unplanned = []
    for item in sorted(lws, key=lambda x: x.name):
        revision = item.labels.get(api.LABEL_REVISION, "")
        role = item.labels.get(api.LABEL_ROLE, "")
        if not revision or not role:
            unplanned.append(item)
            continue
        members.setdefault(revision, []).append(item)
        by_role = groups.setdefault(revision, {})
        canonical = naming.lws_name(
            set_name=set_name, slice_index=slice_index, revision=revision, role=role
        )
        if role not in by_role:
            by_role[role] = item
        elif item.name == canonical:
            unplanned.append(by_role[role])
            by_role[role] = item
        else:
            unplanned.append(item)
    return _Grouping(groups=groups, members=members, unplanned=tuple(unplanned))
