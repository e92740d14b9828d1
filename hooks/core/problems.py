"""Why a set is Degraded, in words a person can act on (`Problem`, and those found in its children
and spec), and the one rule for bounding a text (`cut`, `summarise`). Decides nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from hooks import api
from hooks.core import records

SHOWN_ITEMS: Final = 5
ITEM_MAX_LENGTH: Final = 1000


def summarise(items: Sequence[str]) -> str:
    """The first `SHOWN_ITEMS` items, each `cut`, then how many more there are."""
    shown = [cut(item) for item in items[:SHOWN_ITEMS]]
    rest = len(items) - len(shown)
    return "; ".join(shown) + (f"; and {rest} more" if rest else "")


def cut(text: str, limit: int = ITEM_MAX_LENGTH) -> str:
    """`text`, or its first `limit` characters and how many more there were."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


@dataclass(frozen=True, slots=True)
class Problem:
    """Why the set is Degraded: a condition reason and a message a person can act on."""

    reason: api.Reason
    message: str


def of_children(
    children: Iterable[records.ObservedObject],
    *,
    set_name: str,
    scaler_conflicts: Mapping[str, str],
    orphans: frozenset[str],
    conflicts: Iterable[tuple[str, str]],
) -> list[Problem]:
    """What is wrong with the set's children, most actionable first: scaler names held by
    others (`orphans`: made for this set by another controller), names claimed twice, impossible
    status counts."""
    problems = [
        Problem(
            api.Reason.SCALER_CONFLICT,
            f"DisaggregatedSetRoleScaler {name!r} for External role {role!r} carries this"
            " DisaggregatedSet's name label but no controller (a set of this name deleted with"
            " --cascade=orphan left it, or Metacontroller released it as it was not adopted):"
            f" `kubectl ds adopt {set_name} --orphans` hands it to the set when it has no owner"
            " and its name and labels are the ones the set gives it"
            if name in orphans
            else f"DisaggregatedSetRoleScaler {name!r} for External role {role!r} exists and is"
            " not controlled by this DisaggregatedSet; delete it so the set can create its own",
        )
        for role, name in sorted(scaler_conflicts.items())
    ]
    problems.extend(
        Problem(
            api.Reason.CHILD_CONFLICT,
            f"{kind} {name!r} is claimed twice by this DisaggregatedSet's slices or revisions (a"
            f" {api.GROUP} label of a child was removed or edited): it is kept exactly as it"
            " is; restore the labels its name implies",
        )
        for kind, name in sorted(conflicts)
    )
    problems.extend(
        Problem(
            api.Reason.INVALID_CHILD_STATUS,
            f"{item.kind.kind} {item.name!r}: {item.status_error}, more than any"
            f" {api.LWS_KIND} can have; its status is ignored (counted as not ready) until it is"
            " sane again",
        )
        for item in children
        if item.status_error is not None
    )
    return problems


def orphan_scalers(related: Iterable[records.ObservedObject], *, set_name: str) -> frozenset[str]:
    """Related scalers with this set's name label and no controller (docs/operations.md, "Moving
    from upstream's controller")."""
    return frozenset(
        item.name
        for item in related
        if item.kind is records.ChildKind.SCALER
        and item.controller_uid is None
        and item.labels.get(api.LABEL_NAME) == set_name
    )


def of_violation(violation: api.Violation) -> Problem:
    """A broken rule of the spec (or of the metadata) as a problem."""
    reason = (
        api.Reason.INVALID_METADATA
        if violation.field.startswith("metadata.")
        else api.Reason.INVALID_SPEC
    )
    return Problem(reason, f"{violation.field}: {violation.message}")
