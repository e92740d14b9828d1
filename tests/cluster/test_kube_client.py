"""`kube.Client`'s kept-alive connections, against a keep-alive HTTP/1.1 server on 127.0.0.1
that counts the connections it accepts and can close the idle ones, as an API server may."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tools.sandbox import kube

OBJECT = {"kind": "Namespace", "metadata": {"name": "kept"}}


class KeepAliveServer:
    """Answers every GET with `OBJECT` over HTTP/1.1 and remembers every connection."""

    def __init__(self) -> None:
        self.connections: list[socket.socket] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                with owner._lock:
                    owner.connections.append(self.connection)

            def do_GET(self) -> None:
                body = json.dumps(OBJECT).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def accepted(self) -> int:
        with self._lock:
            return len(self.connections)

    def close_idle(self) -> None:
        """Close every connection from the server's side, as an idle timeout does."""
        with self._lock:
            connections = list(self.connections)
        for connection in connections:
            connection.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> KeepAliveServer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def server() -> Iterator[KeepAliveServer]:
    with KeepAliveServer() as running:
        yield running


@pytest.fixture
def client(server: KeepAliveServer) -> Iterator[kube.Client]:
    made = kube.Client(server=server.url, token="t", ca_file="")
    yield made
    made.close()


def test_a_threads_requests_share_one_connection(
    server: KeepAliveServer, client: kube.Client
) -> None:
    for _ in range(5):
        assert client.get(kube.NAMESPACES, "kept") == OBJECT
    assert server.accepted() == 1


def test_each_thread_has_a_connection_of_its_own(
    server: KeepAliveServer, client: kube.Client
) -> None:
    answers: list[object] = []
    threads = [
        threading.Thread(target=lambda: answers.append(client.get(kube.NAMESPACES, "kept")))
        for _ in range(3)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [OBJECT] * 3
    assert server.accepted() == 3


def test_a_connection_the_server_closed_while_idle_is_replaced(
    server: KeepAliveServer, client: kube.Client
) -> None:
    assert client.get(kube.NAMESPACES, "kept") == OBJECT
    server.close_idle()
    assert client.get(kube.NAMESPACES, "kept") == OBJECT
    assert server.accepted() == 2


def test_close_ends_the_kept_connections_and_a_later_request_opens_one(
    server: KeepAliveServer, client: kube.Client
) -> None:
    assert client.get(kube.NAMESPACES, "kept") == OBJECT
    client.close()
    assert client.get(kube.NAMESPACES, "kept") == OBJECT
    assert server.accepted() == 2
