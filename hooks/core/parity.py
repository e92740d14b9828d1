"""Upstream's step of a rollout whose targets never moved (parity mode), applied to a slice's LWS
under the floor that guards it (docs/rollout.md, "The rolling update of one slice", "Two modes
per slice"). Pure: reads its arguments only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hooks.core import planner, rescale, stock


def keep(
    roles: Sequence[rescale.Role], revisions: Sequence[rescale.Old], *, old: Sequence[int]
) -> list[int]:
    """Per role, the old groups its floor, `min(initial old, target) - maxUnavailable` Ready
    groups, keeps from any drain (`planner.keep_for`); `old`: its old groups."""
    return [
        planner.keep_for(
            floor=max(0, min(role.initial_old, role.target) - role.config.max_unavailable),
            old=old[r],
            old_ready=sum(rev.ready[r] for rev in revisions),
            new_ready=role.new_ready,
        )
        for r, role in enumerate(roles)
    ]


def next_step(
    roles: Sequence[rescale.Role], *, old: Sequence[int], keep: Sequence[int] | None = None
) -> planner.Step | None:
    """The planner's step for `roles`, each with `old` old groups (`planner.next_step`)."""
    return planner.next_step(
        initial_old=[role.initial_old for role in roles],
        current_old=old,
        current_new=[role.new for role in roles],
        target=[role.target for role in roles],
        config=[role.config for role in roles],
        keep=keep,
    )


def apply(
    state: stock.SliceState,
    step: planner.Step,
    *,
    order: Sequence[str],
    roles: Sequence[rescale.Role],
    old: Sequence[int],
    keep: Sequence[int],
) -> dict[str, int]:
    """The replicas a step changes, by LWS name: old LWS drained newest revision first (rule 6),
    no role below `keep`; new LWS grown to the step's count, but a role whose drain kept more old
    groups than the step asked only to its surge ceiling, counting them."""
    budget = {name: now - after for name, now, after in zip(order, old, step.old, strict=True)}
    left = dict(zip(order, old, strict=True))
    floors = dict(zip(order, keep, strict=True))
    replicas: dict[str, int] = {}
    for by_role in stock.newest_first(state.old):
        if all(value <= 0 for value in budget.values()):
            break
        drained, charged = _drain_revision(
            by_role, budget=budget, order=order, left=left, keep=floors
        )
        replicas.update(drained)
        for name, amount in charged.items():
            budget[name] -= amount
    for name, role, wanted, stepped in zip(order, roles, step.new, step.old, strict=True):
        if left[name] > stepped and role.target != 0:
            wanted = max(role.new, min(wanted, role.ceiling - left[name]))
        if wanted > role.new and name in state.new:
            replicas[state.new[name].name] = wanted
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
    role); `left`, what each role has left, is updated."""
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
