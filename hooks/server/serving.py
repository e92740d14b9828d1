"""Running the hook server: gunicorn configured in code around the Flask app of `hooks.server.app`
(docs/operations.md, "The hook server"), with the worker of `hooks.server.worker`.
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
    if not host or not (port.isascii() and port.isdigit()) or not 1 <= int(port) <= 65535:
        raise ServerError(f"{text!r} is not HOST:PORT with a port from 1 to 65535")
    return Address(host, int(port))


def check_can_listen(address: Address) -> None:
    """Raise `ServerError` when the server could not listen at `address`, before gunicorn tries
    and retries."""
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
    """Run the hook server until gunicorn's arbiter exits (with `metrics_bind`, serving only
    /metrics and /healthz there); `ServerError` when it cannot start."""
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

    _GunicornServer(options, load).run()


def _use_multiprocess_metrics(arbiter_pid: int) -> None:
    """A fresh directory for the workers' metrics, in the environment until the arbiter exits."""
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
    shm = "/dev/shm"
    in_memory = os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK)
    options: dict[str, object] = {
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
        "worker_tmp_dir": shm if in_memory else tempfile.gettempdir(),
        # Import and build the app once in the arbiter: a broken install fails at start-up.
        "preload_app": True,
        "proc_name": "disaggregatedset-hooks",
        "child_exit": worker.child_exit,
    }
    if "control_socket_disable" in gunicorn.config.Config().settings:
        # Else gunicorn creates one under $HOME or $XDG_RUNTIME_DIR, which may be read-only.
        options["control_socket_disable"] = True
    return options


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
