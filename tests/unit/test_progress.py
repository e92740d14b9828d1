"""Pausing and the progress deadline (`hooks.core.progress`), with an explicit `now`."""

from __future__ import annotations

import pytest

from hooks import api
from hooks.core import controls, progress, records
from tests import builders

REV = "bbbbbbbb"
T0 = "2026-11-29T12:00:00Z"
PAUSED = {api.ANNOTATION_PAUSED: "true"}


def lws(role: str, *, replicas: int, ready: int) -> records.ObservedObject:
    (item,) = builders.parse_children(
        builders.make_lws(role, revision=REV, replicas=replicas, ready=ready)
    )
    return item


def parent(
    *,
    annotations: dict[str, str] | None = None,
    rollout: records.ObservedRollout | None = None,
    progressing_reason: str = "RolloutInProgress",
) -> records.Parent:
    condition = records.ObservedCondition(
        type="Progressing",
        status="True",
        last_transition_time=T0,
        reason=progressing_reason,
        message="",
        observed_generation=1,
    )
    return records.Parent(
        name="llm",
        namespace="default",
        uid="u",
        generation=1,
        spec=None,
        spec_violations=(),
        status={},
        conditions=(condition,),
        annotations=annotations or {},
        rollout=rollout,
    )


def judge(
    the_parent: records.Parent,
    *,
    now: str,
    rolling: bool = True,
    stepped: bool = False,
    new: tuple[records.ObservedObject, ...] = (),
) -> progress.Verdict:
    return progress.judge(
        control=controls.control_of(the_parent.annotations),
        rolling=rolling,
        stepped=stepped,
        revision=REV,
        new_lws=new,
        parent=the_parent,
        now=now,
    )


def recorded(time: str = T0, ready: int = 1, updated: int = 2) -> records.ObservedRollout:
    """A rollout record (as the LWS of `lws(replicas=2, ready=1)` would have left it)."""
    return records.ObservedRollout(
        revision=REV, last_progress_time=time, ready_replicas=ready, updated_replicas=updated
    )


# --- annotations -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotations", "paused", "deadline", "problems"),
    [
        ({}, False, 1800, 0),
        ({api.ANNOTATION_PAUSED: "true"}, True, 1800, 0),
        ({api.ANNOTATION_PAUSED: "false"}, False, 1800, 0),
        ({api.ANNOTATION_PAUSED: "yes"}, False, 1800, 1),
        ({api.ANNOTATION_PROGRESS_DEADLINE: "600"}, False, 600, 0),
        ({api.ANNOTATION_PROGRESS_DEADLINE: "0"}, False, 0, 0),
        ({api.ANNOTATION_PROGRESS_DEADLINE: "10m"}, False, 1800, 1),
        ({api.ANNOTATION_PROGRESS_DEADLINE: "-5"}, False, 1800, 1),
    ],
    ids=["none", "paused", "not-paused", "paused-garbage", "600", "off", "unit", "negative"],
)
def test_annotations(
    annotations: dict[str, str], paused: bool, deadline: int, problems: int
) -> None:
    control = controls.control_of(annotations)
    assert (control.paused, control.deadline_seconds, len(control.problems)) == (
        paused,
        deadline,
        problems,
    )
    for problem in control.problems:
        assert problem.reason == "InvalidAnnotation"
        assert any(key in problem.message for key in annotations)


# --- the record and the deadline ----------------------------------------------------------------


def test_a_new_rollout_starts_its_clock_now() -> None:
    verdict = judge(parent(), now=T0, stepped=True)
    assert verdict.rollout == api.RolloutStatus(
        revision=REV, last_progress_time=T0, ready_replicas=0, updated_replicas=0
    )
    assert verdict.progressing is None


def test_no_progress_keeps_the_time_of_the_last_one() -> None:
    verdict = judge(
        parent(rollout=recorded()), now="2026-11-29T12:10:00Z", new=(lws("p", replicas=2, ready=1),)
    )
    assert verdict.rollout is not None
    assert verdict.rollout.last_progress_time == T0
    assert verdict.progressing is None  # 600 s < 1800 s


def test_rising_ready_replicas_are_progress() -> None:
    verdict = judge(
        parent(rollout=recorded()), now="2026-11-29T13:00:00Z", new=(lws("p", replicas=2, ready=2),)
    )
    assert verdict.rollout is not None
    assert verdict.rollout.last_progress_time == "2026-11-29T13:00:00Z"
    assert verdict.progressing is None


def test_past_the_deadline_progressing_is_false_and_names_what_is_not_ready() -> None:
    stuck = lws("prefill", replicas=2, ready=1)
    verdict = judge(
        parent(rollout=recorded(), annotations={api.ANNOTATION_PROGRESS_DEADLINE: "600"}),
        now="2026-11-29T12:10:01Z",
        new=(stuck,),
    )
    assert verdict.progressing is not None
    assert (verdict.progressing.status, verdict.progressing.reason) == (
        api.ConditionStatus.FALSE,
        "ProgressDeadlineExceeded",
    )
    assert stuck.name in verdict.progressing.message
    assert "slice 0 prefill" in verdict.progressing.message
    assert "1/2 ready" in verdict.progressing.message
    assert T0 in verdict.progressing.message


def test_exactly_at_the_deadline_is_not_past_it_and_zero_turns_it_off() -> None:
    deadline = {api.ANNOTATION_PROGRESS_DEADLINE: "600"}
    at = judge(parent(rollout=recorded(), annotations=deadline), now="2026-11-29T12:10:00Z")
    off = judge(
        parent(rollout=recorded(), annotations={api.ANNOTATION_PROGRESS_DEADLINE: "0"}),
        now="2027-11-29T12:00:00Z",
    )
    assert at.progressing is None
    assert off.progressing is None


def test_a_finished_rollout_drops_its_record() -> None:
    verdict = judge(parent(rollout=recorded()), now="2026-11-29T15:00:00Z", rolling=False)
    assert verdict.rollout is None
    assert verdict.progressing is None


# --- resync ----------------------------------------------------------------------------------


def _at(seconds: int) -> str:
    """T0 plus `seconds` (under a day)."""
    hours, rest = divmod(seconds, 3600)
    return f"2026-11-29T{12 + hours:02d}:{rest // 60:02d}:{rest % 60:02d}Z"


@pytest.mark.parametrize(
    ("annotations", "elapsed", "resync"),
    [
        ({}, 0, 1801),
        ({}, 600, 1201),
        ({api.ANNOTATION_PROGRESS_DEADLINE: "30"}, 30, 1),
        ({api.ANNOTATION_PROGRESS_DEADLINE: "30"}, 31, None),
        ({api.ANNOTATION_PROGRESS_DEADLINE: "0"}, 0, None),
        ({**PAUSED, api.ANNOTATION_PROGRESS_DEADLINE: "30"}, 0, None),
    ],
    ids=["fresh", "stalled", "last-second", "exceeded", "off", "paused"],
)
def test_a_waiting_rollout_resyncs_when_its_deadline_passes(
    annotations: dict[str, str], elapsed: int, resync: int | None
) -> None:
    verdict = judge(parent(rollout=recorded(), annotations=annotations), now=_at(elapsed))
    control = controls.control_of(annotations)
    assert progress.resync_after(control, verdict, now=_at(elapsed)) == resync


def test_no_rollout_no_resync() -> None:
    nothing = progress.Verdict(rollout=None, progressing=None)
    assert progress.resync_after(controls.control_of({}), nothing, now=T0) is None


@pytest.mark.parametrize("deadline", [1, 30, 600, 1800])
@pytest.mark.parametrize("elapsed", [0, 1, 29, 300])
def test_the_resync_lands_on_the_first_second_past_the_deadline(
    deadline: int, elapsed: int
) -> None:
    annotations = {api.ANNOTATION_PROGRESS_DEADLINE: str(deadline)}
    the_parent = parent(rollout=recorded(), annotations=annotations)
    verdict = judge(the_parent, now=_at(elapsed))
    wait = progress.resync_after(controls.control_of(annotations), verdict, now=_at(elapsed))
    if elapsed > deadline:
        assert wait is None
        return
    assert wait is not None
    assert judge(the_parent, now=_at(elapsed + wait - 1)).progressing is None
    late = judge(the_parent, now=_at(elapsed + wait)).progressing
    assert late is not None and late.reason == api.Reason.PROGRESS_DEADLINE_EXCEEDED


# --- pausing ----------------------------------------------------------------------------------


def test_paused_progressing_is_unknown_and_the_deadline_does_not_count() -> None:
    verdict = judge(parent(rollout=recorded(), annotations=PAUSED), now="2026-12-29T12:00:00Z")
    assert verdict.progressing is not None
    assert (verdict.progressing.status, verdict.progressing.reason) == (
        api.ConditionStatus.UNKNOWN,
        "RolloutPaused",
    )
    assert verdict.rollout is not None
    assert verdict.rollout.last_progress_time == T0  # unchanged: no status write while paused


def test_resuming_restarts_the_clock() -> None:
    verdict = judge(
        parent(rollout=recorded(), progressing_reason="RolloutPaused"),
        now="2026-12-29T12:00:00Z",
    )
    assert verdict.rollout is not None
    assert verdict.rollout.last_progress_time == "2026-12-29T12:00:00Z"
    assert verdict.progressing is None


def test_a_paused_steady_set_still_says_paused() -> None:
    verdict = judge(parent(annotations=PAUSED), now=T0, rolling=False)
    assert verdict.rollout is None
    assert verdict.progressing is not None
    assert verdict.progressing.reason == "RolloutPaused"
