"""Helpers for the tests that run components/prometheus-rules in a real Prometheus.

`promtool` and `prometheus` come from Debian's `prometheus` package; without them, see
`tests.programs`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests import programs
from tests.shared import REPO_ROOT

RULES_FILE: Final = REPO_ROOT / "components" / "prometheus-rules" / "prometheusrule.yaml"
SERVICE_FILE: Final = REPO_ROOT / "components" / "servicemonitor" / "service.yaml"
DURATION_BUCKET: Final = "disaggregatedset_hook_duration_seconds_bucket"
INSTALL_HINT: Final = "on Debian: apt-get install prometheus, which has promtool too"

Manifest = dict[str, Any]


def require(program: str) -> str:
    """The path of `program` (promtool or prometheus)."""
    return programs.require(program, INSTALL_HINT)


def rule_groups() -> list[Manifest]:
    """`spec.groups` of the PrometheusRule: what prometheus-operator hands Prometheus."""
    document = yaml.safe_load(RULES_FILE.read_text())
    assert document["kind"] == "PrometheusRule"
    groups: list[Manifest] = document["spec"]["groups"]
    return groups


def alerts() -> list[Manifest]:
    return [rule for group in rule_groups() for rule in group["rules"] if "alert" in rule]


def alert(name: str) -> Manifest:
    [rule] = [rule for rule in alerts() if rule["alert"] == name]
    return rule


def write_rule_file(path: Path, *, durations: Mapping[str, str] | None = None) -> Path:
    """The rules as a Prometheus rule file; `durations` replaces the `for:` of named alerts."""
    groups = rule_groups()
    for group in groups:
        for rule in group["rules"]:
            if durations and rule.get("alert") in durations:
                rule["for"] = durations[rule["alert"]]
    path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    return path


def metrics_service() -> str:
    """The Service name prometheus-operator puts in the `service` label of the hook targets."""
    name: str = yaml.safe_load(SERVICE_FILE.read_text())["metadata"]["name"]
    return name


def latency_buckets(metrics_text: str) -> tuple[float, ...]:
    """The finite upper bounds of the hook latency histogram, read from /metrics output."""
    bounds = {
        float(sample.labels["le"])
        for family in text_string_to_metric_families(metrics_text)
        for sample in family.samples
        if sample.name == DURATION_BUCKET
    }
    assert bounds, f"no {DURATION_BUCKET} samples in the /metrics output"
    return tuple(sorted(bound for bound in bounds if not math.isinf(bound)))


_TEMPLATE: Final = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)


def render_annotation(template: str, labels: Mapping[str, str], value: float | None) -> str:
    """`template` as Prometheus renders it, for the few template forms the alerts use.

    A form not handled here, or a label the alert does not carry, fails the test: the expected
    text of promtool's unit tests is computed from the alert's own labels, never copied.
    """

    def substitute(match: re.Match[str]) -> str:
        action = match.group(1).strip()
        if action.startswith("$labels."):
            name = action.removeprefix("$labels.")
            assert name in labels, f"template {action!r} names a label the alert lacks"
            return labels[name]
        assert value is not None, f"template {action!r} needs the alert's value"
        if action == "$value | humanizePercentage":
            return f"{value * 100:.4g}%"
        raise AssertionError(f"template action {action!r} is not handled by this test helper")

    return _TEMPLATE.sub(substitute, template)
