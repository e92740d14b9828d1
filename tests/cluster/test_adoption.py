"""Who may hand a set an object, on the real control plane: the kit's adoption policy
(metacontroller/adoption-policy.yaml; docs/safety.md, "Who may hand a set a child").

People are service accounts of the test's namespace with the tokens the API server issues: an
admin (the built-in admin role, into which the kit aggregates the verb adopt) and an editor (the
edit role), each also allowed to write LWS, as LeaderWorkerSet's own roles would allow them.
Metacontroller runs as the service account of its production manifests, allowed every ordinary
verb but adopt (`tools.sandbox.identities`): only the kit's binding lets it hand a set its
children.

- the issue's reproduction: with a rollout paused, the editor creates the LWS the set will ask
  for, with the set's labels, `controller-uid` and another image; the API server refuses it
  (and the same with a controller ownerReference, and a Service), and once resumed the set runs
  its own LWS;
- an ownerless LWS the editor made cannot be handed over afterwards (the label, an
  ownerReference), while the editor's other writes pass;
- `kubectl ds adopt --orphans` by the editor is one line, nothing written; by the admin it
  takes back what a set deleted with `--cascade=orphan` left;
- without the kit's binding Metacontroller creates no child (fail closed), and the policy
  type-checks without a warning.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest

from hooks import api
from hooks.core import children
from hooks.kubectl import adopt, rollout
from hooks.kubectl.client import SETS
from tests.cluster import sets
from tests.cluster.test_efficiency import POLICIES, _sync_errors
from tests.cluster.test_kubectl_ds import (
    EVIL,
    get_set,
    kubectl_ds,
    owned_children,
    stored_revision,
    succeeds,
)
from tools.sandbox import controlplane, identities, kube
from tools.sandbox.controlplane import ControlPlane

JsonObject = dict[str, Any]

pytestmark = pytest.mark.usefixtures("lws_controller")

POLICY: Final = "disaggregatedset-adoption"
METACONTROLLER_BINDING: Final = "disaggregatedset-metacontroller-adopt"
LWS_WRITER: Final = "test-lws-writer"
REFUSED: Final = f"ValidatingAdmissionPolicy '{POLICY}' with binding '{POLICY}' denied request"
REVIEWS: Final = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


@dataclass
class Person:
    """A service account of the test's namespace, with a client and a kubeconfig of its own."""

    client: kube.Client
    kubeconfig: Path

    def may_adopt(self, namespace: str, name: str) -> bool:
        attributes = {
            "namespace": namespace,
            "verb": adopt.VERB,
            "group": api.GROUP,
            "resource": api.DS_PLURAL,
            "name": name,
        }
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes},
        }
        allowed: bool = self.client.request("POST", REVIEWS, body=review)["status"]["allowed"]
        return allowed


@dataclass
class People:
    admin: Person
    editor: Person


def _person(plane: ControlPlane, namespace: str, name: str, role: str) -> Person:
    for granted in (role, LWS_WRITER):
        identities.bind(
            plane.client, role=granted, namespace=namespace, name=name, within=namespace
        )
    token = identities.service_account(plane.client, namespace, name)
    config = identities.write_kubeconfig(
        plane.workdir / f"{namespace}-{name}.kubeconfig",
        server=plane.server,
        ca_file=plane.ca_file,
        user=name,
        token=token,
    )
    return Person(kube.Client(server=plane.server, token=token, ca_file=str(plane.ca_file)), config)


@pytest.fixture
def people(control_plane: ControlPlane, namespace: str) -> Iterator[People]:
    """The namespace's admin and editor, once the admin role holds the verb adopt (the cluster
    role aggregation controller copies it there)."""
    writer = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": LWS_WRITER},
        "rules": [
            {
                "apiGroups": [api.LWS_API_VERSION.split("/")[0]],
                "resources": [api.LWS_PLURAL],
                "verbs": list(identities.ORDINARY_VERBS),
            }
        ],
    }
    try:
        control_plane.client.create(identities.CLUSTER_ROLES, writer)
    except kube.ApiError as error:
        if error.code != 409:
            raise
    found = People(
        admin=_person(control_plane, namespace, "admin", "admin"),
        editor=_person(control_plane, namespace, "editor", "edit"),
    )
    try:
        kube.wait_for(
            lambda: found.admin.may_adopt(namespace, "llm"),
            timeout=sets.WAIT_SECONDS,
            message="the admin role aggregates the verb adopt",
        )
        assert not found.editor.may_adopt(namespace, "llm")
        yield found
    finally:
        found.admin.client.close()
        found.editor.client.close()


def planted_lws(client: kube.Client, manifest: JsonObject) -> JsonObject:
    """The prefill LWS `manifest`'s revision will ask for, as the set would make it but for
    another image (a dry run of `manifest`: before the set exists)."""
    revision, stored = stored_revision(client, manifest)
    spec = rollout.read_set(stored).spec
    assert spec is not None
    planted = children.render_lws(
        set_name="llm",
        role=spec.roles[0],
        slice_index=0,
        revision=revision,
        replicas=2,
        policy=None,
    )
    planted = json.loads(json.dumps(planted))
    planted["metadata"]["namespace"] = manifest["metadata"]["namespace"]
    worker = planted["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    worker["spec"]["containers"][0]["image"] = EVIL
    return planted


def refusal(person: Person, resource: kube.Resource, obj: JsonObject) -> str:
    """The API server's refusal of `person`'s create of `obj`, which must be the policy's."""
    with pytest.raises(kube.ApiError) as refused:
        person.client.create(resource, obj)
    assert refused.value.code == 403, refused.value
    assert REFUSED in str(refused.value), refused.value
    return str(refused.value)


def set_reference(ds: JsonObject) -> JsonObject:
    return {
        "apiVersion": api.API_VERSION,
        "kind": api.DS_KIND,
        "name": "llm",
        "uid": ds["metadata"]["uid"],
        "controller": True,
    }


def test_issue33_an_lws_planted_with_the_sets_controller_uid_is_refused_and_the_set_runs_its_own(
    control_plane: ControlPlane, namespace: str, people: People
) -> None:
    """The reproduction of issue 33's second route: pause, apply v2, plant the v2 prefill LWS
    with the set's labels and uid and another image, resume. Metacontroller would have taken it
    (it asks no hook); the API server refuses it, so the set creates and runs its own."""
    client = control_plane.client
    manifest = sets.small_set(namespace, image=sets.IMAGE_V2)
    planted = planted_lws(client, manifest)
    sets.apply_set(control_plane, sets.small_set(namespace))
    ds = sets.wait_available(client, namespace, "llm")
    succeeds(control_plane, namespace, "rollout", "pause", "llm")
    sets.apply_set(control_plane, manifest)
    planted["metadata"]["labels"][api.CONTROLLER_UID_LABEL] = ds["metadata"]["uid"]
    message = refusal(people.editor, kube.LWS, planted)
    assert f'the RBAC verb adopt on disaggregatedsets "llm" in namespace {namespace}' in message
    del planted["metadata"]["labels"][api.CONTROLLER_UID_LABEL]
    planted["metadata"]["ownerReferences"] = [set_reference(ds)]
    assert "a controller ownerReference to the DisaggregatedSet" in refusal(
        people.editor, kube.LWS, planted
    )
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": f"{planted['metadata']['name']}-prv",
            "namespace": namespace,
            "labels": {
                **planted["metadata"]["labels"],
                api.CONTROLLER_UID_LABEL: ds["metadata"]["uid"],
            },
        },
        "spec": {"clusterIP": "None", "selector": {"app": "miner"}},
    }
    refusal(people.editor, kube.SERVICES, service)
    succeeds(control_plane, namespace, "rollout", "resume", "llm")
    revision = rollout.spec_revision(rollout.read_set(get_set(client, namespace)))
    seen = kube.wait_for(
        lambda: sets.observe(client, namespace),
        until=lambda seen: (
            sets.is_available(seen["set"])
            and seen["set"]["status"]["revision"] == revision
            and sorted(seen["lws"]) == [f"llm-0-{revision}-decode", f"llm-0-{revision}-prefill"]
        ),
        timeout=sets.WAIT_SECONDS,
        message=f"rolled out to {revision} on the set's own LWS",
    )
    for lws in seen["lws"].values():
        worker = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]
        assert [c["image"] for c in worker["spec"]["containers"]] == [sets.IMAGE_V2]
        assert [ref["uid"] for ref in lws["metadata"]["ownerReferences"]] == [ds["metadata"]["uid"]]


def test_issue33_an_ownerless_lws_cannot_be_handed_to_the_set_afterwards(
    control_plane: ControlPlane, namespace: str, people: People
) -> None:
    """The editor may create an LWS at a name the set will ask for (no child of the set, which
    `kubectl ds adopt --orphans` checks), but not label it for the set or give it a controller
    ownerReference to the set, nor move one of the set's children to another uid; writes that
    hand nothing over pass."""
    client = control_plane.client
    orphan = planted_lws(client, sets.small_set(namespace, image=sets.IMAGE_V2))
    name = orphan["metadata"]["name"]
    sets.apply_set(control_plane, sets.small_set(namespace))
    ds = sets.wait_available(client, namespace, "llm")
    uid = ds["metadata"]["uid"]
    people.editor.client.create(kube.LWS, orphan)
    editor = people.editor.client
    for patch in (
        {"metadata": {"labels": {api.CONTROLLER_UID_LABEL: uid}}},
        {"metadata": {"ownerReferences": [set_reference(ds)]}},
    ):
        with pytest.raises(kube.ApiError) as refused:
            editor.patch(kube.LWS, name, patch, namespace=namespace)
        assert (refused.value.code, REFUSED in str(refused.value)) == (403, True), refused.value
    (child,) = (
        n for n in sets.lws_by_name(client, namespace) if n.endswith("-prefill") and n != name
    )
    with pytest.raises(kube.ApiError) as moved:
        editor.patch(
            kube.LWS,
            child,
            {"metadata": {"labels": {api.CONTROLLER_UID_LABEL: "x"}}},
            namespace=namespace,
        )
    assert REFUSED in str(moved.value)
    editor.patch(
        kube.LWS, child, {"metadata": {"labels": {"team": "serving"}}}, namespace=namespace
    )
    editor.patch(kube.LWS, name, {"metadata": {"labels": {"team": "serving"}}}, namespace=namespace)
    stored = client.get(kube.LWS, name, namespace=namespace)
    assert api.CONTROLLER_UID_LABEL not in stored["metadata"]["labels"]
    assert "ownerReferences" not in stored["metadata"]
    assert sets.is_available(get_set(client, namespace))


def test_issue33_adopt_is_one_line_for_an_editor_and_takes_back_orphans_for_an_admin(
    control_plane: ControlPlane, namespace: str, people: People
) -> None:
    """A set deleted with `--cascade=orphan` and created again: its old children are orphans,
    each exactly what the new set would make. The editor's `kubectl ds adopt --orphans` says in
    one line that it takes the verb adopt and writes nothing; the admin's hands them all over,
    and Metacontroller (its own verb, the kit's binding) adds its ownerReference."""
    client = control_plane.client
    manifest = sets.small_set(namespace)
    sets.apply_set(control_plane, manifest)
    sets.wait_available(client, namespace, "llm")
    kube.wait_for(
        lambda: owned_children(client, namespace),
        until=lambda found: len(found) == 5,  # 2 LWS, 2 Services, 1 record
        timeout=sets.WAIT_SECONDS,
        message="2 LWS, 2 Services and a record",
    )
    control_plane.kubectl(
        "delete", "disaggregatedset", "llm", "-n", namespace, "--cascade=orphan", "--wait=true"
    )
    before = kube.wait_for(
        lambda: owned_children(client, namespace),
        until=lambda found: all("ownerReferences" not in o["metadata"] for o in found.values()),
        timeout=sets.WAIT_SECONDS,
        message="the children orphaned",
    )
    sets.apply_set(control_plane, manifest)
    uid = get_set(client, namespace)["metadata"]["uid"]
    refused = kubectl_ds(
        control_plane, namespace, "adopt", "llm", "--orphans", kubeconfig=people.editor.kubeconfig
    )
    assert (refused.returncode, refused.stdout) == (1, ""), refused.stderr
    assert refused.stderr == (
        f"kubectl ds adopt: error: you may not adopt for {namespace}/llm: that takes the RBAC verb"
        f" adopt on the set (kubectl auth can-i adopt {SETS}/llm -n {namespace}),"
        " which the admin role has, and the kit's admission policy refuses the label without it;"
        " nothing was written\n"
    )
    assert owned_children(client, namespace) == before
    out = kubectl_ds(
        control_plane, namespace, "adopt", "llm", "--orphans", kubeconfig=people.admin.kubeconfig
    )
    assert out.returncode == 0, (out.stdout, out.stderr)
    assert (
        out.stdout.splitlines()[-1]
        == f"{namespace}/llm: 5 adopted, 0 already adopted, 0 left alone"
    )
    sets.wait_available(client, namespace, "llm")
    after = kube.wait_for(
        lambda: owned_children(client, namespace),
        until=lambda found: all(
            [ref["uid"] for ref in o["metadata"].get("ownerReferences", [])] == [uid]
            for o in found.values()
        ),
        timeout=sets.WAIT_SECONDS,
        message="every child owned by the new set",
    )
    assert {key: o["metadata"]["uid"] for key, o in after.items()} == {
        key: o["metadata"]["uid"] for key, o in before.items()
    }


def _stored_as_created(obj: JsonObject) -> JsonObject:
    """`obj` without the fields the API server sets, to create it again."""
    metadata = {
        k: v
        for k, v in obj["metadata"].items()
        if k not in ("uid", "resourceVersion", "creationTimestamp", "managedFields")
    }
    return {**obj, "metadata": metadata}


def test_without_the_kits_binding_metacontroller_hands_a_set_no_child(
    control_plane: ControlPlane, namespace: str
) -> None:
    """Fail closed: Metacontroller's service account without the verb (a binding deleted, or
    naming another account than the one Metacontroller runs as) creates no child, and the
    SyncError event on the set says why; with the binding back, the set rolls out."""
    client = control_plane.client
    binding = client.get(identities.CLUSTER_ROLE_BINDINGS, METACONTROLLER_BINDING)
    account = "system:serviceaccount:{}:{}".format(*controlplane.METACONTROLLER_ACCOUNT)
    client.delete(identities.CLUSTER_ROLE_BINDINGS, METACONTROLLER_BINDING)
    try:
        kube.wait_for(
            lambda: _metacontroller_may_adopt(client, account, namespace),
            until=lambda allowed: not allowed,
            timeout=sets.WAIT_SECONDS,
            message="Metacontroller's account without the verb adopt",
        )
        sets.apply_set(control_plane, sets.small_set(namespace))
        events = kube.wait_for(
            lambda: _sync_errors(client, namespace),
            until=lambda found: any(REFUSED in event["message"] for event in found),
            timeout=sets.WAIT_SECONDS,
            message="a SyncError event quoting the adoption policy",
        )
        assert events
        assert sets.lws_by_name(client, namespace) == {}
    finally:
        client.create(identities.CLUSTER_ROLE_BINDINGS, _stored_as_created(binding))
    sets.wait_available(client, namespace, "llm")


def _metacontroller_may_adopt(client: kube.Client, account: str, namespace: str) -> bool:
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": account,
            "groups": ["system:serviceaccounts", "system:authenticated"],
            "resourceAttributes": {
                "namespace": namespace,
                "verb": adopt.VERB,
                "group": api.GROUP,
                "resource": api.DS_PLURAL,
            },
        },
    }
    path = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
    allowed: bool = client.request("POST", path, body=review)["status"]["allowed"]
    return allowed


def test_the_adoption_policy_type_checks_without_a_warning(control_plane: ControlPlane) -> None:
    """The API server's type check of every expression against the matched kinds' schemas (the
    LWS CRD's, Service's, the kit's own CRDs'): no warning."""
    policy = kube.wait_for(
        lambda: control_plane.client.get(POLICIES, POLICY),
        until=lambda found: (
            found.get("status", {}).get("observedGeneration") == found["metadata"]["generation"]
        ),
        timeout=sets.WAIT_SECONDS,
        message="the policy type-checked",
    )
    assert policy["status"]["typeChecking"].get("expressionWarnings", []) == []
