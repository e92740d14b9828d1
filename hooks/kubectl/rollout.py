"""What `kubectl ds rollout` decides, from the objects kubectl returns (hooks.kubectl.plugin).

Pure: every function reads the JSON of a DisaggregatedSet or its LeaderWorkerSets, or its
DisaggregatedSetRevisions as `hooks.wire.envelope` parsed them, and returns a value; none runs
kubectl, reads the clock or prints.

- **History.** A set's records are the DisaggregatedSetRevisions that count by the predicate the
  hooks use (`hooks.core.history.problem_with`): the others are named in notes and never listed
  or restored. The current revision is the one the spec hashes to (`hooks.gocompat.revision`),
  recorded or not yet.
- **Undo** (`undo_target`, `restore`, `undone`), as `kubectl ds rollout undo --help` describes
  it. The previous revision is the highest number below the current's (the highest of all while
  the current one is not recorded); a history with two records of one number restores nothing.
  The restored spec must hash to the recorded revision. The
  set's `kubernetes.io/change-cause` becomes the revision's (or goes when it has none), so the
  record renumbered by the rollback keeps its own cause.
- **Status** (`judge`). Only a status of the current generation counts. Degraded=True and
  Progressing=False with ProgressDeadlineExceeded fail; Available=True is done; Progressing
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
from hooks.core import controls, history, records, rollout
from hooks.gocompat import gotext, revision

JsonObject = dict[str, Any]
TEMPLATE: Final = "leaderWorkerTemplate"
_RECORDED_KEYS: Final = ("name", "metadata", "scaling", "spec")


class RolloutError(Exception):
    """What was asked cannot be done; the message is one line."""


# --- reading objects -----------------------------------------------------------------------------


def _object(value: object) -> JsonObject:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _int(value: object, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def metadata_of(obj: JsonObject) -> JsonObject:
    return _object(obj.get("metadata"))


def annotations_of(obj: JsonObject) -> dict[str, str]:
    return {str(k): str(v) for k, v in _object(metadata_of(obj).get("annotations")).items()}


def labels_of(obj: JsonObject) -> dict[str, str]:
    return {str(k): str(v) for k, v in _object(metadata_of(obj).get("labels")).items()}


def name_of(obj: JsonObject) -> str:
    return str(metadata_of(obj).get("name", ""))


def roles_of(parent: JsonObject) -> list[JsonObject]:
    return [_object(role) for role in _list(_object(parent.get("spec")).get("roles"))]


def is_controlled_by(child: JsonObject, *, parent: JsonObject) -> bool:
    """Whether `parent` (by uid) is the controller of `child`."""
    uid = metadata_of(parent).get("uid")
    return any(
        _object(ref).get("controller") is True and _object(ref).get("uid") == uid
        for ref in _list(metadata_of(child).get("ownerReferences"))
    )


def spec_revision(parent: JsonObject) -> str:
    """The revision the set's spec hashes to; RolloutError when a template cannot be hashed."""
    return _revision_of(roles_of(parent), what=f"the spec of {name_of(parent)}")


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


def records_of(parent: JsonObject, observed: Sequence[records.ObservedObject]) -> History:
    """The set's history from its DisaggregatedSetRevisions (see the module)."""
    uid = str(metadata_of(parent).get("uid", ""))
    found = history.read(observed, set_name=name_of(parent), set_uid=uid)
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


def restore(parent: JsonObject, record: Record) -> Restored:
    """The spec roles that give back `record`'s revision (see the module); RolloutError when the
    record cannot be restored or the result would hash to another revision."""
    current = {str(role.get("name")): role for role in roles_of(parent)}
    roles: list[JsonObject] = []
    changes: list[str] = []
    for recorded in record.roles:
        name = str(recorded["name"])
        if name not in current:
            roles.append(
                {key: copy.deepcopy(recorded[key]) for key in _RECORDED_KEYS if key in recorded}
            )
            changes.append(f"role {name}: added back as revision {record.number} records it")
            continue
        if TEMPLATE not in recorded["spec"]:
            raise RolloutError(f"revision {record.number} records no {TEMPLATE} for role {name}")
        role = copy.deepcopy(current[name])
        spec = _object(role.get("spec"))
        template = copy.deepcopy(recorded["spec"][TEMPLATE])
        kept = "restored (replicas, scaling and the other settings kept)"
        changes.append(
            f"role {name}: {TEMPLATE} {'unchanged' if spec.get(TEMPLATE) == template else kept}"
        )
        role["spec"] = {**spec, TEMPLATE: template}
        roles.append(role)
    for name in current:
        if name not in {str(role["name"]) for role in record.roles}:
            changes.append(f"role {name}: removed (not in revision {record.number})")
    order = [str(role["name"]) for role in roles]
    if [name for name in order if name in current] != [name for name in current if name in order]:
        changes.append(f"role order: {', '.join(order)}")
    restored = _revision_of(roles, what=f"revision {record.number} as restored")
    if restored != record.revision:
        raise RolloutError(
            f"the restored spec hashes to revision {restored}, not to the recorded"
            f" {record.revision}; nothing was changed"
        )
    return Restored(roles=roles, changes=changes)


def undone(parent: JsonObject, record: Record, restored: Restored) -> tuple[JsonObject, list[str]]:
    """The set to write back (resourceVersion as read, status left out) and its annotation
    changes: the revision's change-cause, or none when it has none."""
    result = {key: copy.deepcopy(value) for key, value in parent.items() if key != "status"}
    result["spec"] = {**_object(result.get("spec")), "roles": restored.roles}
    metadata = result["metadata"] = _object(result.get("metadata"))
    annotations = dict(_object(metadata.get("annotations")))
    changes, cause = [], record.change_cause
    if annotations.get(api.CHANGE_CAUSE_ANNOTATION) != cause:
        if cause is None:
            del annotations[api.CHANGE_CAUSE_ANNOTATION]
        else:
            annotations[api.CHANGE_CAUSE_ANNOTATION] = cause
        said = (
            f"removed (revision {record.number} has none)" if cause is None else json.dumps(cause)
        )
        changes.append(f"annotation {api.CHANGE_CAUSE_ANNOTATION}: {said}")
    if annotations:
        metadata["annotations"] = annotations
    else:
        metadata.pop("annotations", None)
    return result, changes


# --- status --------------------------------------------------------------------------------------


class Outcome(StrEnum):
    WAITING = "waiting"
    PAUSED = "paused"
    AVAILABLE = "available"
    HELD = "held"
    PARTITIONED = "partitioned"
    DEADLINE_EXCEEDED = "deadline-exceeded"
    DEGRADED = "degraded"


FAILED: Final = frozenset({Outcome.DEADLINE_EXCEEDED, Outcome.DEGRADED})
FINAL: Final = FAILED | {Outcome.AVAILABLE, Outcome.HELD, Outcome.PARTITIONED}


@dataclass(frozen=True, slots=True)
class Verdict:
    """Where a set's rollout stands, in one line."""

    outcome: Outcome
    message: str


def judge(parent: JsonObject, lws: Sequence[JsonObject]) -> Verdict:
    """Where the rollout of the set's current generation stands (see the module)."""
    name, status = name_of(parent), _object(parent.get("status"))
    generation, target = _int(metadata_of(parent).get("generation")), status.get("revision")
    if _int(status.get("observedGeneration"), -1) != generation:
        return Verdict(
            Outcome.WAITING, f"waiting for the controller to see generation {generation}"
        )
    conditions = {str(c.get("type")): c for c in map(_object, _list(status.get("conditions")))}
    degraded = conditions.get(api.ConditionType.DEGRADED, {})
    progressing = conditions.get(api.ConditionType.PROGRESSING, {})
    state, reason, message = (progressing.get(key) for key in ("status", "reason", "message"))
    new = [item for item in lws if labels_of(item).get(api.LABEL_REVISION) == target]
    if degraded.get("status") == api.ConditionStatus.TRUE:
        text = f"{name} is Degraded ({degraded.get('reason')}): {degraded.get('message')}"
        return Verdict(Outcome.DEGRADED, text)
    if conditions.get(api.ConditionType.AVAILABLE, {}).get("status") == api.ConditionStatus.TRUE:
        return Verdict(Outcome.AVAILABLE, f"{name} successfully rolled out to revision {target}")
    if (state, reason) == (api.ConditionStatus.FALSE, api.Reason.PROGRESS_DEADLINE_EXCEEDED):
        return Verdict(
            Outcome.DEADLINE_EXCEEDED, f"{name} exceeded its progress deadline: {message}"
        )
    outcome = _STANDING.get(str(reason)) if state == api.ConditionStatus.UNKNOWN else None
    if outcome is not None and _stands(parent, new, outcome):
        return Verdict(outcome, f"{name} rollout to revision {target} is {outcome}: {message}")
    if reason == api.Reason.ROLLOUT_PAUSED:
        return Verdict(Outcome.PAUSED, f"{name} rollout is paused: {message}")
    return Verdict(
        Outcome.WAITING, f"waiting for {name} to roll out to revision {target}: {message}"
    )


def _stands(parent: JsonObject, new: Sequence[JsonObject], outcome: Outcome) -> bool:
    """Whether the set stands where its annotations ask now, not where the status may still say:
    every slice the status calls held has each Static spec role of the new revision at the hold's
    share of its target (an External role's target is its scaler's, not read here), every slice
    it calls partitioned is past the partition, and every LWS of the new revision is ready."""
    control = controls.control_of(annotations_of(parent))
    slices = _list(_object(_object(parent.get("status")).get("rollout")).get("slices"))
    phase = {"Held": Outcome.HELD, "Partitioned": Outcome.PARTITIONED}
    standing = [
        _int(i.get("index"))
        for i in map(_object, slices)
        if phase.get(str(i.get("phase"))) is outcome
    ]
    static = [r for r in roles_of(parent) if _object(r.get("scaling")).get("mode") != "External"]
    wanted = [_int(_object(role.get("spec")).get("replicas"), 1) for role in static]
    for index in standing:
        if outcome is Outcome.PARTITIONED:
            if control.partition is None or index < control.partition:
                return False
            continue
        have = [_sum(new, index, str(role.get("name"))) for role in static]
        hold = control.hold_at_percent
        if hold is None or not rollout.has_reached(have, wanted, percent=hold):
            return False
    return bool(standing) and all(_ready(item) == _replicas(item) for item in new)


def _sum(lws: Sequence[JsonObject], index: int, role: str) -> int:
    """Replicas of `role` in slice `index` (an LWS without a slice label is slice 0)."""
    return sum(
        _replicas(item)
        for item in lws
        if labels_of(item).get(api.LABEL_SLICE, "0") == str(index)
        and labels_of(item).get(api.LABEL_ROLE) == role
    )


_STANDING: Final = {
    api.Reason.ROLLOUT_HELD.value: Outcome.HELD,
    api.Reason.ROLLOUT_PARTITIONED.value: Outcome.PARTITIONED,
}


def _replicas(lws: JsonObject) -> int:
    return _int(_object(lws.get("spec")).get("replicas"), 1)


def _ready(lws: JsonObject) -> int:
    return _int(_object(lws.get("status")).get("readyReplicas"))


def progress(parent: JsonObject, lws: Sequence[JsonObject]) -> dict[str, str]:
    """One line per slice: its phase, then per role the old and new revision's ready/replicas
    (spec roles in order, then removed ones by name). LWS without a decimal slice label are
    left out, as the hooks leave them out of planning."""
    status = _object(parent.get("status"))
    target = status.get("revision")
    slices = _list(_object(status.get("rollout")).get("slices"))
    phases = {_int(item.get("index")): str(item.get("phase")) for item in map(_object, slices)}
    groups: dict[tuple[int, str, bool], list[JsonObject]] = {}
    for item in lws:
        labels = labels_of(item)
        if labels.get(api.LABEL_SLICE, "0").isdigit():
            is_new = labels.get(api.LABEL_REVISION) == target
            key = (int(labels.get(api.LABEL_SLICE, "0")), labels.get(api.LABEL_ROLE, "?"), is_new)
            groups.setdefault(key, []).append(item)
    spec_roles = [str(role.get("name")) for role in roles_of(parent)]
    count = _int(_object(parent.get("spec")).get("slices"), 1)
    lines = {}
    for index in sorted(set(range(count)) | {key[0] for key in groups}):
        removed = sorted({role for i, role, _ in groups if i == index} - set(spec_roles))
        cells = [
            f"{role} old {_counts(groups.get((index, role, False), []))}"
            f" new {_counts(groups.get((index, role, True), []))}"
            for role in [*spec_roles, *removed]
        ]
        lines[f"slice {index}"] = f"slice {index} {phases.get(index, 'Steady')}: {', '.join(cells)}"
    return lines


def _counts(items: Sequence[JsonObject]) -> str:
    return f"{sum(map(_ready, items))}/{sum(map(_replicas, items))}"


# --- annotations ---------------------------------------------------------------------------------


def annotation_patch(values: Mapping[str, str | None]) -> JsonObject:
    """A merge patch setting (a text) or removing (None) annotations of the set."""
    return {"metadata": {"annotations": dict(values)}}
