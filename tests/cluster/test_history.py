"""The revision history on the real control plane: DisaggregatedSetRevisions as children.

What Metacontroller, the API server and the garbage collector decide: the child type is wired
and allowed, each revision the set moves to gets its record with the next number (a revert the
next number again, its roles untouched and immutable), `kubectl get` lists the history, the limit
prunes the oldest records that no LWS still uses, and deleting the set deletes its history. And
the compact form (issue 33 item 2): the largest set the API server stores, and a 130 KiB
change-cause, get their records within the bound on annotations (Metacontroller's last-applied
copy included), undo restores them exactly, roles too random to pack give none (and status says
so), and the CRD keeps one form of roles.
"""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest

from hooks import api
from hooks.api import limits
from hooks.core import compact
from tests import builders
from tests.cluster import handover, sets
from tests.cluster.test_kubectl_ds import kubectl_ds
from tools.sandbox import kube
from tools.sandbox.controlplane import ControlPlane
from tools.sandbox.lws import FakeLwsController

JsonObject = dict[str, Any]
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
    assert [role["spec"] for role in builders.record_roles(record)] == [
        role["spec"] for role in stored["spec"]["roles"]
    ]

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
    reordered = list(reversed(builders.record_roles(record)))  # the order is the revision's
    changed = json.dumps({"packedRoles": compact.pack_roles(reordered)})
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
    assert refused.returncode != 0 and "packedRoles are immutable" in refused.stderr
    back = roll_to(control_plane, namespace, IMAGES[0])  # a revert to the first revision
    assert back == first
    reverted = history(client, namespace)[first]
    assert numbers(client, namespace) == {first: 3, second: 2}
    assert reverted["packedRoles"] == record["packedRoles"]  # immutable, and unchanged
    third = roll_to(control_plane, namespace, IMAGES[2])
    fourth = roll_to(control_plane, namespace, IMAGES[3])
    # Old revisions: second (2), first (3), third (4); the limit keeps two.
    assert numbers(client, namespace) == {first: 3, third: 4, fourth: 5}
    assert second not in history(client, namespace)

    client.delete(kube.DISAGGREGATED_SETS, "llm", namespace=namespace)
    kube.wait_for(
        lambda: history(client, namespace),
        until=lambda found: found == {},
        timeout=sets.WAIT_SECONDS,
        message="the garbage collector deletes the history with the set",
    )


# --- the compact form (issue 33 item 2) ----------------------------------------------------------

# A set holds at most what etcd takes in one object (1.5 MiB by default, managedFields included):
# ten roles of this many arguments each come close (about 1.5 MB).
LARGEST_ARGUMENTS = 5600
# Ten roles of about 30 KiB each (the issue's case, 300 KB: more than a client-side apply's
# annotation can hold).
LARGE_ARGUMENTS = 1150


def _server_side(plane: ControlPlane, manifest: JsonObject) -> None:
    """`kubectl apply --server-side`, as a set too large for the client-side annotation is
    applied."""
    plane.kubectl("apply", "--server-side", "-f", "-", stdin=json.dumps(manifest))


def _large_set(namespace: str, image: str, *, arguments: int) -> JsonObject:
    """Ten roles, each template holding `arguments` arguments."""
    roles = []
    for index in range(api.MAX_ROLES):
        role = builders.make_role(f"r{index}", image=image)
        container = role["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
        container["args"] = [f"--setting-{index}-{n % 61}=value-{n % 97}" for n in range(arguments)]
        roles.append(role)
    return sets.manifest(namespace, roles=roles)


def _annotation_bytes(obj: JsonObject) -> int:
    """The bytes of an object's annotations as the API server counts them (keys and values)."""
    annotations = obj["metadata"].get("annotations", {})
    return sum(len(key.encode()) + len(value.encode()) for key, value in annotations.items())


def _record_sizes(client: kube.Client, namespace: str) -> dict[str, tuple[int, int]]:
    """Each record's size as the API server returns it, and its annotations' bytes."""
    return {
        revision: (len(json.dumps(record)), _annotation_bytes(record))
        for revision, record in history(client, namespace).items()
    }


def test_issue33_item2_the_largest_set_the_api_server_stores_has_its_records(
    control_plane: ControlPlane, namespace: str, lws_controller: FakeLwsController
) -> None:
    """A set as large as etcd stores one gets a record of each revision: its roles packed,
    exactly as the set had them, within the API server's bound on annotations with
    Metacontroller's last-applied copy."""
    client = control_plane.client
    first_manifest = _large_set(namespace, IMAGES[0], arguments=LARGEST_ARGUMENTS)
    assert len(json.dumps(first_manifest)) > 1_450_000
    _server_side(control_plane, first_manifest)
    first_set = sets.wait_available(client, namespace, "llm")
    first = first_set["status"]["revision"]
    _server_side(control_plane, _large_set(namespace, IMAGES[1], arguments=LARGEST_ARGUMENTS))
    second = sets.wait_available(client, namespace, "llm")["status"]["revision"]
    kube.wait_for(
        lambda: numbers(client, namespace),
        until=lambda found: found == {first: 1, second: 2},
        timeout=sets.WAIT_SECONDS,
        message="a record of each revision",
    )
    sizes = _record_sizes(client, namespace)
    print(f"records of the largest set (object bytes, annotation bytes): {sizes}")
    assert all(used <= limits.ANNOTATIONS_MAX_BYTES for _, used in sizes.values())
    assert (
        builders.record_roles(history(client, namespace)[first])
        == (first_manifest["spec"]["roles"])
    )


def test_issue33_item2_ten_roles_of_30_kib_have_their_records_and_undo_restores_them_exactly(
    control_plane: ControlPlane, namespace: str, lws_controller: FakeLwsController
) -> None:
    """The issue's case: a record of 311 KB would not fit; packed, it does, and `kubectl ds
    rollout undo` puts the first revision's templates back byte for byte."""
    client = control_plane.client
    first_manifest = _large_set(namespace, IMAGES[0], arguments=LARGE_ARGUMENTS)
    assert len(json.dumps(first_manifest)) > 300_000
    _server_side(control_plane, first_manifest)
    first_set = sets.wait_available(client, namespace, "llm")
    first = first_set["status"]["revision"]
    _server_side(control_plane, _large_set(namespace, IMAGES[1], arguments=LARGE_ARGUMENTS))
    second = sets.wait_available(client, namespace, "llm")["status"]["revision"]
    kube.wait_for(
        lambda: numbers(client, namespace),
        until=lambda found: found == {first: 1, second: 2},
        timeout=sets.WAIT_SECONDS,
        message="a record of each revision",
    )
    print(f"records of ten roles of 30 KiB: {_record_sizes(client, namespace)}")

    # A request this large (over a mebibyte with the set's LWS and records) keeps Metacontroller
    # rewriting the set's status for a while (its informer lags its own writes), and undo
    # refuses a set that changes while it runs: it writes while Metacontroller is stopped.
    control_plane.stop_process(handover.METACONTROLLER)
    try:
        undone = kubectl_ds(control_plane, namespace, "rollout", "undo", "llm")
    finally:
        control_plane.start_metacontroller()
    assert undone.returncode == 0, (undone.stdout, undone.stderr)
    back = sets.wait_available(client, namespace, "llm")
    assert back["status"]["revision"] == first
    assert [role["spec"]["leaderWorkerTemplate"] for role in back["spec"]["roles"]] == [
        role["spec"]["leaderWorkerTemplate"] for role in first_set["spec"]["roles"]
    ]


def test_issue33_item2_a_change_cause_of_130_kib_is_recorded_cut_with_a_marker(
    control_plane: ControlPlane, namespace: str, lws_controller: FakeLwsController
) -> None:
    client = control_plane.client
    cause = "kubectl apply -f llm.yaml: " + "vllm serve --a-long-flag " * 5460
    assert len(cause) > 130 * 1024
    manifest = sets.small_set(namespace)
    manifest["metadata"]["annotations"] = {api.CHANGE_CAUSE_ANNOTATION: cause}
    _server_side(control_plane, manifest)
    revision = sets.wait_available(client, namespace, "llm")["status"]["revision"]
    record = kube.wait_for(
        lambda: history(client, namespace).get(revision),
        timeout=sets.WAIT_SECONDS,
        message="the revision's record",
    )
    kept = record["metadata"]["annotations"][api.CHANGE_CAUSE_ANNOTATION]
    assert kept == compact.cut_change_cause(cause)
    assert kept.endswith(f" [cut: {len(cause)} bytes in all]")
    print(
        "record with a 130 KiB change-cause (object bytes, annotation bytes):"
        f" {(len(json.dumps(record)), _annotation_bytes(record))}"
    )
    assert _annotation_bytes(record) <= limits.ANNOTATIONS_MAX_BYTES
    listed = control_plane.kubectl("get", api.REVISION_SHORT_NAME, "-n", namespace).stdout
    assert "[cut: " in listed


def test_issue33_item2_roles_too_random_to_pack_give_no_record_and_status_says_so(
    control_plane: ControlPlane, namespace: str, lws_controller: FakeLwsController
) -> None:
    """Random bytes do not compress: two roles with 150 KiB of them each (a valid set, and each
    LWS fits) pack past what a record holds. The set rolls out without a record of that
    revision, says so in status.history, and is not Degraded (no record is asked for)."""
    client = control_plane.client
    manifest = sets.small_set(namespace)
    noise = random.Random(33)
    for role in manifest["spec"]["roles"]:
        container = role["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
        container["env"] = [{"name": "BLOB", "value": noise.randbytes(112 * 1024).hex()}]
    _server_side(control_plane, manifest)
    done = sets.wait_available(client, namespace, "llm")
    note = done["status"].get("history", "")
    assert note.startswith(f"revision {done['status']['revision']} has no record:"), note
    degraded = sets.condition(done, "Degraded")
    assert degraded is not None and degraded["status"] == "False"
    assert history(client, namespace) == {}


def test_issue33_item2_the_crd_keeps_a_records_roles_in_one_form(
    control_plane: ControlPlane, namespace: str
) -> None:
    """Either packedRoles or roles, never both nor neither, and never the other form later."""
    spec = api.DisaggregatedSetSpec.model_validate(builders.make_ds()["spec"])
    listed = builders.make_record(
        set_name="other", revision="0badc0de", number=1, roles=spec.roles, legacy=True
    )
    listed["metadata"]["namespace"] = namespace
    both = {**copy.deepcopy(listed), "packedRoles": compact.pack_roles(listed["roles"])}
    both["metadata"]["name"] = "other-both"
    neither = {key: value for key, value in listed.items() if key != "roles"}
    neither["metadata"] = {**listed["metadata"], "name": "other-neither"}
    for obj in (both, neither):
        with pytest.raises(kube.ApiError, match="holds its roles once"):
            control_plane.client.create(kube.REVISIONS, obj)
    control_plane.client.create(kube.REVISIONS, listed)  # as the previous build wrote them
    switched = json.dumps({"roles": None, "packedRoles": both["packedRoles"]})
    refused = control_plane.kubectl(
        "patch",
        api.REVISION_SHORT_NAME,
        "other-0badc0de",
        "-n",
        namespace,
        "--type=merge",
        "-p",
        switched,
        check=False,
    )
    assert refused.returncode != 0 and "keeps the form" in refused.stderr, refused.stderr


# --- a history that starts from what runs (issue 33 item 5) --------------------------------------


def _held_rollout(plane: ControlPlane, namespace: str, manifest: JsonObject) -> tuple[str, str]:
    """`manifest` rolled out, then its v2 held at 50% (both revisions serving): the revisions."""
    client = plane.client
    sets.apply_set(plane, manifest)
    old = sets.wait_available(client, namespace, "llm")["status"]["revision"]
    newer = copy.deepcopy(manifest)
    newer["metadata"]["annotations"] = {api.ANNOTATION_ROLLOUT_HOLD_AT: "50%"}
    for role in newer["spec"]["roles"]:
        role["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"] = (
            sets.IMAGE_V2
        )
    sets.apply_set(plane, newer)
    held = kube.wait_for(
        lambda: client.get(kube.DISAGGREGATED_SETS, "llm", namespace=namespace),
        until=lambda ds: (
            ds["status"].get("observedGeneration") == ds["metadata"]["generation"]
            and (sets.condition(ds, "Progressing") or {}).get("reason") == "RolloutHeld"
        ),
        timeout=sets.WAIT_SECONDS,
        message="the rollout to v2 held at 50%",
    )
    return old, held["status"]["revision"]


@pytest.mark.parametrize("how", ["undo", "reapply"])
def test_issue33_item5_a_running_revision_whose_record_is_gone_gets_it_back_and_undo_goes_back(
    control_plane: ControlPlane, namespace: str, lws_controller: FakeLwsController, how: str
) -> None:
    """A held canary whose old revision's record is deleted (as after an upgrade from a build
    without the history, or a record lost otherwise) while the old LWS still run: the hooks make
    it again from those LWS, below the new revision's, so `rollout status` names the revision
    `undo` goes back to, and undo, or applying the old manifest again, is a rollback the hold
    does not stop."""
    client = control_plane.client
    manifest = sets.small_set(namespace, prefill=2, decode=1)
    old, new = _held_rollout(control_plane, namespace, manifest)
    original = history(client, namespace)[old]
    client.delete(kube.REVISIONS, f"llm-{old}", namespace=namespace)
    rebuilt = kube.wait_for(
        lambda: history(client, namespace).get(old),
        until=lambda record: (
            record is not None and record["metadata"]["uid"] != original["metadata"]["uid"]
        ),
        timeout=sets.WAIT_SECONDS,
        message="the old revision's record made again from its LWS",
    )
    assert (rebuilt["revision"], rebuilt["firstRevision"]) == (1, 1)
    assert numbers(client, namespace) == {old: 1, new: 2}
    assert builders.record_roles(rebuilt) == [
        {key: value for key, value in role.items() if key != "spec"}
        | {"spec": {k: v for k, v in role["spec"].items() if k != "replicas"}}
        for role in builders.record_roles(original)
    ]
    status = kubectl_ds(
        control_plane, namespace, "rollout", "status", "llm", "--timeout", f"{sets.WAIT_SECONDS}s"
    )
    assert status.returncode == 0, status.stderr
    assert status.stdout.splitlines()[-1].endswith(
        f"`kubectl ds rollout undo llm` goes back to revision 1 ({old})"
    )

    if how == "undo":
        undone = kubectl_ds(control_plane, namespace, "rollout", "undo", "llm")
        assert undone.returncode == 0, undone.stderr
    else:
        again = copy.deepcopy(manifest)
        again["metadata"]["annotations"] = {api.ANNOTATION_ROLLOUT_HOLD_AT: "50%"}
        sets.apply_set(control_plane, again)
    back = sets.wait_available(client, namespace, "llm")
    assert back["status"]["revision"] == old  # the hold did not stop the rollback
    kube.wait_for(
        lambda: set(sets.lws_by_name(client, namespace)),
        until=lambda names: all(old in name for name in names),
        timeout=sets.WAIT_SECONDS,
        message="only the old revision's LWS left",
    )
    assert numbers(client, namespace) == {old: 3, new: 2}


def test_issue33_item5_a_running_revision_whose_record_cannot_be_made_is_never_offered_to_undo(
    control_plane: ControlPlane, namespace: str, lws_controller: FakeLwsController
) -> None:
    """The role's pod template carries an `app` label of its own, which the set overrides on
    its LWS: the old revision's record, once deleted, cannot be made from them. The status
    says so, `rollout status` offers no undo, and undo refuses in one line."""
    manifest = sets.small_set(namespace, prefill=2, decode=1)
    template = manifest["spec"]["roles"][0]["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    template.setdefault("metadata", {}).setdefault("labels", {})["app"] = "mine"
    old, new = _held_rollout(control_plane, namespace, manifest)
    client = control_plane.client
    client.delete(kube.REVISIONS, f"llm-{old}", namespace=namespace)
    noted = kube.wait_for(
        lambda: client.get(kube.DISAGGREGATED_SETS, "llm", namespace=namespace),
        until=lambda ds: (
            ds["status"]
            .get("history", "")
            .startswith(f"revision {old} runs without a record, and none can be made")
        ),
        timeout=sets.WAIT_SECONDS,
        message="status.history naming the old revision",
    )
    assert "overrides" in noted["status"]["history"]
    assert numbers(client, namespace) == {new: 2}
    status = kubectl_ds(
        control_plane, namespace, "rollout", "status", "llm", "--timeout", f"{sets.WAIT_SECONDS}s"
    )
    assert status.returncode == 0, status.stderr
    assert "has nothing to go back to (no revision before the current one" in status.stdout
    assert "goes back" not in status.stdout
    undone = kubectl_ds(control_plane, namespace, "rollout", "undo", "llm")
    assert undone.returncode == 1 and len(undone.stderr.strip().splitlines()) == 1
