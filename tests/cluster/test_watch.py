"""`kube.Watch`, the fake LWS controller and `kube.wait_for` against what an API server may do,
without a control plane: a scripted server on 127.0.0.1 (`tests.cluster.fakeapi`).

Regression tests for issue 17, item 10: an ERROR event (a Status object) reached the fake LWS
controller's callback, which crashed on `lws["metadata"]["namespace"]`; the watch thread died and
every later test waited for an Available that never came.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any, Final

import pytest

from tests.cluster.fakeapi import (
    Answer,
    Cut,
    Drop,
    FakeApiServer,
    Send,
    Silence,
    bookmark,
    expired,
    listing,
    lws,
    serving,
)
from tools.sandbox import kube
from tools.sandbox.lws import FakeLwsController

JsonObject = dict[str, Any]

# Generous: the machine may be loaded. A passing test waits only as long as the watch needs.
WAIT_SECONDS: Final = 20
FAST_BACKOFF: Final = (0.01, 0.05)


class Recorder:
    """Every event a watch delivers, as (type, name, resourceVersion)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.events: list[tuple[str, str, str]] = []

    def __call__(self, event: JsonObject) -> None:
        metadata = event["object"]["metadata"]
        with self._lock:
            self.events.append((event["type"], metadata["name"], metadata["resourceVersion"]))

    def seen(self) -> list[tuple[str, str, str]]:
        with self._lock:
            return list(self.events)


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


def _watch(
    server: FakeApiServer, on_event: Any, *, read_timeout: float = 30.0, initial: bool = True
) -> kube.Watch:
    return kube.Watch(
        server.client(),
        kube.LWS,
        on_event,
        initial_events=initial,
        window_seconds=1,
        read_timeout=read_timeout,
        backoff=FAST_BACKOFF,
    )


@pytest.fixture
def watching() -> Iterator[list[kube.Watch]]:
    """Watches a test starts; stopped (and checked for callback failures) afterwards."""
    watches: list[kube.Watch] = []
    yield watches
    for watch in watches:
        watch.stop()


def _wait_events(recorder: Recorder, count: int) -> list[tuple[str, str, str]]:
    seen: list[tuple[str, str, str]] = kube.wait_for(
        recorder.seen,
        until=lambda events: len(events) >= count,
        timeout=WAIT_SECONDS,
        message=f"{count} events",
    )
    return seen


def _wait_watch_requests(server: FakeApiServer, count: int) -> list[str]:
    """The resourceVersion of the first `count` watch requests, once there are as many."""
    versions: list[str] = kube.wait_for(
        lambda: [r.params["resourceVersion"] for r in server.watch_requests()],
        until=lambda versions: len(versions) >= count,
        timeout=WAIT_SECONDS,
        message=f"{count} watch requests",
    )
    return versions[:count]


def _modified(name: str, version: str, **changes: Any) -> Send:
    return Send({"type": "MODIFIED", "object": lws(name, version=version, **changes)})


def test_the_initial_list_arrives_as_added_before_the_constructor_returns(
    recorder: Recorder, watching: list[kube.Watch]
) -> None:
    with serving(
        listings=[listing("5", lws("a", version="3"), lws("b", version="4"))], watches=[]
    ) as server:
        watch = _watch(server, recorder)
        watching.append(watch)
        # Before the constructor returned: no waiting here.
        assert recorder.seen() == [("ADDED", "a", "3"), ("ADDED", "b", "4")]
        assert [obj["metadata"]["name"] for obj in watch.initial] == ["a", "b"]
        assert _wait_watch_requests(server, 1)[0] == "5"
        request = server.watch_requests()[0]
        assert request.params["allowWatchBookmarks"] == "true"
        assert request.params["timeoutSeconds"] == "1"


def test_initial_events_can_be_left_out(recorder: Recorder, watching: list[kube.Watch]) -> None:
    with serving(
        listings=[listing("5", lws("a", version="3"))], watches=[[_modified("a", "6")]]
    ) as server:
        watching.append(_watch(server, recorder, initial=False))
        assert _wait_events(recorder, 1) == [("MODIFIED", "a", "6")]


def test_an_error_event_relists_and_delivers_what_changed_meanwhile(
    recorder: Recorder, watching: list[kube.Watch]
) -> None:
    """The incident's ERROR event: the callback never sees it, and nothing is missed. While the
    watch was broken, `a` changed, `b` was deleted and `c` created; only the new list says so."""
    first = listing("5", lws("a", version="3"), lws("b", version="4"))
    second = listing("20", lws("a", version="12"), lws("c", version="15"))
    with serving(
        listings=[first, second], watches=[[_modified("a", "6"), Send(expired("6"))]]
    ) as server:
        watch = _watch(server, recorder)
        watching.append(watch)
        events = _wait_events(recorder, 6)
        assert events == [
            ("ADDED", "a", "3"),
            ("ADDED", "b", "4"),
            ("MODIFIED", "a", "6"),
            ("DELETED", "b", "4"),
            ("MODIFIED", "a", "12"),
            ("ADDED", "c", "15"),
        ]
        assert _wait_watch_requests(server, 2) == ["5", "20"]
        assert len(server.list_requests()) == 2
        assert watch.counts().lists == 2
        assert "ERROR event 410" in watch.summary()
        watch.check()


def test_an_error_event_that_is_not_410_relists_too(
    recorder: Recorder, watching: list[kube.Watch]
) -> None:
    internal = {"type": "ERROR", "object": {"kind": "Status", "code": 500, "message": "boom"}}
    with serving(
        listings=[listing("5"), listing("9", lws("a", version="8"))], watches=[[Send(internal)]]
    ) as server:
        watching.append(_watch(server, recorder))
        assert _wait_events(recorder, 1) == [("ADDED", "a", "8")]
        assert _wait_watch_requests(server, 2) == ["5", "9"]


def test_a_410_answer_relists(recorder: Recorder, watching: list[kube.Watch]) -> None:
    gone = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}
    with serving(
        listings=[listing("5", lws("a", version="3")), listing("9", lws("a", version="7"))],
        watches=[[Answer(410, gone)]],
    ) as server:
        watching.append(_watch(server, recorder))
        assert _wait_events(recorder, 2) == [("ADDED", "a", "3"), ("MODIFIED", "a", "7")]
        assert _wait_watch_requests(server, 2) == ["5", "9"]


def test_a_stream_cut_short_rewatches_from_the_last_event_without_a_relist(
    recorder: Recorder, watching: list[kube.Watch]
) -> None:
    with serving(
        listings=[listing("5", lws("a", version="3"))],
        watches=[[_modified("a", "6"), Cut()], [_modified("a", "8")]],
    ) as server:
        watching.append(_watch(server, recorder))
        assert _wait_events(recorder, 3)[1:] == [("MODIFIED", "a", "6"), ("MODIFIED", "a", "8")]
        assert _wait_watch_requests(server, 3) == ["5", "6", "8"]
        assert len(server.list_requests()) == 1


def test_a_window_that_ends_rewatches_from_the_last_bookmark(
    recorder: Recorder, watching: list[kube.Watch]
) -> None:
    """Bookmarks move the resourceVersion on and never reach the callback."""
    with serving(
        listings=[listing("5", lws("a", version="3"))],
        watches=[[_modified("a", "6"), Send(bookmark("40"))]],
    ) as server:
        watching.append(_watch(server, recorder))
        assert _wait_watch_requests(server, 2) == ["5", "40"]
        assert recorder.seen() == [("ADDED", "a", "3"), ("MODIFIED", "a", "6")]
        assert len(server.list_requests()) == 1


def test_a_silent_stream_times_out_and_rewatches(
    recorder: Recorder, watching: list[kube.Watch]
) -> None:
    with serving(
        listings=[listing("5", lws("a", version="3"))],
        watches=[[_modified("a", "6"), Silence()], [_modified("a", "7")]],
    ) as server:
        watch = _watch(server, recorder, read_timeout=0.3)
        watching.append(watch)
        assert _wait_events(recorder, 3)[2] == ("MODIFIED", "a", "7")
        assert _wait_watch_requests(server, 2) == ["5", "6"]
        assert "retry after" in watch.summary()


def test_a_dropped_connection_and_an_error_answer_are_retried_from_the_same_version(
    recorder: Recorder, watching: list[kube.Watch]
) -> None:
    unavailable = {"kind": "Status", "code": 503, "message": "try later"}
    with serving(
        listings=[listing("5", lws("a", version="3"))],
        watches=[[Drop()], [Answer(503, unavailable)], [Answer(429)], [_modified("a", "6")]],
    ) as server:
        watching.append(_watch(server, recorder))
        assert _wait_events(recorder, 2)[1] == ("MODIFIED", "a", "6")
        assert _wait_watch_requests(server, 5) == ["5", "5", "5", "5", "6"]
        assert len(server.list_requests()) == 1


def test_a_rewatch_that_meets_410_relists(recorder: Recorder, watching: list[kube.Watch]) -> None:
    """A stream cut short, then the resourceVersion it had reached has expired meanwhile."""
    with serving(
        listings=[listing("5", lws("a", version="3")), listing("30", lws("a", version="25"))],
        watches=[[_modified("a", "6"), Cut()], [Send(expired("6"))]],
    ) as server:
        watching.append(_watch(server, recorder))
        assert _wait_events(recorder, 3)[1:] == [("MODIFIED", "a", "6"), ("MODIFIED", "a", "25")]
        assert _wait_watch_requests(server, 3) == ["5", "6", "30"]


@pytest.mark.parametrize(
    "line",
    [
        pytest.param({"type": "SURPRISE", "object": {"metadata": {}}}, id="unknown-type"),
        pytest.param({"type": "MODIFIED", "object": "not an object"}, id="object-not-a-dict"),
        pytest.param({"type": "MODIFIED"}, id="no-object"),
    ],
)
def test_an_event_it_cannot_use_relists(
    recorder: Recorder, watching: list[kube.Watch], line: JsonObject
) -> None:
    with serving(
        listings=[listing("5", lws("a", version="3")), listing("9", lws("a", version="8"))],
        watches=[[Send(line)]],
    ) as server:
        watching.append(_watch(server, recorder))
        assert _wait_events(recorder, 2) == [("ADDED", "a", "3"), ("MODIFIED", "a", "8")]


def test_an_object_replaced_under_the_same_name_is_deleted_then_added(
    recorder: Recorder, watching: list[kube.Watch]
) -> None:
    with serving(
        listings=[
            listing("5", lws("a", version="3")),
            listing("9", lws("a", version="8", uid="uid-2")),
        ],
        watches=[[Send(expired())]],
    ) as server:
        watching.append(_watch(server, recorder))
        assert _wait_events(recorder, 3) == [
            ("ADDED", "a", "3"),
            ("DELETED", "a", "3"),
            ("ADDED", "a", "8"),
        ]


def test_an_unchanged_object_is_not_delivered_again_after_a_relist(
    recorder: Recorder, watching: list[kube.Watch]
) -> None:
    same = listing("9", lws("a", version="3"), lws("b", version="9"))
    with serving(
        listings=[listing("5", lws("a", version="3")), same], watches=[[Send(expired())]]
    ) as server:
        watching.append(_watch(server, recorder))
        assert _wait_events(recorder, 2) == [("ADDED", "a", "3"), ("ADDED", "b", "9")]
        _wait_watch_requests(server, 2)
        assert recorder.seen() == [("ADDED", "a", "3"), ("ADDED", "b", "9")]


def test_a_callback_that_raises_is_recorded_and_the_watch_goes_on(
    recorder: Recorder, watching: list[kube.Watch]
) -> None:
    def on_event(event: JsonObject) -> None:
        if event["object"]["metadata"]["resourceVersion"] == "6":
            raise KeyError("namespace")
        recorder(event)

    with serving(
        listings=[listing("5", lws("a", version="3"))],
        watches=[[_modified("a", "6"), _modified("a", "7")]],
    ) as server:
        watch = _watch(server, on_event)
        watching.append(watch)
        assert _wait_events(recorder, 2) == [("ADDED", "a", "3"), ("MODIFIED", "a", "7")]
        assert len(watch.failures) == 1
        assert "KeyError: 'namespace'" in watch.failures[0]
        with pytest.raises(AssertionError, match="failed 1 time"):
            watch.check()


def test_stop_ends_the_thread_within_a_window(recorder: Recorder) -> None:
    with serving(listings=[listing("5")], watches=[]) as server:
        watch = _watch(server, recorder)
        _wait_watch_requests(server, 1)
        watch.stop()
        assert not watch.is_alive()


# --- the fake LWS controller ----------------------------------------------------------------


def _controller(server: FakeApiServer) -> FakeLwsController:
    return FakeLwsController(server.client(), watch_window_seconds=1)


@pytest.mark.parametrize(
    "event",
    [
        pytest.param(expired(), id="error-status"),
        pytest.param({"type": "BOOKMARK", "object": {"metadata": {}}}, id="bookmark"),
        pytest.param({"type": "MODIFIED", "object": None}, id="no-object"),
        pytest.param({"type": "ADDED", "object": {"metadata": {"name": "x"}}}, id="no-namespace"),
        pytest.param({}, id="empty"),
    ],
)
def test_the_fake_lws_controller_ignores_events_that_are_not_about_an_lws(
    event: JsonObject,
) -> None:
    """The incident's crash, called directly: an ERROR event with a Status object."""
    controller = FakeLwsController(kube.Client(server="http://127.0.0.1:9", token="", ca_file=""))
    controller._on_event(event)
    assert len(controller.ignored) == 1
    assert controller.failures() == []


def test_the_fake_lws_controller_makes_ready_an_lws_it_sees_only_in_a_relist() -> None:
    """`b` appears while the watch is broken (an ERROR event): the relist brings it, and its
    status is written."""
    with serving(
        listings=[listing("5"), listing("9", lws("b", version="8", replicas=3))],
        watches=[[Send(expired("5"))]],
    ) as server:
        controller = _controller(server)
        controller.start()
        try:
            (patch,) = kube.wait_for(server.patches, timeout=WAIT_SECONDS, message="a status write")
        finally:
            controller.stop()
        assert patch.path == kube.LWS.path(namespace="ns", name="b") + "/status"
        assert patch.body == {
            "status": {
                "replicas": 3,
                "readyReplicas": 3,
                "updatedReplicas": 3,
                "observedGeneration": 1,
            }
        }
        assert controller.failures() == []


def test_the_fake_lws_controller_retries_a_write_that_failed_transiently() -> None:
    with serving(listings=[listing("5", lws("a", version="3"))], watches=[]) as server:
        server.patch_codes = [500, 503]
        controller = _controller(server)
        controller.start()
        try:
            kube.wait_for(
                server.patches,
                until=lambda patches: len(patches) >= 3,
                timeout=WAIT_SECONDS,
                message="a status write that succeeds",
            )
        finally:
            controller.stop()
        assert controller.retried_writes == 2
        assert controller.failures() == []


def test_the_fake_lws_controller_reports_a_write_that_cannot_succeed() -> None:
    with serving(listings=[listing("5", lws("a", version="3"))], watches=[]) as server:
        server.patch_codes = [422]
        controller = _controller(server)
        controller.start()
        try:
            kube.wait_for(controller.failures, timeout=WAIT_SECONDS, message="a failure")
        finally:
            controller.stop()
        (failure,) = controller.failures()
        assert failure.startswith("ns/a: 422")


def test_the_fake_lws_controller_survives_a_bug_and_reports_it() -> None:
    """An LWS without `metadata.generation` breaks `ready_status` in the watch's callback: the
    failure is recorded and the next LWS is still made ready."""
    broken = lws("a", version="3")
    del broken["metadata"]["generation"]
    with serving(listings=[listing("5", broken, lws("b", version="4"))], watches=[]) as server:
        controller = _controller(server)
        controller.start()
        try:
            (patch,) = kube.wait_for(server.patches, timeout=WAIT_SECONDS, message="b's write")
            kube.wait_for(controller.failures, timeout=WAIT_SECONDS, message="a's failure")
        finally:
            controller.stop()
        assert patch.path.endswith("/b/status")
        (failure,) = controller.failures()
        assert "KeyError: 'generation'" in failure


# --- wait_for --------------------------------------------------------------------------------


def test_a_wait_that_times_out_says_what_it_last_saw() -> None:
    ds = {
        "kind": "DisaggregatedSet",
        "metadata": {"name": "llm", "namespace": "ns", "generation": 2},
        "spec": {"roles": ["a long template"]},
        "status": {"conditions": [{"type": "Available", "status": "False"}]},
    }
    with pytest.raises(AssertionError) as raised:
        kube.wait_for(lambda: ds, until=lambda _: False, timeout=0, message="ns/llm Available")
    message = str(raised.value)
    assert message.startswith("timed out after 0 s waiting for ns/llm Available; last saw: ")
    assert '"status": {"conditions": [{"status": "False", "type": "Available"}]}' in message
    assert '"name": "ns/llm"' in message
    assert "a long template" not in message


def test_a_wait_on_a_number_says_its_last_value() -> None:
    with pytest.raises(AssertionError, match=r"last saw: 3$"):
        kube.wait_for(lambda: 3, until=lambda n: n >= 5, timeout=0, message="five retries")


def test_a_wait_counts_a_transient_failure_as_not_yet() -> None:
    answers: list[Any] = [ConnectionRefusedError("refused"), kube.ApiError(503, {}), "done"]

    def poll() -> Any:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert kube.wait_for(poll, timeout=WAIT_SECONDS, message="done", interval=0) == "done"


def test_a_wait_that_only_failed_says_how() -> None:
    def poll() -> None:
        raise ConnectionRefusedError("refused")

    with pytest.raises(AssertionError, match="last saw: ConnectionRefusedError: refused"):
        kube.wait_for(poll, timeout=0, message="anything")


def test_a_wait_raises_a_failure_that_is_not_transient_at_once() -> None:
    def poll() -> None:
        raise kube.ApiError(404, {"message": "not found"})

    with pytest.raises(kube.ApiError, match="404"):
        kube.wait_for(poll, timeout=WAIT_SECONDS, message="anything")
