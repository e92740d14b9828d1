"""Latency of the DisaggregatedSet sync hook, in-process and over HTTP, against a JSON floor.

    python bench/sync_latency.py [--no-http] [--iterations N] [--cases small,medium,large]

For each case (see `bench/scenarios.py`) it times, on the same request body:

- floor: `orjson.loads(body)` + `orjson.dumps(parsed)`, the least any JSON hook could do;
- in-process: what the Flask view does between reading the body and writing the answer:
  `orjson.loads`, the server's `/sync` hook (`envelope.parse_sync_request`, `sync.sync`), its
  answer rendered and the count of what it makes Metacontroller write, `orjson.dumps` of it;
- HTTP: a POST to `python -m hooks serve --workers 1` on 127.0.0.1 through the standard
  library's `http.client`, from sending the body to having the whole answer, over a kept-alive
  connection (as Metacontroller's Go client calls). A lean client: what it adds is close to what
  Go's adds, so HTTP p50 minus in-process p50 is the server's own overhead.

Each timing loop warms up first, runs `gc.collect()` before it and keeps the garbage collector
disabled while it runs (unless `--gc`), so that a collection triggered by the previous case or
by the warm-up does not land in one sample; `gc.collect()` also runs between cases. The server
process keeps its collector on, as in production.

Targets (exit status 1 when one is missed, so this can gate a change): small in-process p50 below
2 ms; small HTTP p50 at most 1 ms above its in-process p50; large in-process p50 at most twice its
JSON floor p50. Exit status 2 is a usage error.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import http.client
import io
import os
import pstats
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import orjson
import requests

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    # Run as a script, Python puts bench/ on sys.path but not the repository root.
    sys.path.insert(0, str(REPO_ROOT))

from bench import scenarios  # noqa: E402 (needs the repository root on sys.path, set above)
from hooks.server import app, bodies  # noqa: E402 (as above)
from hooks.wire import answers  # noqa: E402 (as above)
from tools.sandbox import processes  # noqa: E402 (as above)

SMALL_P50_LIMIT_MS: Final = 2.0
SMALL_HTTP_OVERHEAD_LIMIT_MS: Final = 1.0
LARGE_FLOOR_RATIO_LIMIT: Final = 2.0
DEFAULT_ITERATIONS: Final = {"small": 2000, "medium": 300, "medium-rollout": 300, "large": 15}
DEFAULT_CASES: Final = ("small", "medium", "medium-rollout", "large")
START_DEADLINE_SECONDS: Final = 60.0
POLL_SECONDS: Final = 0.05
HTTP_TIMEOUT_SECONDS: Final = 120.0
PROFILE_ROWS: Final = 30
SYNC_HOOK: Final = app.default_hooks()["/sync"]


# --- measuring -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Stats:
    """Percentiles of one timing loop, in milliseconds."""

    p50: float
    p90: float
    p99: float
    samples: int

    @classmethod
    def of(cls, samples_ns: Sequence[int]) -> Stats:
        ordered = sorted(samples_ns)

        def rank(percent: int) -> float:
            # Nearest rank (ceil(n * p / 100)); with under 100 samples p99 is the slowest one.
            index = max(0, -(-len(ordered) * percent // 100) - 1)
            return ordered[index] / 1e6

        return cls(p50=rank(50), p90=rank(90), p99=rank(99), samples=len(ordered))


def measure(run: Callable[[], object], *, iterations: int, warmup: int, keep_gc: bool) -> Stats:
    """Time `iterations` calls of `run` after `warmup` untimed ones."""
    for _ in range(warmup):
        run()
    samples: list[int] = []
    with _quiet_gc(enabled=keep_gc):
        for _ in range(iterations):
            started = time.perf_counter_ns()
            run()
            samples.append(time.perf_counter_ns() - started)
    return Stats.of(samples)


@contextmanager
def _quiet_gc(*, enabled: bool) -> Iterator[None]:
    """Start from a collected heap; unless `enabled`, pause the collector as the server does."""
    gc.collect()
    with nullcontext() if enabled else bodies.collector_paused():
        yield


def json_floor(body: bytes) -> bytes:
    """The cheapest round trip of the body: decode it and encode it again."""
    return orjson.dumps(orjson.loads(body))


def in_process(body: bytes) -> bytes:
    """What the view does with a sync body: decode; parse, sync and count the writes (the
    server's `/sync` hook); encode the answer."""
    result = SYNC_HOOK.run(orjson.loads(body), scenarios.NOW)
    response = answers.render_answer(result.answer)
    assert result.request is not None
    answers.writes(result.request, response)
    return orjson.dumps(response)


# --- the HTTP server -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Server:
    """A `python -m hooks serve` subprocess with one worker."""

    process: subprocess.Popen[bytes]
    url: str
    log: Path


class ServerError(Exception):
    """The server did not start or answered wrongly."""


@contextmanager
def running_server(tmpdir: Path) -> Iterator[Server]:
    """Start the server with TMPDIR=tmpdir, wait for /healthz, stop it with SIGTERM afterwards."""
    port = processes.free_port()
    env = {**os.environ, "TMPDIR": str(tmpdir), "PYTHONPATH": str(REPO_ROOT)}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    log = tmpdir / "server.log"
    command = [sys.executable, "-m", "hooks", "serve", "--bind", f"127.0.0.1:{port}"]
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [*command, "--workers", "1"],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    server = Server(process=process, url=f"http://127.0.0.1:{port}", log=log)
    try:
        _wait_until_healthy(server)
        yield server
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_until_healthy(server: Server) -> None:
    deadline = time.monotonic() + START_DEADLINE_SECONDS
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise ServerError(f"server exited with {server.process.returncode}: {_tail(server)}")
        try:
            if requests.get(f"{server.url}/healthz", timeout=2).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        time.sleep(POLL_SECONDS)  # poll interval while the server starts
    raise ServerError(f"server did not answer /healthz: {_tail(server)}")


def _tail(server: Server) -> str:
    return "\n".join(server.log.read_text(errors="replace").splitlines()[-20:])


def http_call(connection: http.client.HTTPConnection, body: bytes) -> bytes:
    """POST the body to /sync and return the whole answer; anything but a 200 raises."""
    connection.request("POST", "/sync", body=body, headers={"Content-Type": "application/json"})
    answer = connection.getresponse()
    content = answer.read()
    if answer.status != 200:
        raise ServerError(f"/sync answered {answer.status}: {content[:500]!r}")
    return content


def check_http_answer(answer: bytes, expected: bytes) -> None:
    """The served answer holds the same children as the in-process one (status has a clock)."""
    if orjson.loads(answer)["children"] != orjson.loads(expected)["children"]:
        raise ServerError("/sync answered other children than the in-process call")


# --- the report ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CaseResult:
    """All timings of one case."""

    scenario: scenarios.Scenario
    floor: Stats
    local: Stats
    http: Stats | None

    @property
    def ratio(self) -> float:
        return self.local.p50 / self.floor.p50


def _size(body: bytes) -> str:
    size = len(body)
    if size >= 1 << 20:
        return f"{size / (1 << 20):.1f} MiB"
    return f"{size / 1024:.0f} KiB"


def render_table(results: Sequence[CaseResult]) -> str:
    """The result table, one row per case, times in ms."""
    header = (
        "case",
        "body",
        "children",
        "n",
        "floor p50",
        "in-proc p50",
        "p90",
        "p99",
        "ratio",
        "HTTP p50",
        "p90",
        "p99",
    )
    rows = [header]
    for result in results:
        http = result.http
        rows.append(
            (
                result.scenario.name,
                _size(result.scenario.body),
                str(result.scenario.children),
                str(result.local.samples),
                f"{result.floor.p50:.3f}",
                f"{result.local.p50:.3f}",
                f"{result.local.p90:.3f}",
                f"{result.local.p99:.3f}",
                f"{result.ratio:.2f}x",
                f"{http.p50:.3f}" if http else "-",
                f"{http.p90:.3f}" if http else "-",
                f"{http.p99:.3f}" if http else "-",
            )
        )
    widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
    lines = [
        "  ".join(
            cell.ljust(width) if column < 2 else cell.rjust(width)
            for column, (cell, width) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def check_targets(results: Sequence[CaseResult]) -> list[tuple[bool, str]]:
    """Each target that applies to the cases run: (met, what was measured)."""
    checks: list[tuple[bool, str]] = []
    for result in results:
        if result.scenario.name == "small":
            checks.append(
                (
                    result.local.p50 < SMALL_P50_LIMIT_MS,
                    f"small in-process p50 {result.local.p50:.3f} ms < {SMALL_P50_LIMIT_MS} ms",
                )
            )
        if result.scenario.name == "small" and result.http is not None:
            overhead = result.http.p50 - result.local.p50
            checks.append(
                (
                    overhead < SMALL_HTTP_OVERHEAD_LIMIT_MS,
                    f"small HTTP p50 - in-process p50 = {overhead:.3f} ms"
                    f" < {SMALL_HTTP_OVERHEAD_LIMIT_MS} ms",
                )
            )
        if result.scenario.name == "large":
            checks.append(
                (
                    result.ratio <= LARGE_FLOOR_RATIO_LIMIT,
                    f"large in-process p50 / JSON floor p50 = {result.ratio:.2f} "
                    f"<= {LARGE_FLOOR_RATIO_LIMIT}",
                )
            )
    return checks


def profile(body: bytes, *, iterations: int) -> str:
    """cProfile of `iterations` in-process calls: the top functions by own and by total time."""
    profiler = cProfile.Profile()
    with _quiet_gc(enabled=False):
        profiler.enable()
        for _ in range(iterations):
            in_process(body)
        profiler.disable()
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.strip_dirs().sort_stats("tottime").print_stats(PROFILE_ROWS)
    stats.sort_stats("cumulative").print_stats(PROFILE_ROWS)
    return out.getvalue()


# --- main ----------------------------------------------------------------------------------------


def _cases(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in scenarios.CASES]
    if unknown or not names:
        known = ", ".join(scenarios.CASES)
        raise argparse.ArgumentTypeError(f"unknown case(s) {unknown or text!r}; known: {known}")
    return names


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python bench/sync_latency.py",
        description="Sync hook latency in-process and over HTTP, against a JSON floor.",
    )
    parser.add_argument(
        "--cases",
        type=_cases,
        default=list(DEFAULT_CASES),
        help=f"comma-separated cases (default {','.join(DEFAULT_CASES)})",
    )
    parser.add_argument(
        "--iterations",
        type=_positive,
        metavar="N",
        help="timed calls per measurement for every case (default per case: "
        + ", ".join(f"{name} {count}" for name, count in DEFAULT_ITERATIONS.items())
        + ")",
    )
    parser.add_argument("--no-http", action="store_true", help="skip the HTTP measurements")
    parser.add_argument(
        "--gc", action="store_true", help="leave the garbage collector enabled while timing"
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="after timing, print a cProfile of the in-process call for each case",
    )
    return parser.parse_args(argv)


def run_case(
    scenario: scenarios.Scenario,
    *,
    iterations: int,
    keep_gc: bool,
    server: Server | None,
    connection: http.client.HTTPConnection,
) -> CaseResult:
    """Floor, in-process and (with a server) HTTP timings of one case."""
    body = scenario.body
    warmup = max(2, iterations // 10)
    expected = in_process(body)
    floor = measure(lambda: json_floor(body), iterations=iterations, warmup=warmup, keep_gc=keep_gc)
    local = measure(lambda: in_process(body), iterations=iterations, warmup=warmup, keep_gc=keep_gc)
    http: Stats | None = None
    if server is not None:
        check_http_answer(http_call(connection, body), expected)
        http = measure(
            lambda: http_call(connection, body),
            iterations=iterations,
            warmup=warmup,
            keep_gc=keep_gc,
        )
    return CaseResult(scenario=scenario, floor=floor, local=local, http=http)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    built = []
    for name in args.cases:
        started = time.perf_counter()
        scenario = scenarios.CASES[name]()
        seconds = time.perf_counter() - started
        print(
            f"built {name}: {scenario.description}; {scenario.children} children, "
            f"{_size(scenario.body)} ({seconds:.1f} s)",
            flush=True,
        )
        built.append(scenario)

    results: list[CaseResult] = []
    with (
        tempfile.TemporaryDirectory(prefix="bench-sync-") as tmp,
        ExitStack() as stack,
    ):
        server = None if args.no_http else stack.enter_context(running_server(Path(tmp)))
        address = urllib.parse.urlsplit(server.url if server else "http://127.0.0.1")
        connection = http.client.HTTPConnection(
            address.hostname or "127.0.0.1", address.port, timeout=HTTP_TIMEOUT_SECONDS
        )
        stack.callback(connection.close)
        for scenario in built:
            gc.collect()
            iterations = args.iterations or DEFAULT_ITERATIONS[scenario.name]
            print(f"timing {scenario.name} ({iterations} iterations)...", flush=True)
            results.append(
                run_case(
                    scenario,
                    iterations=iterations,
                    keep_gc=args.gc,
                    server=server,
                    connection=connection,
                )
            )

    print()
    print("times in ms; ratio = in-process p50 / floor p50")
    print(render_table(results))
    print()
    checks = check_targets(results)
    for met, text in checks:
        print(f"target {'met   ' if met else 'MISSED'}: {text}")
    if not checks:
        print("no target applies to the cases run")

    if args.profile:
        for scenario in built:
            count = min(args.iterations or DEFAULT_ITERATIONS[scenario.name], 50)
            print(f"\n=== cProfile: {scenario.name}, {count} in-process calls ===")
            print(profile(scenario.body, iterations=count))

    missed = [text for met, text in checks if not met]
    if missed:
        print(f"\n{len(missed)} target(s) missed:", *missed, sep="\n  ", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
