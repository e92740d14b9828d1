"""Request bodies within limits (`hooks.server.bodies`): reading, the bytes held, the call bounded.

The streams here stand in for werkzeug's wrapper of gunicorn's body reader: they return pieces,
raise what the transport raises, or wait (on gevent's loop, as a socket of the worker does).
Calls on large bodies run in real child processes.
"""

from __future__ import annotations

import gc
import itertools
import os
import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import gevent
import gevent.event
import pytest
from gunicorn.http import errors as http_errors
from werkzeug.exceptions import ClientDisconnected

from hooks.server import bodies, isolation, settings
from hooks.server.settings import MIB, Limits

PIECE = settings.BODY_READ_PIECE_BYTES
DEFAULT_LIMITS = Limits()


class Pieces:
    """A body stream: the given pieces, one per read, then `after` (raised, or b"" when None).

    `on_read` is called before each read (to look at what is held, or to wait)."""

    def __init__(
        self,
        pieces: Sequence[bytes],
        *,
        after: BaseException | None = None,
        on_read: Callable[[], None] = lambda: None,
    ) -> None:
        self._pieces = list(pieces)
        self._after = after
        self._on_read = on_read
        self.sizes: list[int] = []

    def read(self, size: int = -1, /) -> bytes:
        self.sizes.append(size)
        self._on_read()
        if self._pieces:
            return self._pieces.pop(0)
        if self._after is not None:
            raise self._after
        return b""


def read(
    stream: bodies.Stream,
    *,
    limits: Limits = DEFAULT_LIMITS,
    buffered: bodies.BufferedBodies | None = None,
) -> tuple[bytearray, int]:
    return bodies.read(
        stream,
        declared=None,
        limits=limits,
        buffered=buffered or bodies.BufferedBodies(limits.buffered_bytes),
    )


# --- reading -------------------------------------------------------------------------------------


def test_a_body_is_read_in_pieces_of_at_most_64_kib() -> None:
    stream = Pieces([b"{", b'"a"', b": 1}"])

    body, _ = read(stream)

    assert bytes(body) == b'{"a": 1}'
    assert set(stream.sizes) == {PIECE}


def test_every_piece_is_counted_as_it_arrives_not_when_the_body_is_complete() -> None:
    """Regression (issue 17, item 4): only complete 1 MiB chunks were counted, so 750
    connections each holding part of a body took the worker to 1.5 GiB without a 503."""
    buffered = bodies.BufferedBodies(10 * MIB)
    seen: list[int] = []
    stream = Pieces([b"x" * PIECE] * 4, on_read=lambda: seen.append(buffered.held))

    _, held = read(stream, buffered=buffered)

    assert seen[0] == settings.BODY_READ_OVERHEAD_BYTES
    assert all(later > earlier + PIECE - 1 for earlier, later in itertools.pairwise(seen))
    assert buffered.held == held >= 4 * PIECE
    buffered.release(held)
    assert buffered.held == 0


def test_a_partial_body_past_the_budget_is_busy_and_lets_go_of_what_it_held() -> None:
    buffered = bodies.BufferedBodies(settings.BODY_READ_OVERHEAD_BYTES + 3 * PIECE)
    stream = Pieces([b"x" * PIECE] * 10)

    with pytest.raises(bodies.Busy):
        read(stream, buffered=buffered)

    assert buffered.held == 0
    assert len(stream.sizes) < 10  # refused while the body was still arriving


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (TimeoutError("timed out"), bodies.BodyTimeout),
        (http_errors.InvalidChunkSize(b"zz"), bodies.BodyUnreadable),
        (http_errors.ChunkMissingTerminator(b"xx"), bodies.BodyUnreadable),
        (http_errors.NoMoreData(b""), bodies.BodyUnreadable),
        (ConnectionResetError(104, "Connection reset by peer"), bodies.BodyUnreadable),
        (ClientDisconnected(), bodies.BodyUnreadable),
    ],
    ids=["socket-timeout", "bad-chunk-size", "no-chunk-end", "closed-mid-chunk", "reset", "gone"],
)
def test_transport_failures_are_the_clients_errors(
    error: Exception, expected: type[bodies.BodyError]
) -> None:
    """Regression (issue 17, item 6): a malformed chunk or a client gone mid-chunk was a 500."""
    buffered = bodies.BufferedBodies(10 * MIB)

    with pytest.raises(expected):
        read(Pieces([b"{"], after=error), buffered=buffered)

    assert buffered.held == 0


def test_a_failed_read_of_a_body_with_a_length_is_a_timeout_when_the_socket_timed_out() -> None:
    # werkzeug wraps the failed read of a body with a Content-Length as a disconnect.
    try:
        try:
            raise TimeoutError("timed out")
        except TimeoutError:
            raise ClientDisconnected() from None
    except ClientDisconnected as wrapped:
        error = wrapped

    with pytest.raises(bodies.BodyTimeout):
        read(Pieces([], after=error))


def test_the_deadline_covers_the_whole_body_even_while_a_read_waits() -> None:
    """Regression (issue 17, item 3): the deadline was checked only between 1 MiB chunks, so a
    body that stalled before its first chunk was never answered."""

    def stall() -> None:
        # A read that waits on the worker's loop for bytes that never come: only the deadline
        # ends it, however fast or slow the machine.
        gevent.event.Event().wait()

    stream = Pieces([b"{"] * 3, on_read=stall)

    with pytest.raises(bodies.BodyTimeout):
        read(stream, limits=Limits(body_deadline_seconds=0.05))

    assert len(stream.sizes) == 1


def test_reading_lets_other_connections_run_between_pieces() -> None:
    """Regression: a fast upload always has bytes waiting, so its reads never blocked and the
    event loop (and /healthz) waited for the whole upload."""
    ticks: list[int] = []
    ticker = gevent.spawn(lambda: [ticks.append(n) or gevent.sleep(0) for n in range(1000)])

    read(Pieces([b"x" * (MIB // 2)] * 8))  # 4 MiB, always there to read

    ticker.kill()
    assert len(ticks) >= 3  # at least once a MiB


def test_a_body_over_the_limit_is_refused_as_soon_as_it_is_read_past_it() -> None:
    stream = Pieces([b"x" * 10] * 5)

    with pytest.raises(bodies.BodyTooLarge):
        read(stream, limits=Limits(max_body_bytes=25))

    assert len(stream.sizes) == 3


def test_memory_goes_back_to_the_system_once_no_body_is_held() -> None:
    """Regression (issue 17, item 4): 798 MiB stayed resident after 500 partial bodies closed."""
    trims: list[int] = []
    buffered = bodies.BufferedBodies(10 * bodies.TRIM_AFTER_BYTES, trim=trims.append)

    buffered.take(bodies.TRIM_AFTER_BYTES)
    buffered.take(10)
    buffered.release(bodies.TRIM_AFTER_BYTES)
    assert trims == []  # a body is still held
    buffered.release(10)
    assert trims == [0]
    buffered.take(10)
    buffered.release(10)
    assert trims == [0]  # not after every small body


# --- the parse buffer ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [b"0", b'"' + b"a" * 1000 + b'"', b"[" * 500 + b"]" * 500, b'{"a": [1, 2, {"b": 3}]}'],
    ids=["scalar", "string", "nested", "mixed"],
)
def test_the_parse_buffer_touched_is_within_the_buffer_mapped(body: bytes) -> None:
    mapped, touched = isolation.parse_buffer(body)

    assert mapped >= 12 * len(body)
    assert len(body) < touched <= mapped


# --- the call, in this process or a child --------------------------------------------------------


def large(limits: Limits | None = None) -> isolation.Calls:
    """Calls that answer every body over 16 bytes in a child process."""
    return isolation.Calls(limits or Limits(isolate_above_bytes=16, max_parse_bytes=256 * MIB))


BODY = b'{"items": [1, 2, 3], "padding": "' + b"x" * 64 + b'"}'


def test_a_small_body_is_answered_in_this_process_with_the_collector_paused() -> None:
    seen: list[object] = []

    def work(body: object) -> int:
        seen.append(body)
        assert not gc.isenabled()
        return 7

    answered = isolation.Calls(Limits()).answer(bytearray(BODY), work)

    assert answered == (7, None)
    assert seen == [{"items": [1, 2, 3], "padding": "x" * 64}]
    assert gc.isenabled()


def test_a_large_body_is_answered_in_a_child_process() -> None:
    seen: list[int] = []

    def work(body: object) -> tuple[int, object]:
        seen.append(os.getpid())  # in the child's memory only
        return os.getpid(), body

    data = bytearray(BODY)
    (child, body), child_peak = large().answer(data, work)

    assert child != os.getpid()
    assert body == {"items": [1, 2, 3], "padding": "x" * 64}
    assert seen == []
    assert child_peak is not None
    assert 0 <= child_peak < 256 * MIB
    assert data == bytearray()  # let go in this process once the child has it


def test_an_error_in_the_child_is_raised_here_with_the_childs_traceback() -> None:
    def work(body: object) -> None:
        raise KeyError("leaderWorkerTemplate")

    with pytest.raises(KeyError) as raised:
        large().answer(bytearray(BODY), work)

    notes = "\n".join(getattr(raised.value, "__notes__", []))
    assert "in the call's child process" in notes
    assert "raise KeyError" in notes


def test_an_error_that_pickle_cannot_rebuild_arrives_as_a_failure_naming_it() -> None:
    class Odd(Exception):
        def __init__(self, *, reason: str) -> None:
            super().__init__(reason)

    def work(body: object) -> None:
        raise Odd(reason="keyword-only")

    with pytest.raises(isolation.CallFailed, match="Odd"):
        large().answer(bytearray(BODY), work)


def test_invalid_json_in_a_large_body_is_invalid_json() -> None:
    with pytest.raises(bodies.InvalidJson):
        large().answer(bytearray(b"{" * 40), lambda body: None)


def test_a_call_that_needs_more_memory_than_its_budget_is_too_complex() -> None:
    limits = Limits(isolate_above_bytes=16, max_parse_bytes=64 * MIB)

    def work(body: object) -> int:
        return len(bytearray(128 * MIB))

    outcome = isolation.run_in_child(
        bytearray(BODY), work, budget=limits.max_parse_bytes, seconds=30, max_message_bytes=MIB
    )

    assert isinstance(outcome.error, bodies.BodyTooComplex)
    assert outcome.peak_bytes <= limits.max_parse_bytes


def test_a_body_whose_parse_buffer_alone_is_over_budget_is_refused_before_parsing() -> None:
    body = bytearray(b"[" + b"0," * (2 * MIB) + b"0]")

    outcome = isolation.run_in_child(
        body, lambda value: None, budget=8 * MIB, seconds=30, max_message_bytes=MIB
    )

    assert isinstance(outcome.error, bodies.BodyTooComplex)


def _children() -> set[int]:
    """This process's child processes (a zombie, not yet reaped, among them)."""
    pid = os.getpid()
    return {int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}


def test_a_child_still_running_at_the_deadline_is_killed() -> None:
    before = _children()

    def work(body: object) -> None:
        """Never returns: only the deadline ends the call, however fast or slow the machine."""
        while True:
            signal.pause()

    outcome = isolation.run_in_child(
        bytearray(BODY), work, budget=64 * MIB, seconds=0.2, max_message_bytes=MIB
    )

    assert isinstance(outcome.error, isolation.CallTimeout)
    # Killed and reaped, not waited for: the child is gone.
    assert _children() == before


def test_a_child_that_dies_without_an_answer_is_a_failure() -> None:
    def work(body: object) -> None:
        os.kill(os.getpid(), 9)

    outcome = isolation.run_in_child(
        bytearray(BODY), work, budget=64 * MIB, seconds=30, max_message_bytes=MIB
    )

    assert isinstance(outcome.error, isolation.CallFailed)
    assert "signal 9" in str(outcome.error)


def test_an_answer_larger_than_allowed_is_a_failure() -> None:
    outcome = isolation.run_in_child(
        bytearray(BODY),
        lambda body: b"x" * (2 * MIB),
        budget=64 * MIB,
        seconds=30,
        max_message_bytes=MIB,
    )

    assert isinstance(outcome.error, isolation.CallFailed)


def test_the_event_loop_keeps_running_while_a_child_answers(tmp_path: Path) -> None:
    """Regression (issue 17, item 2): a large body was parsed and answered in the worker, which
    held the CPU for seconds while /healthz waited. Here the child answers only once a greenlet
    of this process has run ten turns of the loop while it waits."""
    ticked = tmp_path / "ticked"

    def tick() -> None:
        for _ in range(10):
            gevent.sleep(0.01)
        ticked.touch()

    def work(body: object) -> bool:
        """Whether the ticks ended while this child waited (it gives up after a minute)."""
        for _ in range(6000):
            if ticked.exists():
                return True
            time.sleep(0.01)
        return False

    ticker = gevent.spawn(tick)
    outcome = isolation.run_in_child(
        bytearray(BODY), work, budget=64 * MIB, seconds=120, max_message_bytes=MIB
    )
    ticker.join()

    assert outcome.error is None
    assert outcome.value is True


def test_a_large_body_that_gets_no_turn_within_the_deadline_is_busy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first call holds the turn until the second has been refused: the outcome depends on
    no race between the two deadlines."""
    released = gevent.event.Event()
    ran: list[object] = []

    def held(body: bytearray, work: Callable[[object], object], **_: object) -> object:
        ran.append(work)
        released.wait()
        return isolation.ChildOutcome(None, None, 0)

    monkeypatch.setattr(isolation, "run_in_child", held)
    calls = isolation.Calls(Limits(isolate_above_bytes=16, call_deadline_seconds=0.05))
    first = gevent.spawn(calls.answer, bytearray(BODY), lambda body: "first")
    gevent.sleep(0)  # the first call takes the turn

    with pytest.raises(bodies.Busy):
        calls.answer(bytearray(BODY), lambda body: "second")

    released.set()
    first.get()
    assert len(ran) == 1  # the second call's work never ran


def test_the_child_inherits_no_descriptor_but_its_pipe() -> None:
    """Client sockets the child inherited would stay open (unanswered) while it runs."""

    def work(body: object) -> list[int]:
        return sorted(int(name) for name in os.listdir("/proc/self/fd"))

    with open(os.devnull, "rb") as held:
        descriptors, _ = large().answer(bytearray(BODY), work)

        assert held.fileno() not in descriptors
    assert len([fd for fd in descriptors if fd > 2]) <= 2  # the pipe, and listdir's own
