"""The revision history of a set: its DisaggregatedSetRevisions, which count, what they say.

Owns `problem_with` (the one "this record counts", shared with `kubectl ds`), `read` (the set's
`History` and its queries), `plan` (the records of one pass) and `is_child_type`. Rules:
docs/rollout.md, "Revision history"; which records count: docs/safety.md, "Hostile records and
the canary controls". Pure: reads its arguments only, renders through `children`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Final

from hooks import api
from hooks.api import naming
from hooks.core import children, compact, problems, records, recovered


@dataclass(frozen=True, slots=True)
class Record:
    """A record that counts: the set's record of `revision`."""

    item: records.ObservedObject
    stored: records.StoredRevision

    @property
    def revision(self) -> str:
        return self.stored.hash

    @property
    def number(self) -> int:
        return self.stored.number


@dataclass(frozen=True, slots=True)
class Stable:
    """The stable revision, and its roles as recorded (or as the spec has them)."""

    revision: str
    roles: tuple[api.Role, ...]


@dataclass(frozen=True, slots=True)
class History:
    """A set's records: those that count, by number then revision, and those that do not."""

    counted: tuple[Record, ...]
    uncounted: tuple[tuple[records.ObservedObject, str], ...]
    """Records that do not count, and why: kept as they are, never read."""

    def of(self, revision: str) -> Record | None:
        """The record of `revision`, when one counts."""
        return next((record for record in self.counted if record.revision == revision), None)

    @property
    def ties(self) -> tuple[tuple[Record, Record], ...]:
        return tuple(
            (first, second)
            for first, second in zip(self.counted, self.counted[1:], strict=False)
            if first.number == second.number
        )

    @property
    def is_ordered(self) -> bool:
        """Whether the numbers tell which record is newer (no two records share one)."""
        return not self.ties

    @property
    def top(self) -> Record | None:
        return self.counted[-1] if self.counted else None

    def is_rollback(self, target: str) -> bool:
        """Whether moving to `target` goes back: its record was created below another's number
        (False when two records share a number)."""
        mine = self.of(target)
        if mine is None or not self.is_ordered:
            return False
        return any(
            other.number > mine.stored.first_number
            for other in self.counted
            if other.revision != target
        )

    def stable(
        self, target: str, *, spec_roles: Sequence[api.Role], running: AbstractSet[str]
    ) -> Stable | None:
        """The stable revision (docs/rollout.md, "Canary rollouts: a partition and a hold"), or
        None when the history cannot tell; `running`: the revisions some LWS of the set carries."""
        if not self.is_ordered:
            return None
        ran = [
            (record.stored.completed_as, record)
            for record in self.counted
            if record.stored.completed_as is not None
            and not (record.revision == target and record.stored.completed_as == record.number)
        ]
        if ran:
            last, newest = max(ran, key=lambda entry: entry[0])
            if sum(1 for entry in ran if entry[0] == last) > 1:
                return None
            if newest.revision == target:
                return Stable(revision=target, roles=tuple(spec_roles))
            return Stable(revision=newest.revision, roles=newest.stored.roles)
        if self._is_new(target, running=running):
            return Stable(revision=target, roles=tuple(spec_roles))
        return None

    def _is_new(self, target: str, *, running: AbstractSet[str]) -> bool:
        """Whether the set never ran anything but `target`: it is the only revision that runs or
        is recorded, as the set's first record (a history pruned down to the target's record
        cannot tell what ran before it)."""
        return running <= {target} and all(
            record.revision == target and record.stored.first_number == 1 for record in self.counted
        )


def is_child_type(declared: AbstractSet[records.ChildKind] | None) -> bool:
    """Whether the CompositeController declares DisaggregatedSetRevisions (or none is named)."""
    return declared is None or records.ChildKind.REVISION in declared


NOT_KEPT: Final = (
    f"none: the DisaggregatedSet CompositeController does not declare {api.REVISION_PLURAL} in"
    " spec.childResources, so no revision is recorded: `kubectl ds rollout undo` has nothing to"
    " restore, a move back to an earlier revision is held like a new one, and a slice past a"
    " rollout-partition that runs nothing waits (the kit's metacontroller/compositecontrollers.yaml"
    " declares it)"
)
"""`status.history` of a set that keeps no history (`is_child_type`)."""


def problem_with(item: records.ObservedObject, *, set_name: str, set_uid: str) -> str | None:
    """Why a DisaggregatedSetRevision does not count as the set's record of a revision, or None
    when it does."""
    if not item.is_controlled_by(set_uid):
        return "it is not controlled by this DisaggregatedSet"
    return problem_with_body(item, set_name=set_name)


def problem_with_body(item: records.ObservedObject, *, set_name: str) -> str | None:
    """`problem_with` but for who controls it (what `kubectl ds adopt --orphans` asks)."""
    label = item.labels.get(api.LABEL_REVISION, "")
    stored = item.stored
    if item.labels.get(api.LABEL_NAME) != set_name:
        return f"its label {api.LABEL_NAME} is not {set_name!r}"
    if not label or item.name != naming.history_name(set_name=set_name, revision=label):
        return f"its name is not <set>-<its label {api.LABEL_REVISION}> ({label!r})"
    if stored is None:
        return f"it holds no record ({item.stored_error})"
    if stored.hash != label:
        return f"the roles it stores hash to revision {stored.hash}, not {label}"
    if stored.first_number > stored.number:
        return (
            f"it was created with number {stored.first_number}, above its number"
            f" {stored.number}, which numbering never does"
        )
    completed = stored.completed_as
    if completed is not None and not stored.first_number <= completed <= stored.number:
        return f"its completedAs {completed} is not a number it has held"
    return None


def read(items: Sequence[records.ObservedObject], *, set_name: str, set_uid: str) -> History:
    """The set's history from its observed DisaggregatedSetRevisions."""
    counted = []
    uncounted = []
    for item in items:
        why = problem_with(item, set_name=set_name, set_uid=set_uid)
        if why is not None or item.stored is None:
            uncounted.append((item, why or ""))
        else:
            counted.append(Record(item=item, stored=item.stored))
    counted.sort(key=lambda record: (record.number, record.revision))
    return History(counted=tuple(counted), uncounted=tuple(uncounted))


@dataclass(frozen=True, slots=True)
class HistoryPlan:
    """The history children of one pass (or of a part of it) and what goes."""

    children: tuple[api.JsonObject, ...] = ()
    pruned: tuple[str, ...] = ()
    problems: tuple[problems.Problem, ...] = ()
    notes: tuple[str, ...] = ()
    """What the history does not record, and why (`status.history`)."""

    @property
    def note(self) -> str | None:
        return problems.summarise(self.notes) if self.notes else None


NO_HISTORY: Final = HistoryPlan(notes=(NOT_KEPT,))


def plan(
    history: History,
    *,
    set_name: str,
    spec: api.DisaggregatedSetSpec,
    target: str,
    in_use: AbstractSet[str],
    annotations: Mapping[str, str],
    limit: int,
    complete: bool,
    running: Sequence[records.ObservedObject] = (),
) -> HistoryPlan:
    """The set's records after this pass. `in_use`: the revisions some LWS carries; `complete`:
    every slice runs the target; `running`: the LWS to rebuild missing records from."""
    kept = [children.reemit(item) for item, _ in history.uncounted]
    found = [_uncounted(item, why) for item, why in history.uncounted]
    if not history.is_ordered:
        found.extend(_tie(first, second) for first, second in history.ties)
        kept.extend(children.reemit(record.item) for record in history.counted)
        return HistoryPlan(children=tuple(kept), problems=tuple(found))
    others = [record for record in history.counted if record.revision != target]
    rebuilt = _rebuilt(history, set_name=set_name, spec=spec, target=target, running=running)
    own = _target_record(
        history,
        set_name=set_name,
        spec=spec,
        target=target,
        cause=annotations.get(api.CHANGE_CAUSE_ANNOTATION),
        complete=complete,
        above=max((record.number for record in others), default=0) + len(rebuilt.children),
    )
    kept.extend((*own.children, *rebuilt.children))
    found.extend(own.problems)
    spared = in_use if complete else {*in_use, *_newest_run(history.counted)}
    pruned = _past_the_limit(others, in_use=spared, limit=limit)
    kept.extend(children.reemit(record.item) for record in others if record.item.name not in pruned)
    return HistoryPlan(
        children=tuple(kept),
        pruned=pruned,
        problems=tuple(found),
        notes=(*own.notes, *rebuilt.notes),
    )


def _target_record(
    history: History,
    *,
    set_name: str,
    spec: api.DisaggregatedSetSpec,
    target: str,
    cause: str | None,
    complete: bool,
    above: int,
) -> HistoryPlan:
    """The target's record after this pass (kept, renumbered, created, or none), numbered the
    highest and above `above` (the records rebuilt this pass take the numbers below)."""
    current, top = history.of(target), history.top
    if current is not None and current is top and current.number > above:
        completed = current.number if complete else current.stored.completed_as
        return HistoryPlan(
            (children.update_history(current.item, number=current.number, completed_as=completed),)
        )
    stopped = _not_numbered(history, set_name=set_name, target=target)
    if stopped is not None:
        return stopped
    following = max(0 if top is None or top is current else top.number, above) + 1
    if current is None:
        packed = compact.pack_roles(children.history_roles(spec.roles))
        if not compact.fits(packed):
            return HistoryPlan(notes=(_too_large(target, packed),))
        created = children.render_history(
            set_name=set_name,
            revision=target,
            number=following,
            packed_roles=packed,
            change_cause=cause,
            completed=complete,
        )
        return HistoryPlan((created,))
    completed = current.stored.completed_as
    if complete or (current is top and completed == current.number):
        completed = following  # still at its latest number (moved up past rebuilt records)
    renumbered = children.update_history(
        current.item, number=following, change_cause=cause, completed_as=completed
    )
    return HistoryPlan((renumbered,))


def _not_numbered(history: History, *, set_name: str, target: str) -> HistoryPlan | None:
    """What stands for the target's record when it gets no new number (none: a record that does
    not count holds its name, reported already; kept: the numbers ran out), else None."""
    current, top = history.of(target), history.top
    name = naming.history_name(set_name=set_name, revision=target)
    if current is None and name in {item.name for item, _ in history.uncounted}:
        return HistoryPlan()
    if top is not None and top.number >= api.MAX_HISTORY_NUMBER:
        kept = tuple(children.reemit(record.item) for record in (current,) if record)
        return HistoryPlan(kept, problems=(_exhausted(top),))
    return None


def _rebuilt(
    history: History,
    *,
    set_name: str,
    spec: api.DisaggregatedSetSpec,
    target: str,
    running: Sequence[records.ObservedObject],
) -> HistoryPlan:
    """Records of the revisions that run without one, numbered below the target's
    `firstRevision` (docs/rollout.md, "A history that starts from what runs")."""
    found, notes = _rebuildable(history, set_name=set_name, spec=spec, target=target, lws=running)
    top = max((r.number for r in history.counted if r.revision != target), default=0)
    room = api.MAX_HISTORY_NUMBER - 1 - top
    current = history.of(target)
    if current is not None and not history.is_rollback(target):
        room = min(room, current.stored.first_number - top)
    cut = max(0, len(found) - max(room, 0))
    notes.extend(
        f"revision {revision_} runs without a record, and gets none: the numbers below the"
        f" record of revision {target} went to revisions that ran later; {_NO_UNDO}"
        for _, revision_, _ in found[:cut]
    )
    created = tuple(
        children.render_history(
            set_name=set_name,
            revision=revision_,
            number=top + index,
            packed_roles=packed,
            change_cause=None,
        )
        for index, (_, revision_, packed) in enumerate(found[cut:], start=1)
    )
    return HistoryPlan(created, notes=tuple(notes))


def _newest_run(counted: Sequence[Record]) -> tuple[str, ...]:
    """The revision of the record with the highest `completedAs`: until every slice runs the
    target, a slice past a partition may be made at it (`History.stable`), so it is not pruned."""
    ran = [(record.stored.completed_as, record.revision) for record in counted]
    done = [entry for entry in ran if entry[0] is not None]
    return (max(done)[1],) if done else ()


def _past_the_limit(
    old: Sequence[Record], *, in_use: AbstractSet[str], limit: int
) -> tuple[str, ...]:
    """The oldest records beyond `limit` (by number, then name) whose revision is not `in_use`."""
    excess = len(old) - limit
    if excess <= 0:
        return ()
    oldest_first = sorted(old, key=lambda record: (record.number, record.item.name))
    prunable = [record.item.name for record in oldest_first if record.revision not in in_use]
    return tuple(sorted(prunable[:excess]))


def _rebuildable(
    history: History,
    *,
    set_name: str,
    spec: api.DisaggregatedSetSpec,
    target: str,
    lws: Sequence[records.ObservedObject],
) -> tuple[list[tuple[str, str, str]], list[str]]:
    """The revisions that run without a record (and whose name no uncounted record holds) whose
    record can be made (`recovered`), as (last started, revision, packed roles) oldest first; a
    note for each that cannot."""
    by_revision: dict[str, list[records.ObservedObject]] = {}
    for item in lws:
        by_revision.setdefault(item.labels.get(api.LABEL_REVISION, ""), []).append(item)
    recorded = {record.revision for record in history.counted} | {target, ""}
    held = {item.name for item, _ in history.uncounted}
    found, notes = [], []
    for revision_, own in sorted(by_revision.items()):
        name = naming.history_name(set_name=set_name, revision=revision_)
        if revision_ in recorded or name in held:
            continue
        rebuilt = recovered.recover(
            own, set_name=set_name, revision_=revision_, order=[role.name for role in spec.roles]
        )
        packed = compact.pack_roles(rebuilt.roles) if rebuilt.roles is not None else ""
        if rebuilt.roles is None:
            notes.append(
                f"revision {revision_} runs without a record, and none can be made from its"
                f" LeaderWorkerSets: {rebuilt.why}; {_NO_UNDO}"
            )
        elif not compact.fits(packed):
            notes.append(_too_large(revision_, packed))
        else:
            found.append((rebuilt.newest, revision_, packed))
    return sorted(found), notes


_NO_UNDO: Final = (
    "`kubectl ds rollout undo` cannot come back to it and a move back to it is held like a new"
    " revision"
)


def _too_large(revision: str, packed: str) -> str:
    return (
        f"revision {revision} has no record: its roles pack to {len(packed)} characters, more"
        f" than the {api.PACKED_ROLES_MAX_LENGTH} a {api.REVISION_KIND} holds (the API server"
        " bounds an object's annotations, and Metacontroller copies the record into one), so"
        f" {_NO_UNDO}"
    )


def _uncounted(item: records.ObservedObject, why: str) -> problems.Problem:
    return problems.Problem(
        api.Reason.INVALID_HISTORY,
        f"{api.REVISION_KIND} {item.name!r} is not this set's record of a revision: {why}; it"
        " is kept as it is and never read (delete it: a record the set needs is created again)",
    )


def _tie(first: Record, second: Record) -> problems.Problem:
    return problems.Problem(
        api.Reason.INVALID_HISTORY,
        f"{api.REVISION_KIND}s {first.item.name!r} and {second.item.name!r} both hold number"
        f" {first.number}, so the history cannot tell which is newer: it holds (no record is"
        " created, renumbered or pruned), a rollout-hold-at applies to every rollout and"
        " a new slice past a rollout-partition waits, until one of them is deleted",
    )


def _exhausted(top: Record) -> problems.Problem:
    return problems.Problem(
        api.Reason.INVALID_HISTORY,
        f"{api.REVISION_KIND} {top.item.name!r} holds number {top.number}, the highest a"
        " history holds, so no later revision can be numbered: delete it",
    )
