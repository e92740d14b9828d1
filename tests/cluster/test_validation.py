"""Admission by the real API server: the examples and upstream's objects are accepted, and every
validation rule rejects with its own message, field path and reason.

Each manifest is created with `dryRun=All`, so the server defaults, validates (schema and CEL)
and answers with what it would store, without storing it. The verdicts are compared with
cel-python's (`tests.cel_eval`), which the unit tests use everywhere else: this is where that
stand-in is proven to judge like the server.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from hooks import api
from hooks.api import rules
from hooks.core import admission, validation
from hooks.gocompat import revision
from tests import cel_eval
from tests.cel_cases import CASES, STRUCTURAL, sized
from tests.cluster import sets
from tests.lws_cases import REFUSED, rendered_lws, rolling
from tests.shared import (
    REPO_ROOT,
    by_name,
    golden_params,
    lws_refused,
    names_over_budget,
    reference_params,
)
from tools.sandbox import kube
from tools.sandbox.controlplane import ControlPlane
from tools.sandbox.lws import FakeLwsController

JsonObject = dict[str, Any]

EXAMPLES: Final = sorted((REPO_ROOT / "examples").glob("*.yaml"))
# The prefix the API server writes before a rule's message, by the rule's reason.
MESSAGE_PREFIX: Final = {
    rules.RuleReason.INVALID: "Invalid value: ",
    rules.RuleReason.FORBIDDEN: "Forbidden: ",
    rules.RuleReason.REQUIRED: "Required value: ",
}
NOT_CHECKED: Final = "some validation rules were not checked"
RULES_BY_MESSAGE: Final = {rule.message: rule for rule in rules.CEL_RULES}
# The messages a messageExpression writes, which name values (the name budget's lengths).
NAME_BUDGET_MESSAGE: Final = re.compile(
    re.escape(rules.GENERATED_NAMES_TEMPLATE)
    .replace(re.escape("{length}"), "[0-9]+")
    .replace(re.escape("{combined_limit}"), "[0-9]+")
)
# Served kinds that the examples use besides DisaggregatedSet: plural path of each.
SERVED: Final = {
    api.DS_KIND: kube.DISAGGREGATED_SETS,
    "HorizontalPodAutoscaler": kube.Resource("autoscaling", "v2", "horizontalpodautoscalers"),
}


def dry_run(client: kube.Client, manifest: JsonObject, namespace: str) -> JsonObject:
    """The object the server would store, or raises `kube.ApiError` with its Status."""
    obj: JsonObject = json.loads(json.dumps(manifest))
    obj["metadata"]["namespace"] = namespace
    resource = SERVED[obj["kind"]]
    return client.create(resource, obj, dry_run=True)


def rejected_rules(error: kube.ApiError) -> set[tuple[str, str, str]]:
    """(rule id, field path, message) of every CEL rule the server reports as broken."""
    found = set()
    for cause in error.status.get("details", {}).get("causes", []):
        for message, rule in RULES_BY_MESSAGE.items():
            if cause["message"] == MESSAGE_PREFIX[rule.reason] + message:
                assert cause["reason"] == rule.reason.value, cause
                found.add((rule.id, cause["field"], message))
        prefix = MESSAGE_PREFIX[rules.GENERATED_NAMES_FIT.reason]
        written = cause["message"].removeprefix(prefix)
        if NAME_BUDGET_MESSAGE.fullmatch(written):
            found.add((rules.GENERATED_NAMES_FIT.id, cause["field"], written))
    return found


@pytest.fixture(scope="module")
def harness() -> cel_eval.CrdHarness:
    return cel_eval.ds_harness()


@pytest.mark.parametrize(
    ("manifest", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_cel_rules_judge_like_cel_python(
    client: kube.Client,
    namespace: str,
    harness: cel_eval.CrdHarness,
    manifest: JsonObject,
    expected: set[str],
) -> None:
    """Same verdict as cel-python, and every rejection carries the rule's message, field path
    (with the role's index) and reason."""
    predicted = {(f.rule_id, f.path, f.message) for f in harness.admit(manifest).cel_failures}
    assert {rule_id for rule_id, _, _ in predicted} == expected
    if not expected:
        dry_run(client, manifest, namespace)
        return
    with pytest.raises(kube.ApiError) as raised:
        dry_run(client, manifest, namespace)
    assert raised.value.code == 422
    assert rejected_rules(raised.value) == predicted
    causes = raised.value.status["details"]["causes"]
    assert len(causes) == len(predicted), causes
    if rules.GENERATED_NAMES_FIT.id in expected:
        # The server's words for the name budget are the hook's, lengths included.
        stored = harness.default(manifest)
        spec = api.DisaggregatedSetSpec.model_validate(stored["spec"])
        [hook_first, *_] = [
            v.message
            for v in validation.check(name=stored["metadata"]["name"], spec=spec)
            if v.rule == rules.GENERATED_NAMES_FIT.id
        ]
        assert (rules.GENERATED_NAMES_FIT.id, "spec.roles", hook_first) in predicted


@pytest.mark.parametrize(
    ("manifest", "expected"), [c[1:] for c in STRUCTURAL], ids=[c[0] for c in STRUCTURAL]
)
def test_schema_violations_block_cel_like_cel_python(
    client: kube.Client,
    namespace: str,
    harness: cel_eval.CrdHarness,
    manifest: JsonObject,
    expected: set[str],
) -> None:
    """Rejected by the schema; the CEL rules still run unless cel-python predicts a blocking
    schema error, and then the server says so."""
    admission = harness.admit(manifest)
    assert admission.failed_rule_ids == expected
    with pytest.raises(kube.ApiError) as raised:
        dry_run(client, manifest, namespace)
    assert raised.value.code == 422
    predicted = {(f.rule_id, f.path, f.message) for f in admission.cel_failures}
    assert rejected_rules(raised.value) == predicted
    messages = [cause["message"] for cause in raised.value.status["details"]["causes"]]
    assert any(NOT_CHECKED in message for message in messages) is admission.cel_skipped


def _documents(path: Path) -> list[JsonObject]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_examples_are_accepted(client: kube.Client, namespace: str, path: Path) -> None:
    served = [doc for doc in _documents(path) if doc["kind"] in SERVED]
    assert api.DS_KIND in {doc["kind"] for doc in served}  # each example is complete on its own
    for document in served:
        stored = dry_run(client, document, namespace)
        assert stored["metadata"]["name"] == document["metadata"]["name"]


@pytest.mark.parametrize("path", reference_params("sample-*.yaml"))
def test_upstream_samples_are_accepted(client: kube.Client, namespace: str, path: Path) -> None:
    dry_run(client, yaml.safe_load(path.read_text()), namespace)


@pytest.mark.parametrize("vector", golden_params("revision_vectors.json", by_name))
def test_upstream_objects_are_stored_as_upstream_stored_them(
    client: kube.Client, namespace: str, vector: JsonObject
) -> None:
    """Objects stored by upstream's CRD: accepted unless upstream's webhook refused them (or the
    name budget of its later PR #991 does), stored byte for byte the same (defaults included),
    and so given upstream's revision."""
    manifest = {**vector["stored"], "metadata": {"name": vector["stored"]["metadata"]["name"]}}
    refused = {vector["webhook_error"].split(":", 1)[0]} if vector["webhook_error"] else set()
    if names_over_budget(vector["stored"]):
        refused.add("spec.roles")
    refused |= set(lws_refused(vector["stored"]))
    if refused:
        with pytest.raises(kube.ApiError) as raised:
            dry_run(client, manifest, namespace)
        assert {field for _, field, _ in rejected_rules(raised.value)} == refused
        return
    stored = dry_run(client, manifest, namespace)
    assert stored["spec"] == vector["stored"]["spec"]
    roles = [
        (role["name"], role["spec"]["leaderWorkerTemplate"]) for role in stored["spec"]["roles"]
    ]
    assert revision.compute_revision(roles) == vector["revision"]


def test_kubectl_apply_warns_of_an_external_roles_replicas(
    control_plane: ControlPlane, lws_controller: FakeLwsController, namespace: str
) -> None:
    """Regression (issue 35 item 6): `replicas: 5` on an External role ran 1 group without a word
    unless an optional component was listed; the kit's policy warns now, and the set says it."""
    manifest = sets.small_set(namespace, decode=5, external="decode")
    [sentence] = validation.warnings(
        name="llm", spec=api.DisaggregatedSetSpec.model_validate(manifest["spec"])
    )
    assert sentence.startswith('spec.roles[name="decode"].spec.replicas is 5 but the role has')
    policy = "disaggregatedset-external-role-replicas"
    warning = (
        f"Warning: Validation failed for ValidatingAdmissionPolicy '{policy}' with binding"
        f" '{policy}': {sentence}"
    )
    # The API server compiles a policy a moment after it exists: a dry run shows when it does.
    kube.wait_for(
        lambda: (
            control_plane.kubectl(
                "apply", "--dry-run=server", "-f", "-", stdin=json.dumps(manifest)
            ).stderr
        ),
        until=lambda stderr: warning in stderr,
        timeout=sets.WAIT_SECONDS,
        message="the kit's admission policy warning",
    )
    applied = control_plane.kubectl("apply", "-f", "-", stdin=json.dumps(manifest))
    assert warning in applied.stderr
    assert "disaggregatedset.disaggregatedset.x-k8s.io/llm created" in applied.stdout
    ds = sets.wait_available(control_plane.client, namespace, "llm")
    assert ds["status"]["warnings"] == [sentence]
    assert (
        sets.replicas_by_name(control_plane.client, namespace)[
            f"llm-0-{ds['status']['revision']}-decode"
        ]
        == 1
    )  # the scaler's first value, not 5


TROUBLESHOOTING: Final = REPO_ROOT / "docs" / "troubleshooting.md"


def _quoted(text: str) -> str:
    """The doc's text of `text` flattened: one line, as kubectl prints it."""
    return " ".join(text.split())


def test_kubectl_scale_of_a_set_answers_as_the_troubleshooting_doc_says(
    control_plane: ControlPlane, lws_controller: FakeLwsController, namespace: str
) -> None:
    """Regression (issue 35 item 8): `kubectl scale dset` answered NotFound with no hint; the
    doc quotes the answer and says what to do."""
    sets.apply_set(control_plane, sets.small_set(namespace))
    scaled = control_plane.kubectl(
        "scale", "dset", "llm", "-n", namespace, "--replicas=3", check=False
    )
    said = (
        'Error from server (NotFound): disaggregatedsets.disaggregatedset.x-k8s.io "llm" not found'
    )
    assert scaled.returncode == 1
    assert scaled.stderr.strip() == said
    doc = _quoted(TROUBLESHOOTING.read_text())
    assert _quoted(said.replace('"llm"', '"NAME"')) in doc
    assert "kubectl scale dsrs NAME-ROLE --replicas N" in doc


def test_a_blocking_schema_error_ends_with_the_line_the_troubleshooting_doc_quotes(
    control_plane: ControlPlane, namespace: str
) -> None:
    """Eleven roles and a wrong type: the API server adds its `<nil>` line, which the doc
    explains (issue 35 item 8)."""
    manifest = sets.small_set(namespace)
    manifest["spec"]["roles"] = [
        {**manifest["spec"]["roles"][0], "name": f"r{index}"} for index in range(11)
    ]
    manifest["spec"]["slices"] = "2"
    applied = control_plane.kubectl(
        "apply", "--dry-run=server", "-f", "-", stdin=json.dumps(manifest), check=False
    )
    line = (
        "<nil>: Invalid value: null: some validation rules were not checked because the"
        " object was invalid; correct the existing errors to complete validation"
    )
    assert applied.returncode == 1
    assert "spec.roles: Too many: 11: must have at most 10 items" in applied.stderr
    assert line in applied.stderr
    assert _quoted(line) in _quoted(TROUBLESHOOTING.read_text())


# --- what LeaderWorkerSet refuses, the set refuses (issue 33 item 6) ----------------------------


def test_issue33_item6_a_set_of_size_0_is_refused_at_kubectl_apply_with_the_field_named(
    control_plane: ControlPlane, namespace: str
) -> None:
    manifest = sized(0)
    manifest["metadata"]["namespace"] = namespace
    applied = control_plane.kubectl("apply", "-f", "-", stdin=json.dumps(manifest), check=False)
    assert applied.returncode != 0
    assert applied.stderr == (
        'The DisaggregatedSet "llm" is invalid: spec.roles[0].spec.leaderWorkerTemplate.size:'
        f" Invalid value: {rules.LWS_SIZE_AT_LEAST_ONE.message}\n"
    )
    assert control_plane.client.list(kube.DISAGGREGATED_SETS, namespace=namespace) == []


def _as_metacontroller_writes(lws: JsonObject, namespace: str) -> JsonObject:
    """`lws` with the namespace and Metacontroller's last-applied copy of itself."""
    written = copy.deepcopy(lws)
    written["metadata"]["namespace"] = namespace
    annotations = written["metadata"].setdefault("annotations", {})
    annotations[api.LAST_APPLIED_ANNOTATION] = json.dumps(lws, separators=(",", ":"))
    return written


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda lws: None, id="as-rendered"),
        *(pytest.param(case.values[0], id=case.id) for case in REFUSED),
        *(
            pytest.param(
                lambda lws, replicas=replicas: lws["spec"].update(
                    replicas=replicas, rolloutStrategy=rolling(0, "25%")
                ),
                id=f"quarter-unavailable-at-{replicas}",
            )
            for replicas in (0, 1, 3, 4)
        ),
    ],
)
def test_issue33_item6_the_lws_stand_in_refuses_what_the_hooks_predict_leaderworkerset_refuses(
    client: kube.Client, namespace: str, change: Callable[[JsonObject], None]
) -> None:
    """The control plane plays LeaderWorkerSet's webhook (`tools.sandbox.lws.ADMISSION`, with
    the API server's own checks of metadata): an LWS written as Metacontroller writes it is
    refused exactly when `hooks.core.admission` says LeaderWorkerSet would refuse it."""
    lws = rendered_lws()
    change(lws)
    predicted = admission.refusals(lws)
    written = _as_metacontroller_writes(lws, namespace)
    if not predicted:
        client.create(kube.LWS, written, dry_run=True)
        return
    with pytest.raises(kube.ApiError) as raised:
        client.create(kube.LWS, written, dry_run=True)
    assert raised.value.code == 422, raised.value


def test_issue33_item6_what_only_the_lws_can_be_judged_on_is_reported_at_once(
    control_plane: ControlPlane, namespace: str, lws_controller: FakeLwsController
) -> None:
    """An External role at 0 replicas may carry a maxSurge of 150% (the set's rule exempts it,
    as upstream's does), but its LWS, at its scaler's replicas, may not: `kubectl apply`
    accepts the set, whose first status already says Degraded=LWSRefused (not ChildNotCreated
    30 s later), and the stand-in for LeaderWorkerSet's webhook refuses the LWS as LWS would."""
    client = control_plane.client
    manifest = sets.small_set(namespace, external="decode")
    decode = manifest["spec"]["roles"][1]["spec"]
    decode["replicas"] = 0
    decode["rolloutStrategy"] = rolling("150%", 0)
    control_plane.kubectl("apply", "-f", "-", stdin=json.dumps(manifest))
    first = kube.wait_for(
        lambda: client.get(kube.DISAGGREGATED_SETS, "llm", namespace=namespace),
        until=lambda ds: ds.get("status", {}).get("observedGeneration") == 1,
        timeout=sets.WAIT_SECONDS,
        message="the set's first status",
    )
    degraded = sets.condition(first, "Degraded")
    assert degraded is not None and degraded["reason"] == "LWSRefused", first["status"]
    revision_ = first["status"]["revision"]
    assert f"'llm-0-{revision_}-decode'" in degraded["message"]
    assert "maxSurge: '150%'" in degraded["message"]
    prefill = kube.wait_for(
        lambda: sets.lws_by_name(client, namespace),
        until=lambda found: f"llm-0-{revision_}-prefill" in found,
        timeout=sets.WAIT_SECONDS,
        message="the admitted role's LWS",
    )
    assert f"llm-0-{revision_}-decode" not in prefill
    calls = control_plane.hook_calls("sync", f"{namespace}/llm")
    assert calls  # and the set kept asking for the refused LWS on every one of them
    assert all(call["writes"]["create"] >= 1 for call in calls[1:])
