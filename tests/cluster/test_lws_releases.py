"""A role asking for volumes on each LeaderWorkerSet release's CRD (docs/operations.md, "What
runs with what"): where the CRD knows `volumeClaimTemplates` the LWS keeps them; where it does not
(v0.7.0), the API server drops them without an error, and the set says so (Degraded,
LWSFieldDropped) instead of running without them, and never rolls onto such an LWS.

Whether the field survives is read from the CRD the API server has installed, not assumed from
the release's name.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from hooks import api
from tests.cluster import sets
from tools.sandbox import kube
from tools.sandbox.controlplane import ControlPlane

JsonObject = dict[str, Any]

pytestmark = [pytest.mark.usefixtures("lws_controller"), pytest.mark.lws_releases]

VOLUMES = [
    {
        "metadata": {"name": "model-cache"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
]
FIELD = "spec.leaderWorkerTemplate.volumeClaimTemplates"


def knows_volumes(client: kube.Client) -> bool:
    """Whether the installed LeaderWorkerSet CRD has leaderWorkerTemplate.volumeClaimTemplates."""
    crd = client.get(kube.CRDS, f"{api.LWS_PLURAL}.{api.LWS_API_VERSION.split('/')[0]}")
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    template = schema["properties"]["spec"]["properties"]["leaderWorkerTemplate"]
    return "volumeClaimTemplates" in template["properties"]


def with_volumes(manifest: JsonObject) -> JsonObject:
    changed = copy.deepcopy(manifest)
    role = changed["spec"]["roles"][0]
    role["spec"]["leaderWorkerTemplate"]["volumeClaimTemplates"] = VOLUMES
    return changed


def degraded_for_volumes(ds: JsonObject) -> bool:
    degraded = sets.condition(ds, "Degraded")
    return (
        degraded is not None
        and degraded["status"] == "True"
        and degraded["reason"] == api.Reason.LWS_FIELD_DROPPED
        and degraded.get("observedGeneration") == ds["metadata"]["generation"]
    )


def test_a_new_set_asking_for_volumes_gets_them_or_says_the_lws_crd_dropped_them(
    control_plane: ControlPlane, namespace: str, lws_release: str
) -> None:
    client = control_plane.client
    # As docs/operations.md says: of the releases in the suite, only v0.7.0 lacks the field.
    assert knows_volumes(client) is (lws_release != "v0.7.0")
    sets.apply_set(control_plane, with_volumes(sets.small_set(namespace)))
    if knows_volumes(client):
        ds = sets.wait_available(client, namespace, "llm")
        prefill = sets.lws_by_name(client, namespace)[f"llm-0-{ds['status']['revision']}-prefill"]
        assert prefill["spec"]["leaderWorkerTemplate"]["volumeClaimTemplates"][0]["metadata"] == {
            "name": "model-cache"
        }
        return
    seen = kube.wait_for(
        lambda: sets.observe(client, namespace),
        until=lambda seen: degraded_for_volumes(seen["set"]),
        timeout=sets.WAIT_SECONDS,
        message="Degraded=LWSFieldDropped",
    )
    ds = seen["set"]
    prefill = seen["lws"][f"llm-0-{ds['status']['revision']}-prefill"]
    assert "volumeClaimTemplates" not in prefill["spec"]["leaderWorkerTemplate"]
    message = sets.condition(ds, "Degraded")["message"]  # type: ignore[index]
    assert f"lacks {FIELD}, which role 'prefill' asks for" in message
    assert "(needs LWS v0.8.0)" in message
    available = sets.condition(ds, "Available")
    assert available is not None and available["status"] == "False"


def test_a_rollout_adding_volumes_keeps_the_old_revision_where_the_lws_crd_drops_them(
    control_plane: ControlPlane, namespace: str
) -> None:
    client = control_plane.client
    before = sets.small_set(namespace, prefill=2, decode=1)
    sets.apply_set(control_plane, before)
    old = sets.wait_available(client, namespace, "llm")["status"]["revision"]
    sets.apply_set(control_plane, with_volumes(before))
    if knows_volumes(client):
        ds = kube.wait_for(
            lambda: sets.observe(client, namespace),
            until=lambda seen: (
                sets.is_available(seen["set"]) and all(old not in name for name in seen["lws"])
            ),
            timeout=sets.WAIT_SECONDS,
            message="the revision with volumes rolled out",
        )["set"]
        assert ds["status"]["revision"] != old
        return
    # The new revision's LWS start at 0 and the first step scales them up (nothing drains before
    # they are ready); the fake LWS controller then reports them ready, which the set ignores.
    seen = kube.wait_for(
        lambda: sets.observe(client, namespace),
        until=lambda seen: (
            degraded_for_volumes(seen["set"])
            and any(
                old not in name and lws.get("status", {}).get("readyReplicas", 0) > 0
                for name, lws in seen["lws"].items()
            )
        ),
        timeout=sets.WAIT_SECONDS,
        message="Degraded=LWSFieldDropped with the new LWS reported ready",
    )
    # A sync after the new LWS were reported ready (an annotation change makes one) still waits.
    ready_at = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    control_plane.kubectl("annotate", "-n", namespace, "disaggregatedset/llm", "touched=1")
    kube.wait_for(
        lambda: [
            call["slices"]
            for call in control_plane.hook_calls("sync", f"{namespace}/llm")
            if call["time"] > ready_at
        ],
        until=lambda later: {"0": "waiting"} in later,
        timeout=sets.WAIT_SECONDS,
        message="a sync after the new LWS turned ready, waiting on them",
    )
    replicas = sets.replicas_by_name(client, namespace)
    assert replicas[f"llm-0-{old}-prefill"] == 2
    assert replicas[f"llm-0-{old}-decode"] == 1
    assert not sets.is_available(seen["set"])
