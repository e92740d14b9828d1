"""Sets installed with components/no-services, through the real sync in the simulated cluster.

The fake Metacontroller declares the kit's child types less Services, so it observes none and
refuses (`SimulationError`) an answer that holds one, as a child of an undeclared type. Each run
is played twice with the same seed, with and without Services: apart from Services, both must
create, scale and delete the same children in the same order and end with the same status.
"""

from __future__ import annotations

from typing import Any

import pytest

from hooks import api
from tests.builders import make_ds, make_role
from tests.sim.cluster import Cluster
from tests.sim.metacontroller import DS_CHILD_TYPES, SERVICE_TYPE, PassRecord
from tests.sim.scenarios import set_image, set_replicas

JsonObject = dict[str, Any]

WITHOUT_SERVICES = tuple(kind for kind in DS_CHILD_TYPES if kind != SERVICE_TYPE)
# Status fields that carry the time of the pass that wrote them: a run with Services makes
# extra passes (each Service it creates wakes the set), so its clock may read later.
TIMED = ("lastTransitionTime", "lastProgressTime", "since")


def _played(child_types: tuple[str, ...], *, seed: int, delay: int) -> Cluster:
    """A two-slice set created, rolled to a new image, then scaled, until quiet each time."""
    cluster = Cluster(seed=seed, readiness_delay=delay, child_types=child_types)
    roles = [
        make_role("prefill", replicas=3, image="example/server:v1", max_surge=1),
        make_role("decode", replicas=2, image="example/server:v1", max_surge=1),
    ]
    cluster.create(make_ds(roles=roles, slices=2))
    cluster.run(max_ticks=400)
    cluster.edit("llm", lambda spec: set_image(spec, "example/server:v2"))
    cluster.run(max_ticks=400)
    cluster.edit("llm", lambda spec: set_replicas(spec, {"prefill": 4, "decode": 1}))
    cluster.run(max_ticks=400)
    return cluster


def _changes(passes: list[PassRecord]) -> list[tuple[str, Any, Any]]:
    """What the passes wrote, Services left out: each create, update and delete in order, with
    the object's body as it was then written (or, for a delete, last seen)."""
    found = []
    for record in passes:
        for verb in ("created", "updated", "deleted"):
            for key in getattr(record, verb):
                if key[0] != SERVICE_TYPE:
                    obj = record.after.get(key) or record.before[key]
                    found.append((verb, key, _own(obj)))
    return found


def _own(obj: JsonObject) -> JsonObject:
    """What the hook decides of an object: its name, labels, annotations and body (a spec, or a
    ControllerRevision's data and number), not what the API server assigns."""
    metadata = obj["metadata"]
    return {
        "name": metadata["name"],
        "labels": metadata.get("labels"),
        "annotations": metadata.get("annotations"),
        **{field: obj[field] for field in ("spec", "data", "revision") if field in obj},
    }


def _untimed(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _untimed(item) for key, item in value.items() if key not in TIMED}
    if isinstance(value, list):
        return [_untimed(item) for item in value]
    return value


@pytest.mark.parametrize(("seed", "delay"), [(0, 0), (1, 2), (2, 5)])
def test_without_services_no_service_is_made_and_every_other_child_moves_alike(
    seed: int, delay: int
) -> None:
    plain = _played(DS_CHILD_TYPES, seed=seed, delay=delay)
    lean = _played(WITHOUT_SERVICES, seed=seed, delay=delay)

    assert plain.service_names(), "the run with Services made none: nothing was compared"
    assert lean.service_names() == []
    for record in lean.passes:
        assert all(child["kind"] != api.SERVICE_KIND for child in record.response["children"])
        assert record.summary["children"].get(api.SERVICE_KIND) is None
    assert _changes(lean.passes) == _changes(plain.passes)
    for type_key in WITHOUT_SERVICES:
        assert [_own(obj) for obj in lean.objects(type_key)] == [
            _own(obj) for obj in plain.objects(type_key)
        ], type_key
    assert _untimed(lean.ds()["status"]) == _untimed(plain.ds()["status"])
    assert lean.is_true("Available")
