"""The benchmark's requests are the simulation's (bench/scenarios.py, issue 20).

`bench/scenarios.py` builds its requests with the fake Metacontroller of `tests/sim` and has none
of its own, so what the benchmark times is what the simulation checks its invariants on. Only the
small case runs here: the others take the same path with more objects and take longer to build.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from bench import scenarios
from hooks import api
from tests.sim import cluster
from tests.sim.metacontroller import (
    DS_CHILD_TYPES,
    LWS_TYPE,
    REVISION_TYPE,
    SCALER_TYPE,
    SERVICE_TYPE,
)
from tests.sim.store import FakeClock

JsonObject = dict[str, Any]


@pytest.fixture(scope="module")
def small() -> scenarios.Scenario:
    return scenarios.small()


@pytest.fixture(scope="module")
def request_(small: scenarios.Scenario) -> JsonObject:
    decoded: JsonObject = orjson.loads(small.body)
    return decoded


def test_the_bench_has_no_fake_cluster_of_its_own() -> None:
    # What bench/scenarios.py defines describes cases; nothing in it plays a controller.
    defined = {
        name
        for name, value in vars(scenarios).items()
        if isinstance(value, type) and value.__module__ == scenarios.__name__
    }
    assert defined == {"RoleShape", "SetShape", "Scenario", "_Passes"}


def test_the_small_request_is_what_the_simulated_metacontroller_sends(
    small: scenarios.Scenario,
) -> None:
    settled = scenarios.settled(scenarios.SMALL)
    assert isinstance(settled, cluster.Cluster)
    sent = settled.metacontroller.build_request(settled.ds(scenarios.SET_NAME))
    assert orjson.loads(small.body) == sent
    # Compact, every map's keys sorted: how Go writes an unstructured object.
    assert small.body == orjson.dumps(sent, option=orjson.OPT_SORT_KEYS)
    assert small.children == sum(len(group) for group in sent["children"].values())


def test_the_simulated_clock_ends_before_the_bench_calls_the_hook() -> None:
    assert FakeClock().iso() == scenarios.NOW
    assert scenarios.settled(scenarios.SMALL).clock.iso() <= scenarios.NOW


def test_the_small_request_has_every_child_kind_and_the_related_groups(
    request_: JsonObject,
) -> None:
    children = request_["children"]
    assert set(children) == set(DS_CHILD_TYPES)
    counts = {key: len(group) for key, group in children.items()}
    assert counts == {SCALER_TYPE: 1, LWS_TYPE: 2, SERVICE_TYPE: 2, REVISION_TYPE: 1}
    related = request_["related"]
    # The customize hook's one rule: the External roles' scalers by name, which are the set's own
    # children here.
    assert set(related) == {SCALER_TYPE}
    assert related[SCALER_TYPE] == children[SCALER_TYPE]


def test_every_observed_child_is_as_metacontroller_observes_it(request_: JsonObject) -> None:
    for group in request_["children"].values():
        for name, child in group.items():
            metadata = child["metadata"]
            assert metadata["name"] == name
            assert metadata["namespace"] == scenarios.NAMESPACE
            assert metadata["labels"][api.CONTROLLER_UID_LABEL] == scenarios.DS_UID
            owners = [(ref["uid"], ref["controller"]) for ref in metadata["ownerReferences"]]
            assert owners == [(scenarios.DS_UID, True)]
            text = metadata["annotations"][api.LAST_APPLIED_ANNOTATION]
            applied = orjson.loads(text)
            assert text == orjson.dumps(applied, option=orjson.OPT_SORT_KEYS).decode()
            assert "ownerReferences" not in applied["metadata"]
            assert "status" not in applied
            assert {"uid", "resourceVersion", "creationTimestamp"} <= set(metadata)
            assert "metacontroller" in {entry["manager"] for entry in metadata["managedFields"]}


def test_lws_services_and_scalers_carry_what_their_controllers_and_the_server_add(
    request_: JsonObject,
) -> None:
    children = request_["children"]
    for lws in children[LWS_TYPE].values():
        assert lws["metadata"]["generation"] == 1
        status = lws["status"]
        assert status["readyReplicas"] == status["replicas"] == lws["spec"]["replicas"]
        assert {condition["type"] for condition in status["conditions"]} == {
            "Available",
            "Progressing",
        }
        status_managers = {
            entry["manager"]
            for entry in lws["metadata"]["managedFields"]
            if entry.get("subresource") == "status"
        }
        assert status_managers == {"lws-controller"}
    for service in children[SERVICE_TYPE].values():
        assert "generation" not in service["metadata"]
        assert service["spec"]["clusterIPs"] == ["None"]
        assert service["spec"]["type"] == "ClusterIP"
        assert service["status"] == {"loadBalancer": {}}
    for scaler in children[SCALER_TYPE].values():
        assert scaler["status"]["replicas"] == scaler["spec"]["replicas"]
        assert scaler["status"]["selector"]


def test_the_parent_is_as_kubectl_and_metacontroller_left_it(request_: JsonObject) -> None:
    parent = request_["parent"]
    metadata = parent["metadata"]
    assert (metadata["uid"], metadata["generation"]) == (scenarios.DS_UID, 1)
    assert "kubectl.kubernetes.io/last-applied-configuration" in metadata["annotations"]
    entries = {(entry["manager"], entry.get("subresource")) for entry in metadata["managedFields"]}
    assert entries == {(scenarios.KUBECTL, None), ("metacontroller", "status")}
    assert parent["status"]["observedGeneration"] == 1
