"""One slice's LWS decisions for one pass: steady state, or one step of a coordinated rollout.

Input: the slice's observed LWS (already known to belong to this set and slice), the target
revision and per-role targets. Output: a `SlicePlan` saying which LWS keep which replicas, which
get the `initial-replicas` annotation, which target LWS are created and which LWS are deleted.
It never renders objects (that is `children`) and never reads anything but its arguments.

The rules, in order (SPEC §5 step 3 and §5a):

1. A revision other than the target whose LWS are all at 0 replicas is deleted, all roles at once.
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
   (annotation, else replicas), current old, current new, target (External roles never shrink
   below current new while old revisions exist) and the resolved surge/unavailable config.
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

from hooks import api, envelope, planner


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
    external: bool
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


def replicas_of(lws: envelope.ObservedObject) -> int:
    """`spec.replicas`, 1 when unset (the LWS default)."""
    return 1 if lws.spec_replicas is None else lws.spec_replicas


def initial_of(lws: envelope.ObservedObject) -> int:
    """The `initial-replicas` annotation when it is an integer, else the current replicas."""
    value = lws.annotations.get(api.ANNOTATION_INITIAL_REPLICAS, "")
    try:
        return int(value)
    except ValueError:
        return replicas_of(lws)


def plan_slice(
    *,
    set_name: str,
    slice_index: int,
    revision: str,
    roles: Sequence[RoleInput],
    lws: Sequence[envelope.ObservedObject],
) -> SlicePlan:
    """Decide this pass for one slice (see the module docstring for the rules)."""
    groups, unplanned = _group(lws)
    replicas = {item.name: replicas_of(item) for item in lws}
    dropped = []
    for group_revision, by_role in groups.items():
        if group_revision != revision and all(replicas_of(x) == 0 for x in by_role.values()):
            dropped.extend(item.name for item in by_role.values())
    for name in dropped:
        del replicas[name]
    old = {
        rev: by_role
        for rev, by_role in groups.items()
        if rev != revision and not all(replicas_of(x) == 0 for x in by_role.values())
    }
    current = groups.get(revision, {})
    spec_names = [role.name for role in roles]
    common = {"slice_index": slice_index, "dropped": tuple(sorted(dropped)), "unplanned": unplanned}

    serving_old = sum(
        replicas_of(by_role[name])
        for by_role in old.values()
        for name in spec_names
        if name in by_role
    )
    if serving_old == 0:
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
        return SlicePlan(phase=Phase.STEADY, replicas=replicas, created=created, **common)

    if not current:
        initial = {
            item.name: replicas_of(item) for by_role in old.values() for item in by_role.values()
        }
        return SlicePlan(
            phase=Phase.STARTING,
            replicas=replicas,
            initial_replicas=initial,
            created={role.name: 0 for role in roles},
            **common,
        )

    missing = {role.name: 0 for role in roles if role.name not in current}
    stable = not missing and all(
        replicas_of(current[role.name]) == current[role.name].status.ready_replicas
        for role in roles
    )
    if not stable:
        return SlicePlan(phase=Phase.WAITING, replicas=replicas, created=missing, **common)

    removed = sorted({name for by_role in old.values() for name in by_role} - set(spec_names))
    order = [*spec_names, *removed]
    roles_by_name = {role.name: role for role in roles}
    initial_old = tuple(
        sum(initial_of(by_role[name]) for by_role in old.values() if name in by_role)
        for name in order
    )
    current_old = tuple(
        sum(replicas_of(by_role[name]) for by_role in old.values() if name in by_role)
        for name in order
    )
    current_new = tuple(
        replicas_of(current[name]) if name in roles_by_name else 0 for name in order
    )
    targets = []
    for name, new in zip(order, current_new, strict=True):
        role = roles_by_name.get(name)
        if role is None:
            targets.append(0)
            continue
        target = new if role.target is None else role.target
        targets.append(max(target, new) if role.external else target)
    config = tuple(
        roles_by_name[name].config if name in roles_by_name else planner.DEFAULT_CONFIG
        for name in order
    )
    step = planner.next_step(
        initial_old=initial_old,
        current_old=current_old,
        current_new=current_new,
        target=tuple(targets),
        config=config,
    )
    if step is None:
        return SlicePlan(phase=Phase.STALLED, replicas=replicas, **common)

    for name, now_new, next_new in zip(order, current_new, step.new, strict=True):
        if name in roles_by_name and next_new > now_new:
            replicas[current[name].name] = next_new
    budget = {
        name: now_old - next_old
        for name, now_old, next_old in zip(order, current_old, step.old, strict=True)
    }
    for by_role in _newest_first(old):
        if all(value <= 0 for value in budget.values()):
            break
        _drain_revision(by_role, budget=budget, replicas=replicas, order=order)
    return SlicePlan(phase=Phase.STEPPING, replicas=replicas, step=step, **common)


def _drain_revision(
    by_role: Mapping[str, envelope.ObservedObject],
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


def _newest_first(
    old: Mapping[str, Mapping[str, envelope.ObservedObject]],
) -> list[Mapping[str, envelope.ObservedObject]]:
    def newest(rev: str) -> str:
        return max(item.creation_timestamp for item in old[rev].values())

    # Sorting is stable, so revisions created at the same second keep their name order.
    ordered = sorted(sorted(old), key=newest, reverse=True)
    return [old[rev] for rev in ordered]


def _group(
    lws: Sequence[envelope.ObservedObject],
) -> tuple[dict[str, dict[str, envelope.ObservedObject]], tuple[str, ...]]:
    groups: dict[str, dict[str, envelope.ObservedObject]] = {}
    unplanned = []
    for item in lws:
        revision = item.labels.get(api.LABEL_REVISION, "")
        role = item.labels.get(api.LABEL_ROLE, "")
        by_role = groups.setdefault(revision, {}) if revision and role else None
        if by_role is None or role in by_role:
            unplanned.append(item.name)
            continue
        by_role[role] = item
    return groups, tuple(sorted(unplanned))
