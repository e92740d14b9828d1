"""The optional observability components: ServiceMonitor, alerts, kube-state-metrics, dashboard.

Rendering needs `kubectl` (its built-in kustomize; without it, see tests/kustomize.py).
PromQL is parsed with promql-parser, and every metric an expression names must exist: the hook
metrics as the real app exposes them on /metrics, `up`, or a series that the kube-state-metrics
configuration of components/kube-state-metrics defines.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from hooks import api
from hooks.api import conditions
from hooks.server import app as hook_app
from hooks.server import settings
from tests import alerting, kustomize

REPO_ROOT = Path(__file__).resolve().parents[1]
COMPONENTS = REPO_ROOT / "components"
CRD_FILES = {
    "DisaggregatedSet": REPO_ROOT / "crds" / "disaggregatedsets.yaml",
    "DisaggregatedSetRoleScaler": REPO_ROOT / "crds" / "disaggregatedsetrolescalers.yaml",
}
RULES_FILE = COMPONENTS / "prometheus-rules" / "prometheusrule.yaml"
KSM_DIR = COMPONENTS / "kube-state-metrics"
KSM_CONFIG_FILE = KSM_DIR / "custom-resource-state.yaml"
DASHBOARD_FILE = COMPONENTS / "grafana-dashboard" / "disaggregatedset.json"

NAMESPACE = "disaggregatedset-system"
HOOK_NAME = "disaggregatedset-hooks"
METRICS_SERVICE = "disaggregatedset-hooks-metrics"
KSM_NAME = "kube-state-metrics"
KSM_CONFIGMAP = "disaggregatedset-kube-state-metrics"
KSM_NAMESPACE = "monitoring"

# The components that build on the kit itself, and exactly what each one adds to it.
KIT_COMPONENTS = {
    "servicemonitor": {("Service", METRICS_SERVICE), ("ServiceMonitor", HOOK_NAME)},
    "prometheus-rules": {("PrometheusRule", HOOK_NAME)},
    "grafana-dashboard": {("ConfigMap", "disaggregatedset-dashboard")},
}
OBSERVABILITY_COMPONENTS = (*KIT_COMPONENTS, "kube-state-metrics")

# Labels Prometheus (with prometheus-operator) puts on every scraped series.
TARGET_LABELS = frozenset(
    {"job", "instance", "namespace", "service", "pod", "container", "endpoint"}
)
# Labels kube-state-metrics puts on every custom-resource-state series.
KSM_COMMON_LABELS = frozenset(
    {"customresource_group", "customresource_kind", "customresource_version"}
)

Manifest = dict[str, Any]


# --- rendering -------------------------------------------------------------------------------


def _write_overlay(
    directory: Path, resources: list[str], components: list[str], **extra: Any
) -> None:
    """A kustomization in `directory`, paths relative to it (kustomize refuses absolute ones)."""
    document = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        **extra,
        "resources": resources,
        "components": [os.path.relpath(COMPONENTS / name, directory) for name in components],
    }
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(document, sort_keys=False))


def _render_kit_with(tmp_path: Path, components: list[str]) -> list[Manifest]:
    """The repository root plus `components`, built from an overlay outside the repository."""
    kustomize.require_crds()
    _write_overlay(tmp_path, [os.path.relpath(REPO_ROOT, tmp_path)], components)
    return kustomize.render(tmp_path)


@pytest.fixture(scope="module")
def base() -> list[Manifest]:
    kustomize.require_crds()
    return kustomize.render(REPO_ROOT)


@pytest.fixture(scope="module")
def kit_with_all(tmp_path_factory: pytest.TempPathFactory) -> list[Manifest]:
    return _render_kit_with(tmp_path_factory.mktemp("overlay"), list(KIT_COMPONENTS))


# --- off by default, how to enable -------------------------------------------------------------


def test_the_base_enables_no_observability_component(base: list[Manifest]) -> None:
    kustomization = yaml.safe_load((REPO_ROOT / "kustomization.yaml").read_text())
    enabled = {Path(entry).name for entry in kustomization.get("components") or []}
    assert not enabled & set(OBSERVABILITY_COMPONENTS)
    added = set().union(*KIT_COMPONENTS.values())
    assert not kustomize.kinds_and_names(base) & added
    assert not {o["kind"] for o in base} & {"ServiceMonitor", "PrometheusRule"}


@pytest.mark.parametrize("name", OBSERVABILITY_COMPONENTS)
def test_component_says_what_it_adds_and_how_to_enable_it(name: str) -> None:
    text = (COMPONENTS / name / "kustomization.yaml").read_text()
    document = yaml.safe_load(text)
    assert document["apiVersion"] == "kustomize.config.k8s.io/v1alpha1"
    assert document["kind"] == "Component"
    header = text.split("\napiVersion:", 1)[0]
    assert all(line.startswith("#") for line in header.splitlines() if line.strip())
    assert f"components/{name}" in header
    assert "Needs" in header or "needs" in header


# --- the components on the kit -----------------------------------------------------------------


@pytest.mark.parametrize("name", KIT_COMPONENTS)
def test_component_adds_exactly_its_objects_to_the_kit_namespace(
    name: str, base: list[Manifest], tmp_path: Path
) -> None:
    objects = _render_kit_with(tmp_path, [name])

    assert (
        kustomize.kinds_and_names(objects) == kustomize.kinds_and_names(base) | KIT_COMPONENTS[name]
    )
    assert len(objects) == len(base) + len(KIT_COMPONENTS[name])
    # The overlay has no `namespace:`; the objects name the kit's default namespace themselves.
    for kind, object_name in KIT_COMPONENTS[name]:
        assert kustomize.one(objects, kind, object_name)["metadata"]["namespace"] == NAMESPACE


def test_components_move_with_the_namespace_of_the_kustomization_that_enables_them(
    tmp_path: Path,
) -> None:
    """Enabled in the root kustomization.yaml with its `namespace:` changed, as a user would."""
    kustomize.require_crds()
    kustomization = yaml.safe_load((REPO_ROOT / "kustomization.yaml").read_text())
    for entry in {Path(path).parts[0] for path in kustomization["resources"]} | {"components"}:
        shutil.copytree(REPO_ROOT / entry, tmp_path / entry)
    text = (REPO_ROOT / "kustomization.yaml").read_text()
    assert f"\nnamespace: {NAMESPACE}\n" in text
    text = text.replace(f"\nnamespace: {NAMESPACE}\n", "\nnamespace: llm-ops\n")
    text += "\ncomponents:\n" + "".join(f"  - components/{name}\n" for name in KIT_COMPONENTS)
    (tmp_path / "kustomization.yaml").write_text(text)

    objects = kustomize.render(tmp_path)

    for kind, name in set().union(*KIT_COMPONENTS.values()):
        metadata = kustomize.one(objects, kind, name)["metadata"]
        assert metadata["namespace"] == "llm-ops", (kind, name)
        assert metadata["labels"]["app.kubernetes.io/part-of"] == "disaggregatedset"
    assert kustomize.one(objects, "Deployment", HOOK_NAME)["metadata"]["namespace"] == "llm-ops"


def test_servicemonitor_scrapes_the_hook_pods_metrics_port(kit_with_all: list[Manifest]) -> None:
    deployment = kustomize.one(kit_with_all, "Deployment", HOOK_NAME)
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    container_ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    service = kustomize.one(kit_with_all, "Service", METRICS_SERVICE)
    monitor = kustomize.one(kit_with_all, "ServiceMonitor", HOOK_NAME)

    # The metrics Service reaches the hook pods, the same ones the hook Service selects.
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert (
        service["spec"]["selector"]
        == kustomize.one(kit_with_all, "Service", HOOK_NAME)["spec"]["selector"]
    )
    [port] = service["spec"]["ports"]
    assert port == {"name": "metrics", "port": 9090, "targetPort": "metrics", "protocol": "TCP"}
    assert port["targetPort"] in container_ports
    assert f"0.0.0.0:{container_ports['metrics']}" in container["args"]

    # The ServiceMonitor selects that Service (and only it) and scrapes the named port.
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"]
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    for other in kit_with_all:
        if other["kind"] == "Service" and other["metadata"]["name"] != METRICS_SERVICE:
            assert not selector.items() <= other["metadata"].get("labels", {}).items()
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint == {"port": "metrics", "path": "/metrics", "interval": "30s"}
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}

    # The kit's NetworkPolicy admits Prometheus to that container port.
    policy = kustomize.one(kit_with_all, "NetworkPolicy", HOOK_NAME)
    admitted = {entry["port"] for rule in policy["spec"]["ingress"] for entry in rule["ports"]}
    assert port["targetPort"] in admitted


def test_dashboard_configmap_holds_the_dashboard_for_the_grafana_sidecar(
    kit_with_all: list[Manifest],
) -> None:
    configmap = kustomize.one(kit_with_all, "ConfigMap", "disaggregatedset-dashboard")
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert configmap["data"] == {"disaggregatedset.json": DASHBOARD_FILE.read_text()}


# --- the metrics that exist ----------------------------------------------------------------------


def _hook_metrics_text() -> str:
    """The /metrics of a real app after one failed call."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(settings.MULTIPROC_ENV, raising=False)
        client = hook_app.create_app().test_client()
        client.post("/sync", data=b"{broken")
        text: str = client.get("/metrics").get_data(as_text=True)
    return text


def _hook_metrics() -> dict[str, frozenset[str]]:
    """Sample name -> label names, from the /metrics of a real app after one failed call."""
    labels: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(_hook_metrics_text()):
        # Only the app's own families: the process collectors are absent under gunicorn.
        if family.name.startswith("disaggregatedset_"):
            for sample in family.samples:
                labels.setdefault(sample.name, set()).update(sample.labels)
    return {name: frozenset(names) | TARGET_LABELS for name, names in labels.items()}


def _ksm_config() -> Manifest:
    document: Manifest = yaml.safe_load(KSM_CONFIG_FILE.read_text())
    return document


def _ksm_metrics() -> dict[str, frozenset[str]]:
    """Series name -> label names that the custom-resource-state configuration produces."""
    metrics: dict[str, frozenset[str]] = {}
    for resource in _ksm_config()["spec"]["resources"]:
        common = set(resource.get("labelsFromPath", {})) | set(resource.get("commonLabels", {}))
        for metric in resource["metrics"]:
            each = metric["each"]
            body = each[_TYPE_KEYS[each["type"]]]
            labels = common | set(metric.get("labelsFromPath", {}))
            labels |= set(metric.get("commonLabels", {})) | set(body.get("labelsFromPath", {}))
            labels |= {body[key] for key in ("labelFromKey", "labelName") if key in body}
            name = f"{resource['metricNamePrefix']}_{metric['name']}"
            assert name not in metrics, f"{name} defined twice"
            metrics[name] = frozenset(labels) | KSM_COMMON_LABELS | TARGET_LABELS
    return metrics


@pytest.fixture(scope="module")
def known_metrics() -> dict[str, frozenset[str]]:
    hooks = _hook_metrics()
    ksm = _ksm_metrics()
    assert not hooks.keys() & ksm.keys()
    return {**hooks, **ksm, "up": TARGET_LABELS}


def test_the_hook_metrics_include_the_histogram_series() -> None:
    names = set(_hook_metrics())
    assert {
        "disaggregatedset_hook_calls_total",
        "disaggregatedset_hook_errors_total",
        "disaggregatedset_hook_duration_seconds_bucket",
        "disaggregatedset_hook_duration_seconds_count",
        "disaggregatedset_hook_duration_seconds_sum",
    } <= names


# --- PromQL ------------------------------------------------------------------------------------


def _nodes(node: Any) -> Iterator[Any]:
    """Every node of a parsed expression, outermost first."""
    yield node
    if isinstance(node, promql_parser.MatrixSelector):
        children = [node.vector_selector]
    elif isinstance(node, promql_parser.BinaryExpr):
        children = [node.lhs, node.rhs]
    elif isinstance(node, promql_parser.AggregateExpr):
        children = [node.expr] + ([node.param] if node.param is not None else [])
    elif isinstance(node, promql_parser.Call):
        children = list(node.args)
    elif isinstance(
        node, promql_parser.ParenExpr | promql_parser.UnaryExpr | promql_parser.SubqueryExpr
    ):
        children = [node.expr]
    elif isinstance(
        node,
        promql_parser.VectorSelector | promql_parser.NumberLiteral | promql_parser.StringLiteral,
    ):
        children = []
    else:
        raise TypeError(f"unexpected PromQL node {type(node).__name__}")
    for child in children:
        yield from _nodes(child)


def _selectors(node: Any) -> Iterator[promql_parser.VectorSelector]:
    """Every vector selector in a parsed expression."""
    return (n for n in _nodes(node) if isinstance(n, promql_parser.VectorSelector))


def _groupings(node: Any) -> Iterator[tuple[list[str], Any]]:
    """(labels, subexpression) of every `by`/`without` and `on`/`ignoring` in an expression."""
    for n in _nodes(node):
        if isinstance(n, promql_parser.AggregateExpr) and n.modifier is not None:
            yield list(n.modifier.labels), n.expr
        elif isinstance(n, promql_parser.BinaryExpr) and n.modifier and n.modifier.matching:
            yield list(n.modifier.matching.labels), n


def _metric_name(selector: promql_parser.VectorSelector) -> str:
    if selector.name:
        return str(selector.name)
    names = [m.value for m in selector.matchers.matchers if m.name == "__name__"]
    assert len(names) == 1, f"selector without a metric name: {selector}"
    return str(names[0])


def _assert_uses_known_metrics(expr: str, known: dict[str, frozenset[str]]) -> Any:
    """Parse `expr`; every metric must exist and every label it names must be one of its own."""
    try:
        tree = promql_parser.parse(expr)
    except ValueError as error:
        pytest.fail(f"{expr!r} does not parse: {error}")
    selectors = list(_selectors(tree))
    assert selectors, f"{expr!r} reads no metric"
    for selector in selectors:
        name = _metric_name(selector)
        assert name in known, f"{expr!r} reads {name}, which nothing exposes"
        matched = {m.name for m in selector.matchers.matchers} - {"__name__"}
        assert matched <= known[name], f"{expr!r}: {name} has no label {matched - known[name]}"
    for labels, subexpression in _groupings(tree):
        available = set().union(*(known[_metric_name(s)] for s in _selectors(subexpression)))
        assert set(labels) <= available, f"{expr!r} groups by missing labels {labels}"
    return tree


def _matchers(tree: Any) -> dict[str, dict[str, str]]:
    """Metric name -> {label: value} of its equality matchers, over all selectors of `tree`."""
    found: dict[str, dict[str, str]] = {}
    for selector in _selectors(tree):
        equal = {
            m.name: m.value for m in selector.matchers.matchers if str(m.op) == "MatchOp.Equal"
        }
        found.setdefault(_metric_name(selector), {}).update(equal)
    return found


# --- the alerts --------------------------------------------------------------------------------


def _rules() -> list[Manifest]:
    document = yaml.safe_load(RULES_FILE.read_text())
    assert document["apiVersion"] == "monitoring.coreos.com/v1"
    assert document["kind"] == "PrometheusRule"
    [group] = document["spec"]["groups"]
    rules: list[Manifest] = group["rules"]
    return rules


def _alert(name: str) -> Manifest:
    [rule] = [rule for rule in _rules() if rule.get("alert") == name]
    return rule


def test_every_alert_waits_and_says_how_bad_and_what_happened() -> None:
    rules = _rules()
    names = [rule.get("alert") or rule.get("record") for rule in rules]
    assert len(names) == len(set(names))
    for rule in rules:
        if "alert" not in rule:
            continue
        assert re.fullmatch(r"\d+[smh]", rule["for"]), rule["alert"]
        assert rule["labels"]["severity"] in {"info", "warning", "critical"}, rule["alert"]
        assert rule["annotations"]["summary"].strip(), rule["alert"]
        assert rule["annotations"]["description"].strip(), rule["alert"]


@pytest.mark.parametrize(
    "rule", _rules(), ids=[rule.get("alert") or rule.get("record") for rule in _rules()]
)
def test_rule_expression_parses_and_reads_existing_metrics(
    rule: Manifest, known_metrics: dict[str, frozenset[str]]
) -> None:
    _assert_uses_known_metrics(rule["expr"], known_metrics)


def test_hook_error_alert_is_the_non_200_share_above_5_percent(
    known_metrics: dict[str, frozenset[str]],
) -> None:
    tree = _assert_uses_known_metrics(_alert("DisaggregatedSetHookErrors")["expr"], known_metrics)
    assert str(tree.op) == ">"
    assert tree.rhs.val == pytest.approx(0.05)
    selectors = list(_selectors(tree))
    assert {_metric_name(s) for s in selectors} == {"disaggregatedset_hook_calls_total"}
    [errors] = [s for s in selectors if s.matchers.matchers]
    [matcher] = errors.matchers.matchers
    assert (matcher.name, str(matcher.op), matcher.value) == ("code", "MatchOp.NotEqual", "200")


def test_hook_latency_alert_sits_at_a_bucket_bound_within_half_the_webhook_timeout(
    known_metrics: dict[str, frozenset[str]],
) -> None:
    """The buckets come from /metrics, as Prometheus sees them (tests/alerting.py)."""
    tree = _assert_uses_known_metrics(_alert("DisaggregatedSetHookSlow")["expr"], known_metrics)
    controllers = yaml.safe_load_all(
        (REPO_ROOT / "metacontroller" / "compositecontrollers.yaml").read_text()
    )
    timeouts = {
        float(hook["webhook"].get("timeout", "10s").rstrip("s"))
        for controller in controllers
        for hook in controller["spec"]["hooks"].values()
    }
    buckets = alerting.latency_buckets(_hook_metrics_text())
    threshold = tree.rhs.val
    assert threshold in buckets
    assert threshold <= min(timeouts) / 2
    # histogram_quantile never returns more than the largest finite bucket bound: the buckets
    # reach the webhook timeout, so latencies between the threshold and it are seen, and `>`
    # means "more than 1% of calls took longer".
    assert max(buckets) >= min(timeouts)
    assert str(tree.op) == ">"
    assert isinstance(tree.lhs, promql_parser.Call)
    assert tree.lhs.func.name == "histogram_quantile"
    assert tree.lhs.args[0].val == pytest.approx(0.99)


def test_hook_server_alerts_key_on_the_servicemonitor_targets() -> None:
    service = yaml.safe_load((COMPONENTS / "servicemonitor" / "service.yaml").read_text())
    for name in ("DisaggregatedSetHooksDown", "DisaggregatedSetHooksAbsent"):
        tree = promql_parser.parse(_alert(name)["expr"])
        assert _matchers(tree) == {"up": {"service": service["metadata"]["name"]}}, name


def test_set_alerts_match_the_condition_types_and_reasons_the_hooks_write(
    known_metrics: dict[str, frozenset[str]],
) -> None:
    condition_types = {str(member.value) for member in api.ConditionType}
    expected = {
        "DisaggregatedSetRolloutStuck": {
            "type": "Progressing",
            "status": "False",
            "reason": api.Reason.PROGRESS_DEADLINE_EXCEEDED,
        },
        "DisaggregatedSetDegraded": {"type": "Degraded", "status": "True"},
    }
    for name, matchers in expected.items():
        rule = _alert(name)
        tree = _assert_uses_known_metrics(rule["expr"], known_metrics)
        assert _matchers(tree) == {"kube_disaggregatedset_status_condition": matchers}, name
        assert matchers["type"] in condition_types
    assert api.Reason.PROGRESS_DEADLINE_EXCEEDED == "ProgressDeadlineExceeded"


DELIBERATE_HOLDS = frozenset(conditions.DELIBERATE_STOPS)


def test_not_available_alert_spares_deliberate_holds_while_every_group_is_ready(
    known_metrics: dict[str, frozenset[str]],
) -> None:
    """What it fires on is proven by tests/test_alerts_promtool.py; here, what it reads."""
    rule = _alert("DisaggregatedSetNotAvailable")
    tree = _assert_uses_known_metrics(rule["expr"], known_metrics)
    conditions = [
        {m.name: (str(m.op), m.value) for m in selector.matchers.matchers}
        for selector in _selectors(tree)
        if _metric_name(selector) == "kube_disaggregatedset_status_condition"
    ]
    [available, held] = conditions
    assert available == {"type": ("MatchOp.Equal", "Available")}
    op, pattern = held.pop("reason")
    assert held == {
        "type": ("MatchOp.Equal", str(api.ConditionType.PROGRESSING)),
        "status": ("MatchOp.Equal", str(api.ConditionStatus.UNKNOWN)),
    }
    assert op == "MatchOp.Re"
    assert set(pattern.split("|")) == DELIBERATE_HOLDS
    assert api.Reason.ROLLOUT_PAUSED in DELIBERATE_HOLDS
    assert {_metric_name(s) for s in _selectors(tree)} == {
        "kube_disaggregatedset_status_condition",
        "kube_disaggregatedset_status_role_ready_replicas",
        "kube_disaggregatedset_status_role_replicas",
    }
    assert rule["for"] == "15m"


# --- the kube-state-metrics configuration --------------------------------------------------------

_TYPE_KEYS = {"Gauge": "gauge", "Info": "info", "StateSet": "stateSet"}
# The fields kube-state-metrics' configuration structs accept, so a misspelt one fails here
# instead of being ignored by its YAML decoder.
_FIELDS = {
    "resource": {
        "groupVersionKind",
        "metricNamePrefix",
        "labelsFromPath",
        "commonLabels",
        "metrics",
        "errorLogV",
        "resourcePlural",
    },
    "metric": {"name", "help", "each", "labelsFromPath", "commonLabels", "errorLogV"},
    "gauge": {"path", "valueFrom", "labelsFromPath", "labelFromKey", "nilIsZero"},
    "info": {"path", "labelsFromPath", "labelFromKey"},
    "stateSet": {"path", "valueFrom", "labelsFromPath", "labelName", "list"},
}
# The metadata fields a path may name (the CRD schema leaves metadata to the API server).
_METADATA_SCALARS = {"name": "string", "namespace": "string", "generation": "integer"}
_METADATA_MAPS = {"labels", "annotations"}


def _crd(kind: str) -> Manifest:
    kustomize.require_crds()
    document: Manifest = yaml.safe_load(CRD_FILES[kind].read_text())
    return document


def _schema_node(root: Manifest, path: list[str], *, top: bool = False) -> Manifest:
    """The OpenAPI schema of `path` under `root` (the object's own schema when `top`).

    A list element is its array's `items`; metadata, which the CRD leaves to the API server,
    resolves only to the fields in _METADATA_SCALARS and _METADATA_MAPS.
    """
    if top and path[:1] == ["metadata"]:
        return _metadata_node(path[1:])
    node = root
    for part in path:
        if node.get("type") == "array":
            node = node["items"]
            if part.isdigit() or part.startswith("["):
                continue
        properties = node.get("properties", {})
        assert part in properties, f"{path}: no field {part!r} in the CRD schema"
        node = properties[part]
    return node


def _metadata_node(rest: list[str]) -> Manifest:
    if len(rest) == 1 and rest[0] in _METADATA_SCALARS:
        return {"type": _METADATA_SCALARS[rest[0]]}
    if len(rest) == 2 and rest[0] in _METADATA_MAPS:
        return {"type": "string"}
    raise AssertionError(f"metadata.{'.'.join(rest)} is not a metadata field the config may use")


def _element(node: Manifest) -> Manifest:
    """What labels and values are relative to: an array's element, else the node itself."""
    return node["items"] if node.get("type") == "array" else node


def _assert_scalar(node: Manifest, where: str) -> None:
    assert node.get("type") in {"string", "integer", "number", "boolean"}, where


def _assert_gauge_value(node: Manifest, where: str) -> None:
    """kube-state-metrics turns numbers, booleans, condition statuses and RFC 3339 into floats."""
    if node.get("type") == "string":
        statuses = {str(status.value) for status in api.ConditionStatus}
        enum = set(node.get("enum", []))
        assert node.get("format") == "date-time" or (enum and enum <= statuses), where
    else:
        assert node.get("type") in {"integer", "number", "boolean"}, where


def _ksm_resources() -> list[Manifest]:
    resources: list[Manifest] = _ksm_config()["spec"]["resources"]
    return resources


def test_ksm_config_covers_both_kinds_with_the_crds_group_and_version() -> None:
    config = _ksm_config()
    assert config["kind"] == "CustomResourceStateMetrics"
    gvks = []
    for resource in _ksm_resources():
        gvk = resource["groupVersionKind"]
        crd = _crd(gvk["kind"])
        assert gvk["group"] == crd["spec"]["group"]
        assert gvk["kind"] == crd["spec"]["names"]["kind"]
        served = {v["name"] for v in crd["spec"]["versions"] if v["served"]}
        assert gvk["version"] in served
        gvks.append(gvk["kind"])
    assert sorted(gvks) == sorted(CRD_FILES)
    prefixes = {r["groupVersionKind"]["kind"]: r["metricNamePrefix"] for r in _ksm_resources()}
    assert prefixes == {
        "DisaggregatedSet": "kube_disaggregatedset",
        "DisaggregatedSetRoleScaler": "kube_disaggregatedsetrolescaler",
    }


def test_ksm_config_uses_only_fields_kube_state_metrics_knows() -> None:
    for resource in _ksm_resources():
        assert set(resource) <= _FIELDS["resource"]
        for metric in resource["metrics"]:
            assert set(metric) <= _FIELDS["metric"], metric["name"]
            each = metric["each"]
            key = _TYPE_KEYS[each["type"]]
            assert set(each) == {"type", key}, metric["name"]
            assert set(each[key]) <= _FIELDS[key], metric["name"]
            assert re.fullmatch(r"[a-z][a-z0-9_]*", metric["name"]), metric["name"]
            # kube-state-metrics logs a notice for an Info metric without the suffix.
            assert (each["type"] == "Info") == metric["name"].endswith("_info"), metric["name"]
            assert metric["help"].strip(), metric["name"]


@pytest.mark.parametrize("kind", sorted(CRD_FILES))
def test_ksm_config_paths_exist_in_the_crd_schema(kind: str) -> None:
    [resource] = [r for r in _ksm_resources() if r["groupVersionKind"]["kind"] == kind]
    crd = _crd(kind)
    [version] = [
        v for v in crd["spec"]["versions"] if v["name"] == resource["groupVersionKind"]["version"]
    ]
    root = version["schema"]["openAPIV3Schema"]
    assert {"namespace", "disaggregatedset"} <= set(resource["labelsFromPath"])
    for label, path in resource["labelsFromPath"].items():
        _assert_scalar(_schema_node(root, path, top=True), f"{kind} label {label}")
    for metric in resource["metrics"]:
        where = f"{kind} {metric['name']}"
        for label, path in metric.get("labelsFromPath", {}).items():
            _assert_scalar(_schema_node(root, path, top=True), f"{where} label {label}")
        body = metric["each"][_TYPE_KEYS[metric["each"]["type"]]]
        element = _element(_schema_node(root, body.get("path", []), top=True))
        for label, path in body.get("labelsFromPath", {}).items():
            _assert_scalar(_schema_node(element, path), f"{where} label {label}")
        if metric["each"]["type"] == "Gauge":
            _assert_gauge_value(_schema_node(element, body.get("valueFrom", [])), where)


def test_ksm_config_defines_the_documented_series() -> None:
    names = set(_ksm_metrics())
    sets = {
        "metadata_generation",
        "status_observed_generation",
        "spec_slices",
        "spec_role_replicas",
        "status_role_replicas",
        "status_role_ready_replicas",
        "status_role_updated_replicas",
        "status_condition",
        "status_revision_info",
        "status_rollout_ready_replicas",
        "status_rollout_updated_replicas",
        "status_rollout_last_progress_time",
    }
    scalers = {"spec_replicas", "status_replicas", "status_observed_generation", "status_condition"}
    assert {f"kube_disaggregatedset_{n}" for n in sets} <= names
    assert {f"kube_disaggregatedsetrolescaler_{n}" for n in scalers} <= names
    conditions = _ksm_metrics()["kube_disaggregatedset_status_condition"]
    assert {"namespace", "disaggregatedset", "type", "status", "reason"} <= conditions


# --- the kube-state-metrics component ------------------------------------------------------------


def _ksm_install(namespace: str | None, *, args: list[str]) -> list[Manifest]:
    """A ServiceAccount and Deployment shaped like kube-state-metrics' own manifests."""
    metadata: Manifest = {"name": KSM_NAME}
    if namespace is not None:
        metadata["namespace"] = namespace
    labels = {"app.kubernetes.io/name": KSM_NAME}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": KSM_NAME,
                    "containers": [
                        {
                            "name": KSM_NAME,
                            "image": "registry.k8s.io/kube-state-metrics/kube-state-metrics",
                            "args": args,
                        },
                        {
                            "name": "proxy",
                            "image": "proxy",
                            "volumeMounts": [{"name": "cache", "mountPath": "/cache"}],
                        },
                    ],
                    "volumes": [{"name": "cache", "emptyDir": {}}],
                },
            },
        },
    }
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": dict(metadata)}
    return [account, deployment]


def _render_ksm(directory: Path, objects: list[Manifest], **extra: Any) -> list[Manifest]:
    (directory / "ksm.yaml").write_text(yaml.safe_dump_all(objects))
    _write_overlay(directory, ["ksm.yaml"], ["kube-state-metrics"], **extra)
    return kustomize.render(directory)


def _mount_flag() -> tuple[str, str, str]:
    """(flag, mount path, file name) of the component's Deployment patches."""
    component = yaml.safe_load((KSM_DIR / "kustomization.yaml").read_text())
    operations = [
        operation
        for patch in component["patches"]
        for operation in (yaml.safe_load(patch["patch"]) or [])
        if isinstance(operation, dict) and operation.get("op") == "add"
    ]
    [flag] = [o["value"] for o in operations if o["path"].endswith("/args/-")]
    file_path = flag.split("=", 1)[1]
    return flag, str(Path(file_path).parent), Path(file_path).name


def test_ksm_component_configures_the_ksm_install_in_its_namespace(tmp_path: Path) -> None:
    existing = ["--port=8081", "--telemetry-port=8082"]
    objects = _render_ksm(tmp_path, _ksm_install(KSM_NAMESPACE, args=existing))
    flag, mount_path, file_name = _mount_flag()

    assert kustomize.kinds_and_names(objects) == {
        ("ServiceAccount", KSM_NAME),
        ("Deployment", KSM_NAME),
        ("ConfigMap", KSM_CONFIGMAP),
        ("ClusterRole", KSM_CONFIGMAP),
        ("ClusterRoleBinding", KSM_CONFIGMAP),
    }
    configmap = kustomize.one(objects, "ConfigMap", KSM_CONFIGMAP)
    assert configmap["metadata"]["namespace"] == KSM_NAMESPACE
    assert configmap["data"] == {file_name: KSM_CONFIG_FILE.read_text()}
    assert file_name == KSM_CONFIG_FILE.name

    pod = kustomize.one(objects, "Deployment", KSM_NAME)["spec"]["template"]["spec"]
    ksm, proxy = pod["containers"]
    assert ksm["args"] == [*existing, flag]
    assert flag == f"--custom-resource-state-config-file={mount_path}/{file_name}"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert set(volumes) == {"cache", KSM_CONFIGMAP}
    assert volumes[KSM_CONFIGMAP]["configMap"] == {"name": KSM_CONFIGMAP}
    assert ksm["volumeMounts"] == [
        {"name": KSM_CONFIGMAP, "mountPath": mount_path, "readOnly": True}
    ]
    assert proxy["volumeMounts"] == [{"name": "cache", "mountPath": "/cache"}]

    role = kustomize.one(objects, "ClusterRole", KSM_CONFIGMAP)
    assert role["rules"] == [
        {
            "apiGroups": ["disaggregatedset.x-k8s.io"],
            "resources": ["disaggregatedsets", "disaggregatedsetrolescalers"],
            "verbs": ["list", "watch"],
        },
        {
            "apiGroups": ["apiextensions.k8s.io"],
            "resources": ["customresourcedefinitions"],
            "verbs": ["list", "watch"],
        },
    ]
    binding = kustomize.one(objects, "ClusterRoleBinding", KSM_CONFIGMAP)
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": KSM_CONFIGMAP,
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": KSM_NAME, "namespace": KSM_NAMESPACE}
    ]
    for obj in objects:
        if obj["kind"] in {"ClusterRole", "ClusterRoleBinding"}:
            assert "namespace" not in obj["metadata"]


def test_ksm_component_follows_the_namespace_field_of_the_including_kustomization(
    tmp_path: Path,
) -> None:
    """KSM's own manifests name kube-system; an including `namespace:` moves everything."""
    objects = _render_ksm(
        tmp_path, _ksm_install("kube-system", args=["--port=8080"]), namespace=KSM_NAMESPACE
    )

    assert kustomize.one(objects, "Deployment", KSM_NAME)["metadata"]["namespace"] == KSM_NAMESPACE
    assert (
        kustomize.one(objects, "ConfigMap", KSM_CONFIGMAP)["metadata"]["namespace"] == KSM_NAMESPACE
    )
    [subject] = kustomize.one(objects, "ClusterRoleBinding", KSM_CONFIGMAP)["subjects"]
    assert subject["namespace"] == KSM_NAMESPACE


def test_ksm_component_binds_the_service_account_the_deployment_runs_as(tmp_path: Path) -> None:
    objects = _render_ksm(tmp_path, _ksm_install(KSM_NAMESPACE, args=[]))
    deployment = kustomize.one(objects, "Deployment", KSM_NAME)
    account = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    [subject] = kustomize.one(objects, "ClusterRoleBinding", KSM_CONFIGMAP)["subjects"]
    assert (subject["name"], subject["namespace"]) == (
        account,
        deployment["metadata"]["namespace"],
    )


# --- the dashboard -------------------------------------------------------------------------------

_DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def _dashboard() -> Manifest:
    document: Manifest = json.loads(DASHBOARD_FILE.read_text())
    return document


def _panels() -> list[Manifest]:
    panels: list[Manifest] = []
    for panel in _dashboard()["panels"]:
        panels.append(panel)
        panels.extend(panel.get("panels", []))
    return panels


def _targets() -> list[tuple[str, str]]:
    return [
        (panel["title"], target["expr"])
        for panel in _panels()
        for target in panel.get("targets", [])
    ]


def _promql(expr: str) -> str:
    """`expr` with Grafana's variables replaced by values PromQL accepts in their place."""
    expr = re.sub(r"\$\{?__(rate_)?interval\}?|\$\{?__range\}?", "5m", expr)
    return re.sub(r"\$\{?\w+(:\w+)?\}?", ".*", expr)


def test_dashboard_is_a_grafana_dashboard_with_a_prometheus_datasource_variable() -> None:
    dashboard = _dashboard()
    assert dashboard["uid"] == "disaggregatedset"
    assert 36 <= dashboard["schemaVersion"] <= 41
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    assert {"namespace", "disaggregatedset"} <= set(variables)
    ids = [panel["id"] for panel in _panels()]
    assert len(ids) == len(set(ids))


def test_every_dashboard_panel_and_query_uses_the_datasource_variable() -> None:
    panels = [panel for panel in _panels() if panel["type"] != "row"]
    assert panels
    for panel in panels:
        assert panel["datasource"] == _DATASOURCE, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == _DATASOURCE, panel["title"]
    for variable in _dashboard()["templating"]["list"]:
        if variable["type"] == "query":
            assert variable["datasource"] == _DATASOURCE, variable["name"]


@pytest.mark.parametrize(("title", "expr"), _targets(), ids=[t for t, _ in _targets()])
def test_dashboard_query_parses_and_reads_existing_metrics(
    title: str, expr: str, known_metrics: dict[str, frozenset[str]]
) -> None:
    assert "$__rate_interval" in expr or "rate(" not in expr, title
    _assert_uses_known_metrics(_promql(expr), known_metrics)


def test_dashboard_covers_the_hooks_the_sets_and_the_scalers() -> None:
    names = {
        _metric_name(selector)
        for _, expr in _targets()
        for selector in _selectors(promql_parser.parse(_promql(expr)))
    }
    assert {
        "disaggregatedset_hook_calls_total",
        "disaggregatedset_hook_duration_seconds_bucket",
        "kube_disaggregatedset_status_condition",
        "kube_disaggregatedset_status_role_replicas",
        "kube_disaggregatedset_status_role_ready_replicas",
        "kube_disaggregatedset_status_role_updated_replicas",
        "kube_disaggregatedset_status_rollout_updated_replicas",
        "kube_disaggregatedset_status_rollout_ready_replicas",
        "kube_disaggregatedsetrolescaler_spec_replicas",
        "kube_disaggregatedsetrolescaler_status_replicas",
    } <= names


def test_dashboard_variables_read_labels_of_existing_metrics(
    known_metrics: dict[str, frozenset[str]],
) -> None:
    variables = [v for v in _dashboard()["templating"]["list"] if v["type"] == "query"]
    assert {v["name"] for v in variables} == {"namespace", "disaggregatedset"}
    for variable in variables:
        query = (
            variable["query"]["query"] if isinstance(variable["query"], dict) else variable["query"]
        )
        assert variable["definition"] == query
        match = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", query)
        assert match, query
        selector, label = match.groups()
        tree = _assert_uses_known_metrics(_promql(selector), known_metrics)
        assert label in known_metrics[_metric_name(tree)], query
