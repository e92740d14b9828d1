"""The call on a request body within a memory bound: in this process up to `isolate_above_bytes`,
else in a forked child whose RLIMIT_DATA the kernel enforces (rules and numbers:
docs/operations.md, "The hook server", `--max-parse-bytes`). Knows nothing of hooks, routes,
logging or metrics; `hooks.server.app` maps its exceptions to HTTP answers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import pickle
import resource
import signal
import struct
import time
import traceback
from collections.abc import Callable
from typing import Final, Generic, NoReturn, TypeVar, cast

import gevent  # type: ignore[import-untyped]
import gevent.lock  # type: ignore[import-untyped]
import gevent.monkey  # type: ignore[import-untyped]
import gevent.os  # type: ignore[import-untyped]

from hooks.server import bodies, observability
from hooks.server.settings import MIB, Limits

# orjson's parse buffer, allocated whole, and a bound of what it writes there (16 bytes per value,
# counted as 24 for its growth; docs/operations.md, `--max-parse-bytes`).
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

T = TypeVar("T")


class CallTimeout(Exception):
    """The call on a large body was still running at the call deadline; its child was killed."""


class CallFailed(Exception):
    """The child process answering a large body died without an answer, or answered too much."""


def parse_buffer(body: bytes | bytearray) -> tuple[int, int]:
    """The bytes `orjson.loads(body)` maps for its parse buffer, and a bound of those it writes
    there (a value starts the body or follows `[`, `{`, `,` or `:`, counted inside strings too)."""
    mapped = _BUFFER_PER_BYTE * len(body) + _BUFFER_SLACK
    values = 1 + body.count(b"[") + body.count(b"{") + body.count(b",") + body.count(b":")
    touched = len(body) + _TOUCHED_PER_VALUE * values + _BUFFER_SLACK
    return mapped, min(mapped, touched)


@dataclasses.dataclass(frozen=True, slots=True)
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

    def answer(self, body: bytearray, work: Callable[[object], T]) -> tuple[T, int | None]:
        """`work(bodies.decode(body))` within the memory bound, and for a call answered in a
        child, the resident bytes the child added to what it inherited.

        Takes the body over: it is emptied once decoded here or handed to the child. `work` must
        be pure: in a child, nothing it changes outside its value reaches this process. Raises
        what decoding or `work` raised (re-raised from the child's copy).
        """
        if len(body) <= self._limits.isolate_above_bytes:
            with bodies.collector_paused():
                decoded = bodies.decode(body)
                body.clear()
                return work(decoded), None
        started = time.monotonic()
        deadline = self._limits.call_deadline_seconds
        if not self._turn.acquire(timeout=deadline):
            raise bodies.Busy("another large request is being answered; retry shortly")
        try:
            outcome = run_in_child(
                body,
                work,
                budget=self._limits.max_parse_bytes,
                seconds=deadline - (time.monotonic() - started),
                max_message_bytes=self._limits.max_body_bytes,
            )
        finally:
            self._turn.release()
        if outcome.error is not None:
            raise outcome.error
        # Without an error the child sent its value (which `work` may have made None).
        return cast(T, outcome.value), outcome.peak_bytes


def run_in_child(
    body: bytearray,
    work: Callable[[object], T],
    *,
    budget: int,
    seconds: float,
    max_message_bytes: int,
) -> ChildOutcome[T]:
    """`work(bodies.decode(body))` in a forked child whose memory may grow by at most `budget`,
    waited for cooperatively. Takes the body over (see `Calls.answer`).

    The outcome's error is what the child raised (`bodies.BodyTooComplex` when an allocation
    failed or the child died while parsing: orjson does not survive an allocation that fails
    halfway), `CallTimeout` when it was killed after `seconds`, or `CallFailed` when it ended
    otherwise without an answer or sent more than `max_message_bytes`.
    """
    readable, writable = os.pipe()
    inherited = observability.process_memory("self", ("VmRSS",))["VmRSS"]
    # The unpatched fork: the child never runs the event loop, and the parent needs no watcher.
    pid = gevent.monkey.get_original("os", "fork")()
    if pid == 0:
        os.close(readable)
        _child(body, work, budget=budget, seconds=seconds, out=writable)
    os.close(writable)
    body.clear()  # the child has its own copy of the pages, this process needs none
    failure: Exception | None = None
    phase, message = b"", None
    try:
        with gevent.Timeout(max(seconds, 0.0), CallTimeout("the call did not end in time")):
            phase, message = _receive(readable, max_message_bytes + _BUFFER_SLACK)
    except (CallTimeout, CallFailed) as error:
        _kill(pid)
        failure = error
    except BaseException:
        _kill(pid)
        raise
    finally:
        os.close(readable)
        how, killed_by, peak_resident = _reap(pid)
    peak = None if peak_resident is None else max(0, peak_resident - inherited)
    if message is not None:
        outcome: ChildOutcome[T] = pickle.loads(message)
        return outcome if peak is None else dataclasses.replace(outcome, peak_bytes=peak)
    if failure is None and phase == _PARSING and killed_by is not None:
        failure = bodies.BodyTooComplex(bodies.TOO_MUCH_MEMORY)
    if failure is None:
        failure = CallFailed(f"the call's child process ended without an answer ({how})")
    return ChildOutcome(None, failure, peak or 0)


def _receive(fd: int, most: int) -> tuple[bytes, bytearray | None]:
    """What the child wrote, read without blocking the event loop: the last phase it reached,
    and its message (None when incomplete)."""
    gevent.os.make_nonblocking(fd)
    data = bytearray()
    while chunk := gevent.os.nb_read(fd, MIB):
        data += chunk
        gevent.sleep(0)  # as in `bodies.read`
        if len(data) > most + _MESSAGE_HEADER.size + 3:
            raise CallFailed(f"the call's answer is larger than {most} bytes")
    start = data.find(_MESSAGE, 0, 3)
    if start < 0:
        return bytes(data[-1:]), None
    phase = bytes(data[start - 1 : start]) if start else b""
    del data[: start + 1]
    if len(data) < _MESSAGE_HEADER.size:
        return phase, None
    (length,) = _MESSAGE_HEADER.unpack_from(data)
    if len(data) != _MESSAGE_HEADER.size + length:
        return phase, None
    del data[: _MESSAGE_HEADER.size]
    return phase, data


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _reap(pid: int) -> tuple[str, int | None, int | None]:
    """Wait for the child without blocking the event loop: how it ended, the signal that killed
    it, its peak resident memory."""
    while True:
        try:
            done, status, usage = os.wait4(pid, os.WNOHANG)
        except ChildProcessError:
            return "already reaped", None, None
        if done:
            peak = usage.ru_maxrss * 1024
            if os.WIFSIGNALED(status):
                number = os.WTERMSIG(status)
                return f"killed by signal {number}", number, peak
            return f"exit status {os.waitstatus_to_exitcode(status)}", None, peak
        gevent.sleep(_REAP_POLL_SECONDS)


def _child(
    body: bytearray, work: Callable[[object], T], *, budget: int, seconds: float, out: int
) -> NoReturn:
    """The child's whole life: limit itself, decode, work, send the outcome, exit. It reports
    the phase it enters (parsing, working) so that the parent knows where it died, if it does."""
    try:
        _detach(out, seconds)
        inherited = observability.process_memory("self", ("VmData", "VmRSS", "RssAnon"))
        mapped, touched = parse_buffer(body)
        gc.disable()
        value: T | None = None
        error: BaseException | None = None
        try:
            if touched > budget:
                raise bodies.BodyTooComplex(bodies.TOO_MUCH_MEMORY)
            # The parse may also map the part of its buffer it never writes to; pages inherited
            # mapped but not resident (free heap returned to the system) count against the
            # budget as if they were new: touching them again escapes RLIMIT_DATA.
            unbacked = max(0, inherited["VmData"] - inherited["RssAnon"])
            allowed = inherited["VmData"] + budget - unbacked
            _limit_data(allowed + mapped - touched)
            os.write(out, _PARSING)
            decoded = bodies.decode(body)
            _limit_data(allowed)
            os.write(out, _WORKING)
            value = work(decoded)
        except BaseException as raised:  # sent back to the parent, which re-raises it
            if _out_of_memory(raised):
                error = bodies.BodyTooComplex(bodies.TOO_MUCH_MEMORY)
            else:
                raised.add_note("in the call's child process:\n" + traceback.format_exc().rstrip())
                error = raised
        peak = observability.process_memory("self", ("VmHWM",))["VmHWM"] - inherited["VmRSS"]
        _send(out, ChildOutcome(value, error, max(0, peak)))
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
    """Drop what the child inherited and does not need (client sockets would stay open while it
    runs; the worker's signal handlers), die with the parent, and stop after the deadline in CPU
    time should the parent be gone."""
    os.closerange(3, out)
    os.closerange(out + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    for name in _CHILD_SIGNALS:
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    prctl = bodies.libc_function("prctl")
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
        message = pickle.dumps(ChildOutcome(None, bodies.BodyTooComplex(bodies.TOO_MUCH_MEMORY), 0))
    except Exception:
        failed = CallFailed(f"the call failed with {type(outcome.error).__name__}")
        for note in getattr(outcome.error, "__notes__", ()):
            failed.add_note(note)
        message = pickle.dumps(ChildOutcome(None, failed, outcome.peak_bytes))
    view = memoryview(_MESSAGE + _MESSAGE_HEADER.pack(len(message)) + message)
    while view:
        view = view[os.write(out, view) :]


def _limit_data(size: int) -> None:
    """Let this process map at most `size` bytes of data (RLIMIT_DATA, within the hard limit)."""
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    soft = size if hard == resource.RLIM_INFINITY else min(size, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
