"""Request bodies within limits: read, bounded, decoded once.

What one process accepts (`settings.Limits`), whatever a client sends:

- a body larger than `max_body_bytes` (the Content-Length, then the bytes actually read):
  `BodyTooLarge`;
- a body still incomplete `body_deadline_seconds` after its first byte, or whose socket stays
  silent (the server's read timeout): `BodyTimeout`;
- request bodies buffered at once in this process past `buffered_bytes`: `Busy` (Metacontroller
  retries): many slow uploads cannot add up to an out-of-memory kill;
- a body whose parsed form could take more than `max_parse_bytes`: `BodyTooComplex`, before it
  is parsed. `parse_cost` bounds what orjson allocates from counts of structural bytes (objects,
  arrays, string quotes, commas) plus twice the length;
- a body that is not JSON: `InvalidJson`.

The exceptions are mapped to HTTP answers in `hooks.edge.app`, the one place that does that. This
module knows nothing of hooks, Flask routes, logging or metrics.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Iterator
from typing import Final, Protocol

import orjson

from hooks.edge.settings import Limits

READ_CHUNK: Final = 1024 * 1024


class BodyError(Exception):
    """A request body that this process does not take."""


class BodyTooLarge(BodyError):
    """Larger than `max_body_bytes`."""


class BodyTooComplex(BodyError):
    """Its parsed form could take more than `max_parse_bytes`."""


class BodyTimeout(BodyError):
    """Not received within the body deadline."""


class Busy(BodyError):
    """Too many request bodies in flight in this process."""


class InvalidJson(BodyError):
    """Not valid JSON."""


class Stream(Protocol):
    """What a request body is read from (werkzeug's input stream)."""

    def read(self, size: int = ..., /) -> bytes: ...


class BufferedBodies:
    """Bytes of request bodies this process holds right now, against `Limits.buffered_bytes`.

    Calls share one process (the async worker serves many connections); taking and releasing
    happen between reads, never concurrently with each other in one process.
    """

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self.held = 0

    def take(self, size: int) -> None:
        if self.held + size > self._limit:
            raise Busy("too many request bodies in flight; retry shortly")
        self.held += size

    def release(self, size: int) -> None:
        self.held -= size


def read(
    stream: Stream, *, declared: int | None, limits: Limits, buffered: BufferedBodies
) -> tuple[bytes, int]:
    """The raw body and its size, within the size, time and buffering limits.

    The bytes read are taken from `buffered`; the caller releases `size` once it is done with the
    body. On a failure here they are released before raising.
    """
    limit = limits.max_body_bytes
    if declared is not None and declared > limit:
        raise too_large(limit)
    deadline = time.monotonic() + limits.body_deadline_seconds
    chunks: list[bytes] = []
    size = 0
    try:
        # Without a Content-Length (chunked upload) only the bytes read can be checked.
        while chunk := stream.read(READ_CHUNK):
            buffered.take(len(chunk))
            size += len(chunk)
            chunks.append(chunk)
            if size > limit:
                raise too_large(limit)
            if time.monotonic() > deadline:
                raise BodyTimeout("request body not received in time")
        raw = b"".join(chunks)
    except BaseException:
        buffered.release(size)
        raise
    return raw, size


def too_large(limit: int) -> BodyTooLarge:
    return BodyTooLarge(f"request body is larger than {limit} bytes")


# parse_cost's weights: bytes per `{`, `[`, unescaped `"` and `,`, and per byte of the body.
_COST_OBJECT: Final = 200
_COST_ARRAY: Final = 64
_COST_STRING: Final = 28
_COST_ENTRY: Final = 48
_COST_BYTE: Final = 2


def parse_cost(body: bytes) -> int:
    """An upper bound of the bytes `orjson.loads(body)` allocates, from a few byte counts.

    Weights: 200 per `{` (a dict and its table), 64 per `[`, 28 per unescaped `"` (a string is two
    quotes and about 56 bytes of header), 48 per `,` (an entry: a list slot or a dict item with
    its value), plus twice the length (string contents). `{` inside strings count too, so real
    requests come out about 3x their parsed size: safe, never under.
    """
    quotes = body.count(b'"') - body.count(b'\\"')
    return (
        _COST_OBJECT * body.count(b"{")
        + _COST_ARRAY * body.count(b"[")
        + _COST_STRING * quotes
        + _COST_ENTRY * body.count(b",")
        + _COST_BYTE * len(body)
    )


def over_parse_budget(body: bytes, budget: int) -> bool:
    """Whether `parse_cost(body)` exceeds `budget`; a body too short to reach it whatever it
    holds (every byte a `{`) is not counted."""
    most_per_byte = max(_COST_OBJECT, _COST_ARRAY, _COST_STRING, _COST_ENTRY) + _COST_BYTE
    return most_per_byte * len(body) > budget and parse_cost(body) > budget


def check_parse_budget(body: bytes, budget: int) -> None:
    """Raise `BodyTooComplex` when the body's parse could take more than `budget` bytes."""
    if over_parse_budget(body, budget):
        raise BodyTooComplex("request body would take too much memory")


def decode(body: bytes) -> object:
    """The JSON value of a body; `InvalidJson` when it is not JSON."""
    try:
        decoded: object = orjson.loads(body)
    except orjson.JSONDecodeError as error:
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
