"""One slice's rollout pass by pass through the reconcile's own slice planner, for `plan`.

`simulate` plays Metacontroller and the LWS controller: each pass it hands the slice's LWS to
`rollout.plan_slice`, applies what the plan asks, and marks new groups Ready a given number of
passes after they were asked for (old groups are Ready throughout). Targets may change before any
pass (docs/rollout.md, "Scaling while a rollout runs").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from hooks import api
from hooks.api import naming
from hooks.core import planner, records, rollout, stock

OLD_REVISION = "0ld00000"
NEW_REVISION = "new00000"
_SET = "plan"


@dataclass(frozen=True, slots=True)
class Role:
    """A role of a plan: its old groups, its target, and its budget for any target."""

    name: str
    initial_old: int
    target: int
    config_for: Callable[[int], planner.RoleConfig]


@dataclass(slots=True)
class _Lws:
    role: str
    revision: str
    replicas: int
    created: int
    annotations: dict[str, str] = field(default_factory=dict)
    ready: int = 0
    pending: list[tuple[int, int]] = field(default_factory=list)
    """(pass at which it is Ready, replicas then), for groups still starting."""


@dataclass(frozen=True, slots=True)
class Row:
    """One pass: the targets it read, the replicas after it (and Ready ones), what it did."""

    index: int
    targets: tuple[int, ...]
    old: tuple[int, ...]
    new: tuple[int, ...]
    new_ready: tuple[int, ...]
    what: str
    phase: rollout.Phase | None = None


def simulate(
    roles: Sequence[Role],
    *,
    rescale: Mapping[int, Mapping[str, int]],
    ready_after: int,
    hold_at: int | None,
    max_passes: int,
) -> list[Row]:
    """Every pass of the slice's rollout until it is steady (or `max_passes`); pass 0 is the
    state before the template changes."""
    fleet = {
        naming.lws_name(set_name=_SET, slice_index=0, revision=OLD_REVISION, role=role.name): _Lws(
            role=role.name,
            revision=OLD_REVISION,
            replicas=role.initial_old,
            created=0,
            ready=role.initial_old,
        )
        for role in roles
        if role.initial_old > 0
    }
    targets = {role.name: role.target for role in roles}
    rows = [_row(0, roles, targets, fleet, "start")]
    last_change = max(rescale, default=0)
    for index in range(1, max_passes + 1):
        targets.update(rescale.get(index, {}))
        for lws in fleet.values():
            _settle(lws, index)
        plan = rollout.plan_slice(
            set_name=_SET,
            slice_index=0,
            revision=NEW_REVISION,
            roles=[
                stock.RoleInput(
                    name=r.name, target=targets[r.name], config=r.config_for(targets[r.name])
                )
                for r in roles
            ],
            lws=[_observed(name, lws) for name, lws in sorted(fleet.items())],
            control=rollout.SliceControl(hold_at_percent=hold_at),
        )
        _apply(fleet, plan, index, ready_after=ready_after)
        rows.append(_row(index, roles, targets, fleet, _describe(plan), plan.phase))
        settled = all(lws.ready == lws.replicas for lws in fleet.values())
        if settled and plan.phase is rollout.Phase.STEADY:
            break
        if settled and index > last_change and _same(rows[-2], rows[-1]):
            break  # stands still: held, or no rule moves it
    return rows


def _same(before: Row, after: Row) -> bool:
    return (before.old, before.new, before.new_ready) == (after.old, after.new, after.new_ready)


def outcome(rows: Sequence[Row]) -> tuple[bool, str]:
    """Whether the slice ended steady (or held, as asked), and a line saying so."""
    last = rows[-1]
    passes = f"{last.index} pass{'es' if last.index != 1 else ''}"
    if last.phase is rollout.Phase.STEADY:
        return True, f"complete after {passes}"
    if last.phase is rollout.Phase.HELD:
        return (
            True,
            f"held after {passes}: both revisions serve until the hold is raised or removed",
        )
    if len(rows) > 1 and _same(rows[-2], last):
        return False, f"stuck after {passes}: {last.what}"
    return False, f"not complete after {passes} (raise --max-passes to see more)"


def _settle(lws: _Lws, index: int) -> None:
    """Groups asked for `ready_after` passes ago are Ready now."""
    for due, replicas in list(lws.pending):
        if due <= index:
            lws.ready = max(lws.ready, min(replicas, lws.replicas))
            lws.pending.remove((due, replicas))


def _observed(name: str, lws: _Lws) -> records.ObservedObject:
    labels = naming.lws_labels(set_name=_SET, slice_index=0, revision=lws.revision, role=lws.role)
    applied: api.JsonObject = {
        "apiVersion": api.LWS_API_VERSION,
        "kind": api.LWS_KIND,
        "metadata": {"name": name, "labels": labels, "annotations": dict(lws.annotations)},
        "spec": {"replicas": lws.replicas},
    }
    return records.ObservedObject(
        kind=records.ChildKind.LWS,
        name=name,
        namespace="default",
        labels=labels,
        annotations=dict(lws.annotations),
        creation_timestamp=f"2026-01-01T00:{lws.created // 60:02d}:{lws.created % 60:02d}Z",
        controller_uid="plan",
        spec_replicas=lws.replicas,
        status=records.ReplicaStatus(
            replicas=lws.replicas, ready_replicas=lws.ready, updated_replicas=lws.ready
        ),
        applied=applied,
    )


def _apply(
    fleet: dict[str, _Lws], plan: rollout.SlicePlan, index: int, *, ready_after: int
) -> None:
    for name in plan.dropped:
        fleet.pop(name, None)
    for name, lws in fleet.items():
        replicas = plan.replicas.get(name, lws.replicas)
        if replicas > lws.replicas:
            lws.pending.append((index + ready_after, replicas))
        lws.replicas = replicas
        lws.ready = min(lws.ready, replicas)
        if name in plan.initial_replicas:
            lws.annotations[api.ANNOTATION_INITIAL_REPLICAS] = str(plan.initial_replicas[name])
        if name in plan.records:
            record = plan.records[name]
            if record is None:
                lws.annotations.pop(api.ANNOTATION_ROLLOUT_TARGET, None)
            else:
                lws.annotations[api.ANNOTATION_ROLLOUT_TARGET] = str(record)
    for role, replicas in plan.created.items():
        name = naming.lws_name(set_name=_SET, slice_index=0, revision=NEW_REVISION, role=role)
        created = _Lws(role=role, revision=NEW_REVISION, replicas=replicas, created=index)
        if role in plan.created_records:
            created.annotations[api.ANNOTATION_ROLLOUT_TARGET] = str(plan.created_records[role])
        if replicas:
            created.pending.append((index + ready_after, replicas))
        fleet[name] = created


def _describe(plan: rollout.SlicePlan) -> str:
    if plan.step is not None:
        return plan.step.rule.value
    if plan.moves:
        return "scaled: " + " + ".join(sorted(move.value for move in plan.moves))
    if plan.waits:
        return f"{plan.phase.value}: " + "; ".join(plan.waits)
    return plan.phase.value


def _row(
    index: int,
    roles: Sequence[Role],
    targets: Mapping[str, int],
    fleet: Mapping[str, _Lws],
    what: str,
    phase: rollout.Phase | None = None,
) -> Row:
    def total(role: str, *, new: bool, ready: bool = False) -> int:
        return sum(
            lws.ready if ready else lws.replicas
            for lws in fleet.values()
            if lws.role == role and (lws.revision == NEW_REVISION) == new
        )

    return Row(
        index=index,
        targets=tuple(targets[role.name] for role in roles),
        old=tuple(total(role.name, new=False) for role in roles),
        new=tuple(total(role.name, new=True) for role in roles),
        new_ready=tuple(total(role.name, new=True, ready=True) for role in roles),
        what=what,
        phase=phase,
    )
