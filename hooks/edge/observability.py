"""What the hook server tells its operators: the JSON log line of every call, and the metrics.

Logging: one JSON line per hook call, written through the `hooks` logger to stderr by the handler
that `configure_logging` installs: INFO for a 200, WARNING for a 4xx, ERROR with the traceback for
a 5xx. The line holds the hook's summary (object, generation, revision, per-slice step, child
counts, outcome), the status and the duration in ms; request bodies and pod templates are never
logged. `/healthz` and `/metrics` are not logged.

Metrics (Prometheus): calls by hook, status code and outcome; errors by hook and error kind; a
latency histogram by hook; the syncs answered with the observed state. When
PROMETHEUS_MULTIPROC_DIR is set (several gunicorn workers), every worker writes its values there
and `/metrics` aggregates all of them. prometheus_client chooses its value storage when it is
first imported, so that variable must be set before this module is imported (this is the only
module that imports prometheus_client); `python -m hooks serve` does so.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

import orjson
import prometheus_client
from prometheus_client import multiprocess

from hooks.edge import settings

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

_log = logging.getLogger(f"{LOGGER_NAME}.app")


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


# --- metrics -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Metrics:
    """The app's metric objects, how to expose them, and the record of each call."""

    registry: prometheus_client.CollectorRegistry
    calls: prometheus_client.Counter
    errors: prometheus_client.Counter
    duration: prometheus_client.Histogram
    unchanged: prometheus_client.Counter
    multiprocess_dir: str | None

    @classmethod
    def create(cls) -> Metrics:
        """Multiprocess metrics when PROMETHEUS_MULTIPROC_DIR is set now, else a registry of
        this app's own (several apps in one process, as in tests, never clash)."""
        multiprocess_dir = os.environ.get(settings.MULTIPROC_ENV) or None
        registry = prometheus_client.CollectorRegistry()
        if multiprocess_dir is None:
            prometheus_client.ProcessCollector(registry=registry)
            prometheus_client.PlatformCollector(registry=registry)
        return cls(
            registry=registry,
            calls=prometheus_client.Counter(
                "disaggregatedset_hook_calls",
                "Hook calls answered, by hook, HTTP status code and outcome.",
                ["hook", "code", "outcome"],
                registry=registry,
            ),
            errors=prometheus_client.Counter(
                "disaggregatedset_hook_errors",
                "Hook calls answered with a non-200 status, by hook and kind of error.",
                ["hook", "error"],
                registry=registry,
            ),
            duration=prometheus_client.Histogram(
                "disaggregatedset_hook_duration_seconds",
                "Time to answer a hook call, from the first byte read to the serialised answer.",
                ["hook"],
                buckets=LATENCY_BUCKETS,
                registry=registry,
            ),
            unchanged=prometheus_client.Counter(
                "disaggregatedset_sync_unchanged",
                "DisaggregatedSet syncs answered with the observed state (children as last"
                " applied, the same status): Metacontroller writes nothing for them.",
                registry=registry,
            ),
            multiprocess_dir=multiprocess_dir,
        )

    def exposition(self) -> bytes:
        """The Prometheus text format of every worker's metrics (or this process's)."""
        if self.multiprocess_dir is None:
            return prometheus_client.generate_latest(self.registry)
        registry = prometheus_client.CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=self.multiprocess_dir)  # type: ignore[no-untyped-call]
        return prometheus_client.generate_latest(registry)

    def answered(self, hook: str, summary: Mapping[str, object], *, seconds: float) -> None:
        """The metrics and the log line of a call answered 200."""
        outcome = str(summary.get("outcome", "ok"))
        self._count(hook, status=200, outcome=outcome, seconds=seconds)
        writes = summary.get("writes")
        if isinstance(writes, Mapping) and not any(writes.values()):
            self.unchanged.inc()
        fields = {
            **summary,
            "hook": hook,
            "status": 200,
            "outcome": outcome,
            "duration_ms": _ms(seconds),
        }
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
        """The metrics and the log line (with the traceback for a 5xx) of a failed call."""
        self._count(hook, status=status, outcome=kind, seconds=seconds)
        self.errors.labels(hook=hook, error=kind).inc()
        fields = {
            "hook": hook,
            "status": status,
            "outcome": kind,
            "duration_ms": _ms(seconds),
            "error": message,
        }
        if status >= 500:
            _log.error("%s %d", hook, status, extra={"hook_fields": fields}, exc_info=error)
        else:
            _log.warning("%s %d", hook, status, extra={"hook_fields": fields})

    def _count(self, hook: str, *, status: int, outcome: str, seconds: float) -> None:
        self.calls.labels(hook=hook, code=str(status), outcome=outcome).inc()
        self.duration.labels(hook=hook).observe(seconds)


def mark_process_dead(pid: int) -> None:
    """Drop the metric files of a worker that exited (gunicorn's child_exit hook calls this)."""
    directory = os.environ.get(settings.MULTIPROC_ENV)
    if directory:
        multiprocess.mark_process_dead(pid, directory)  # type: ignore[no-untyped-call]


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)
