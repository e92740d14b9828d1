"""Canary rollouts: a partition across slices, and a hold at a share of the new revision.

Both are annotations on the set (`hooks.core.controls` reads them; docs/rollout.md has the user's
view); this module decides what they mean for each slice of one pass:

- `rollout-partition: "K"`: a slice with index K or more is *partitioned*: it keeps serving the
  revision it runs, untouched (`rollout.plan_slice` then creates, drains and rolls nothing there;
  a slice steady on one old revision still scales). A slice added while partitioned, which has no
  LWS yet, is created at the *stable* revision, the one the other partitioned slices serve
  (read from its DisaggregatedSetRevision); without one it starts at the spec's revision.
- `rollout-hold-at: "P%"`: every rolling slice takes its planner steps until every spec role of
  the new revision has at least P% of its target (rounded up), then holds there, both revisions
  serving. A rollback is never held: when the target revision was recorded in the history before
  some other revision the set has run (its record is the older), the set goes back to something
  it ran, and a hold is for something new.
- `paused` goes before both; a partitioned slice is never held.

Pure: reads its arguments only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from hooks import api
from hooks.api import times
from hooks.core import controls, problems, records, rollout, status


def slice_control(control: controls.Control, index: int, *, rollback: bool) -> rollout.SliceControl:
    """What the set's controls ask of slice `index`."""
    return rollout.SliceControl(
        paused=control.paused,
        partitioned=control.partition is not None and index >= control.partition,
        hold_at_percent=None if rollback else control.hold_at_percent,
    )


def is_rollback(target: str, history: Sequence[records.ObservedObject]) -> bool:
    """Whether the target revision is one the set ran before another it has run since: its
    DisaggregatedSetRevision was created before another revision's."""
    created = {
        item.labels.get(api.LABEL_REVISION, ""): times.parse(item.creation_timestamp)
        for item in history
    }
    mine = created.get(target)
    return mine is not None and any(
        other is not None and other > mine
        for revision, other in created.items()
        if revision != target
    )


@dataclass(frozen=True, slots=True)
class Stable:
    """The revision a partitioned slice serves, and its roles as recorded."""

    revision: str
    roles: tuple[api.Role, ...]


def stable_revision(
    lws_by_slice: Mapping[int, Sequence[records.ObservedObject]],
    *,
    partition: int,
    target: str,
    history: Sequence[records.ObservedObject],
) -> Stable | None:
    """The revision partitioned slices serve, for a new partitioned slice: of the revisions
    other than the target that some partitioned slice runs alone, the one latest in the
    history, when its roles are recorded."""
    served = set()
    for index, items in lws_by_slice.items():
        revisions = {item.labels.get(api.LABEL_REVISION, "") for item in items if item.replicas}
        if index >= partition and len(revisions) == 1 and target not in revisions:
            served |= revisions
    recorded = sorted(
        (item.history_number or 0, revision, item)
        for item in history
        if (revision := item.labels.get(api.LABEL_REVISION, "")) in served
    )
    for _, revision, item in reversed(recorded):
        roles = api.recorded_roles(item.applied.get("roles"))
        if roles:
            return Stable(revision=revision, roles=roles)
    return None


def share(
    new_lws: Sequence[records.ObservedObject],
    *,
    held: AbstractSet[int],
    roles: Sequence[rollout.RoleInput],
) -> str:
    """What the new revision runs in the held slices, per spec role: `prefill 1/4, decode 1/2`
    (its groups over the role's target in those slices)."""
    if not held:
        return ""
    running = {role.name: 0 for role in roles}
    for item in new_lws:
        role = item.labels.get(api.LABEL_ROLE, "")
        if item.slice_index in held and role in running:
            running[role] += item.replicas

    def wanted(role: rollout.RoleInput) -> str:
        return "?" if role.target is None else str(role.target * len(held))

    return ", ".join(f"{role.name} {running[role.name]}/{wanted(role)}" for role in roles)


def progressing(
    plans: Sequence[rollout.SlicePlan], *, revision: str, hold_at: int | None, share: str
) -> status.ConditionUpdate | None:
    """Progressing Unknown when every slice that is not steady stands still on purpose: held
    (RolloutHeld, also when others are partitioned) or partitioned (RolloutPartitioned); None
    while some slice still moves."""
    standing = [plan for plan in plans if plan.phase is not rollout.Phase.STEADY]
    if not standing or any(plan.phase not in _CANARY for plan in standing):
        return None
    held = [plan.slice_index for plan in standing if plan.phase is rollout.Phase.HELD]
    partitioned = [plan.slice_index for plan in standing if plan.phase is rollout.Phase.PARTITIONED]
    parts = []
    if held:
        parts.append(
            f"slices {_indexes(held)} hold at {hold_at}% of revision {revision} ({share}), both"
            " revisions serving"
        )
    if partitioned:
        parts.append(
            f"slices {_indexes(partitioned)} are past annotation {api.ANNOTATION_ROLLOUT_PARTITION}"
            " and keep the revision they run"
        )
    reason = api.Reason.ROLLOUT_HELD if held else api.Reason.ROLLOUT_PARTITIONED
    message = "; ".join(parts) + (
        f"; raise or remove annotation {api.ANNOTATION_ROLLOUT_HOLD_AT} or"
        f" {api.ANNOTATION_ROLLOUT_PARTITION} to roll on"
    )
    return status.ConditionUpdate(
        type=api.ConditionType.PROGRESSING,
        status=api.ConditionStatus.UNKNOWN,
        reason=reason,
        message=message,
    )


_CANARY = frozenset({rollout.Phase.HELD, rollout.Phase.PARTITIONED})


def _indexes(indexes: Sequence[int]) -> str:
    """Slice indexes as ranges: `0-2, 5`, at most a few ranges and a count of the rest."""
    ranges: list[str] = []
    start = previous = indexes[0]
    for index in [*indexes[1:], None]:
        if index is not None and index == previous + 1:
            previous = index
            continue
        ranges.append(str(start) if start == previous else f"{start}-{previous}")
        if index is not None:
            start = previous = index
    return problems.summarise(ranges)
