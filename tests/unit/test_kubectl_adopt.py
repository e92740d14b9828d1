"""What `kubectl ds adopt` decides (hooks.kubectl.adopt): which children to label, which to
refuse, and the patch; and what it asks of an orphan (hooks.kubectl.adoptable): exactly what the
set would have made at its name. The objects are read as the plugin reads them
(hooks.wire.envelope)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from hooks import api
from hooks.api import naming
from hooks.core import children, records
from hooks.gocompat import gojson, revision
from hooks.kubectl import adopt, adoptable
from hooks.wire import objects, parents
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
    child = objects.parse_child(obj, where="test")
    assert child is not None
    return child


def candidates_of(found: list[JsonObject]) -> list[records.ObservedObject]:
    return [child for obj in found if (child := objects.parse_child(obj, where="t"))]


PARENT = parents.parse_parent(builders.make_ds())


def decide(
    candidate: records.ObservedObject,
    *,
    orphans: bool,
    parent: records.Parent = PARENT,
    others: Sequence[records.ObservedObject] = (),
) -> adopt.Decision:
    """`adopt.decide` as `kubectl ds adopt` runs it, `others` the other candidates listed."""
    known = adopt.known_of([parent], [candidate, *others])[adopt.key_of(parent)]
    return adopt.decide(parent, candidate, orphans=orphans, known=known)


SPEC = PARENT.spec
assert SPEC is not None
REVISION = revision.of_spec(SPEC)
IMAGE = "vllm/vllm-openai:v0.11.0"
EVIL = "evil/miner:latest"
OLD_SET_UID = "0b0e0b0e-0000-4000-8000-0000000000aa"


def rendered_lws(
    role: str = "prefill",
    *,
    slice_index: int = 0,
    policy: api.PlacementPolicy | None = None,
    spec: api.DisaggregatedSetSpec = SPEC,
) -> JsonObject:
    """The LWS the set renders for `role` of `spec`'s revision in slice `slice_index` (a copy:
    the rendered object shares the spec's templates)."""
    (chosen,) = [each for each in spec.roles if each.name == role]
    rendered = children.render_lws(
        set_name="llm",
        role=chosen,
        slice_index=slice_index,
        revision=revision.of_spec(spec),
        replicas=2,
        policy=policy,
    )
    return copy.deepcopy(rendered)


def released(desired: JsonObject) -> JsonObject:
    """A child the hooks made, as it is once its set lost it (deleted with `--cascade=orphan`
    and created again: no ownerReference, the old set's controller-uid label, Metacontroller's
    last-applied annotation as it was)."""
    observed = builders.observe(desired, owner_uid=OLD_SET_UID)
    del observed["metadata"]["ownerReferences"]
    observed["metadata"]["resourceVersion"] = "812"
    return observed


def without_nulls(value: Any) -> Any:
    """What the API server stores of a value: a null field of an object is dropped."""
    if isinstance(value, dict):
        return {key: without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [without_nulls(item) for item in value]
    return value


def upstream_made(desired: JsonObject) -> JsonObject:
    """The same LWS as upstream's controller creates it and a cluster with LWS installed stores
    it, then orphaned: the template through upstream's Go types (`resources: {}` in every
    container, nulls dropped by the API server), LWS's defaulting webhook's fields, no
    last-applied annotation, no controller-uid label, no owner."""
    spec = copy.deepcopy(desired["spec"])
    encoded = gojson.committed_table().encode(spec["leaderWorkerTemplate"])
    spec["leaderWorkerTemplate"] = without_nulls(json.loads(encoded))
    strategy = spec.setdefault("rolloutStrategy", {"type": "RollingUpdate"})
    strategy.setdefault(
        "rollingUpdateConfiguration", {"partition": 0, "maxUnavailable": 1, "maxSurge": 0}
    )
    spec["networkConfig"] = {"subdomainPolicy": "Shared"}
    metadata = copy.deepcopy(desired["metadata"])
    metadata.update(namespace=builders.NAMESPACE, resourceVersion="90", uid="uid-upstream")
    return {**desired, "metadata": metadata, "spec": spec}


def test_a_child_the_set_controls_is_labelled_with_a_patch_bound_to_its_resource_version() -> None:
    decision = decide(read(upstream_child()), orphans=False)
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
    decision = decide(read(upstream_child(label=OTHER_UID)), orphans=False)
    assert decision.verdict is adopt.Verdict.ADOPT
    assert decision.patch is not None
    assert decision.patch["metadata"]["labels"] == {"controller-uid": SET_UID}


def test_a_child_already_labelled_is_left_as_it_is() -> None:
    decision = decide(read(upstream_child(label=SET_UID)), orphans=False)
    assert (decision.verdict, decision.patch) == (adopt.Verdict.ADOPTED, None)


def test_an_object_controlled_by_another_owner_is_refused_and_named() -> None:
    child = upstream_child(controller_uid=OTHER_UID, owner_kind="LeaderWorkerSetCopier")
    decision = decide(read(child), orphans=True)
    assert (decision.verdict, decision.patch) == (adopt.Verdict.REFUSED, None)
    assert f"controlled by another owner (uid {OTHER_UID})" in decision.line
    assert decision.line.endswith("left alone")


def test_an_orphan_is_adopted_only_when_asked() -> None:
    orphan = read(released(rendered_lws()))
    left = decide(orphan, orphans=False)
    assert (left.verdict, left.patch) == (adopt.Verdict.ORPHAN, None)
    assert "--orphans adopts it into llm if it is exactly what the set would have made" in left.line
    taken = decide(orphan, orphans=True)
    assert taken.verdict is adopt.Verdict.ADOPT
    assert taken.patch is not None


def test_an_orphan_says_what_most_likely_orphaned_it() -> None:
    """Regression (issue 35 item 8): children a `kubectl delete --cascade=orphan` left behind
    read "someone else made it"; they keep the deleted set's controller-uid label."""
    cascaded = decide(read(upstream_child(controller_uid=None, label=OTHER_UID)), orphans=False)
    assert cascaded.verdict is adopt.Verdict.ORPHAN
    assert (
        f"its controller-uid label names {OTHER_UID}, an earlier set of this name, deleted with"
        " `kubectl delete --cascade=orphan`, which leaves its children" in cascaded.line
    )
    released = decide(read(upstream_child(controller_uid=None)), orphans=False)
    assert "Metacontroller released it: it synced the set before the adoption" in released.line
    assert "--cascade=orphan" not in released.line


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
    genuine = decide(orphan_record(), orphans=True)
    assert genuine.verdict is adopt.Verdict.ADOPT
    forged = decide(orphan_record(image="evil/miner:latest"), orphans=True)
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
    listed = candidates_of(candidates)
    known = adopt.known_of([PARENT], listed)
    decisions = adopt.plan([PARENT], listed, orphans=False, known=known)
    assert [(d.kind, d.name) for d in decisions] == [
        (api.REVISION_KIND, "llm-fe283763"),
        (api.SCALER_KIND, "llm-decode"),
        (api.LWS_KIND, "llm-0-fe283763-prefill"),
        (api.SERVICE_KIND, "llm-0-fe283763-prefill-prv"),
    ]


def test_the_summary_counts_each_verdict_of_one_set() -> None:
    listed = candidates_of(
        [
            upstream_child(),
            upstream_child(name="a", label=SET_UID),
            upstream_child(name="b", controller_uid=OTHER_UID),
            upstream_child(name="c", controller_uid=None),
        ]
    )
    known = adopt.known_of([PARENT], listed)
    decisions = adopt.plan([PARENT], listed, orphans=False, known=known)
    assert adopt.summary(decisions, PARENT) == (
        f"{builders.NAMESPACE}/llm: 1 adopted, 1 already adopted, 2 left alone"
    )


@pytest.mark.parametrize(
    ("api_version", "kind", "name"),
    [
        pytest.param("v1", "ConfigMap", "llm", id="another-kind"),
        pytest.param("example.com/v1", api.DS_KIND, "llm", id="another-group"),
        pytest.param(api.API_VERSION, api.DS_KIND, "other", id="another-set"),
    ],
)
def test_issue33_a_controller_reference_with_the_sets_uid_to_another_object_is_refused(
    api_version: str, kind: str, name: str
) -> None:
    """The kit's admission policy guards controller references to a DisaggregatedSet by its name
    (metacontroller/adoption-policy.yaml); one to another kind, group or set that carries the
    set's uid is no reference to the set, and adopt does not trust it."""
    child = upstream_child()
    child["metadata"]["ownerReferences"][0].update(apiVersion=api_version, kind=kind, name=name)
    reason = refused_because(decide(read(child), orphans=True))
    group = api_version.rpartition("/")[0]
    shown = f"{kind}.{group}/{name}" if group else f"{kind}/{name}"
    assert reason == (
        f"carries llm's uid in a controller reference to {shown}, not to the DisaggregatedSet"
        " llm: left alone"
    )


def test_adoption_is_the_verb_the_kit_grants_admins_and_its_policy_asks_for() -> None:
    """`adopt.VERB` is the verb of the kit's ClusterRole (aggregated to admin) and of both checks
    of its admission policy."""
    roles = yaml.safe_load_all((REPO_ROOT / "metacontroller" / "user-roles.yaml").read_text())
    (role,) = (r for r in roles if r["metadata"]["name"] == "disaggregatedset-adopt")
    assert {"apiGroups": [api.GROUP], "resources": [api.DS_PLURAL], "verbs": [adopt.VERB]} in (
        role["rules"]
    )
    policy_file = REPO_ROOT / "metacontroller" / "adoption-policy.yaml"
    (policy, *_) = yaml.safe_load_all(policy_file.read_text())
    checks = [v["expression"] for v in policy["spec"]["validations"]]
    assert len(checks) == 2
    assert all(f".check('{adopt.VERB}').allowed()" in check for check in checks)


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
    decision = decide(observed, orphans=orphans)
    assert child == before
    # upstream_child is no LWS the set would make (no revision label, no template): an orphan
    # of it is refused.
    planted = controller is None and orphans and label != SET_UID
    assert (decision.verdict is adopt.Verdict.REFUSED) == (controller == OTHER_UID or planted)
    if decision.patch is not None:
        assert controller == SET_UID
        assert label != SET_UID
        assert decision.patch == adopt.patch_of(observed, uid=SET_UID)
        assert decision.patch["metadata"].keys() == {"resourceVersion", "labels"}


# --- orphans: exactly what the set would have made at their name --------------------------------


def refused_because(decision: adopt.Decision) -> str:
    """The reason of a refusal, which must leave the object alone on one line."""
    assert (decision.verdict, decision.patch) == (adopt.Verdict.REFUSED, None)
    assert "\n" not in decision.line and decision.line.endswith(": left alone")
    return decision.reason


def test_issue33_item1_a_planted_lws_with_a_foreign_image_is_refused_naming_the_image() -> None:
    """Regression: an LWS created at the name the set would ask for, with the set's labels and
    another image, was adopted (exit 0) and then kept and reported Available."""
    planted = rendered_lws()
    container = planted["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    container["image"] = EVIL
    planted["metadata"].update(namespace=builders.NAMESPACE, resourceVersion="5")
    decision = decide(read(planted), orphans=True)
    assert refused_because(decision) == (
        "not what llm would have made at its name: spec.leaderWorkerTemplate.workerTemplate.spec"
        f'.containers[0].image is "{EVIL}", not "{IMAGE}" (as llm renders it from the spec):'
        " left alone"
    )


@pytest.mark.parametrize(
    "made",
    [
        pytest.param(lambda desired: released(desired), id="by-the-hooks"),
        pytest.param(upstream_made, id="by-upstream"),
    ],
)
def test_an_lws_the_set_lost_is_adopted_whoever_made_it(
    made: Callable[[JsonObject], JsonObject],
) -> None:
    """The hooks' (released by Metacontroller, scaled and annotated since) and upstream's (its
    Go client's encoding, LWS's webhook defaults), with role metadata, a leader template and
    placement, in slice 1."""
    roles = [
        builders.make_role(
            "prefill",
            replicas=3,
            leader=True,
            labels={"team": "serving"},
            annotations={"note": "kept"},
            template_annotations={"scrape": "true"},
        ),
        builders.make_role("decode"),
    ]
    placement = {"type": "ExclusiveTopology", "topology": "example.com/rack"}
    parent = parents.parse_parent(builders.make_ds(roles=roles, slices=2, placement=placement))
    assert parent.spec is not None
    desired = rendered_lws(slice_index=1, policy=parent.spec.placement_policy, spec=parent.spec)
    lost = made(desired)
    lost["spec"]["replicas"] = 7
    lost["metadata"].setdefault("annotations", {})[api.ANNOTATION_INITIAL_REPLICAS] = "3"
    decision = decide(read(lost), orphans=True, parent=parent)
    assert decision.verdict is adopt.Verdict.ADOPT, decision.line
    assert decision.patch == adopt.patch_of(read(lost), uid=SET_UID)


def test_an_lws_placed_by_an_earlier_placement_policy_is_adopted_but_no_other_term() -> None:
    """A placement change reaches an LWS only when it is created: one the set made before the
    spec dropped its policy still carries the policy's terms."""
    policy = api.PlacementPolicy(type=api.PlacementType.EXCLUSIVE_SLICE, topology="zone")
    placed = released(rendered_lws(policy=policy))
    assert decide(read(placed), orphans=True).verdict is adopt.Verdict.ADOPT
    affinity = placed["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["affinity"]
    terms = affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    terms.append({"labelSelector": {"matchLabels": {"app": "miner"}}, "topologyKey": "zone"})
    del placed["metadata"]["annotations"][api.LAST_APPLIED_ANNOTATION]
    reason = refused_because(decide(read(placed), orphans=True))
    assert "podAffinity.requiredDuringSchedulingIgnoredDuringExecution[1] is" in reason


def test_an_lws_of_an_older_revision_is_checked_against_the_record_that_holds_it() -> None:
    """The spec moved on to v2: an LWS of v1 is the set's only as v1's record renders it; an
    orphaned record vouches for it when it would count (adopt hands both over), a record of
    another owner does not."""
    v2 = [
        builders.make_role(name, image="vllm/vllm-openai:v0.12.0") for name in ("prefill", "decode")
    ]
    parent = parents.parse_parent(builders.make_ds(roles=v2))
    record = orphan_record()
    old = released(rendered_lws())
    forged = copy.deepcopy(old)
    forged["spec"]["leaderWorkerTemplate"]["size"] = 4
    del forged["metadata"]["annotations"][api.LAST_APPLIED_ANNOTATION]
    assert decide(read(old), orphans=True, parent=parent, others=[record]).verdict is (
        adopt.Verdict.ADOPT
    )
    reason = refused_because(decide(read(forged), orphans=True, parent=parent, others=[record]))
    assert reason.startswith("not what llm would have made at its name: spec.leaderWorkerTemplate")
    assert "size is 4, not 1 (as llm renders it from record llm-fe283763)" in reason
    for others in (
        [],
        [read(upstream_child(api.REVISION_KIND, "llm-x", controller_uid=OTHER_UID))],
    ):
        reason = refused_because(decide(read(old), orphans=True, parent=parent, others=others))
        assert f"its revision {REVISION} is neither the spec's (" in reason


def lws_edits() -> list[Any]:
    """(id, edit of a released LWS, what the refusal names)."""

    def worker(lws: JsonObject) -> JsonObject:
        template: JsonObject = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]
        return template

    def applied(lws: JsonObject) -> JsonObject:
        annotations = lws["metadata"]["annotations"]
        return json.loads(annotations[api.LAST_APPLIED_ANNOTATION])  # type: ignore[no-any-return]

    def forge_applied(lws: JsonObject) -> None:
        copy_ = applied(lws)
        copy_["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0][
            "image"
        ] = EVIL
        lws["metadata"]["annotations"][api.LAST_APPLIED_ANNOTATION] = json.dumps(copy_)

    cases: list[tuple[str, Callable[[JsonObject], object], str]] = [
        (
            "env",
            lambda lws: worker(lws)["spec"]["containers"][0].update(
                env=[{"name": "K", "value": "v"}]
            ),
            "workerTemplate.spec.containers[0].env is",
        ),
        (
            "second-container",
            lambda lws: worker(lws)["spec"]["containers"].append({"name": "m", "image": EVIL}),
            "workerTemplate.spec.containers[1] is",
        ),
        (
            "pod-label",
            lambda lws: worker(lws)["metadata"]["labels"].update(role="miner"),
            'workerTemplate.metadata.labels.role is "miner", not "prefill"',
        ),
        (
            "lws-label",
            lambda lws: lws["metadata"]["labels"].update(team="x"),
            'metadata.labels.team is "x", where the set has none',
        ),
        (
            "lws-annotation",
            lambda lws: lws["metadata"]["annotations"].update(
                {"leaderworkerset.sigs.k8s.io/exclusive-topology": "rack"}
            ),
            "metadata.annotations.leaderworkerset.sigs.k8s.io/exclusive-topology is",
        ),
        (
            "startup-policy",
            lambda lws: lws["spec"].update(startupPolicy="LeaderReady"),
            'spec.startupPolicy is "LeaderReady", not "LeaderCreated"',
        ),
        (
            "subdomain-policy",
            lambda lws: lws["spec"].update(networkConfig={"subdomainPolicy": "UniquePerReplica"}),
            'spec.networkConfig.subdomainPolicy is "UniquePerReplica", not "Shared"',
        ),
        (
            "name",
            lambda lws: lws["metadata"].update(name="llm-0-fe283763-decode"),
            "its name is not 'llm-0-fe283763-prefill', the one its labels give",
        ),
        (
            "slice-label",
            lambda lws: lws["metadata"]["labels"].update({api.LABEL_SLICE: "00"}),
            f"its {api.LABEL_SLICE} label '00' is not a slice number",
        ),
        (
            "unknown-role",
            lambda lws: (
                lws["metadata"].update(name="llm-0-fe283763-router")
                or lws["metadata"]["labels"].update({api.LABEL_ROLE: "router"})
            ),
            f"revision {REVISION} has no role 'router' (the spec)",
        ),
        (
            "last-applied",
            forge_applied,
            "its last-applied annotation (what the set would write back): spec.leaderWorker",
        ),
        (
            "second-owner",
            lambda lws: lws["metadata"].update(
                ownerReferences=[
                    {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": OTHER_UID}
                ]
            ),
            f"has an owner that is not its controller (uid {OTHER_UID})",
        ),
    ]
    return [pytest.param(edit, named, id=case) for case, edit, named in cases]


@pytest.mark.parametrize(("edit", "named"), lws_edits())
def test_an_orphan_lws_that_differs_from_the_sets_in_anything_it_controls_is_refused(
    edit: Callable[[JsonObject], object], named: str
) -> None:
    lws = released(rendered_lws())
    edit(lws)
    assert named in refused_because(decide(read(lws), orphans=True))


def test_replicas_and_the_initial_replicas_annotation_are_the_sets_to_change() -> None:
    lws = released(rendered_lws())
    lws["spec"]["replicas"] = 0
    lws["metadata"]["annotations"][api.ANNOTATION_INITIAL_REPLICAS] = "9"
    assert decide(read(lws), orphans=True).verdict is adopt.Verdict.ADOPT


def served(service: JsonObject) -> JsonObject:
    """A Service as the API server stores it: the fields it fills in for a headless one."""
    service["spec"].update(
        clusterIPs=["None"],
        type="ClusterIP",
        sessionAffinity="None",
        ipFamilies=["IPv4"],
        ipFamilyPolicy="SingleStack",
        internalTrafficPolicy="Cluster",
    )
    return service


def rendered_service(role: str = "prefill") -> JsonObject:
    lws = naming.lws_name(set_name="llm", slice_index=0, revision=REVISION, role=role)
    labels = naming.service_labels(set_name="llm", slice_index=0, revision=REVISION, role=role)
    return children.render_service(name=naming.service_name(lws), labels=labels)


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        pytest.param(lambda s: None, None, id="genuine"),
        pytest.param(
            lambda s: s["metadata"]["annotations"].pop(api.LAST_APPLIED_ANNOTATION),
            None,
            id="genuine-upstreams",
        ),
        pytest.param(
            lambda s: s["spec"]["selector"].update({api.LABEL_REVISION: "feedbeef"}),
            'spec.selector.disaggregatedset.x-k8s.io/revision is "feedbeef", not',
            id="selector",
        ),
        pytest.param(
            lambda s: s["spec"].update(ports=[{"port": 80}]),
            'spec.ports is [{"port": 80}], where the set has none',
            id="ports",
        ),
        pytest.param(
            lambda s: s["spec"].update(type="NodePort"),
            'spec.type is "NodePort", where the set has none',
            id="node-port",
        ),
        pytest.param(
            lambda s: s["spec"].update(publishNotReadyAddresses=True),
            "spec.publishNotReadyAddresses is true, where the set has none",
            id="not-ready",
        ),
        pytest.param(
            lambda s: s["metadata"].update(name="llm-0-fe283763-decode-prv"),
            "its name is not 'llm-0-fe283763-prefill-prv'",
            id="name",
        ),
    ],
)
def test_an_orphan_service_is_adopted_only_as_the_headless_service_of_its_lws(
    edit: Callable[[JsonObject], object], named: str | None
) -> None:
    service = served(released(rendered_service()))
    edit(service)
    decision = decide(read(service), orphans=True)
    if named is None:
        assert decision.verdict is adopt.Verdict.ADOPT, decision.line
    else:
        assert named in refused_because(decision)


def test_an_orphan_scaler_is_adopted_only_with_the_name_and_labels_the_set_gives_it() -> None:
    scaler = released(children.render_scaler(set_name="llm", role="decode", replicas=5))
    assert decide(read(scaler), orphans=True).verdict is adopt.Verdict.ADOPT
    scaler["metadata"]["labels"][api.LABEL_ROLE] = "prefill"
    reason = refused_because(decide(read(scaler), orphans=True))
    assert "its name is not 'llm-prefill', the one its labels give" in reason


def test_admitted_is_an_lws_spec_as_lws_webhook_defaults_it() -> None:
    spec: JsonObject = {"leaderWorkerTemplate": {"restartPolicy": "Default", "size": 2}}
    before = copy.deepcopy(spec)
    assert adoptable.admitted(spec) == {
        "leaderWorkerTemplate": {"restartPolicy": "None", "size": 2},
        "rolloutStrategy": {
            "type": "RollingUpdate",
            "rollingUpdateConfiguration": {"maxUnavailable": 1, "maxSurge": 0, "partition": 0},
        },
        "networkConfig": {"subdomainPolicy": "Shared"},
    }
    assert spec == before
    kept: JsonObject = {
        "leaderWorkerTemplate": {"restartPolicy": "None"},
        "rolloutStrategy": {
            "type": "RollingUpdate",
            "rollingUpdateConfiguration": {"maxUnavailable": "50%", "maxSurge": 2, "partition": 0},
        },
        "networkConfig": {"subdomainPolicy": "UniquePerReplica"},
    }
    assert adoptable.admitted(kept) == kept


TEMPLATE_EDITS = {
    "image": lambda pod: pod["spec"]["containers"][0].update(image=EVIL),
    "command": lambda pod: pod["spec"]["containers"][0].update(command=["sh", "-c", "mine"]),
    "privileged": lambda pod: pod["spec"]["containers"][0].update(
        securityContext={"privileged": True}
    ),
    "host-network": lambda pod: pod["spec"].update(hostNetwork=True),
    "service-account": lambda pod: pod["spec"].update(serviceAccountName="admin"),
    "volume": lambda pod: pod["spec"].update(volumes=[{"name": "root", "hostPath": {"path": "/"}}]),
    "node": lambda pod: pod["spec"].update(nodeName="gpu-1"),
}


@given(
    slice_index=st.integers(0, 3),
    policy=st.sampled_from([None, "ExclusiveSlice", "ExclusiveTopology"]),
    role=st.sampled_from(["prefill", "decode"]),
    upstream=st.booleans(),
    edit=st.one_of(st.none(), st.sampled_from(sorted(TEMPLATE_EDITS))),
    pod=st.sampled_from(["workerTemplate", "leaderTemplate"]),
)
def test_an_orphan_lws_is_adopted_exactly_when_its_templates_are_its_revisions(
    slice_index: int, policy: str | None, role: str, upstream: bool, edit: str | None, pod: str
) -> None:
    """Whoever made it, in any slice, under any placement; any edit of a pod template refused,
    naming where."""
    roles = [builders.make_role(name, leader=True) for name in ("prefill", "decode")]
    placement = None if policy is None else {"type": policy, "topology": "example.com/rack"}
    parent = parents.parse_parent(builders.make_ds(roles=roles, slices=4, placement=placement))
    assert parent.spec is not None
    desired = rendered_lws(
        role, slice_index=slice_index, policy=parent.spec.placement_policy, spec=parent.spec
    )
    lost = upstream_made(desired) if upstream else released(desired)
    if edit is not None:
        TEMPLATE_EDITS[edit](lost["spec"]["leaderWorkerTemplate"][pod])
        lost["metadata"].get("annotations", {}).pop(api.LAST_APPLIED_ANNOTATION, None)
    decision = decide(read(lost), orphans=True, parent=parent)
    if edit is None:
        assert decision.verdict is adopt.Verdict.ADOPT, decision.line
    else:
        assert f"spec.leaderWorkerTemplate.{pod}.spec." in refused_because(decision)


def test_an_lws_made_before_a_settings_edit_is_the_sets_while_a_record_holds_those_settings() -> (
    None
):
    """maxSurge edited in the spec (no new revision): the LWS keeps what it was made with, which
    the record of its revision holds; without the record it is refused, naming the setting."""
    made = [builders.make_role(name, max_surge=1) for name in ("prefill", "decode")]
    edited = [builders.make_role(name, max_surge=2) for name in ("prefill", "decode")]
    then = parents.parse_parent(builders.make_ds(roles=made))
    now = parents.parse_parent(builders.make_ds(roles=edited))
    assert then.spec is not None and now.spec is not None
    assert revision.of_spec(then.spec) == revision.of_spec(now.spec)
    lws = read(released(rendered_lws(spec=then.spec)))
    recorded = builders.make_record(
        revision=revision.of_spec(then.spec), number=1, roles=then.spec.roles
    )
    record = builders.observe(recorded, owner_uid=OLD_SET_UID)
    del record["metadata"]["ownerReferences"]
    reason = refused_because(decide(lws, orphans=True, parent=now))
    assert "spec.rolloutStrategy.rollingUpdateConfiguration.maxSurge is 1, not 2" in reason
    adopted = decide(lws, orphans=True, parent=now, others=[read(record)])
    assert adopted.verdict is adopt.Verdict.ADOPT, adopted.line
