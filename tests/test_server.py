"""`python -m hooks serve` end to end: gunicorn with two workers, a real hook call, /metrics.

The server runs as a subprocess with TMPDIR pointing into the test's tmp_path, the only place it
may write (its Prometheus multiprocess directory; worker heartbeats go to /dev/shm when present).
Waiting is by polling with a deadline, never by a fixed sleep; nothing asserts on timing.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES = REPO_ROOT / "tests" / "fixtures" / "requests"
START_DEADLINE_SECONDS = 60.0
POLL_INTERVAL_SECONDS = 0.05


@dataclass(frozen=True)
class Server:
    process: subprocess.Popen[bytes]
    url: str
    tmpdir: Path
    stderr_path: Path

    def log_lines(self) -> list[str]:
        return self.stderr_path.read_text(errors="replace").splitlines()


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_until_healthy(server: Server) -> None:
    deadline = time.monotonic() + START_DEADLINE_SECONDS
    while True:
        if server.process.poll() is not None:
            pytest.fail(
                f"server exited with {server.process.returncode}:\n"
                + "\n".join(server.log_lines()[-40:])
            )
        try:
            if requests.get(f"{server.url}/healthz", timeout=2).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        if time.monotonic() > deadline:
            pytest.fail("server did not answer /healthz:\n" + "\n".join(server.log_lines()[-40:]))
        time.sleep(POLL_INTERVAL_SECONDS)  # poll interval, not a wait for a condition


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    stderr_path = tmp_path / "server.stderr"
    port = free_port()
    env = {
        **os.environ,
        "TMPDIR": str(tmpdir),
        "PYTHONPATH": str(REPO_ROOT),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    with stderr_path.open("wb") as stderr:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "hooks",
                "serve",
                "--bind",
                f"127.0.0.1:{port}",
                "--workers",
                "2",
            ],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    running = Server(process, f"http://127.0.0.1:{port}", tmpdir, stderr_path)
    try:
        wait_until_healthy(running)
        yield running
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def test_served_hooks_answer_and_metrics_aggregate_the_workers(server: Server) -> None:
    body = (FIXTURES / "ds-sync-first.json").read_bytes()
    with requests.Session() as session:
        answers = [
            session.post(
                f"{server.url}/sync",
                data=body,
                headers={"Content-Type": "application/json"},
                timeout=30,
            )
            for _ in range(4)
        ]
        customize = session.post(
            f"{server.url}/customize",
            data=(FIXTURES / "ds-customize.json").read_bytes(),
            timeout=30,
        )
        broken = session.post(f"{server.url}/sync", data=b"{broken", timeout=30)
        metrics = session.get(f"{server.url}/metrics", timeout=30)

    for answer in answers:
        assert answer.status_code == 200, answer.text
        assert answer.headers["Content-Type"] == "application/json"
    document = answers[0].json()
    assert isinstance(document["children"], list)
    assert isinstance(document["status"], dict)
    # Same answer from whichever worker, apart from the server's clock (a second may pass).
    assert all(_without_times(answer.json()) == _without_times(document) for answer in answers)
    assert customize.status_code == 200
    assert "relatedResources" in customize.json()
    assert broken.status_code == 400
    assert broken.json()["hook"] == "sync"

    assert metrics.status_code == 200
    text = metrics.text
    # Whichever worker answered which call, /metrics sums all of them.
    assert 'disaggregatedset_hook_calls_total{code="200",hook="sync"' in text
    sync_total = sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith('disaggregatedset_hook_calls_total{code="200",hook="sync"')
    )
    assert sync_total == 4.0
    assert 'disaggregatedset_hook_errors_total{error="invalid_json",hook="sync"} 1.0' in text
    assert 'disaggregatedset_hook_duration_seconds_count{hook="customize"} 1.0' in text


def test_server_logs_json_lines_and_stops_cleanly_on_sigterm(server: Server) -> None:
    answer = requests.post(
        f"{server.url}/rolescaler/sync",
        data=(FIXTURES / "rolescaler-sync.json").read_bytes(),
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    assert list(server.tmpdir.glob("hooks-metrics-*")), "multiprocess directory under TMPDIR"

    server.process.send_signal(signal.SIGTERM)
    code = server.process.wait(timeout=60)

    assert code == 0
    lines = [json.loads(line) for line in server.log_lines() if line.strip()]
    hook_lines = [line for line in lines if line.get("logger") == "hooks.app"]
    assert [(line["hook"], line["status"]) for line in hook_lines] == [("rolescaler-sync", 200)]
    assert isinstance(hook_lines[0]["duration_ms"], float)
    assert any(line.get("logger") == "gunicorn.error" for line in lines)
    assert list(server.tmpdir.glob("hooks-metrics-*")) == [], "removed on exit"


def _without_times(document: dict[str, object]) -> dict[str, object]:
    status = dict(document["status"])  # type: ignore[call-overload]
    status["conditions"] = [
        {key: value for key, value in condition.items() if key != "lastTransitionTime"}
        for condition in status.get("conditions", [])
    ]
    return {**document, "status": status}


def _raw_exchange(server: Server, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send raw bytes, read the whole answer: (status, headers, body)."""
    host, port = server.url.removeprefix("http://").split(":")
    answer = b""
    with socket.create_connection((host, int(port)), timeout=30) as connection:
        connection.sendall(request)
        # The server may close with our unread bytes still queued: a reset after the answer.
        with contextlib.suppress(ConnectionResetError):
            while chunk := connection.recv(65536):
                answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {
        name.lower(): value.strip() for name, value in (line.split(":", 1) for line in header_lines)
    }
    return int(status_line.split()[1]), headers, body


@pytest.mark.parametrize(
    ("request_bytes", "status"),
    [
        (b"NOT A REQUEST\r\n\r\n", 400),
        (b"GET /" + b"x" * 10_000 + b" HTTP/1.1\r\nHost: h\r\n\r\n", 414),
        (b"GET / HTTP/1.1\r\nHost: h\r\n" + b"X-A: b\r\n" * 200 + b"\r\n", 431),
    ],
    ids=["bad-request-line", "uri-too-long", "too-many-headers"],
)
def test_the_servers_own_errors_answer_capped_json(
    server: Server, request_bytes: bytes, status: int
) -> None:
    """Regression: gunicorn answered its own 400/414/431 with HTML pages echoing the input."""
    code, headers, body = _raw_exchange(server, request_bytes)
    assert code == status
    assert headers["content-type"] == "application/json"
    document = json.loads(body)
    assert set(document) == {"error"}
    assert len(body) < 1000


def test_idle_and_slow_clients_do_not_take_the_server_away(server: Server) -> None:
    """Regression: two idle connections blocked both sync workers until their 30 s timeout,
    and 50 clients dribbling a body kept /healthz and /sync at 0% availability.
    (`bench/server_limits.py --cases slow-clients` measures the latency under this load.)"""
    host, port = server.url.removeprefix("http://").split(":")
    idle = [socket.create_connection((host, int(port)), timeout=30) for _ in range(20)]
    dribbling = []
    for _ in range(50):
        connection = socket.create_connection((host, int(port)), timeout=30)
        connection.sendall(
            b"POST /sync HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100000\r\n\r\n{"
        )
        dribbling.append(connection)
    try:
        with requests.Session() as session:
            health = session.get(f"{server.url}/healthz", timeout=10)
            answer = session.post(
                f"{server.url}/sync",
                data=(FIXTURES / "ds-sync-first.json").read_bytes(),
                timeout=10,
            )
        assert health.status_code == 200
        assert answer.status_code == 200
        assert answer.headers.get("Connection", "keep-alive").lower() != "close"
    finally:
        for connection in idle + dribbling:
            connection.close()
