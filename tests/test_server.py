"""`python -m hooks serve` end to end: gunicorn, real hook calls, /metrics, and the limits of issue
17 against a real server (bodies that stall, that hold memory or CPU, broken framing, floods of
connections, huge headers, shutdown).

The server runs as a subprocess with TMPDIR pointing into the test's tmp_path, the only place it
may write (its Prometheus multiprocess directory; worker heartbeats go to /dev/shm when present).
Waiting is by polling with a deadline, never by a fixed sleep, and no test asserts how long
anything took: that /healthz answers while a large body is parsed is shown by stopping the child
process that parses it (SIGSTOP) and asking /healthz meanwhile.
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
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from tests.shared import PROJECT_VERSION

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


@contextlib.contextmanager
def running(tmp_path: Path, *arguments: str) -> Iterator[Server]:
    """`python -m hooks serve` on a free port with these arguments, stopped with SIGTERM."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir(exist_ok=True)
    stderr_path = tmp_path / f"server-{len(list(tmp_path.glob('server-*')))}.stderr"
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
            [sys.executable, "-m", "hooks", "serve", "--bind", f"127.0.0.1:{port}", *arguments],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    started = Server(process, f"http://127.0.0.1:{port}", tmpdir, stderr_path)
    try:
        wait_until_healthy(started)
        yield started
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    with running(tmp_path, "--workers", "2") as started:
        yield started


@pytest.fixture
def one_worker(tmp_path: Path) -> Iterator[Server]:
    """A server with the defaults of the Deployment: one worker."""
    with running(tmp_path) as started:
        yield started


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
    if isinstance(status.get("rollout"), dict):  # a new set's record of its coming up
        status["rollout"] = {k: v for k, v in status["rollout"].items() if k != "lastProgressTime"}
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


# --- the limits of issue 17 ----------------------------------------------------------------------

# How long a test waits for an answer the server gives after its 10 s read timeout.
ANSWER_WAIT_SECONDS = 60.0


def _address(server: Server) -> tuple[str, int]:
    host, port = server.url.removeprefix("http://").split(":")
    return host, int(port)


def _post_head(*, length: int | None, path: str = "/sync") -> bytes:
    framing = b"Transfer-Encoding: chunked" if length is None else b"Content-Length: %d" % length
    return b"POST %s HTTP/1.1\r\nHost: h\r\n%s\r\n\r\n" % (path.encode(), framing)


def _read_until_closed(connection: socket.socket) -> bytes:
    answer = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := connection.recv(65536):
            answer += chunk
    return answer


def _children(pid: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _worker_pids(server: Server) -> list[int]:
    return _children(server.process.pid)


def _scrape_with_stable_workers(server: Server) -> tuple[str, list[int]]:
    """/metrics, and the workers that ran before and after it: gunicorn may replace a worker
    (on a loaded machine, one late with its heartbeat), so a scrape counts only when the same
    workers ran around it."""
    seen: list[object] = []
    for _ in range(20):
        before = _worker_pids(server)
        metrics = requests.get(f"{server.url}/metrics", timeout=30).text
        if _worker_pids(server) == before:
            return metrics, before
        seen.append(before)
    raise AssertionError(f"the workers kept changing around a scrape: {seen}")


def _peak_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise LookupError(pid)


def _state(pid: int) -> str:
    """The scheduler state of a process (R running, S sleeping, T stopped, ...)."""
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]


def _child_answering(worker: int, call: Future[requests.Response]) -> int:
    """The child process `worker` forked to answer `call`, once there is one."""
    deadline = time.monotonic() + START_DEADLINE_SECONDS
    while not (children := _children(worker)):
        if call.done():
            pytest.fail(f"answered without a child process: {call.result().status_code}")
        if time.monotonic() > deadline:
            pytest.fail(f"no child process after {START_DEADLINE_SECONDS:.0f} s")
        time.sleep(POLL_INTERVAL_SECONDS)  # poll interval, not a wait for a condition
    [child] = children
    return child


def _nested(size: int, depth: int = 500) -> bytes:
    unit = b"[" * depth + b"]" * depth
    return b"[" + b",".join([unit] * (size // (len(unit) + 1))) + b"]"


def test_a_hostile_body_is_refused_within_the_memory_bound_while_healthz_answers(
    tmp_path: Path,
) -> None:
    """Regression (issue 17, item 2): a 32.8 MiB body of arrays nested 500 deep passed the parse
    estimate and took the worker to 1,683 MiB (the Deployment allows 1,536) while holding the
    CPU for 5 s; /healthz waited behind it. Large bodies are now answered in a child process
    limited to --max-parse-bytes, and the worker keeps answering: /healthz answers while that
    child is stopped halfway through its parse."""
    nested = _nested(int(32.8 * 1024 * 1024))
    # Parses within the budget (about 500 MiB), then is no request: answered 400.
    floats = b"[" + b",".join([b"0.5"] * (10 * 1024 * 1024)) + b"]"

    # One worker, as in the Deployment; a call deadline that the stopped child cannot reach.
    with running(tmp_path, "--timeout", "120") as server, ThreadPoolExecutor(1) as pool:
        [worker] = _worker_pids(server)
        refusing = pool.submit(requests.post, f"{server.url}/sync", data=nested, timeout=300)
        child = _child_answering(worker, refusing)
        os.kill(child, signal.SIGSTOP)
        try:
            health = requests.get(f"{server.url}/healthz", timeout=60)
            state = _state(child)
        finally:
            os.kill(child, signal.SIGCONT)
        refused = refusing.result()
        parsed = requests.post(f"{server.url}/sync", data=floats, timeout=300)
        peak = _peak_mib(worker)

    assert health.status_code == 200
    assert state == "T", "the child was still stopped when /healthz answered"
    assert refused.status_code == 413
    assert refused.json() == {"error": "request body would take too much memory", "hook": "sync"}
    assert parsed.status_code == 400
    assert peak < 400  # the bodies and the process; the parses ran in children


def test_stalled_bodies_are_answered_408_and_closed(one_worker: Server) -> None:
    """Regression (issue 17, item 3): a body that stalled before 1 MiB had arrived got no
    answer and no close after 40-70 s, with a Content-Length or chunked."""
    with_length = socket.create_connection(_address(one_worker), timeout=ANSWER_WAIT_SECONDS)
    with_length.sendall(_post_head(length=100_000) + b'{"padding": "')
    chunked = socket.create_connection(_address(one_worker), timeout=ANSWER_WAIT_SECONDS)
    chunked.sendall(_post_head(length=None) + b"1000\r\n" + b"x" * 100)

    with with_length, chunked:
        answers = [_read_until_closed(with_length), _read_until_closed(chunked)]

    for answer in answers:
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        assert b"Connection: close" in answer
        assert answer.endswith(b'{"error":"request body not received in time","hook":"sync"}')


def test_more_connections_than_a_worker_holds_cannot_starve_healthz(one_worker: Server) -> None:
    """Regression (issue 17, item 3): 1,050 stalled uploads filled the worker's 1,000
    connections and new /healthz connections timed out (the kubelet would restart the pod).
    The oldest idle or slow connections are shed for new ones."""
    connections = []
    try:
        for _ in range(1100):
            connection = socket.create_connection(_address(one_worker), timeout=30)
            connection.sendall(_post_head(length=100_000) + b"{")
            connections.append(connection)

        health = requests.get(f"{one_worker.url}/healthz", timeout=10)

        assert health.status_code == 200
    finally:
        for connection in connections:
            connection.close()


def test_partial_bodies_count_against_the_bytes_held_in_flight(tmp_path: Path) -> None:
    """Regression (issue 17, item 4): a body was counted only once a 1 MiB chunk of it was
    complete, so 750 connections holding part of one took the worker to 1,541 MiB without a
    503. Every piece is counted as it arrives."""
    with running(tmp_path, "--max-body-bytes", str(1024 * 1024)) as server:  # 2.75 MiB in flight
        uploads = []
        for _ in range(6):
            upload = socket.create_connection(_address(server), timeout=ANSWER_WAIT_SECONDS)
            upload.sendall(_post_head(length=1024 * 1024) + b" " * 700_000)
            uploads.append(upload)

        answers = [_read_until_closed(upload) for upload in uploads]
        for upload in uploads:
            upload.close()
        after = requests.post(f"{server.url}/sync", data=b"{}", timeout=30)

    statuses = sorted(answer.split(b" ", 2)[1] for answer in answers)
    assert b"503" in statuses, statuses  # refused while still arriving: the budget was full
    assert set(statuses) <= {b"503", b"408"}
    assert after.status_code == 400  # let go of every partial body: `{}` reaches the hook


def test_broken_chunked_framing_is_a_400_counted_as_the_clients_error(server: Server) -> None:
    """Regression (issue 17, item 6): a malformed chunk size or a client closing mid-chunk was a
    500 with an ERROR traceback, counted as error="internal" (which feeds the 5xx alert)."""
    with socket.create_connection(_address(server), timeout=30) as connection:
        connection.sendall(_post_head(length=None) + b"zz\r\n{}\r\n0\r\n\r\n")
        malformed = _read_until_closed(connection)
    with socket.create_connection(_address(server), timeout=30) as connection:
        connection.sendall(_post_head(length=None) + b"100\r\n{")
    deadline = time.monotonic() + 30
    while True:
        metrics = requests.get(f"{server.url}/metrics", timeout=30).text
        counted = 'disaggregatedset_hook_errors_total{error="body_unreadable",hook="sync"} 2.0'
        if counted in metrics or time.monotonic() > deadline:
            break
        time.sleep(POLL_INTERVAL_SECONDS)  # poll interval

    assert malformed.startswith(b"HTTP/1.1 400")
    assert malformed.endswith(b'{"error":"malformed request body: InvalidChunkSize","hook":"sync"}')
    assert counted in metrics
    assert 'error="internal"' not in metrics
    levels = {json.loads(line)["level"] for line in server.log_lines() if line.strip()}
    assert "ERROR" not in levels


def test_sigterm_closes_idle_kept_alive_connections_quietly(server: Server) -> None:
    """Regression (issue 17, item 7): SIGTERM sent an unsolicited HTTP/1.1 500 to every idle
    kept-alive client, and logged a GreenletExit traceback for each."""
    idle = []
    for _ in range(3):
        connection = socket.create_connection(_address(server), timeout=60)
        connection.sendall(b"GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n")
        first = b""
        while not first.endswith(b"\r\n\r\nok"):
            first += connection.recv(65536)
        idle.append(connection)

    server.process.send_signal(signal.SIGTERM)
    leftovers = [_read_until_closed(connection) for connection in idle]
    for connection in idle:
        connection.close()
    code = server.process.wait(timeout=60)

    assert leftovers == [b"", b"", b""]
    assert code == 0
    log = "\n".join(server.log_lines())
    assert "GreenletExit" not in log
    assert '"traceback"' not in log


@pytest.mark.parametrize(
    "headers",
    [
        b"".join(b"X-%d: %s\r\n" % (n, b"v" * 8000) for n in range(99)),
        b"".join(b"X-%d: %s\r\n" % (n, b"v" * 8000) for n in range(8)),
    ],
    ids=["99-fields-of-8000-bytes", "8-fields-of-8000-bytes"],
)
def test_request_headers_are_limited_in_total(server: Server, headers: bytes) -> None:
    """Regression (issue 17, item 8): 99 headers of 8,000 bytes (790 KB) were accepted, and
    eight such clients pushed /healthz to about 1 s."""
    code, response_headers, body = _raw_exchange(
        server, b"GET /healthz HTTP/1.1\r\nHost: h\r\n" + headers + b"\r\n"
    )

    assert code == 431
    assert response_headers["content-type"] == "application/json"
    assert set(json.loads(body)) == {"error"}


def test_a_large_single_header_is_still_accepted(server: Server) -> None:
    answer = requests.get(f"{server.url}/healthz", headers={"X-Big": "v" * 6000}, timeout=30)

    assert answer.status_code == 200


def test_the_server_tells_its_version_limits_and_memory(server: Server) -> None:
    """Issue 17, item 14: the version and limits in the log at start, and on /metrics the
    build and the memory of every process (prometheus_client's process metrics are not
    collected in multiprocess mode)."""
    metrics, workers = _scrape_with_stable_workers(server)

    [start] = [json.loads(line) for line in server.log_lines() if '"logger":"hooks.server"' in line]
    assert start["message"] == "serving"
    assert start["version"] == PROJECT_VERSION
    assert start["max_body_bytes"] == 100 * 1024 * 1024
    assert start["max_header_bytes"] == 32 * 1024
    assert start["worker_connections"] == 512
    assert 'disaggregatedset_build_info{python="' in metrics
    assert f'version="{PROJECT_VERSION}"}} 1.0' in metrics
    arbiter = server.process.pid
    assert (
        f'disaggregatedset_process_resident_memory_bytes{{pid="{arbiter}",role="arbiter"}}'
        in metrics
    )
    for worker in workers:
        assert (
            f'disaggregatedset_process_peak_resident_memory_bytes{{pid="{worker}",role="worker"}}'
            in metrics
        )
