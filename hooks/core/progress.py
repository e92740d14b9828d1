"""How a rollout's progress reads: the progress deadline, and the rollout record in status.

Owns one pass's judgement (`judge`: the record in `status.rollout`, how Progressing reads) and
the resync at the deadline (`resync_after`). Rules: docs/rollout.md, "Pausing and the progress
deadline". The last progress lives in `status.rollout`, so every hook replica sees one clock.
Pure: time comes only from the `now` the caller passes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hooks import api
from hooks.api import conditions, limits, times
from hooks.core import controls, problems, records, rollout, status


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a pass reports about its rollout: the record to keep, and how Progressing reads
    (None: from readiness); `deadline_counts`: not paused, held or partitioned."""

    rollout: api.RolloutStatus | None
    progressing: status.ConditionUpdate | None
    deadline_counts: bool = False


def judge(
    *,
    control: controls.Control,
    rolling: bool,
    stepped: bool,
    revision: str,
    new_lws: Sequence[records.ObservedObject],
    parent: records.Parent,
    now: str,
    standing: status.ConditionUpdate | None = None,
    slices: Sequence[api.RolloutSlice] = (),
    coming_up: bool = False,
) -> Verdict:
    """The rollout record and the Progressing override of one pass.

    `rolling`: some slice runs an old revision; `stepped`: some slice started, stepped or created
    an LWS; `coming_up`: some target LWS was created now or is not ready; `standing`: Progressing
    when every rolling slice stands still on purpose (`hooks.core.canary`), which, like a pause,
    stops the deadline.
    """
    paused = _paused_condition(revision, rolling) if control.paused else None
    if not rolling and not _arriving(parent, revision, coming_up=coming_up, stepped=stepped):
        return Verdict(rollout=None, progressing=paused)
    stopped = paused or standing
    was_stopped = any(  # the previous pass reported a rollout standing still on purpose
        c.type == api.ConditionType.PROGRESSING and c.reason in conditions.DELIBERATE_STOPS
        for c in parent.conditions
    )
    moved = stepped or (stopped is None and was_stopped)
    record = _record(revision, new_lws, parent.rollout, moved=moved, now=now, slices=slices)
    if stopped is not None:
        return Verdict(rollout=record, progressing=stopped)
    return Verdict(
        rollout=record,
        progressing=_past_deadline(control, record, new_lws, now=now),
        deadline_counts=True,
    )


def _arriving(parent: records.Parent, revision: str, *, coming_up: bool, stepped: bool) -> bool:
    """Whether a set that runs no old revision is still coming up to its revision, which the
    deadline covers too. A status without Available counts as the first pass: Metacontroller may
    sync again before its cache holds the status of the pass that created the LWS."""
    if not coming_up:
        return False
    previous = parent.rollout
    first = all(c.type != api.ConditionType.AVAILABLE for c in parent.conditions)
    return stepped or first or (previous is not None and previous.revision == revision)


def _record(
    revision: str,
    new_lws: Sequence[records.ObservedObject],
    previous: records.ObservedRollout | None,
    *,
    moved: bool,
    now: str,
    slices: Sequence[api.RolloutSlice] = (),
) -> api.RolloutStatus:
    """The rollout record: `now` when the rollout moved (or is new), else the previous one,
    trusted only as far as possible (anyone may write a status): a time that is not RFC 3339 or
    lies after `now` starts afresh, counts above what the new LWS can have are lowered to it."""
    ready = sum(item.status.ready_replicas for item in new_lws)
    updated = sum(item.status.updated_replicas for item in new_lws)
    last = now
    if previous is not None and previous.revision == revision and not moved:
        since, current = times.parse(previous.last_progress_time), times.parse(now)
        most = sum(item.replicas for item in new_lws)
        ready_then = min(previous.ready_replicas, most)
        updated_then = min(previous.updated_replicas, most)
        stalled = ready <= ready_then and updated <= updated_then
        if since is not None and current is not None and since <= current and stalled:
            last, ready, updated = times.format_utc(since.seconds), ready_then, updated_then
    return api.RolloutStatus(
        revision=revision,
        last_progress_time=last,
        ready_replicas=ready,
        updated_replicas=updated,
        slices=list(slices),
    )


def _past_deadline(
    control: controls.Control,
    record: api.RolloutStatus,
    new_lws: Sequence[records.ObservedObject],
    *,
    now: str,
) -> status.ConditionUpdate | None:
    """Progressing=False, ProgressDeadlineExceeded, when the rollout stalled too long."""
    stalled_for = times.seconds_between(record.last_progress_time, now)
    deadline = control.deadline_seconds
    if not deadline or stalled_for is None or stalled_for <= deadline:
        return None
    message = (
        f"Rollout to revision {record.revision} made no progress since"
        f" {record.last_progress_time} (deadline {deadline} s); not ready: {_not_ready(new_lws)}"
    )
    return status.new_condition(
        api.ConditionType.PROGRESSING,
        true=False,
        reason=api.Reason.PROGRESS_DEADLINE_EXCEEDED,
        message=message,
    )


def resync_after(control: controls.Control, verdict: Verdict, *, now: str) -> int | None:
    """Seconds until the deadline of a waiting rollout passes, so that a sync then reports it
    (everything else a rollout waits for is a change that syncs the set unasked)."""
    record = verdict.rollout
    if record is None or not verdict.deadline_counts or not control.deadline_seconds:
        return None
    stalled_for = times.seconds_between(record.last_progress_time, now)
    if stalled_for is None or stalled_for > control.deadline_seconds:
        return None
    # The deadline is exceeded strictly after `deadline_seconds` whole seconds; a later sync
    # asks again, so the wait is bounded whatever the deadline.
    return min(control.deadline_seconds - stalled_for + 1, limits.MAX_RESYNC_SECONDS)


def _paused_condition(revision: str, rolling: bool) -> status.ConditionUpdate:
    what = f"the rollout to revision {revision} is" if rolling else "rollouts are"
    return status.ConditionUpdate(
        type=api.ConditionType.PROGRESSING,
        status=api.ConditionStatus.UNKNOWN,
        reason=api.Reason.ROLLOUT_PAUSED,
        message=f"Paused: {what} frozen until annotation {api.ANNOTATION_PAUSED} is removed",
    )


def _not_ready(new_lws: Sequence[records.ObservedObject]) -> str:
    lagging = [
        f"slice {item.slice_index} {item.labels.get(api.LABEL_ROLE, '?')} {item.name}"
        f" ({item.status.ready_replicas}/{item.replicas} ready)"
        for item in sorted(new_lws, key=lambda lws: lws.name)
        if item.status.ready_replicas < item.replicas
    ]
    if not lagging:
        return "every new LWS is ready, but no step can be taken"
    return problems.summarise(lagging)


def scaling_note(plans: Sequence[rollout.SlicePlan]) -> str:
    """What the status says of scaling during a rollout, or "" (docs/rollout.md, "What the
    status says, and what an autoscaler sees")."""
    moved = sorted({(m.role, m.recorded, m.target) for plan in plans for m in plan.moved})
    parts = []
    if moved:
        changes = [f"{role} {recorded} → {target}" for role, recorded, target in moved]
        parts.append(f"target changed during the rollout: {problems.summarise(changes)}")
    waiting = [
        f"slice {plan.slice_index}: " + ", ".join(plan.waits) for plan in plans if plan.waits
    ]
    if waiting:
        parts.append(problems.summarise(waiting))
    return "; ".join(parts)
