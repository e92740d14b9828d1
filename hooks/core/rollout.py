"""One slice's LWS decisions for one pass: steady state, or one step of a coordinated rollout.

`plan_slice` takes stock of the slice (`stock.take_stock`), reads each role's record (`_books`)
and runs exactly one phase, each a pure function returning the `SlicePlan`: steady, start, wait,
upstream's step (`parity`), the scaled pass (`rescale`, over the vectors `_inputs` reads), or what
a control asks (paused, partitioned, held). It renders nothing (that is `children`) and reads only
its arguments. The rules of each phase are docs/rollout.md's ("The rolling update of one slice",
"Scaling while a rollout runs").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from hooks import api
from hooks.core import parity, planner, records, rescale, stock


class Phase(StrEnum):
    STEADY = "steady"
    STARTING = "starting"
    WAITING = "waiting"
    STEPPING = "stepping"
    STALLED = "stalled"
    PAUSED = "paused"
    PARTITIONED = "partitioned"
    HELD = "held"


@dataclass(frozen=True, slots=True)
class SliceControl:
    """What the set's rollout controls ask of one slice (`hooks.core.canary` decides it)."""

    paused: bool = False
    partitioned: bool = False
    """The slice is at or past the partition: it keeps serving the revision it runs."""
    hold_at_percent: int | None = None
    """The rollout holds once every spec role's new revision has this share of its target."""


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
    records: Mapping[str, int | None] = field(default_factory=dict)
    """The record of each role's target when the rollout started, to write on existing LWS by
    name (None: removed, from an LWS that is not the target's)."""
    created_records: Mapping[str, int] = field(default_factory=dict)
    """The record to write on each target LWS created, by role."""
    moved: tuple[TargetMove, ...] = ()
    """Roles whose target moved since the slice's rollout started."""
    moves: frozenset[rescale.Move] = frozenset()
    """What a scaled pass did (empty for upstream's step)."""
    waits: tuple[str, ...] = ()
    """In words (`role: reason`): what a rollout pass that moved nothing waits for, or why a
    slice that stands still runs other than its targets."""


@dataclass(frozen=True, slots=True)
class TargetMove:
    """A role's target now, and the one recorded when the slice's rollout started."""

    role: str
    recorded: int
    target: int


def role_config(role: api.Role, target: int | None) -> planner.RoleConfig:
    """The planner's budget for a role (`api.Role.rolling_update_budget`) at its target."""
    budget = role.rolling_update_budget
    if budget is None:
        return planner.DEFAULT_CONFIG
    return planner.resolve_config(
        replicas=target or 0, max_surge=budget[0], max_unavailable=budget[1]
    )


def plan_slice(
    *,
    set_name: str,
    slice_index: int,
    revision: str,
    roles: Sequence[stock.RoleInput],
    lws: Sequence[records.ObservedObject],
    control: SliceControl = SliceControl(),
) -> SlicePlan:
    """Decide this pass for one slice (docs/rollout.md)."""
    state = stock.take_stock(lws, set_name=set_name, slice_index=slice_index, revision=revision)
    if not stock.serves_spec_roles(state, [role.name for role in roles]):
        return _steady(state, roles)
    writes, moved, scaled = _books(state, roles)
    plan = _rolling(state, roles, control, scaled)
    return dataclasses.replace(plan, records={**writes, **plan.records}, moved=moved)


def _rolling(
    state: stock.SliceState, roles: Sequence[stock.RoleInput], control: SliceControl, scaled: bool
) -> SlicePlan:
    """The phase of a slice an old revision still serves."""
    if control.paused or control.partitioned:
        phase = Phase.PAUSED if control.paused else Phase.PARTITIONED
        return _stopped(state, roles, phase, scaled=scaled)
    if not state.new:
        return _start(state, roles)
    if any(role.name not in state.new for role in roles):
        return _wait(state, roles)
    if scaled:
        return _scaled(state, roles, hold_at=control.hold_at_percent)
    # Rule 4, the stability gate: every target LWS has all its replicas ready.
    if any(state.new[r.name].replicas != state.new[r.name].status.ready_replicas for r in roles):
        return _wait(state, roles)
    return _step(state, roles, hold_at=control.hold_at_percent)


def _plan(
    state: stock.SliceState,
    phase: Phase,
    *,
    replicas: Mapping[str, int] | None = None,
    created: Mapping[str, int] | None = None,
    created_records: Mapping[str, int] | None = None,
    initial_replicas: Mapping[str, int] | None = None,
    step: planner.Step | None = None,
    moves: frozenset[rescale.Move] = frozenset(),
    waits: tuple[str, ...] = (),
) -> SlicePlan:
    """A plan in `phase`; every LWS keeps its replicas unless `replicas` names it."""
    return SlicePlan(
        slice_index=state.index,
        phase=phase,
        replicas={**state.replicas, **(replicas or {})},
        initial_replicas=initial_replicas or {},
        created=created or {},
        created_records=created_records or {},
        dropped=state.dropped,
        step=step,
        moves=moves,
        waits=waits,
    )


def _books(
    state: stock.SliceState, roles: Sequence[stock.RoleInput]
) -> tuple[dict[str, int | None], tuple[TargetMove, ...], bool]:
    """The records of a rolling slice (docs/rollout.md, "The record"): by LWS name, those to
    write (at the role's target, on a target LWS whose record is missing or malformed) or, None,
    remove (from old LWS); the roles whose target moved; whether the slice is scaled."""
    writes: dict[str, int | None] = {
        item.name: None
        for by_role in state.old.values()
        for item in by_role.values()
        if api.ANNOTATION_ROLLOUT_TARGET in item.annotations
    }
    seen = []
    moved = []
    for role in roles:
        lws = state.new.get(role.name)
        if lws is None:
            continue
        recorded = stock.recorded_target(lws)
        if recorded is None and role.target is not None:
            recorded = writes[lws.name] = role.target
        seen.append((role.target, recorded, lws.replicas))
        if role.target is not None and recorded is not None and recorded != role.target:
            moved.append(TargetMove(role=role.name, recorded=recorded, target=role.target))
    return writes, tuple(moved), rescale.is_scaled(seen)


def _steady(state: stock.SliceState, roles: Sequence[stock.RoleInput]) -> SlicePlan:
    """Rule 2: each spec role gets a target LWS at its target (unknown targets keep what runs)."""
    created: dict[str, int] = {}
    replicas: dict[str, int] = {}
    for role in roles:
        existing = state.new.get(role.name)
        if existing is None:
            created[role.name] = role.target or 0
        else:
            replicas[existing.name] = existing.replicas if role.target is None else role.target
    return _plan(state, Phase.STEADY, created=created, replicas=replicas)


def _start(state: stock.SliceState, roles: Sequence[stock.RoleInput]) -> SlicePlan:
    """Rule 3: snapshot every old LWS's replicas, create the target LWS at 0 with their records."""
    initial = {
        item.name: item.replicas for by_role in state.old.values() for item in by_role.values()
    }
    created = {role.name: 0 for role in roles}
    return _plan(
        state,
        Phase.STARTING,
        created=created,
        created_records=_records_of(roles),
        initial_replicas=initial,
    )


def _records_of(roles: Sequence[stock.RoleInput]) -> dict[str, int]:
    return {role.name: role.target for role in roles if role.target is not None}


def _wait(state: stock.SliceState, roles: Sequence[stock.RoleInput]) -> SlicePlan:
    """Rule 4: change nothing, except recreating a target LWS that went missing (at 0)."""
    missing = [role for role in roles if role.name not in state.new]
    return _plan(
        state,
        Phase.WAITING,
        created={role.name: 0 for role in missing},
        created_records=_records_of(missing),
    )


def _scaled(
    state: stock.SliceState, roles: Sequence[stock.RoleInput], *, hold_at: int | None
) -> SlicePlan:
    """The scaled pass of a slice whose target moved (`rescale.rolling`), or, held, its share of
    the current target."""
    if hold_at is not None:
        return _held(state, roles, percent=hold_at, serve=True)
    inputs = _inputs(state, roles)
    result = rescale.rolling(inputs.roles, inputs.old)
    return _served(state, Phase.STEPPING if result.moves else Phase.WAITING, inputs, result)


def _held(
    state: stock.SliceState, roles: Sequence[stock.RoleInput], *, percent: int, serve: bool
) -> SlicePlan:
    """A held slice: as it is, unless its target moved (`serve`) or it runs what upstream's step
    never leaves; then the new revision keeps its share of the current target and the old
    revision serves the rest (`rescale.held`). Roles only old revisions have stay as they are."""
    inputs = _inputs(state, roles, removed=False)
    if not serve and not _needs_serving(inputs, roles):
        return _plan(state, Phase.HELD)
    return _served(
        state, Phase.HELD, inputs, rescale.held(inputs.roles, inputs.old, percent=percent)
    )


def _stopped(
    state: stock.SliceState, roles: Sequence[stock.RoleInput], phase: Phase, *, scaled: bool
) -> SlicePlan:
    """A paused slice, or one past the partition: as it is, unless its target moved or it runs
    what upstream's step never leaves; then its groups follow their targets (`rescale.stopped`).
    Without LWS of the target it scales the one old revision it runs (several stay as they are)."""
    if not state.new:
        if len(state.old) != 1:
            return _plan(state, phase)
        (serving,) = state.old.values()
        replicas = {
            serving[role.name].name: role.target
            for role in roles
            if role.name in serving and role.target is not None
        }
        return _plan(state, phase, replicas=replicas)
    inputs = _inputs(state, roles, removed=False)
    if not scaled and not _needs_serving(inputs, roles):
        return _plan(state, phase)
    return _served(state, phase, inputs, rescale.stopped(inputs.roles, inputs.old))


def _step(
    state: stock.SliceState, roles: Sequence[stock.RoleInput], *, hold_at: int | None
) -> SlicePlan:
    """Rules 5 and 6: one planner step, no role's old groups drained below its floor, new LWS
    scaled up, old LWS drained newest first; or, once every spec role's new revision has the
    hold's share of its target, none. Where the floor leaves upstream's step nothing to do (or
    its drain, a revision at a time, nothing to drain), the slice takes a scaled pass instead."""
    inputs = _inputs(state, roles)
    spec = inputs.roles[: len(roles)]
    if hold_at is not None and has_reached(
        [role.new for role in spec], [role.target for role in spec], percent=hold_at
    ):
        return _held(state, roles, percent=hold_at, serve=False)
    old = [sum(rev.replicas[r] or 0 for rev in inputs.old) for r in range(len(inputs.order))]
    keep = parity.keep(inputs.roles, inputs.old, old=old)
    step = parity.next_step(inputs.roles, old=old, keep=keep)
    if step is None and parity.next_step(inputs.roles, old=old) is None:
        return _plan(state, Phase.STALLED)
    replicas = {}
    if step is not None:
        replicas = parity.apply(
            state, step, order=inputs.order, roles=inputs.roles, old=old, keep=keep
        )
    if not replicas:
        return _scaled(state, roles, hold_at=hold_at)
    return _plan(state, Phase.STEPPING, replicas=replicas, step=step)


def has_reached(new: Sequence[int], target: Sequence[int], *, percent: int) -> bool:
    """Whether every role's new replicas are at least `percent` of its target (rounded up, so
    that a share of a small role is a whole group)."""
    return all(
        have >= -(-percent * wanted // 100) for have, wanted in zip(new, target, strict=True)
    )


@dataclass(frozen=True, slots=True)
class _Inputs:
    """A slice as `rescale`'s vectors, and per old revision (newest first) its LWS by role."""

    order: tuple[str, ...]
    roles: tuple[rescale.Role, ...]
    revisions: tuple[stock.Group, ...]
    old: tuple[rescale.Old, ...]


def _inputs(
    state: stock.SliceState, roles: Sequence[stock.RoleInput], *, removed: bool = True
) -> _Inputs:
    """Spec roles in spec order, then (when `removed`) the roles found only in old revisions,
    which target 0. A role whose target is unknown keeps what its new LWS runs."""
    by_name = {role.name: role for role in roles}
    order = [role.name for role in roles]
    if removed:
        order += sorted({name for group in state.old.values() for name in group} - set(order))
    revisions = tuple(stock.newest_first(state.old))
    return _Inputs(
        order=tuple(order),
        roles=tuple(_role(state, name, by_name.get(name)) for name in order),
        revisions=revisions,
        old=tuple(
            rescale.Old(
                replicas=tuple(group[name].replicas if name in group else None for name in order),
                ready=tuple(stock.ready_of(group[name]) if name in group else 0 for name in order),
            )
            for group in revisions
        ),
    )


def _role(state: stock.SliceState, name: str, role: stock.RoleInput | None) -> rescale.Role:
    new = state.new.get(name) if role is not None else None
    replicas = 0 if new is None else new.replicas
    target = replicas if role is None or role.target is None else role.target
    initial = sum(stock.initial_of(group[name]) for group in state.old.values() if name in group)
    return rescale.Role(
        target=0 if role is None else target,
        config=planner.DEFAULT_CONFIG if role is None else role.config,
        new=replicas,
        new_ready=0 if new is None else stock.ready_of(new),
        initial_old=initial,
        has_new=new is not None,
    )


def _served(
    state: stock.SliceState, phase: Phase, inputs: _Inputs, result: rescale.Pass
) -> SlicePlan:
    """A plan in `phase` of a scaled pass: the replicas it changes, and what it waits for."""
    changed: dict[str, int] = {}
    for name, new in zip(inputs.order, result.new, strict=True):
        lws = state.new.get(name)
        if lws is not None and new != lws.replicas:
            changed[lws.name] = new
    for group, counts in zip(inputs.revisions, result.old, strict=True):
        for name, old in zip(inputs.order, counts, strict=True):
            if name in group and old is not None and old != group[name].replicas:
                changed[group[name].name] = old
    waits = tuple(f"{inputs.order[index]}: {reason}" for index, reason in result.waits)
    return _plan(state, phase, replicas=changed, moves=result.moves, waits=waits)


def _needs_serving(inputs: _Inputs, roles: Sequence[stock.RoleInput]) -> bool:
    """Whether some spec role (of known target) of a slice that stands still runs, old and new
    together, fewer groups than upstream's step ever leaves it or more (`min(I, T) - U` to
    `max(I, T) + max(S, 1)`): its target moved and moved back while it stood still."""
    for index, (spec, role) in enumerate(zip(roles, inputs.roles, strict=True)):
        if spec.target is None:
            continue
        total = role.new + sum(rev.replicas[index] or 0 for rev in inputs.old)
        fewest = min(role.initial_old, role.target) - role.config.max_unavailable
        most = max(role.initial_old, role.target) + max(role.config.max_surge, 1)
        if total < fewest or total > most:
            return True
    return False
