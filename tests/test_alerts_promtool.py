"""Every alert of components/prometheus-rules, unit-tested with `promtool test rules`.

Each case is a set of input series (shaped like what Prometheus scrapes from the hook server
through components/servicemonitor, or from kube-state-metrics configured by
components/kube-state-metrics), an evaluation time, and for some alerts the exact alerts that
fire then: none for the silent cases. Deliberate states are among them: a paused rollout and the
canary holds (Progressing Unknown, reason RolloutPaused, RolloutHeld or RolloutPartitioned) are
neither unavailable nor stuck while every group is ready.

The expected annotations are rendered from the rule's templates with the alert's own labels; the
latency histogram's buckets are read from the real app's /metrics. Without `promtool` (Debian's
`prometheus` package) the tests skip, and under CI=true fail.
"""

from __future__ import annotations

import math
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import pytest
import yaml

from hooks.api import conditions
from hooks.server import app as hook_app
from hooks.server import settings
from tests import alerting

Labels = Mapping[str, str]
Series = tuple[str, str]

SERVICE: Final = alerting.metrics_service()
HOOK_NAMESPACE: Final = "disaggregatedset-system"
SET_NAMESPACE: Final = "llm-serving"
DELIBERATE_HOLDS: Final = tuple(str(reason) for reason in conditions.DELIBERATE_STOPS)

# The labels of a hook server target as prometheus-operator discovers it through the Service.
HOOK_TARGET: Final = {
    "namespace": HOOK_NAMESPACE,
    "service": SERVICE,
    "job": SERVICE,
    "endpoint": "metrics",
    "pod": "disaggregatedset-hooks-5c7d9-x2k4p",
    "container": "hooks",
    "instance": "10.0.3.7:9090",
}
# The labels of a kube-state-metrics series of a set (KSM scraped with honorLabels).
KSM_TARGET: Final = {
    "job": "kube-state-metrics",
    "instance": "10.0.5.2:8080",
    "customresource_group": "disaggregatedset.x-k8s.io",
    "customresource_kind": "DisaggregatedSet",
    "customresource_version": "v1",
}


@dataclass(frozen=True)
class Expect:
    """Which alerts named `alert` fire at the case's time: the labels of each, none if silent."""

    alert: str
    firing: tuple[Labels, ...] = ()
    value: float | None = None
    """The alert's value, for annotations that print it."""


@dataclass(frozen=True)
class Case:
    id: str
    series: Sequence[Series]
    eval_time: str
    expect: Sequence[Expect] = field(default_factory=tuple)
    latencies: Sequence[tuple[str, Mapping[float, int], int]] = ()
    """(hook, calls per minute by latency in seconds, minutes): histogram series, built with the
    app's buckets when the case runs."""


# --- series ---------------------------------------------------------------------------------


def _selector(name: str, labels: Labels) -> str:
    inner = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
    return f"{name}{{{inner}}}"


def _calls(hook: str, code: str, per_minute: int, minutes: int, **target: str) -> Series:
    labels = {**HOOK_TARGET, **target, "hook": hook, "code": code}
    labels["outcome"] = "synced" if code == "200" else "invalid_json"
    return _selector("disaggregatedset_hook_calls_total", labels), f"0+{per_minute}x{minutes}"


def _latencies(
    hook: str, per_minute: Mapping[float, int], minutes: int, buckets: Sequence[float]
) -> list[Series]:
    """The cumulative buckets of `per_minute` calls of each latency in seconds, every minute."""
    series = []
    for bound in (*buckets, math.inf):
        count = sum(calls for latency, calls in per_minute.items() if latency <= bound)
        le = "+Inf" if math.isinf(bound) else repr(bound)
        labels = {**HOOK_TARGET, "hook": hook, "le": le}
        series.append((_selector(alerting.DURATION_BUCKET, labels), f"0+{count}x{minutes}"))
    return series


def _up(pod: str, values: str, service: str = SERVICE) -> Series:
    labels = {**HOOK_TARGET, "service": service, "job": service, "pod": pod}
    return _selector("up", labels), values


def _set_labels(name: str) -> dict[str, str]:
    return {**KSM_TARGET, "namespace": SET_NAMESPACE, "disaggregatedset": name}


def _condition(name: str, kind: str, status: str, reason: str, values: str) -> Series:
    labels = {**_set_labels(name), "type": kind, "status": status, "reason": reason}
    return _selector("kube_disaggregatedset_status_condition", labels), values


def _set(
    name: str,
    *,
    minutes: int,
    available: tuple[str, str],
    progressing: tuple[str, str],
    degraded: tuple[str, str] = ("False", "AsExpected"),
    ready: Mapping[str, tuple[int, int]] | None = None,
    generation: tuple[int, int] = (3, 3),
) -> list[Series]:
    """What kube-state-metrics exports for one set whose status stays the same for `minutes`.

    `ready` is role -> (ready groups, groups); `generation` is (metadata.generation,
    status.observedGeneration). A condition's value is 1 for True, else 0.
    """
    series = [
        _condition(name, kind, status, reason, f"{int(status == 'True')}x{minutes}")
        for kind, (status, reason) in (
            ("Available", available),
            ("Progressing", progressing),
            ("Degraded", degraded),
        )
    ]
    for role, (ready_groups, groups) in (ready or {"prefill": (2, 2), "decode": (1, 1)}).items():
        labels = {**_set_labels(name), "role": role}
        series.append(
            (
                _selector("kube_disaggregatedset_status_role_ready_replicas", labels),
                f"{ready_groups}x{minutes}",
            )
        )
        series.append(
            (_selector("kube_disaggregatedset_status_role_replicas", labels), f"{groups}x{minutes}")
        )
    spec, observed = generation
    labels = _set_labels(name)
    series.append(
        (_selector("kube_disaggregatedset_metadata_generation", labels), f"{spec}x{minutes}")
    )
    series.append(
        (
            _selector("kube_disaggregatedset_status_observed_generation", labels),
            f"{observed}x{minutes}",
        )
    )
    return series


def _a_set(name: str = "llm") -> dict[str, str]:
    """The labels of a set alert (its aggregations keep these two)."""
    return {"namespace": SET_NAMESPACE, "disaggregatedset": name}


ROLLING: Final = ("False", "RolloutInProgress")
PROGRESSING: Final = ("True", "RolloutInProgress")
STEADY: Final = ("True", "AllRolesReady")
ALL_READY_MID_ROLLOUT: Final = {"prefill": (3, 3), "decode": (2, 2)}
ONE_PREFILL_NOT_READY: Final = {"prefill": (2, 3), "decode": (2, 2)}
SET_ALERTS: Final = (
    "DisaggregatedSetNotAvailable",
    "DisaggregatedSetRolloutStuck",
    "DisaggregatedSetDegraded",
    "DisaggregatedSetStatusStale",
)


# --- the cases ------------------------------------------------------------------------------


def _hook_cases() -> list[Case]:
    errors = "DisaggregatedSetHookErrors"
    slow = "DisaggregatedSetHookSlow"
    sync = {"namespace": HOOK_NAMESPACE, "hook": "sync"}
    fast = {0.02: 100}
    return [
        Case(
            "hook-errors/10-percent-of-sync-calls-fire-for-sync-only",
            [
                _calls("sync", "200", 90, 20),
                _calls("sync", "400", 10, 20),
                _calls("customize", "200", 50, 20),
            ],
            "15m",
            [Expect(errors, (sync,), value=0.1)],
        ),
        Case(
            "hook-errors/4-percent-stays-silent",
            [_calls("sync", "200", 96, 20), _calls("sync", "400", 4, 20)],
            "15m",
            [Expect(errors)],
        ),
        Case(
            "hook-errors/8-minutes-of-errors-stay-pending",
            [_calls("sync", "200", 90, 10), _calls("sync", "400", 10, 10)],
            "9m",
            [Expect(errors)],
        ),
        Case(
            # Together the two installs answer 0.1% errors: the ratio is per namespace.
            "hook-errors/the-installs-of-two-namespaces-stay-apart",
            [
                _calls("sync", "200", 90, 20),
                _calls("sync", "400", 10, 20),
                _calls("sync", "200", 10_000, 20, namespace="llm-ops"),
            ],
            "15m",
            [Expect(errors, (sync,), value=0.1)],
        ),
        Case(
            "hook-slow/3-percent-of-sync-calls-at-6-s-fire-for-sync-only",
            [],
            "15m",
            [Expect(slow, (sync,))],
            latencies=[("sync", {0.02: 97, 6.0: 3}, 20), ("customize", fast, 20)],
        ),
        Case(
            # Past the largest bucket (+Inf) the quantile is that bucket's bound, 10 s.
            "hook-slow/2-percent-of-calls-past-the-webhook-timeout-fire",
            [],
            "15m",
            [Expect(slow, (sync,))],
            latencies=[("sync", {0.02: 98, 12.0: 2}, 20)],
        ),
        Case(
            "hook-slow/every-call-at-4-s-stays-silent",
            [],
            "15m",
            [Expect(slow)],
            latencies=[("sync", {4.0: 100}, 20)],
        ),
        Case(
            # Then the quantile is exactly 5: more than 1% is what fires.
            "hook-slow/exactly-1-percent-above-5-s-stays-silent",
            [],
            "15m",
            [Expect(slow)],
            latencies=[("sync", {4.0: 99, 6.0: 1}, 20)],
        ),
        Case(
            "hook-slow/half-a-percent-at-6-s-stays-silent",
            [],
            "15m",
            [Expect(slow)],
            latencies=[("sync", {0.02: 995, 6.0: 5}, 20)],
        ),
        Case(
            "hook-slow/8-slow-minutes-stay-pending",
            [],
            "9m",
            [Expect(slow)],
            latencies=[("sync", {0.02: 97, 6.0: 3}, 10)],
        ),
        Case(
            "hooks-down/every-pod-down-fires",
            [_up("hooks-a", "0x15"), _up("hooks-b", "0x15")],
            "10m",
            [
                Expect("DisaggregatedSetHooksDown", ({"namespace": HOOK_NAMESPACE},)),
                Expect("DisaggregatedSetHooksAbsent"),
            ],
        ),
        Case(
            "hooks-down/one-pod-up-stays-silent",
            [_up("hooks-a", "0x15"), _up("hooks-b", "1x15")],
            "10m",
            [Expect("DisaggregatedSetHooksDown"), Expect("DisaggregatedSetHooksAbsent")],
        ),
        Case(
            "hooks-down/3-minutes-down-stay-pending",
            [_up("hooks-a", "1x5 0x10")],
            "9m",
            [Expect("DisaggregatedSetHooksDown")],
        ),
        Case(
            "hooks-absent/no-hook-target-fires-whatever-else-is-scraped",
            [_up("kube-state-metrics-0", "1x20", service="kube-state-metrics")],
            "20m",
            [
                Expect("DisaggregatedSetHooksAbsent", ({"service": SERVICE},)),
                Expect("DisaggregatedSetHooksDown"),
            ],
        ),
        Case(
            "hooks-absent/10-minutes-without-a-target-stay-pending",
            [_up("kube-state-metrics-0", "1x20", service="kube-state-metrics")],
            "10m",
            [Expect("DisaggregatedSetHooksAbsent")],
        ),
    ]


def _set_cases() -> list[Case]:
    not_available = "DisaggregatedSetNotAvailable"
    stuck = "DisaggregatedSetRolloutStuck"
    cases = [
        Case(
            "not-available/20-minutes-unavailable-fire",
            _set("llm", minutes=30, available=ROLLING, progressing=PROGRESSING),
            "20m",
            [Expect(not_available, (_a_set(),)), Expect(stuck)],
        ),
        Case(
            "not-available/10-minutes-stay-pending",
            _set("llm", minutes=30, available=ROLLING, progressing=PROGRESSING),
            "10m",
            [Expect(not_available)],
        ),
        Case(
            # The reason label changes (a new series): the wait counts from the first one.
            "not-available/a-new-reason-does-not-restart-the-wait",
            [
                _condition("llm", "Available", "False", "RolloutInProgress", "0x8"),
                _condition("llm", "Available", "False", "InvalidChildStatus", "_x8 0x12"),
            ],
            "18m",
            [Expect(not_available, (_a_set(),))],
        ),
        Case(
            "not-available/an-available-set-stays-silent",
            _set("llm", minutes=60, available=STEADY, progressing=STEADY),
            "60m",
            [Expect(alert) for alert in SET_ALERTS],
        ),
        Case(
            "not-available/only-the-set-that-is-not-held-fires",
            [
                *_set(
                    "llm",
                    minutes=30,
                    available=ROLLING,
                    progressing=("Unknown", "RolloutPaused"),
                    ready=ALL_READY_MID_ROLLOUT,
                ),
                *_set("chat", minutes=30, available=ROLLING, progressing=PROGRESSING),
            ],
            "20m",
            [Expect(not_available, (_a_set("chat"),))],
        ),
        Case(
            "rollout-stuck/past-the-deadline-for-5-minutes-fires",
            _set(
                "llm",
                minutes=30,
                available=ROLLING,
                progressing=("False", "ProgressDeadlineExceeded"),
                ready=ONE_PREFILL_NOT_READY,
            ),
            "10m",
            [Expect(stuck, (_a_set(),))],
        ),
        Case(
            "rollout-stuck/3-minutes-past-the-deadline-stay-pending",
            _set(
                "llm",
                minutes=30,
                available=ROLLING,
                progressing=("False", "ProgressDeadlineExceeded"),
            ),
            "3m",
            [Expect(stuck)],
        ),
        Case(
            "rollout-stuck/a-long-rollout-in-progress-stays-silent",
            _set("llm", minutes=90, available=ROLLING, progressing=PROGRESSING),
            "90m",
            [Expect(stuck)],
        ),
        Case(
            "degraded/10-minutes-degraded-fire",
            _set(
                "llm",
                minutes=20,
                available=STEADY,
                progressing=STEADY,
                degraded=("True", "InvalidSpec"),
            ),
            "15m",
            [Expect("DisaggregatedSetDegraded", (_a_set(),))],
        ),
        Case(
            "degraded/5-minutes-stay-pending",
            _set(
                "llm",
                minutes=20,
                available=STEADY,
                progressing=STEADY,
                degraded=("True", "ChildNotCreated"),
            ),
            "5m",
            [Expect("DisaggregatedSetDegraded")],
        ),
        Case(
            "status-stale/a-spec-generation-unsynced-for-15-minutes-fires",
            _set("llm", minutes=30, available=STEADY, progressing=STEADY, generation=(4, 3)),
            "20m",
            # A comparison keeps every label of the series it filters.
            [Expect("DisaggregatedSetStatusStale", (_set_labels("llm"),))],
        ),
        Case(
            "status-stale/a-held-degraded-set-is-left-to-the-degraded-alert",
            _set(
                "llm",
                minutes=30,
                available=STEADY,
                progressing=STEADY,
                degraded=("True", "InvalidSpec"),
                generation=(4, 3),
            ),
            "20m",
            [
                Expect("DisaggregatedSetStatusStale"),
                Expect("DisaggregatedSetDegraded", (_a_set(),)),
            ],
        ),
        Case(
            "status-stale/10-minutes-stay-pending",
            _set("llm", minutes=30, available=STEADY, progressing=STEADY, generation=(4, 3)),
            "10m",
            [Expect("DisaggregatedSetStatusStale")],
        ),
    ]
    for reason in DELIBERATE_HOLDS:
        cases += [
            Case(
                f"deliberate-hold/{reason}-with-every-group-ready-fires-nothing",
                _set(
                    "llm",
                    minutes=120,
                    available=ROLLING,
                    progressing=("Unknown", reason),
                    ready=ALL_READY_MID_ROLLOUT,
                ),
                "120m",
                [Expect(alert) for alert in SET_ALERTS],
            ),
            Case(
                f"deliberate-hold/{reason}-with-a-group-not-ready-is-not-available",
                _set(
                    "llm",
                    minutes=30,
                    available=ROLLING,
                    progressing=("Unknown", reason),
                    ready=ONE_PREFILL_NOT_READY,
                ),
                "20m",
                [Expect(not_available, (_a_set(),)), Expect(stuck)],
            ),
        ]
    return cases


# --- running promtool -----------------------------------------------------------------------


def _latency_buckets() -> tuple[float, ...]:
    """The histogram's bounds, from the /metrics of the real app after one call."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(settings.MULTIPROC_ENV, raising=False)
        client = hook_app.create_app().test_client()
        client.post("/sync", data=b"{broken")
        text = client.get("/metrics").get_data(as_text=True)
    return alerting.latency_buckets(text)


CASES: Final = [*_hook_cases(), *_set_cases()]
RULES: Final = {rule["alert"]: rule for rule in alerting.alerts()}


@pytest.fixture(scope="module")
def rules_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("rules")
    alerting.write_rule_file(directory / "rules.yaml")
    return directory


def _expected_alert(expect: Expect, labels: Labels) -> dict[str, object]:
    rule = RULES[expect.alert]
    return {
        "exp_labels": {**labels, **rule["labels"]},
        "exp_annotations": {
            key: alerting.render_annotation(template, labels, expect.value)
            for key, template in rule["annotations"].items()
        },
    }


@pytest.fixture(scope="module")
def buckets() -> tuple[float, ...]:
    return _latency_buckets()


def _unit_test_file(case: Case, buckets: Sequence[float]) -> dict[str, object]:
    series = list(case.series)
    for hook, per_minute, minutes in case.latencies:
        series += _latencies(hook, per_minute, minutes, buckets)
    return {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "name": case.id,
                "interval": "1m",
                "input_series": [{"series": s, "values": v} for s, v in series],
                "alert_rule_test": [
                    {
                        "eval_time": case.eval_time,
                        "alertname": expect.alert,
                        "exp_alerts": [_expected_alert(expect, labels) for labels in expect.firing],
                    }
                    for expect in case.expect
                ],
            }
        ],
    }


def _promtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    promtool = alerting.require("promtool")
    return subprocess.run(
        [promtool, *map(str, args)], capture_output=True, text=True, timeout=60, check=False
    )


def test_promtool_check_rules_accepts_the_rule_groups(rules_dir: Path) -> None:
    result = _promtool("check", "rules", rules_dir / "rules.yaml")
    assert result.returncode == 0, result.stdout + result.stderr
    rules = [rule for group in alerting.rule_groups() for rule in group["rules"]]
    assert f"SUCCESS: {len(rules)} rules found" in result.stdout


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_alert(case: Case, rules_dir: Path, buckets: tuple[float, ...]) -> None:
    test_file = rules_dir / f"{case.id.replace('/', '--')}.yaml"
    test_file.write_text(yaml.safe_dump(_unit_test_file(case, buckets), sort_keys=False))
    result = _promtool("test", "rules", test_file)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_has_a_case_that_fires_it_and_one_that_keeps_it_silent() -> None:
    firing = {e.alert for case in CASES for e in case.expect if e.firing}
    silent = {e.alert for case in CASES for e in case.expect if not e.firing}
    assert firing == set(RULES)
    assert silent == set(RULES)


def test_every_deliberate_hold_is_checked_against_every_set_alert() -> None:
    from_status = {name for name, rule in RULES.items() if "kube_disaggregatedset_" in rule["expr"]}
    assert set(SET_ALERTS) == from_status
    for reason in DELIBERATE_HOLDS:
        quiet = f"deliberate-hold/{reason}-with-every-group-ready-fires-nothing"
        [case] = [case for case in CASES if case.id == quiet]
        assert {e.alert for e in case.expect if not e.firing} == from_status
