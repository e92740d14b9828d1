"""A kit installed with components/no-services, on a control plane of its own: Metacontroller
watches no Services, and a set is created and rolled out to Available without one, its LWS and
history as with the default install (docs/operations.md, "Without the -prv Services")."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from hooks import api
from tests.cluster import sets
from tests.shared import REPO_ROOT
from tools.sandbox import assets, kube
from tools.sandbox.controlplane import ControlPlane
from tools.sandbox.lws import FakeLwsController

NAMESPACE = "no-services"


@pytest.fixture(scope="module")
def lean_plane(control_plane_assets: assets.Assets) -> Iterator[ControlPlane]:
    """A control plane of its own, the kit rendered with components/no-services."""
    plane = ControlPlane.start(
        control_plane_assets,
        Path(tempfile.mkdtemp(prefix="ds-no-services-")),
        kit=REPO_ROOT,
        kit_components=(REPO_ROOT / "components" / "no-services",),
    )
    controller = FakeLwsController(plane.client, delay=0.25)
    try:
        controller.start()
        plane.client.create(
            kube.NAMESPACES,
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        )
        yield plane
    finally:
        controller.stop()
        plane.stop()
    assert controller.failures() == [], "the fake LWS controller failed"


def _child_types(plane: ControlPlane) -> list[str]:
    controller = plane.client.request(
        "GET",
        "/apis/metacontroller.k8s.io/v1alpha1/compositecontrollers/disaggregatedset-controller",
    )
    return [child["resource"] for child in controller["spec"]["childResources"]]


def test_a_set_without_services_rolls_out_to_available_and_never_gets_one(
    lean_plane: ControlPlane,
) -> None:
    client = lean_plane.client
    assert _child_types(lean_plane) == [
        "leaderworkersets",
        "disaggregatedsetrolescalers",
        "disaggregatedsetrevisions",
    ]
    sets.apply_set(lean_plane, sets.small_set(NAMESPACE, slices=2))
    first = sets.wait_available(client, NAMESPACE, "llm")
    sets.apply_set(lean_plane, sets.small_set(NAMESPACE, slices=2, image=sets.IMAGE_V2))
    rolled = sets.wait_available(client, NAMESPACE, "llm")

    assert rolled["status"]["revision"] != first["status"]["revision"]
    target = rolled["status"]["revision"]
    lws = kube.wait_for(
        lambda: sets.lws_by_name(client, NAMESPACE),
        until=lambda found: (
            {i["metadata"]["labels"][api.LABEL_REVISION] for i in found.values()} == {target}
        ),
        timeout=sets.WAIT_SECONDS,
        message="only the new revision's LWS left",
    )
    assert sorted(lws) == sorted(
        f"llm-{index}-{target}-{role}" for index in (0, 1) for role in ("prefill", "decode")
    )
    assert client.list(kube.SERVICES, namespace=NAMESPACE) == []
    history = client.list(kube.REVISIONS, namespace=NAMESPACE)
    assert sorted(item["revision"] for item in history) == [1, 2]
    degraded = sets.condition(rolled, "Degraded")
    assert degraded is not None and degraded["status"] == "False"
    # Metacontroller wrote no Service and the hooks answered none, on any call of the set.
    calls = lean_plane.hook_calls("sync", f"{NAMESPACE}/llm")
    assert calls
    assert all(api.SERVICE_KIND not in call["children"] for call in calls)
