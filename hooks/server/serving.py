"""Running the hook server: gunicorn configured in code around the Flask app of `hooks.server.app`.

Every number below is `hooks.server.settings`'s; the policy is `hooks.server.connections`'s,
applied by the gevent worker of `hooks.server.worker`.

Worker model: gevent (an event loop per worker process). A connection that is idle, or sends its
request slowly, holds only a cheap greenlet, so slow or hostile clients cannot take the workers
away from Metacontroller and the probes:

- the headers of a connection's first request must arrive within `FIRST_REQUEST_SECONDS`, those
  of later ones within the keep-alive time; at most `MAX_HEADER_FIELDS` fields of at most
  `MAX_HEADER_FIELD_BYTES` each, and `MAX_HEADER_BYTES` together (else 431);
- while a request is handled, every read from and write to its socket must complete within
  `READ_TIMEOUT_SECONDS`, and the app reads the whole body within its deadline
  (`hooks.server.bodies`); a connection whose body was not read to its end is closed after the
  answer (where its next request would start is unknown);
- one worker holds at most `WORKER_CONNECTIONS` connections. When a new one leaves fewer than
  `SPARE_CONNECTIONS` free, that many are shed (`connections.shed_candidates`): kept-alive ones
  waiting for their next request (closed quietly), then those still sending their body
  (answered 503), then those that have sent nothing for `FRESH_SECONDS`, oldest first. A flood
  of idle or slow connections can never keep a probe from being accepted and answered;
- a socket is read at most `READ_AHEAD_BYTES` at a time, so the bytes of a body received but
  not yet counted by the app (`bodies.BufferedBodies`) stay below that per connection.

Hook calls on small bodies are CPU work that never yields, so one worker runs one at a time;
large bodies are answered in child processes (`hooks.server.bodies`) while the worker keeps
serving. Run more workers (or pod replicas) for CPU parallelism. Keep-alive stays on
(Metacontroller's Go client reuses connections). A worker busy longer than `timeout`
(`DEFAULT_TIMEOUT_SECONDS`) is restarted. At shutdown, idle kept-alive connections are closed
without an answer.

gunicorn's own errors (a malformed request line, headers too large, a URI too long) are answered
with the same small JSON body as the app's, with the message capped.

No config file and no control socket; worker heartbeat files go to /dev/shm (else TMPDIR) and the
Prometheus multiprocess directory is created fresh under TMPDIR and removed when the arbiter
exits. Nothing is written anywhere else, so the server runs as a non-root user on a read-only root
filesystem where only /tmp is writable.

prometheus_client chooses between in-process and multiprocess metric storage when it is first
imported, so `serve` sets PROMETHEUS_MULTIPROC_DIR before it imports `hooks.server.app` (and with it
`hooks.server.observability`, the only module that imports prometheus_client). gevent patches the
standard library before that import too.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import gunicorn.app.base  # type: ignore[import-untyped]
import gunicorn.config  # type: ignore[import-untyped]

from hooks.server import settings
from hooks.server.settings import Limits


class ServerError(Exception):
    """The server cannot start."""


class AddressError(ServerError):
    """An address that is not HOST:PORT."""


@dataclass(frozen=True, slots=True)
class Address:
    """Where the server listens."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def parse_address(text: str) -> Address:
    """HOST:PORT (a name, an IPv4 address or a bracketed IPv6 address; a port 1-65535)."""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise AddressError(f"{text!r} is not HOST:PORT with a port from 1 to 65535")
    return Address(host, int(port))


def check_can_listen(address: Address) -> None:
    """Raise `ServerError` when the server could not listen at `address` (a name that does not
    resolve, a port in use or not allowed), before gunicorn tries and retries."""
    host = address.host.removeprefix("[").removesuffix("]")
    try:
        family, kind, proto, _, where = socket.getaddrinfo(
            host, address.port, type=socket.SOCK_STREAM
        )[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(where)
    except OSError as error:
        reason = error.strerror or str(error)
        raise ServerError(f"cannot listen on {address}: {reason}") from None


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


def serve(
    *,
    bind: Address,
    workers: int,
    timeout: int,
    log_level: str,
    limits: Limits,
    metrics_bind: Address | None = None,
) -> None:
    """Run the hook server until gunicorn's arbiter exits.

    With `metrics_bind`, the server also listens there, and serves only /metrics and /healthz on
    that address. Raises `ServerError` when it cannot start (one of the addresses cannot be
    listened on, for example).
    """
    if "prometheus_client" in sys.modules:
        raise ServerError("serve must start in a fresh process (prometheus_client already loaded)")
    addresses = [bind] if metrics_bind is None else [bind, metrics_bind]
    for address in addresses:
        check_can_listen(address)
    from gevent import monkey  # type: ignore[import-untyped]

    monkey.patch_all()
    arbiter_pid = os.getpid()
    _use_multiprocess_metrics(arbiter_pid)
    # prometheus_client chooses between in-process and multiprocess metric storage when it is
    # first imported, so the app and the worker (its importers) are imported only now.
    from hooks.server import app, observability, worker

    options = _options(
        addresses, workers=workers, timeout=timeout, log_level=log_level, worker=worker
    )

    def load() -> Any:
        wsgi = app.create_app(
            limits=limits,
            log_level=log_level,
            metrics_port=None if metrics_bind is None else metrics_bind.port,
            server_pid=arbiter_pid,
        )
        observability.log_start(_start_fields(options, limits))
        return wsgi

    _GunicornServer(_supported_options(options), load).run()


def _use_multiprocess_metrics(arbiter_pid: int) -> None:
    """A fresh directory for the workers' metrics, named in the environment and removed when
    the arbiter exits."""
    metrics_dir = tempfile.mkdtemp(prefix="hooks-metrics-")
    os.environ[settings.MULTIPROC_ENV] = metrics_dir

    def remove_metrics_dir() -> None:
        # Workers are forks that also run exit handlers: only the arbiter owns the directory.
        if os.getpid() == arbiter_pid:
            shutil.rmtree(metrics_dir, ignore_errors=True)

    atexit.register(remove_metrics_dir)


def _options(
    addresses: Sequence[Address], *, workers: int, timeout: int, log_level: str, worker: Any
) -> dict[str, object]:
    """gunicorn's settings (`worker`: `hooks.server.worker`, imported by the caller)."""
    return {
        "bind": [str(address) for address in addresses],
        "workers": workers,
        "worker_class": worker.HookWorker,
        "worker_connections": settings.WORKER_CONNECTIONS,
        "keepalive": settings.KEEPALIVE_SECONDS,
        "timeout": timeout,
        "limit_request_fields": settings.MAX_HEADER_FIELDS,
        "limit_request_field_size": settings.MAX_HEADER_FIELD_BYTES,
        "loglevel": log_level,
        "logger_class": worker.JsonLogger,
        "worker_tmp_dir": _worker_tmp_dir(),
        # Import and build the app once in the arbiter: a broken install fails at start-up.
        "preload_app": True,
        "proc_name": "disaggregatedset-hooks",
        "child_exit": worker.child_exit,
    }


def _start_fields(options: Mapping[str, object], limits: Limits) -> dict[str, object]:
    """What the start line says: the addresses, the worker settings and every limit."""
    return {
        "bind": options["bind"],
        "workers": options["workers"],
        "timeout_seconds": options["timeout"],
        "worker_connections": settings.WORKER_CONNECTIONS,
        "keepalive_seconds": settings.KEEPALIVE_SECONDS,
        "read_timeout_seconds": settings.READ_TIMEOUT_SECONDS,
        "max_header_bytes": settings.MAX_HEADER_BYTES,
        "max_header_fields": settings.MAX_HEADER_FIELDS,
        "max_body_bytes": limits.max_body_bytes,
        "max_parse_bytes": limits.max_parse_bytes,
        "buffered_bytes": limits.buffered_bytes,
        "isolate_above_bytes": limits.isolate_above_bytes,
        "body_deadline_seconds": limits.body_deadline_seconds,
        "call_deadline_seconds": limits.call_deadline_seconds,
    }


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
