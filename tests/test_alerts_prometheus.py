"""components/prometheus-rules in a real Prometheus, over hook metrics whose values are known.

Regression (issue 29): Prometheus scraped the real hook server while it answered, and 6 runs in 21
failed. rate() extrapolates each series by how its first sample compares with its growth, so
the error ratio and the quantile moved with the scrape times, and the calls' latency with this
machine's load. No assertion here depends on either. Two halves:

- The real hook server (`python -m hooks serve`, metrics on their own port as in the Deployment)
  answers real traffic: every request fixture (200) and invalid JSON bodies to two hooks (400).
  Its /metrics, read once every call is counted, is checked against the alerts' PromQL: each
  series selector of a hook alert matches series it exports, carrying the labels the alert
  aggregates by; the counts are exactly the calls sent; the latency threshold is a bucket bound.
- A `prometheus` server on 127.0.0.1 scrapes a controlled target every second, with the labels
  prometheus-operator gives a ServiceMonitor's targets (`service`, `namespace`, here set by
  relabelling), and evaluates the kit's rules every second, each `for:` cut to 2 s. The target
  serves the app's own metrics (`hooks.server.observability.Metrics`: the real names, labels and
  buckets) to which every scrape first adds the same calls with the same durations (`STEP`), of
  series the real server exports too. Every series starts at the first scrape and grows in
  proportion to the others, so rate() scales all of them by the same factor and the alerts'
  ratios and quantiles are exact whenever the scrapes happen: the error-ratio alert fires for
  the hook with 10% errors and not for the one with 4%; the latency alert fires for the hook
  whose p99 is 6.7 s and not for the one at 3.75 s. A second target never answers: the
  hooks-down alert fires for its namespace only.

Waiting is by polling with deadlines, never by a fixed sleep. Without `prometheus` (Debian's
package) the tests skip, and under CI=true fail.
"""

from __future__ import annotations

import http.server
import logging
import math
import os
import re
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

import promql_parser
import pytest
import requests
import yaml
from prometheus_client.parser import text_string_to_metric_families

from hooks.server import observability, settings
from tests import alerting
from tests.shared import REPO_ROOT
from tools.sandbox import processes

FIXTURES: Final = REPO_ROOT / "tests" / "fixtures" / "requests"
SERVICE: Final = alerting.metrics_service()
HOOK_NAMESPACE: Final = "disaggregatedset-system"
# A second install whose only target never answers: the hooks-down alert must name it alone.
UNREACHABLE_NAMESPACE: Final = "llm-ops"
# What Prometheus, not the hook server, puts on a scraped series (see _prometheus_config).
TARGET_LABELS: Final = frozenset({"namespace", "service", "endpoint", "job", "instance"})
FOR_IN_TEST: Final = "2s"
START_TIMEOUT: Final = 60.0
SCRAPE_TIMEOUT: Final = 60.0
POLL_INTERVAL: Final = 0.1
INVALID_BODY: Final = b'{"parent": '
# The hooks the real server gets invalid bodies for, and how many each.
INVALID_CALLS: Final = {"sync": 2, "customize": 2}
CALLS: Final = "disaggregatedset_hook_calls_total"
HOOK_METRICS: Final = "disaggregatedset_hook_"

T = TypeVar("T")


@dataclass(frozen=True)
class Answers:
    """What one hook of the controlled target answers between two scrapes."""

    outcome: str
    """The outcome label of its 200s, as the real server writes it for this hook."""
    answered: Mapping[float, int]
    """Latency in seconds -> calls answered 200."""
    invalid: Mapping[float, int]
    """Latency in seconds -> calls answered 400 (invalid JSON)."""

    @property
    def calls(self) -> int:
        return sum(self.answered.values()) + sum(self.invalid.values())


STEP: Final = {
    "sync": Answers("synced", {0.02: 87, 6.0: 3}, {0.0008: 10}),
    "customize": Answers("ok", {0.008: 94, 3.0: 2}, {0.0008: 4}),
    "rolescaler-sync": Answers("ok", {0.0008: 100}, {}),
}
# Where histogram_quantile(0.99) finds the 99th of each hook's 100 calls a step: in the bucket
# (low, high] that holds `calls` calls above the `below` faster ones. Strictly inside it: were
# the 99th call the last of its bucket, a rounding error in 0.99 * total could move the estimate
# up to the next bucket that holds a call.
P99_BUCKETS: Final = {
    "sync": (5.0, 7.5, 97, 3),
    "customize": (2.5, 5.0, 98, 2),
    "rolescaler-sync": (0.0005, 0.001, 0, 100),
}
# Prometheus's estimate: linear within that bucket.
P99: Final = {
    hook: low + (high - low) * (99 - below) / calls
    for hook, (low, high, below, calls) in P99_BUCKETS.items()
}
# Exact up to floating-point rounding: rate() scales every series by the same factor.
EXACT: Final = 1e-9


def _session() -> requests.Session:
    session = requests.Session()
    session.trust_env = False  # loopback only: no proxy from the environment
    return session


def _metrics_text(url: str) -> str:
    with _session() as session:
        answer = session.get(url, timeout=10)
    answer.raise_for_status()
    return answer.text


def _samples(text: str, name: str) -> dict[frozenset[tuple[str, str]], float]:
    """The samples of `name` in a /metrics text: labels -> value."""
    return {
        frozenset(sample.labels.items()): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    }


def _by_hook(samples: Mapping[frozenset[tuple[str, str]], float]) -> dict[str, float]:
    totals: Counter[str] = Counter()
    for labels, value in samples.items():
        totals[dict(labels)["hook"]] += value
    return dict(totals)


# --- the alerts' PromQL -------------------------------------------------------------------------


def _threshold_split(alert: str) -> tuple[str, float]:
    """(left-hand side, threshold) of an alert written as `<expression> > <number>`."""
    expr = alerting.alert(alert)["expr"]
    tree = promql_parser.parse(expr)
    assert isinstance(tree, promql_parser.BinaryExpr) and str(tree.op) == ">", expr
    assert isinstance(tree.rhs, promql_parser.NumberLiteral), expr
    left, _, right = expr.rpartition(">")
    assert float(right) == tree.rhs.val
    return left.strip(), float(tree.rhs.val)


@dataclass(frozen=True)
class Selected:
    """A series selector of an alert, and the labels the aggregations above it group by."""

    selector: promql_parser.VectorSelector
    grouped_by: frozenset[str]


def _selected(node: Any, grouped_by: frozenset[str] = frozenset()) -> Iterator[Selected]:
    """Every series selector in a PromQL tree."""
    if isinstance(node, promql_parser.VectorSelector):
        yield Selected(node, grouped_by)
    elif isinstance(node, promql_parser.MatrixSelector):
        yield Selected(node.vector_selector, grouped_by)
    elif isinstance(node, promql_parser.AggregateExpr):
        labels = []
        if node.modifier is not None:
            assert node.modifier.type == promql_parser.AggModifierType.By, node.prettify()
            labels = node.modifier.labels
        yield from _selected(node.expr, grouped_by | set(labels))
    elif isinstance(node, promql_parser.BinaryExpr):
        yield from _selected(node.lhs, grouped_by)
        yield from _selected(node.rhs, grouped_by)
    elif isinstance(node, promql_parser.Call):
        for argument in node.args:
            yield from _selected(argument, grouped_by)
    elif isinstance(node, promql_parser.ParenExpr | promql_parser.UnaryExpr):
        yield from _selected(node.expr, grouped_by)
    else:
        assert isinstance(node, promql_parser.NumberLiteral), f"unexpected PromQL node {node!r}"


def _matches(labels: Mapping[str, str], selector: promql_parser.VectorSelector) -> bool:
    """Whether a series with `labels` is one `selector` (its name and label matchers) selects."""
    assert not selector.matchers.or_matchers, "`or` matchers are not handled by this test"
    ops = promql_parser.MatchOp
    for matcher in selector.matchers.matchers:
        value = labels.get(matcher.name, "")
        if matcher.op == ops.Equal:
            found = value == matcher.value
        elif matcher.op == ops.NotEqual:
            found = value != matcher.value
        else:
            regex = re.fullmatch(matcher.value, value) is not None
            found = regex if matcher.op == ops.Re else not regex
        if not found:
            return False
    return True


def _hook_alerts() -> list[str]:
    """The alerts over the hook server's own metrics."""
    return [rule["alert"] for rule in alerting.alerts() if HOOK_METRICS in rule["expr"]]


# --- the real hook server -----------------------------------------------------------------------


@dataclass(frozen=True)
class Exported:
    """The real server's /metrics once it had counted every call it was sent."""

    text: str
    calls: Mapping[str, int]
    """Hook -> calls sent."""


def _hook_path(fixture: Path) -> str:
    """The hook a request fixture is for, from its name (ds-sync-*.json -> /sync)."""
    kind, hook = fixture.stem.split("-")[:2]
    return ("/rolescaler/" if kind == "rolescaler" else "/") + hook


def _hook_label(path: str) -> str:
    """The `hook` label of the calls to a path (/rolescaler/sync -> rolescaler-sync)."""
    return path.strip("/").replace("/", "-")


def _send_traffic(hooks_url: str) -> Counter[str]:
    """Every fixture once (each answered 200) and INVALID_CALLS broken bodies (400)."""
    calls: Counter[str] = Counter()
    with _session() as session:
        for fixture in sorted(FIXTURES.glob("*.json")):
            path = _hook_path(fixture)
            answer = session.post(
                f"{hooks_url}{path}",
                data=fixture.read_bytes(),
                headers={"Content-Type": "application/json"},
                timeout=30,
            )
            assert answer.status_code == 200, (fixture.name, answer.text)
            calls[_hook_label(path)] += 1
        for hook, count in INVALID_CALLS.items():
            for _ in range(count):
                answer = session.post(
                    f"{hooks_url}/{hook}",
                    data=INVALID_BODY,
                    headers={"Content-Type": "application/json"},
                    timeout=30,
                )
                assert answer.status_code == 400, answer.text
                calls[hook] += 1
    return calls


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Exported:
    directory = tmp_path_factory.mktemp("hooks")
    (directory / "tmp").mkdir()
    hook_port, metrics_port = processes.free_port(), processes.free_port()
    env = {**os.environ, "TMPDIR": str(directory / "tmp"), "PYTHONPATH": str(REPO_ROOT)}
    env.pop(settings.MULTIPROC_ENV, None)
    hooks_url = f"http://127.0.0.1:{hook_port}"
    metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
    server = processes.start(
        "hooks",
        [
            sys.executable,
            "-m",
            "hooks",
            "serve",
            "--bind",
            f"127.0.0.1:{hook_port}",
            "--metrics-bind",
            f"127.0.0.1:{metrics_port}",
        ],
        log_dir=directory,
        env=env,
    )
    try:
        processes.wait_until_ready(
            server,
            lambda: processes.local_get(f"{hooks_url}/healthz").status == 200,
            timeout=START_TIMEOUT,
        )
        calls = _send_traffic(hooks_url)
        # A call is counted once its answer is sent: wait until /metrics has every one.
        processes.wait_until_ready(
            server,
            lambda: sum(_samples(_metrics_text(metrics_url), CALLS).values()) == calls.total(),
            timeout=SCRAPE_TIMEOUT,
        )
        return Exported(_metrics_text(metrics_url), dict(calls))
    finally:
        server.stop()


def test_every_selector_of_a_hook_alert_matches_series_the_hook_server_exports(
    exported: Exported,
) -> None:
    series = [
        (sample.name, sample.labels)
        for family in text_string_to_metric_families(exported.text)
        for sample in family.samples
    ]
    hook_alerts = _hook_alerts()
    assert hook_alerts == ["DisaggregatedSetHookErrors", "DisaggregatedSetHookSlow"]
    for alert in hook_alerts:
        for selected in _selected(promql_parser.parse(alerting.alert(alert)["expr"])):
            name = selected.selector.name
            found = [
                labels
                for sample_name, labels in series
                if sample_name == name and _matches(labels, selected.selector)
            ]
            assert found, f"{alert}: {selected.selector.prettify()} selects nothing exported"
            # A matcher on a label never exported would compare with "" and select anything.
            for matcher in selected.selector.matchers.matchers:
                assert matcher.name in TARGET_LABELS or all(
                    matcher.name in labels for labels in found
                ), f"{alert} matches on {matcher.name}, which {name} does not carry"
            for labels in found:
                missing = selected.grouped_by - TARGET_LABELS - set(labels)
                assert not missing, f"{alert} groups by {sorted(missing)}, absent from {labels}"


def test_the_series_the_hook_alerts_select_count_every_call(exported: Exported) -> None:
    calls = _samples(exported.text, CALLS)
    assert _by_hook(calls) == exported.calls
    # The error ratio's numerator (code!="200") is exactly the invalid bodies, per hook.
    errors = {labels: value for labels, value in calls.items() if dict(labels)["code"] != "200"}
    assert _by_hook(errors) == INVALID_CALLS
    assert {dict(labels)["outcome"] for labels in errors} == {"invalid_json"}
    # The latency histogram counts every call, answered or not, in its +Inf bucket.
    buckets = _samples(exported.text, alerting.DURATION_BUCKET)
    every_call = {
        labels: value for labels, value in buckets.items() if dict(labels)["le"] == "+Inf"
    }
    assert _by_hook(every_call) == exported.calls
    _, threshold = _threshold_split("DisaggregatedSetHookSlow")
    bounds = alerting.latency_buckets(exported.text)
    assert threshold in bounds and threshold < max(bounds), "a p99 above the threshold is seen"


# --- the controlled target ----------------------------------------------------------------------


def _controlled_metrics() -> observability.Metrics:
    """The app's metrics in a registry of their own (not the multiprocess files)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(settings.MULTIPROC_ENV, raising=False)
        return observability.Metrics()


def _record_step(metrics: observability.Metrics) -> None:
    """STEP's calls, recorded as the app records the calls it answers."""
    invalid = ValueError("request body is not valid JSON")
    for hook, answers in STEP.items():
        for seconds, count in answers.answered.items():
            for _ in range(count):
                metrics.answered(hook, {"outcome": answers.outcome}, seconds=seconds)
        for seconds, count in answers.invalid.items():
            for _ in range(count):
                metrics.failed(
                    hook,
                    status=400,
                    kind="invalid_json",
                    message=str(invalid),
                    seconds=seconds,
                    error=invalid,
                )


@pytest.fixture(autouse=True, scope="module")
def _quiet_hook_log() -> Iterator[None]:
    """STEP's 400s would each log a warning line here: not what these tests are about."""
    logger = logging.getLogger(observability.LOGGER_NAME)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


class ControlledTarget:
    """The app's metrics on loopback; each scrape first records one more STEP."""

    def __init__(self) -> None:
        self.metrics = _controlled_metrics()
        target = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path != "/metrics":
                    self.send_error(404)
                    return
                _record_step(target.metrics)
                body = target.metrics.exposition()
                self.send_response(200)
                self.send_header("Content-Type", observability.CONTENT_TYPE)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                """Silent: Prometheus scrapes every second."""

        # One request at a time: each exposition holds a whole number of steps.
        self._server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> ControlledTarget:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def test_the_controlled_target_serves_series_the_hook_server_exports(exported: Exported) -> None:
    metrics = _controlled_metrics()
    _record_step(metrics)
    text = metrics.exposition().decode()
    for name in (CALLS, alerting.DURATION_BUCKET):
        assert set(_samples(text, name)) <= set(_samples(exported.text, name)), name
    # STEP puts the 99th call of each hook where P99_BUCKETS says.
    buckets = _samples(text, alerting.DURATION_BUCKET)
    for hook, (low, high, below, calls) in P99_BUCKETS.items():
        counts = {
            float(dict(labels)["le"]): value
            for labels, value in buckets.items()
            if ("hook", hook) in labels
        }
        assert STEP[hook].calls == counts[math.inf] == 100, (hook, counts)
        assert (counts[low], counts[high]) == (below, below + calls), (hook, counts)
        assert below < 99 < below + calls


# --- Prometheus over the controlled target ------------------------------------------------------


@dataclass
class Stack:
    prometheus: processes.Process
    prometheus_url: str

    def api(self, path: str, **params: str) -> Any:
        with _session() as session:
            answer = session.get(f"{self.prometheus_url}/api/v1/{path}", params=params, timeout=10)
        answer.raise_for_status()
        body = answer.json()
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[Any]:
        result: list[Any] = self.api("query", query=expr)["result"]
        return result

    def eventually(self, poll: Callable[[], T], until: Callable[[T], bool], what: str) -> T:
        """Poll until `until(poll())`; fail naming `what` and the last answer after the deadline."""
        deadline = time.monotonic() + SCRAPE_TIMEOUT
        while True:
            found = poll()
            if until(found):
                return found
            if not self.prometheus.running():
                pytest.fail(f"prometheus exited:\n{self.prometheus.log_tail()}")
            if time.monotonic() > deadline:
                pytest.fail(f"{what}: not within {SCRAPE_TIMEOUT:.0f} s; last saw {found!r}")
            time.sleep(POLL_INTERVAL)  # poll interval, not a wait for a condition

    def rule(self, alert: str) -> Any:
        [rule] = [
            rule
            for group in self.api("rules")["groups"]
            for rule in group["rules"]
            if rule.get("name") == alert
        ]
        assert rule["health"] != "err", rule  # "unknown" until its first evaluation
        return rule

    def firing(self, alert: str, until: Callable[[list[Any]], bool] = bool) -> list[Any]:
        """The firing alerts of `alert`, once there are some (that satisfy `until`)."""

        def alerts() -> list[Any]:
            return [a for a in self.rule(alert)["alerts"] if a["state"] == "firing"]

        return self.eventually(alerts, until, f"{alert} firing")

    def by_hook(self, expr: str) -> dict[str, float]:
        """The value of `expr` per hook, for the controlled target's namespace."""
        found = {}
        for result in self.query(expr):
            assert result["metric"]["namespace"] == HOOK_NAMESPACE, result
            found[result["metric"]["hook"]] = float(result["value"][1])
        return found


def _prometheus_config(target_port: int, unreachable_port: int) -> dict[str, Any]:
    def job(name: str, port: int, namespace: str) -> dict[str, Any]:
        return {
            "job_name": name,
            "static_configs": [{"targets": [f"127.0.0.1:{port}"]}],
            # What prometheus-operator adds to the targets of a ServiceMonitor.
            "relabel_configs": [
                {"target_label": "service", "replacement": SERVICE},
                {"target_label": "namespace", "replacement": namespace},
                {"target_label": "endpoint", "replacement": "metrics"},
            ],
        }

    return {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": ["rules.yaml"],
        "scrape_configs": [
            job("hooks", target_port, HOOK_NAMESPACE),
            job("hooks-unreachable", unreachable_port, UNREACHABLE_NAMESPACE),
        ],
    }


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    prometheus_binary = alerting.require("prometheus")
    directory = tmp_path_factory.mktemp("prometheus")
    unreachable_port, prometheus_port = processes.free_port(), processes.free_port()
    prometheus_url = f"http://127.0.0.1:{prometheus_port}"
    alerting.write_rule_file(
        directory / "rules.yaml",
        durations={rule["alert"]: FOR_IN_TEST for rule in alerting.alerts()},
    )
    with ControlledTarget() as target:
        config = _prometheus_config(target.port, unreachable_port)
        (directory / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
        prometheus = processes.start(
            "prometheus",
            [
                prometheus_binary,
                f"--config.file={directory / 'prometheus.yml'}",
                f"--storage.tsdb.path={directory / 'data'}",
                f"--web.listen-address=127.0.0.1:{prometheus_port}",
            ],
            log_dir=directory,
        )
        try:
            processes.wait_until_ready(
                prometheus,
                lambda: processes.local_get(f"{prometheus_url}/-/ready").status == 200,
                timeout=START_TIMEOUT,
            )
            yield Stack(prometheus, prometheus_url)
        finally:
            prometheus.stop()


def _error_ratios() -> dict[str, float]:
    """Hook -> the share of STEP's calls answered with an error, for hooks with errors."""
    return {
        hook: sum(answers.invalid.values()) / answers.calls
        for hook, answers in STEP.items()
        if answers.invalid
    }


def test_the_error_ratio_alert_fires_for_the_hook_that_answers_errors(stack: Stack) -> None:
    ratios = _error_ratios()
    assert ratios == {"sync": 0.1, "customize": 0.04}
    alert = "DisaggregatedSetHookErrors"
    left, threshold = _threshold_split(alert)
    assert ratios["customize"] < threshold < ratios["sync"]

    [firing] = stack.firing(alert)

    assert firing["labels"] == {
        "alertname": alert,
        "namespace": HOOK_NAMESPACE,
        "hook": "sync",
        "severity": "warning",
    }
    assert float(firing["value"]) == pytest.approx(ratios["sync"], rel=EXACT)
    # The hook without errors has no error series, so no ratio at all.
    assert stack.by_hook(left) == pytest.approx(ratios, rel=EXACT)


def test_the_latency_alert_fires_for_the_hook_whose_p99_is_above_its_threshold(
    stack: Stack,
) -> None:
    alert = "DisaggregatedSetHookSlow"
    quantile, threshold = _threshold_split(alert)
    assert [hook for hook, p99 in P99.items() if p99 > threshold] == ["sync"]

    [firing] = stack.firing(alert)

    assert firing["labels"] == {
        "alertname": alert,
        "namespace": HOOK_NAMESPACE,
        "hook": "sync",
        "severity": "warning",
    }
    assert float(firing["value"]) == pytest.approx(P99["sync"], rel=EXACT)
    assert stack.by_hook(quantile) == pytest.approx(P99, rel=EXACT)


def test_an_unreachable_target_fires_hooks_down_for_its_namespace_only(stack: Stack) -> None:
    expected_up = {HOOK_NAMESPACE: 1.0, UNREACHABLE_NAMESPACE: 0.0}

    stack.eventually(
        lambda: {
            r["metric"]["namespace"]: float(r["value"][1])
            for r in stack.query(f'up{{service="{SERVICE}"}}')
        },
        lambda up: up == expected_up,
        f"up {expected_up}",
    )
    alert = "DisaggregatedSetHooksDown"
    # Were the answering target to miss scrapes for 2 s on a loaded machine, it would fire too.
    [firing] = stack.firing(alert, lambda alerts: len(alerts) == 1)

    assert firing["labels"] == {
        "alertname": alert,
        "namespace": UNREACHABLE_NAMESPACE,
        "severity": "critical",
    }
    absent = stack.rule("DisaggregatedSetHooksAbsent")
    assert absent["state"] == "inactive" and absent["alerts"] == []
