"""Pausing and the progress deadline (`hooks.core.progress`), with an explicit `now`."""

from __future__ import annotations

import pytest

from hooks import api
from hooks.api import limits
from hooks.core import controls, progress, records, rollout
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
    available = records.ObservedCondition("Available", "False", T0, "RolloutInProgress", "", 1)
    return records.Parent(
        name="llm",
        namespace="default",
        uid="u",
        generation=1,
        spec=None,
        spec_violations=(),
        status={},
        conditions=(available, condition),
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
        ({api.ANNOTATION_PAUSED: "yes"}, True, 1800, 1),
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


# --- a set coming up (issue 35 item 5) ---------------------------------------------------------


def _coming_up(the_parent: records.Parent, *, now: str, stepped: bool) -> progress.Verdict:
    return progress.judge(
        control=controls.control_of(the_parent.annotations),
        rolling=False,
        stepped=stepped,
        coming_up=True,
        revision=REV,
        new_lws=(lws("prefill", replicas=2, ready=1),),
        parent=the_parent,
        now=now,
    )


def test_a_set_whose_lws_were_created_starts_the_deadline() -> None:
    verdict = _coming_up(parent(), now=T0, stepped=True)
    assert verdict.rollout is not None and verdict.rollout.last_progress_time == T0
    assert verdict.deadline_counts
    assert progress.resync_after(controls.control_of({}), verdict, now=T0) == 1801


def test_a_set_coming_up_keeps_its_record_and_exceeds_its_deadline() -> None:
    the_parent = parent(rollout=recorded())
    assert _coming_up(the_parent, now=_at(1800), stepped=False).progressing is None
    late = _coming_up(the_parent, now=_at(1801), stepped=False)
    assert late.rollout is not None and late.rollout.last_progress_time == T0
    assert late.progressing is not None
    assert late.progressing.reason == api.Reason.PROGRESS_DEADLINE_EXCEEDED
    assert "prefill llm-0-bbbbbbbb-prefill (1/2 ready)" in late.progressing.message


def test_a_set_read_before_its_first_status_starts_the_deadline() -> None:
    """Metacontroller's cache may hand a sync the set without the status of the pass that
    created its LWS: no Available condition yet is a first pass."""
    bare = records.Parent(
        name="llm",
        namespace="default",
        uid="u",
        generation=1,
        spec=None,
        spec_violations=(),
        status={},
        conditions=(),
        annotations={},
        rollout=None,
    )
    verdict = _coming_up(bare, now=_at(10), stepped=False)
    assert verdict.rollout is not None and verdict.rollout.last_progress_time == _at(10)
    assert verdict.deadline_counts


@pytest.mark.parametrize(
    "rollout", [None, records.ObservedRollout("aaaaaaaa", T0, 0, 0)], ids=["none", "another"]
)
def test_a_set_with_no_record_of_its_revision_that_lost_a_group_has_no_deadline(
    rollout: records.ObservedRollout | None,
) -> None:
    verdict = _coming_up(parent(rollout=rollout), now=_at(5000), stepped=False)
    assert (verdict.rollout, verdict.progressing, verdict.deadline_counts) == (None, None, False)


def test_a_paused_set_coming_up_does_not_count_its_deadline() -> None:
    verdict = _coming_up(
        parent(rollout=recorded(), annotations=PAUSED), now=_at(5000), stepped=False
    )
    assert verdict.progressing is not None and verdict.progressing.reason == "RolloutPaused"
    assert not verdict.deadline_counts


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


# --- what the hook reads back from its own status is untrusted (issue 17, items 1 and 5) -------


def test_a_stalled_rollout_of_hundreds_of_long_names_writes_a_message_that_fits() -> None:
    """Regression (issue 17, item 1): the message listed every lagging LWS, so about 260 long names
    made the condition too long for the API and every sync of the set answered 500."""
    set_name = "s" * 40
    stuck = tuple(
        records_of(
            builders.make_lws(
                f"role-{index:03d}-" + "x" * 40,
                revision=REV,
                replicas=2,
                ready=1,
                set_name=set_name,
                slice_index=index % 100,
            )
        )
        for index in range(600)
    )
    verdict = judge(
        parent(
            rollout=recorded(ready=600, updated=1200),
            annotations={api.ANNOTATION_PROGRESS_DEADLINE: "600"},
        ),
        now="2026-11-29T12:10:01Z",
        new=stuck,
    )
    assert verdict.progressing is not None
    message = verdict.progressing.message
    assert len(message) <= limits.CONDITION_MESSAGE_MAX_LENGTH
    assert message.endswith("; and 595 more")
    api.Condition(
        type="Progressing",
        status="False",
        reason=verdict.progressing.reason,
        message=message,
        lastTransitionTime=T0,
    )  # the model the status is written with accepts it


def records_of(lws_object: dict[str, object]) -> records.ObservedObject:
    (item,) = builders.parse_children(lws_object)
    return item


def test_a_progress_time_ahead_of_now_restarts_the_clock() -> None:
    """Regression (issue 17, item 5): a lastProgressTime in year 9999 silenced the deadline, was
    written back unchanged and asked for a resync beyond Go's time.Duration."""
    deadline = {api.ANNOTATION_PROGRESS_DEADLINE: "600"}
    now = "2026-11-29T12:10:01Z"
    verdict = judge(
        parent(rollout=recorded("9999-12-31T23:59:59Z"), annotations=deadline),
        now=now,
        new=(lws("p", replicas=2, ready=1),),
    )
    assert verdict.rollout is not None
    assert verdict.rollout.last_progress_time == now
    assert progress.resync_after(controls.control_of(deadline), verdict, now=now) == 601


@pytest.mark.parametrize(
    "time",
    [
        "2026-02-31T00:00:00Z",
        "2026-01-01T00:00:00+99:99",
        "2026-01-01T00:00:60Z",
        "\uff12\uff10\uff12\uff16-01-01T00:00:00Z",  # full-width digits
        "2026-01-01T00:00:00." + "1" * 40_000 + "Z",
        "yesterday",
    ],
    ids=["feb-31", "offset", "second-60", "full-width", "long-fraction", "words"],
)
def test_a_progress_time_that_is_no_time_restarts_the_clock(time: str) -> None:
    """Regression (issue 17, item 5): impossible or unparsable times were carried forward
    silently, and a 40,000-digit fraction answered 500."""
    now = "2026-11-29T12:10:01Z"
    verdict = judge(parent(rollout=recorded(time)), now=now, new=(lws("p", replicas=2, ready=1),))
    assert verdict.rollout is not None
    assert verdict.rollout.last_progress_time == now


def test_an_impossibly_high_ready_count_is_lowered_so_later_rises_still_count() -> None:
    """Regression (issue 17, item 5): a readyReplicas of 2^63-1 was kept, after which rising
    readiness no longer counted as progress."""
    huge = 2**63 - 1
    first = judge(
        parent(rollout=recorded(ready=huge, updated=huge)),
        now="2026-11-29T12:05:00Z",
        new=(lws("p", replicas=2, ready=1),),
    )
    assert first.rollout is not None
    assert (first.rollout.ready_replicas, first.rollout.updated_replicas) == (2, 2)
    kept = records.ObservedRollout(
        revision=REV,
        last_progress_time=first.rollout.last_progress_time,
        ready_replicas=first.rollout.ready_replicas,
        updated_replicas=first.rollout.updated_replicas,
    )
    grown = judge(
        parent(rollout=kept),
        now="2026-11-29T12:20:00Z",
        new=(lws("p", replicas=4, ready=3),),
    )
    assert grown.rollout is not None
    assert grown.rollout.last_progress_time == "2026-11-29T12:20:00Z"


def test_every_resync_the_deadline_asks_for_is_bounded() -> None:
    """Regression (issue 17, item 5): the resync is what Metacontroller converts to a Go
    time.Duration; however long the deadline, the hook asks for at most MAX_RESYNC_SECONDS."""
    longest = {api.ANNOTATION_PROGRESS_DEADLINE: str(30 * 86400)}
    verdict = judge(parent(rollout=recorded(), annotations=longest), now=T0)
    resync = progress.resync_after(controls.control_of(longest), verdict, now=T0)
    assert resync == limits.MAX_RESYNC_SECONDS


def test_the_scaling_note_of_the_largest_set_fits_a_condition_message() -> None:
    # 10 roles of the longest names x 100 slices, each slice's record forged to its own value
    # and every slice waiting: the note lists a few of each and counts the rest.
    roles = [f"r{index}" + "x" * (limits.ROLE_NAME_MAX_LENGTH - 2) for index in range(10)]
    plans = [
        rollout.SlicePlan(
            slice_index=index,
            phase=rollout.Phase.STEPPING,
            replicas={},
            moved=tuple(
                rollout.TargetMove(role=role, recorded=2**31 - 1 - index, target=2**31 - 1)
                for role in roles
            ),
            waits=tuple(f"{role}: its new groups are not Ready" for role in roles),
        )
        for index in range(limits.MAX_SLICES)
    ]
    note = progress.scaling_note(plans)
    assert note.startswith("target changed during the rollout: r0")
    assert "and 995 more" in note
    assert len(note) < limits.CONDITION_MESSAGE_MAX_LENGTH // 2  # room for the rest of it
