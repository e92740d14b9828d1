"""Children asked for that never appear (`hooks.core.creations`), with an explicit `now`."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hooks import api
from hooks.api import times
from hooks.core import creations, desired

T0 = "2026-11-29T12:00:00Z"
LWS = (api.LWS_KIND, "llm-0-aaaaaaaa-prefill")
REVISION = (api.REVISION_KIND, "llm-aaaaaaaa")
SERVICE = (api.SERVICE_KIND, "llm-0-aaaaaaaa-prefill-prv")


def later(seconds: int) -> str:
    start = times.parse(T0)
    assert start is not None
    return times.format_utc(start.seconds + seconds)


def test_the_pass_that_first_asks_for_a_child_records_nothing_and_asks_for_no_sync() -> None:
    """Its creation is an event that syncs the set: a child that appears costs nothing."""
    awaited = creations.track([LWS, REVISION], {}, asked_before=False, now=T0)
    assert awaited == creations.Creations(
        record=(), missing=frozenset(), problems=(), resync_after=None
    )


def test_a_child_an_earlier_pass_asked_for_is_recorded_and_looked_at_after_the_grace() -> None:
    awaited = creations.track([LWS], {}, asked_before=True, now=T0)
    assert awaited.record == (api.CreatingChild(kind=LWS[0], name=LWS[1], since=T0),)
    assert not awaited.problems and not awaited.missing
    assert awaited.resync_after == api.CREATION_GRACE_SECONDS


def test_a_recorded_child_keeps_its_time_and_waits_out_the_rest_of_its_grace() -> None:
    for asked_before in (True, False):  # a spec edit meanwhile keeps the record of a child
        awaited = creations.track([LWS], {LWS: T0}, asked_before=asked_before, now=later(10))
        assert awaited.record[0].since == T0
        assert not awaited.problems
        assert awaited.resync_after == api.CREATION_GRACE_SECONDS - 10


def test_issue25_item7_a_child_missing_past_its_grace_is_not_created_naming_it() -> None:
    """The hook sees no holder (none is a related object): the reason says what is known, and
    the message where an operator can find out which."""
    awaited = creations.track(
        [LWS, REVISION], {LWS: T0}, asked_before=True, now=later(api.CREATION_GRACE_SECONDS)
    )
    assert awaited.missing == {LWS}
    (problem,) = awaited.problems
    assert problem.reason is api.Reason.CHILD_NOT_CREATED
    assert LWS[1] in problem.message and f"since {T0}" in problem.message
    for pointer in ("SyncError event", f"kubectl get {LWS[0]} {LWS[1]}", "already exists"):
        assert pointer in problem.message
    assert "events say why" not in problem.message
    # The message stays the same on later passes, so a set that stays blocked is not rewritten.
    again = creations.track([LWS], {LWS: T0}, asked_before=True, now=later(10 * 60))
    assert again.problems == awaited.problems
    assert [entry.name for entry in awaited.record] == [REVISION[1], LWS[1]]  # by kind, name
    # The DisaggregatedSetRevision's grace starts now; the missing LWS is looked at again as often.
    assert awaited.resync_after == api.CREATION_GRACE_SECONDS


def test_issue33_item1_the_message_says_what_adopt_checks_before_it_hands_a_child_over() -> None:
    """Regression: the message told the operator to hand over whatever held the name with
    `kubectl ds adopt <set> --orphans`, which adopted a planted LWS of any template."""
    awaited = creations.track([LWS], {LWS: T0}, asked_before=True, now=later(60))
    (problem,) = awaited.problems
    assert "`kubectl ds adopt <set> --orphans` hands it over, but only when it has no owner" in (
        problem.message
    )
    assert "every template its revision's): it refuses anything else" in problem.message


def test_a_child_that_appeared_leaves_the_record() -> None:
    awaited = creations.track([], {LWS: T0}, asked_before=True, now=later(5))
    assert awaited.record == () and awaited.resync_after is None and not awaited.problems


def test_services_are_never_recorded() -> None:
    """They are asked for when their revision becomes ready, in any pass."""
    awaited = creations.track([SERVICE], {SERVICE: T0}, asked_before=True, now=later(3600))
    assert awaited.record == () and not awaited.problems and awaited.resync_after is None


def test_a_recorded_time_that_is_no_time_or_lies_ahead_starts_the_grace_anew() -> None:
    for since in ("yesterday", later(3600)):
        awaited = creations.track([LWS], {LWS: since}, asked_before=True, now=T0)
        assert awaited.record[0].since == T0
        assert not awaited.problems


@given(
    requested=st.sets(st.sampled_from([LWS, SERVICE, REVISION])),
    ages=st.dictionaries(
        st.sampled_from([LWS, SERVICE, REVISION]), st.integers(min_value=-100, max_value=10_000)
    ),
    asked_before=st.booleans(),
    elapsed=st.integers(min_value=0, max_value=10_000),
)
def test_the_record_holds_only_requested_children_and_every_wait_is_bounded(
    requested: set[desired.ChildKey],
    ages: dict[desired.ChildKey, int],
    asked_before: bool,
    elapsed: int,
) -> None:
    now = later(elapsed)
    recorded = {key: later(elapsed - age) for key, age in ages.items()}
    awaited = creations.track(requested, recorded, asked_before=asked_before, now=now)
    kept = {(entry.kind, entry.name) for entry in awaited.record}
    tracked = {key for key in requested if key[0] in creations.TRACKED_KINDS}
    assert kept <= tracked
    if asked_before:
        assert kept == tracked
    assert awaited.missing <= kept and len(awaited.problems) == len(awaited.missing)
    for entry in awaited.record:
        age = times.seconds_between(entry.since, now)
        assert age is not None and age >= 0
    if kept:
        assert awaited.resync_after is not None
        assert 1 <= awaited.resync_after <= api.CREATION_GRACE_SECONDS
    else:
        assert awaited.resync_after is None
