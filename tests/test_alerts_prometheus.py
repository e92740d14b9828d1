"""components/prometheus-rules in a real Prometheus that scrapes a real hook server.

`python -m hooks serve` runs as a subprocess on loopback ports, metrics on their own port as in
the Deployment. A `prometheus` server on 127.0.0.1 scrapes it every second with the labels
prometheus-operator gives a ServiceMonitor's targets (`service`, `namespace`, here set by
relabelling) and evaluates the kit's rules every second, each `for:` cut to 2 s. The hooks get
real traffic: every request fixture (answered 200) and invalid JSON bodies (answered 400). Then,
through Prometheus's HTTP API: the error-ratio alert fires for the hook that answered errors and
for no other; the latency alert's quantile over the real histogram lies in the bucket the calls
fell in, below the threshold, and the alert stays inactive; a target that cannot be scraped fires
the hooks-down alert for its namespace only.

Waiting is by polling with deadlines, never by a fixed sleep. Without `prometheus` (Debian's
package) the tests skip, and under CI=true fail.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

import promql_parser
import pytest
import requests
import yaml
from prometheus_client.parser import text_string_to_metric_families

from hooks.sandbox import processes
from tests import alerting
from tests.shared import REPO_ROOT

FIXTURES: Final = REPO_ROOT / "tests" / "fixtures" / "requests"
SERVICE: Final = alerting.metrics_service()
HOOK_NAMESPACE: Final = "disaggregatedset-system"
# A second install whose only target never answers: the hooks-down alert must name it alone.
UNREACHABLE_NAMESPACE: Final = "llm-ops"
FOR_IN_TEST: Final = "2s"
START_TIMEOUT: Final = 60.0
SCRAPE_TIMEOUT: Final = 30.0
POLL_INTERVAL: Final = 0.1
ROUNDS: Final = 3
INVALID_PER_ROUND: Final = 2
CALLS: Final = "disaggregatedset_hook_calls_total"

T = TypeVar("T")


def _hook_path(fixture: Path) -> str:
    """The hook a request fixture is for, from its name (ds-sync-*.json -> /sync)."""
    kind, hook = fixture.stem.split("-")[:2]
    return ("/rolescaler/" if kind == "rolescaler" else "/") + hook


def _session() -> requests.Session:
    session = requests.Session()
    session.trust_env = False  # loopback only: no proxy from the environment
    return session


@dataclass
class Stack:
    prometheus: processes.Process
    prometheus_url: str
    hooks_url: str
    metrics_url: str
    before: str
    """/metrics after the warm-up calls, before Prometheus first scraped it."""
    after: str
    """/metrics once Prometheus had scraped every call."""

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

    def eventually(self, check: Callable[[], T | None], what: str) -> T:
        """Poll `check` until it returns something; fail naming `what` after the deadline."""
        deadline = time.monotonic() + SCRAPE_TIMEOUT
        while True:
            found = check()
            if found is not None:
                return found
            if not self.prometheus.running():
                pytest.fail(f"prometheus exited:\n{self.prometheus.log_tail()}")
            if time.monotonic() > deadline:
                pytest.fail(f"{what}: not within {SCRAPE_TIMEOUT:.0f} s")
            time.sleep(POLL_INTERVAL)  # poll interval, not a wait for a condition

    def rule(self, alert: str) -> Any:
        [rule] = [
            rule
            for group in self.api("rules")["groups"]
            for rule in group["rules"]
            if rule.get("name") == alert
        ]
        assert rule["health"] == "ok", rule
        return rule


def _prometheus_config(metrics_port: int, unreachable_port: int) -> dict[str, Any]:
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
            job("hooks", metrics_port, HOOK_NAMESPACE),
            job("hooks-unreachable", unreachable_port, UNREACHABLE_NAMESPACE),
        ],
    }


def _send_traffic(hooks_url: str, *, rounds: int, invalid: int) -> int:
    """Every fixture `rounds` times (each answered 200) and `invalid` broken /sync bodies (400)."""
    fixtures = sorted(FIXTURES.glob("*.json"))
    assert len(fixtures) >= 8
    with _session() as session:
        for _ in range(rounds):
            for fixture in fixtures:
                answer = session.post(
                    f"{hooks_url}{_hook_path(fixture)}",
                    data=fixture.read_bytes(),
                    headers={"Content-Type": "application/json"},
                    timeout=30,
                )
                assert answer.status_code == 200, (fixture.name, answer.text)
        for _ in range(invalid):
            answer = session.post(
                f"{hooks_url}/sync",
                data=b'{"parent": ',
                headers={"Content-Type": "application/json"},
                timeout=30,
            )
            assert answer.status_code == 400, answer.text
    return rounds * len(fixtures) + invalid


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    prometheus_binary = alerting.require("prometheus")
    directory = tmp_path_factory.mktemp("live")
    (directory / "tmp").mkdir()
    hook_port, metrics_port, unreachable_port, prometheus_port = (
        processes.free_port() for _ in range(4)
    )
    env = {**os.environ, "TMPDIR": str(directory / "tmp"), "PYTHONPATH": str(REPO_ROOT)}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    hooks_url = f"http://127.0.0.1:{hook_port}"
    metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
    prometheus_url = f"http://127.0.0.1:{prometheus_port}"

    alerting.write_rule_file(
        directory / "rules.yaml",
        durations={rule["alert"]: FOR_IN_TEST for rule in alerting.alerts()},
    )
    config = _prometheus_config(metrics_port, unreachable_port)
    (directory / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))

    started: list[processes.Process] = []
    try:
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
        started.append(server)
        processes.wait_until_ready(
            server,
            lambda: processes.local_get(f"{hooks_url}/healthz").status == 200,
            timeout=START_TIMEOUT,
        )
        # Every series exists, and holds its warm-up value, before Prometheus first scrapes it:
        # rate() counts only what a series gains after its first sample, so the counted traffic
        # is exactly what comes after `before`.
        sent = _send_traffic(hooks_url, rounds=1, invalid=1)
        processes.wait_until_ready(
            server, lambda: _counted(_metrics_text(metrics_url)) == sent, timeout=SCRAPE_TIMEOUT
        )
        before = _metrics_text(metrics_url)

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
        started.append(prometheus)
        processes.wait_until_ready(
            prometheus,
            lambda: processes.local_get(f"{prometheus_url}/-/ready").status == 200,
            timeout=START_TIMEOUT,
        )
        stack = Stack(prometheus, prometheus_url, hooks_url, metrics_url, before=before, after="")
        _wait_until_scraped(stack, sent)
        sent += _send_traffic(hooks_url, rounds=ROUNDS, invalid=ROUNDS * INVALID_PER_ROUND)
        _wait_until_scraped(stack, sent)
        stack.after = _metrics_text(metrics_url)
        yield stack
    finally:
        for process in reversed(started):
            process.stop()


def _metrics_text(url: str) -> str:
    with _session() as session:
        answer = session.get(url, timeout=10)
    answer.raise_for_status()
    return answer.text


def _counted(text: str) -> float:
    """How many hook calls a /metrics text counts."""
    return sum(_samples(text, CALLS).values())


def _wait_until_scraped(stack: Stack, calls: int) -> None:
    """Until Prometheus has scraped the hook server counting `calls` hook calls."""

    def seen() -> bool | None:
        result = stack.query(f'sum({CALLS}{{namespace="{HOOK_NAMESPACE}"}})')
        return True if result and float(result[0]["value"][1]) == calls else None

    stack.eventually(seen, f"Prometheus scraping {calls} hook calls")


def _samples(text: str, name: str) -> dict[frozenset[tuple[str, str]], float]:
    return {
        frozenset(sample.labels.items()): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    }


def _increase(stack: Stack, name: str, **labels: str) -> float:
    """How much the samples of `name` matching `labels` grew during the counted traffic."""
    before, after = _samples(stack.before, name), _samples(stack.after, name)
    return sum(
        value - before.get(key, 0.0) for key, value in after.items() if set(labels.items()) <= key
    )


def _bucket_increases(stack: Stack, hook: str) -> dict[float, float]:
    """Upper bound -> how many calls of `hook` the bucket gained during the counted traffic."""
    increases: dict[float, float] = {}
    for key in _samples(stack.after, alerting.DURATION_BUCKET):
        labels = dict(key)
        if labels["hook"] == hook:
            bound = float(labels["le"])
            increases[bound] = _increase(stack, alerting.DURATION_BUCKET, **labels)
    return increases


def _threshold_split(alert: str) -> tuple[str, float]:
    """(left-hand side, threshold) of an alert written as `<expression> > <number>`."""
    expr = alerting.alert(alert)["expr"]
    tree = promql_parser.parse(expr)
    assert isinstance(tree, promql_parser.BinaryExpr) and str(tree.op) == ">", expr
    assert isinstance(tree.rhs, promql_parser.NumberLiteral), expr
    left, _, right = expr.rpartition(">")
    assert float(right) == tree.rhs.val
    return left.strip(), float(tree.rhs.val)


def test_the_error_ratio_alert_fires_for_the_hook_that_answers_errors(stack: Stack) -> None:
    errors = _increase(stack, CALLS, hook="sync", code="400")
    calls = _increase(stack, CALLS, hook="sync")
    assert errors == ROUNDS * INVALID_PER_ROUND
    assert errors / calls > 0.05

    def firing() -> list[Any] | None:
        found = [
            alert
            for alert in stack.api("alerts")["alerts"]
            if alert["labels"]["alertname"] == "DisaggregatedSetHookErrors"
        ]
        return found if any(alert["state"] == "firing" for alert in found) else None

    [alert] = stack.eventually(firing, "DisaggregatedSetHookErrors firing")
    assert alert["labels"] == {
        "alertname": "DisaggregatedSetHookErrors",
        "namespace": HOOK_NAMESPACE,
        "hook": "sync",
        "severity": "warning",
    }
    # rate() extrapolates each series a little differently; the share is the one sent.
    assert float(alert["value"]) == pytest.approx(errors / calls, abs=0.06)
    assert stack.rule("DisaggregatedSetHookErrors")["state"] == "firing"
    # The other hooks answered no errors: they have no error series, so no ratio to alert on.
    left, _, _ = alerting.alert("DisaggregatedSetHookErrors")["expr"].rpartition(">")
    ratios = {r["metric"]["hook"]: float(r["value"][1]) for r in stack.query(left)}
    assert ratios == {"sync": pytest.approx(float(alert["value"]), abs=0.02)}
    assert _increase(stack, CALLS, hook="customize", code="200") == ROUNDS


def test_the_latency_quantile_of_real_calls_stays_within_their_buckets_below_the_alert(
    stack: Stack,
) -> None:
    quantile, threshold = _threshold_split("DisaggregatedSetHookSlow")
    buckets = alerting.latency_buckets(stack.after)
    assert threshold in buckets and threshold < max(buckets), "p99 above 5 s must be visible"
    increases = _bucket_increases(stack, "sync")
    calls = increases[math.inf]
    assert calls == ROUNDS * (len(list(FIXTURES.glob("ds-sync-*.json"))) + INVALID_PER_ROUND)
    # From the server's own counts: the bucket that holds the 90th percentile of the counted
    # calls, and the one that holds the slowest. rate() extrapolates each bucket's series a
    # little differently (a scrape may land between two of a bucket's increments), so
    # Prometheus's p99 may leave the bucket the exact p99 is in, by a bucket or two on a loaded
    # machine; it stays far below the alert's threshold, and above the 90th percentile's bucket.
    cumulative = [(bound, increases[bound]) for bound in buckets]
    steps = list(zip([(0.0, 0.0), *cumulative], cumulative, strict=False))
    lowest = min(low for (low, below), (_, at) in steps if below < 0.9 * calls <= at)
    highest = min(high for _, (high, at) in steps if at == calls)
    assert highest < threshold, "the real calls are fast"
    # Two buckets above the slowest call's: what extrapolation can add, still far from 5 s.
    ceiling = buckets[min(buckets.index(highest) + 2, len(buckets) - 1)]

    result = stack.eventually(
        lambda: [r for r in stack.query(quantile) if r["metric"]["hook"] == "sync"] or None,
        "the p99 latency of sync",
    )
    [sample] = result
    p99 = float(sample["value"][1])
    assert sample["metric"] == {"namespace": HOOK_NAMESPACE, "hook": "sync"}
    assert lowest <= p99 <= ceiling < threshold
    rule = stack.rule("DisaggregatedSetHookSlow")
    assert rule["state"] == "inactive" and rule["alerts"] == []


def test_an_unreachable_target_fires_hooks_down_for_its_namespace_only(stack: Stack) -> None:
    up = {
        r["metric"]["namespace"]: float(r["value"][1])
        for r in stack.query(f'up{{service="{SERVICE}"}}')
    }
    assert up == {HOOK_NAMESPACE: 1.0, UNREACHABLE_NAMESPACE: 0.0}

    def firing() -> list[Any] | None:
        rule = stack.rule("DisaggregatedSetHooksDown")
        return rule["alerts"] if rule["state"] == "firing" else None

    [alert] = stack.eventually(firing, "DisaggregatedSetHooksDown firing")
    assert alert["labels"] == {
        "alertname": "DisaggregatedSetHooksDown",
        "namespace": UNREACHABLE_NAMESPACE,
        "severity": "critical",
    }
    absent = stack.rule("DisaggregatedSetHooksAbsent")
    assert absent["state"] == "inactive" and absent["alerts"] == []
