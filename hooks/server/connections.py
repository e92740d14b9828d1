"""The connection policy, without gevent (docs/operations.md, "The hook server", Connections):
which connections are shed first, when a body counts as unread, the answer to gunicorn's request
errors. `hooks.server.worker` applies it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import gunicorn.http.body  # type: ignore[import-untyped]
import gunicorn.http.errors  # type: ignore[import-untyped]
import orjson

from hooks.core import problems
from hooks.server import settings

# gunicorn's request errors → (status, reason); anything else it raises is a 500.
_CLIENT_ERRORS: Final[tuple[tuple[str, int, str], ...]] = (
    ("LimitRequestLine", 414, "URI Too Long"),
    ("LimitRequestHeaders", 431, "Request Header Fields Too Large"),
    ("UnsupportedTransferCoding", 501, "Not Implemented"),
    ("ExpectationFailed", 417, "Expectation Failed"),
    ("ForbiddenProxyRequest", 403, "Forbidden"),
    ("ParseException", 400, "Bad Request"),
)


class Dropped(BaseException):
    """Raised in a connection's greenlet to end it (shed, or shut down); not an `Exception`, so
    that nothing on the way (Flask, gunicorn) turns it into an answer of its own."""


@dataclass(slots=True)
class Connection:
    """One client connection of a worker: its socket, since when it waits for a request (or
    has been in its current one), and that request while it is handled."""

    client: Any
    since: float
    served: int = 0
    request: Any = None
    dropped: bool = False  # told to end; it does at its next switch


def body_left(body: Any) -> bool:
    """Whether a request body (gunicorn's) was not read to its end, or failed while read."""
    if body is None:
        return False
    if getattr(body, "failed", False) or body.buf.tell():
        return True
    reader = body.reader
    if isinstance(reader, gunicorn.http.body.LengthReader):
        return bool(reader.length > 0)
    if isinstance(reader, gunicorn.http.body.ChunkedReader):
        return reader.parser is not None or bool(reader.buf.tell())
    return False


def shed_candidates(connections: Mapping[Any, Connection], *, now: float) -> list[Any]:
    """The connections to close for new ones, best first (oldest first within each rank): idle
    kept-alive ones, those still sending their body, those silent for `settings.FRESH_SECONDS`
    (one just accepted may not have run yet: a probe must not be shed before it can speak)."""
    ranked = []
    for greenlet, connection in connections.items():
        if connection.dropped:
            continue
        if connection.request is None and connection.served:
            rank = 0
        elif connection.request is not None and body_left(connection.request.body):
            rank = 1
        elif connection.request is None and now - connection.since >= settings.FRESH_SECONDS:
            rank = 2
        else:
            continue
        ranked.append((rank, connection.since, greenlet))
    ranked.sort(key=lambda entry: entry[:2])
    return [greenlet for _, _, greenlet in ranked]


def header_bytes(request: Any) -> int:
    """The size of a request's headers: names, values and line ends."""
    return sum(len(name) + len(value) + 4 for name, value in request.headers)


def error_status(error: BaseException) -> tuple[int, str]:
    """The HTTP status and reason gunicorn's request error deserves."""
    for name, status, reason in _CLIENT_ERRORS:
        cls = getattr(gunicorn.http.errors, name, None)
        if cls is not None and isinstance(error, cls):
            return status, reason
    return 500, "Internal Server Error"


def error_response(status: int, reason: str, message: str) -> bytes:
    """A complete HTTP/1.1 error response with the app's JSON error body."""
    body = orjson.dumps({"error": problems.cut(message, settings.MAX_ERROR_MESSAGE)})
    head = (
        f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode("latin-1") + body
