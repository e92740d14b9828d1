"""Scaled mode never engages on upstream's planner vectors and sequences (issue 34, item 8):
a rollout whose targets never moved stays in parity mode (docs/rollout.md, "Scaling while a
rollout runs").

- sequences (`planner_sequences.json`): the set is rolled to the sequence's targets in the
  simulated cluster as far as the rollout's first pass (which writes the record of each role's
  target on its new LWS); then every state of the sequence, old and new groups all Ready, is
  handed to the real sync, whose summary never says `:scaled` for the slice;
- next steps (`planner_nextstep.json`): a slice whose record equals its target is scaled exactly
  when some role's new revision runs above its target, which only a lowered target produces
  (33 of the 300 vectors); every other vector is in parity mode.
"""

from __future__ import annotations

from typing import Any

import pytest

from hooks import api
from hooks.core import rescale
from tests.shared import by_name, golden_params, load_golden_or_empty
from tests.sim.cluster import Cluster
from tests.sim.metacontroller import LWS_TYPE
from tests.sim.scenarios import VectorCase, start_vector_rollout
from tests.sim.views import labels_of

JsonObject = dict[str, Any]


def _vector_case(case: JsonObject) -> VectorCase:
    return VectorCase(
        initial_old=tuple(case["initialOld"]),
        target=tuple(case["target"]),
        config=tuple((c["maxSurge"], c["maxUnavailable"]) for c in case["config"]),
    )


def _rolled(vector: VectorCase) -> Cluster:
    """A cluster settled at the case's initial old counts, then through the first pass of the
    rollout to its targets (image v2)."""
    cluster, settled = start_vector_rollout(vector)
    cluster.run(max_ticks=20, until=lambda c: len(c.passes) > settled)
    return cluster


def _at_state(request: JsonObject, roles: list[str], old: list[int], new: list[int]) -> None:
    """Every LWS of `request` at the state's replicas, all Ready."""
    target = request["parent"]["status"]["revision"]
    for lws in request["children"][LWS_TYPE].values():
        labels = labels_of(lws)
        index = roles.index(labels[api.LABEL_ROLE])
        is_new = labels[api.LABEL_REVISION] == target
        replicas = (new if is_new else old)[index]
        lws["spec"]["replicas"] = replicas
        lws["status"] = {
            **lws.get("status", {}),
            "replicas": replicas,
            "readyReplicas": replicas,
            "updatedReplicas": replicas,
        }


@pytest.mark.parametrize("case", golden_params("planner_sequences.json", by_name))
def test_no_state_of_a_golden_sequence_takes_a_scaled_pass(case: JsonObject) -> None:
    vector = _vector_case(case)
    cluster = _rolled(vector)
    if any(vector.initial_old):  # else there is nothing to roll: the set scales in place
        zeros = (0,) * len(vector.roles)
        assert cluster.slice_states()[0].vector(vector.roles) == (vector.initial_old, zeros)
    for number, state in enumerate(case["steps"]):
        request = cluster.metacontroller.build_request(cluster.ds())
        _at_state(request, vector.roles, state["past"], state["new"])
        summary, _ = cluster.metacontroller.call_sync(request)
        phases = summary["slices"]
        assert summary["revision"] == request["parent"]["status"]["revision"]
        assert not any(":scaled" in phase for phase in phases.values()), (number, state, phases)


def _nextstep_id(index: int, vector: Any) -> str:
    return f"{index:03d}-new{vector['currentNew']}-target{vector['target']}".replace(" ", "")


NEXT_STEPS = load_golden_or_empty("planner_nextstep.json")


@pytest.mark.parametrize("vector", golden_params("planner_nextstep.json", _nextstep_id))
def test_a_next_step_vector_is_scaled_only_when_new_runs_above_its_target(
    vector: JsonObject,
) -> None:
    roles = [
        (target, target, new)
        for target, new in zip(vector["target"], vector["currentNew"], strict=True)
    ]
    above = any(new > target for target, _, new in roles)
    assert rescale.is_scaled(roles) is above


def test_only_33_next_step_vectors_run_a_new_revision_above_its_target() -> None:
    if not NEXT_STEPS:
        pytest.skip("../shared/golden/planner_nextstep.json is not available in this checkout")
    above = [
        v
        for v in NEXT_STEPS
        if any(n > t for n, t in zip(v["currentNew"], v["target"], strict=True))
    ]
    assert (len(above), len(NEXT_STEPS)) == (33, 300)
