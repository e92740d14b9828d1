"""Why a set is Degraded: the problems a pass finds in its children and spec, in words a person
can act on (`status` turns the first into the Degraded condition, and counts the rest).

Pure: builds messages from records; decides nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from hooks import api
from hooks.core import desired, records, scalers, status


def of_children(
    request: records.SyncRequest,
    foreign_lws: Mapping[str, str],
    scaler_plan: scalers.ScalerPlan,
    conflicts: Iterable[desired.ChildKey],
) -> list[status.Problem]:
    """What is wrong with the set's children, most actionable first: LWS and scaler names held
    by foreign objects, names its own children claim twice, impossible status counts."""
    problems = [
        status.Problem(
            api.Reason.NAME_CONFLICT,
            f"LeaderWorkerSet {name!r} exists and is not controlled by this DisaggregatedSet; "
            "delete or rename it so the set can create its own",
        )
        for name in sorted(foreign_lws)
    ]
    orphans = _orphans(request)
    problems.extend(
        status.Problem(
            api.Reason.SCALER_CONFLICT,
            f"DisaggregatedSetRoleScaler {name!r} for External role {role!r} carries this"
            " DisaggregatedSet's name label but no controller (another controller made it, and"
            " Metacontroller released it as it was not adopted): `kubectl ds adopt"
            f" {request.parent.name} --orphans` hands it to the set"
            if name in orphans
            else f"DisaggregatedSetRoleScaler {name!r} for External role {role!r} exists and is"
            " not controlled by this DisaggregatedSet; delete it so the set can create its own",
        )
        for role, name in sorted(scaler_plan.conflicts.items())
    )
    problems.extend(
        status.Problem(
            api.Reason.CHILD_CONFLICT,
            f"{kind} {name!r} is claimed twice by this DisaggregatedSet's slices or revisions (a"
            f" {api.GROUP} label of a child was removed or edited): it is kept exactly as it"
            " is; restore the labels its name implies",
        )
        for kind, name in sorted(conflicts)
    )
    problems.extend(
        status.Problem(
            api.Reason.INVALID_CHILD_STATUS,
            f"{item.kind.kind} {item.name!r}: {item.status_error}, more than any"
            f" {api.LWS_KIND} can have; its status is ignored (counted as not ready) until it is"
            " sane again",
        )
        for item in request.children
        if item.status_error is not None
    )
    return problems


def _orphans(request: records.SyncRequest) -> frozenset[str]:
    """Related scalers with this set's name label and no controller: children of this set that
    another controller made (docs/operations.md, "Moving from upstream's controller")."""
    return frozenset(
        item.name
        for item in request.related
        if item.kind is records.ChildKind.SCALER
        and item.controller_uid is None
        and item.labels.get(api.LABEL_NAME) == request.parent.name
    )


def of_violation(violation: api.Violation) -> status.Problem:
    """A broken rule of the spec (or of the metadata) as a problem."""
    reason = (
        api.Reason.INVALID_METADATA
        if violation.field.startswith("metadata.")
        else api.Reason.INVALID_SPEC
    )
    return status.Problem(reason, f"{violation.field}: {violation.message}")
