"""What syncs cost on the real stack (docs/operations.md, "Metacontroller wiring").

A settled set answers exactly its observed state: a sync it did not need (here, one caused by an
unrelated annotation) writes nothing and asks for no resync. The customize hook asks for no LWS at
all (a set with no External role asks for nothing), so an LWS event costs Metacontroller no pass
over every set; an LWS the set does not own at a name the set wants, whatever its labels, keeps
Metacontroller's create from succeeding, and the set finds it from its own status (the child it
asked for has not appeared), reports it (ChildNotCreated: the hook cannot see the holder) and
leaves it alone; Metacontroller posts no event for it. A create the API server refuses for another
reason (here an admission policy, as a quota or an LWS webhook that is down would) is reported
the same way, and Metacontroller's SyncError event on the set says why (issue 25, item 7).
"""

from __future__ import annotations

from typing import Any

import pytest

from hooks import api
from hooks.gocompat import revision
from tests.cluster import sets
from tools.sandbox import kube
from tools.sandbox.controlplane import ControlPlane

JsonObject = dict[str, Any]

pytestmark = pytest.mark.usefixtures("lws_controller")


def _versions(client: kube.Client, namespace: str) -> dict[tuple[str, str], str]:
    """The resourceVersion of every LWS, Service and scaler of a namespace."""
    return {
        (resource.plural, obj["metadata"]["name"]): obj["metadata"]["resourceVersion"]
        for resource in (kube.LWS, kube.SERVICES, kube.SCALERS)
        for obj in client.list(resource, namespace=namespace)
    }


def _quiet(control_plane: ControlPlane, key: str, *, after: int = 0) -> list[JsonObject]:
    """The set's sync calls, once there are more than `after` and the last one wrote nothing."""
    calls: list[JsonObject] = kube.wait_for(
        lambda: control_plane.hook_calls("sync", key),
        until=lambda found: len(found) > after and not any(found[-1]["writes"].values()),
        show=lambda found: f"{len(found)} sync call(s), the last: {found[-1] if found else None}",
        timeout=sets.WAIT_SECONDS,
        message=f"a sync of {key} that writes nothing (after {after} calls)",
    )
    return calls


def test_a_settled_set_syncs_without_writes_or_resyncs(
    control_plane: ControlPlane, namespace: str
) -> None:
    client = control_plane.client
    key = f"{namespace}/llm"
    sets.apply_set(control_plane, sets.small_set(namespace, external="decode"))
    sets.wait_available(client, namespace, "llm")
    seen = len(_quiet(control_plane, key))
    children = _versions(client, namespace)
    status = client.get(kube.DISAGGREGATED_SETS, "llm", namespace=namespace)["status"]

    control_plane.kubectl(
        "annotate", "-n", namespace, "disaggregatedset/llm", "example.com/touched=yes"
    )
    calls = _quiet(control_plane, key, after=seen)[seen:]

    assert calls, "the annotation caused a sync"
    for call in calls:
        assert call["writes"] == {"create": 0, "update": 0, "delete": 0, "status": 0}
        assert call["resync_after"] is None
    assert _versions(client, namespace) == children
    assert client.get(kube.DISAGGREGATED_SETS, "llm", namespace=namespace)["status"] == status


def test_a_foreign_lws_at_a_wanted_name_is_found_and_reported(
    control_plane: ControlPlane, namespace: str
) -> None:
    client = control_plane.client
    key = f"{namespace}/llm"
    sets.apply_set(control_plane, sets.small_set(namespace))
    sets.wait_available(client, namespace, "llm")
    # No External role: the customize hook asks for nothing.
    assert _quiet(control_plane, key)[-1]["related"] == 0

    # An LWS that is not the set's, at the name the next revision's prefill will want; it does not
    # carry the set's labels either.
    upgrade = sets.small_set(namespace, image=sets.IMAGE_V2)
    defaulted = client.create(
        kube.DISAGGREGATED_SETS,
        {**upgrade, "metadata": {**upgrade["metadata"], "name": "dry-run"}},
        dry_run=True,
    )
    target = revision.compute_revision(
        [
            (role["name"], role["spec"]["leaderWorkerTemplate"])
            for role in defaulted["spec"]["roles"]
        ]
    )
    name = f"llm-0-{target}-prefill"
    own = next(
        lws
        for lws in client.list(kube.LWS, namespace=namespace)
        if lws["metadata"]["labels"][api.LABEL_ROLE] == "prefill"
    )
    labels = {"app": "someone-else"}
    client.create(
        kube.LWS,
        {
            "apiVersion": api.LWS_API_VERSION,
            "kind": api.LWS_KIND,
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": own["spec"],
        },
    )

    sets.apply_set(control_plane, upgrade)
    ds = _wait_not_created(client, namespace)
    degraded = sets.condition(ds, "Degraded")
    assert degraded is not None
    assert name in degraded["message"]
    # Metacontroller only logs AlreadyExists: no event names the LWS.
    assert not [event for event in _sync_errors(client, namespace) if name in event["message"]]
    assert {"kind": api.LWS_KIND, "name": name} in [
        {"kind": entry["kind"], "name": entry["name"]} for entry in ds["status"]["creating"]
    ]
    foreign = client.get(kube.LWS, name, namespace=namespace)
    assert "ownerReferences" not in foreign["metadata"]
    assert foreign["metadata"]["labels"] == labels

    client.delete(kube.LWS, name, namespace=namespace)
    kube.wait_for(
        lambda: sets.observe(client, namespace),
        until=lambda seen: (
            sets.is_available(seen["set"])
            and seen["set"]["status"]["revision"] == target
            and len(seen["lws"]) == 2
        ),
        timeout=sets.WAIT_SECONDS,
        message="the rollout completed once the foreign LWS was gone",
    )
    owned = client.get(kube.LWS, name, namespace=namespace)
    assert owned["metadata"]["ownerReferences"][0]["name"] == "llm"


def _wait_not_created(client: kube.Client, namespace: str) -> JsonObject:
    ds: JsonObject = kube.wait_for(
        lambda: client.get(kube.DISAGGREGATED_SETS, "llm", namespace=namespace),
        until=lambda ds: (
            (c := sets.condition(ds, "Degraded")) is not None and c["reason"] == "ChildNotCreated"
        ),
        timeout=sets.WAIT_SECONDS,
        message="Degraded=ChildNotCreated",
    )
    return ds


def _sync_errors(client: kube.Client, namespace: str) -> list[JsonObject]:
    """Metacontroller's SyncError events on the set."""
    return [
        event
        for event in client.list(EVENTS, namespace=namespace)
        if event.get("reason") == "SyncError"
        and event.get("involvedObject", {}).get("name") == "llm"
    ]


EVENTS = kube.Resource("", "v1", "events")
POLICIES = kube.Resource(
    "admissionregistration.k8s.io", "v1", "validatingadmissionpolicies", namespaced=False
)
BINDINGS = kube.Resource(
    "admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings", namespaced=False
)
REFUSAL = "no more LeaderWorkerSets in this namespace (a test's admission policy)"


def test_issue25_item7_a_create_the_api_server_refuses_is_reported_as_not_created(
    control_plane: ControlPlane, namespace: str
) -> None:
    """No object holds the name: the set reports ChildNotCreated, naming the LWS and where to
    look, and the SyncError event it points to says why."""
    client = control_plane.client
    sets.apply_set(control_plane, sets.small_set(namespace))
    sets.wait_available(client, namespace, "llm")
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": f"refuse-lws-{namespace}"},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [api.LWS_API_VERSION.split("/")[0]],
                        "apiVersions": ["*"],
                        "operations": ["CREATE"],
                        "resources": [api.LWS_PLURAL],
                    }
                ]
            },
            "validations": [{"expression": "false", "message": REFUSAL}],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": f"refuse-lws-{namespace}"},
        "spec": {
            "policyName": policy["metadata"]["name"],
            "validationActions": ["Deny"],
            "matchResources": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
            },
        },
    }
    client.create(POLICIES, policy)
    client.create(BINDINGS, binding)
    try:
        probe = sets.small_set(namespace, image=sets.IMAGE_V2)
        kube.wait_for(  # the policy is in force once the API server refuses a dry run
            lambda: _refused(client, namespace),
            timeout=sets.WAIT_SECONDS,
            message="the admission policy refuses LWS creates",
        )
        sets.apply_set(control_plane, probe)
        ds = _wait_not_created(client, namespace)
        degraded = sets.condition(ds, "Degraded")
        assert degraded is not None
        assert f"{api.LWS_KIND} 'llm-0-{ds['status']['revision']}-" in degraded["message"]
        assert "SyncError event" in degraded["message"]
        events = kube.wait_for(
            lambda: _sync_errors(client, namespace),
            until=lambda found: any(REFUSAL in event["message"] for event in found),
            timeout=sets.WAIT_SECONDS,
            message="Metacontroller's SyncError event naming the refusal",
        )
        assert events
    finally:
        client.delete(BINDINGS, binding["metadata"]["name"])
        client.delete(POLICIES, policy["metadata"]["name"])
    kube.wait_for(
        lambda: sets.observe(client, namespace),
        until=lambda seen: (
            sets.is_available(seen["set"])
            and (sets.condition(seen["set"], "Degraded") or {}).get("status") == "False"
        ),
        timeout=sets.WAIT_SECONDS,
        message="the rollout completes once the API server accepts the LWS",
    )


def _refused(client: kube.Client, namespace: str) -> bool:
    """Whether the API server refuses a copy of one of the set's LWS for the policy's reason."""
    own = client.list(kube.LWS, namespace=namespace)[0]
    lws = {
        "apiVersion": api.LWS_API_VERSION,
        "kind": api.LWS_KIND,
        "metadata": {"name": "probe", "namespace": namespace},
        "spec": own["spec"],
    }
    try:
        client.create(kube.LWS, lws, dry_run=True)
    except kube.ApiError as error:
        return REFUSAL in str(error)
    return False
