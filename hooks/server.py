"""Running the hook server: gunicorn configured in code around the Flask app of `hooks.app`.

No config file and no control socket; worker heartbeat files go to /dev/shm (else TMPDIR) and the
Prometheus multiprocess directory is created fresh under TMPDIR and removed when the arbiter
exits. Nothing is written anywhere else, so the server runs as a non-root user on a read-only root
filesystem where only /tmp is writable.

prometheus_client chooses between in-process and multiprocess metric storage when it is first
imported, so `serve` sets PROMETHEUS_MULTIPROC_DIR before it imports `hooks.app`, the only module
that imports prometheus_client.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping
from typing import Any, Final

import gunicorn.app.base  # type: ignore[import-untyped]
import gunicorn.config  # type: ignore[import-untyped]
import gunicorn.glogging  # type: ignore[import-untyped]

MULTIPROC_ENV: Final = "PROMETHEUS_MULTIPROC_DIR"


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


def serve(*, bind: str, workers: int, timeout: int, log_level: str, max_body_bytes: int) -> None:
    """Run the hook server until gunicorn's arbiter exits."""
    if "prometheus_client" in sys.modules:
        raise ServerError("serve must start in a fresh process (prometheus_client already loaded)")
    metrics_dir = tempfile.mkdtemp(prefix="hooks-metrics-")
    os.environ[MULTIPROC_ENV] = metrics_dir
    arbiter_pid = os.getpid()

    def remove_metrics_dir() -> None:
        # Workers are forks that also run exit handlers: only the arbiter owns the directory.
        if os.getpid() == arbiter_pid:
            shutil.rmtree(metrics_dir, ignore_errors=True)

    atexit.register(remove_metrics_dir)
    # prometheus_client chooses between in-process and multiprocess metric storage when it is
    # first imported, so the app (its only importer) may be imported only after the line above.
    from hooks import app

    def child_exit(server: object, worker: Any) -> None:
        app.mark_process_dead(worker.pid)

    class JsonLogger(gunicorn.glogging.Logger):  # type: ignore[misc]
        """gunicorn's own log lines in the same JSON format as the hook lines."""

        def setup(self, cfg: Any) -> None:
            super().setup(cfg)
            for handler in self.error_log.handlers:
                handler.setFormatter(app.JsonFormatter())

    options: dict[str, object] = {
        "bind": [bind],
        "workers": workers,
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
        lambda: app.create_app(max_body_bytes=max_body_bytes, log_level=log_level),
    )
    arbiter.run()


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
