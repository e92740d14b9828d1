"""The revision history on the real control plane: ControllerRevisions as children.

What Metacontroller, the API server and the garbage collector decide: the child type is wired
and allowed, each revision the set moves to gets its record with the next number (a revert the
next number again, its data untouched), the limit prunes the oldest records that no LWS still
uses, and deleting the set deletes its history.
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
REVISIONS = kube.Resource("apps", "v1", "controllerrevisions")
CLUSTER_ROLES = kube.Resource("rbac.authorization.k8s.io", "v1", "clusterroles", namespaced=False)
IMAGES = [f"vllm/vllm-openai:v0.{minor}.0" for minor in (11, 12, 13, 14)]


def history(client: kube.Client, namespace: str) -> dict[str, JsonObject]:
    """The set's ControllerRevisions by revision label."""
    return {
        item["metadata"]["labels"][api.LABEL_REVISION]: item
        for item in client.list(REVISIONS, namespace=namespace)
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


def test_stock_metacontroller_rbac_may_manage_controllerrevisions(
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
                "controllerrevisions.apps",
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
    """`kubectl ds rollout history` needs only what the built-in view role grants: the API
    server's own `system:aggregate-to-view` (aggregated into view by kube-controller-manager,
    which the test control plane does not run for roles) reads ControllerRevisions, and the
    kit's `disaggregatedset-view` reads the sets."""
    rules = {
        (group, resource): set(rule["verbs"])
        for name in ("system:aggregate-to-view", "disaggregatedset-view")
        for rule in control_plane.client.get(CLUSTER_ROLES, name)["rules"]
        for group in rule.get("apiGroups", [])
        for resource in rule.get("resources", [])
    }
    for key in (("apps", "controllerrevisions"), (api.GROUP, api.DS_PLURAL)):
        assert {"get", "list", "watch"} <= rules[key], key


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
        message="the first revision's ControllerRevision",
    )
    assert record["metadata"]["name"] == f"llm-{first}"
    assert record["revision"] == 1
    assert record["metadata"]["annotations"][api.CHANGE_CAUSE_ANNOTATION] == "first model"
    [owner] = record["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["controller"]) == (api.DS_KIND, "llm", True)
    stored = client.get(kube.DISAGGREGATED_SETS, "llm", namespace=namespace)
    assert [role["spec"] for role in record["data"]["roles"]] == [
        role["spec"] for role in stored["spec"]["roles"]
    ]

    second = roll_to(control_plane, namespace, IMAGES[1])
    assert numbers(client, namespace) == {first: 1, second: 2}
    back = roll_to(control_plane, namespace, IMAGES[0])  # a revert to the first revision
    assert back == first
    reverted = history(client, namespace)[first]
    assert numbers(client, namespace) == {first: 3, second: 2}
    assert reverted["data"] == record["data"]  # immutable, and unchanged
    third = roll_to(control_plane, namespace, IMAGES[2])
    fourth = roll_to(control_plane, namespace, IMAGES[3])
    # Old revisions: second (2), first (3), third (4); the limit keeps two.
    assert numbers(client, namespace) == {first: 3, third: 4, fourth: 5}
    assert second not in history(client, namespace)

    client.delete(kube.DISAGGREGATED_SETS, "llm", namespace=namespace)
    kube.wait_for(
        lambda: history(client, namespace),
        until=lambda found: not found,
        timeout=sets.WAIT_SECONDS,
        message="the garbage collector deletes the history with the set",
    )
