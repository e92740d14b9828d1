"""A rolling slice's LWS as `rescale`'s vectors, and a scaled pass's answer as LWS replicas.

`rollout.plan_slice` turns to these when a slice's target moved during its rollout (scaled mode),
or when the slice stands still on purpose (paused, held, partitioned mid-way) and its roles'
groups must follow their targets (docs/rollout.md, "Scaling while a rollout runs"). `inputs`
reads the slice: per role its target, budget, new LWS and `initial-replicas` snapshot, and per old
revision (newest first) its replicas and Ready groups; `replicas` maps a pass back onto the LWS;
`needs_serving` says whether a slice that stands still runs what its targets ask, as far as
upstream's step would have left it. Pure: reads its arguments only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hooks.core import planner, rescale, stock


@dataclass(frozen=True, slots=True)
class Inputs:
    """A slice as vectors: one entry per role of `order`, one `Old` per revision of
    `revisions`."""

    order: tuple[str, ...]
    roles: tuple[rescale.Role, ...]
    revisions: tuple[stock.Group, ...]
    """The old revisions' LWS by role, newest first."""
    old: tuple[rescale.Old, ...]


def inputs(
    state: stock.SliceState, roles: Sequence[stock.RoleInput], *, removed: bool = True
) -> Inputs:
    """The slice's vectors: spec roles in spec order, then (when `removed`) the roles found only
    in old revisions, which target 0. A role whose target is unknown keeps what its new LWS
    runs."""
    by_name = {role.name: role for role in roles}
    order = [role.name for role in roles]
    if removed:
        order += sorted({name for group in state.old.values() for name in group} - set(order))
    revisions = tuple(stock.newest_first(state.old))
    return Inputs(
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


def replicas(state: stock.SliceState, slice_: Inputs, result: rescale.Pass) -> dict[str, int]:
    """The replicas a pass changes, by LWS name."""
    changed: dict[str, int] = {}
    for name, new in zip(slice_.order, result.new, strict=True):
        lws = state.new.get(name)
        if lws is not None and new != lws.replicas:
            changed[lws.name] = new
    for group, counts in zip(slice_.revisions, result.old, strict=True):
        for name, old in zip(slice_.order, counts, strict=True):
            if name in group and old is not None and old != group[name].replicas:
                changed[group[name].name] = old
    return changed


def waits(slice_: Inputs, result: rescale.Pass) -> tuple[str, ...]:
    """What a pass waits for, role by role (`rescale.Pass.waits`)."""
    return tuple(f"{slice_.order[index]}: {reason}" for index, reason in result.waits)


def needs_serving(slice_: Inputs, targets: Mapping[str, int | None]) -> bool:
    """Whether some spec role of a slice that stands still runs, old and new together, fewer
    groups than upstream's step ever leaves it (`min(initial old, target) - maxUnavailable`) or
    more (`max(initial old, target) + maxSurge`, at least one more): its target moved and moved
    back while it stood still, so that the record no longer tells."""
    for name, role in zip(slice_.order, slice_.roles, strict=True):
        if targets.get(name) is None:
            continue
        index = slice_.order.index(name)
        total = role.new + sum(rev.replicas[index] or 0 for rev in slice_.old)
        fewest = min(role.initial_old, role.target) - role.config.max_unavailable
        most = max(role.initial_old, role.target) + max(role.config.max_surge, 1)
        if total < fewest or total > most:
            return True
    return False
