"""The server's own rules that need no running server: addresses (`hooks.server.serving`), which
connections are shed first, when a body counts as unread (`hooks.server.connections`).
`tests/test_server.py` runs the real thing.
"""

from __future__ import annotations

import io

import pytest
from gunicorn.http.body import Body, ChunkedReader, LengthReader
from gunicorn.http.unreader import IterUnreader

from hooks.server import connections, serving, settings


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("127.0.0.1:8080", serving.Address("127.0.0.1", 8080)),
        ("0.0.0.0:1", serving.Address("0.0.0.0", 1)),
        ("[::1]:65535", serving.Address("[::1]", 65535)),
        ("hooks.example:9090", serving.Address("hooks.example", 9090)),
    ],
    ids=["ipv4", "lowest-port", "ipv6", "name"],
)
def test_an_address_is_host_and_port(text: str, address: serving.Address) -> None:
    assert serving.parse_address(text) == address
    assert str(address) == text


@pytest.mark.parametrize(
    "text",
    [
        "127.0.0.1:99999",
        "127.0.0.1:0",
        "nohost",
        ":8080",
        "host:",
        "host:8o80",
        "host:-1",
        "host:\u00b2",
        "host:\u0668\u0660",
    ],
)
def test_an_address_without_a_usable_port_is_refused(text: str) -> None:
    """Regression: a superscript digit passed `str.isdigit` and then crashed `int` (a traceback
    instead of exit 2), and Arabic-Indic digits bound port 80: a port is ASCII digits only."""
    with pytest.raises(serving.ServerError, match="HOST:PORT"):
        serving.parse_address(text)


class Request:
    def __init__(self, body: Body | None) -> None:
        self.body = body


def pending_body() -> Body:
    return Body(LengthReader(IterUnreader([b"{}"]), 10))


def read_body() -> Body:
    body = Body(LengthReader(IterUnreader([b"{}"]), 2))
    body.read(2)
    return body


def test_a_body_counts_as_unread_until_its_end_or_when_it_failed() -> None:
    chunked = Body(ChunkedReader(Request(None), IterUnreader([b"2\r\n{}\r\n0\r\n\r\n"])))
    failed = read_body()
    failed.failed = True

    assert connections.body_left(pending_body())
    assert not connections.body_left(read_body())
    assert connections.body_left(chunked)
    chunked.read(io.DEFAULT_BUFFER_SIZE)
    assert not connections.body_left(chunked)
    assert connections.body_left(failed)
    assert not connections.body_left(None)


def test_connections_are_shed_kept_alive_first_then_slow_uploads_then_silent_ones() -> None:
    now = 100.0
    held = {
        "answering": connections.Connection(
            None, since=1.0, served=1, request=Request(read_body())
        ),
        "uploading-old": connections.Connection(
            None, since=2.0, served=1, request=Request(pending_body())
        ),
        "uploading-new": connections.Connection(
            None, since=50.0, served=1, request=Request(pending_body())
        ),
        "kept-alive": connections.Connection(None, since=90.0, served=3),
        "silent": connections.Connection(None, since=now - settings.FRESH_SECONDS, served=0),
        "just-accepted": connections.Connection(None, since=now - 0.1, served=0),
        "already-shed": connections.Connection(None, since=0.0, served=1, dropped=True),
    }

    order = connections.shed_candidates(held, now=now)

    assert order == ["kept-alive", "uploading-old", "uploading-new", "silent"]
