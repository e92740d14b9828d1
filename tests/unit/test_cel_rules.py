"""The CRD's CEL rules, evaluated with cel-python the way kube-apiserver applies them.

Every manifest goes through `tests.cel_eval.CrdHarness.admit`: defaults from the generated schema,
then OpenAPI validation (jsonschema), then, only when that passed, every CEL rule of the generated
CRD at its schema node.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from hooks import api, rules
from tests import cel_eval
from tests.cel_eval import make_ds, make_role
from tests.shared import REFERENCE_DIR, load_golden_or_empty, shared_path

JsonObject = dict[str, Any]

EXCLUSIVE = api.EXCLUSIVE_TOPOLOGY_ANNOTATION
SUBGROUP_EXCLUSIVE = api.SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION
PLACED = {"type": "ExclusiveSlice", "topology": "cloud.google.com/gke-nodepool"}


@pytest.fixture(scope="module")
def harness() -> cel_eval.CrdHarness:
    return cel_eval.ds_harness()


def _rolling(replicas: int | None, surge: Any = None, unavailable: Any = None) -> JsonObject:
    """Two roles; the first has `replicas` and the given rollingUpdateConfiguration values."""
    config: JsonObject = {}
    if surge is not None:
        config["maxSurge"] = surge
    if unavailable is not None:
        config["maxUnavailable"] = unavailable
    rollout = {"rollingUpdateConfiguration": config}
    return make_ds(
        make_role("prefill", replicas=replicas, rollout=rollout),
        make_role("decode", replicas=replicas),
    )


def _name(length: int) -> str:
    return "n" * length


# id, manifest, CEL rule ids expected to fail (empty: accepted).
CASES: list[tuple[str, JsonObject, set[str]]] = [
    ("plain-two-roles", make_ds(), set()),
    # rule 2
    (
        "replicas-all-zero",
        make_ds(make_role("a", replicas=0), make_role("b", replicas=0)),
        set(),
    ),
    (
        "replicas-all-positive",
        make_ds(make_role("a", replicas=3), make_role("b", replicas=1)),
        set(),
    ),
    (
        "replicas-mixed",
        make_ds(make_role("a", replicas=0), make_role("b", replicas=2)),
        {"replicas-all-or-nothing"},
    ),
    (
        "replicas-unset-defaults-to-one-beside-zero",
        make_ds(make_role("a", replicas=None), make_role("b", replicas=0)),
        {"replicas-all-or-nothing"},
    ),
    (
        "replicas-external-role-is-exempt",
        make_ds(
            make_role("a", replicas=0, scaling="External"),
            make_role("b", replicas=2),
            make_role("c", replicas=1, scaling="Static"),
        ),
        set(),
    ),
    # rule 3
    ("rollout-type-rolling-update", _rolling(2, 1, 0), set()),
    (
        "partition-zero",
        make_ds(
            make_role("a", rollout={"rollingUpdateConfiguration": {"partition": 0}}),
            make_role("b"),
        ),
        set(),
    ),
    (
        "partition-set",
        make_ds(
            make_role("a", rollout={"rollingUpdateConfiguration": {"partition": 2}}),
            make_role("b"),
        ),
        {"rollout-partition-unset"},
    ),
    # rule 4
    ("surge-1-unavailable-0", _rolling(2, 1, 0), set()),
    ("defaults-surge-0-unavailable-1", _rolling(2), set()),
    ("surge-100-percent", _rolling(2, "100%", 0), set()),
    ("surge-leading-zero-percent", _rolling(2, "007%", 0), set()),
    ("surge-negative", _rolling(2, -1, 1), {"max-surge-int-or-percent"}),
    ("surge-over-100-percent", _rolling(2, "101%", 1), {"max-surge-int-or-percent"}),
    ("surge-not-a-percentage", _rolling(2, "5", 1), {"max-surge-int-or-percent"}),
    ("surge-garbage", _rolling(2, "abc%", 1), {"max-surge-int-or-percent"}),
    ("unavailable-negative", _rolling(2, 1, -3), {"max-unavailable-int-or-percent"}),
    (
        "unavailable-over-100-percent",
        _rolling(2, 1, "1000%"),
        {"max-unavailable-int-or-percent"},
    ),
    (
        "both-invalid",
        _rolling(2, "x", "y"),
        {"max-surge-int-or-percent", "max-unavailable-int-or-percent"},
    ),
    (
        "invalid-unavailable-skips-the-pair-check",
        _rolling(2, 0, "0"),
        {"max-unavailable-int-or-percent"},
    ),
    ("both-zero", _rolling(2, 0, 0), {"surge-or-unavailable-nonzero"}),
    ("both-zero-percent", _rolling(2, "0%", "0%"), {"surge-or-unavailable-nonzero"}),
    (
        "unavailable-percent-rounds-down-to-zero",
        _rolling(5, 0, "10%"),
        {"surge-or-unavailable-nonzero"},
    ),
    ("unavailable-percent-rounds-down-to-one", _rolling(10, 0, "10%"), set()),
    ("surge-percent-rounds-up-to-one", _rolling(1, "1%", 0), set()),
    ("zero-replicas-are-exempt", _rolling(0, 0, 0), set()),
    ("zero-replicas-exempt-invalid-values", _rolling(0, -1, "abc"), set()),
    # rule 5
    ("placement-none-needs-no-topology", make_ds(placement={"type": "None"}), set()),
    ("placement-with-topology", make_ds(placement=PLACED), set()),
    (
        "placement-without-topology",
        make_ds(placement={"type": "ExclusiveTopology"}),
        {"placement-topology-required"},
    ),
    (
        "placement-empty-topology",
        make_ds(placement={"type": "ExclusiveSlice", "topology": ""}),
        {"placement-topology-required"},
    ),
    (
        "exclusive-annotation-on-role-metadata",
        make_ds(make_role("a", annotations={EXCLUSIVE: "rack"}), make_role("b"), placement=PLACED),
        {"placement-exclusive-annotation-conflict"},
    ),
    (
        "subgroup-annotation-on-leader-template",
        make_ds(
            make_role("a"),
            make_role("b", leader_annotations={SUBGROUP_EXCLUSIVE: "rack"}),
            placement=PLACED,
        ),
        {"placement-exclusive-annotation-conflict"},
    ),
    (
        "exclusive-annotation-on-worker-template",
        make_ds(
            make_role("a", worker_annotations={EXCLUSIVE: ""}), make_role("b"), placement=PLACED
        ),
        {"placement-exclusive-annotation-conflict"},
    ),
    (
        "exclusive-annotation-without-placement",
        make_ds(make_role("a", annotations={EXCLUSIVE: "rack"}), make_role("b")),
        set(),
    ),
    (
        "other-annotations-with-placement",
        make_ds(
            make_role("a", annotations={"x": "y"}, leader_annotations={"z": "w"}),
            make_role("b"),
            placement=PLACED,
        ),
        set(),
    ),
    # rule 6
    (
        "external-with-one-slice",
        make_ds(make_role("a", scaling="External"), make_role("b"), slices=1),
        set(),
    ),
    ("static-with-slices", make_ds(slices=4), set()),
    (
        "external-with-slices",
        make_ds(make_role("a", scaling="External"), make_role("b"), slices=2),
        {"external-single-slice"},
    ),
    # rule 7
    # <name>-<slice>-<8 hex>-prefill-prv: len(name) + 23 characters with one slice digit.
    ("names-fit-exactly", make_ds(make_role("prefill"), make_role("b"), name=_name(40)), set()),
    (
        "names-one-too-long",
        make_ds(make_role("prefill"), make_role("b"), name=_name(41)),
        {"generated-names-fit"},
    ),
    (
        "names-fit-with-ten-slices",
        make_ds(make_role("prefill"), make_role("b"), name=_name(40), slices=10),
        set(),
    ),
    (
        "names-too-long-with-eleven-slices",
        make_ds(make_role("prefill"), make_role("b"), name=_name(40), slices=11),
        {"generated-names-fit"},
    ),
    (
        "scaler-name-too-long",
        make_ds(make_role("a" * 63, scaling="External"), make_role("b"), name=_name(200)),
        {"generated-names-fit", "scaler-name-fits"},
    ),
]


@pytest.mark.parametrize(
    ("manifest", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_cel_rules_on_manifests(
    harness: cel_eval.CrdHarness, manifest: JsonObject, expected: set[str]
) -> None:
    admission = harness.admit(manifest)
    assert admission.schema_errors == []
    assert admission.failed_rule_ids == expected


def test_every_cel_rule_has_a_rejecting_manifest() -> None:
    rejected = set().union(*(expected for _, _, expected in CASES))
    # rollout-type-rolling-update cannot fail after the LWS enum: tested directly below.
    assert rejected | {rules.ROLLOUT_TYPE_ROLLING_UPDATE.id} == {r.id for r in rules.CEL_RULES}


def test_failures_report_the_field_path_and_message(harness: cel_eval.CrdHarness) -> None:
    failures = harness.admit(_rolling(5, 0, "10%")).cel_failures
    assert failures == [
        cel_eval.CelFailure(
            rule_id="surge-or-unavailable-nonzero",
            path="spec.roles[0].spec.rolloutStrategy.rollingUpdateConfiguration.maxUnavailable",
            message=rules.SURGE_OR_UNAVAILABLE_NONZERO.message,
        )
    ]


@pytest.mark.parametrize(
    ("rollout_type", "accepted"),
    [("RollingUpdate", True), ("", True), ("Recreate", False), ("OnDelete", False)],
)
def test_rollout_type_rule_directly(
    harness: cel_eval.CrdHarness, rollout_type: str, accepted: bool
) -> None:
    """The LWS schema's enum already rejects other types; the rule is the hook's twin."""
    role = make_role("a", rollout={"type": rollout_type})
    assert harness.evaluate(rules.ROLLOUT_TYPE_ROLLING_UPDATE, role) is accepted


def test_unknown_rollout_type_is_a_schema_error_first(harness: cel_eval.CrdHarness) -> None:
    admission = harness.admit(make_ds(make_role("a", rollout={"type": "Recreate"}), make_role("b")))
    assert admission.schema_errors and admission.cel_failures == []


def test_rules_read_undefaulted_objects_like_the_hook(harness: cel_eval.CrdHarness) -> None:
    """Optional fields are guarded with has(): absent reads as the default would."""
    role = make_role("a", replicas=None, rollout={"rollingUpdateConfiguration": {}})
    for rule in rules.CEL_RULES:
        if rule.path is rules.RuleNode.ROLE:
            assert harness.evaluate(rule, role), rule.id
    spec = make_ds(make_role("a", replicas=None), make_role("b", replicas=0))["spec"]
    assert harness.evaluate(rules.REPLICAS_ALL_OR_NOTHING, spec)
    assert harness.evaluate(rules.PLACEMENT_TOPOLOGY_REQUIRED, {})
    root = make_ds(name="x")
    del root["metadata"]["name"]
    assert harness.evaluate(rules.GENERATED_NAMES_FIT, root)


# --- structural rules (rule 1 and types) ----------------------------------------------------------


def _with_spec(change: Callable[[JsonObject], None]) -> JsonObject:
    manifest = make_ds()
    change(manifest["spec"])
    return manifest


STRUCTURAL: list[tuple[str, JsonObject]] = [
    ("one-role", make_ds(make_role("a"))),
    ("eleven-roles", make_ds(*(make_role(f"r{i}") for i in range(11)))),
    ("duplicate-role-names", make_ds(make_role("a"), make_role("a"))),
    ("role-name-uppercase", make_ds(make_role("Prefill"), make_role("b"))),
    ("role-name-too-long", make_ds(make_role("a" * 64), make_role("b"))),
    ("slices-zero", make_ds(slices=0)),
    ("slices-over-100", make_ds(slices=101)),
    ("placement-type-unknown", make_ds(placement={"type": "Rack", "topology": "k"})),
    ("scaling-mode-unknown", make_ds(make_role("a", scaling="Auto"), make_role("b"))),
    ("role-without-spec", _with_spec(lambda spec: spec["roles"][0].pop("spec"))),
    (
        "role-without-template",
        _with_spec(lambda spec: spec["roles"][0]["spec"].pop("leaderWorkerTemplate")),
    ),
    ("replicas-negative", make_ds(make_role("a", replicas=-1), make_role("b", replicas=-1))),
    ("no-roles", _with_spec(lambda spec: spec.pop("roles"))),
]


@pytest.mark.parametrize("manifest", [c[1] for c in STRUCTURAL], ids=[c[0] for c in STRUCTURAL])
def test_structural_rules_reject_before_cel(
    harness: cel_eval.CrdHarness, manifest: JsonObject
) -> None:
    admission = harness.admit(manifest)
    assert admission.schema_errors
    assert admission.cel_failures == []


# --- reference data ---------------------------------------------------------------------------


_SAMPLES = sorted(path.name for path in REFERENCE_DIR.glob("sample-*.yaml"))


@pytest.mark.parametrize("name", _SAMPLES)
def test_upstream_samples_are_accepted(harness: cel_eval.CrdHarness, name: str) -> None:
    manifest = yaml.safe_load(shared_path(f"reference/{name}").read_text())
    assert harness.pruned_paths(manifest) == []
    admission = harness.admit(manifest)
    assert admission.schema_errors == []
    assert admission.cel_failures == []


def test_samples_are_present() -> None:
    shared_path("reference")
    assert len(_SAMPLES) >= 2


_STORED = load_golden_or_empty("revision_vectors.json")

# Fragments of upstream webhook messages → our rule ids.
_UPSTREAM_MESSAGES = {
    "must not be 0 when `maxSurge` is 0": "surge-or-unavailable-nonzero",
    "partition is not supported": "rollout-partition-unset",
    "would exceed the DNS-1035 limit": "generated-names-fit",
    "exceeding 253 characters": "scaler-name-fits",
    "spec.slices > 1 is not supported": "external-single-slice",
    "topology is required": "placement-topology-required",
    "annotation must not be combined": "placement-exclusive-annotation-conflict",
}


@pytest.mark.parametrize("vector", _STORED, ids=[v["name"] for v in _STORED])
def test_stored_objects_match_upstream_webhook(
    harness: cel_eval.CrdHarness, vector: JsonObject
) -> None:
    admission = harness.admit(vector["stored"])
    assert admission.schema_errors == []
    error = vector["webhook_error"]
    if not error:
        assert admission.cel_failures == []
        return
    [rule_id] = [rule for fragment, rule in _UPSTREAM_MESSAGES.items() if fragment in error]
    path = error.split(":", 1)[0]
    assert (rule_id, path) in {(f.rule_id, f.path) for f in admission.cel_failures}


def test_stored_objects_include_rejected_ones() -> None:
    if not _STORED:
        pytest.skip("../shared/golden/revision_vectors.json is not available in this checkout")
    assert any(v["webhook_error"] for v in _STORED)


# --- cost -----------------------------------------------------------------------------------------

# The dominant terms of kube-apiserver's static CEL cost estimate (k8s.io/apiextensions-apiserver
# with cel-go's estimator): a string in an x-kubernetes-int-or-string field is unbounded, estimated
# at the 3 MiB request size; `matches` costs ceil(0.1 * (len + 1)) * ceil(0.25 * len(regex)) and
# `substring` ceil(0.1 * len); a rule under spec.roles[] counts once per possible role (maxItems).
_UNBOUNDED = 3 * 1024 * 1024 - 2
_PER_EXPRESSION_LIMIT = 10_000_000
_PER_CRD_LIMIT = 100_000_000


def _estimated_cost(rule: rules.CelRule) -> int:
    traversal = math.ceil(0.1 * (_UNBOUNDED + 1))
    cost = 0
    for chunk in rule.rule.split(".matches('")[1:]:
        regex = chunk.split("')", 1)[0]
        cost += traversal * math.ceil(0.25 * len(regex))
    cost += rule.rule.count(".substring(") * math.ceil(0.1 * _UNBOUNDED)
    return cost + 1000  # everything else: field reads, comparisons, loops over <= 10 roles


def test_estimated_cel_cost_is_within_the_api_server_limits() -> None:
    total = 0
    for rule in rules.CEL_RULES:
        cost = _estimated_cost(rule)
        assert cost < _PER_EXPRESSION_LIMIT / 2, rule.id
        total += cost * (api.MAX_ROLES if rule.path is rules.RuleNode.ROLE else 1)
    assert total < 0.75 * _PER_CRD_LIMIT


# --- the cel-python stand-ins -------------------------------------------------------------------


def test_matches_stand_in_has_re2_end_of_text() -> None:
    assert cel_eval._matches("5%", "^[0-9]+%$")
    assert not cel_eval._matches("5%\n", "^[0-9]+%$")


def test_substring_stand_in_checks_ranges() -> None:
    assert cel_eval._substring("10%", 0, 2) == "10"
    with pytest.raises(ValueError):
        cel_eval._substring("10%", 0, 4)


def test_harness_defaults_like_the_api_server(harness: cel_eval.CrdHarness) -> None:
    manifest = _rolling(None)
    worker = manifest["spec"]["roles"][0]["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    worker["spec"]["containers"][0]["ports"] = [{"containerPort": 8000}]
    defaulted = harness.default(manifest)
    role = defaulted["spec"]["roles"][0]
    assert role["spec"]["replicas"] == 1
    assert role["spec"]["startupPolicy"] == "LeaderCreated"
    assert role["spec"]["rolloutStrategy"]["type"] == "RollingUpdate"
    config = role["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]
    assert config == {"maxSurge": 0, "maxUnavailable": 1, "partition": 0}
    container = role["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    assert container["ports"] == [{"containerPort": 8000, "protocol": "TCP"}]
    assert defaulted["spec"]["slices"] == 1
    assert "slices" not in manifest["spec"]  # the input is untouched
