"""Children the set asked for that never appeared: how a name held by someone else is found.

Metacontroller creates each child of the answer that it has not observed. When the name is
taken by an object this set does not control, the API server answers AlreadyExists and
Metacontroller drops the error: the other object is left exactly as it is (never adopted, never
overwritten) and the child simply never shows up among the observed children. When the API
server refuses the object for another reason (an admission webhook, a quota), Metacontroller
posts a Warning event on the set and retries.

Reading those names through customize's related objects would find the holder at once, but a
related rule makes every event of its kind in the cluster cost Metacontroller a pass over every
parent (docs/operations.md, "Where Metacontroller's CPU goes"). So the hook finds it after the
fact, at no cost to a set whose children appear:

- LeaderWorkerSets, ControllerRevisions and scalers are asked for when the spec changes (a new
  revision, slice or External role). One the answer asks to create while the status already
  reflects this generation (`status.observedGeneration`) was asked for by an earlier pass and
  did not appear: it goes into `status.creating` with the time, and the pass asks for a sync
  when `GRACE_SECONDS` have passed. (A child deleted by someone and created again looks the
  same, and leaves the record at its next pass, when it has appeared.)
- A child in `status.creating` for `GRACE_SECONDS` or more is a problem (Degraded, reason
  NameConflict); every pass keeps it in the answer, so it is created as soon as the name is
  free, and asks for another look `GRACE_SECONDS` later, since the holder is no related object
  and its deletion syncs nothing.
- Services are asked for when their revision becomes ready, in any pass, so the rule cannot
  tell an earlier ask from this one; a Service whose name is taken is not reported.

Pure: reads `now` from the caller; trusts the recorded times only as far as they are possible.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from hooks import api
from hooks.api import times
from hooks.core import status

GRACE_SECONDS: Final = 30
"""How long a recorded child may take to appear: far more than a watch event takes to arrive on
a loaded API server."""

TRACKED_KINDS: Final = frozenset({api.LWS_KIND, api.REVISION_KIND, api.SCALER_KIND})
"""The kinds asked for only when the spec changes (see the module docstring)."""

ChildKey = tuple[str, str]
"""(kind, name)."""


@dataclass(frozen=True, slots=True)
class Creations:
    """What the pass records and reports about the children it asks to be created."""

    record: tuple[api.CreatingChild, ...]
    """`status.creating`: the children of tracked kinds still missing, with the time a pass
    first found them missing."""
    missing: frozenset[ChildKey]
    """The children missing for `GRACE_SECONDS` or more."""
    problems: tuple[status.Problem, ...]
    """One per missing child."""
    resync_after: int | None
    """Seconds until the next recorded child's grace ends, or until the next look at a
    missing one."""


def track(
    requested: Iterable[ChildKey],
    recorded: Mapping[ChildKey, str],
    *,
    asked_before: bool,
    now: str,
) -> Creations:
    """`requested`: the children this answer wants that are not observed; `recorded`: the
    times `status.creating` holds (as written, possibly edited by anyone who can write the
    status); `asked_before`: the status reflects the parent's generation already."""
    record = []
    missing = set()
    problems = []
    waits = []
    current = times.parse(now)
    for kind, name in sorted(key for key in requested if key[0] in TRACKED_KINDS):
        since = recorded.get((kind, name))
        asked = times.parse(since) if since is not None else None
        if current is None or asked is None or asked > current:
            if asked_before:
                record.append(api.CreatingChild(kind=kind, name=name, since=now))
                waits.append(GRACE_SECONDS)
            continue
        record.append(
            api.CreatingChild(kind=kind, name=name, since=times.format_utc(asked.seconds))
        )
        missing_for = current.seconds - asked.seconds
        if missing_for < GRACE_SECONDS:
            waits.append(GRACE_SECONDS - missing_for)
            continue
        waits.append(GRACE_SECONDS)
        missing.add((kind, name))
        problems.append(
            status.Problem(
                api.Reason.NAME_CONFLICT,
                f"{kind} {name!r} has not appeared although this DisaggregatedSet has asked for"
                f" it since {times.format_utc(asked.seconds)}: an object the set does not control"
                " holds the name (delete or rename it; if another controller made it for this"
                " set, `kubectl ds adopt` hands it over), or the API server refuses to create it"
                " (the set's events say why)",
            )
        )
    return Creations(
        record=tuple(record),
        missing=frozenset(missing),
        problems=tuple(problems),
        resync_after=min(waits, default=None),
    )
