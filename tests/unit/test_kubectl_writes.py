"""How `kubectl ds rollout undo` writes a set back (hooks.kubectl.writes): a server-side applier's
own configuration re-applied as it, or a JSON patch that tests what was read.
tests/cluster/test_kubectl_ds.py applies, undoes and applies again on the real API server."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from hooks import api
from hooks.kubectl import writes
from tests import builders

JsonObject = dict[str, Any]
CAUSE = api.CHANGE_CAUSE_ANNOTATION


def template(image: str) -> JsonObject:
    return {"size": 1, "workerTemplate": {"spec": {"containers": [{"name": "c", "image": image}]}}}


def role_fields(*, template_owned: bool = True) -> JsonObject:
    spec: JsonObject = {"f:replicas": {}}
    if template_owned:
        spec["f:leaderWorkerTemplate"] = {"f:workerTemplate": {"f:spec": {"f:containers": {}}}}
    return {".": {}, "f:name": {}, "f:spec": spec}


def entry(
    manager: str, operation: str, roles: tuple[str, ...], **metadata: JsonObject
) -> JsonObject:
    fields: JsonObject = {
        "f:spec": {"f:roles": {f'k:{{"name":"{name}"}}': role_fields() for name in roles}}
    }
    if metadata:
        fields["f:metadata"] = metadata
    return {"manager": manager, "operation": operation, "fieldsV1": fields}


def live(*entries: JsonObject, cause: str | None = None, image: str = "v2") -> JsonObject:
    obj = builders.make_ds(
        roles=[
            {"name": name, "spec": {"replicas": 2, "leaderWorkerTemplate": template(image)}}
            for name in ("prefill", "decode")
        ]
    )
    obj["metadata"].update(resourceVersion="42", managedFields=list(entries))
    obj["status"] = {"revision": "abcdef12"}
    if cause is not None:
        obj["metadata"]["annotations"] = {CAUSE: cause}
    return obj


def restored(obj: JsonObject, image: str = "v1") -> list[JsonObject]:
    roles = copy.deepcopy(obj["spec"]["roles"])
    for role in roles:
        role["spec"]["leaderWorkerTemplate"] = template(image)
    return roles


# --- who owns the templates --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entries", "owner"),
    [
        ([], None),
        ([entry("kubectl", "Apply", ("prefill", "decode"))], "kubectl"),
        ([entry("argocd", "Apply", ("prefill", "decode"))], "argocd"),
        ([entry("kubectl-client-side-apply", "Update", ("prefill", "decode"))], None),
        ([entry("kubectl", "Apply", ("prefill",))], None),
        (
            [
                entry("kubectl", "Apply", ("prefill", "decode")),
                entry("kubectl-edit", "Update", ("decode",)),
            ],
            None,
        ),
    ],
    ids=["nobody", "kubectl", "another-applier", "client-side", "one-role", "shared"],
)
def test_the_template_owner_is_the_one_applier_of_every_template(
    entries: list[JsonObject], owner: str | None
) -> None:
    assert writes.template_owner(live(*entries)) == owner


def test_a_managed_fields_key_that_is_not_json_matches_no_role() -> None:
    broken = entry("kubectl", "Apply", ("prefill", "decode"))
    roles = broken["fieldsV1"]["f:spec"]["f:roles"]
    roles["k:{not json"] = roles.pop('k:{"name":"decode"}')
    assert writes.template_owner(live(broken)) is None


def test_the_owned_configuration_is_the_live_values_of_the_owned_fields_in_live_order() -> None:
    owner = entry("kubectl", "Apply", ("decode", "prefill"), **{"f:labels": {"f:team": {}}})
    obj = live(owner)
    obj["metadata"]["labels"] = {"team": "serving", "other": "x"}
    obj["spec"]["slices"] = 1
    configuration = writes.owned_configuration(obj, manager="kubectl")
    owned_template = {"workerTemplate": template("v2")["workerTemplate"]}  # `size` is not owned
    assert configuration == {
        "apiVersion": api.API_VERSION,
        "kind": api.DS_KIND,
        "metadata": {
            "labels": {"team": "serving"},
            "name": obj["metadata"]["name"],
            "namespace": obj["metadata"]["namespace"],
            "resourceVersion": "42",
        },
        "spec": {
            "roles": [
                {"name": name, "spec": {"replicas": 2, "leaderWorkerTemplate": owned_template}}
                for name in ("prefill", "decode")
            ]
        },
    }


def test_managed_fields_entries_that_are_not_json_are_left_out_of_the_configuration() -> None:
    owner = entry("kubectl", "Apply", ("prefill", "decode"))
    roles = owner["fieldsV1"]["f:spec"]["f:roles"]
    roles["k:{not json"] = roles.pop('k:{"name":"decode"}')
    roles["v:[broken"] = {}
    configuration = writes.owned_configuration(live(owner), manager="kubectl")
    assert [role["name"] for role in configuration["spec"]["roles"]] == ["prefill"]


# --- the writes --------------------------------------------------------------------------------


def test_a_server_side_applier_gets_its_configuration_back_with_the_restored_templates() -> None:
    owner = entry(
        "kubectl", "Apply", ("prefill", "decode"), **{"f:annotations": {f"f:{CAUSE}": {}}}
    )
    obj = live(owner, cause="v2")
    (write,) = writes.undo_writes(obj, roles=restored(obj), change_cause="v1")
    assert (write.method, write.manager) == (writes.Method.APPLY, "kubectl")
    assert isinstance(write.body, dict)
    assert write.body["metadata"]["resourceVersion"] == "42"
    assert write.body["metadata"]["annotations"] == {CAUSE: "v1"}
    assert [r["spec"]["leaderWorkerTemplate"] for r in write.body["spec"]["roles"]] == [
        template("v1"),
        template("v1"),
    ]
    assert "status" not in write.body


def test_a_change_cause_the_applier_does_not_own_follows_in_a_merge_patch() -> None:
    obj = live(entry("kubectl", "Apply", ("prefill", "decode")), cause="v2")
    apply, annotation = writes.undo_writes(obj, roles=restored(obj), change_cause=None)
    assert apply.method is writes.Method.APPLY
    assert isinstance(apply.body, dict) and "annotations" not in apply.body["metadata"]
    assert (annotation.method, annotation.manager) == (writes.Method.MERGE_PATCH, "kubectl-ds")
    assert annotation.body == {"metadata": {"annotations": {CAUSE: None}}}


def version_tests(obj: JsonObject) -> list[JsonObject]:
    metadata = obj["metadata"]
    return [
        {"op": "test", "path": f"/metadata/{key}", "value": metadata[key]}
        for key in ("uid", "generation", "annotations")
    ]


def test_without_an_applier_only_the_changed_templates_are_patched_after_a_version_test() -> None:
    """A set without annotations: the patch adds the whole map, so it tests the resourceVersion."""
    obj = live(entry("kubectl-client-side-apply", "Update", ("prefill", "decode")))
    roles = copy.deepcopy(obj["spec"]["roles"])
    roles[1]["spec"]["leaderWorkerTemplate"] = template("v1")
    (write,) = writes.undo_writes(obj, roles=roles, change_cause="v1")
    assert write.method is writes.Method.JSON_PATCH
    assert write.body == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "42"},
        {
            "op": "replace",
            "path": "/spec/roles/1/spec/leaderWorkerTemplate",
            "value": template("v1"),
        },
        {"op": "add", "path": "/metadata/annotations", "value": {CAUSE: "v1"}},
    ]


def test_roles_that_come_back_go_or_move_replace_the_role_list() -> None:
    obj = live(cause="v2")
    roles = list(reversed(restored(obj)))
    (write,) = writes.undo_writes(obj, roles=roles, change_cause=None)
    assert write.body == [
        *version_tests(obj),
        {"op": "replace", "path": "/spec/roles", "value": roles},
        {"op": "remove", "path": "/metadata/annotations/kubernetes.io~1change-cause"},
    ]


def moved(obj: JsonObject, change: str) -> JsonObject:
    """`obj` read again after `change`."""
    now = copy.deepcopy(obj)
    metadata = now["metadata"]
    metadata["resourceVersion"] = "43"
    if change == "status":
        now["status"]["conditions"] = [{"type": "Available", "lastTransitionTime": "later"}]
        metadata["managedFields"].append(entry("metacontroller", "Update", ()))
    elif change == "spec":
        now["spec"]["roles"][0]["spec"]["replicas"] = 3
        metadata["generation"] = metadata.get("generation", 1) + 1
    elif change == "annotations":
        metadata["annotations"] = {CAUSE: "someone else"}
    elif change == "recreated":
        metadata["uid"] = "another-uid"
    return now


@pytest.mark.parametrize(
    ("change", "same"),
    [("status", True), ("spec", False), ("annotations", False), ("recreated", False)],
)
def test_a_set_read_again_is_written_only_while_nothing_but_its_status_moved(
    change: str, same: bool
) -> None:
    """Metacontroller's status writes move a set's resourceVersion under an undo: the undo reads
    the set again and writes, unless its spec, annotations or the object itself changed."""
    obj = live(entry("kubectl-client-side-apply", "Update", ("prefill", "decode")), cause="v2")
    assert writes.same_spec(obj, moved(obj, change)) is same


def holds(tests: list[JsonObject], obj: JsonObject) -> bool:
    """Whether every JSON patch test of `tests` (paths under /metadata) holds on `obj`."""
    metadata = obj["metadata"]
    return all(
        metadata.get(test["path"].removeprefix("/metadata/")) == test["value"] for test in tests
    )


@pytest.mark.parametrize(
    ("change", "passes"),
    [("status", True), ("spec", False), ("annotations", False), ("recreated", False)],
)
def test_the_patch_of_an_annotated_set_passes_its_tests_after_a_status_write_only(
    change: str, passes: bool
) -> None:
    """A client-side applied set (its last-applied annotation): the server runs the patch's tests
    on the set as stored when the patch lands, so a status written since the read (Metacontroller
    rewrites a large set's status for seconds after a rollout) does not refuse it."""
    obj = live(entry("kubectl-client-side-apply", "Update", ("prefill", "decode")), cause="v2")
    (write,) = writes.undo_writes(obj, roles=restored(obj), change_cause="v1")
    assert isinstance(write.body, list)
    tests = [operation for operation in write.body if operation["op"] == "test"]
    assert tests == write.body[:3] == version_tests(obj)
    assert holds(tests, moved(obj, change)) is passes
