"""What the hook server tells its operators: the JSON log line of every call and the metrics
(what each says: docs/operations.md, "The hook server", Logs and Metrics). prometheus_client
chooses its value storage when first imported, so PROMETHEUS_MULTIPROC_DIR must be set before this
module (its only importer) is imported, as `python -m hooks serve` does.
"""

from __future__ import annotations

import logging
import os
import platform
import sys
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import orjson
import prometheus_client
from prometheus_client import multiprocess
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from hooks import version
from hooks.server import settings

LOGGER_NAME: Final = "hooks"
CONTENT_TYPE: Final = prometheus_client.CONTENT_TYPE_LATEST
# Up to Metacontroller's 10 s webhook timeout, so that the latency alert can see 5-10 s.
LATENCY_BUCKETS: Final = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
)
_RESIDENT: Final = ("VmRSS", "VmHWM")

_log = logging.getLogger(f"{LOGGER_NAME}.app")
_server_log = logging.getLogger(f"{LOGGER_NAME}.server")


# --- logging -------------------------------------------------------------------------------------


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the call's fields, the traceback."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "hook_fields", None)
        if isinstance(fields, Mapping):
            for key, value in fields.items():
                line.setdefault(str(key), value)
        if record.exc_info:
            line["traceback"] = self.formatException(record.exc_info)
        # default=str: a log line must never fail because of an odd value in a summary.
        return orjson.dumps(line, default=str, option=orjson.OPT_NON_STR_KEYS).decode()


class _StderrJsonHandler(logging.Handler):
    """Writes to whatever `sys.stderr` is at the time (gunicorn and pytest both swap it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
            sys.stderr.flush()
        except Exception:
            self.handleError(record)


def configure_logging(level: str | int = "INFO") -> None:
    """Send the `hooks` loggers to stderr as JSON lines; calling it again replaces the handler."""
    logger = logging.getLogger(LOGGER_NAME)
    for handler in list(logger.handlers):
        if isinstance(handler, _StderrJsonHandler):
            logger.removeHandler(handler)
    handler = _StderrJsonHandler()
    handler.setFormatter(JsonFormatter())
    logger.addHandler(handler)
    logger.setLevel(level.upper() if isinstance(level, str) else level)


def log_start(fields: Mapping[str, object]) -> None:
    """The server's one line at start: its version, addresses and limits."""
    _server_log.info(
        "serving", extra={"hook_fields": {"version": version.package_version(), **fields}}
    )


# --- metrics -------------------------------------------------------------------------------------


class Metrics:
    """The app's metric objects, how to expose them, and the record of each call."""

    def __init__(self, *, server_pid: int | None = None) -> None:
        """Multiprocess metrics when PROMETHEUS_MULTIPROC_DIR is set now, else a registry of
        this app's own (several apps in one process, as in tests, never clash). With
        `server_pid`, the memory of that process and of its descendants too."""
        self.multiprocess_dir = os.environ.get(settings.MULTIPROC_ENV) or None
        self.server_pid = server_pid
        self.registry = registry = prometheus_client.CollectorRegistry()
        if self.multiprocess_dir is None:
            prometheus_client.ProcessCollector(registry=registry)
            prometheus_client.PlatformCollector(registry=registry)
            _register_own(registry, server_pid)
        self.calls = prometheus_client.Counter(
            "disaggregatedset_hook_calls",
            "Hook calls answered, by hook, HTTP status code and outcome.",
            ["hook", "code", "outcome"],
            registry=registry,
        )
        self.errors = prometheus_client.Counter(
            "disaggregatedset_hook_errors",
            "Hook calls answered with a non-200 status, by hook and kind of error.",
            ["hook", "error"],
            registry=registry,
        )
        self.duration = prometheus_client.Histogram(
            "disaggregatedset_hook_duration_seconds",
            "Time to answer a hook call, from the first byte read to the serialised answer.",
            ["hook"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.unchanged = prometheus_client.Counter(
            "disaggregatedset_sync_unchanged",
            "DisaggregatedSet syncs answered with the observed state (children as last"
            " applied, the same status): Metacontroller writes nothing for them.",
            registry=registry,
        )

    def exposition(self) -> bytes:
        """The Prometheus text format of every worker's metrics (or this process's)."""
        if self.multiprocess_dir is None:
            return prometheus_client.generate_latest(self.registry)
        registry = prometheus_client.CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=self.multiprocess_dir)  # type: ignore[no-untyped-call]
        _register_own(registry, self.server_pid)
        return prometheus_client.generate_latest(registry)

    def answered(self, hook: str, summary: Mapping[str, object], *, seconds: float) -> None:
        """The metrics and the log line of a call answered 200."""
        writes = summary.get("writes")
        if isinstance(writes, Mapping) and not any(writes.values()):
            self.unchanged.inc()
        outcome = str(summary.get("outcome", "ok"))
        fields = self._count(hook, 200, outcome, seconds, summary)
        _log.info("%s %d", hook, 200, extra={"hook_fields": fields})

    def failed(
        self,
        hook: str,
        *,
        status: int,
        kind: str,
        message: str,
        seconds: float,
        error: BaseException,
    ) -> None:
        """The metrics and the log line of a failed call: a 4xx is a WARNING, a 5xx an ERROR,
        with the traceback only for a 500 (a 503, overloaded or too slow, has no fault to trace)."""
        self.errors.labels(hook=hook, error=kind).inc()
        fields = {**self._count(hook, status, kind, seconds, {}), "error": message}
        level = logging.WARNING if status < 500 else logging.ERROR
        trace = error if status == 500 else None
        _log.log(level, "%s %d", hook, status, extra={"hook_fields": fields}, exc_info=trace)

    def _count(
        self, hook: str, status: int, outcome: str, seconds: float, summary: Mapping[str, object]
    ) -> dict[str, object]:
        """Count one call; the fields of its log line."""
        self.calls.labels(hook=hook, code=str(status), outcome=outcome).inc()
        self.duration.labels(hook=hook).observe(seconds)
        duration_ms = round(seconds * 1000, 3)
        return {
            **summary,
            "hook": hook,
            "status": status,
            "outcome": outcome,
            "duration_ms": duration_ms,
        }


def _register_own(registry: prometheus_client.CollectorRegistry, server_pid: int | None) -> None:
    registry.register(BuildInfo())
    if server_pid is not None:
        registry.register(ServerMemory(server_pid))


class BuildInfo(Collector):
    """`disaggregatedset_build_info{version, python}` 1."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        info = GaugeMetricFamily(
            "disaggregatedset_build_info",
            "The hook server's version (the package's) and Python version; always 1.",
            labels=["version", "python"],
        )
        info.add_metric([version.package_version(), platform.python_version()], 1)
        yield info


class ServerMemory(Collector):
    """Resident and peak resident memory of the arbiter (`server_pid`), each of its workers and,
    summed, the workers' children, read from /proc at each scrape (prometheus_client's process
    metrics describe only the process scraped, and none in multiprocess mode)."""

    def __init__(self, server_pid: int) -> None:
        self._server_pid = server_pid

    def collect(self) -> Iterator[GaugeMetricFamily]:
        resident = GaugeMetricFamily(
            "disaggregatedset_process_resident_memory_bytes",
            "Resident memory of the hook server's processes: the gunicorn arbiter, each worker,"
            " and (summed, pid empty) the child processes answering large bodies.",
            labels=["role", "pid"],
        )
        peak = GaugeMetricFamily(
            "disaggregatedset_process_peak_resident_memory_bytes",
            "Peak resident memory since start of the hook server's processes (VmHWM); for"
            " children answering large bodies, the largest of those running.",
            labels=["role", "pid"],
        )
        workers = _children(self._server_pid)
        for role, pid in [("arbiter", self._server_pid), *(("worker", w) for w in workers)]:
            if len(memory := process_memory(pid, _RESIDENT)) == 2:
                resident.add_metric([role, str(pid)], memory["VmRSS"])
                peak.add_metric([role, str(pid)], memory["VmHWM"])
        calls = [process_memory(c, _RESIDENT) for w in workers for c in _children(w)]
        calls = [memory for memory in calls if len(memory) == 2]
        resident.add_metric(["call", ""], sum(memory["VmRSS"] for memory in calls))
        peak.add_metric(["call", ""], max((memory["VmHWM"] for memory in calls), default=0))
        yield resident
        yield peak


def _children(pid: int) -> list[int]:
    """The child processes of `pid` (its main thread's), from /proc; none once it is gone."""
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(child) for child in text.split()]


def process_memory(pid: int | str, names: tuple[str, ...]) -> dict[str, int]:
    """The fields `names` of /proc/PID/status in bytes: none once the process is gone, and no
    memory fields for a zombie."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return {}
    return {
        name: int(value.split()[0]) * 1024
        for name, _, value in (line.partition(":") for line in lines)
        if name in names
    }
