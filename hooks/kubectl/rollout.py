"""What `kubectl ds rollout` decides, from the objects kubectl prints (hooks.kubectl.plugin).

Pure: every function takes the set, its LeaderWorkerSets and its DisaggregatedSetRevisions as
the hooks read them (`read_set`, `read_children` and `envelope.parse_records` parse kubectl's
JSON with `hooks.wire.envelope`, the one reader of Kubernetes objects) and returns a value; none
runs kubectl, reads the clock or prints.

- **History.** A set's records are the DisaggregatedSetRevisions that count by the predicate the
  hooks use (`hooks.core.history.problem_with`): the others are named in notes and never listed
  or restored. The current revision is the one the spec hashes to (`hooks.gocompat.revision`),
  recorded or not yet.
- **Undo** (`undo_target`, `restore`), as `kubectl ds rollout undo --help` describes it. The
  previous revision is the highest number below the current's (the highest of all while the
  current one is not recorded); a history with two records of one number restores nothing. The
  restored spec must hash to the recorded revision. The set's `kubernetes.io/change-cause`
  becomes the revision's (or goes when it has none), so the record renumbered by the rollback
  keeps its own cause. How it is written: `hooks.kubectl.writes`.
- **Status** (`judge`, `progress`). The revision a rollout moves to is the one the status
  names (`target_of`); a status of the current generation that names none is not these hooks'
  (they always write one; upstream's controller writes none): then the spec's revision tells
  the new LWS from the old, and the lines say so instead of naming a revision "None". Only a
  status of the current generation counts. Degraded=True, and Progressing=False with
  ProgressDeadlineExceeded or RoleScaledToZero (a role at 0 groups beside busy ones, which
  nothing the rollout does can make Available), fail; Available=True is done; Progressing
  Unknown with RolloutHeld or RolloutPartitioned, every LWS of the new revision ready, stands on
  purpose (done, not failed) only when the annotations ask for just that now: an annotation
  change keeps the generation, so after `release`, `partition --clear` or a new hold or
  partition the status can report the old one until the hooks have seen the change. The rest
  waits, RolloutPaused included.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from hooks import api
from hooks.core import controls, history, records
from hooks.core import rollout as slice_rollout
from hooks.gocompat import gotext, revision
from hooks.wire import envelope

JsonObject = dict[str, Any]
TEMPLATE: Final = "leaderWorkerTemplate"
_RECORDED_KEYS: Final = ("name", "metadata", "scaling", "spec")


class RolloutError(Exception):
    """What was asked cannot be done; the message is one line."""


# --- reading objects -----------------------------------------------------------------------------


def read_set(obj: object) -> records.Parent:
    """The set kubectl printed, as the hooks read it; RolloutError when it is not one."""
    try:
        return envelope.parse_parent(_json_object(obj, "the set"))
    except envelope.RequestError as error:
        raise RolloutError(f"kubectl printed no usable {api.DS_KIND}: {error}") from None


def read_children(
    kind: records.ChildKind, listing: object, *, parent: records.Parent
) -> list[records.ObservedObject]:
    """The objects of a `kubectl get -o json` list that `parent` controls, as the hooks read
    them; RolloutError when one is not of that kind's shape."""
    items = _json_object(listing, "the list").get("items")
    found = []
    for index, item in enumerate(items if isinstance(items, list) else []):
        try:
            child = envelope.parse_object(kind, item, where=f"items[{index}]")
        except envelope.RequestError as error:
            raise RolloutError(f"kubectl printed an unusable {kind.kind}: {error}") from None
        if child.is_controlled_by(parent.uid):
            found.append(child)
    return found


def _json_object(value: object, what: str) -> JsonObject:
    """`value` when it is a JSON object; RolloutError naming `what` otherwise."""
    if not isinstance(value, dict):
        raise RolloutError(f"kubectl printed no JSON object for {what}")
    return value


def _object(value: object) -> JsonObject:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def spec_roles(obj: JsonObject) -> list[JsonObject]:
    """The set's roles exactly as kubectl printed them: an undo writes back all but their
    templates unchanged."""
    return [_object(role) for role in _list(_object(obj.get("spec")).get("roles"))]


def spec_revision(parent: records.Parent) -> str:
    """The revision the set's spec hashes to; RolloutError when the spec is not valid or a
    template cannot be hashed."""
    if parent.spec is None:
        reasons = "; ".join(f"{v.field}: {v.message}" for v in parent.spec_violations)
        raise RolloutError(f"the spec of {parent.name} is not valid ({reasons})")
    try:
        return revision.of_spec(parent.spec)
    except gotext.EncodingError as error:
        message = f"cannot compute the revision of the spec of {parent.name}: {error}"
        raise RolloutError(message) from None


def _revision_of(roles: Sequence[JsonObject], *, what: str) -> str:
    pairs = [(str(role.get("name")), _object(role.get("spec")).get(TEMPLATE, {})) for role in roles]
    try:
        return revision.compute_revision(pairs)
    except gotext.EncodingError as error:
        raise RolloutError(f"cannot compute the revision of {what}: {error}") from None


# --- history -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Record:
    """One revision of a set's history."""

    number: int
    revision: str
    change_cause: str | None
    created: str
    roles: tuple[JsonObject, ...]


@dataclass(frozen=True, slots=True)
class History:
    """A set's history as the plugin shows it."""

    records: tuple[Record, ...]
    """The records that count, by number."""
    notes: tuple[str, ...]
    """Records that do not count and why; numbers two records hold."""
    ordered: bool
    """No two records hold one number."""


def records_of(parent: records.Parent, observed: Sequence[records.ObservedObject]) -> History:
    """The set's history from its DisaggregatedSetRevisions (see the module)."""
    found = history.read(observed, set_name=parent.name, set_uid=parent.uid)
    notes = [f"{item.name} is not counted: {why}" for item, why in found.uncounted]
    notes.extend(
        f"{first.item.name} and {second.item.name} both hold number {first.number}"
        for first, second in found.ties
    )
    return History(
        records=tuple(
            Record(
                number=record.number,
                revision=record.revision,
                change_cause=record.item.annotations.get(api.CHANGE_CAUSE_ANNOTATION),
                created=record.item.creation_timestamp,
                roles=tuple(copy.deepcopy(role) for role in record.stored.roles_json),
            )
            for record in found.counted
        ),
        notes=tuple(notes),
        ordered=found.is_ordered,
    )


def history_table(records: Sequence[Record], *, current: str | None) -> str:
    """REVISION, HASH, CHANGE-CAUSE and CREATED of each record; the current one is marked."""
    rows = [("REVISION", "HASH", "CHANGE-CAUSE", "CREATED", "")]
    for record in records:
        mark = "(current)" if record.revision == current else ""
        cause = record.change_cause if record.change_cause else "<none>"
        rows.append((str(record.number), record.revision, cause, record.created, mark))
    widths = [max(len(row[column]) for row in rows) for column in range(4)]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, [*widths, 0], strict=True)).rstrip()
        for row in rows
    )


def record_detail(record: Record, *, current: str | None) -> JsonObject:
    """One record in full, for `history --revision N`."""
    return {
        "revision": record.number,
        "hash": record.revision,
        **({"current": True} if record.revision == current else {}),
        "changeCause": record.change_cause,
        "created": record.created,
        "roles": [copy.deepcopy(role) for role in record.roles],
    }


def find(records: Sequence[Record], number: int) -> Record:
    """The record numbered `number`; RolloutError naming the numbers there are."""
    for record in records:
        if record.number == number:
            return record
    known = ", ".join(str(record.number) for record in records) or "none"
    raise RolloutError(f"revision {number} is not in the history (revisions: {known})")


# --- undo ----------------------------------------------------------------------------------------


def undo_target(known: History, *, current: str, number: int | None) -> Record:
    """The record to restore: revision `number`, or (None or 0) the previous one."""
    if not known.ordered:
        raise RolloutError(
            f"the history cannot tell which revision is newer ({'; '.join(known.notes)}):"
            " nothing was changed"
        )
    records = known.records
    if number:
        chosen = find(records, number)
    else:
        mine = [record.number for record in records if record.revision == current]
        below = [
            record
            for record in records
            if record.revision != current and (not mine or record.number < mine[0])
        ]
        if not below:
            raise RolloutError(f"no revision before the current one ({current}) in the history")
        chosen = below[-1]
    if chosen.revision == current:
        raise RolloutError(f"revision {chosen.number} ({current}) is already the current revision")
    return chosen


@dataclass(frozen=True, slots=True)
class Restored:
    """The set's roles after an undo, and what changed, one line per change."""

    roles: list[JsonObject]
    changes: list[str]


def restore(spec_roles: Sequence[JsonObject], record: Record) -> Restored:
    """The spec roles (`spec_roles`: as kubectl printed them, written back as they are but for
    their templates) that give back `record`'s revision (see the module); RolloutError when the
    record cannot be restored or the result would hash to another revision."""
    current = {str(role.get("name")): role for role in spec_roles}
    roles: list[JsonObject] = []
    changes: list[str] = []
    for recorded in record.roles:
        role, change = _restored_role(recorded, current.get(str(recorded["name"])), record)
        roles.append(role)
        changes.append(change)
    changes.extend(_list_changes(list(current), [str(role["name"]) for role in roles], record))
    restored = _revision_of(roles, what=f"revision {record.number} as restored")
    if restored != record.revision:
        raise RolloutError(
            f"the restored spec hashes to revision {restored}, not to the recorded"
            f" {record.revision}; nothing was changed"
        )
    return Restored(roles=roles, changes=changes)


def _restored_role(
    recorded: JsonObject, current: JsonObject | None, record: Record
) -> tuple[JsonObject, str]:
    """One role of the record as the spec gets it back, and what changed: the spec's role with
    the recorded template, or the recorded role when the spec no longer has it."""
    name = str(recorded["name"])
    if current is None:
        added: JsonObject = {
            key: copy.deepcopy(recorded[key]) for key in _RECORDED_KEYS if key in recorded
        }
        return added, f"role {name}: added back as revision {record.number} records it"
    if TEMPLATE not in recorded["spec"]:
        raise RolloutError(f"revision {record.number} records no {TEMPLATE} for role {name}")
    role = copy.deepcopy(current)
    spec = _object(role.get("spec"))
    template = copy.deepcopy(recorded["spec"][TEMPLATE])
    kept = "restored (replicas, scaling and the other settings kept)"
    role["spec"] = {**spec, TEMPLATE: template}
    return (
        role,
        f"role {name}: {TEMPLATE} {'unchanged' if spec.get(TEMPLATE) == template else kept}",
    )


def _list_changes(before: Sequence[str], after: Sequence[str], record: Record) -> list[str]:
    """The roles the undo removes, and the new order when the roles kept move."""
    changes = [
        f"role {name}: removed (not in revision {record.number})"
        for name in before
        if name not in after
    ]
    if [name for name in after if name in before] != [name for name in before if name in after]:
        changes.append(f"role order: {', '.join(after)}")
    return changes


def change_cause_change(parent: records.Parent, record: Record) -> list[str]:
    """The line saying how the set's change-cause annotation follows the restored revision
    (none when it already has the revision's)."""
    cause = record.change_cause
    if parent.annotations.get(api.CHANGE_CAUSE_ANNOTATION) == cause:
        return []
    said = f"removed (revision {record.number} has none)" if cause is None else json.dumps(cause)
    return [f"annotation {api.CHANGE_CAUSE_ANNOTATION}: {said}"]


# --- status --------------------------------------------------------------------------------------


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


@dataclass(frozen=True, slots=True)
class Verdict:
    """Where a set's rollout stands, in one line."""

    outcome: Outcome
    message: str


def target_of(parent: records.Parent) -> tuple[str | None, str | None]:
    """The revision the set's rollout moves to, and, when the status does not name it, a line
    saying why and what stands in for it (see the module): the spec's revision, or None when
    that cannot be computed either."""
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


def judge(parent: records.Parent, lws: Sequence[records.ObservedObject]) -> Verdict:
    """Where the rollout of the set's current generation stands (see the module)."""
    name, generation = parent.name, parent.generation
    target, unrun = target_of(parent)
    if parent.status_generation != generation:
        return Verdict(
            Outcome.WAITING, f"waiting for the controller to see generation {generation}"
        )
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
    goal = _to_revision(target)
    outcome = _STANDING.get(reason) if state == api.ConditionStatus.UNKNOWN else None
    if outcome is not None and _stands(parent, new, outcome):
        return Verdict(outcome, f"{name} rollout{goal} is {outcome}: {message}")
    if reason == api.Reason.ROLLOUT_PAUSED:
        return Verdict(Outcome.PAUSED, f"{name} rollout is paused: {message}")
    return Verdict(Outcome.WAITING, f"waiting for {name} to roll out{goal}: {message}")


def _available(name: str, target: str | None, *, unrun: bool) -> str:
    """What Available means: rolled out to the target, or, when the status names no revision
    (`target_of`), only what the status says."""
    if not unrun:
        return f"{name} successfully rolled out to revision {target}"
    spec = f"the spec's is {target}" if target is not None else "the spec's cannot be computed"
    return f"{name} is Available, as its status says (it names no revision; {spec})"


def _to_revision(target: str | None) -> str:
    return f" to revision {target}" if target is not None else ""


def _is_of(item: records.ObservedObject, revision_: str | None) -> bool:
    """Whether an LWS is of `revision_` (none is of no revision)."""
    return revision_ is not None and item.labels.get(api.LABEL_REVISION) == revision_


def _settled(
    conditions: Mapping[str, records.ObservedCondition],
    *,
    name: str,
    target: str | None,
    unrun: bool,
) -> Verdict | None:
    """Degraded, Available, or a Progressing=False that fails (`_FAILING`), or None."""
    degraded = conditions.get(api.ConditionType.DEGRADED)
    if degraded is not None and degraded.status == api.ConditionStatus.TRUE:
        text = f"{name} is Degraded ({degraded.reason}): {degraded.message}"
        return Verdict(Outcome.DEGRADED, text)
    available = conditions.get(api.ConditionType.AVAILABLE)
    if available is not None and available.status == api.ConditionStatus.TRUE:
        return Verdict(Outcome.AVAILABLE, _available(name, target, unrun=unrun))
    progressing = conditions.get(api.ConditionType.PROGRESSING)
    if progressing is None or progressing.status != api.ConditionStatus.FALSE:
        return None
    failing = _FAILING.get(progressing.reason)
    if failing is None:
        return None
    outcome, said = failing
    return Verdict(outcome, f"{name} {said}: {progressing.message}")


def _stands(
    parent: records.Parent, new: Sequence[records.ObservedObject], outcome: Outcome
) -> bool:
    """Whether the set stands where its annotations ask now, not where the status may still say:
    every slice the status calls held has each Static spec role of the new revision at the hold's
    share of its target (an External role's target is its scaler's, not read here), every slice
    it calls partitioned is past the partition, and every LWS of the new revision is ready."""
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


def progress(parent: records.Parent, lws: Sequence[records.ObservedObject]) -> dict[str, str]:
    """One line per slice: its phase, then per role the old and new revision's ready/replicas
    (spec roles in order, then removed ones by name). LWS without a decimal slice label are
    left out, as the hooks leave them out of planning. First, when the status names no
    revision, what stands in for it (`target_of`)."""
    phases = parent.slice_phases
    target, unrun = target_of(parent)
    groups: dict[tuple[int, str, bool], list[records.ObservedObject]] = {}
    for item in lws:
        if item.slice_index is not None:
            is_new = _is_of(item, target)
            key = (item.slice_index, item.labels.get(api.LABEL_ROLE, "?"), is_new)
            groups.setdefault(key, []).append(item)
    spec = parent.spec
    spec_roles = [role.name for role in spec.roles] if spec is not None else []
    count = spec.slices if spec is not None else 1
    lines = {} if unrun is None else {"revision": unrun}
    for index in sorted(set(range(count)) | {key[0] for key in groups}):
        lines[f"slice {index}"] = _slice_line(index, groups, spec_roles, phase=phases.get(index))
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
    """One slice's line: its phase (`phase`, as status.rollout names it, or `_unrecorded_phase`),
    then per role the old and new revision's ready/replicas."""
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
    ready, else Coming up (a new set or slice, or groups not ready yet: regression, issue 35
    item 8, a set still coming up read "Steady ... new 0/4")."""
    ready = bool(items) and all(item.status.ready_replicas >= item.replicas for item in items)
    return "Steady" if ready else "Coming up"


def _counts(items: Sequence[records.ObservedObject]) -> str:
    ready = sum(item.status.ready_replicas for item in items)
    return f"{ready}/{sum(item.replicas for item in items)}"


def partition_hint(parent: records.Parent, value: str | None) -> str | None:
    """What a partition at `value` does to a set with fewer slices, in one line (None when it
    keeps some slice back, or is removed)."""
    if value is None or parent.spec is None or int(value) < parent.spec.slices:
        return None
    count = parent.spec.slices
    return (
        f"{parent.name} has {count} slice{'s' if count != 1 else ''} (0 to {count - 1}): a"
        f" partition at {value} keeps none of them back, so every slice rolls to a new revision"
    )


def surge_line(parent: records.Parent) -> str | None:
    """Why READY counts more ready groups than the set asks for, in one line (None when it
    does not)."""
    ready, _, wanted = (parent.ready or "").partition("/")
    if not (ready.isdigit() and wanted.isdigit()) or int(ready) <= int(wanted):
        return None
    extra = int(ready) - int(wanted)
    # A hold keeps both revisions serving on purpose; otherwise the surplus is the rollout's surge.
    held = any(c.reason == api.Reason.ROLLOUT_HELD for c in parent.conditions)
    why = f"the rollout holds (annotation {api.ANNOTATION_ROLLOUT_HOLD_AT})" if held else "maxSurge"
    return (
        f"ready {parent.ready}: {extra} group{'s' if extra != 1 else ''} above the target while"
        f" the old and the new revision both serve ({why}); READY counts both"
    )


# --- annotations ---------------------------------------------------------------------------------


def annotation_patch(values: Mapping[str, str | None]) -> JsonObject:
    """A merge patch setting (a text) or removing (None) annotations of the set."""
    return {"metadata": {"annotations": dict(values)}}
