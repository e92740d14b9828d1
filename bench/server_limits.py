"""The hook server under abuse and at the API's limits: slow clients, huge quantities, big sets.

    python bench/server_limits.py [--cases slow-clients,quantity,sizing]

- slow-clients: 50 clients each dribbling a request body (one byte every half second) and 20
  idle connections stay open while /healthz and a small /sync are timed, one after the other
  over a kept-alive connection. Target: p99 of both under 1 s.
- quantity: a set whose container limit is a quantity of 1,000,000 digits (the CRD refuses it;
  a stored one held InvalidSpec): the time of that sync in-process and over HTTP, and of the
  Quantity code alone on the million digits. Target: the HTTP answer in under 1 s.
- sizing: for every case of `bench/scenarios.py`, a fresh one-worker server answers the request
  three times; the table gives children, request size, the app's parse-cost estimate against
  `--max-parse-bytes`, the worker's peak resident memory and the median latency. Target: the
  largest case (10 roles x 100 slices mid-rollout, with managedFields) answered 200 within
  Metacontroller's 10 s timeout, its peak memory below the Deployment's limit.

Every server is `python -m hooks serve --workers 1` as `bench/sync_latency.py` starts it.
Exit status: 0 when every target of the cases run is met, 1 otherwise, 2 for a usage error.
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Final

import orjson
import requests

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench import scenarios  # noqa: E402 (needs the repository root on sys.path, set above)
from bench.sync_latency import Server, Stats, running_server  # noqa: E402
from hooks.edge import bodies, settings  # noqa: E402
from hooks.gocompat import quantity  # noqa: E402

SLOW_CLIENTS: Final = 50
IDLE_CLIENTS: Final = 20
PROBES: Final = 200
P99_LIMIT_MS: Final = 1000.0
QUANTITY_DIGITS: Final = 1_000_000
QUANTITY_LIMIT_MS: Final = 1000.0
METACONTROLLER_TIMEOUT_MS: Final = 10_000.0
DEPLOYMENT_MEMORY_LIMIT_MIB: Final = 1536  # metacontroller/hooks-deployment.yaml
CASES: Final = ("slow-clients", "quantity", "sizing")


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
    children = Path(f"/proc/{server.process.pid}/task/{server.process.pid}/children").read_text()
    return int(children.split()[0])


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM for {pid}")


def run_sizing(tmpdir: Path) -> list[tuple[bool, str]]:
    print("\nsizing: one fresh server (one worker) per case, three calls each")
    print(
        "| case | children | request MiB | parse cost est. MiB | worker peak RSS MiB | "
        "median ms |\n|---|---|---|---|---|---|"
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
        median = sorted(times)[1]
        cost = bodies.parse_cost(case.body) / settings.MIB
        print(
            f"| {name} | {case.children} | {len(case.body) / settings.MIB:.1f} | {cost:.0f} | "
            f"{peak:.0f} | {_ms(median):.0f} |"
        )
        results.append((name, median, peak, cost))
    name, median, peak, cost = max(results, key=lambda row: row[2])
    return [
        (
            _ms(median) < METACONTROLLER_TIMEOUT_MS,
            f"{name} answered in {_ms(median):.0f} ms < {METACONTROLLER_TIMEOUT_MS:.0f} ms",
        ),
        (
            peak < DEPLOYMENT_MEMORY_LIMIT_MIB,
            f"{name} peak {peak:.0f} MiB < the Deployment's {DEPLOYMENT_MEMORY_LIMIT_MIB} MiB",
        ),
        (
            cost * settings.MIB < settings.DEFAULT_MAX_PARSE_BYTES,
            f"{name} parse cost {cost:.0f} MiB < --max-parse-bytes "
            f"{settings.DEFAULT_MAX_PARSE_BYTES // settings.MIB} MiB",
        ),
    ]


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
    runners = {"slow-clients": run_slow_clients, "quantity": run_quantity, "sizing": run_sizing}
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
