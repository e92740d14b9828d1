"""The HTTP edge (`hooks.server.app`): routes, the exception→HTTP map, the log line and the metrics.

Most cases inject fake hooks, so they pin the transport without depending on what the hooks
decide; the last group replays the captured Metacontroller requests through the real hooks.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import flask
import orjson
import pytest
from flask.testing import FlaskClient
from gunicorn.http import errors as http_errors

from hooks import api
from hooks.core import desired, records
from hooks.server import app as hook_app
from hooks.server import bodies, isolation, observability, settings
from hooks.server.settings import MIB, Limits
from hooks.wire import values
from tests import shared
from tests.golden import make_fixtures

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "requests"
# Requests captured from a real Metacontroller (the golden fixtures also hold simulated ones).
CAPTURED_FILES = sorted(
    path.name for path in FIXTURES.glob("*.json") if path.name not in make_fixtures.BUILT
)
NOW = "2026-11-29T10:25:47Z"
HOOK_PATHS = {
    "/sync": "sync",
    "/customize": "customize",
    "/rolescaler/sync": "rolescaler-sync",
    "/rolescaler/customize": "rolescaler-customize",
}


def load_request(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


class FakeHook:
    """Records what it was called with and answers (or raises) what it was told to."""

    def __init__(self, name: str, answer: Callable[[object, str], records.HookResult]) -> None:
        self.name = name
        self.answer = answer
        self.calls: list[tuple[object, str]] = []

    def __call__(self, body: object, now: str) -> records.HookResult:
        self.calls.append((body, now))
        return self.answer(body, now)


def sync_answer(*, replicas: int = 0, children: tuple[Any, ...] = ()) -> records.SyncAnswer:
    """A small typed sync answer (a scaler's status, so that its JSON is short)."""
    return records.SyncAnswer(
        status=api.DisaggregatedSetRoleScalerStatus(replicas=replicas), children=children
    )


def answer_with(
    answer: records.SyncAnswer | records.CustomizeAnswer,
    summary: Mapping[str, object] | None = None,
) -> Callable[[object, str], records.HookResult]:
    def call(body: object, now: str) -> records.HookResult:
        return records.HookResult(answer=answer, summary=summary or {})

    return call


def raising(error: Exception) -> Callable[[object, str], records.HookResult]:
    def answer(body: object, now: str) -> records.HookResult:
        raise error

    return answer


class FakeTimer:
    """Stands for the `time` module in `hooks.server.app`: its `perf_counter` moves only while a
    hook wrapped by `taking` runs, by exactly the seconds given for that call."""

    def __init__(self) -> None:
        self.now = 1000.0

    def perf_counter(self) -> float:
        return self.now

    def taking(
        self, seconds: Sequence[float], answer: Callable[[object, str], records.HookResult]
    ) -> Callable[[object, str], records.HookResult]:
        each = iter(seconds)

        def call(body: object, now: str) -> records.HookResult:
            self.now += next(each)
            return answer(body, now)

        return call


DEFAULT_LIMITS = Limits()


def make_client(
    answers: Mapping[str, Callable[[object, str], records.HookResult]] | None = None,
    *,
    limits: Limits = DEFAULT_LIMITS,
) -> tuple[FlaskClient, dict[str, FakeHook]]:
    fakes = {
        path: FakeHook(
            name,
            (answers or {}).get(path, answer_with(sync_answer())),
        )
        for path, name in HOOK_PATHS.items()
    }
    table = {path: hook_app.Hook(fake.name, fake) for path, fake in fakes.items()}
    application = hook_app.create_app(hooks=table, limits=limits, clock=lambda: NOW)
    return application.test_client(), fakes


@pytest.fixture(autouse=True)
def single_process_metrics(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(settings.MULTIPROC_ENV, raising=False)


def hook_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [record for record in caplog.records if record.name == "hooks.app"]


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    fields: dict[str, Any] = record.hook_fields  # type: ignore[attr-defined]
    return fields


# --- 200 paths -----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(HOOK_PATHS), ids=lambda path: path.strip("/"))
def test_each_hook_route_answers_200_with_the_hook_response(path: str) -> None:
    client, fakes = make_client({path: answer_with(sync_answer(replicas=3))})

    answer = client.post(path, data=b'{"parent": {"kind": "X"}}', content_type="application/json")

    assert answer.status_code == 200
    assert answer.mimetype == "application/json"
    assert answer.get_json() == {"status": {"replicas": 3, "conditions": []}, "children": []}
    assert fakes[path].calls == [({"parent": {"kind": "X"}}, NOW)]


@pytest.mark.parametrize(
    "content_type",
    [None, "text/plain", "application/x-www-form-urlencoded"],
    ids=["missing", "text-plain", "form"],
)
def test_body_is_decoded_whatever_the_content_type(content_type: str | None) -> None:
    client, fakes = make_client()
    headers = {} if content_type is None else {"Content-Type": content_type}

    answer = client.post("/sync", data=b'{"a": [1, 2]}', headers=headers)

    assert answer.status_code == 200
    assert fakes["/sync"].calls == [({"a": [1, 2]}, NOW)]


def test_clock_is_read_once_per_call() -> None:
    ticks: list[str] = []

    def clock() -> str:
        ticks.append(NOW)
        return NOW

    table = {"/sync": hook_app.Hook("sync", answer_with(sync_answer()))}
    client = hook_app.create_app(hooks=table, clock=clock).test_client()

    client.post("/sync", data=b"{}")

    assert ticks == [NOW]


def test_default_clock_is_rfc3339_utc_with_seconds() -> None:
    now = hook_app.utc_now()

    assert len(now) == len("2026-11-29T10:25:47Z")
    assert now[10] == "T"
    assert now.endswith("Z")


# --- failures ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [b"{not json", b"", b'{"a": 1', b"\xff\xfe"],
    ids=["garbage", "empty", "truncated", "not-utf8"],
)
def test_malformed_json_is_400_with_a_json_error_and_the_hook_is_not_called(body: bytes) -> None:
    client, fakes = make_client()

    answer = client.post("/sync", data=body, content_type="application/json")

    assert answer.status_code == 400
    assert answer.mimetype == "application/json"
    document = answer.get_json()
    assert document["hook"] == "sync"
    assert "not valid JSON" in document["error"]
    assert fakes["/sync"].calls == []


def test_request_error_from_parsing_is_400() -> None:
    client, _ = make_client({"/sync": raising(values.RequestError("parent must be a Thing"))})

    answer = client.post("/sync", data=b"{}")

    assert answer.status_code == 400
    assert answer.get_json() == {"error": "parent must be a Thing", "hook": "sync"}


def test_wrong_kind_is_rejected_by_the_real_parser_with_400() -> None:
    client = hook_app.create_app(clock=lambda: NOW).test_client()

    answer = client.post("/sync", data=load_request("rolescaler-sync.json"))

    assert answer.status_code == 400
    document = answer.get_json()
    assert document["hook"] == "sync"
    assert "DisaggregatedSet" in document["error"]
    assert "children" not in document


@pytest.mark.parametrize("body", [b"[]", b"null", b"42"], ids=["list", "null", "number"])
def test_json_that_is_not_a_request_object_is_400(body: bytes) -> None:
    client = hook_app.create_app(clock=lambda: NOW).test_client()

    answer = client.post("/customize", data=body)

    assert answer.status_code == 400
    assert answer.get_json()["hook"] == "customize"


def test_body_over_the_declared_limit_is_413_without_calling_the_hook() -> None:
    client, fakes = make_client(limits=Limits(max_body_bytes=16))

    answer = client.post("/sync", data=b'{"padding": "' + b"x" * 64 + b'"}')

    assert answer.status_code == 413
    assert answer.mimetype == "application/json"
    assert answer.get_json() == {"error": "request body is larger than 16 bytes", "hook": "sync"}
    assert fakes["/sync"].calls == []


def test_body_at_the_limit_is_accepted() -> None:
    body = b'{"k": "' + b"x" * 8 + b'"}'
    client, fakes = make_client(limits=Limits(max_body_bytes=len(body)))

    answer = client.post("/sync", data=body)

    assert answer.status_code == 200
    assert len(fakes["/sync"].calls) == 1


def test_streamed_body_without_content_length_is_limited_by_the_bytes_read() -> None:
    client, fakes = make_client(limits=Limits(max_body_bytes=16))
    body = b'{"padding": "' + b"x" * 64 + b'"}'

    # A chunked upload: no Content-Length, the server marks the stream as terminated.
    answer = client.post(
        "/sync",
        input_stream=io.BytesIO(body),
        environ_overrides={"wsgi.input_terminated": True},
    )

    assert answer.status_code == 413
    assert fakes["/sync"].calls == []


def test_streamed_body_within_the_limit_is_read_whole() -> None:
    client, fakes = make_client(limits=Limits(max_body_bytes=64))

    answer = client.post(
        "/sync",
        input_stream=io.BytesIO(b'{"a": "b"}'),
        environ_overrides={"wsgi.input_terminated": True},
    )

    assert answer.status_code == 200
    assert fakes["/sync"].calls == [({"a": "b"}, NOW)]


def test_unexpected_exception_is_500_with_a_small_json_body_and_no_children() -> None:
    client, _ = make_client({"/sync": raising(KeyError("leaderWorkerTemplate"))})

    answer = client.post("/sync", data=b"{}")

    assert answer.status_code == 500
    assert answer.mimetype == "application/json"
    document = answer.get_json()
    assert set(document) == {"error", "hook"}
    assert document["hook"] == "sync"
    assert "KeyError" in document["error"]


def test_unsafe_deletion_is_500_naming_the_problem() -> None:
    error = desired.UnsafeDeletionError("would delete LeaderWorkerSet llm-0-6ad7c921-prefill")
    client, _ = make_client({"/sync": raising(error)})

    answer = client.post("/sync", data=b"{}")

    assert answer.status_code == 500
    assert answer.get_json() == {"error": str(error), "hook": "sync"}


def test_response_that_cannot_be_serialised_is_500_not_a_partial_200() -> None:
    client, _ = make_client({"/sync": answer_with(sync_answer(children=({"odd": {1, 2}},)))})

    answer = client.post("/sync", data=b"{}")

    assert answer.status_code == 500
    assert "children" not in answer.get_json()


def test_unknown_path_and_wrong_method_answer_json() -> None:
    client, _ = make_client()

    missing = client.post("/nope", data=b"{}")
    wrong_method = client.get("/sync")

    assert missing.status_code == 404
    assert missing.mimetype == "application/json"
    assert wrong_method.status_code == 405
    assert "error" in wrong_method.get_json()


def test_limits_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_body_bytes=0"):
        hook_app.create_app(limits=Limits(max_body_bytes=0))


# --- limits that keep the process answering ------------------------------------------------------


def test_a_large_body_is_answered_in_a_child_process_with_the_same_answer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Bodies over `isolate_above_bytes` are parsed and answered in a memory-limited child."""
    caplog.set_level(logging.INFO, logger="hooks")
    body = load_request("ds-sync-with-children.json")
    inline = hook_app.create_app(clock=lambda: NOW).test_client()
    isolated = hook_app.create_app(
        clock=lambda: NOW, limits=Limits(isolate_above_bytes=1024)
    ).test_client()

    expected = inline.post("/sync", data=body)
    answer = isolated.post("/sync", data=body)

    assert answer.status_code == 200
    assert answer.data == expected.data
    inline_line, isolated_line = (fields_of(record) for record in hook_lines(caplog))
    assert "child_peak_mib" not in inline_line
    assert isolated_line["child_peak_mib"] >= 0
    assert {
        k: v for k, v in isolated_line.items() if k not in ("child_peak_mib", "duration_ms")
    } == {k: v for k, v in inline_line.items() if k != "duration_ms"}


def test_a_large_body_whose_call_needs_more_than_the_budget_is_413() -> None:
    """Regression (issue 17, item 2): the parse budget was an estimate that arrays nested 500
    deep beat by half; the budget is now the memory limit of the child that answers."""
    limits = Limits(isolate_above_bytes=1024, max_parse_bytes=32 * MIB)
    client, _ = make_client(limits=limits)
    body = b"[" + b",".join([b"[" * 500 + b"]" * 500] * 2000) + b"]"  # 2 MiB, 80 MiB parsed

    answer = client.post("/sync", data=body)

    assert answer.status_code == 413
    assert answer.get_json() == {"error": "request body would take too much memory", "hook": "sync"}


@pytest.mark.parametrize(
    ("error", "status", "kind"),
    [
        (isolation.CallTimeout("the call did not end in time"), 503, "call_timeout"),
        (
            isolation.CallFailed("the call's child process ended without an answer"),
            500,
            "call_failed",
        ),
        (bodies.BodyUnreadable("malformed request body: InvalidChunkSize"), 400, "body_unreadable"),
    ],
    ids=["child-timeout", "child-died", "broken-framing"],
)
def test_failures_of_large_calls_and_of_transfers_are_mapped(
    error: Exception, status: int, kind: str
) -> None:
    assert hook_app.failure_for(error) == (status, kind, str(error))


def test_a_malformed_chunk_is_400_counted_as_the_clients_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Regression (issue 17, item 6): a malformed chunk size was a 500 with a traceback,
    counted as error="internal"."""
    caplog.set_level(logging.INFO, logger="hooks")

    class BadChunks(io.RawIOBase):
        def readable(self) -> bool:
            return True

        def read(self, size: int = -1, /) -> bytes:
            raise http_errors.InvalidChunkSize(b"zz")

    client, fakes = make_client()

    answer = client.post(
        "/sync",
        environ_overrides={"wsgi.input": BadChunks(), "wsgi.input_terminated": True},
    )

    assert answer.status_code == 400
    assert answer.get_json()["error"] == "malformed request body: InvalidChunkSize"
    assert fakes["/sync"].calls == []
    [record] = hook_lines(caplog)
    assert record.levelno == logging.WARNING
    assert record.exc_info is None
    text = client.get("/metrics").get_data(as_text=True)
    assert 'disaggregatedset_hook_errors_total{error="body_unreadable",hook="sync"} 1.0' in text
    assert 'error="internal"' not in text


def test_bodies_in_flight_past_the_process_budget_are_503() -> None:
    limits = Limits(max_body_bytes=64)  # two bodies of 64 bytes at once
    client, fakes = make_client(limits=limits)
    app = client.application
    buffered = next(
        cell.cell_contents.buffered
        for view in app.view_functions.values()
        for cell in (view.__closure__ or ())
        if isinstance(getattr(cell.cell_contents, "buffered", None), bodies.BufferedBodies)
    )
    held = limits.buffered_bytes - 100
    buffered.take(held)  # other uploads hold most of the budget

    answer = client.post("/sync", data=b'{"padding": "' + b"x" * 40 + b'"}')

    assert answer.status_code == 503
    assert fakes["/sync"].calls == []
    buffered.release(held)
    assert client.post("/sync", data=b"{}").status_code == 200
    assert buffered.held == 0


def test_a_body_that_takes_too_long_is_408() -> None:
    class Silent(io.RawIOBase):
        """A socket whose read timeout expires (the server's read timeout)."""

        def readable(self) -> bool:
            return True

        def readinto(self, buffer: Any) -> int:
            raise TimeoutError("timed out")

    client, fakes = make_client()

    answer = client.post(
        "/sync", environ_overrides={"wsgi.input": Silent(), "CONTENT_LENGTH": "10"}
    )

    assert answer.status_code == 408
    assert answer.get_json()["error"] == "request body not received in time"
    assert fakes["/sync"].calls == []


def test_error_messages_echo_at_most_a_few_hundred_characters(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Regression: a 5 MB `kind` was echoed whole in the error body and the log line."""
    caplog.set_level(logging.INFO, logger="hooks")
    client = hook_app.create_app(clock=lambda: NOW).test_client()
    kind = "K" * 5_000_000

    answer = client.post("/sync", data=orjson.dumps({"parent": {"kind": kind}}))

    assert answer.status_code == 400
    assert len(answer.get_data()) < 1000
    assert answer.get_json()["error"].endswith("more characters)")
    assert all(len(record.getMessage()) < 1000 for record in hook_lines(caplog))
    assert all(len(str(fields_of(record)["error"])) < 1000 for record in hook_lines(caplog))


# --- healthz and metrics -------------------------------------------------------------------------


def test_healthz_is_ok_and_not_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="hooks")
    client, _ = make_client()

    answer = client.get("/healthz")

    assert answer.status_code == 200
    assert answer.data == b"ok"
    assert hook_lines(caplog) == []


def test_metrics_count_calls_errors_and_latency_by_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    timer = FakeTimer()
    monkeypatch.setattr(hook_app, "time", timer)
    client, _ = make_client(
        {
            "/sync": timer.taking([0.25, 6.0], answer_with(sync_answer(), {"outcome": "synced"})),
            "/customize": timer.taking([0.5], raising(RuntimeError("boom"))),
        }
    )
    client.post("/sync", data=b"{}")
    client.post("/sync", data=b"{}")
    client.post("/customize", data=b"{}")
    client.post("/rolescaler/sync", data=b"{broken")

    answer = client.get("/metrics")

    assert answer.status_code == 200
    assert answer.content_type.startswith("text/plain")
    text = answer.get_data(as_text=True)
    assert 'disaggregatedset_hook_calls_total{code="200",hook="sync",outcome="synced"} 2.0' in text
    assert (
        'disaggregatedset_hook_calls_total{code="500",hook="customize",outcome="internal"} 1.0'
        in text
    )
    assert 'disaggregatedset_hook_errors_total{error="internal",hook="customize"} 1.0' in text
    assert (
        'disaggregatedset_hook_errors_total{error="invalid_json",hook="rolescaler-sync"} 1.0'
        in text
    )
    # Each call's time is observed once, answered or failed, in its hook's buckets.
    duration = "disaggregatedset_hook_duration_seconds"
    for line in (
        f'{duration}_count{{hook="sync"}} 2.0',
        f'{duration}_sum{{hook="sync"}} 6.25',
        f'{duration}_bucket{{hook="sync",le="0.1"}} 0.0',
        f'{duration}_bucket{{hook="sync",le="0.25"}} 1.0',
        f'{duration}_bucket{{hook="sync",le="5.0"}} 1.0',
        f'{duration}_bucket{{hook="sync",le="7.5"}} 2.0',
        f'{duration}_bucket{{hook="customize",le="0.25"}} 0.0',
        f'{duration}_bucket{{hook="customize",le="0.5"}} 1.0',
        f'{duration}_count{{hook="rolescaler-sync"}} 1.0',
        f'{duration}_sum{{hook="rolescaler-sync"}} 0.0',
    ):
        assert line in text


def test_each_app_has_its_own_metrics() -> None:
    first, _ = make_client()
    second, _ = make_client()
    first.post("/sync", data=b"{}")

    text = second.get("/metrics").get_data(as_text=True)

    assert 'disaggregatedset_hook_calls_total{code="200"' not in text


# --- logging -------------------------------------------------------------------------------------


def test_one_info_line_per_call_with_the_summary_status_and_duration(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.INFO, logger="hooks")
    timer = FakeTimer()
    monkeypatch.setattr(hook_app, "time", timer)
    summary = {
        "hook": "sync",
        "object": "default/llm",
        "generation": 4,
        "revision": "6ad7c921",
        "outcome": "synced",
        "slices": {"0": "scale-up"},
        "children": {"LeaderWorkerSet": 4, "Service": 2},
    }
    client, _ = make_client({"/sync": timer.taking([0.125], answer_with(sync_answer(), summary))})

    client.post("/sync", data=b'{"parent": {"spec": {"secret": "hunter2"}}}')

    [record] = hook_lines(caplog)
    assert record.levelno == logging.INFO
    fields = fields_of(record)
    assert {key: fields[key] for key in summary} == summary
    assert fields["status"] == 200
    assert fields["duration_ms"] == 125.0  # the call's time, in ms
    assert "hunter2" not in observability.JsonFormatter().format(record)


def test_a_call_without_outcome_logs_ok(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="hooks")
    client, _ = make_client(
        {"/customize": answer_with(records.CustomizeAnswer(related=()), {"rules": 1})}
    )

    client.post("/customize", data=b"{}")

    [record] = hook_lines(caplog)
    assert fields_of(record)["outcome"] == "ok"
    assert fields_of(record)["hook"] == "customize"


def test_client_error_logs_one_warning_without_traceback(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="hooks")
    client, _ = make_client()

    client.post("/sync", data=b"{broken")

    [record] = hook_lines(caplog)
    assert record.levelno == logging.WARNING
    assert record.exc_info is None
    fields = fields_of(record)
    assert fields["status"] == 400
    assert fields["outcome"] == "invalid_json"


def test_server_error_logs_one_error_line_with_the_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="hooks")
    client, _ = make_client({"/sync": raising(ZeroDivisionError("division by zero"))})

    client.post("/sync", data=b"{}")

    [record] = hook_lines(caplog)
    assert record.levelno == logging.ERROR
    assert record.exc_info is not None
    line = json.loads(observability.JsonFormatter().format(record))
    assert line["status"] == 500
    assert line["hook"] == "sync"
    assert "ZeroDivisionError: division by zero" in line["traceback"]


def test_an_overloaded_server_logs_its_503_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="hooks")
    client, _ = make_client({"/sync": raising(bodies.Busy("too many request bodies in flight"))})

    client.post("/sync", data=b"{}")

    [record] = hook_lines(caplog)
    assert record.levelno == logging.ERROR
    assert record.exc_info is None
    assert fields_of(record)["status"] == 503


def test_json_formatter_writes_one_line_and_keeps_its_own_keys() -> None:
    record = logging.LogRecord("hooks.app", logging.INFO, __file__, 1, "sync %d", (200,), None)
    record.hook_fields = {"message": "shadow", "hook": "sync", "slices": {0: "drain"}}

    text = observability.JsonFormatter().format(record)

    assert "\n" not in text
    line = json.loads(text)
    assert line["message"] == "sync 200"
    assert line["level"] == "INFO"
    assert line["logger"] == "hooks.app"
    assert line["time"].endswith("Z")
    assert line["hook"] == "sync"
    assert line["slices"] == {"0": "drain"}


def test_log_lines_go_to_stderr_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    client, _ = make_client({"/sync": answer_with(sync_answer(), {"object": "ns/a"})})

    client.post("/sync", data=b"{}")

    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [(line["hook"], line["object"], line["status"]) for line in lines] == [
        ("sync", "ns/a", 200)
    ]


def test_creating_the_app_twice_keeps_one_log_handler() -> None:
    make_client()
    make_client()

    handlers = logging.getLogger("hooks").handlers
    assert len([h for h in handlers if isinstance(h.formatter, observability.JsonFormatter)]) == 1


def test_a_call_is_counted_and_logged_once_its_answer_is_sent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="hooks")
    client, _ = make_client({"/sync": answer_with(sync_answer(), {"outcome": "synced"})})
    # A plain client leaves the answer open, as a server does while it sends the bytes.
    sending = FlaskClient(client.application).post("/sync", data=b"{}")
    counted = 'disaggregatedset_hook_calls_total{code="200",hook="sync",outcome="synced"} 1.0'

    assert sending.status_code == 200
    assert hook_lines(caplog) == []
    assert counted not in client.get("/metrics").get_data(as_text=True)
    sending.close()
    assert len(hook_lines(caplog)) == 1
    assert counted in client.get("/metrics").get_data(as_text=True)


def test_answers_that_write_nothing_are_counted() -> None:
    nothing = {"create": 0, "update": 0, "delete": 0, "status": 0}
    client, _ = make_client(
        {
            "/sync": answer_with(sync_answer(), {"writes": nothing}),
            "/rolescaler/sync": answer_with(sync_answer(), {"writes": {**nothing, "status": 1}}),
        }
    )
    client.post("/sync", data=b"{}")
    client.post("/sync", data=b"{}")
    client.post("/rolescaler/sync", data=b"{}")

    text = client.get("/metrics").get_data(as_text=True)
    assert "disaggregatedset_sync_unchanged_total 2.0" in text


# --- the real hooks on captured Metacontroller requests ------------------------------------------


@pytest.fixture
def real_client() -> FlaskClient:
    application: flask.Flask = hook_app.create_app(clock=lambda: NOW)
    return application.test_client()


@pytest.mark.parametrize("name", CAPTURED_FILES)
def test_committed_fixture_is_the_captured_request_unchanged(name: str) -> None:
    captured = shared.shared_path(f"reference/metacontroller-requests/{name}")

    assert (FIXTURES / name).read_bytes() == captured.read_bytes()


def test_every_captured_request_has_a_committed_fixture() -> None:
    captured = shared.shared_path("reference/metacontroller-requests")

    assert sorted(path.name for path in captured.glob("*.json")) == CAPTURED_FILES


@pytest.mark.parametrize(
    ("name", "set_name"),
    [
        ("ds-sync-with-children.json", "disaggregatedset-sample"),
        ("ds-sync-v2.json", "disaggregatedset-v2"),
    ],
    ids=["v1-keys", "v2-keys"],
)
def test_both_hook_versions_keep_the_observed_children(
    real_client: FlaskClient, name: str, set_name: str
) -> None:
    answer = real_client.post("/sync", data=load_request(name))

    assert answer.status_code == 200
    returned = {
        (child["kind"], child["metadata"]["name"]) for child in answer.get_json()["children"]
    }
    # The observed LWS (of a revision that is not the target) must not vanish from the answer.
    assert ("LeaderWorkerSet", f"{set_name}-0-abcdef12-prefill") in returned
    assert ("LeaderWorkerSet", f"{set_name}-0-abcdef12-decode") in returned
    assert ("DisaggregatedSetRoleScaler", f"{set_name}-decode") in returned


def test_real_sync_logs_its_decision_summary(
    real_client: FlaskClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="hooks")

    real_client.post("/sync", data=load_request("ds-sync-first.json"))

    [record] = hook_lines(caplog)
    fields = fields_of(record)
    assert fields["hook"] == "sync"
    assert fields["status"] == 200
    assert fields["object"] == "default/disaggregatedset-sample"
    assert fields["generation"] == 1
    assert len(fields["revision"]) == 8
    assert fields["outcome"] in {"synced", "held"}
    assert "children" in fields
    text = observability.JsonFormatter().format(record)
    assert "leaderWorkerTemplate" not in text
    assert "nginx" not in text


def test_real_sync_is_byte_identical_for_the_same_request(real_client: FlaskClient) -> None:
    body = load_request("ds-sync-with-children.json")

    first = real_client.post("/sync", data=body)
    second = real_client.post("/sync", data=body)

    assert first.status_code == 200
    assert first.data == second.data


def test_the_cyclic_collector_is_paused_during_a_call_and_restored_after() -> None:
    import gc

    assert gc.isenabled()
    with bodies.collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), bodies.collector_paused():
        raise RuntimeError("hook failed")
    assert gc.isenabled()


def test_the_metrics_port_serves_only_metrics_and_healthz() -> None:
    """A NetworkPolicy can admit Prometheus to the metrics port without admitting it to hooks."""
    client = hook_app.create_app(clock=lambda: NOW, metrics_port=9090).test_client()
    on_metrics_port = {"SERVER_PORT": "9090"}
    on_hook_port = {"SERVER_PORT": "8080"}

    refused = client.post("/sync", data=b"{}", environ_overrides=on_metrics_port)
    metrics = client.get("/metrics", environ_overrides=on_metrics_port)
    health = client.get("/healthz", environ_overrides=on_metrics_port)
    hook = client.post("/customize", data=b"{}", environ_overrides=on_hook_port)

    assert refused.status_code == 404
    assert refused.get_json() == {"error": "only /metrics is served on this port"}
    assert metrics.status_code == 200
    assert health.status_code == 200
    assert hook.status_code == 400  # reached the hook (an empty body is not a request)
