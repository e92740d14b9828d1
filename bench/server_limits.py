"""The hook server under abuse and at the API's limits: slow clients, huge quantities, big sets,
and the attacks of issue 17.

    python bench/server_limits.py [--cases slow-clients,quantity,sizing,attacks]

- slow-clients: 50 clients each dribbling a request body (one byte every half second) and 20
  idle connections stay open while /healthz and a small /sync are timed, one after the other
  over a kept-alive connection. Target: p99 of both under 1 s.
- quantity: a set whose container limit is a quantity of 1,000,000 digits (the CRD refuses it;
  a stored one held InvalidSpec): the time of that sync in-process and over HTTP, and of the
  Quantity code alone on the million digits. Target: the HTTP answer in under 1 s.
- sizing: for every case of `bench/scenarios.py`, a fresh one-worker server answers the request
  three times; the table gives children, request size, the worker's peak resident memory, the
  peak of the child process that answered it (bodies over 1 MiB) and the median latency.
  Target: the largest case (10 roles x 100 slices mid-rollout, with managedFields) answered 200
  within Metacontroller's 10 s timeout, worker and child together below the Deployment's limit.
- attacks: each attack of issue 17 against a fresh one-worker server with the defaults, while
  /healthz is probed every 0.1 s on a new connection (as the kubelet does): what the attack was
  answered, the peak resident memory of the worker and of the server's processes together
  (sampled every 20 ms, children included), and the slowest /healthz. Targets: every attack
  answered as the docs say, the processes together below the Deployment's limit, /healthz
  always answered within 1 s.

Every server is `python -m hooks serve --workers 1` as `bench/sync_latency.py` starts it.
Exit status: 0 when every target of the cases run is met, 1 otherwise, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import orjson
import requests

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench import scenarios  # noqa: E402 (needs the repository root on sys.path, set above)
from bench.sync_latency import Server, Stats, running_server  # noqa: E402
from hooks.gocompat import quantity  # noqa: E402
from hooks.server import settings  # noqa: E402

SLOW_CLIENTS: Final = 50
IDLE_CLIENTS: Final = 20
PROBES: Final = 200
P99_LIMIT_MS: Final = 1000.0
QUANTITY_DIGITS: Final = 1_000_000
QUANTITY_LIMIT_MS: Final = 1000.0
METACONTROLLER_TIMEOUT_MS: Final = 10_000.0
DEPLOYMENT_MEMORY_LIMIT_MIB: Final = 1536  # metacontroller/hooks-deployment.yaml
HEALTHZ_LIMIT_MS: Final = 1000.0
CASES: Final = ("slow-clients", "quantity", "sizing", "attacks")


def _ms(seconds: float) -> float:
    return seconds * 1000


def _timed_ns(call: object) -> int:
    started = time.perf_counter_ns()
    call()  # type: ignore[operator]
    return time.perf_counter_ns() - started


def _address(server: Server) -> tuple[str, int]:
    host, port = server.url.removeprefix("http://").split(":")
    return host, int(port)


# --- slow clients --------------------------------------------------------------------------------


@contextmanager
def slow_clients(server: Server) -> Iterator[None]:
    """Connections that dribble a body or say nothing, for as long as the block runs."""
    stop = threading.Event()
    connections: list[socket.socket] = []
    for _ in range(IDLE_CLIENTS):
        connections.append(socket.create_connection(_address(server)))
    dribblers = []
    for _ in range(SLOW_CLIENTS):
        connection = socket.create_connection(_address(server))
        connection.sendall(
            b"POST /sync HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000000\r\n\r\n"
        )
        dribblers.append(connection)
        connections.append(connection)

    def dribble() -> None:
        while not stop.wait(0.5):
            for connection in dribblers:
                # The server gives up on it at its read deadline: that is its job.
                with contextlib.suppress(OSError):
                    connection.sendall(b" ")

    thread = threading.Thread(target=dribble, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        for connection in connections:
            connection.close()


def run_slow_clients(tmpdir: Path) -> list[tuple[bool, str]]:
    small = scenarios.small().body
    with running_server(tmpdir) as server, slow_clients(server), requests.Session() as session:
        session.trust_env = False
        health = Stats.of(
            [_timed_ns(lambda: _ok(session.get(f"{server.url}/healthz"))) for _ in range(PROBES)]
        )
        sync = Stats.of(
            [
                _timed_ns(lambda: _ok(session.post(f"{server.url}/sync", data=small)))
                for _ in range(PROBES)
            ]
        )
    print(
        f"\nslow clients: {SLOW_CLIENTS} dribbling a body, {IDLE_CLIENTS} idle; {PROBES} calls each"
    )
    print("| call | p50 ms | p90 ms | p99 ms |\n|---|---|---|---|")
    for name, stats in (("GET /healthz", health), ("POST /sync (small)", sync)):
        print(f"| {name} | {stats.p50:.2f} | {stats.p90:.2f} | {stats.p99:.2f} |")
    return [
        (health.p99 < P99_LIMIT_MS, f"/healthz p99 {health.p99:.1f} ms < {P99_LIMIT_MS:.0f} ms"),
        (sync.p99 < P99_LIMIT_MS, f"small /sync p99 {sync.p99:.1f} ms < {P99_LIMIT_MS:.0f} ms"),
    ]


def _ok(answer: requests.Response) -> None:
    if answer.status_code != 200:
        raise RuntimeError(f"{answer.request.method} answered {answer.status_code}")


# --- the million-digit quantity ------------------------------------------------------------------


def _with_huge_quantity(body: bytes) -> bytes:
    request = orjson.loads(body)
    role = request["parent"]["spec"]["roles"][0]
    container = role["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    container["resources"]["limits"]["cpu"] = "1" * QUANTITY_DIGITS
    encoded: bytes = orjson.dumps(request)
    return encoded


def run_quantity(tmpdir: Path) -> list[tuple[bool, str]]:
    body = _with_huge_quantity(scenarios.small().body)
    text = '"' + "1" * QUANTITY_DIGITS + '"'
    alone = _timed_ns(lambda: quantity.marshal_json(quantity.unmarshal_json(text))) / 1e6
    in_process = _timed_ns(lambda: scenarios.run_sync(orjson.loads(body))) / 1e6
    with running_server(tmpdir) as server, requests.Session() as session:
        session.trust_env = False
        answers: list[requests.Response] = []
        over_http = _timed_ns(lambda: answers.append(session.post(f"{server.url}/sync", data=body)))
    reason = next(
        c["reason"] for c in answers[0].json()["status"]["conditions"] if c["type"] == "Degraded"
    )
    print(f"\nquantity of {QUANTITY_DIGITS:,} digits in a container limit")
    print("| what | ms |\n|---|---|")
    print(f"| Quantity code alone (decode + canonical text) | {alone:.1f} |")
    print(f"| sync in-process (held: {reason}) | {in_process:.1f} |")
    print(f"| sync over HTTP ({answers[0].status_code}) | {over_http / 1e6:.1f} |")
    return [
        (
            answers[0].status_code == 200 and over_http / 1e6 < QUANTITY_LIMIT_MS,
            f"million-digit quantity answered 200 in {over_http / 1e6:.0f} ms "
            f"< {QUANTITY_LIMIT_MS:.0f} ms",
        )
    ]


# --- sizing --------------------------------------------------------------------------------------


def _worker_pid(server: Server) -> int:
    return _children(server.process.pid)[0]


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _status_kib(pid: int, name: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{name}:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _peak_rss_mib(pid: int) -> float:
    return _status_kib(pid, "VmHWM") / 1024


def _child_peaks(server: Server) -> list[float]:
    """The `child_peak_mib` of every hook line logged so far."""
    peaks = []
    for line in server.log.read_text(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            fields = json.loads(line)
            if "child_peak_mib" in fields:
                peaks.append(float(fields["child_peak_mib"]))
    return peaks


def run_sizing(tmpdir: Path) -> list[tuple[bool, str]]:
    print("\nsizing: one fresh server (one worker) per case, three calls each")
    print(
        "| case | children | request MiB | worker peak RSS MiB | child peak MiB | median ms |"
        "\n|---|---|---|---|---|---|"
    )
    results = []
    for name, build in scenarios.CASES.items():
        case = build()
        with running_server(tmpdir) as server, requests.Session() as session:
            session.trust_env = False
            times = []
            for _ in range(3):
                started = time.perf_counter()
                answer = session.post(f"{server.url}/sync", data=case.body, timeout=120)
                times.append(time.perf_counter() - started)
                _ok(answer)
            peak = _peak_rss_mib(_worker_pid(server))
            child = max(_child_peaks(server), default=0.0)
        median = sorted(times)[1]
        shown = f"{child:.0f}" if child else "(in the worker)"
        print(
            f"| {name} | {case.children} | {len(case.body) / settings.MIB:.1f} | {peak:.0f} | "
            f"{shown} | {_ms(median):.0f} |"
        )
        results.append((name, median, peak, child))
    name, median, peak, child = max(results, key=lambda row: row[2] + row[3])
    return [
        (
            _ms(median) < METACONTROLLER_TIMEOUT_MS,
            f"{name} answered in {_ms(median):.0f} ms < {METACONTROLLER_TIMEOUT_MS:.0f} ms",
        ),
        (
            peak + child < DEPLOYMENT_MEMORY_LIMIT_MIB,
            f"{name} worker {peak:.0f} + child {child:.0f} MiB < the Deployment's "
            f"{DEPLOYMENT_MEMORY_LIMIT_MIB} MiB",
        ),
        (
            child * settings.MIB < settings.DEFAULT_MAX_PARSE_BYTES,
            f"{name} child peak {child:.0f} MiB < --max-parse-bytes "
            f"{settings.DEFAULT_MAX_PARSE_BYTES // settings.MIB} MiB",
        ),
    ]


# --- the attacks of issue 17 ---------------------------------------------------------------------


@dataclass
class Watch:
    """What a server does while an attack runs: memory sampled every 20 ms, /healthz probed
    every 0.1 s on a new connection."""

    server: Server
    peak_total_kib: int = 0
    probes_ms: list[float] = field(default_factory=list)
    probe_failures: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def sample(self) -> None:
        while not self._stop.wait(0.02):
            arbiter = self.server.process.pid
            pids = [arbiter, *(p for w in _children(arbiter) for p in [w, *_children(w)])]
            total = sum(_status_kib(pid, "VmRSS") for pid in pids)
            self.peak_total_kib = max(self.peak_total_kib, total)

    def probe(self) -> None:
        host, port = _address(self.server)
        while not self._stop.wait(0.1):
            started = time.perf_counter()
            try:
                with socket.create_connection((host, port), timeout=5) as connection:
                    connection.sendall(b"GET /healthz HTTP/1.1\r\nHost: probe\r\n\r\n")
                    if not connection.recv(64).startswith(b"HTTP/1.1 200"):
                        raise OSError("not 200")
                self.probes_ms.append(_ms(time.perf_counter() - started))
            except OSError:
                self.probe_failures += 1

    @contextmanager
    def running(self) -> Iterator[Watch]:
        threads = [threading.Thread(target=f, daemon=True) for f in (self.sample, self.probe)]
        for thread in threads:
            thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            for thread in threads:
                thread.join()


def _raw(server: Server, data: bytes, *, timeout: float = 60) -> bytes:
    """Send bytes on a new connection and read until the server closes it (or `timeout`)."""
    answer = b""
    with socket.create_connection(_address(server), timeout=timeout) as connection:
        with contextlib.suppress(OSError):
            connection.sendall(data)
        with contextlib.suppress(OSError):
            while chunk := connection.recv(65536):
                answer += chunk
    return answer


def _status_of(answer: bytes) -> str:
    if not answer:
        return "no answer"
    return answer.split(b"\r\n", 1)[0].decode("latin-1").removeprefix("HTTP/1.1 ")


def _post_head(length: int | None, *, path: str = "/sync", extra: bytes = b"") -> bytes:
    framing = b"Transfer-Encoding: chunked" if length is None else b"Content-Length: %d" % length
    return b"POST %s HTTP/1.1\r\nHost: attack\r\nConnection: close\r\n%s\r\n%s\r\n" % (
        path.encode(),
        framing,
        extra,
    )


def _nested(size: int, depth: int = 500) -> bytes:
    unit = b"[" * depth + b"]" * depth
    return b"[" + b",".join([unit] * (size // (len(unit) + 1))) + b"]"


def _astral(size: int) -> bytes:
    return b'"' + "\U0001f600".encode() * (size // 4) + b'"'


def _attack_bodies(server: Server) -> collections.Counter[str]:
    """Item 2: the issue's nested body (32.8 MiB, 500 deep), then one long astral string."""
    answers: collections.Counter[str] = collections.Counter()
    for body in (_nested(int(32.8 * settings.MIB)), _astral(90 * settings.MIB)):
        answers[_status_of(_raw(server, _post_head(len(body)) + body))] += 1
    return answers


def _stalled(server: Server, count: int, *, chunked: bool) -> list[socket.socket]:
    head = _post_head(None if chunked else 1_000_000)
    partial = b"10000\r\n" + b" " * 50_000 if chunked else b" " * 50_000
    connections = []
    for _ in range(count):
        connection = socket.create_connection(_address(server), timeout=120)
        connection.sendall(head + partial)
        connections.append(connection)
    return connections


def _answers_of(connections: list[socket.socket]) -> collections.Counter[str]:
    answers: collections.Counter[str] = collections.Counter()
    for connection in connections:
        data = b""
        with contextlib.suppress(OSError):
            while chunk := connection.recv(65536):
                data += chunk
        answers[_status_of(data)] += 1
        connection.close()
    return answers


def _attack_stall(server: Server) -> collections.Counter[str]:
    """Item 3: a Content-Length body and a chunked one that stall after 50 KB."""
    started = time.monotonic()
    answers = _answers_of(_stalled(server, 1, chunked=False) + _stalled(server, 1, chunked=True))
    answers[f"closed after {time.monotonic() - started:.0f} s"] += 2
    return answers


def _attack_flood(server: Server) -> collections.Counter[str]:
    """Item 3: 1,050 connections that stall their bodies, held for 15 s."""
    connections = _stalled(server, 1050, chunked=False)
    time.sleep(15)  # the attack: hold them
    return _answers_of(connections)


def _attack_partial(server: Server) -> collections.Counter[str]:
    """Item 4: 750 connections each holding 1 MiB less a byte of a body."""
    head = _post_head(2 * settings.MIB)
    connections = []
    for _ in range(750):
        connection = socket.create_connection(_address(server), timeout=5)
        with contextlib.suppress(OSError):  # a connection the server already refused or shed
            connection.sendall(head + b" " * (settings.MIB - 1))
        connection.settimeout(120)
        connections.append(connection)
    answers = _answers_of(connections)
    time.sleep(1)
    worker = _worker_pid(server)
    answers[f"worker RSS after: {_status_kib(worker, 'VmRSS') / 1024:.0f} MiB"] += 1
    return answers


def _attack_framing(server: Server) -> collections.Counter[str]:
    """Item 6: a malformed chunk size, and a client that closes mid-chunk."""
    answers: collections.Counter[str] = collections.Counter()
    answers[_status_of(_raw(server, _post_head(None) + b"zz\r\n{}\r\n0\r\n\r\n"))] += 1
    with socket.create_connection(_address(server)) as connection:
        connection.sendall(_post_head(None) + b"100\r\n{")
    time.sleep(0.5)
    metrics = requests.get(f"{server.url}/metrics", timeout=10).text
    for line in metrics.splitlines():
        if line.startswith("disaggregatedset_hook_errors_total{"):
            answers[line] += 1
    return answers


def _attack_headers(server: Server) -> collections.Counter[str]:
    """Item 8: 99 headers of 8,000 bytes, from eight clients at once for 5 s."""
    request = b"GET /healthz HTTP/1.1\r\nHost: h\r\n"
    request += b"".join(b"X-%d: %s\r\n" % (i, b"v" * 8000) for i in range(99)) + b"\r\n"
    answers: collections.Counter[str] = collections.Counter()
    stop = time.monotonic() + 5

    def client() -> None:
        while time.monotonic() < stop:
            answers[_status_of(_raw(server, request, timeout=10))] += 1

    threads = [threading.Thread(target=client) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def _attack_sigterm(server: Server) -> collections.Counter[str]:
    """Item 7: ten idle kept-alive connections, then SIGTERM: what do they receive?"""
    connections = []
    for _ in range(10):
        connection = socket.create_connection(_address(server), timeout=30)
        connection.sendall(b"GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n")
        first = b""
        while not first.endswith(b"\r\n\r\nok"):
            first += connection.recv(65536)
        connections.append(connection)
    server.process.send_signal(signal.SIGTERM)
    answers = _answers_of(connections)
    server.process.wait(timeout=60)
    tracebacks = server.log.read_text(errors="replace").count('"traceback"')
    answers[f"tracebacks logged: {tracebacks}"] += 1
    return answers


ATTACKS: Final[dict[str, Callable[[Server], collections.Counter[str]]]] = {
    "nested and astral bodies (item 2)": _attack_bodies,
    "stalled bodies (item 3)": _attack_stall,
    "1,050 stalled connections (item 3)": _attack_flood,
    "750 partial bodies (item 4)": _attack_partial,
    "broken chunked framing (item 6)": _attack_framing,
    "idle connections at SIGTERM (item 7)": _attack_sigterm,
    "huge headers (item 8)": _attack_headers,
}


def run_attacks(tmpdir: Path, only: Sequence[str] = ()) -> list[tuple[bool, str]]:
    print("\nattacks: one fresh server (one worker, defaults) per attack")
    print(
        "| attack | answered | worker peak RSS MiB | all processes peak MiB | "
        "/healthz max ms | /healthz failed |\n|---|---|---|---|---|---|"
    )
    checks = []
    for name, attack in ATTACKS.items():
        if only and not any(word in name for word in only):
            continue
        with running_server(tmpdir) as server, Watch(server).running() as watch:
            worker = _worker_pid(server)
            answers = attack(server)
            peak = _peak_rss_mib(worker)
        slowest = max(watch.probes_ms, default=0.0)
        shown = ", ".join(f"{key}: {value}" for key, value in sorted(answers.items()))
        total = watch.peak_total_kib / 1024
        print(
            f"| {name} | {shown} | {peak:.0f} | {total:.0f} | {slowest:.0f} | "
            f"{watch.probe_failures} |"
        )
        if attack is not _attack_sigterm:  # a stopped server answers no probe
            healthy = slowest < HEALTHZ_LIMIT_MS and watch.probe_failures == 0
            checks.append((healthy, f"{name}: /healthz within {HEALTHZ_LIMIT_MS:.0f} ms"))
        checks.append(
            (
                total < DEPLOYMENT_MEMORY_LIMIT_MIB,
                f"{name}: {total:.0f} MiB < the Deployment's {DEPLOYMENT_MEMORY_LIMIT_MIB} MiB",
            )
        )
    return checks


# --- main ----------------------------------------------------------------------------------------


def _cases(text: str) -> list[str]:
    chosen = [name.strip() for name in text.split(",") if name.strip()]
    unknown = sorted(set(chosen) - set(CASES))
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"cases are {', '.join(CASES)}")
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=_cases, default=list(CASES), help=", ".join(CASES))
    args = parser.parse_args(argv)
    runners = {
        "slow-clients": run_slow_clients,
        "quantity": run_quantity,
        "sizing": run_sizing,
        "attacks": run_attacks,
    }
    checks: list[tuple[bool, str]] = []
    with tempfile.TemporaryDirectory(prefix="server-limits-") as tmpdir:
        for name in args.cases:
            checks += runners[name](Path(tmpdir))
    print()
    for passed, text in checks:
        print(f"{'met   ' if passed else 'MISSED'} {text}")
    return 0 if all(passed for passed, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
