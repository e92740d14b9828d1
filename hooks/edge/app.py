"""The HTTP edge: Flask factory, routes, the one exception→HTTP map, the per-call log line, metrics.

A view only translates HTTP to a pure hook function and back. For each call it reads the body
within limits, decodes it once with orjson (whatever the Content-Type says: Metacontroller always
sends JSON, curl users often forget the header), reads the clock once, runs the hook
(`envelope.parse_*`, then the hook function), serialises the answer once and returns 200
application/json. Nothing here decides anything about DisaggregatedSets.

Limits that keep one process answering, whatever a client sends (`hooks.settings.Limits`):

- a body larger than `max_body_bytes` (the Content-Length, then the bytes actually read) → 413;
- a body still incomplete `body_deadline_seconds` after its first byte, or whose socket stays
  silent (the server's read timeout) → 408;
- request bodies buffered at once in this process past `buffered_bytes` → 503 (the server is
  busy; Metacontroller retries): many slow uploads cannot add up to an out-of-memory kill;
- a body whose parsed form could take more than `max_parse_bytes` → 413, before it is parsed.
  `parse_cost` bounds what orjson allocates from counts of structural bytes (objects, arrays,
  string quotes, commas) plus twice the length: an upper bound for Kubernetes requests (about 3x
  the real size) and for hostile shapes alike (a 57 MiB body of `{}` would take 1.4 GiB).

Failures never produce a partial 200. The map (`_failure_for`) is the only place that turns an
exception into an HTTP status:

- body larger than `max_body_bytes`, or too costly to parse → 413; too slow → 408; too many
  bodies buffered at once → 503;
- body that is not JSON, or that `envelope` rejects (`RequestError`: wrong kind, no parent, bad
  shape) → 400 (the request itself is at fault; Metacontroller retries with backoff either way);
- `desired.UnsafeDeletionError` and every other exception → 500.

Error answers carry a small JSON body `{"error": ..., "hook": ...}` whose message is capped (a
request can hold megabytes in a field an error names); an unexpected exception's text stays in
the log (with its traceback), not in the answer.

Logging: one JSON line per hook call, written through the `hooks` logger to stderr by the formatter
that `create_app` installs: INFO for a 200, WARNING for a 4xx, ERROR with the traceback for a 5xx.
The line holds the hook's summary (object, generation, revision, per-slice step, child counts,
outcome), the status and the duration in ms; request bodies and pod templates are never logged.
`/healthz` and `/metrics` are not logged.

Metrics (Prometheus): calls by hook, status code and outcome; errors by hook and error kind; a
latency histogram by hook. When PROMETHEUS_MULTIPROC_DIR is set (several gunicorn workers), every
worker writes its values there and `/metrics` aggregates all of them. prometheus_client chooses its
value storage when it is first imported, so that variable must be set before this module is
imported; `python -m hooks serve` does so.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Final

import flask
import orjson
import prometheus_client
from prometheus_client import multiprocess
from werkzeug.exceptions import HTTPException

from hooks.core import desired, records, scalers, sync
from hooks.edge import envelope, settings
from hooks.edge.settings import Limits

MAX_ERROR_MESSAGE: Final = 500
DEFAULT_LIMITS: Final = Limits()
LOGGER_NAME: Final = "hooks"
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
)
_READ_CHUNK: Final = 1024 * 1024
_JSON: Final = "application/json"

_log = logging.getLogger(f"{LOGGER_NAME}.app")


# --- the hook table ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Hook:
    """One hook endpoint: its name (log and metric label) and the pure call behind it.

    `run(body, now)` gets the decoded JSON body and the call's timestamp; it parses the body with
    `envelope` and calls the hook function.
    """

    name: str
    run: Callable[[object, str], records.HookResult]


def _run_sync(body: object, now: str) -> records.HookResult:
    request = envelope.parse_sync_request(body)
    result = sync.sync(request, now=now)
    if not isinstance(result.answer, records.SyncAnswer):
        return result
    writes = envelope.writes(request, result.answer)
    return dataclasses.replace(result, summary={**result.summary, "writes": writes})


def _run_customize(body: object, now: str) -> records.HookResult:
    return sync.customize(envelope.parse_customize_request(body))


def _run_scaler_sync(body: object, now: str) -> records.HookResult:
    return scalers.sync(envelope.parse_scaler_sync_request(body), now=now)


def _run_scaler_customize(body: object, now: str) -> records.HookResult:
    return scalers.customize(envelope.parse_scaler_customize_request(body))


DEFAULT_HOOKS: Final[Mapping[str, Hook]] = MappingProxyType(
    {
        "/sync": Hook("sync", _run_sync),
        "/customize": Hook("customize", _run_customize),
        "/rolescaler/sync": Hook("rolescaler-sync", _run_scaler_sync),
        "/rolescaler/customize": Hook("rolescaler-customize", _run_scaler_customize),
    }
)


def utc_now() -> str:
    """The current time as RFC 3339 UTC with second precision, e.g. 2026-11-29T10:25:47Z."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- the exception→HTTP map ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Failure:
    """How a failed call is answered, counted and logged."""

    status: int
    kind: str
    message: str


class _BodyError(Exception):
    """The body is too large or is not JSON; carries its answer."""

    def __init__(self, failure: _Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


def _failure_for(error: Exception) -> _Failure:
    """The one exception→HTTP map of the hook server."""
    if isinstance(error, _BodyError):
        return error.failure
    # The read timeout of the socket, or the body deadline; werkzeug reports a failed read of
    # the body as a client disconnect raised while handling it.
    if isinstance(error, TimeoutError) or isinstance(error.__context__, TimeoutError):
        return _Failure(408, "body_timeout", "request body not received in time")
    if isinstance(error, envelope.RequestError):
        return _Failure(400, "invalid_request", str(error))
    if isinstance(error, HTTPException):
        # Werkzeug's own (for example a client that disconnects while sending the body).
        return _Failure(error.code or 500, "http", error.description or error.name)
    if isinstance(error, desired.UnsafeDeletionError):
        return _Failure(500, "unsafe_deletion", str(error))
    return _Failure(
        500, "internal", f"internal error ({type(error).__name__}); see the hook server log"
    )


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
class _Metrics:
    """The app's metric objects and how to expose them."""

    registry: prometheus_client.CollectorRegistry
    calls: prometheus_client.Counter
    errors: prometheus_client.Counter
    duration: prometheus_client.Histogram
    unchanged: prometheus_client.Counter
    multiprocess_dir: str | None

    @classmethod
    def create(cls, multiprocess_dir: str | None) -> _Metrics:
        # A private registry per app: several apps in one process (tests) never clash.
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


def mark_process_dead(pid: int) -> None:
    """Drop the metric files of a worker that exited (gunicorn's child_exit hook calls this)."""
    directory = os.environ.get(settings.MULTIPROC_ENV)
    if directory:
        multiprocess.mark_process_dead(pid, directory)  # type: ignore[no-untyped-call]


# --- limits --------------------------------------------------------------------------------------


class _BufferedBodies:
    """Bytes of request bodies this process holds right now, against `Limits.buffered_bytes`.

    Calls share one process (the async worker serves many connections); taking and releasing
    happen between reads, never concurrently with each other in one process.
    """

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self.held = 0

    def take(self, size: int) -> None:
        if self.held + size > self._limit:
            raise _BodyError(
                _Failure(503, "busy", "too many request bodies in flight; retry shortly")
            )
        self.held += size

    def release(self, size: int) -> None:
        self.held -= size


# parse_cost's weights: bytes per `{`, `[`, unescaped `"` and `,`, and per byte of the body.
_COST_OBJECT: Final = 200
_COST_ARRAY: Final = 64
_COST_STRING: Final = 28
_COST_ENTRY: Final = 48
_COST_BYTE: Final = 2


def parse_cost(body: bytes) -> int:
    """An upper bound of the bytes `orjson.loads(body)` allocates, from a few byte counts.

    Weights: 200 per `{` (a dict and its table), 64 per `[`, 28 per unescaped `"` (a string is two
    quotes and about 56 bytes of header), 48 per `,` (an entry: a list slot or a dict item with
    its value), plus twice the length (string contents). `{` inside strings count too, so real
    requests come out about 3x their parsed size: safe, never under.
    """
    quotes = body.count(b'"') - body.count(b'\\"')
    return (
        _COST_OBJECT * body.count(b"{")
        + _COST_ARRAY * body.count(b"[")
        + _COST_STRING * quotes
        + _COST_ENTRY * body.count(b",")
        + _COST_BYTE * len(body)
    )


def over_parse_budget(body: bytes, budget: int) -> bool:
    """Whether `parse_cost(body)` exceeds `budget`; a body too short to reach it whatever it
    holds (every byte a `{`) is not counted."""
    most_per_byte = max(_COST_OBJECT, _COST_ARRAY, _COST_STRING, _COST_ENTRY) + _COST_BYTE
    return most_per_byte * len(body) > budget and parse_cost(body) > budget


# --- the app -------------------------------------------------------------------------------------


def create_app(
    *,
    hooks: Mapping[str, Hook] = DEFAULT_HOOKS,
    limits: Limits = DEFAULT_LIMITS,
    clock: Callable[[], str] = utc_now,
    log_level: str | int = "INFO",
    metrics_port: int | None = None,
) -> flask.Flask:
    """The hook server: one POST route per entry of `hooks` (path → Hook), /healthz, /metrics.

    Installs the JSON log handler. Metrics use multiprocess mode when PROMETHEUS_MULTIPROC_DIR is
    set in the environment at this point, a registry of this app otherwise. With `metrics_port`,
    requests that arrive on that port reach only /metrics and /healthz (a network policy can then
    admit Prometheus there without admitting it to the hooks).
    """
    if limits.max_body_bytes < 1 or limits.max_parse_bytes < 1:
        raise ValueError(f"limits must be positive, got {limits}")
    configure_logging(log_level)
    metrics = _Metrics.create(os.environ.get(settings.MULTIPROC_ENV) or None)
    buffered = _BufferedBodies(limits.buffered_bytes)
    app = flask.Flask(__name__)

    for path, hook in hooks.items():
        app.add_url_rule(
            path,
            endpoint=f"hook:{hook.name}",
            view_func=_hook_view(
                hook, metrics=metrics, limits=limits, buffered=buffered, clock=clock
            ),
            methods=["POST"],
        )

    if metrics_port is not None:

        @app.before_request
        def hooks_not_on_the_metrics_port() -> flask.Response | None:
            on_metrics_port = flask.request.environ.get("SERVER_PORT") == str(metrics_port)
            if on_metrics_port and flask.request.path not in ("/metrics", "/healthz"):
                return _json_response({"error": "only /metrics is served on this port"}, status=404)
            return None

    @app.get("/healthz")
    def healthz() -> flask.Response:
        return flask.Response("ok", status=200, mimetype="text/plain")

    @app.get("/metrics")
    def metrics_view() -> flask.Response:
        return flask.Response(
            metrics.exposition(), status=200, content_type=prometheus_client.CONTENT_TYPE_LATEST
        )

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException) -> flask.Response:
        # Unknown paths and wrong methods answer JSON too.
        return _json_response({"error": error.description or error.name}, status=error.code or 500)

    return app


def _hook_view(
    hook: Hook,
    *,
    metrics: _Metrics,
    limits: Limits,
    buffered: _BufferedBodies,
    clock: Callable[[], str],
) -> Callable[[], flask.Response]:
    def view() -> flask.Response:
        started = time.perf_counter()
        try:
            result, payload = _answer(hook, flask.request, limits, buffered, clock)
        except Exception as error:
            return _answer_failure(hook, metrics, error, seconds=time.perf_counter() - started)
        seconds = time.perf_counter() - started
        response = flask.Response(payload, status=200, mimetype=_JSON)
        # Counted and logged once the answer is sent: Metacontroller does not wait for it.
        response.call_on_close(lambda: _account(hook, metrics, result.summary, seconds))
        return response

    return view


def _account(hook: Hook, metrics: _Metrics, summary: Mapping[str, object], seconds: float) -> None:
    """The metrics and the log line of an answered call."""
    outcome = str(summary.get("outcome", "ok"))
    _record(hook, metrics, status=200, outcome=outcome, seconds=seconds)
    writes = summary.get("writes")
    if isinstance(writes, Mapping) and not any(writes.values()):
        metrics.unchanged.inc()
    fields = {
        **summary,
        "hook": hook.name,
        "status": 200,
        "outcome": outcome,
        "duration_ms": _ms(seconds),
    }
    _log.info("%s %d", hook.name, 200, extra={"hook_fields": fields})


def _answer(
    hook: Hook,
    request: flask.Request,
    limits: Limits,
    buffered: _BufferedBodies,
    clock: Callable[[], str],
) -> tuple[records.HookResult, bytes]:
    """Read, decode, run and serialise one call; the body's bytes are let go before the hook."""
    chunks = _read_body(request, limits=limits, buffered=buffered)
    size = sum(len(chunk) for chunk in chunks)
    try:
        raw = b"".join(chunks)
        chunks.clear()
        if over_parse_budget(raw, limits.max_parse_bytes):
            raise _BodyError(
                _Failure(413, "body_too_complex", "request body would take too much memory")
            )
        # Parsing and the hook are pure work on memory: no reads or writes happen inside, so
        # pausing the collector for them is safe whatever the worker model.
        with collector_paused():
            body = _decode(raw)
            del raw
            result = hook.run(body, clock())
            del body
            payload = orjson.dumps(envelope.render_answer(result.answer))
    finally:
        buffered.release(size)
    return result, payload


def _answer_failure(
    hook: Hook, metrics: _Metrics, error: Exception, *, seconds: float
) -> flask.Response:
    """Count, log (once; with the traceback for a 5xx) and answer a failed call."""
    failure = _failure_for(error)
    failure = _Failure(failure.status, failure.kind, cap_message(failure.message))
    _record(hook, metrics, status=failure.status, outcome=failure.kind, seconds=seconds)
    metrics.errors.labels(hook=hook.name, error=failure.kind).inc()
    fields = {
        "hook": hook.name,
        "status": failure.status,
        "outcome": failure.kind,
        "duration_ms": _ms(seconds),
        "error": failure.message,
    }
    if failure.status >= 500:
        _log.error(
            "%s %d", hook.name, failure.status, extra={"hook_fields": fields}, exc_info=error
        )
    else:
        _log.warning("%s %d", hook.name, failure.status, extra={"hook_fields": fields})
    return _json_response({"error": failure.message, "hook": hook.name}, status=failure.status)


def _read_body(request: flask.Request, *, limits: Limits, buffered: _BufferedBodies) -> list[bytes]:
    """The raw body in chunks, within the size, time and buffering limits.

    The bytes read are taken from `buffered`; the caller releases them. On a failure here they
    are released before raising.
    """
    limit = limits.max_body_bytes
    declared = request.content_length
    if declared is not None and declared > limit:
        raise _BodyError(_too_large(limit))
    deadline = time.monotonic() + limits.body_deadline_seconds
    chunks: list[bytes] = []
    size = 0
    try:
        # Without a Content-Length (chunked upload) only the bytes read can be checked.
        while chunk := request.stream.read(_READ_CHUNK):
            buffered.take(len(chunk))
            size += len(chunk)
            chunks.append(chunk)
            if size > limit:
                raise _BodyError(_too_large(limit))
            if time.monotonic() > deadline:
                raise TimeoutError("request body not received in time")
    except BaseException:
        buffered.release(size)
        raise
    return chunks


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Keep Python's cyclic garbage collector from running during one hook call.

    A large request parses into millions of containers; each allocation burst would trigger
    collections that walk the whole heap and find nothing (parsed JSON has no reference cycles;
    reference counting frees it), which made large syncs about 4x slower in the benchmark.
    Only pure computation runs inside (no I/O, so no other call of this process can interleave).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _decode(body: bytes) -> object:
    try:
        decoded: object = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise _BodyError(
            _Failure(400, "invalid_json", f"request body is not valid JSON: {error}")
        ) from None
    return decoded


def cap_message(text: str) -> str:
    """An error message short enough to answer and log (a request can hold megabytes in a field
    that an error names)."""
    if len(text) <= MAX_ERROR_MESSAGE:
        return text
    return f"{text[:MAX_ERROR_MESSAGE]}... ({len(text) - MAX_ERROR_MESSAGE} more characters)"


def _too_large(limit: int) -> _Failure:
    return _Failure(413, "body_too_large", f"request body is larger than {limit} bytes")


def _record(hook: Hook, metrics: _Metrics, *, status: int, outcome: str, seconds: float) -> None:
    metrics.calls.labels(hook=hook.name, code=str(status), outcome=outcome).inc()
    metrics.duration.labels(hook=hook.name).observe(seconds)


def _json_response(document: Mapping[str, object], *, status: int) -> flask.Response:
    return flask.Response(orjson.dumps(document), status=status, mimetype=_JSON)


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)
