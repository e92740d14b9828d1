"""Odd and hostile observed states never drop a live child nor answer non-200 forever.

Each request is the real steady state of a set, produced by the simulation (Metacontroller and
LWS readiness faked around the real hook), then mutated the way a user with write access to the
children, or an impossible API state, would mutate it. Identity is (apiVersion, kind, name):
how Metacontroller matches an answer's children to the observed ones before deleting the rest.
"""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from hooks import api
from hooks.core import sync
from hooks.wire import answers, envelope
from tests.builders import NOW, make_ds, make_role
from tests.sim import scenarios
from tests.sim.deletions import ChildId, child_id
from tests.sim.metacontroller import LWS_TYPE, SCALER_TYPE, SERVICE_TYPE

JsonObject = dict[str, Any]


def settled_request(*, slices: int = 1, external: bool = False) -> JsonObject:
    """The sync request of a ready prefill (2) / decode (1) set once it has settled."""
    roles = [make_role("prefill", replicas=2, external=external), make_role("decode", replicas=1)]
    return scenarios.settled_request(make_ds(roles=roles, slices=slices))


@pytest.fixture(scope="module")
def three_slices() -> JsonObject:
    return settled_request(slices=3)


@pytest.fixture(scope="module")
def with_scaler() -> JsonObject:
    return settled_request(external=True)


def answer(request: JsonObject) -> JsonObject:
    """The answer as it goes on the wire (serialisation included: it once failed there)."""
    result = sync.sync(envelope.parse_sync_request(copy.deepcopy(request)), now=NOW)
    decoded: JsonObject = orjson.loads(orjson.dumps(answers.render_answer(result.answer)))
    return decoded


def observed(request: JsonObject) -> dict[ChildId, JsonObject]:
    return {child_id(obj): obj for group in request["children"].values() for obj in group.values()}


def answered(response: JsonObject) -> dict[ChildId, JsonObject]:
    return {child_id(child): child for child in response["children"]}


def degraded(response: JsonObject) -> JsonObject:
    (condition,) = [c for c in response["status"]["conditions"] if c["type"] == "Degraded"]
    return condition


def assert_keeps_every_child(request: JsonObject, response: JsonObject) -> None:
    missing = set(observed(request)) - set(answered(response))
    assert not missing, f"the answer leaves out (so deletes) {sorted(missing)}"


# --- 1. identity comes from the object, never from its last-applied annotation --------------------

IDENTITY_EDITS = {
    "apiVersion-v2": lambda applied: applied.update(apiVersion="leaderworkerset.x-k8s.io/v2"),
    "apiVersion-missing": lambda applied: applied.pop("apiVersion"),
    "kind-other": lambda applied: applied.update(kind="Deployment"),
    "namespace-other": lambda applied: applied["metadata"].update(namespace="elsewhere"),
}


def edit_last_applied(request: JsonObject, group: str, edit: Any) -> JsonObject:
    request = copy.deepcopy(request)
    for obj in request["children"][group].values():
        annotations = obj["metadata"]["annotations"]
        applied = orjson.loads(annotations[api.LAST_APPLIED_ANNOTATION])
        edit(applied)
        annotations[api.LAST_APPLIED_ANNOTATION] = orjson.dumps(applied).decode()
    return request


@pytest.mark.parametrize("edit", sorted(IDENTITY_EDITS))
@pytest.mark.parametrize("group", [LWS_TYPE, SERVICE_TYPE, SCALER_TYPE])
@pytest.mark.parametrize("valid", [True, False], ids=["synced", "held"])
def test_children_keep_their_observed_identity_whatever_the_annotation_says(
    with_scaler: JsonObject, group: str, edit: str, valid: bool
) -> None:
    """Regression: a ready 2/2 LWS (and a Service, a scaler) whose annotation said apiVersion
    v2, or none, was answered under that apiVersion, and Metacontroller deleted the live v1."""
    request = edit_last_applied(with_scaler, group, IDENTITY_EDITS[edit])
    assert request["children"][group]
    if not valid:
        request["parent"]["spec"]["slices"] = 0
    response = answer(request)
    assert_keeps_every_child(request, response)
    assert set(answered(response)) == set(observed(request))
    for key, child in answered(response).items():
        assert child["apiVersion"] == key[0]
        assert "namespace" not in child["metadata"]


# --- 2. the parent's spec is parsed strictly ------------------------------------------------


@pytest.mark.parametrize("slices", [True, "2", " 2", 2.0, "3"], ids=repr)
def test_slices_of_a_wrong_json_type_hold_the_set(three_slices: JsonObject, slices: Any) -> None:
    """Regression: `slices: true` was read as 1 and deleted slices 1 and 2 of a ready set;
    `"2"` deleted slice 2."""
    request = copy.deepcopy(three_slices)
    request["parent"]["spec"]["slices"] = slices
    response = answer(request)
    assert_keeps_every_child(request, response)
    assert (degraded(response)["status"], degraded(response)["reason"]) == ("True", "InvalidSpec")
    assert "spec.slices" in degraded(response)["message"]


@pytest.mark.parametrize("replicas", [True, "2", 2.0, 1_000_001, -1], ids=repr)
def test_role_replicas_of_a_wrong_type_or_beyond_the_lws_maximum_hold_the_set(
    three_slices: JsonObject, replicas: Any
) -> None:
    request = copy.deepcopy(three_slices)
    request["parent"]["spec"]["roles"][1]["spec"]["replicas"] = replicas
    response = answer(request)
    assert_keeps_every_child(request, response)
    assert degraded(response)["reason"] == "InvalidSpec"
    assert "spec.roles[1].spec.replicas" in degraded(response)["message"]


# --- 3. states no retry can fix are held and reported, never a 500 forever ------------------


def _without_slice_label(request: JsonObject, *, annotation: bool) -> tuple[JsonObject, str]:
    """Slice 2's prefill Service without its slice label (also in its last-applied annotation,
    when `annotation`), and decode raised from 1 to 2 replicas in the spec."""
    request = copy.deepcopy(request)
    services = request["children"][SERVICE_TYPE]
    name = next(name for name in sorted(services) if name.startswith("llm-2-"))
    del services[name]["metadata"]["labels"][api.LABEL_SLICE]
    if annotation:
        del services[name]["metadata"]["annotations"][api.LAST_APPLIED_ANNOTATION]
    request["parent"]["spec"]["roles"][1]["spec"]["replicas"] = 2
    return request, name


def _decode_replicas(response: JsonObject) -> list[int]:
    decode = [c for c in response["children"] if c["metadata"]["name"].endswith("-decode")]
    return [c["spec"]["replicas"] for c in decode]


def test_a_service_whose_slice_label_was_removed_gets_it_back(three_slices: JsonObject) -> None:
    """`kubectl label svc ... slice-`: the last-applied annotation still has the label, so the
    answer returns it and Metacontroller puts it back."""
    request, name = _without_slice_label(three_slices, annotation=False)
    response = answer(request)
    assert_keeps_every_child(request, response)
    service = answered(response)[(api.SERVICE_API_VERSION, api.SERVICE_KIND, name)]
    assert service["metadata"]["labels"][api.LABEL_SLICE] == "2"
    assert _decode_replicas(response) == [2, 2, 2]
    assert degraded(response)["status"] == "False"


def test_a_service_claimed_by_two_slices_is_held_and_the_rest_reconciles(
    three_slices: JsonObject,
) -> None:
    """Regression: the Service of slice 2 without its slice label (and no annotation that says
    otherwise) counts as slice 0's; slice 2 wants it again, two children got one name and every
    sync answered 500."""
    request, name = _without_slice_label(three_slices, annotation=True)
    response = answer(request)
    assert_keeps_every_child(request, response)
    service = answered(response)[(api.SERVICE_API_VERSION, api.SERVICE_KIND, name)]
    assert api.LABEL_SLICE not in service["metadata"]["labels"]  # returned as it is
    assert _decode_replicas(response) == [2, 2, 2]
    condition = degraded(response)
    assert (condition["status"], condition["reason"]) == ("True", "ChildConflict")
    assert name in condition["message"]


def test_a_negative_generation_holds_the_set_with_a_writable_status(
    three_slices: JsonObject,
) -> None:
    """Regression: the conditions' observedGeneration (minimum 0) could not be built: 500."""
    request = copy.deepcopy(three_slices)
    request["parent"]["metadata"]["generation"] = -1
    response = answer(request)
    assert_keeps_every_child(request, response)
    condition = degraded(response)
    assert (condition["status"], condition["reason"]) == ("True", "InvalidMetadata")
    assert "metadata.generation" in condition["message"]
    for item in response["status"]["conditions"]:
        assert item.get("observedGeneration", 0) >= 0


@pytest.mark.parametrize("value", [2**63 - 1, 2**31, -1, 1_000_001])
def test_impossible_status_counts_are_ignored_and_reported(
    three_slices: JsonObject, value: int
) -> None:
    """Regression: prefill LWS reporting 2^63 - 1 replicas summed past 64 bits and the answer
    could not be serialised: 500 on every retry."""
    request = copy.deepcopy(three_slices)
    lws = request["children"][LWS_TYPE]
    broken = sorted(name for name in lws if name.endswith("-prefill"))
    for name in broken:
        lws[name]["status"]["replicas"] = value
    response = answer(request)
    assert set(answered(response)) == set(observed(request))
    prefill = response["status"]["roleStatuses"][0]
    assert prefill == {"name": "prefill", "replicas": 0, "readyReplicas": 0, "updatedReplicas": 0}
    condition = degraded(response)
    assert (condition["status"], condition["reason"]) == ("True", "InvalidChildStatus")
    for name in broken:
        assert name in condition["message"]
    available = [c for c in response["status"]["conditions"] if c["type"] == "Available"]
    assert available[0]["status"] == "False"


# --- 5. every valid request costs time linear in its size ------------------------------------


def _with_limit(request: JsonObject, value: str) -> JsonObject:
    request = copy.deepcopy(request)
    role = request["parent"]["spec"]["roles"][0]
    container = role["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    container["resources"] = {"limits": {"cpu": value}}
    return request


def test_a_quantity_longer_than_the_crd_allows_holds_the_set(three_slices: JsonObject) -> None:
    """Regression: a limit of "1" repeated 1,000,000 times matches the quantity pattern; one
    sync took 23 s (past Metacontroller's 10 s timeout) and 1.4 M digits killed the worker."""
    response = answer(_with_limit(three_slices, "1" * 1_000_000))
    assert_keeps_every_child(three_slices, response)
    condition = degraded(response)
    assert (condition["status"], condition["reason"]) == ("True", "InvalidSpec")
    assert "containers[0].resources.limits.cpu" in condition["message"]
    assert "1000000 characters" in condition["message"]


def test_a_quantity_at_the_crd_maximum_is_a_template_change(three_slices: JsonObject) -> None:
    response = answer(_with_limit(three_slices, "1" * api.QUANTITY_MAX_LENGTH))
    assert degraded(response)["status"] == "False"
    assert response["status"]["revision"] != three_slices["parent"]["status"]["revision"]
