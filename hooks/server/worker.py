"""gunicorn's gevent worker applying the connection policy of `hooks.server.connections`, and
gunicorn's own log lines in the hooks' JSON format. Imported only by `serving.serve`, once gevent
has patched the standard library and PROMETHEUS_MULTIPROC_DIR is set (it loads prometheus_client).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import gevent  # type: ignore[import-untyped]
import gunicorn.glogging  # type: ignore[import-untyped]
import gunicorn.http.errors  # type: ignore[import-untyped]
from gunicorn.workers.base_async import AsyncWorker  # type: ignore[import-untyped]
from gunicorn.workers.ggevent import GeventWorker  # type: ignore[import-untyped]
from prometheus_client import multiprocess

from hooks.server import connections, observability, settings


class HookWorker(GeventWorker):  # type: ignore[misc]
    """gunicorn's gevent worker with the connection limits, the JSON error answers and the
    quiet shutdown of docs/operations.md, "The hook server"."""

    connections: dict[Any, connections.Connection]
    dropping: int
    wsgi: Any

    def run(self) -> None:
        self.connections = {}
        self.dropping = 0  # connections told to end that have not ended yet
        gevent.spawn(self._close_idle_at_exit)
        super().run()

    def load_wsgi(self) -> None:
        super().load_wsgi()
        app = self.wsgi

        def closing_unread(environ: dict[str, Any], start_response: Any) -> Any:
            # An answer given before the body was read to its end (408, 413, 503, 400)
            # closes the connection: where the next request would start is unknown.
            def start(status: str, headers: Any, exc_info: Any = None) -> Any:
                if connections.body_left(environ.get("wsgi.input")):
                    start_response.__self__.force_close()
                return start_response(status, headers, exc_info)

            return app(environ, start)

        self.wsgi = closing_unread

    def _close_idle_at_exit(self) -> None:
        while self.alive:
            gevent.sleep(0.2)
        while True:  # until the worker exits: connections that finish a request go idle
            for greenlet, connection in list(self.connections.items()):
                if connection.request is None:
                    self._drop(greenlet, "shutdown")
            gevent.sleep(0.2)

    def _drop(self, greenlet: Any, reason: str) -> None:
        """End a connection's greenlet, once."""
        connection = self.connections.get(greenlet)
        if connection is not None and not connection.dropped:
            connection.dropped = True
            self.dropping += 1
            greenlet.kill(connections.Dropped(reason), block=False)

    @contextlib.contextmanager
    def timeout_ctx(self) -> Iterator[None]:
        # gunicorn waits for the next request of a connection (its headers) in here.
        connection = self.connections[gevent.getcurrent()]
        connection.since = time.monotonic()
        seconds = settings.FIRST_REQUEST_SECONDS if connection.served == 0 else self.cfg.keepalive
        if not self.alive:  # shutting down: serve no further request
            seconds = 0
        connection.client.settimeout(None)
        try:
            with gevent.Timeout(seconds, False):
                yield
        finally:
            connection.client.settimeout(settings.READ_TIMEOUT_SECONDS)

    def handle(self, listener: Any, client: Any, addr: Any) -> None:
        current = gevent.getcurrent()
        self.connections[current] = connections.Connection(client, time.monotonic())
        self._make_room()
        try:
            # Not GeventWorker.handle: it makes the socket block without a timeout.
            client.settimeout(settings.READ_TIMEOUT_SECONDS)
            AsyncWorker.handle(self, listener, client, addr)
        finally:
            if self.connections.pop(current).dropped:
                self.dropping -= 1

    def handle_request(self, listener_name: Any, req: Any, sock: Any, addr: Any) -> Any:
        connection = self.connections[gevent.getcurrent()]
        connection.request, connection.since = req, time.monotonic()
        connection.served += 1
        # Receive a body no faster than the app takes it, a piece at a time: gunicorn
        # would read up to 1 MiB ahead, uncounted, for each connection.
        req.unreader.max_body_chunk = settings.BODY_READ_PIECE_BYTES
        if connections.header_bytes(req) > settings.MAX_HEADER_BYTES:
            raise gunicorn.http.errors.LimitRequestHeaders(
                f"request headers larger than {settings.MAX_HEADER_BYTES} bytes in total"
            )
        try:
            return super().handle_request(listener_name, req, sock, addr)
        except TimeoutError:
            self.log.warning("client too slow to take its answer; connection closed")
            raise StopIteration() from None
        finally:
            connection.request = None

    def _make_room(self) -> None:
        """Shed `settings.SPARE_CONNECTIONS` connections when fewer are free."""
        staying = len(self.connections) - self.dropping
        if staying < self.worker_connections - settings.SPARE_CONNECTIONS:
            return
        shed = connections.shed_candidates(self.connections, now=time.monotonic())[
            : settings.SPARE_CONNECTIONS
        ]
        for greenlet in shed:
            self._drop(greenlet, "shed")
        self.log.warning(
            "%d connections open: shed %d (idle or sending slowly)", staying, len(shed)
        )

    def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None:
        if isinstance(exc, connections.Dropped | gevent.GreenletExit):
            if req is None:  # waiting for a request: nothing to answer
                self.log.debug("closed an idle connection (%s)", exc)
                return
            self.log.debug("closed a connection during its request (%s)", exc)
            status, reason = 503, "Service Unavailable"
            message = "the server is closing connections; retry"
        else:
            status, reason = connections.error_status(exc)
            message = f"{reason}: {exc}"
            if status >= 500:
                self.log.exception("error handling a request")
            else:
                self.log.warning("invalid request: %s", exc)
        try:
            client.sendall(connections.error_response(status, reason, message))
        except OSError:
            self.log.debug("could not send the error answer")


class JsonLogger(gunicorn.glogging.Logger):  # type: ignore[misc]
    """gunicorn's own log lines in the same JSON format as the hook lines."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        for handler in self.error_log.handlers:
            handler.setFormatter(observability.JsonFormatter())


def child_exit(server: object, worker: Any) -> None:
    """gunicorn's hook when a worker exits: its metrics files stop counting as live."""
    multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]
