"""Request bodies within limits (`settings.Limits`; rules and numbers: docs/operations.md, "The
hook server"): read, bounded and decoded, the transport's failures turned into exceptions that say
which limit a body broke (`hooks.server.app` maps them to HTTP answers). Knows nothing of hooks,
routes, logging or metrics; the call on a body is `hooks.server.isolation`'s.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
from collections.abc import Callable, Iterator
from typing import Final, Protocol

import gevent  # type: ignore[import-untyped]
import orjson
from gunicorn.http import errors as http_errors  # type: ignore[import-untyped]
from werkzeug.exceptions import ClientDisconnected

from hooks.server import settings
from hooks.server.settings import MIB, Limits

# Let the event loop run at least this often while a body arrives (about 5 ms of reading).
YIELD_EVERY_BYTES: Final = 1 * MIB
# Give memory back to the operating system once no body is held and this much was taken since
# (a trim takes a few ms: not after every small call).
TRIM_AFTER_BYTES: Final = 64 * MIB
_LATE: Final = "request body not received in time"
TOO_MUCH_MEMORY: Final = "request body would take too much memory"


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


class Stream(Protocol):
    """What a request body is read from (werkzeug's input stream)."""

    def read(self, size: int = ..., /) -> bytes: ...


class BufferedBodies:
    """Bytes of request bodies this process holds, against `Limits.buffered_bytes`; taken and
    released between reads of the one event loop. Once none is held after `TRIM_AFTER_BYTES` were
    taken, free heap goes back to the system (`trim`: by default glibc's `malloc_trim`, if any).
    """

    def __init__(self, limit: int, *, trim: Callable[[int], int] | None = None) -> None:
        self._limit = limit
        self.held = 0
        self._since_trim = 0
        self._trim = trim or libc_function("malloc_trim")

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


def libc_function(name: str) -> Callable[..., int] | None:
    """A C library function of this process (glibc's malloc_trim, prctl), when there is one."""
    function: Callable[..., int] | None = getattr(ctypes.CDLL(None), name, None)
    return function


def read(
    stream: Stream, *, declared: int | None, limits: Limits, buffered: BufferedBodies
) -> tuple[bytearray, int]:
    """The raw body, within the size, time and buffering limits, and the bytes of `buffered` it
    holds: its buffer's capacity, taken as it arrives (with the transport's overhead while it
    does), for the caller to release once done with the body. A failure releases everything."""
    limit = limits.max_body_bytes
    if declared is not None and declared > limit:
        raise too_large(limit)
    body = bytearray()
    held = 0
    buffered.take(settings.BODY_READ_OVERHEAD_BYTES)
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
        buffered.release(settings.BODY_READ_OVERHEAD_BYTES)
    return body, held


def _read_piece(stream: Stream) -> bytes:
    """At most `settings.BODY_READ_PIECE_BYTES`; the transport's failures as the client's errors."""
    try:
        return stream.read(settings.BODY_READ_PIECE_BYTES)
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
            raise BodyTooComplex(TOO_MUCH_MEMORY) from None
        raise InvalidJson(f"request body is not valid JSON: {error}") from None
    return decoded


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Keep Python's cyclic garbage collector from running during one hook call (pure, so no
    other call interleaves): the millions of containers a large request parses into would trigger
    collections that find nothing (parsed JSON has no cycles), making large syncs ~4x slower."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
