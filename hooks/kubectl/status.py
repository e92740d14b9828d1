"""What `kubectl ds rollout status` decides, from the objects kubectl prints (`judge`,
`progress`; its outcomes and exit statuses: `kubectl ds rollout status --help`). Pure.

Only a status of the current generation counts. One that names no revision is not these hooks'
(they always write one; upstream's controller writes none): the spec's revision then tells the
new LWS from the old, and the lines say so. Held or partitioned counts as done only when the
annotations ask for just that now: an annotation change keeps the generation, so the status can
still report an earlier hold or partition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Final

from hooks import api
from hooks.core import controls, records
from hooks.core import rollout as slice_rollout
from hooks.kubectl.rollout import RolloutError, spec_revision


class Outcome(StrEnum):
    WAITING = "waiting"
    PAUSED = "paused"
    AVAILABLE = "available"
    HELD = "held"
    PARTITIONED = "partitioned"
    DEADLINE_EXCEEDED = "deadline-exceeded"
    DEGRADED = "degraded"
    CANNOT_SERVE = "cannot-serve"


FAILED: Final = frozenset({Outcome.DEADLINE_EXCEEDED, Outcome.DEGRADED, Outcome.CANNOT_SERVE})
FINAL: Final = FAILED | {Outcome.AVAILABLE, Outcome.HELD, Outcome.PARTITIONED}
_FAILING: Final = {
    api.Reason.PROGRESS_DEADLINE_EXCEEDED.value: (
        Outcome.DEADLINE_EXCEEDED,
        "exceeded its progress deadline",
    ),
    api.Reason.ROLE_SCALED_TO_ZERO.value: (Outcome.CANNOT_SERVE, "cannot be Available"),
}
"""The reasons of a Progressing=False that fail `rollout status`, and what it says of the set."""
_STANDING: Final = {
    api.Reason.ROLLOUT_HELD.value: Outcome.HELD,
    api.Reason.ROLLOUT_PARTITIONED.value: Outcome.PARTITIONED,
}


def target_of(parent: records.Parent) -> tuple[str | None, str | None]:
    """The revision the set's rollout moves to, and, when the status does not name it, a line
    saying so and what stands in for it: the spec's revision, or None."""
    if parent.revision is not None or parent.status_generation != parent.generation:
        return parent.revision, None
    unrun = (
        f"the status of {parent.name} names no revision: these hooks, which always write one,"
        " do not run it (upstream's controller writes none)"
    )
    try:
        target = spec_revision(parent)
    except RolloutError as error:
        return None, f"{unrun}, and {error}: every LWS counts as old"
    return target, f"{unrun}; the LWS of the spec's revision, {target}, count as new"


def judge(parent: records.Parent, lws: Sequence[records.ObservedObject]) -> tuple[Outcome, str]:
    """Where the rollout of the set's current generation stands, and that in one line."""
    name, generation = parent.name, parent.generation
    target, unrun = target_of(parent)
    if parent.status_generation != generation:
        return Outcome.WAITING, f"waiting for the controller to see generation {generation}"
    conditions = {condition.type: condition for condition in parent.conditions}
    settled = _settled(conditions, name=name, target=target, unrun=unrun is not None)
    if settled is not None:
        return settled
    progressing = conditions.get(api.ConditionType.PROGRESSING)
    state, reason, message = (
        (progressing.status, progressing.reason, progressing.message)
        if progressing
        else ("", "", "")
    )
    new = [item for item in lws if _is_of(item, target)]
    goal = f" to revision {target}" if target is not None else ""
    outcome = _STANDING.get(reason) if state == api.ConditionStatus.UNKNOWN else None
    if outcome is not None and _stands(parent, new, outcome):
        return outcome, f"{name} rollout{goal} is {outcome}: {message}"
    if reason == api.Reason.ROLLOUT_PAUSED:
        return Outcome.PAUSED, f"{name} rollout is paused: {message}"
    return Outcome.WAITING, f"waiting for {name} to roll out{goal}: {message}"


def _settled(
    conditions: Mapping[str, records.ObservedCondition],
    *,
    name: str,
    target: str | None,
    unrun: bool,
) -> tuple[Outcome, str] | None:
    """Degraded, Available, or a Progressing=False that fails (`_FAILING`), or None."""
    degraded = conditions.get(api.ConditionType.DEGRADED)
    if degraded is not None and degraded.status == api.ConditionStatus.TRUE:
        text = f"{name} is Degraded ({degraded.reason}): {degraded.message}"
        return Outcome.DEGRADED, text
    available = conditions.get(api.ConditionType.AVAILABLE)
    if available is not None and available.status == api.ConditionStatus.TRUE:
        if not unrun:
            return Outcome.AVAILABLE, f"{name} successfully rolled out to revision {target}"
        spec = f"the spec's is {target}" if target is not None else "the spec's cannot be computed"
        text = f"{name} is Available, as its status says (it names no revision; {spec})"
        return Outcome.AVAILABLE, text
    progressing = conditions.get(api.ConditionType.PROGRESSING)
    if progressing is None or progressing.status != api.ConditionStatus.FALSE:
        return None
    failing = _FAILING.get(progressing.reason)
    if failing is None:
        return None
    outcome, said = failing
    return outcome, f"{name} {said}: {progressing.message}"


def _is_of(item: records.ObservedObject, revision_: str | None) -> bool:
    """Whether an LWS is of `revision_` (none is of no revision)."""
    return revision_ is not None and item.labels.get(api.LABEL_REVISION) == revision_


def _stands(
    parent: records.Parent, new: Sequence[records.ObservedObject], outcome: Outcome
) -> bool:
    """Whether the set stands where its annotations ask now: every slice the status calls held
    has each Static role of the new revision at the hold's share of its target (an External
    role's target is its scaler's, not read here), every slice it calls partitioned is past the
    partition, and every LWS of the new revision is ready."""
    if parent.spec is None:
        return False
    control = controls.control_of(parent.annotations)
    phase = {"Held": Outcome.HELD, "Partitioned": Outcome.PARTITIONED}
    standing = [i for i, name in parent.slice_phases.items() if phase.get(name) is outcome]
    if outcome is Outcome.PARTITIONED:
        keeps = control.partition is not None and all(i >= control.partition for i in standing)
    else:
        keeps = all(_holds(parent.spec, new, index, control.hold_at_percent) for index in standing)
    return keeps and bool(standing) and all(i.status.ready_replicas == i.replicas for i in new)


def _holds(
    spec: api.DisaggregatedSetSpec,
    new: Sequence[records.ObservedObject],
    index: int,
    hold: int | None,
) -> bool:
    """Whether slice `index` has the hold's share of every Static role on the new revision."""
    static = [role for role in spec.roles if not role.is_external]
    have = [_sum(new, index, role.name) for role in static]
    wanted = [role.replicas_or_default for role in static]
    return hold is not None and slice_rollout.has_reached(have, wanted, percent=hold)


def _sum(lws: Sequence[records.ObservedObject], index: int, role: str) -> int:
    """Replicas of `role` in slice `index`."""
    return sum(
        item.replicas
        for item in lws
        if item.slice_index == index and item.labels.get(api.LABEL_ROLE) == role
    )


def progress(parent: records.Parent, lws: Sequence[records.ObservedObject]) -> dict[str, str]:
    """One line per slice: its phase, then per role the old and new revision's ready/replicas
    (spec roles in order, then removed ones by name); LWS without a decimal slice label left out,
    as the hooks leave them out of planning. First, when the status names no revision, what
    stands in for it (`target_of`); last, `surge_line`."""
    target, unrun = target_of(parent)
    groups: dict[tuple[int, str, bool], list[records.ObservedObject]] = {}
    for item in lws:
        if item.slice_index is not None:
            key = (item.slice_index, item.labels.get(api.LABEL_ROLE, "?"), _is_of(item, target))
            groups.setdefault(key, []).append(item)
    spec = parent.spec
    spec_roles = [role.name for role in spec.roles] if spec is not None else []
    count = spec.slices if spec is not None else 1
    lines = {} if unrun is None else {"revision": unrun}
    for index in sorted(set(range(count)) | {key[0] for key in groups}):
        phase = parent.slice_phases.get(index)
        lines[f"slice {index}"] = _slice_line(index, groups, spec_roles, phase=phase)
    surge = surge_line(parent)
    if surge is not None:
        lines["ready"] = surge
    return lines


def _slice_line(
    index: int,
    groups: Mapping[tuple[int, str, bool], Sequence[records.ObservedObject]],
    spec_roles: Sequence[str],
    *,
    phase: str | None,
) -> str:
    """One slice's line (`progress`)."""
    removed = sorted({role for i, role, _ in groups if i == index} - set(spec_roles))
    cells = [
        f"{role} old {_counts(groups.get((index, role, False), []))}"
        f" new {_counts(groups.get((index, role, True), []))}"
        for role in [*spec_roles, *removed]
    ]
    in_slice = [item for key, items in groups.items() if key[0] == index for item in items]
    return f"slice {index} {phase or _unrecorded_phase(in_slice)}: {', '.join(cells)}"


def _unrecorded_phase(items: Sequence[records.ObservedObject]) -> str:
    """A slice that `status.rollout` does not name: Steady once every group it asks for is
    ready, else Coming up (regression, issue 35 item 8: a set coming up read "Steady")."""
    ready = bool(items) and all(item.status.ready_replicas >= item.replicas for item in items)
    return "Steady" if ready else "Coming up"


def _counts(items: Sequence[records.ObservedObject]) -> str:
    ready = sum(item.status.ready_replicas for item in items)
    return f"{ready}/{sum(item.replicas for item in items)}"


def partition_hint(parent: records.Parent, value: str | None) -> str | None:
    """What a partition at `value` does to a set with no more slices (None: to others)."""
    if value is None or parent.spec is None or int(value) < parent.spec.slices:
        return None
    count = parent.spec.slices
    return (
        f"{parent.name} has {count} slice{'s' if count != 1 else ''} (0 to {count - 1}): a"
        f" partition at {value} keeps none of them back, so every slice rolls to a new revision"
    )


def surge_line(parent: records.Parent) -> str | None:
    """Why READY counts more ready groups than the set asks for, in one line (None: it does not)."""
    ready, _, wanted = (parent.ready or "").partition("/")
    digits = (ready + wanted).isascii() and ready.isdigit() and wanted.isdigit()
    if not digits or int(ready) <= int(wanted):
        return None
    extra = int(ready) - int(wanted)
    # A hold keeps both revisions serving on purpose; otherwise the surplus is the rollout's surge.
    held = any(c.reason == api.Reason.ROLLOUT_HELD for c in parent.conditions)
    why = f"the rollout holds (annotation {api.ANNOTATION_ROLLOUT_HOLD_AT})" if held else "maxSurge"
    return (
        f"ready {parent.ready}: {extra} group{'s' if extra != 1 else ''} above the target while"
        f" the old and the new revision both serve ({why}); READY counts both"
    )
