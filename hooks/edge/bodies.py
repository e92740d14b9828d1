"""Request bodies within limits: read, bounded, decoded once, and the call on them run within a
memory bound.

What one process accepts (`settings.Limits`), whatever a client sends:

- a body larger than `max_body_bytes` (the Content-Length, then the bytes actually read):
  `BodyTooLarge`;
- a body still incomplete `body_deadline_seconds` after its reading began, or whose socket stays
  silent for the server's read timeout: `BodyTimeout`;
- bytes of request bodies held at once by this process, complete or still arriving, past
  `buffered_bytes`: `Busy` (Metacontroller retries). Bodies are read 64 KiB at a time and every
  piece is counted when it arrives (with the buffers of the transport), so many slow uploads
  cannot add up to an out-of-memory kill;
- a body whose transfer is broken (a malformed chunk, a client that closes mid-body):
  `BodyUnreadable`, the client's error;
- a body that is not JSON: `InvalidJson`.

The call on a body (decode, then `work`, the hook and its serialised answer) runs in one of two
places. A body of up to `isolate_above_bytes` is decoded and answered in this process: its parse
takes at most `settings.INLINE_PEAK_PER_BYTE` times its size, whatever its shape. A larger one
is answered in a forked child process (`answer`), so that the worker's event loop keeps
serving /healthz and other connections meanwhile, with the child's memory limited by
construction: RLIMIT_DATA lets the child map at most `max_parse_bytes` more than it inherited
(less what it inherited mapped but not resident, which it could fill unseen), plus the part of
orjson's parse buffer it provably never writes to (`parse_buffer`). An allocation past that
fails and the child answers `BodyTooComplex`; the kernel, not an estimate, enforces the bound.
orjson does not survive an allocation that fails halfway through a parse: a child that dies
while parsing is `BodyTooComplex` too. One child runs at a time; a large body that cannot get
its turn in time is `Busy`, a child still running after `call_deadline_seconds` is killed
(`CallTimeout`), and one that dies otherwise without an answer is `CallFailed`. The child sends
its value back pickled over a pipe; the kernel reports its peak memory.

The exceptions are mapped to HTTP answers in `hooks.edge.app`, the one place that does that. This
module knows the transport's exceptions (gunicorn's, werkzeug's) and turns them into its own; it
knows nothing of hooks, Flask routes, logging or metrics.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import pickle
import resource
import signal
import struct
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final, Generic, NoReturn, Protocol, TypeVar, cast

import gevent  # type: ignore[import-untyped]
import gevent.lock  # type: ignore[import-untyped]
import gevent.monkey  # type: ignore[import-untyped]
import gevent.os  # type: ignore[import-untyped]
import orjson
from gunicorn.http import errors as http_errors  # type: ignore[import-untyped]
from werkzeug.exceptions import ClientDisconnected

from hooks.edge import settings
from hooks.edge.settings import MIB, Limits

READ_PIECE: Final = settings.BODY_READ_PIECE_BYTES
READ_OVERHEAD: Final = settings.BODY_READ_OVERHEAD_BYTES
# Let the event loop run at least this often while a body arrives (about 5 ms of reading).
YIELD_EVERY_BYTES: Final = 1 * MIB
# Give memory back to the operating system once no body is held and this much was taken since
# (a trim takes a few ms: not after every small call).
TRIM_AFTER_BYTES: Final = 64 * MIB
# orjson parses into one buffer of 12 bytes per byte of the body (plus a page), allocated whole;
# what it writes there is a copy of the body and 16 bytes per JSON value (keys included). The
# bound below counts 24 per value, half again as much, for the buffer's growth.
_BUFFER_PER_BYTE: Final = 12
_BUFFER_SLACK: Final = 64 * 1024
_TOUCHED_PER_VALUE: Final = 24
_MESSAGE_HEADER: Final = struct.Struct(">Q")
# What a child writes to its pipe: a byte as it starts parsing, one as it starts working, then
# a byte and its length-prefixed message.
_PARSING: Final = b"P"
_WORKING: Final = b"W"
_MESSAGE: Final = b"M"
_PR_SET_PDEATHSIG: Final = 1
_REAP_POLL_SECONDS: Final = 0.005
_CHILD_SIGNALS: Final = ("SIGTERM", "SIGINT", "SIGQUIT", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGWINCH")
_LATE: Final = "request body not received in time"
_TOO_MUCH_MEMORY: Final = "request body would take too much memory"

T = TypeVar("T")


class BodyError(Exception):
    """A request body that this process does not take."""


class BodyTooLarge(BodyError):
    """Larger than `max_body_bytes`."""


class BodyTooComplex(BodyError):
    """Its call would take more memory than `max_parse_bytes`."""


class BodyTimeout(BodyError):
    """Not received within the body deadline, or the socket stayed silent."""


class Busy(BodyError):
    """Too many request bodies in flight in this process, or no turn for a large one."""


class BodyUnreadable(BodyError):
    """Its transfer is broken: malformed chunked encoding, or the client went away mid-body."""


class InvalidJson(BodyError):
    """Not valid JSON."""


class CallTimeout(Exception):
    """The call on a large body was still running at the call deadline; its child was killed."""


class CallFailed(Exception):
    """The child process answering a large body died without an answer, or answered too much."""


class Stream(Protocol):
    """What a request body is read from (werkzeug's input stream)."""

    def read(self, size: int = ..., /) -> bytes: ...


# --- reading -------------------------------------------------------------------------------------


class BufferedBodies:
    """Bytes of request bodies this process holds right now, against `Limits.buffered_bytes`.

    Calls share one process (the async worker serves many connections); taking and releasing
    happen between reads, never concurrently with each other in one process. When the last body
    is let go after `TRIM_AFTER_BYTES` were taken, free heap memory goes back to the operating
    system (`trim`: glibc's `malloc_trim` by default, where there is one).
    """

    def __init__(self, limit: int, *, trim: Callable[[int], int] | None = None) -> None:
        self._limit = limit
        self.held = 0
        self._since_trim = 0
        self._trim = trim or _malloc_trim()

    def take(self, size: int) -> None:
        if self.held + size > self._limit:
            raise Busy("too many request bodies in flight; retry shortly")
        self.held += size
        self._since_trim += size

    def release(self, size: int) -> None:
        self.held -= size
        if self.held == 0 and self._since_trim >= TRIM_AFTER_BYTES and self._trim is not None:
            self._since_trim = 0
            self._trim(0)


def _libc_function(name: str) -> Callable[..., int] | None:
    """A C library function of this process (glibc's malloc_trim, prctl), when there is one."""
    function: Callable[..., int] | None = getattr(ctypes.CDLL(None), name, None)
    return function


def _malloc_trim() -> Callable[[int], int] | None:
    return _libc_function("malloc_trim")


@dataclass(frozen=True, slots=True)
class Received:
    """A body read whole, and the bytes of `BufferedBodies` it holds (its buffer's capacity)."""

    data: bytearray
    held: int


def read(
    stream: Stream, *, declared: int | None, limits: Limits, buffered: BufferedBodies
) -> Received:
    """The raw body, within the size, time and buffering limits.

    While it arrives, the body's buffer (its capacity, not just its length) and the transport's
    own buffers of a body being read (`READ_OVERHEAD`) are taken from `buffered`; the caller
    releases `held` once it is done with the body. On a failure here everything is released
    before raising.
    """
    limit = limits.max_body_bytes
    if declared is not None and declared > limit:
        raise too_large(limit)
    body = bytearray()
    held = 0
    buffered.take(READ_OVERHEAD)
    try:
        with gevent.Timeout(limits.body_deadline_seconds, BodyTimeout(_LATE)):
            # Without a Content-Length (chunked upload) only the bytes read can be checked.
            while piece := _read_piece(stream):
                body += piece
                buffered.take(body.__sizeof__() - held)
                held = body.__sizeof__()
                if len(body) > limit:
                    raise too_large(limit)
                # A socket that always has data never blocks, so never lets other connections
                # (/healthz) run: a fast upload would hold the event loop until it ends.
                if len(body) // YIELD_EVERY_BYTES != (len(body) - len(piece)) // YIELD_EVERY_BYTES:
                    gevent.sleep(0)
    except BaseException:
        buffered.release(held)
        raise
    finally:
        buffered.release(READ_OVERHEAD)
    return Received(body, held)


def _read_piece(stream: Stream) -> bytes:
    """At most READ_PIECE bytes; the transport's failures as the client's errors."""
    try:
        return stream.read(READ_PIECE)
    except TimeoutError:
        raise BodyTimeout(_LATE) from None
    except ClientDisconnected as error:
        # werkzeug's wrapper of a failed read of a body with a Content-Length.
        if isinstance(error.__context__ or error.__cause__, TimeoutError):
            raise BodyTimeout(_LATE) from None
        raise BodyUnreadable("request body ended early: the client went away") from None
    except http_errors.NoMoreData:
        raise BodyUnreadable("request body ended early: the client went away") from None
    except http_errors.ParseException as error:
        raise BodyUnreadable(f"malformed request body: {type(error).__name__}") from None
    except OSError as error:
        raise BodyUnreadable(f"request body could not be read: {error}") from None


def too_large(limit: int) -> BodyTooLarge:
    return BodyTooLarge(f"request body is larger than {limit} bytes")


def decode(body: bytes | bytearray) -> object:
    """The JSON value of a body; `InvalidJson` when it is not JSON."""
    try:
        decoded: object = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        if str(error).startswith("Not enough memory"):
            raise BodyTooComplex(_TOO_MUCH_MEMORY) from None
        raise InvalidJson(f"request body is not valid JSON: {error}") from None
    return decoded


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Keep Python's cyclic garbage collector from running during one hook call.

    A large request parses into millions of containers; each allocation burst would trigger
    collections that walk the whole heap and find nothing (parsed JSON has no reference cycles;
    reference counting frees it), which made large syncs about 4x slower in the benchmark.
    Only pure computation runs inside (no I/O, so no other call of this process can interleave).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# --- the call, bounded ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ParseBuffer:
    """orjson's parse buffer for one body: the bytes it maps, and at most how many it touches."""

    mapped: int
    touched: int


def parse_buffer(body: bytes | bytearray) -> ParseBuffer:
    """What `orjson.loads(body)` maps for its parse buffer, and an upper bound of what it writes
    there: a copy of the body and 24 bytes per value (a value starts the body, or follows a `[`,
    `{`, `,` or `:`; those inside strings are counted too, which only raises the bound)."""
    mapped = _BUFFER_PER_BYTE * len(body) + _BUFFER_SLACK
    values = 1 + body.count(b"[") + body.count(b"{") + body.count(b",") + body.count(b":")
    touched = len(body) + _TOUCHED_PER_VALUE * values + _BUFFER_SLACK
    return ParseBuffer(mapped=mapped, touched=min(mapped, touched))


@dataclass(frozen=True, slots=True)
class Answered(Generic[T]):
    """What `work` returned, and, for a call answered in a child, the child's peak memory (the
    resident bytes it added to what it inherited)."""

    value: T
    child_peak_bytes: int | None


@dataclass(frozen=True, slots=True)
class ChildOutcome(Generic[T]):
    """How one child process ended: its value or the exception it raised, and its peak memory."""

    value: T | None
    error: BaseException | None
    peak_bytes: int


class Calls:
    """Runs the call on each body: in this process, or (large bodies) in a child, one at a time."""

    def __init__(self, limits: Limits) -> None:
        self._limits = limits
        self._turn = gevent.lock.BoundedSemaphore(1)

    def answer(self, body: bytearray, work: Callable[[object], T]) -> Answered[T]:
        """`work(decode(body))`, within the memory bound; see the module docstring.

        Takes the body over: it is emptied (its memory let go) once decoded here or handed to
        the child. `work` must be pure: in a child, nothing it changes outside its value reaches
        this process. Raises what decoding or `work` raised (re-raised from the child's copy).
        """
        if len(body) <= self._limits.isolate_above_bytes:
            with collector_paused():
                decoded = decode(body)
                body.clear()
                return Answered(work(decoded), None)
        started = time.monotonic()
        deadline = self._limits.call_deadline_seconds
        if not self._turn.acquire(timeout=deadline):
            raise Busy("another large request is being answered; retry shortly")
        try:
            left = deadline - (time.monotonic() - started)
            outcome = run_in_child(
                body,
                work,
                budget=self._limits.max_parse_bytes,
                seconds=left,
                max_message_bytes=self._limits.max_body_bytes,
            )
        finally:
            self._turn.release()
        if outcome.error is not None:
            raise outcome.error
        # Without an error the child sent its value (which `work` may have made None).
        return Answered(cast(T, outcome.value), outcome.peak_bytes)


def run_in_child(
    body: bytearray,
    work: Callable[[object], T],
    *,
    budget: int,
    seconds: float,
    max_message_bytes: int,
) -> ChildOutcome[T]:
    """`work(decode(body))` in a forked child whose memory may grow by at most `budget`.

    Takes the body over (see `Calls.answer`). Waits for the child cooperatively (the event loop
    keeps running). The outcome's error is what the child raised (`BodyTooComplex` when an
    allocation failed, or when the child died while parsing: orjson does not survive an
    allocation that fails halfway), `CallTimeout` when it was killed after `seconds`, or
    `CallFailed` when it ended otherwise without an answer or sent back more than
    `max_message_bytes`. Its peak is what the kernel measured (the child's peak resident
    memory less what it inherited).
    """
    readable, writable = os.pipe()
    inherited = _memory().resident
    # The unpatched fork: the child never runs the event loop, and the parent needs no watcher.
    pid = gevent.monkey.get_original("os", "fork")()
    if pid == 0:
        os.close(readable)
        _child(body, work, budget=budget, seconds=seconds, out=writable)
    os.close(writable)
    body.clear()  # the child has its own copy of the pages, this process needs none
    failure: Exception | None = None
    received = _Received(b"", None)
    try:
        with gevent.Timeout(max(seconds, 0.0), CallTimeout("the call did not end in time")):
            received = _receive(readable, max_message_bytes + _BUFFER_SLACK)
    except (CallTimeout, CallFailed) as error:
        _kill(pid)
        failure = error
    except BaseException:
        _kill(pid)
        raise
    finally:
        os.close(readable)
        ended = _reap(pid)
    peak = None if ended.peak_resident is None else max(0, ended.peak_resident - inherited)
    if received.message is not None:
        outcome: ChildOutcome[T] = pickle.loads(received.message)
        return ChildOutcome(
            outcome.value, outcome.error, outcome.peak_bytes if peak is None else peak
        )
    if failure is None and received.phase == _PARSING and ended.signal is not None:
        failure = BodyTooComplex(_TOO_MUCH_MEMORY)
    if failure is None:
        failure = CallFailed(f"the call's child process ended without an answer ({ended.how})")
    return ChildOutcome(None, failure, peak or 0)


@dataclass(frozen=True, slots=True)
class _Received:
    phase: bytes
    message: bytearray | None


@dataclass(frozen=True, slots=True)
class _Ended:
    how: str
    signal: int | None
    peak_resident: int | None


def _receive(fd: int, most: int) -> _Received:
    """What the child wrote: the phase it reached and its message (length-prefixed, None when
    incomplete), read without blocking the event loop."""
    gevent.os.make_nonblocking(fd)
    data = bytearray()
    while chunk := gevent.os.nb_read(fd, MIB):
        data += chunk
        gevent.sleep(0)  # as in `read`
        if len(data) > most + _MESSAGE_HEADER.size + 3:
            raise CallFailed(f"the call's answer is larger than {most} bytes")
    start = data.find(_MESSAGE, 0, 3)
    if start < 0:
        return _Received(bytes(data[-1:]), None)
    phase = bytes(data[start - 1 : start]) if start else b""
    del data[: start + 1]
    if len(data) < _MESSAGE_HEADER.size:
        return _Received(phase, None)
    (length,) = _MESSAGE_HEADER.unpack_from(data)
    if len(data) != _MESSAGE_HEADER.size + length:
        return _Received(phase, None)
    del data[: _MESSAGE_HEADER.size]
    return _Received(phase, data)


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _reap(pid: int) -> _Ended:
    """Wait for the child without blocking the event loop: how it ended, its peak memory."""
    while True:
        try:
            done, status, usage = os.wait4(pid, os.WNOHANG)
        except ChildProcessError:
            return _Ended("already reaped", None, None)
        if done:
            peak = usage.ru_maxrss * 1024
            if os.WIFSIGNALED(status):
                number = os.WTERMSIG(status)
                return _Ended(f"killed by signal {number}", number, peak)
            return _Ended(f"exit status {os.waitstatus_to_exitcode(status)}", None, peak)
        gevent.sleep(_REAP_POLL_SECONDS)


def _child(
    body: bytearray, work: Callable[[object], T], *, budget: int, seconds: float, out: int
) -> NoReturn:
    """The child's whole life: limit itself, decode, work, send the outcome, exit. It reports
    the phase it enters (parsing, working) so that the parent knows where it died, if it does."""
    try:
        _detach(out, seconds)
        inherited = _memory()
        buffer = parse_buffer(body)
        gc.disable()
        value: T | None = None
        error: BaseException | None = None
        try:
            if buffer.touched > budget:
                raise BodyTooComplex(_TOO_MUCH_MEMORY)
            # The parse may also map the part of its buffer it never writes to; pages inherited
            # mapped but not resident count against the budget as if they were new.
            allowed = inherited.data + budget - inherited.unbacked
            _limit_data(allowed + buffer.mapped - buffer.touched)
            os.write(out, _PARSING)
            decoded = decode(body)
            _limit_data(allowed)
            os.write(out, _WORKING)
            value = work(decoded)
        except BaseException as raised:  # sent back to the parent, which re-raises it
            if _out_of_memory(raised):
                error = BodyTooComplex(_TOO_MUCH_MEMORY)
            else:
                raised.add_note("in the call's child process:\n" + traceback.format_exc().rstrip())
                error = raised
        peak = max(0, _memory().peak_resident - inherited.resident)
        _send(out, ChildOutcome(value, error, peak))
    finally:
        os._exit(0)


def _out_of_memory(error: BaseException) -> bool:
    """Whether an allocation failed on the way to `error` (orjson can report a MemoryError as
    the cause of a SystemError)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, MemoryError):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def _detach(out: int, seconds: float) -> None:
    """Drop what the child inherited and does not need: other descriptors (client sockets
    would stay open while it runs), the worker's signal handlers; die with the parent; stop
    after the deadline in CPU time, should the parent be gone."""
    os.closerange(3, out)
    os.closerange(out + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    for name in _CHILD_SIGNALS:
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    prctl = _libc_function("prctl")
    if prctl is not None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() == 1:  # the parent died before the line above
            os._exit(0)
    cpu = max(1, int(seconds) + 1)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))


def _send(out: int, outcome: ChildOutcome[T]) -> None:
    """Write the outcome, pickled and length-prefixed; an error that would not arrive intact
    (pickle cannot rebuild every exception) goes as a `CallFailed` naming it."""
    try:
        message = pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
        if outcome.error is not None:
            pickle.loads(message)
    except MemoryError:
        message = pickle.dumps(ChildOutcome(None, BodyTooComplex(_TOO_MUCH_MEMORY), 0))
    except Exception:
        failed = CallFailed(f"the call failed with {type(outcome.error).__name__}")
        for note in getattr(outcome.error, "__notes__", ()):
            failed.add_note(note)
        message = pickle.dumps(ChildOutcome(None, failed, outcome.peak_bytes))
    view = memoryview(_MESSAGE + _MESSAGE_HEADER.pack(len(message)) + message)
    while view:
        view = view[os.write(out, view) :]


@dataclass(frozen=True, slots=True)
class _Memory:
    data: int
    resident: int
    anonymous: int
    peak_resident: int

    @property
    def unbacked(self) -> int:
        """Mapped data not resident: free heap pages returned to the system, for example.
        Touching them again takes memory that RLIMIT_DATA does not see."""
        return max(0, self.data - self.anonymous)


_STATUS_FIELDS: Final = {b"VmData": "data", b"VmRSS": "resident", b"RssAnon": "anonymous"}


def _memory() -> _Memory:
    """This process's mapped data, resident, anonymous resident and peak resident memory
    (/proc/self/status)."""
    fields: dict[str, int] = {}
    with open("/proc/self/status", "rb") as status:
        for line in status:
            name, _, value = line.partition(b":")
            key = _STATUS_FIELDS.get(name, "peak_resident" if name == b"VmHWM" else None)
            if key is not None:
                fields[key] = int(value.split()[0]) * 1024
    return _Memory(**fields)


def _limit_data(size: int) -> None:
    """Let this process map at most `size` bytes of data (RLIMIT_DATA, within the hard limit)."""
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    soft = size if hard == resource.RLIM_INFINITY else min(size, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
