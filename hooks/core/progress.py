"""How a rollout's progress reads: the progress deadline, and the rollout record in status.

docs/rollout.md ("Pausing and the progress deadline") has the rules: what counts as progress,
when Progressing turns False with ProgressDeadlineExceeded, why a paused, held or partitioned
rollout does not count against the deadline. This module owns the judgement of one pass
(`judge`: the record to write in `status.rollout` and how Progressing reads) and the one resync
a rolling set asks for (`resync_after`, at its deadline). `hooks.core.controls` reads the
annotations. The time of the last progress lives in `status.rollout`, which Metacontroller hands
back on every sync, so every hook replica, and a restarted one, sees the same clock.

Pure: time comes only from the `now` the caller passes (RFC 3339).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from hooks import api
from hooks.api import conditions, limits, times
from hooks.core import controls, problems, records, rollout, status


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a pass reports about its rollout: the record to keep, and how Progressing reads
    (None: as usual, from readiness)."""

    rollout: api.RolloutStatus | None
    progressing: status.ConditionUpdate | None
    deadline_counts: bool = False
    """The deadline runs: a rollout moves, not paused, held or partitioned."""


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

    `rolling`: some slice still runs an old revision; `stepped`: some slice started its rollout,
    took a step or created an LWS in this pass; `coming_up`: some LWS of the target revision was
    created in this pass or is not ready; `new_lws`: the LWS of the target revision that stay;
    `standing`:
    how Progressing reads when every rolling slice stands still on purpose (held or
    partitioned, `hooks.core.canary`); `slices`: where each slice that is not steady stands.
    Like a pause, standing still is not a lack of progress: the deadline does not count, and
    when the rollout moves on again its time starts anew.
    """
    paused = _paused_condition(revision, rolling) if control.paused else None
    if not rolling and not _arriving(parent, revision, coming_up=coming_up, stepped=stepped):
        return Verdict(rollout=None, progressing=paused)
    stopped = paused or standing
    moved = stepped or (stopped is None and _was_stopped(parent.conditions))
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
    deadline covers as it covers a rollout: from the pass that created its LWS (a new set, a slice
    added, an LWS deleted and made again) until every LWS of the revision is ready, the record
    of that first pass carried in `status.rollout`. A status with no Available condition yet
    counts as a first pass too: Metacontroller may sync the set again before its cache holds the
    status of the pass that created the LWS. A set that was ready and lost a group, or that
    scales up, has no record to carry, so the deadline does not run for it (as for a Deployment
    whose rollout completed).
    """
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
    """The rollout record: `now` when the rollout moved (or is new), else the previous one.

    The previous record is read back from the status, which anyone who can write the status can
    edit, so it is trusted only as far as it is possible: a time that is not RFC 3339 or lies
    after `now` starts the record afresh, and counts above what the new LWS can have are
    lowered to that (a count kept impossibly high would hide every rise).
    """
    ready = sum(item.status.ready_replicas for item in new_lws)
    updated = sum(item.status.updated_replicas for item in new_lws)
    fresh = api.RolloutStatus(
        revision=revision,
        last_progress_time=now,
        ready_replicas=ready,
        updated_replicas=updated,
        slices=list(slices),
    )
    if previous is None or previous.revision != revision or moved:
        return fresh
    since = times.parse(previous.last_progress_time)
    current = times.parse(now)
    if since is None or current is None or since > current:
        return fresh
    most = sum(item.replicas for item in new_lws)
    ready_then = min(previous.ready_replicas, most)
    updated_then = min(previous.updated_replicas, most)
    if ready > ready_then or updated > updated_then:
        return fresh
    return api.RolloutStatus(
        revision=revision,
        last_progress_time=times.format_utc(since.seconds),
        ready_replicas=ready_then,
        updated_replicas=updated_then,
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
    """Seconds until the deadline of a waiting rollout passes, so that a sync then reports it.

    Everything else a rollout waits for (readiness, a scaler, a deleted child) is a change of a
    child or related object, which syncs the set without being asked; so there is no resync
    without a running deadline, or once it has passed (it is reported already).
    """
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


def _was_stopped(observed: Iterable[records.ObservedCondition]) -> bool:
    """Whether the previous pass reported a rollout standing still on purpose."""
    return any(
        c.type == api.ConditionType.PROGRESSING and c.reason in conditions.DELIBERATE_STOPS
        for c in observed
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
    """What the status says of scaling during a rollout (docs/rollout.md, "Scaling while a
    rollout runs"): the targets that moved since the slices' rollouts started, and what each
    slice that did not move waits for, or why one that stands still runs other than its
    targets. Empty when neither."""
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
