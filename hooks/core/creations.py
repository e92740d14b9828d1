"""Children the set asked for that never appeared: `status.creating` and ChildNotCreated (the
story: docs/safety.md, "Bad input"). Owns the bookkeeping: which children go into
`status.creating` since when, which are missing past `api.CREATION_GRACE_SECONDS`, when to look
again. Pure: `now` comes from the caller; a recorded time counts only when it is possible.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from hooks import api
from hooks.api import times
from hooks.core import desired, problems

TRACKED_KINDS: Final = frozenset({api.LWS_KIND, api.REVISION_KIND, api.SCALER_KIND})
"""The kinds asked for only when the spec changes (a Service is asked for whenever it is ready)."""


@dataclass(frozen=True, slots=True)
class Creations:
    """What the pass records and reports about the children it asks to be created."""

    record: tuple[api.CreatingChild, ...]
    """`status.creating`: the children of tracked kinds still missing, with the time a pass
    first found them missing."""
    missing: frozenset[desired.ChildKey]
    """The children missing for the grace period or more."""
    problems: tuple[problems.Problem, ...]
    """One per missing child."""
    resync_after: int | None
    """Seconds until the next recorded child's grace ends, or until the next look at a
    missing one."""


def track(
    requested: Iterable[desired.ChildKey],
    recorded: Mapping[desired.ChildKey, str],
    *,
    asked_before: bool,
    now: str,
) -> Creations:
    """`requested`: the children this answer wants that are not observed; `recorded`: the
    times `status.creating` holds (as written, possibly edited by anyone who can write the
    status); `asked_before`: the status reflects the parent's generation already."""
    record = []
    missing = set()
    found: list[problems.Problem] = []
    waits = []
    current = times.parse(now)
    for kind, name in sorted(key for key in requested if key[0] in TRACKED_KINDS):
        since = recorded.get((kind, name))
        asked = times.parse(since) if since is not None else None
        if current is None or asked is None or asked > current:
            if asked_before:
                record.append(api.CreatingChild(kind=kind, name=name, since=now))
                waits.append(api.CREATION_GRACE_SECONDS)
            continue
        record.append(
            api.CreatingChild(kind=kind, name=name, since=times.format_utc(asked.seconds))
        )
        missing_for = current.seconds - asked.seconds
        if missing_for < api.CREATION_GRACE_SECONDS:
            waits.append(api.CREATION_GRACE_SECONDS - missing_for)
            continue
        waits.append(api.CREATION_GRACE_SECONDS)
        missing.add((kind, name))
        found.append(_not_created(kind, name, since=times.format_utc(asked.seconds)))
    return Creations(
        record=tuple(record),
        missing=frozenset(missing),
        problems=tuple(found),
        resync_after=min(waits, default=None),
    )


def _not_created(kind: str, name: str, *, since: str) -> problems.Problem:
    """What is known about a child that never appeared, and where an operator finds out why."""
    return problems.Problem(
        api.Reason.CHILD_NOT_CREATED,
        f"{kind} {name!r} has not appeared although this DisaggregatedSet has asked for it since"
        f" {since}. Either the API server refuses to create it (a quota, an admission webhook):"
        " `kubectl describe` of this DisaggregatedSet then shows a SyncError event that says"
        f" why; or an object the set does not control holds the name (`kubectl get {kind} {name}`"
        " shows it; Metacontroller logs only 'child object already exists', and posts no"
        " event): delete or rename that object. If it is this set's own (another controller"
        " made it, or Metacontroller released it), `kubectl ds adopt <set> --orphans` hands it"
        " over, but only when it has no owner and is exactly what the set would create there"
        " (its name and labels, and for a LeaderWorkerSet every template its revision's): it"
        " refuses anything else, naming the difference, and leaves it alone. The set keeps"
        " asking for it.",
    )
