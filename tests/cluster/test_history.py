"""The revision history on the real control plane: DisaggregatedSetRevisions as children.

What Metacontroller, the API server and the garbage collector decide: the child type is wired
and allowed, each revision the set moves to gets its record with the next number (a revert the
next number again, its roles untouched and immutable), `kubectl get` lists the history, the limit
prunes the oldest records that no LWS still uses, a ControllerRevision the previous kit wrote is
never touched, and deleting the set deletes its history.
"""

from __future__ import annotations

import json
from typing import Any

from hooks import api
from hooks.sandbox import kube
from hooks.sandbox.controlplane import ControlPlane
from hooks.sandbox.lws import FakeLwsController
from tests.cluster import sets

JsonObject = dict[str, Any]
CONTROLLER_REVISIONS = kube.Resource("apps", "v1", "controllerrevisions")
CLUSTER_ROLES = kube.Resource("rbac.authorization.k8s.io", "v1", "clusterroles", namespaced=False)
IMAGES = [f"vllm/vllm-openai:v0.{minor}.0" for minor in (11, 12, 13, 14)]


def history(client: kube.Client, namespace: str) -> dict[str, JsonObject]:
    """The set's DisaggregatedSetRevisions by revision label."""
    return {
        item["metadata"]["labels"][api.LABEL_REVISION]: item
        for item in client.list(kube.REVISIONS, namespace=namespace)
        if item["metadata"].get("labels", {}).get(api.LABEL_NAME) == "llm"
    }


def roll_to(plane: ControlPlane, namespace: str, image: str) -> str:
    """Change every role's image, wait until the set is rolled out there; its revision."""
    ds = plane.client.get(kube.DISAGGREGATED_SETS, "llm", namespace=namespace)
    for role in ds["spec"]["roles"]:
        role["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"] = (
            image
        )
    patch = {"spec": {"roles": ds["spec"]["roles"]}}
    plane.kubectl("patch", "dset", "llm", "-n", namespace, "--type=merge", "-p", json.dumps(patch))
    done = sets.wait_available(plane.client, namespace, "llm")
    revision: str = done["status"]["revision"]
    kube.wait_for(
        lambda: set(sets.lws_by_name(plane.client, namespace)),
        until=lambda names: all(revision in name for name in names),
        timeout=sets.WAIT_SECONDS,
        message=f"only revision {revision}'s LWS remain",
    )
    return revision


def numbers(client: kube.Client, namespace: str) -> dict[str, int]:
    return {revision: item["revision"] for revision, item in history(client, namespace).items()}


def test_stock_metacontroller_rbac_may_manage_disaggregatedsetrevisions(
    control_plane: ControlPlane, namespace: str
) -> None:
    """Metacontroller's production install binds its service account to a ClusterRole of every
    verb on every resource (its production RBAC manifest, v4.17): enough for
    the new child type, as the API server's own authorizer answers."""
    stock = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": f"stock-metacontroller-{namespace}"},
        "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}],
    }
    account = f"system:serviceaccount:{namespace}:metacontroller"
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": f"stock-metacontroller-{namespace}"},
        "subjects": [{"kind": "ServiceAccount", "name": "metacontroller", "namespace": namespace}],
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": stock["metadata"]["name"],
        },
    }
    control_plane.kubectl(
        "apply",
        "-f",
        "-",
        stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": [stock, binding]}),
    )
    try:
        for verb in ("get", "list", "watch", "create", "update", "patch", "delete"):
            allowed = control_plane.kubectl(
                "auth",
                "can-i",
                verb,
                f"{api.REVISION_PLURAL}.{api.GROUP}",
                "-n",
                namespace,
                "--as",
                account,
                check=False,
            )
            assert allowed.stdout.strip() == "yes", (verb, allowed.stdout, allowed.stderr)
    finally:
        control_plane.kubectl(
            "delete", "clusterrolebinding,clusterrole", stock["metadata"]["name"], check=False
        )


def test_people_with_the_view_role_can_read_the_history(control_plane: ControlPlane) -> None:
    """`kubectl ds rollout history` needs only what the built-in view role grants: the kit's
    `disaggregatedset-view` (aggregated into view) reads the sets and their records; neither it
    nor `disaggregatedset-edit` lets anyone write a record."""
    rules = {
        (name, group, resource): set(rule["verbs"])
        for name in ("disaggregatedset-view", "disaggregatedset-edit")
        for rule in control_plane.client.get(CLUSTER_ROLES, name)["rules"]
        for group in rule.get("apiGroups", [])
        for resource in rule.get("resources", [])
    }
    for resource in (api.REVISION_PLURAL, api.DS_PLURAL):
        assert rules[("disaggregatedset-view", api.GROUP, resource)] == {"get", "list", "watch"}
    assert ("disaggregatedset-edit", api.GROUP, api.REVISION_PLURAL) not in rules


def test_history_is_numbered_reverted_pruned_and_collected_with_the_set(
    control_plane: ControlPlane, namespace: str, lws_controller: FakeLwsController
) -> None:
    client = control_plane.client
    manifest = sets.small_set(namespace, image=IMAGES[0], prefill=2, decode=1)
    manifest["metadata"]["annotations"] = {
        api.ANNOTATION_HISTORY_LIMIT: "2",
        api.CHANGE_CAUSE_ANNOTATION: "first model",
    }
    sets.apply_set(control_plane, manifest)
    first = sets.wait_available(client, namespace, "llm")["status"]["revision"]
    record = kube.wait_for(
        lambda: history(client, namespace).get(first),
        timeout=sets.WAIT_SECONDS,
        message="the first revision's DisaggregatedSetRevision",
    )
    assert record["metadata"]["name"] == f"llm-{first}"
    assert record["revision"] == 1
    assert record["metadata"]["annotations"][api.CHANGE_CAUSE_ANNOTATION] == "first model"
    [owner] = record["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == (api.DS_KIND, "llm", True)
    stored = client.get(kube.DISAGGREGATED_SETS, "llm", namespace=namespace)
    assert [role["spec"] for role in record["roles"]] == [
        role["spec"] for role in stored["spec"]["roles"]
    ]

    legacy = client.create(CONTROLLER_REVISIONS, _previous_kits_record(stored, first))

    second = roll_to(control_plane, namespace, IMAGES[1])
    assert numbers(client, namespace) == {first: 1, second: 2}
    listed = control_plane.kubectl("get", api.REVISION_SHORT_NAME, "-n", namespace).stdout
    assert listed.split("\n")[0].split() == ["NAME", "REVISION", "HASH", "CHANGE-CAUSE", "AGE"]
    lines = listed.strip().split("\n")[1:]
    assert {line.split()[0]: line.split()[1:3] for line in lines} == {
        f"llm-{first}": ["1", first],
        f"llm-{second}": ["2", second],
    }
    assert all("first model" in line for line in lines)
    changed = json.dumps({"roles": list(reversed(record["roles"]))})  # the order is the revision's
    refused = control_plane.kubectl(
        "patch",
        api.REVISION_SHORT_NAME,
        f"llm-{first}",
        "-n",
        namespace,
        "--type=merge",
        "-p",
        changed,
        check=False,
    )
    assert refused.returncode != 0 and "roles are immutable" in refused.stderr
    back = roll_to(control_plane, namespace, IMAGES[0])  # a revert to the first revision
    assert back == first
    reverted = history(client, namespace)[first]
    assert numbers(client, namespace) == {first: 3, second: 2}
    assert reverted["roles"] == record["roles"]  # immutable, and unchanged
    third = roll_to(control_plane, namespace, IMAGES[2])
    fourth = roll_to(control_plane, namespace, IMAGES[3])
    # Old revisions: second (2), first (3), third (4); the limit keeps two.
    assert numbers(client, namespace) == {first: 3, third: 4, fourth: 5}
    assert second not in history(client, namespace)

    # The previous kit's record is never touched: no update, no delete.
    kept = client.get(CONTROLLER_REVISIONS, legacy["metadata"]["name"], namespace=namespace)
    assert kept["metadata"]["resourceVersion"] == legacy["metadata"]["resourceVersion"]

    client.delete(kube.DISAGGREGATED_SETS, "llm", namespace=namespace)
    kube.wait_for(
        lambda: (
            history(client, namespace),
            client.list(CONTROLLER_REVISIONS, namespace=namespace),
        ),
        until=lambda found: found == ({}, []),
        timeout=sets.WAIT_SECONDS,
        message="the garbage collector deletes the history, old and new, with the set",
    )


def _previous_kits_record(ds: JsonObject, revision: str) -> JsonObject:
    """A ControllerRevision as the previous kit wrote the history, owned by the set."""
    metadata = ds["metadata"]
    return {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": {
            "name": f"llm-{revision}",
            "namespace": metadata["namespace"],
            "labels": {
                api.LABEL_NAME: "llm",
                api.LABEL_REVISION: revision,
                api.CONTROLLER_UID_LABEL: metadata["uid"],
            },
            "ownerReferences": [
                {
                    "apiVersion": api.API_VERSION,
                    "kind": api.DS_KIND,
                    "name": "llm",
                    "uid": metadata["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "data": {"roles": ds["spec"]["roles"]},
        "revision": 1,
    }
