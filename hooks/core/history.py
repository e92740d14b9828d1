"""The revision history of a set: one record per revision it has run (docs/rollout.md).

Each revision the set moves to gets a DisaggregatedSetRevision named `<set>-<revision>`,
labelled with the set's name and the revision, controller-owned by the set (Metacontroller adds the
ownerReference, so garbage collection removes the history with the set). Its `roles` are the roles
as the spec had them (name, metadata, scaling and the whole LWS spec): enough to restore the
revision exactly, its hash included (`kubectl ds rollout undo`). Its `revision` is the revision's
place in the history, as for Deployments:

- a revision the set moves to for the first time gets the next number (1 for the first);
- moving back to a revision that is recorded already gives its record the next number
  (its roles, which the API server keeps immutable, are unchanged);
- the set's `kubernetes.io/change-cause` annotation, when it has one, is copied onto the
  record when it gets its number.

`disaggregatedset.x-k8s.io/revision-history-limit` (default 10) bounds the old revisions kept. The
oldest go first, but never the current one and never one that still has LWS in some slice: pruning
is a permitted deletion (docs/safety.md), and nothing else of the history ever goes. A
record of the set whose labels do not match its name is kept as it is and never
counted. A name held by an object the set does not control is never overwritten, and the rollout
goes on without its record: the customize hook asks for no record, so the set notices
that the record it asked for has not appeared (`core/creations.py`, NameConflict); a request that
carries such an object as related is reported at once (HistoryConflict).

Pure: reads its arguments only, renders through `children`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hooks import api
from hooks.api import naming
from hooks.core import children, problems, records


@dataclass(frozen=True, slots=True)
class HistoryPlan:
    """The history children of one pass and what goes."""

    children: tuple[api.JsonObject, ...]
    pruned: tuple[str, ...]
    """Names of records past the history limit, deleted."""
    problems: tuple[problems.Problem, ...] = ()


def plan(
    *,
    set_name: str,
    spec: api.DisaggregatedSetSpec,
    target: str,
    observed: Sequence[records.ObservedObject],
    lws: Sequence[records.ObservedObject],
    foreign_names: frozenset[str],
    annotations: Mapping[str, str],
    limit: int,
) -> HistoryPlan:
    """The set's records after this pass (`observed`: the ones it controls)."""
    recorded = {
        item.labels[api.LABEL_REVISION]: item
        for item in observed
        if _is_record_of(item, set_name=set_name)
    }
    kept = [
        children.reemit(item) for item in observed if not _is_record_of(item, set_name=set_name)
    ]
    current = recorded.get(target)
    others = [item for revision, item in recorded.items() if revision != target]
    top = max((item.history_number or 0 for item in recorded.values()), default=0)
    change_cause = annotations.get(api.CHANGE_CAUSE_ANNOTATION)
    name = naming.history_name(set_name=set_name, revision=target)
    found: list[problems.Problem] = []
    if current is None and name in foreign_names:
        found.append(_conflict(name))
    elif current is None:
        kept.append(
            children.render_history(
                set_name=set_name,
                revision=target,
                number=top + 1,
                roles=spec.roles,
                change_cause=change_cause,
            )
        )
    elif _is_latest(current, others):
        kept.append(children.reemit(current))
    else:
        kept.append(children.renumber_history(current, number=top + 1, change_cause=change_cause))
    pruned = _past_the_limit(others, in_use=_revisions_with_lws(lws), limit=limit)
    kept.extend(children.reemit(item) for item in others if item.name not in pruned)
    return HistoryPlan(children=tuple(kept), pruned=pruned, problems=tuple(found))


def _is_record_of(item: records.ObservedObject, *, set_name: str) -> bool:
    """Whether a DisaggregatedSetRevision is the record of the revision its label names."""
    revision = item.labels.get(api.LABEL_REVISION, "")
    return bool(revision) and item.name == naming.history_name(set_name=set_name, revision=revision)


def _is_latest(current: records.ObservedObject, others: Sequence[records.ObservedObject]) -> bool:
    number = current.history_number
    return number is not None and all((other.history_number or 0) < number for other in others)


def _revisions_with_lws(lws: Sequence[records.ObservedObject]) -> frozenset[str]:
    return frozenset(item.labels.get(api.LABEL_REVISION, "") for item in lws)


def _past_the_limit(
    old: Sequence[records.ObservedObject], *, in_use: frozenset[str], limit: int
) -> tuple[str, ...]:
    """The oldest old revisions beyond `limit`, skipping those that still have LWS."""
    excess = len(old) - limit
    if excess <= 0:
        return ()
    oldest_first = sorted(old, key=lambda item: (item.history_number or 0, item.name))
    prunable = [item.name for item in oldest_first if item.labels[api.LABEL_REVISION] not in in_use]
    return tuple(sorted(prunable[:excess]))


def _conflict(name: str) -> problems.Problem:
    return problems.Problem(
        api.Reason.HISTORY_CONFLICT,
        f"{api.REVISION_KIND} {name!r} exists and is not controlled by this DisaggregatedSet;"
        " delete it so the set can record this revision in its history",
    )
