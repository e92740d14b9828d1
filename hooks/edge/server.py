"""Running the hook server: gunicorn configured in code around the Flask app of `hooks.edge.app`.

Worker model: gevent (an event loop per worker process). A connection that is idle, or sends its
request slowly, holds only a cheap greenlet, so slow or hostile clients cannot take the workers
away from Metacontroller and the probes: request headers must arrive within the keep-alive time,
every read of a body within `READ_TIMEOUT_SECONDS`, the whole body within the app's deadline.
Hook calls are CPU work that never yields, so one worker runs one call at a time; run more
workers (or pod replicas) for CPU parallelism. Keep-alive stays on (Metacontroller's Go client
reuses connections). A worker busy longer than `timeout` (default 9 s, below Metacontroller's
10 s webhook timeout, after which the answer is useless) is restarted.

gunicorn's own errors (a malformed request line, headers too large, a URI too long) are answered
with the same small JSON body as the app's, with the message capped.

No config file and no control socket; worker heartbeat files go to /dev/shm (else TMPDIR) and the
Prometheus multiprocess directory is created fresh under TMPDIR and removed when the arbiter
exits. Nothing is written anywhere else, so the server runs as a non-root user on a read-only root
filesystem where only /tmp is writable.

prometheus_client chooses between in-process and multiprocess metric storage when it is first
imported, so `serve` sets PROMETHEUS_MULTIPROC_DIR before it imports `hooks.edge.app` (and with it
`hooks.edge.observability`, the only module that imports prometheus_client). gevent patches the
standard library before that import too.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

import gunicorn.app.base  # type: ignore[import-untyped]
import gunicorn.config  # type: ignore[import-untyped]
import gunicorn.glogging  # type: ignore[import-untyped]
import gunicorn.http.errors  # type: ignore[import-untyped]
import orjson

from hooks.edge import settings
from hooks.edge.settings import Limits

READ_TIMEOUT_SECONDS: Final = 10.0
KEEPALIVE_SECONDS: Final = 75  # longer than Go's default idle timeout would waste nothing
WORKER_CONNECTIONS: Final = 1000

# gunicorn's request errors → (status, reason); anything else it raises is a 500.
_CLIENT_ERRORS: Final[tuple[tuple[str, int, str], ...]] = (
    ("LimitRequestLine", 414, "URI Too Long"),
    ("LimitRequestHeaders", 431, "Request Header Fields Too Large"),
    ("UnsupportedTransferCoding", 501, "Not Implemented"),
    ("ExpectationFailed", 417, "Expectation Failed"),
    ("ForbiddenProxyRequest", 403, "Forbidden"),
    ("ParseException", 400, "Bad Request"),
)


class ServerError(Exception):
    """The server cannot start."""


class _GunicornServer(gunicorn.app.base.BaseApplication):  # type: ignore[misc]
    """gunicorn configured from a dict, serving the WSGI app that `load` builds."""

    def __init__(self, options: Mapping[str, object], load: Callable[[], Any]) -> None:
        self._options = options
        self._load = load
        super().__init__()

    def load_config(self) -> None:
        for key, value in self._options.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        return self._load()


def error_status(error: BaseException) -> tuple[int, str]:
    """The HTTP status and reason gunicorn's request error deserves."""
    for name, status, reason in _CLIENT_ERRORS:
        cls = getattr(gunicorn.http.errors, name, None)
        if cls is not None and isinstance(error, cls):
            return status, reason
    return 500, "Internal Server Error"


def error_response(status: int, reason: str, message: str) -> bytes:
    """A complete HTTP/1.1 error response with the app's JSON error body."""
    from hooks.edge import app  # imported late: see the module docstring

    body = orjson.dumps({"error": app.cap_message(message)})
    head = (
        f"HTTP/1.1 {status} {reason}\r\nConnection: close\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode("latin-1") + body


def _worker_class() -> type:
    """The gevent worker with read timeouts, JSON error answers, and idle keep-alive
    connections closed at shutdown instead of waited for (imported late: gevent)."""
    import gevent  # type: ignore[import-untyped]
    from gunicorn.workers.ggevent import GeventWorker  # type: ignore[import-untyped]

    class HookWorker(GeventWorker):  # type: ignore[misc]
        idle: set[Any]

        def run(self) -> None:
            self.idle = set()
            gevent.spawn(self._close_idle_at_exit)
            super().run()

        def _close_idle_at_exit(self) -> None:
            while self.alive:
                gevent.sleep(0.2)
            for waiting in list(self.idle):
                waiting.kill(block=False)

        @contextlib.contextmanager
        def timeout_ctx(self) -> Iterator[None]:
            # gunicorn waits for the next request of a kept-alive connection in here.
            current = gevent.getcurrent()
            self.idle.add(current)
            try:
                with gevent.Timeout(self.cfg.keepalive, False):
                    yield
            finally:
                self.idle.discard(current)

        def handle(self, listener: Any, client: Any, addr: Any) -> None:
            client.settimeout(READ_TIMEOUT_SECONDS)
            super().handle(listener, client, addr)

        def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None:
            status, reason = error_status(exc)
            if status >= 500:
                self.log.exception("error handling a request")
            else:
                self.log.warning("invalid request: %s", exc)
            try:
                client.sendall(error_response(status, reason, f"{reason}: {exc}"))
            except OSError:
                self.log.debug("could not send the error answer")

    return HookWorker


def serve(
    *,
    bind: str,
    workers: int,
    timeout: int,
    log_level: str,
    limits: Limits,
    metrics_bind: str | None = None,
) -> None:
    """Run the hook server until gunicorn's arbiter exits.

    With `metrics_bind`, the server also listens there, and serves only /metrics and /healthz on
    that address.
    """
    metrics_port = _port_of(metrics_bind) if metrics_bind is not None else None
    if "prometheus_client" in sys.modules:
        raise ServerError("serve must start in a fresh process (prometheus_client already loaded)")
    from gevent import monkey

    monkey.patch_all()
    metrics_dir = tempfile.mkdtemp(prefix="hooks-metrics-")
    os.environ[settings.MULTIPROC_ENV] = metrics_dir
    arbiter_pid = os.getpid()

    def remove_metrics_dir() -> None:
        # Workers are forks that also run exit handlers: only the arbiter owns the directory.
        if os.getpid() == arbiter_pid:
            shutil.rmtree(metrics_dir, ignore_errors=True)

    atexit.register(remove_metrics_dir)
    # prometheus_client chooses between in-process and multiprocess metric storage when it is
    # first imported, so the app (its only importer) may be imported only after the line above.
    from hooks.edge import app, observability

    def child_exit(server: object, worker: Any) -> None:
        observability.mark_process_dead(worker.pid)

    class JsonLogger(gunicorn.glogging.Logger):  # type: ignore[misc]
        """gunicorn's own log lines in the same JSON format as the hook lines."""

        def setup(self, cfg: Any) -> None:
            super().setup(cfg)
            for handler in self.error_log.handlers:
                handler.setFormatter(observability.JsonFormatter())

    options: dict[str, object] = {
        "bind": [bind] if metrics_bind is None else [bind, metrics_bind],
        "workers": workers,
        "worker_class": _worker_class(),
        "worker_connections": WORKER_CONNECTIONS,
        "keepalive": KEEPALIVE_SECONDS,
        "timeout": timeout,
        "loglevel": log_level,
        "logger_class": JsonLogger,
        "worker_tmp_dir": _worker_tmp_dir(),
        # Import and build the app once in the arbiter: a broken install fails at start-up.
        "preload_app": True,
        "proc_name": "disaggregatedset-hooks",
        "child_exit": child_exit,
    }
    arbiter = _GunicornServer(
        _supported_options(options),
        lambda: app.create_app(limits=limits, log_level=log_level, metrics_port=metrics_port),
    )
    arbiter.run()


def _port_of(address: str) -> int:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ServerError(f"{address!r} is not HOST:PORT")
    return int(port)


def _supported_options(options: dict[str, object]) -> dict[str, object]:
    """The options plus, on gunicorn versions that have one, a disabled control socket.

    The control socket would be created under $HOME or $XDG_RUNTIME_DIR, which may be read-only.
    """
    known = gunicorn.config.Config().settings
    if "control_socket_disable" in known:
        return {**options, "control_socket_disable": True}
    return options


def _worker_tmp_dir() -> str:
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK):
        return shm
    return tempfile.gettempdir()
