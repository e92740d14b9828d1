"""Fields the API server dropped from an LWS (hooks.core.dropped), and what the set does about it:
Degraded=LWSFieldDropped, the LWS counted as not ready, no rollout moving onto it."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
import yaml

from hooks import api
from hooks.core import dropped, sync
from hooks.wire import answers, envelope
from tests import builders
from tests.shared import shared_path
from tests.sim import scenarios

JsonObject = dict[str, Any]
VOLUMES = [{"metadata": {"name": "cache"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]


def lws_lacking(*paths: tuple[str | int, ...]) -> JsonObject:
    """An observed LWS whose last-applied spec asked for volumes that its stored spec lacks
    (each path of `paths` removed from the stored spec)."""
    lws = builders.make_lws("prefill", revision="fe283763", replicas=2)
    applied = orjson.loads(lws["metadata"]["annotations"][api.LAST_APPLIED_ANNOTATION])
    applied["spec"]["leaderWorkerTemplate"]["volumeClaimTemplates"] = VOLUMES
    lws["metadata"]["annotations"][api.LAST_APPLIED_ANNOTATION] = orjson.dumps(applied).decode()
    lws["spec"] = copy.deepcopy(applied["spec"])
    for path in paths:
        target = lws["spec"]
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]
    return lws


VOLUME_PATH = ("leaderWorkerTemplate", "volumeClaimTemplates")


def test_a_field_the_stored_lws_lacks_is_found_by_its_path() -> None:
    (item,) = builders.parse_children(lws_lacking(VOLUME_PATH))
    (found,) = dropped.find([item], revision="fe283763")
    assert found == dropped.Dropped(
        name="llm-0-fe283763-prefill",
        role="prefill",
        fields=("spec.leaderWorkerTemplate.volumeClaimTemplates",),
    )


def test_fields_inside_list_items_are_compared_pairwise() -> None:
    lws = lws_lacking()
    applied = orjson.loads(lws["metadata"]["annotations"][api.LAST_APPLIED_ANNOTATION])
    container = applied["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    container["restartPolicyRules"] = [{"action": "Restart"}]
    lws["metadata"]["annotations"][api.LAST_APPLIED_ANNOTATION] = orjson.dumps(applied).decode()
    (item,) = builders.parse_children(lws)
    (found,) = dropped.find([item], revision="fe283763")
    assert found.fields == (
        "spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].restartPolicyRules",
    )


def test_later_slices_of_a_role_are_compared_by_the_keys_of_their_lws_template() -> None:
    first = lws_lacking()
    later = lws_lacking(VOLUME_PATH)
    deeper = lws_lacking(
        ("leaderWorkerTemplate", "workerTemplate", "spec", "containers", 0, "ports")
    )
    for lws, index in ((later, 1), (deeper, 2)):
        lws["metadata"]["name"] = f"llm-{index}-fe283763-prefill"
        lws["metadata"]["labels"][api.LABEL_SLICE] = str(index)
        applied = orjson.loads(lws["metadata"]["annotations"][api.LAST_APPLIED_ANNOTATION])
        applied["metadata"]["name"] = lws["metadata"]["name"]
        lws["metadata"]["annotations"][api.LAST_APPLIED_ANNOTATION] = orjson.dumps(applied).decode()
    items = builders.parse_children(deeper, later, first)
    (found,) = dropped.find(items, revision="fe283763")
    # Slice 0 is walked in full and has everything; slice 1 lacks a key of its template; the
    # pod template of slice 2 is the one slice 0 has, so it is not walked again.
    assert (found.name, found.fields) == (
        "llm-1-fe283763-prefill",
        ("spec.leaderWorkerTemplate.volumeClaimTemplates",),
    )


def test_nothing_is_found_when_the_stored_spec_has_every_field() -> None:
    items = builders.parse_children(lws_lacking())
    assert dropped.find(items, revision="fe283763") == ()


def test_server_defaults_and_nulls_are_no_finding() -> None:
    lws = lws_lacking()
    lws["spec"]["networkConfig"] = {"subdomainPolicy": "Shared"}
    applied = orjson.loads(lws["metadata"]["annotations"][api.LAST_APPLIED_ANNOTATION])
    applied["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"] = {
        "creationTimestamp": None
    }
    lws["metadata"]["annotations"][api.LAST_APPLIED_ANNOTATION] = orjson.dumps(applied).decode()
    lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"] = {}
    assert dropped.find(builders.parse_children(lws), revision="fe283763") == ()


def test_other_revisions_and_children_another_controller_made_are_not_compared() -> None:
    old = lws_lacking(VOLUME_PATH)
    unannotated = lws_lacking(VOLUME_PATH)
    del unannotated["metadata"]["annotations"][api.LAST_APPLIED_ANNOTATION]
    assert dropped.find(builders.parse_children(old), revision="1d6d3c1a") == ()
    assert dropped.find(builders.parse_children(unannotated), revision="fe283763") == ()


def test_the_message_names_the_lws_the_fields_and_the_release_that_has_them() -> None:
    (problem,) = dropped.reported(
        [dropped.Dropped("llm-0-x-prefill", "prefill", ("spec.a.volumeClaimTemplates",))]
    )
    assert problem.reason is api.Reason.LWS_FIELD_DROPPED
    assert problem.message.startswith(
        "LeaderWorkerSet 'llm-0-x-prefill' lacks spec.a.volumeClaimTemplates, which role"
        " 'prefill' asks for"
    )
    assert "(needs LWS v0.8.0)" in problem.message
    many = [f"spec.f{index}" for index in range(5)]
    (problem,) = dropped.reported([dropped.Dropped("x", "r", tuple(many))])
    assert "spec.f0, spec.f1, spec.f2 and 2 more" in problem.message
    assert "(needs an LWS CRD that has it)" in problem.message


def test_a_set_whose_target_lws_lost_volumes_is_degraded_and_not_available() -> None:
    roles = [builders.make_role("prefill", replicas=2), builders.make_role("decode", replicas=1)]
    request = scenarios.settled_request(builders.make_ds(roles=roles))
    group = request["children"][f"{api.LWS_KIND}.{api.LWS_API_VERSION}"]
    (name,) = [key for key in group if key.endswith("-prefill")]
    lws = group[name]
    applied = orjson.loads(lws["metadata"]["annotations"][api.LAST_APPLIED_ANNOTATION])
    applied["spec"]["leaderWorkerTemplate"]["volumeClaimTemplates"] = VOLUMES
    lws["metadata"]["annotations"][api.LAST_APPLIED_ANNOTATION] = orjson.dumps(applied).decode()
    result = sync.sync(envelope.parse_sync_request(request), now=builders.NOW)
    rendered = answers.render_answer(result.answer)
    conditions = {c["type"]: c for c in rendered["status"]["conditions"]}
    assert conditions["Degraded"]["reason"] == "LWSFieldDropped"
    assert "volumeClaimTemplates" in conditions["Degraded"]["message"]
    assert conditions["Available"]["status"] == "False"
    kept = {c["metadata"]["name"]: c for c in rendered["children"]}
    # The LWS stays, as last applied (volumes and all): nothing is deleted or rewritten.
    assert kept[lws["metadata"]["name"]]["spec"] == applied["spec"]


@pytest.mark.parametrize(("release", "present"), [("v0.7.0", False), ("v0.8.0", True)])
def test_the_release_table_matches_the_releases_crds(release: str, present: bool) -> None:
    """Fields the table says need v0.8.0 are absent from v0.7.0's CRD and present in v0.8.0's;
    the later ones are absent from both (and present in the reference CRD)."""

    def field_names(path: str) -> set[str]:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        crd = yaml.load(shared_path(path).read_text(), Loader=loader)
        names: set[str] = set()
        stack = [crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]]
        while stack:
            schema = stack.pop()
            for name, inner in (schema.get("properties") or {}).items():
                names.add(name)
                stack.append(inner)
            if isinstance(schema.get("items"), dict):
                stack.append(schema["items"])
        return names

    names = field_names(f"reference/lws-releases/leaderworkersets-crd-{release}.yaml")
    reference = field_names("reference/leaderworkersets-crd.yaml")
    for field, needed in dropped.RELEASES.items():
        assert field in reference
        assert (field in names) == (present and needed == "v0.8.0"), field
