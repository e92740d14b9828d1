"""Rendering new children once; re-emitting existing ones with only replicas changed."""

from __future__ import annotations

import copy

import pydantic
import pytest

from hooks import api
from hooks.core import children
from tests import builders

FIVE_LABELS = {
    "app": "llm-1-prefill",
    api.LABEL_NAME: "llm",
    api.LABEL_ROLE: "prefill",
    api.LABEL_SLICE: "1",
    api.LABEL_REVISION: "abcdef12",
}


def spec_role(**kwargs: object) -> api.Role:
    return api.Role.model_validate(builders.make_role("prefill", **kwargs))  # type: ignore[arg-type]


def render(role: api.Role, policy: api.PlacementPolicy | None = None) -> api.JsonObject:
    return children.render_lws(
        set_name="llm", role=role, slice_index=1, revision="abcdef12", replicas=3, policy=policy
    )


def test_new_lws_name_labels_and_replicas() -> None:
    lws = render(spec_role(labels={"team": "a", "app": "mine"}, annotations={"note": "x"}))
    assert lws["apiVersion"] == api.LWS_API_VERSION
    assert lws["kind"] == api.LWS_KIND
    assert lws["metadata"]["name"] == "llm-1-abcdef12-prefill"
    assert lws["metadata"]["labels"] == {"team": "a", **FIVE_LABELS}
    assert lws["metadata"]["annotations"] == {"note": "x"}
    assert lws["spec"]["replicas"] == 3
    assert "ownerReferences" not in lws["metadata"]


def test_new_lws_without_role_annotations_has_none() -> None:
    assert "annotations" not in render(spec_role())["metadata"]


def test_both_pod_templates_get_the_five_labels_over_their_own() -> None:
    lws = render(spec_role(leader=True))
    template = lws["spec"]["leaderWorkerTemplate"]
    for key in ("leaderTemplate", "workerTemplate"):
        assert template[key]["metadata"]["labels"] == {"role": "prefill", **FIVE_LABELS}


def test_empty_template_annotations_are_left_out_like_upstream() -> None:
    role = builders.make_role("prefill")
    role["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["annotations"] = {}
    lws = render(api.Role.model_validate(role))
    assert "annotations" not in lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]


def test_rest_of_the_role_spec_is_copied_as_stored() -> None:
    role = spec_role(max_surge=2, max_unavailable=1)
    lws = render(role)
    for key in ("startupPolicy", "rolloutStrategy"):
        assert lws["spec"][key] == role.spec[key]
    worker = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    assert worker["spec"] == role.spec["leaderWorkerTemplate"]["workerTemplate"]["spec"]


def test_placement_reaches_both_templates() -> None:
    policy = api.PlacementPolicy(type=api.PlacementType.EXCLUSIVE_SLICE, topology="rack")
    lws = render(spec_role(leader=True), policy)
    template = lws["spec"]["leaderWorkerTemplate"]
    for key in ("leaderTemplate", "workerTemplate"):
        assert "podAffinity" in template[key]["spec"]["affinity"]


def test_rendering_does_not_mutate_the_role() -> None:
    role = spec_role(leader=True)
    before = copy.deepcopy(role.spec)
    render(role, api.PlacementPolicy(type=api.PlacementType.EXCLUSIVE_TOPOLOGY, topology="rack"))
    assert role.spec == before


def test_role_is_frozen() -> None:
    with pytest.raises(pydantic.ValidationError):
        spec_role().name = "other"  # type: ignore[misc]


def test_service_is_headless_without_ports() -> None:
    labels = {"k": "v"}
    service = children.render_service(name="x-prv", labels=labels)
    assert service["spec"] == {"clusterIP": "None", "selector": labels}
    assert service["metadata"] == {"name": "x-prv", "labels": labels}


def test_scaler_has_name_labels_and_seed() -> None:
    scaler = children.render_scaler(set_name="llm", role="decode", replicas=4)
    assert scaler["metadata"] == {
        "name": "llm-decode",
        "labels": {api.LABEL_NAME: "llm", api.LABEL_ROLE: "decode"},
    }
    assert scaler["spec"] == {"replicas": 4}


def test_reemit_lws_changes_only_replicas_and_the_annotation() -> None:
    (observed,) = builders.parse_children(builders.make_lws("decode", revision="r", replicas=2))
    before = copy.deepcopy(observed.applied)
    result = children.reemit_lws(
        observed, replicas=5, annotations={api.ANNOTATION_INITIAL_REPLICAS: "2"}
    )
    assert observed.applied == before
    assert result["spec"] == {**before["spec"], "replicas": 5}
    assert result["metadata"]["annotations"] == {api.ANNOTATION_INITIAL_REPLICAS: "2"}
    assert result["metadata"]["labels"] == before["metadata"]["labels"]
    assert {k: v for k, v in result.items() if k not in ("spec", "metadata")} == {
        k: v for k, v in before.items() if k not in ("spec", "metadata")
    }


def test_reemit_lws_keeps_an_earlier_annotation() -> None:
    (observed,) = builders.parse_children(
        builders.make_lws("decode", revision="r", replicas=2, initial=7)
    )
    result = children.reemit_lws(observed, replicas=1)
    assert result["metadata"]["annotations"] == {api.ANNOTATION_INITIAL_REPLICAS: "7"}


def test_reemit_scaler_echoes_the_observed_replicas_not_the_seed() -> None:
    scaler = children.render_scaler(set_name="llm", role="decode", replicas=1)
    (observed,) = builders.parse_children(builders.observe(scaler, spec_overrides={"replicas": 6}))
    assert children.reemit_scaler(observed)["spec"] == {"replicas": 6}
