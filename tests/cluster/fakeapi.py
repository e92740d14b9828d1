"""A scripted stand-in for the API server's list, watch and status patch, on 127.0.0.1.

For the tests of `kube.Watch` and the fake LWS controller that need no control plane: each watch
request plays the next script of `watches`, step by step (an event, an error answer, a stream cut
short, a stream that goes silent, a dropped connection), and every request is recorded. With no
script left, a watch window stays open, silent, for its `timeoutSeconds` (as the real server's
does) or until the server stops. Lists answer from `listings`, the last one again once only one is
left. PATCH answers from `patch_codes` (then 200) and is recorded with its body.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from tools.sandbox import kube

JsonObject = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Send:
    """Stream one watch event."""

    event: JsonObject


@dataclass(frozen=True, slots=True)
class Answer:
    """Answer the watch request with a status code and a body instead of a stream."""

    code: int
    body: JsonObject = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Cut:
    """Close the connection in the middle of the stream (no final chunk)."""


@dataclass(frozen=True, slots=True)
class Silence:
    """Send nothing more until the server stops (the client's read timeout ends it)."""


@dataclass(frozen=True, slots=True)
class Drop:
    """Close the connection before answering at all."""


Step = Send | Answer | Cut | Silence | Drop


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    params: dict[str, str]
    body: JsonObject | None


def lws(name: str, *, version: str, uid: str | None = None, replicas: int = 1) -> JsonObject:
    """A stored LeaderWorkerSet at `resourceVersion` `version`."""
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": uid or f"uid-{name}",
            "resourceVersion": version,
            "generation": 1,
        },
        "spec": {"replicas": replicas},
    }


def listing(version: str, *items: JsonObject) -> JsonObject:
    return {"kind": "List", "metadata": {"resourceVersion": version}, "items": list(items)}


def expired(version: str = "1") -> JsonObject:
    """The ERROR event of a watch from a resourceVersion the server no longer has."""
    return {
        "type": "ERROR",
        "object": {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "message": f"too old resource version: {version} (2000)",
            "reason": "Expired",
            "code": 410,
        },
    }


def bookmark(version: str) -> JsonObject:
    return {
        "type": "BOOKMARK",
        "object": {"kind": "LeaderWorkerSet", "metadata": {"resourceVersion": version}},
    }


class FakeApiServer:
    """The scripted server; use it as a context manager, and `client()` to talk to it."""

    def __init__(self, *, listings: list[JsonObject], watches: list[list[Step]]) -> None:
        self.listings = listings
        self.watches = watches
        self.patch_codes: list[int] = []
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._clients: list[kube.Client] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def client(self) -> kube.Client:
        """A client of this server, closed with it."""
        made = kube.Client(server=self.url, token="test", ca_file="")
        self._clients.append(made)
        return made

    def __enter__(self) -> FakeApiServer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stopping.set()
        for client in self._clients:
            client.close()
        self._server.shutdown()
        self._server.server_close()

    def watch_requests(self) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.params.get("watch") == "1"]

    def list_requests(self) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.method == "GET" and "watch" not in r.params]

    def patches(self) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.method == "PATCH"]

    # --- serving ---------------------------------------------------------------------------

    def _record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def _next_listing(self) -> JsonObject:
        with self._lock:
            return self.listings.pop(0) if len(self.listings) > 1 else self.listings[0]

    def _next_script(self) -> list[Step] | None:
        with self._lock:
            return self.watches.pop(0) if self.watches else None

    def _next_patch_code(self) -> int:
        with self._lock:
            return self.patch_codes.pop(0) if self.patch_codes else 200

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the tests read `requests` instead."""

            def do_GET(self) -> None:
                url = urlsplit(self.path)
                params = dict(parse_qsl(url.query))
                server._record(Request("GET", url.path, params, None))
                if params.get("watch") == "1":
                    self._watch(params)
                else:
                    self._json(200, server._next_listing())

            def do_PATCH(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length)) if length else None
                server._record(Request("PATCH", urlsplit(self.path).path, {}, body))
                code = server._next_patch_code()
                self._json(code, {} if code < 300 else {"kind": "Status", "code": code})

            def _json(self, code: int, body: JsonObject) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _watch(self, params: dict[str, str]) -> None:
                script = server._next_script()
                steps: list[Step] = script if script is not None else []
                if steps and isinstance(steps[0], Answer | Drop):
                    first = steps[0]
                    if isinstance(first, Answer):
                        self._json(first.code, first.body)
                    else:
                        self._close()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                with contextlib.suppress(OSError):  # the client may be gone already
                    for step in steps:
                        if isinstance(step, Send):
                            self._chunk(json.dumps(step.event).encode() + b"\n")
                        elif isinstance(step, Cut):
                            self._close()
                            return
                        elif isinstance(step, Silence):
                            server._stopping.wait()
                            self._close()
                            return
                    if script is None:  # an ordinary window: silent until it times out
                        server._stopping.wait(float(params.get("timeoutSeconds", "1")))
                    self._chunk(b"")

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            def _close(self) -> None:
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.connection.shutdown(socket.SHUT_RDWR)

        return Handler


@contextlib.contextmanager
def serving(*, listings: list[JsonObject], watches: list[list[Step]]) -> Iterator[FakeApiServer]:
    with FakeApiServer(listings=listings, watches=watches) as server:
        yield server
