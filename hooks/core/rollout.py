"""One slice's LWS decisions for one pass: steady state, or one step of a coordinated rollout.

Input: the slice's observed LWS (already known to belong to this set and slice), the target
revision, per-role targets and what the set's controls ask of the slice. Output: a `SlicePlan`
saying which LWS keep which replicas, which get the `initial-replicas` annotation, which target LWS
are created and which LWS are deleted. It never renders objects (that is `children`) and never
reads anything but its arguments.

`plan_slice` reads like the algorithm: it takes stock of the slice (`SliceState`: LWS grouped by
revision and role, drained revisions, current replicas), then hands it to exactly one phase
(`_steady`, `_start`, `_wait`, `_step`, or what a control asks: paused, partitioned, held), each
a pure function that returns the `SlicePlan`. The rules of each phase, and the choices where
upstream's behaviour was not kept (a missing target LWS recreated, a Static role's no-shrink
guard), are written once in docs/rollout.md ("The rolling update of one slice").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final, TypedDict

from hooks import api
from hooks.api import naming
from hooks.core import planner, records


class Phase(StrEnum):
    STEADY = "steady"
    STARTING = "starting"
    WAITING = "waiting"
    STEPPING = "stepping"
    STALLED = "stalled"
    PAUSED = "paused"
    PARTITIONED = "partitioned"
    HELD = "held"


STOPPED: Final = frozenset({Phase.PAUSED, Phase.PARTITIONED, Phase.HELD})
"""Phases of a slice that a control keeps from rolling (on purpose, not for lack of progress)."""


@dataclass(frozen=True, slots=True)
class SliceControl:
    """What the set's rollout controls ask of one slice (`hooks.core.canary` decides it)."""

    paused: bool = False
    partitioned: bool = False
    """The slice is at or past the partition: it keeps serving the revision it runs."""
    hold_at_percent: int | None = None
    """The rollout holds once every spec role's new revision has this share of its target."""


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
    step: planner.Step | None = None


def initial_of(lws: records.ObservedObject) -> int:
    """The `initial-replicas` annotation when it is an integer, else the current replicas."""
    value = lws.annotations.get(api.ANNOTATION_INITIAL_REPLICAS, "")
    try:
        return int(value)
    except ValueError:
        return lws.replicas


def role_config(role: api.Role, target: int | None) -> planner.RoleConfig:
    """The planner's surge/unavailable for a role (`api.Role.rolling_update_budget`), resolved
    against its target replicas."""
    budget = role.rolling_update_budget
    if budget is None:
        return planner.DEFAULT_CONFIG
    return planner.resolve_config(
        replicas=target or 0, max_surge=budget[0], max_unavailable=budget[1]
    )


Group = Mapping[str, records.ObservedObject]
"""The LWS of one revision in one slice, by role."""


@dataclass(frozen=True, slots=True)
class Grouping:
    """A slice's LWS by revision and role."""

    groups: Mapping[str, Group]
    """revision -> role -> the LWS planned for it."""
    members: Mapping[str, tuple[records.ObservedObject, ...]]
    """revision -> every LWS labelled with it, duplicates included."""


def group(lws: Sequence[records.ObservedObject], *, set_name: str, slice_index: int) -> Grouping:
    """Group by revision and role. Of several LWS for one (revision, role), the one with the
    canonical name is planned (else the first by name); the others are kept unchanged. LWS
    without a role or revision label are in no group."""
    groups: dict[str, dict[str, records.ObservedObject]] = {}
    members: dict[str, list[records.ObservedObject]] = {}
    for item in sorted(lws, key=lambda x: x.name):
        revision = item.labels.get(api.LABEL_REVISION, "")
        role = item.labels.get(api.LABEL_ROLE, "")
        if not revision or not role:
            continue
        members.setdefault(revision, []).append(item)
        by_role = groups.setdefault(revision, {})
        canonical = naming.lws_name(
            set_name=set_name, slice_index=slice_index, revision=revision, role=role
        )
        if role not in by_role or item.name == canonical:
            by_role[role] = item
    return Grouping(
        groups=groups, members={revision: tuple(items) for revision, items in members.items()}
    )


@dataclass(frozen=True, slots=True)
class SliceState:
    """What a slice holds at the start of the pass."""

    index: int
    old: Mapping[str, Group]
    """Old revisions that still have replicas, revision -> role -> LWS."""
    new: Group
    """The target revision's LWS by role."""
    dropped: tuple[str, ...]
    """LWS of drained old revisions (every LWS labelled with them, duplicates included)."""
    replicas: Mapping[str, int]
    """Current spec.replicas of every LWS that stays, by name."""

    def plan(
        self,
        phase: Phase,
        *,
        replicas: Mapping[str, int] | None = None,
        created: Mapping[str, int] | None = None,
        initial_replicas: Mapping[str, int] | None = None,
        step: planner.Step | None = None,
    ) -> SlicePlan:
        """A plan in `phase`; every LWS keeps its replicas unless `replicas` names it."""
        return SlicePlan(
            slice_index=self.index,
            phase=phase,
            replicas={**self.replicas, **(replicas or {})},
            initial_replicas=initial_replicas or {},
            created=created or {},
            dropped=self.dropped,
            step=step,
        )


def take_stock(
    lws: Sequence[records.ObservedObject], *, set_name: str, slice_index: int, revision: str
) -> SliceState:
    """Group the slice's LWS and set aside old revisions that finished draining (rule 1)."""
    grouping = group(lws, set_name=set_name, slice_index=slice_index)
    drained = {
        rev
        for rev, items in grouping.members.items()
        if rev != revision and all(item.replicas == 0 for item in items)
    }
    dropped = tuple(sorted(item.name for rev in drained for item in grouping.members[rev]))
    return SliceState(
        index=slice_index,
        old={
            rev: by_role
            for rev, by_role in grouping.groups.items()
            if rev != revision and rev not in drained
        },
        new=grouping.groups.get(revision, {}),
        dropped=dropped,
        replicas={item.name: item.replicas for item in lws if item.name not in dropped},
    )


def plan_slice(
    *,
    set_name: str,
    slice_index: int,
    revision: str,
    roles: Sequence[RoleInput],
    lws: Sequence[records.ObservedObject],
    control: SliceControl = SliceControl(),
) -> SlicePlan:
    """Decide this pass for one slice (docs/rollout.md). A slice that would roll keeps every LWS
    as it is while paused, keeps serving its revision while partitioned, and holds once its new
    revision reaches the hold's share (`hooks.core.canary`)."""
    state = take_stock(lws, set_name=set_name, slice_index=slice_index, revision=revision)
    if not serves_spec_roles(state, roles):
        return _steady(state, roles)
    if control.paused:
        return state.plan(Phase.PAUSED)
    if control.partitioned:
        return _partitioned(state, roles)
    if not state.new:
        return _start(state, roles)
    if not _is_stable(state, roles):
        return _wait(state, roles)
    return _step(state, roles, hold_at=control.hold_at_percent)


def serves_spec_roles(state: SliceState, roles: Sequence[RoleInput]) -> bool:
    """Whether an old revision still has replicas on a spec role (removed roles do not count)."""
    return any(
        by_role[role.name].replicas > 0
        for by_role in state.old.values()
        for role in roles
        if role.name in by_role
    )


def _steady(state: SliceState, roles: Sequence[RoleInput]) -> SlicePlan:
    """Rule 2: each spec role gets a target LWS at its target (unknown targets keep what runs)."""
    created: dict[str, int] = {}
    replicas: dict[str, int] = {}
    for role in roles:
        existing = state.new.get(role.name)
        target = role.target
        if target is None:
            target = existing.replicas if existing is not None else 0
        if existing is None:
            created[role.name] = target
        else:
            replicas[existing.name] = target
    return state.plan(Phase.STEADY, created=created, replicas=replicas)


def _partitioned(state: SliceState, roles: Sequence[RoleInput]) -> SlicePlan:
    """A slice past the partition keeps the revision it serves: steady on one old revision, its
    spec roles scale to their targets (nothing is created); anything else stays as it is."""
    if state.new or len(state.old) != 1:
        return state.plan(Phase.PARTITIONED)
    (serving,) = state.old.values()
    replicas = {
        serving[role.name].name: role.target
        for role in roles
        if role.name in serving and role.target is not None
    }
    return state.plan(Phase.PARTITIONED, replicas=replicas)


def _start(state: SliceState, roles: Sequence[RoleInput]) -> SlicePlan:
    """Rule 3: snapshot every old LWS's replicas and create the target LWS at 0."""
    initial = {
        item.name: item.replicas for by_role in state.old.values() for item in by_role.values()
    }
    created = {role.name: 0 for role in roles}
    return state.plan(Phase.STARTING, created=created, initial_replicas=initial)


def _is_stable(state: SliceState, roles: Sequence[RoleInput]) -> bool:
    """Rule 4: every spec role has a target LWS whose replicas are all ready."""
    return all(
        role.name in state.new
        and state.new[role.name].replicas == state.new[role.name].status.ready_replicas
        for role in roles
    )


def _wait(state: SliceState, roles: Sequence[RoleInput]) -> SlicePlan:
    """Rule 4: change nothing, except recreating a target LWS that went missing (at 0)."""
    missing = {role.name: 0 for role in roles if role.name not in state.new}
    return state.plan(Phase.WAITING, created=missing)


def _step(state: SliceState, roles: Sequence[RoleInput], *, hold_at: int | None) -> SlicePlan:
    """Rules 5 and 6: one planner step, new LWS scaled up, old LWS drained newest first; or,
    once every spec role's new revision has the hold's share of its target, none."""
    order = _role_order(roles, state.old)
    vectors = _vectors(order, roles=roles, state=state)
    if hold_at is not None and has_reached(
        vectors["current_new"][: len(roles)], vectors["target"][: len(roles)], percent=hold_at
    ):
        return state.plan(Phase.HELD)
    step = planner.next_step(**vectors)
    if step is None:
        return state.plan(Phase.STALLED)
    replicas = {
        state.new[name].name: next_new
        for name, now_new, next_new in zip(order, vectors["current_new"], step.new, strict=True)
        if name in state.new and next_new > now_new
    }
    budget = {
        name: now_old - next_old
        for name, now_old, next_old in zip(order, vectors["current_old"], step.old, strict=True)
    }
    replicas.update(_drain(state.old, budget=budget, order=order))
    return state.plan(Phase.STEPPING, replicas=replicas, step=step)


def has_reached(new: Sequence[int], target: Sequence[int], *, percent: int) -> bool:
    """Whether every role's new replicas are at least `percent` of its target (rounded up, so
    that a share of a small role is a whole group)."""
    return all(
        have >= -(-percent * wanted // 100) for have, wanted in zip(new, target, strict=True)
    )


def _role_order(roles: Sequence[RoleInput], old: Mapping[str, Group]) -> list[str]:
    """Spec roles in spec order, then roles found only in old revisions, by name."""
    spec_names = [role.name for role in roles]
    removed = {name for by_role in old.values() for name in by_role} - set(spec_names)
    return [*spec_names, *sorted(removed)]


class _Vectors(TypedDict):
    initial_old: tuple[int, ...]
    current_old: tuple[int, ...]
    current_new: tuple[int, ...]
    target: tuple[int, ...]
    config: tuple[planner.RoleConfig, ...]


def _vectors(order: Sequence[str], *, roles: Sequence[RoleInput], state: SliceState) -> _Vectors:
    """The planner's inputs, one entry per role of `order` (removed roles target 0)."""
    by_name = {role.name: role for role in roles}
    initial_old = []
    current_old = []
    current_new = []
    target = []
    config = []
    for name in order:
        olds = [by_role[name] for by_role in state.old.values() if name in by_role]
        initial_old.append(sum(initial_of(item) for item in olds))
        current_old.append(sum(item.replicas for item in olds))
        role = by_name.get(name)
        new = state.new[name].replicas if role is not None else 0
        current_new.append(new)
        if role is None:
            target.append(0)
            config.append(planner.DEFAULT_CONFIG)
            continue
        wanted = new if role.target is None else role.target
        target.append(max(wanted, new))  # the no-shrink guard (rule 5)
        config.append(role.config)
    return _Vectors(
        initial_old=tuple(initial_old),
        current_old=tuple(current_old),
        current_new=tuple(current_new),
        target=tuple(target),
        config=tuple(config),
    )


def _drain(
    old: Mapping[str, Group], *, budget: Mapping[str, int], order: Sequence[str]
) -> dict[str, int]:
    """Rule 6: new replicas of old LWS, by name, spending `budget` newest revision first."""
    replicas: dict[str, int] = {}
    remaining = dict(budget)
    for by_role in _newest_first(old):
        if all(value <= 0 for value in remaining.values()):
            break
        drained, charged = _drain_revision(by_role, budget=remaining, order=order)
        replicas.update(drained)
        for name, amount in charged.items():
            remaining[name] -= amount
    return replicas


def _drain_revision(
    by_role: Group, *, budget: Mapping[str, int], order: Sequence[str]
) -> tuple[dict[str, int], dict[str, int]]:
    """One old revision's drain: (new replicas by LWS name, budget charged by role).

    Each role drains min(budget, replicas); when one would reach 0, all of the revision's roles go
    to 0 together (coordinated drain), charged to the roles that reached 0 by themselves (or to
    every role when none did). Old LWS never grow.
    """
    present = [name for name in order if name in by_role]
    planned = {name: min(budget[name], by_role[name].replicas) for name in present}
    reaching_zero = {name for name in present if by_role[name].replicas - planned[name] == 0}
    replicas: dict[str, int] = {}
    charged: dict[str, int] = {}
    for name in present:
        now = by_role[name].replicas
        after = 0 if reaching_zero else now - planned[name]
        if now <= after:
            continue
        replicas[by_role[name].name] = after
        if name in reaching_zero or not reaching_zero:
            charged[name] = planned[name]
    return replicas, charged


def _newest_first(old: Mapping[str, Group]) -> list[Group]:
    def newest(rev: str) -> str:
        return max(item.creation_timestamp for item in old[rev].values())

    # Sorting is stable, so revisions created at the same second keep their name order.
    ordered = sorted(sorted(old), key=newest, reverse=True)
    return [old[rev] for rev in ordered]
