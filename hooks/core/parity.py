"""Upstream's step of a rollout whose targets never moved (parity mode), and the floor that
guards it: a slice's LWS as the planner's vectors, and a step applied back to them (docs/rollout.md,
"The rolling update of one slice", "Two modes per slice"). Pure: reads its arguments only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypedDict

from hooks.core import planner, stock


def role_order(roles: Sequence[stock.RoleInput], old: Mapping[str, stock.Group]) -> list[str]:
    """Spec roles in spec order, then roles found only in old revisions, by name."""
    spec_names = [role.name for role in roles]
    removed = {name for by_role in old.values() for name in by_role} - set(spec_names)
    return [*spec_names, *sorted(removed)]


class Vectors(TypedDict):
    initial_old: tuple[int, ...]
    current_old: tuple[int, ...]
    current_new: tuple[int, ...]
    target: tuple[int, ...]
    config: tuple[planner.RoleConfig, ...]


def vectors(
    order: Sequence[str], *, roles: Sequence[stock.RoleInput], state: stock.SliceState
) -> Vectors:
    """The planner's inputs, one entry per role of `order` (removed roles target 0; a role whose
    target is unknown keeps what its new LWS runs)."""
    by_name = {role.name: role for role in roles}
    initial_old = []
    current_old = []
    current_new = []
    target = []
    config = []
    for name in order:
        olds = [by_role[name] for by_role in state.old.values() if name in by_role]
        initial_old.append(sum(stock.initial_of(item) for item in olds))
        current_old.append(sum(item.replicas for item in olds))
        role = by_name.get(name)
        new = state.new[name].replicas if role is not None else 0
        current_new.append(new)
        if role is None:
            target.append(0)
            config.append(planner.DEFAULT_CONFIG)
            continue
        target.append(new if role.target is None else role.target)
        config.append(role.config)
    return Vectors(
        initial_old=tuple(initial_old),
        current_old=tuple(current_old),
        current_new=tuple(current_new),
        target=tuple(target),
        config=tuple(config),
    )


def keep(order: Sequence[str], vectors: Vectors, state: stock.SliceState) -> list[int]:
    """Per role, the old groups its floor, `min(initial old, target) - maxUnavailable` Ready
    groups, keeps from any drain (`planner.keep_for`)."""
    keep = []
    for index, name in enumerate(order):
        olds = [by_role[name] for by_role in state.old.values() if name in by_role]
        new = state.new.get(name)
        floor = min(vectors["initial_old"][index], vectors["target"][index])
        keep.append(
            planner.keep_for(
                floor=max(0, floor - vectors["config"][index].max_unavailable),
                old=vectors["current_old"][index],
                old_ready=sum(stock.ready_of(item) for item in olds),
                new_ready=0 if new is None else stock.ready_of(new),
            )
        )
    return keep


def grown(
    order: Sequence[str], vectors: Vectors, *, step: planner.Step, left: Mapping[str, int]
) -> list[tuple[str, int]]:
    """The roles a step grows, with their new count; one whose drain kept more old groups than
    the step asked (`left`) grows only to its surge ceiling, counting them."""
    grown = []
    for index, name in enumerate(order):
        now, wanted = vectors["current_new"][index], step.new[index]
        target = vectors["target"][index]
        if left[name] > step.old[index] and target != 0:
            ceiling = target + vectors["config"][index].max_surge - left[name]
            wanted = max(now, min(wanted, ceiling))
        if wanted > now:
            grown.append((name, wanted))
    return grown


def drain(
    old: Mapping[str, stock.Group],
    *,
    budget: Mapping[str, int],
    order: Sequence[str],
    left: dict[str, int],
    keep: Mapping[str, int],
) -> dict[str, int]:
    """Rule 6: new replicas of old LWS, by name, spending `budget` newest revision first, no
    role left with fewer old replicas than `keep` (`left`: what each role has left, updated)."""
    replicas: dict[str, int] = {}
    remaining = dict(budget)
    for by_role in stock.newest_first(old):
        if all(value <= 0 for value in remaining.values()):
            break
        drained, charged = _drain_revision(
            by_role, budget=remaining, order=order, left=left, keep=keep
        )
        replicas.update(drained)
        for name, amount in charged.items():
            remaining[name] -= amount
    return replicas


def _drain_revision(
    by_role: stock.Group,
    *,
    budget: Mapping[str, int],
    order: Sequence[str],
    left: dict[str, int],
    keep: Mapping[str, int],
) -> tuple[dict[str, int], dict[str, int]]:
    """One old revision's coordinated drain: (new replicas by LWS name, budget charged by
    role)."""
    present = [name for name in order if name in by_role]
    planned = {
        name: max(0, min(budget[name], by_role[name].replicas, left[name] - keep[name]))
        for name in present
    }
    reaching_zero = {name for name in present if by_role[name].replicas - planned[name] == 0}
    if _pinned(by_role, reaching_zero, present=present, left=left, keep=keep):
        planned = {
            name: amount - int(name in reaching_zero and by_role[name].replicas > 0)
            for name, amount in planned.items()
        }
        reaching_zero = set()
    replicas: dict[str, int] = {}
    charged: dict[str, int] = {}
    for name in present:
        now = by_role[name].replicas
        after = 0 if reaching_zero else now - planned[name]
        if now <= after:
            continue
        replicas[by_role[name].name] = after
        left[name] -= now - after
        if name in reaching_zero or not reaching_zero:
            charged[name] = planned[name]
    return replicas, charged


def _pinned(
    by_role: stock.Group,
    reaching_zero: set[str],
    *,
    present: Sequence[str],
    left: Mapping[str, int],
    keep: Mapping[str, int],
) -> bool:
    """Whether retiring the revision whole would leave a role fewer old replicas than `keep`."""
    return bool(reaching_zero) and any(
        left[name] - by_role[name].replicas < keep[name]
        for name in present
        if name not in reaching_zero
    )
