"""The HTTP edge: Flask factory, routes and the one exception→HTTP map (`failure_for`).

A view reads the body (`hooks.server.bodies`), reads the clock once, runs the pure hook on the
body decoded whatever the Content-Type says (`hooks.server.isolation`), and has the call logged
and counted once answered (`hooks.server.observability`). A failure is never a partial 200 but
`{"error": ..., "hook": ...}`; an unexpected exception's text stays in the log. Nothing here
decides anything about DisaggregatedSets.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

import flask
import orjson
from werkzeug.exceptions import HTTPException

from hooks.api import times
from hooks.core import desired, problems, records, scalers, sync
from hooks.server import bodies, isolation, observability, revisions, settings
from hooks.server.settings import MIB, Limits
from hooks.wire import answers, envelope, values

DEFAULT_LIMITS: Final = Limits()
_JSON: Final = "application/json"


# --- the hook table ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Hook:
    """One hook endpoint: its name (log and metric label) and its pure call, `run(body, now)`."""

    name: str
    run: Callable[[object, str], records.HookResult]


def _run_sync(body: object, now: str, *, memo: revisions.RevisionMemo) -> records.HookResult:
    request = envelope.parse_sync_request(body, revision_of=memo.of_roles)
    result = sync.sync(request, now=now, revision_of=memo.of_spec)
    if not isinstance(result.answer, records.SyncAnswer):
        return result
    return dataclasses.replace(result, request=request)


def _run_customize(body: object, now: str) -> records.HookResult:
    return sync.customize(envelope.parse_customize_request(body))


def _run_scaler_sync(body: object, now: str) -> records.HookResult:
    return scalers.sync(envelope.parse_scaler_sync_request(body), now=now)


def _run_scaler_customize(body: object, now: str) -> records.HookResult:
    return scalers.customize(envelope.parse_scaler_customize_request(body))


def default_hooks() -> Mapping[str, Hook]:
    """The four hook endpoints (path → Hook), with a revision memo of their own."""
    memo = revisions.RevisionMemo()
    return MappingProxyType(
        {
            "/sync": Hook("sync", functools.partial(_run_sync, memo=memo)),
            "/customize": Hook("customize", _run_customize),
            "/rolescaler/sync": Hook("rolescaler-sync", _run_scaler_sync),
            "/rolescaler/customize": Hook("rolescaler-customize", _run_scaler_customize),
        }
    )


def utc_now() -> str:
    """The current time as RFC 3339 UTC with second precision, e.g. 2026-11-29T10:25:47Z."""
    return times.format_utc(int(time.time()))


# --- the exception→HTTP map ----------------------------------------------------------------------


_FAILURES: Final[tuple[tuple[type[Exception], int, str], ...]] = (
    (bodies.BodyTooLarge, 413, "body_too_large"),
    (bodies.BodyTooComplex, 413, "body_too_complex"),
    (bodies.BodyTimeout, 408, "body_timeout"),
    (bodies.Busy, 503, "busy"),
    (bodies.BodyUnreadable, 400, "body_unreadable"),
    (bodies.InvalidJson, 400, "invalid_json"),
    (isolation.CallTimeout, 503, "call_timeout"),
    (isolation.CallFailed, 500, "call_failed"),
    (values.RequestError, 400, "invalid_request"),
    (desired.UnsafeDeletionError, 500, "unsafe_deletion"),
)


def failure_for(error: Exception) -> tuple[int, str, str]:
    """The one exception→HTTP map: a failed call's status, kind (metric label) and message."""
    for cls, status, kind in _FAILURES:
        if isinstance(error, cls):
            return status, kind, str(error)
    if isinstance(error, HTTPException):
        # Werkzeug's own (for example a client that disconnects while sending the body).
        return error.code or 500, "http", error.description or error.name
    return 500, "internal", f"internal error ({type(error).__name__}); see the hook server log"


# --- the app -------------------------------------------------------------------------------------


def create_app(
    *,
    hooks: Mapping[str, Hook] | None = None,
    limits: Limits = DEFAULT_LIMITS,
    clock: Callable[[], str] = utc_now,
    log_level: str | int = "INFO",
    metrics_port: int | None = None,
    server_pid: int | None = None,
) -> flask.Flask:
    """The hook server: one POST route per entry of `hooks` (by default `default_hooks()`),
    /healthz and /metrics (alone on `metrics_port`); installs the JSON log handler. `server_pid`
    (gunicorn's arbiter) adds the memory of the server's processes to the metrics."""
    if min(limits.max_body_bytes, limits.max_parse_bytes, limits.isolate_above_bytes + 1) < 1:
        raise ValueError(f"limits must be positive, got {limits}")
    observability.configure_logging(log_level)
    metrics = observability.Metrics(server_pid=server_pid)
    views = _Views(
        limits,
        bodies.BufferedBodies(limits.buffered_bytes),
        isolation.Calls(limits),
        clock,
        metrics,
    )
    app = flask.Flask(__name__)
    for path, hook in (default_hooks() if hooks is None else hooks).items():
        app.add_url_rule(
            path, endpoint=f"hook:{hook.name}", view_func=views.view(hook), methods=["POST"]
        )
    _add_plain_routes(app, metrics=metrics, metrics_port=metrics_port)
    return app


def _add_plain_routes(
    app: flask.Flask, *, metrics: observability.Metrics, metrics_port: int | None
) -> None:
    """/healthz, /metrics, JSON answers for unknown paths and methods, and nothing but the first
    two on `metrics_port`."""
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
            metrics.exposition(), status=200, content_type=observability.CONTENT_TYPE
        )

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException) -> flask.Response:
        # Unknown paths and wrong methods answer JSON too.
        return _json_response({"error": error.description or error.name}, status=error.code or 500)


@dataclass(frozen=True, slots=True)
class _Views:
    """The hook views of one app, and what they share."""

    limits: Limits
    buffered: bodies.BufferedBodies
    calls: isolation.Calls
    clock: Callable[[], str]
    metrics: observability.Metrics

    def view(self, hook: Hook) -> Callable[[], flask.Response]:
        def view() -> flask.Response:
            started = time.perf_counter()
            try:
                summary, payload = self._answer(hook, flask.request)
            except Exception as error:
                status, kind, message = failure_for(error)
                message = problems.cut(message, settings.MAX_ERROR_MESSAGE)
                self.metrics.failed(
                    hook.name,
                    status=status,
                    kind=kind,
                    message=message,
                    seconds=time.perf_counter() - started,
                    error=error,
                )
                return _json_response({"error": message, "hook": hook.name}, status=status)
            seconds = time.perf_counter() - started
            response = flask.Response(payload, status=200, mimetype=_JSON)
            # Counted and logged once the answer is sent: Metacontroller does not wait for it.
            response.call_on_close(
                lambda: self.metrics.answered(hook.name, summary, seconds=seconds)
            )
            return response

        return view

    def _answer(self, hook: Hook, request: flask.Request) -> tuple[Mapping[str, object], bytes]:
        """One call's summary for the log line, and the answer's bytes."""
        body, held = bodies.read(
            request.stream,
            declared=request.content_length,
            limits=self.limits,
            buffered=self.buffered,
        )
        try:
            answered, child_peak = self.calls.answer(body, work(hook, self.clock()))
        finally:
            self.buffered.release(held)
        summary, payload = answered
        if child_peak is not None:
            summary = {**summary, "child_peak_mib": round(child_peak / MIB, 1)}
        return summary, payload


def work(hook: Hook, now: str) -> Callable[[object], tuple[Mapping[str, object], bytes]]:
    """The pure part of a call: the decoded body to the summary (with a sync's `writes`) and the
    serialised answer."""

    def work(body: object) -> tuple[Mapping[str, object], bytes]:
        result = hook.run(body, now)
        response = answers.render_answer(result.answer)
        if result.request is None:
            return result.summary, orjson.dumps(response)
        writes = answers.writes(result.request, response)
        return {**result.summary, "writes": writes}, orjson.dumps(response)

    return work


def _json_response(document: Mapping[str, object], *, status: int) -> flask.Response:
    return flask.Response(orjson.dumps(document), status=status, mimetype=_JSON)
