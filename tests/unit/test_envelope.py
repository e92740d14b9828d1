"""Request parsing: both hook versions, observed children, last-applied, bad input."""

from __future__ import annotations

import copy
from collections.abc import Sequence

import orjson
import pytest

from hooks import api
from hooks.core import records
from hooks.gocompat import revision
from hooks.wire import answers, envelope, objects, parents, values
from tests import builders
from tests.golden import make_fixtures


def lws_child(name: str = "llm-0-aaaaaaaa-prefill", **kwargs: object) -> api.JsonObject:
    desired = {
        "apiVersion": api.LWS_API_VERSION,
        "kind": api.LWS_KIND,
        "metadata": {"name": name, "labels": {api.LABEL_ROLE: "prefill"}},
        "spec": {"replicas": 2, "leaderWorkerTemplate": {"workerTemplate": {}}},
    }
    return builders.observe(desired, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_both_hook_versions_give_the_same_records(version: str) -> None:
    body = builders.make_request(builders.make_ds(), children=[lws_child()], version=version)
    request = envelope.parse_sync_request(body)
    (child,) = request.children
    assert child.kind is records.ChildKind.LWS
    assert child.name == "llm-0-aaaaaaaa-prefill"
    assert child.namespace == builders.NAMESPACE


def test_observed_child_fields() -> None:
    child = lws_child(status=builders.lws_status(2, ready=1, updated=0))
    (parsed,) = envelope.parse_sync_request(
        builders.make_request(builders.make_ds(), children=[child])
    ).children
    assert parsed.spec_replicas == 2
    assert parsed.status == records.ReplicaStatus(replicas=2, ready_replicas=1, updated_replicas=0)
    assert parsed.controller_uid == builders.DS_UID
    assert parsed.is_controlled_by(builders.DS_UID)
    assert parsed.creation_timestamp == builders.CREATED


def test_applied_comes_from_last_applied_without_metacontroller_additions() -> None:
    child = lws_child()
    (parsed,) = envelope.parse_sync_request(
        builders.make_request(builders.make_ds(), children=[child])
    ).children
    assert "namespace" not in parsed.applied["metadata"]
    assert api.CONTROLLER_UID_LABEL not in parsed.applied["metadata"]["labels"]
    assert parsed.applied["spec"] == {"replicas": 2, "leaderWorkerTemplate": {"workerTemplate": {}}}


def test_applied_falls_back_to_a_cleaned_copy_when_the_annotation_is_broken() -> None:
    child = lws_child()
    child["metadata"]["annotations"][api.LAST_APPLIED_ANNOTATION] = "{not json"
    child["metadata"]["annotations"]["team"] = "serving"
    child["status"] = builders.lws_status(2)
    (parsed,) = envelope.parse_sync_request(
        builders.make_request(builders.make_ds(), children=[child])
    ).children
    assert parsed.applied == {
        "apiVersion": api.LWS_API_VERSION,
        "kind": api.LWS_KIND,
        "metadata": {
            "name": "llm-0-aaaaaaaa-prefill",
            "labels": {api.LABEL_ROLE: "prefill"},
            "annotations": {"team": "serving"},
        },
        "spec": child["spec"],
    }


def test_last_applied_of_another_object_is_not_trusted() -> None:
    child = lws_child()
    other = orjson.loads(child["metadata"]["annotations"][api.LAST_APPLIED_ANNOTATION])
    other["metadata"]["name"] = "someone-else"
    child["metadata"]["annotations"][api.LAST_APPLIED_ANNOTATION] = orjson.dumps(other).decode()
    (parsed,) = envelope.parse_sync_request(
        builders.make_request(builders.make_ds(), children=[child])
    ).children
    assert parsed.applied["metadata"]["name"] == "llm-0-aaaaaaaa-prefill"


def test_only_children_have_their_last_applied_read_not_related_objects() -> None:
    scaler = scaler_object()
    request = envelope.parse_sync_request(
        builders.make_request(builders.make_ds(), children=[scaler], related=[scaler])
    )
    (as_child,), (as_related,) = request.children, request.related
    assert as_child.applied["metadata"]["name"] == "llm-decode"
    assert as_related.applied == {}
    assert (as_related.name, as_related.controller_uid) == (as_child.name, as_child.controller_uid)


def test_a_sync_reads_related_objects_only_of_the_kind_its_customize_asks_for() -> None:
    """The customize hook asks for scalers alone: an LWS or a record sent as related (another
    wiring's) is not read."""
    request = envelope.parse_sync_request(
        builders.make_request(builders.make_ds(), related=[lws_child(), _record(), scaler_object()])
    )
    assert [(item.kind, item.name) for item in request.related] == [
        (records.ChildKind.SCALER, "llm-decode")
    ]


def test_children_are_sorted_whatever_the_input_order() -> None:
    first = lws_child("llm-0-aaaaaaaa-b")
    second = lws_child("llm-0-aaaaaaaa-a")
    body = builders.make_request(builders.make_ds(), children=[first, second])
    names = [c.name for c in envelope.parse_sync_request(body).children]
    assert names == ["llm-0-aaaaaaaa-a", "llm-0-aaaaaaaa-b"]


def test_structurally_invalid_spec_is_data_not_an_error() -> None:
    ds = builders.make_ds()
    ds["spec"]["roles"] = ds["spec"]["roles"][:1]
    parent = envelope.parse_sync_request(builders.make_request(ds)).parent
    assert parent.spec is None
    (violation,) = parent.spec_violations
    assert violation.field == "spec.roles"


def test_wrong_type_in_a_field_the_hook_reads_is_reported_with_its_path() -> None:
    ds = builders.make_ds()
    ds["spec"]["roles"][1]["spec"]["replicas"] = "3"
    parent = envelope.parse_sync_request(builders.make_request(ds)).parent
    assert [v.field for v in parent.spec_violations] == ["spec.roles[1].spec.replicas"]


def test_a_spec_out_of_bounds_parses_as_written_when_bounds_are_ignored() -> None:
    """For `render`, which checks the rules beside schema errors of bounds, as the API server
    does; a sync never parses this way."""
    spec = builders.make_ds(slices=1)["spec"]
    spec["slices"] = 0
    spec["roles"] = spec["roles"][:1]
    spec["roles"][0]["name"] = "Prefill"
    spec["roles"][0]["spec"]["replicas"] = -1

    parsed = parents.parse_spec_ignoring_bounds(spec)

    assert parsed is not None
    assert (parsed.slices, [role.name for role in parsed.roles]) == (0, ["Prefill"])
    assert parsed.roles[0].replicas == -1
    assert parsed.roles[0].spec is spec["roles"][0]["spec"]


@pytest.mark.parametrize(
    "change",
    [
        {"slices": "2"},
        {"slices": True},
        {"roles": "prefill"},
        {"roles": [{"spec": {}}]},
        {"roles": [{"name": "p", "spec": {"replicas": "3", "leaderWorkerTemplate": {}}}]},
        {"placementPolicy": {"type": "Anywhere"}},
    ],
    ids=["slices-text", "slices-bool", "roles-text", "no-name", "replicas-text", "bad-enum"],
)
def test_a_spec_of_a_wrong_type_does_not_parse_even_ignoring_bounds(
    change: api.JsonObject,
) -> None:
    spec = {**builders.make_ds()["spec"], **change}

    assert parents.parse_spec_ignoring_bounds(spec) is None


def test_observed_conditions_are_read_leniently() -> None:
    ds = builders.make_ds(
        status={
            "conditions": [
                {"type": "Available", "status": "True", "lastTransitionTime": "t", "reason": "R"},
                "garbage",
                {"status": "True"},
            ]
        }
    )
    parent = envelope.parse_sync_request(builders.make_request(ds)).parent
    assert [c.type for c in parent.conditions] == ["Available"]
    assert parent.conditions[0].last_transition_time == "t"


def broken(path: str, value: object) -> api.JsonObject:
    body = builders.make_request(builders.make_ds(), children=[lws_child()])
    target = body
    keys = path.split("/")
    for key in keys[:-1]:
        target = target[key]
    if value is KeyError:
        del target[keys[-1]]
    else:
        target[keys[-1]] = value
    return body


@pytest.mark.parametrize(
    "body",
    [
        pytest.param([], id="not-an-object"),
        pytest.param(broken("parent", KeyError), id="no-parent"),
        pytest.param(broken("parent/kind", "Deployment"), id="wrong-kind"),
        pytest.param(broken("parent/apiVersion", "x/v9"), id="wrong-api-version"),
        pytest.param(broken("parent/metadata/name", ""), id="parent-without-name"),
        pytest.param(broken("children", KeyError), id="no-children"),
        pytest.param(broken("children", []), id="children-not-a-map"),
        pytest.param(broken("children/Pod.v1", {"p": {"metadata": {}}}), id="unknown-unnamed"),
        pytest.param(broken("children/Pod.v1", {"p": []}), id="unknown-child-not-an-object"),
        pytest.param(broken("parent/metadata/generation", "1"), id="generation-not-int"),
    ],
)
def test_unusable_requests_raise_request_error(body: object) -> None:
    with pytest.raises(values.RequestError):
        envelope.parse_sync_request(body)


def test_the_controller_declares_the_child_types_metacontroller_observes() -> None:
    body = builders.make_request(builders.make_ds())
    assert envelope.parse_sync_request(body).declared == records.DS_CHILD_KINDS
    lean = builders.make_request(builders.make_ds(), without=[api.SERVICE_PLURAL])
    assert envelope.parse_sync_request(lean).declared == records.DS_CHILD_KINDS - {
        records.ChildKind.SERVICE
    }


def test_a_request_without_a_controller_declares_nothing_either_way() -> None:
    body = builders.make_request(builders.make_ds())
    del body["controller"]
    assert envelope.parse_sync_request(body).declared is None


def test_the_captured_request_declares_what_its_compositecontroller_listed() -> None:
    """Captured from a CompositeController without controllerrevisions (before the history)."""
    body = orjson.loads((make_fixtures.REQUESTS / "ds-sync-v2.json").read_bytes())
    assert envelope.parse_sync_request(body).declared == {
        records.ChildKind.LWS,
        records.ChildKind.SERVICE,
        records.ChildKind.SCALER,
    }


def test_child_resources_of_other_types_or_versions_are_not_ours() -> None:
    body = builders.make_request(builders.make_ds(), without=[api.SERVICE_PLURAL])
    body["controller"]["spec"]["childResources"] += [
        {"apiVersion": "v1", "resource": "pods"},
        {"apiVersion": "v2", "resource": api.SERVICE_PLURAL},
        {"apiVersion": "v1", "resource": "Services"},
    ]
    assert records.ChildKind.SERVICE not in (envelope.parse_sync_request(body).declared or ())


@pytest.mark.parametrize(
    ("path", "value"),
    [
        pytest.param("controller", [], id="controller-not-an-object"),
        pytest.param("controller/spec", KeyError, id="controller-without-spec"),
        pytest.param("controller/spec/childResources", {}, id="child-resources-not-a-list"),
        pytest.param("controller/spec/childResources", ["services"], id="entry-not-an-object"),
    ],
)
def test_a_malformed_controller_raises_request_error(path: str, value: object) -> None:
    with pytest.raises(values.RequestError, match="controller"):
        envelope.parse_sync_request(broken(path, value))


def test_an_observed_child_of_a_type_the_controller_leaves_out_raises_request_error() -> None:
    """Metacontroller observes only what it declares: such a body cannot be its own, and the
    hook would otherwise have to answer for a Service it must not emit."""
    body = builders.make_request(builders.make_ds(), without=[api.SERVICE_PLURAL])
    service = builders.observe(
        {
            "apiVersion": api.SERVICE_API_VERSION,
            "kind": api.SERVICE_KIND,
            "metadata": {"name": "llm-0-aaaaaaaa-prefill-prv"},
            "spec": {"clusterIP": "None"},
        }
    )
    body["children"][builders.child_key(service)] = {"llm-0-aaaaaaaa-prefill-prv": service}
    with pytest.raises(values.RequestError, match="childResources leaves out"):
        envelope.parse_sync_request(body)


def newer_child(*, applied: bool = True) -> api.JsonObject:
    """A child of a kind this version does not know, as a newer version created it."""
    desired = {
        "apiVersion": "disaggregatedset.x-k8s.io/v1",
        "kind": "DisaggregatedSetCanary",
        "metadata": {"name": "llm-fe283763", "labels": {api.LABEL_NAME: "llm"}},
        "data": {"roles": []},
        "revision": 3,
    }
    observed = builders.observe(desired, status={"phase": "Recorded"})
    if not applied:
        del observed["metadata"]["annotations"][api.LAST_APPLIED_ANNOTATION]
    return observed


def test_a_child_of_a_kind_this_version_does_not_know_comes_back_as_last_applied() -> None:
    child = newer_child()
    body = builders.make_request(builders.make_ds(), children=[lws_child(), child])
    request = envelope.parse_sync_request(body)
    (kept,) = request.unknown_children
    assert kept == {
        "apiVersion": "disaggregatedset.x-k8s.io/v1",
        "kind": "DisaggregatedSetCanary",
        "metadata": {"name": "llm-fe283763", "labels": {api.LABEL_NAME: "llm"}},
        "data": {"roles": []},
        "revision": 3,
    }
    assert [item.kind for item in request.children] == [records.ChildKind.LWS]


def test_without_its_annotation_an_unknown_child_comes_back_cleaned_of_status_and_metadata() -> (
    None
):
    request = envelope.parse_sync_request(
        builders.make_request(builders.make_ds(), children=[newer_child(applied=False)])
    )
    (kept,) = request.unknown_children
    assert kept["metadata"] == {"name": "llm-fe283763", "labels": {api.LABEL_NAME: "llm"}}
    assert (kept["data"], kept["revision"]) == ({"roles": []}, 3)
    assert "status" not in kept


def test_an_unknown_child_sharing_a_known_childs_kind_and_name_makes_the_request_unusable() -> None:
    """An answer holds one object per kind and name, so one of the two would be deleted: the
    request is refused (400, nothing changes) instead."""
    known = lws_child()
    newer = lws_child()
    newer["apiVersion"] = "leaderworkerset.x-k8s.io/v2"
    body = builders.make_request(builders.make_ds(), children=[known, newer])
    with pytest.raises(values.RequestError, match="an answer can keep only one"):
        envelope.parse_sync_request(body)


def test_related_objects_of_unknown_kinds_are_left_out() -> None:
    body = builders.make_request(builders.make_ds(), children=[lws_child()])
    body["related"]["ConfigMap.v1"] = {"cm": {"metadata": {"name": "cm"}}}
    assert envelope.parse_sync_request(body).related == ()


def test_the_answer_writes_the_status_fields_kept_beside_the_computed_ones() -> None:
    answer = records.SyncAnswer(
        status=api.DisaggregatedSetStatus(revision="fe283763"),
        status_kept={"futureField": {"a": 1}, "revision": "kept-loses"},
    )
    rendered = answers.render_answer(answer)["status"]
    assert rendered["futureField"] == {"a": 1}
    assert rendered["revision"] == "fe283763"


def test_malformed_child_raises_request_error() -> None:
    body = builders.make_request(builders.make_ds(), children=[lws_child()])
    group = body["children"][f"{api.LWS_KIND}.{api.LWS_API_VERSION}"]
    child = next(iter(group.values()))
    child["metadata"]["labels"] = {"a": 1}
    with pytest.raises(values.RequestError, match="labels"):
        envelope.parse_sync_request(body)


def _record() -> builders.JsonObject:
    spec = api.DisaggregatedSetSpec.model_validate(builders.make_ds()["spec"])
    rendered = builders.make_record(revision=revision.of_spec(spec), number=3, roles=spec.roles)
    return builders.observe(rendered)


def test_a_record_is_read_from_the_object_never_from_its_last_applied_annotation() -> None:
    """Anyone who can edit a record can edit the annotation: its roles and numbers are parsed
    once from the object itself, and it is re-emitted as it is stored (never asking to change
    its immutable roles)."""
    record = _record()
    annotations = record["metadata"]["annotations"]
    forged = orjson.loads(annotations[api.LAST_APPLIED_ANNOTATION])
    forged["revision"] = 99
    forged["packedRoles"] = builders.make_record(
        revision="0badc0de",
        number=3,
        roles=api.DisaggregatedSetSpec.model_validate(
            builders.make_ds(roles=[builders.make_role("a"), builders.make_role("b")])["spec"]
        ).roles,
    )["packedRoles"]
    annotations[api.LAST_APPLIED_ANNOTATION] = orjson.dumps(forged).decode()
    (item,) = envelope.parse_sync_request(
        builders.make_request(builders.make_ds(), children=[record])
    ).children
    assert item.stored is not None and item.stored_error is None
    assert (item.stored.number, item.stored.first_number, item.stored.completed_as) == (3, 3, None)
    assert item.stored.roles_json == tuple(builders.record_roles(record))
    assert item.stored.hash == record["metadata"]["labels"][api.LABEL_REVISION]
    assert item.applied["packedRoles"] == record["packedRoles"] and item.applied["revision"] == 3
    assert api.LAST_APPLIED_ANNOTATION not in item.applied["metadata"].get("annotations", {})


def test_a_records_roles_are_hashed_by_the_function_the_caller_gives() -> None:
    """The hook server passes its revision memo; the record's hash is what that function
    answers for the record's own roles."""
    record = _record()
    asked: list[list[str]] = []

    def revision_of(roles: Sequence[tuple[str, builders.JsonObject]]) -> str:
        asked.append([name for name, _ in roles])
        return "0badf00d"

    (item,) = envelope.parse_sync_request(
        builders.make_request(builders.make_ds(), children=[record]), revision_of=revision_of
    ).children
    assert asked == [[role["name"] for role in builders.record_roles(record)]]
    assert item.stored is not None and item.stored.hash == "0badf00d"


def test_a_record_body_that_is_not_a_records_says_why() -> None:
    record = _record()
    record["revision"] = True
    (item,) = envelope.parse_sync_request(
        builders.make_request(builders.make_ds(), children=[record])
    ).children
    assert item.stored is None and item.stored_error is not None
    assert item.stored_error.startswith("revision:")


def test_records_listed_by_kubectl_are_read_as_children_are() -> None:
    record = _record()
    (from_request,) = envelope.parse_sync_request(
        builders.make_request(builders.make_ds(), children=[record])
    ).children
    assert objects.parse_records([record]) == (from_request,)
    with pytest.raises(values.RequestError):
        objects.parse_records([{"metadata": {}}])


def test_empty_maps_and_null_children_groups_are_accepted() -> None:
    body = builders.make_request(builders.make_ds())
    body["children"][f"{api.LWS_KIND}.{api.LWS_API_VERSION}"] = None
    assert envelope.parse_sync_request(body).children == ()


def scaler_object() -> builders.JsonObject:
    return builders.observe(
        {
            "apiVersion": api.API_VERSION,
            "kind": api.SCALER_KIND,
            "metadata": {
                "name": "llm-decode",
                "labels": {api.LABEL_NAME: "llm", api.LABEL_ROLE: "decode"},
            },
            "spec": {"replicas": 3},
        }
    )


def test_scaler_sync_request_reads_the_owner_from_related_and_nothing_else() -> None:
    """Its customize asks for the owning set alone: an LWS sent as related is not read."""
    body = {
        "parent": scaler_object(),
        "children": {},
        "related": {
            f"{api.DS_KIND}.{api.API_VERSION}": {"llm": builders.make_ds()},
            f"{api.LWS_KIND}.{api.LWS_API_VERSION}": {"x": lws_child()},
        },
    }
    request = envelope.parse_scaler_sync_request(body)
    assert request.scaler.spec_replicas == 3
    assert request.scaler.owner_uid == builders.DS_UID
    assert [o.name for o in request.owners] == ["llm"]


def test_render_customize_response_shapes_rules() -> None:
    rules = [
        records.RelatedRule(
            api_version="v1", resource="pods", namespace="ns", label_selector={"a": "b"}
        ),
        records.RelatedRule(api_version="v1", resource="services", namespace="", names=("x",)),
    ]
    assert answers.render_customize_response(rules) == {
        "relatedResources": [
            {
                "apiVersion": "v1",
                "resource": "pods",
                "namespace": "ns",
                "labelSelector": {"matchLabels": {"a": "b"}},
            },
            {"apiVersion": "v1", "resource": "services", "names": ["x"]},
        ]
    }


# --- what an answer makes Metacontroller write -------------------------------------------------


def _writes(name: str) -> dict[str, int]:
    request = envelope.parse_sync_request(
        orjson.loads((make_fixtures.REQUESTS / name).read_bytes())
    )
    result = make_fixtures.hook_for(name)(
        orjson.loads((make_fixtures.REQUESTS / name).read_bytes())
    )
    assert isinstance(result.answer, records.SyncAnswer)
    return dict(answers.writes(request, answers.render_answer(result.answer)))


def test_a_steady_set_answers_its_observed_state() -> None:
    assert _writes("ds-sync-steady.json") == {"create": 0, "update": 0, "delete": 0, "status": 0}


def test_a_first_sync_creates_every_child_and_writes_the_status() -> None:
    # Two LWS and the scaler of the External role; no DisaggregatedSetRevision, as the captured
    # CompositeController (an earlier kit's) does not declare them.
    assert _writes("ds-sync-first.json") == {"create": 3, "update": 0, "delete": 0, "status": 1}


def test_a_rollout_step_updates_what_it_scales() -> None:
    request = orjson.loads((make_fixtures.REQUESTS / "ds-sync-mid-rollout.json").read_bytes())
    answer = orjson.loads((make_fixtures.RESPONSES / "ds-sync-mid-rollout.json").read_bytes())
    observed = {
        obj["metadata"]["name"]: obj["spec"].get("replicas")
        for group in request["children"].values()
        for obj in group.values()
        if obj["kind"] == api.LWS_KIND
    }
    scaled = sum(
        1
        for child in answer["children"]
        if child["kind"] == api.LWS_KIND
        and child["spec"].get("replicas") != observed.get(child["metadata"]["name"])
    )
    writes = _writes("ds-sync-mid-rollout.json")
    assert scaled > 0
    assert writes["update"] == scaled and writes["create"] == writes["delete"] == 0


def test_a_child_left_out_counts_as_a_deletion_and_a_changed_one_as_an_update() -> None:
    kept, dropped = lws_child(), lws_child("llm-0-aaaaaaaa-decode")
    request = envelope.parse_sync_request(
        builders.make_request(builders.make_ds(), children=[kept, dropped])
    )
    changed = {**request.children[1].applied, "spec": {"replicas": 7}}
    answer = records.SyncAnswer(
        status=api.DisaggregatedSetStatus(observed_generation=request.parent.generation),
        children=(changed,),
    )
    writes = answers.writes(request, answers.render_answer(answer))
    assert (writes["update"], writes["delete"], writes["create"]) == (1, 1, 0)


def test_parsing_does_not_mutate_the_body() -> None:
    body = builders.make_request(builders.make_ds(), children=[lws_child()])
    before = copy.deepcopy(body)
    envelope.parse_sync_request(body)
    assert body == before


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        pytest.param({}, 0, id="no-label-is-slice-0"),
        pytest.param({api.LABEL_SLICE: ""}, 0, id="empty-label-is-slice-0"),
        pytest.param({api.LABEL_SLICE: "7"}, 7, id="decimal"),
        pytest.param({api.LABEL_SLICE: "07"}, None, id="leading-zero-unparsable"),
        pytest.param({api.LABEL_SLICE: "-1"}, None, id="negative-unparsable"),
        pytest.param({api.LABEL_SLICE: "x"}, None, id="garbage-unparsable"),
        pytest.param({api.LABEL_SLICE: "\u0663"}, None, id="non-ascii-digit-unparsable"),
    ],
)
def test_slice_index_from_the_slice_label(labels: dict[str, str], expected: int | None) -> None:
    child = lws_child()
    child["metadata"]["labels"] = {**labels, api.LABEL_ROLE: "prefill"}
    (parsed,) = envelope.parse_sync_request(
        builders.make_request(builders.make_ds(), children=[child])
    ).children
    assert parsed.slice_index == expected
