"""What `kubectl ds adopt` decides (hooks.kubectl.adopt): which children to label, which to
refuse, and the patch; the objects read as the plugin reads them (hooks.wire.envelope)."""

from __future__ import annotations

import copy
from typing import Any

import yaml
from hypothesis import given
from hypothesis import strategies as st

from hooks import api
from hooks.core import records
from hooks.gocompat import revision
from hooks.kubectl import adopt
from hooks.wire import envelope
from tests import builders
from tests.shared import REPO_ROOT

JsonObject = dict[str, Any]
SET_UID = builders.DS_UID
OTHER_UID = "0b0e0b0e-0000-4000-8000-000000000001"


def upstream_child(
    kind: str = api.LWS_KIND,
    name: str = "llm-0-fe283763-prefill",
    *,
    set_name: str = "llm",
    controller_uid: str | None = SET_UID,
    owner_kind: str = api.DS_KIND,
    label: str | None = None,
) -> JsonObject:
    """A child as upstream's controller leaves it: the API's labels and (unless
    `controller_uid` is None) a controller ownerReference, no `controller-uid` label."""
    labels = {api.LABEL_NAME: set_name, api.LABEL_ROLE: "prefill"}
    if label is not None:
        labels[api.CONTROLLER_UID_LABEL] = label
    metadata: JsonObject = {
        "name": name,
        "namespace": builders.NAMESPACE,
        "labels": labels,
        "resourceVersion": "812",
        "uid": f"uid-{name}",
    }
    if controller_uid is not None:
        metadata["ownerReferences"] = [
            {
                "apiVersion": api.API_VERSION,
                "kind": owner_kind,
                "name": set_name,
                "uid": controller_uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    return {
        "apiVersion": API_VERSIONS.get(kind, "v1"),
        "kind": kind,
        "metadata": metadata,
        "spec": {"replicas": 2},
    }


API_VERSIONS = {
    api.LWS_KIND: api.LWS_API_VERSION,
    api.SERVICE_KIND: api.SERVICE_API_VERSION,
    api.SCALER_KIND: api.API_VERSION,
    api.REVISION_KIND: api.API_VERSION,
}


def read(obj: JsonObject) -> records.ObservedObject:
    """A candidate as the plugin reads it."""
    child = envelope.parse_child(obj, where="test")
    assert child is not None
    return child


def candidates_of(objects: list[JsonObject]) -> list[records.ObservedObject]:
    return [child for obj in objects if (child := envelope.parse_child(obj, where="t"))]


PARENT = envelope.parse_parent(builders.make_ds())


def test_a_child_the_set_controls_is_labelled_with_a_patch_bound_to_its_resource_version() -> None:
    decision = adopt.decide(PARENT, read(upstream_child()), orphans=False)
    assert decision.verdict is adopt.Verdict.ADOPT
    assert decision.patch == {
        "metadata": {"resourceVersion": "812", "labels": {"controller-uid": SET_UID}}
    }
    assert decision.resource == "leaderworkersets.leaderworkerset.x-k8s.io"
    assert decision.line == (
        f"LeaderWorkerSet {builders.NAMESPACE}/llm-0-fe283763-prefill: adopted by llm"
        f" (controller-uid={SET_UID})"
    )


def test_a_child_labelled_for_another_uid_but_controlled_by_the_set_is_relabelled() -> None:
    decision = adopt.decide(PARENT, read(upstream_child(label=OTHER_UID)), orphans=False)
    assert decision.verdict is adopt.Verdict.ADOPT
    assert decision.patch is not None
    assert decision.patch["metadata"]["labels"] == {"controller-uid": SET_UID}


def test_a_child_already_labelled_is_left_as_it_is() -> None:
    decision = adopt.decide(PARENT, read(upstream_child(label=SET_UID)), orphans=False)
    assert (decision.verdict, decision.patch) == (adopt.Verdict.ADOPTED, None)


def test_an_object_controlled_by_another_owner_is_refused_and_named() -> None:
    child = upstream_child(controller_uid=OTHER_UID, owner_kind="LeaderWorkerSetCopier")
    decision = adopt.decide(PARENT, read(child), orphans=True)
    assert (decision.verdict, decision.patch) == (adopt.Verdict.REFUSED, None)
    assert f"controlled by another owner (uid {OTHER_UID})" in decision.line
    assert decision.line.endswith("left alone")


def test_an_orphan_is_adopted_only_when_asked() -> None:
    orphan = read(upstream_child(controller_uid=None))
    left = adopt.decide(PARENT, orphan, orphans=False)
    assert (left.verdict, left.patch) == (adopt.Verdict.ORPHAN, None)
    assert "--orphans adopts it" in left.line
    taken = adopt.decide(PARENT, orphan, orphans=True)
    assert taken.verdict is adopt.Verdict.ADOPT
    assert taken.patch is not None


def orphan_record(image: str | None = None) -> records.ObservedObject:
    """The set's record with no controller, as Metacontroller leaves one it released; with
    `image`, its stored template changed afterwards (so it no longer hashes to its label)."""
    spec = api.DisaggregatedSetSpec.model_validate(builders.make_ds()["spec"])
    rendered = builders.make_record(
        revision=revision.of_spec(spec), number=2, roles=spec.roles, legacy=image is not None
    )
    observed = builders.observe(rendered)
    del observed["metadata"]["ownerReferences"]
    observed["metadata"]["labels"].pop(api.CONTROLLER_UID_LABEL, None)
    observed["metadata"]["resourceVersion"] = "812"
    if image is not None:
        template = observed["roles"][0]["spec"]["leaderWorkerTemplate"]
        template["workerTemplate"]["spec"]["containers"][0]["image"] = image
    return read(observed)


def test_an_orphan_record_is_adopted_only_when_it_would_count() -> None:
    genuine = adopt.decide(PARENT, orphan_record(), orphans=True)
    assert genuine.verdict is adopt.Verdict.ADOPT
    forged = adopt.decide(PARENT, orphan_record(image="evil/miner:latest"), orphans=True)
    assert (forged.verdict, forged.patch) == (adopt.Verdict.REFUSED, None)
    assert "a history record that would not count (the roles it stores hash to" in forged.line


def test_plan_takes_only_child_kinds_labelled_for_a_given_set_in_its_namespace() -> None:
    elsewhere = upstream_child(name="llm-0-fe283763-decode")
    elsewhere["metadata"]["namespace"] = "other"
    candidates = [
        upstream_child(api.SERVICE_KIND, "llm-0-fe283763-prefill-prv"),
        upstream_child(),
        upstream_child(api.SCALER_KIND, "llm-decode"),
        upstream_child(api.REVISION_KIND, "llm-fe283763"),
        upstream_child(name="other-0-fe283763-prefill", set_name="other"),
        upstream_child("Pod", "llm-0-fe283763-prefill-0"),
        elsewhere,
    ]
    decisions = adopt.plan([PARENT], candidates_of(candidates), orphans=False)
    assert [(d.kind, d.name) for d in decisions] == [
        (api.REVISION_KIND, "llm-fe283763"),
        (api.SCALER_KIND, "llm-decode"),
        (api.LWS_KIND, "llm-0-fe283763-prefill"),
        (api.SERVICE_KIND, "llm-0-fe283763-prefill-prv"),
    ]


def test_the_summary_counts_each_verdict_of_one_set() -> None:
    decisions = adopt.plan(
        [PARENT],
        candidates_of(
            [
                upstream_child(),
                upstream_child(name="a", label=SET_UID),
                upstream_child(name="b", controller_uid=OTHER_UID),
                upstream_child(name="c", controller_uid=None),
            ]
        ),
        orphans=False,
    )
    assert adopt.summary(decisions, PARENT) == (
        f"{builders.NAMESPACE}/llm: 1 adopted, 1 already adopted, 2 left alone"
    )


def test_resources_are_the_child_resources_of_the_kits_composite_controller() -> None:
    kit_file = REPO_ROOT / "metacontroller" / "compositecontrollers.yaml"
    controllers = yaml.safe_load_all(kit_file.read_text())
    (controller,) = (c for c in controllers if c["spec"].get("childResources"))
    kit = {
        f"{child['resource']}.{child['apiVersion'].rpartition('/')[0]}".rstrip(".")
        for child in controller["spec"]["childResources"]
    }
    assert set(adopt.RESOURCES.values()) == kit


owners = st.sampled_from([None, SET_UID, OTHER_UID])
labels = st.sampled_from([None, SET_UID, OTHER_UID, ""])


@given(controller=owners, label=labels, orphans=st.booleans(), extra=st.booleans())
def test_a_patch_only_ever_labels_an_object_of_this_set_and_touches_nothing_else(
    controller: str | None, label: str | None, orphans: bool, extra: bool
) -> None:
    child = upstream_child(controller_uid=controller, label=label)
    if extra and controller is not None:
        # A second, non-controller owner changes nothing.
        child["metadata"]["ownerReferences"].append({"kind": "X", "name": "x", "uid": OTHER_UID})
    before = copy.deepcopy(child)
    observed = read(child)
    decision = adopt.decide(PARENT, observed, orphans=orphans)
    assert child == before
    assert (decision.verdict is adopt.Verdict.REFUSED) == (controller == OTHER_UID)
    if decision.patch is not None:
        assert controller == SET_UID or (controller is None and orphans)
        assert label != SET_UID
        assert decision.patch == adopt.patch_of(observed, uid=SET_UID)
        assert decision.patch["metadata"].keys() == {"resourceVersion", "labels"}
