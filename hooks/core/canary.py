"""Canary rollouts: what a partition and a hold ask of each slice (`slice_control`), and what the
status says of them (docs/rollout.md, "Canary rollouts: a partition and a hold"). `controls`
reads the annotations, `history` says what is a rollback. Pure: reads its arguments only.
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from hooks import api
from hooks.core import controls, problems, records, rollout, status, stock

_CANARY = frozenset({rollout.Phase.HELD, rollout.Phase.PARTITIONED})


def slice_control(control: controls.Control, index: int, *, rollback: bool) -> rollout.SliceControl:
    """What the set's controls ask of slice `index`."""
    return rollout.SliceControl(
        paused=control.paused,
        partitioned=control.partition is not None and index >= control.partition,
        hold_at_percent=None if rollback else control.hold_at_percent,
    )


def rollback_note(control: controls.Control, *, rollback: bool, revision: str) -> str:
    """What the status adds while a rollback runs past a hold (empty when none does)."""
    if not rollback or control.hold_at_percent is None:
        return ""
    return (
        f"a rollback to revision {revision}, which annotation {api.ANNOTATION_ROLLOUT_HOLD_AT}"
        f" ({control.hold_at_percent}%) does not hold"
    )


@dataclass(frozen=True, slots=True)
class Share:
    """What the new revision runs in the held slices."""

    text: str
    """Per spec role, its groups over the role's target there: `prefill 1/4, decode 1/2`."""
    groups: int
    """Its groups, all roles together."""


def share(
    new_lws: Sequence[records.ObservedObject],
    *,
    held: AbstractSet[int],
    roles: Sequence[stock.RoleInput],
) -> Share:
    """What the new revision runs in the held slices (see `Share`)."""
    running = {role.name: 0 for role in roles}
    for item in new_lws:
        role = item.labels.get(api.LABEL_ROLE, "")
        if item.slice_index in held and role in running:
            running[role] += item.replicas

    def wanted(role: stock.RoleInput) -> str:
        return "?" if role.target is None else str(role.target * len(held))

    text = ", ".join(f"{role.name} {running[role.name]}/{wanted(role)}" for role in roles)
    return Share(text=text if held else "", groups=sum(running.values()))


def progressing(
    plans: Sequence[rollout.SlicePlan],
    *,
    revision: str,
    control: controls.Control,
    share: Share,
    empty: AbstractSet[int] = frozenset(),
) -> status.ConditionUpdate | None:
    """Progressing Unknown when every slice that is not steady stands still on purpose: held
    (RolloutHeld, also when others are partitioned) or partitioned (RolloutPartitioned); None
    while some slice still moves. `empty`: partitioned slices that run nothing, no revision
    being stable."""
    standing = [plan for plan in plans if plan.phase is not rollout.Phase.STEADY]
    if not standing or any(plan.phase not in _CANARY for plan in standing):
        return None
    held = [plan.slice_index for plan in standing if plan.phase is rollout.Phase.HELD]
    partitioned = [plan.slice_index for plan in standing if plan.phase is rollout.Phase.PARTITIONED]
    # Only the annotations that stop a slice: a hold alone names no partition, and the reverse.
    parts, keys = [], []
    if held:
        parts.append(_held(held, revision=revision, control=control, share=share))
        keys.append(api.ANNOTATION_ROLLOUT_HOLD_AT)
    if partitioned:
        parts.extend(_partitioned(partitioned, empty=empty))
        keys.append(api.ANNOTATION_ROLLOUT_PARTITION)
    return status.ConditionUpdate(
        type=api.ConditionType.PROGRESSING,
        status=api.ConditionStatus.UNKNOWN,
        reason=api.Reason.ROLLOUT_HELD if held else api.Reason.ROLLOUT_PARTITIONED,
        message="; ".join(parts) + f"; raise or remove annotation {' or '.join(keys)} to roll on",
    )


def _held(indexes: Sequence[int], *, revision: str, control: controls.Control, share: Share) -> str:
    """What the status says of the held slices: the share asked for (and, when the annotation
    is malformed, that it is read as that), what the new revision runs, whether it serves."""
    hold = f"{control.hold_at_percent}%"
    if api.ANNOTATION_ROLLOUT_HOLD_AT in control.malformed:
        hold += f" (annotation {api.ANNOTATION_ROLLOUT_HOLD_AT} is malformed: read as {hold})"
    serving = "both revisions serving" if share.groups else "the new revision runs no group yet"
    held, one = _slices(indexes)
    verb = "holds" if one else "hold"
    return f"{held} {verb} at {hold} of revision {revision} ({share.text}), {serving}"


def _partitioned(indexes: Sequence[int], *, empty: AbstractSet[int]) -> list[str]:
    """What the status says of the partitioned slices: those that keep what they run, and those
    that run nothing."""
    keeping = [index for index in indexes if index not in empty]
    waiting = [index for index in indexes if index in empty]
    parts = []
    if keeping:
        slices, one = _slices(keeping)
        parts.append(
            f"{slices} {'is' if one else 'are'} past annotation {api.ANNOTATION_ROLLOUT_PARTITION}"
            f" and {'keeps the revision it runs' if one else 'keep the revision they run'}"
        )
    if waiting:
        slices, one = _slices(waiting)
        parts.append(
            f"{slices} {'is' if one else 'are'} past annotation {api.ANNOTATION_ROLLOUT_PARTITION}"
            f" and {'runs' if one else 'run'} nothing: the history records no revision every"
            " slice has run"
        )
    return parts


def _slices(indexes: Sequence[int]) -> tuple[str, bool]:
    """`slice 0` or `slices 0-2, 5` (a few ranges and a count of the rest), and whether it is one
    slice (for the verb)."""
    ranges: list[str] = []
    start = previous = indexes[0]
    for index in [*indexes[1:], None]:
        if index is not None and index == previous + 1:
            previous = index
            continue
        ranges.append(str(start) if start == previous else f"{start}-{previous}")
        if index is not None:
            start = previous = index
    one = len(indexes) == 1
    return f"{'slice' if one else 'slices'} {problems.summarise(ranges)}", one
