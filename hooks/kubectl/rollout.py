"""What `kubectl ds rollout history` and `undo` decide, from the objects kubectl prints: the
records that count (`hooks.core.history` judges; the others are named in notes, never listed or
restored), the record to restore and the spec roles that give it back (the rules:
docs/rollout.md, "Rolling back with kubectl ds"; the writes: `hooks.kubectl.writes`). Pure: none
runs kubectl, reads the clock or prints.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from hooks import api
from hooks.api.documents import JsonObject, list_of, object_of
from hooks.cli import console
from hooks.core import history, records
from hooks.gocompat import gotext, revision
from hooks.kubectl import TEMPLATE
from hooks.wire import parents, values

_RECORDED_KEYS: Final = ("name", "metadata", "scaling", "spec")


class RolloutError(console.CliError):
    """What was asked cannot be done; the message is one line."""


def read_set(obj: JsonObject) -> records.Parent:
    """The set kubectl printed, as the hooks read it; RolloutError when it is not one."""
    try:
        return parents.parse_parent(obj)
    except values.RequestError as error:
        raise RolloutError(f"kubectl printed no usable {api.DS_KIND}: {error}") from None


def spec_roles(obj: JsonObject) -> list[JsonObject]:
    """The set's roles exactly as kubectl printed them."""
    return [object_of(role) for role in list_of(object_of(obj.get("spec")).get("roles"))]


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
    """A set's history: the records that count, by number; notes naming the records that do not
    and why, and numbers two records hold; whether no two records hold one number."""

    records: tuple[Record, ...]
    notes: tuple[str, ...]
    ordered: bool


def records_of(parent: records.Parent, observed: Sequence[records.ObservedObject]) -> History:
    """The set's history from its DisaggregatedSetRevisions."""
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
    """The spec roles (`spec_roles`, as kubectl printed them) that give back `record`'s revision;
    RolloutError when the record cannot be restored or the result would hash to another one."""
    current = {str(role.get("name")): role for role in spec_roles}
    number = record.number
    done = [_restored_role(role, current.get(str(role["name"])), number) for role in record.roles]
    roles = [role for role, _ in done]
    after = [str(role["name"]) for role in roles]
    changes = [change for _, change in done]
    changes += _list_changes(list(current), after, number)
    templates = [
        (name, object_of(role.get("spec")).get(TEMPLATE, {}))
        for name, role in zip(after, roles, strict=True)
    ]
    try:
        restored = revision.compute_revision(templates)
    except gotext.EncodingError as error:
        what = f"revision {number} as restored"
        raise RolloutError(f"cannot compute the revision of {what}: {error}") from None
    if restored != record.revision:
        raise RolloutError(
            f"the restored spec hashes to revision {restored}, not to the recorded"
            f" {record.revision}; nothing was changed"
        )
    return Restored(roles=roles, changes=changes)


def _restored_role(
    recorded: JsonObject, current: JsonObject | None, number: int
) -> tuple[JsonObject, str]:
    """One role of revision `number` as the spec gets it back, and what changed."""
    name = str(recorded["name"])
    if current is None:
        added: JsonObject = {
            key: copy.deepcopy(recorded[key]) for key in _RECORDED_KEYS if key in recorded
        }
        return added, f"role {name}: added back as revision {number} records it"
    if TEMPLATE not in recorded["spec"]:
        raise RolloutError(f"revision {number} records no {TEMPLATE} for role {name}")
    role = copy.deepcopy(current)
    spec = object_of(role.get("spec"))
    template = copy.deepcopy(recorded["spec"][TEMPLATE])
    role["spec"] = {**spec, TEMPLATE: template}
    kept = "restored (replicas, scaling and the other settings kept)"
    return (
        role,
        f"role {name}: {TEMPLATE} {'unchanged' if spec.get(TEMPLATE) == template else kept}",
    )


def _list_changes(before: Sequence[str], after: Sequence[str], number: int) -> list[str]:
    """The roles the undo removes, and the new order when the roles kept move."""
    changes = [
        f"role {name}: removed (not in revision {number})" for name in before if name not in after
    ]
    if [name for name in after if name in before] != [name for name in before if name in after]:
        changes.append(f"role order: {', '.join(after)}")
    return changes


def change_cause_change(parent: records.Parent, record: Record) -> list[str]:
    """How the set's change-cause annotation follows the restored revision."""
    cause = record.change_cause
    if parent.annotations.get(api.CHANGE_CAUSE_ANNOTATION) == cause:
        return []
    said = f"removed (revision {record.number} has none)" if cause is None else json.dumps(cause)
    return [f"annotation {api.CHANGE_CAUSE_ANNOTATION}: {said}"]
