"""Placement terms appended to pod templates (docs/rollout.md, Placement)."""

from __future__ import annotations

import copy

import pytest

from hooks import api
from hooks.core import placement

NAME = api.LABEL_NAME
SLICE = api.LABEL_SLICE
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def policy(kind: api.PlacementType, topology: str | None = "rack") -> api.PlacementPolicy:
    return api.PlacementPolicy(type=kind, topology=topology)


def template() -> api.JsonObject:
    return {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c"}]}}


def expressions(term: api.JsonObject) -> list[tuple[str, str, list[str]]]:
    return [
        (e["key"], e["operator"], e.get("values", []))
        for e in term["labelSelector"]["matchExpressions"]
    ]


def test_none_policy_returns_the_template_untouched() -> None:
    original = template()
    placed = placement.build_placed_template(
        original, policy=policy(api.PlacementType.NONE), set_name="llm", slice_index=0
    )
    assert placed is original


def test_missing_topology_injects_nothing() -> None:
    original = template()
    placed = placement.build_placed_template(
        original,
        policy=policy(api.PlacementType.EXCLUSIVE_SLICE, topology=None),
        set_name="llm",
        slice_index=1,
    )
    assert placed == original


def test_exclusive_slice_on_slice_1() -> None:
    placed = placement.build_placed_template(
        template(), policy=policy(api.PlacementType.EXCLUSIVE_SLICE), set_name="llm", slice_index=1
    )
    affinity = placed["spec"]["affinity"]
    (together,) = affinity["podAffinity"][REQUIRED]
    (apart,) = affinity["podAntiAffinity"][REQUIRED]
    assert together["topologyKey"] == apart["topologyKey"] == "rack"
    assert expressions(together) == [(NAME, "In", ["llm"]), (SLICE, "In", ["1"])]
    assert expressions(apart) == [(NAME, "In", ["llm"]), (SLICE, "NotIn", ["1"])]


def test_slice_0_anti_affinity_requires_the_slice_label() -> None:
    placed = placement.build_placed_template(
        template(), policy=policy(api.PlacementType.EXCLUSIVE_SLICE), set_name="llm", slice_index=0
    )
    (apart,) = placed["spec"]["affinity"]["podAntiAffinity"][REQUIRED]
    assert expressions(apart) == [
        (NAME, "In", ["llm"]),
        (SLICE, "Exists", []),
        (SLICE, "NotIn", ["0"]),
    ]


def test_exclusive_topology_also_repels_other_sets() -> None:
    placed = placement.build_placed_template(
        template(),
        policy=policy(api.PlacementType.EXCLUSIVE_TOPOLOGY),
        set_name="llm",
        slice_index=2,
    )
    terms = placed["spec"]["affinity"]["podAntiAffinity"][REQUIRED]
    assert len(terms) == 2
    assert expressions(terms[1]) == [
        (NAME, "Exists", []),
        (NAME, "NotIn", ["llm"]),
        (SLICE, "Exists", []),
    ]


def test_existing_affinity_is_kept_and_input_not_mutated() -> None:
    original = template()
    own_term = {"labelSelector": {"matchLabels": {"x": "y"}}, "topologyKey": "zone"}
    original["spec"]["affinity"] = {
        "podAntiAffinity": {
            REQUIRED: [own_term],
            "preferredDuringSchedulingIgnoredDuringExecution": [],
        },
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}
        },
    }
    before = copy.deepcopy(original)
    placed = placement.build_placed_template(
        original, policy=policy(api.PlacementType.EXCLUSIVE_SLICE), set_name="llm", slice_index=1
    )
    assert original == before
    anti = placed["spec"]["affinity"]["podAntiAffinity"]
    assert anti[REQUIRED][0] == own_term
    assert len(anti[REQUIRED]) == 2
    assert "preferredDuringSchedulingIgnoredDuringExecution" in anti
    assert placed["spec"]["affinity"]["nodeAffinity"] == before["spec"]["affinity"]["nodeAffinity"]
    assert placed["metadata"] == before["metadata"]


# --- the other way: a placed template as it was (issue 33 item 5) ---------------------------------


def _own_affinity() -> api.JsonObject:
    own = template()
    own["spec"]["affinity"] = {
        "podAntiAffinity": {REQUIRED: [{"topologyKey": "zone", "labelSelector": {}}]},
        "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []},
    }
    return own


@pytest.mark.parametrize(
    "kind", [api.PlacementType.EXCLUSIVE_SLICE, api.PlacementType.EXCLUSIVE_TOPOLOGY]
)
@pytest.mark.parametrize("slice_index", [0, 3])
@pytest.mark.parametrize("original", [template(), _own_affinity()], ids=["bare", "own-affinity"])
def test_without_placement_gives_back_the_template_as_it_was(
    kind: api.PlacementType, slice_index: int, original: api.JsonObject
) -> None:
    before = copy.deepcopy(original)
    placed = placement.build_placed_template(
        original,
        policy=policy(kind, topology="kubernetes.io/hostname"),
        set_name="llm",
        slice_index=slice_index,
    )
    frozen = copy.deepcopy(placed)
    assert placement.without_placement(placed, set_name="llm", slice_index=slice_index) == before
    assert placed == frozen  # its input untouched


@pytest.mark.parametrize(
    ("set_name", "slice_index"), [("other", 0), ("llm", 1)], ids=["another-set", "another-slice"]
)
def test_without_placement_keeps_terms_the_set_would_not_have_added_there(
    set_name: str, slice_index: int
) -> None:
    placed = placement.build_placed_template(
        template(), policy=policy(api.PlacementType.EXCLUSIVE_SLICE), set_name="llm", slice_index=0
    )
    assert placement.without_placement(placed, set_name=set_name, slice_index=slice_index) is placed


def test_without_placement_of_an_unplaced_template_is_the_template() -> None:
    for original in (template(), _own_affinity()):
        assert placement.without_placement(original, set_name="llm", slice_index=0) is original
