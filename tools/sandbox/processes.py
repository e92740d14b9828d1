"""Local processes of the sandbox: free ports, start in a process group, wait, stop.

Every process starts in its own session (so gunicorn's workers or any other children share its
process group, and a Ctrl-C at the terminal reaches only the sandbox, which stops them in order),
writes its output to a log file, and is stopped by signalling that group: SIGTERM, then SIGKILL
after a grace period.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

STOP_GRACE_SECONDS: Final = 5.0
LOG_TAIL_LINES: Final = 30
LOCAL_GET_TIMEOUT_SECONDS: Final = 1.0
"""How long `local_get` waits to connect and for each read: a loopback server answers at once."""
TRANSPORT_ERRORS: Final = (OSError, http.client.HTTPException)
"""What a request that got no answer raises: refused, reset, timed out, cut short."""


class ProcessError(Exception):
    """A process did not start, or exited when it should be running."""


def is_listening(port: int) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:`port`."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(1)
        return probe.connect_ex(("127.0.0.1", port)) == 0


@dataclass(frozen=True, slots=True)
class Answer:
    """An HTTP answer, read whole."""

    status: int
    body: bytes

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.body)


def local_get(url: str) -> Answer:
    """GET a plain-http loopback URL directly (no proxy settings from the environment); raises
    one of `TRANSPORT_ERRORS` when no answer comes."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(
        parts.hostname or "127.0.0.1", parts.port, timeout=LOCAL_GET_TIMEOUT_SECONDS
    )
    try:
        connection.request("GET", parts.path + (f"?{parts.query}" if parts.query else ""))
        response = connection.getresponse()
        return Answer(status=response.status, body=response.read())
    finally:
        connection.close()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Process:
    """One started program: its name, Popen handle and log file."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def running(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self) -> str:
        """The last lines the process wrote, for error messages."""
        try:
            lines = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-LOG_TAIL_LINES:])

    def stop(self) -> None:
        """Stop the whole process group: SIGTERM, then SIGKILL after the grace period."""
        if not self.running():
            self._reap_group()
            return
        self._signal_group(signal.SIGTERM)
        try:
            self.popen.wait(timeout=STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            self._signal_group(signal.SIGKILL)
            self.popen.wait(timeout=STOP_GRACE_SECONDS)
        self._reap_group()

    def kill(self) -> None:
        """Kill the whole process group at once (a crash, not a shutdown)."""
        self._signal_group(signal.SIGKILL)
        self.popen.wait(timeout=STOP_GRACE_SECONDS)

    def _reap_group(self) -> None:
        # Children that outlived their leader (gunicorn workers, say) still carry its group id.
        self._signal_group(signal.SIGKILL)

    def _signal_group(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, sig)


def start(
    name: str,
    command: Sequence[str],
    *,
    log_dir: Path,
    env: Mapping[str, str] | None = None,
) -> Process:
    """Start `command` in a new session with stdout and stderr in `log_dir/<name>.log`."""
    log = log_dir / f"{name}.log"
    with log.open("ab") as output:
        popen = subprocess.Popen(
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=dict(env) if env is not None else None,
        )
    return Process(name=name, popen=popen, log=log)


def wait_until_ready(
    process: Process, ready: Callable[[], bool], *, timeout: float, interval: float = 0.05
) -> None:
    """Poll `ready` until true; raise with the log tail if the process dies or time runs out.

    A probe that fails with one of `TRANSPORT_ERRORS` (a refused connection, say) counts as not
    ready; a timeout's message names the last answer (False, or that error)."""
    deadline = time.monotonic() + timeout
    last_seen = "no probe finished"
    while True:
        if not process.running():
            raise ProcessError(
                f"{process.name} exited with {process.popen.returncode}:\n{process.log_tail()}"
            )
        try:
            if ready():
                return
            last_seen = "the probe answered not ready"
        except TRANSPORT_ERRORS as error:
            last_seen = f"the probe failed: {type(error).__name__}: {error}"
        if time.monotonic() > deadline:
            raise ProcessError(
                f"{process.name} not ready after {timeout:.0f} s ({last_seen}):\n"
                f"{process.log_tail()}"
            )
        time.sleep(interval)
