"""A kit whose DisaggregatedSet CompositeController declares no DisaggregatedSetRevisions, on a
control plane of its own: the hooks answer no record (Metacontroller would create one on every
pass and never observe it), the set rolls out as with the default install, its status says it
keeps no history and why, its RoleScaler works, and `kubectl ds rollout undo` refuses in one
line, saying why (docs/rollout.md, "Revision history")."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from hooks import api
from hooks.core import history
from tests.cluster import sets
from tests.cluster.test_kubectl_ds import kubectl_ds
from tests.shared import REPO_ROOT
from tools.sandbox import assets, kube
from tools.sandbox.controlplane import ControlPlane
from tools.sandbox.lws import FakeLwsController

NAMESPACE = "no-history"
# The kit's child types in order: leaderworkersets, services, disaggregatedsetrolescalers,
# disaggregatedsetrevisions (the patch tests that the entry it removes is the last one).
REVISIONS_ENTRY = "/spec/childResources/3"


def _without_history(directory: Path) -> Path:
    """A kustomize component that removes DisaggregatedSetRevisions from the CompositeController,
    as an operator's overlay might."""
    patch = [
        {
            "op": "test",
            "path": REVISIONS_ENTRY,
            "value": {
                "apiVersion": api.API_VERSION,
                "resource": api.REVISION_PLURAL,
                "updateStrategy": {"method": "InPlace"},
            },
        },
        {"op": "remove", "path": REVISIONS_ENTRY},
    ]
    component = {
        "apiVersion": "kustomize.config.k8s.io/v1alpha1",
        "kind": "Component",
        "patches": [
            {
                "target": {
                    "group": "metacontroller.k8s.io",
                    "version": "v1alpha1",
                    "kind": "CompositeController",
                    "name": "disaggregatedset-controller",
                },
                "patch": yaml.safe_dump(patch),
            }
        ],
    }
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(component))
    return directory


@pytest.fixture(scope="module")
def plane(control_plane_assets: assets.Assets) -> Iterator[ControlPlane]:
    """A control plane of its own, the kit rendered without DisaggregatedSetRevisions."""
    workdir = Path(tempfile.mkdtemp(prefix="ds-no-history-"))
    component = _without_history(Path(tempfile.mkdtemp(prefix="ds-no-history-component-")))
    plane = ControlPlane.start(
        control_plane_assets, workdir, kit=REPO_ROOT, kit_components=(component,)
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
        (component / "kustomization.yaml").unlink()
        component.rmdir()
    assert controller.failures() == [], "the fake LWS controller failed"


def test_a_set_without_history_rolls_out_records_nothing_and_says_why(plane: ControlPlane) -> None:
    client = plane.client
    declared = client.request(
        "GET",
        "/apis/metacontroller.k8s.io/v1alpha1/compositecontrollers/disaggregatedset-controller",
    )["spec"]["childResources"]
    assert api.REVISION_PLURAL not in [entry["resource"] for entry in declared]

    sets.apply_set(plane, sets.small_set(NAMESPACE, external="decode"))
    first = sets.wait_available(client, NAMESPACE, "llm")
    sets.apply_set(plane, sets.small_set(NAMESPACE, external="decode", image=sets.IMAGE_V2))
    rolled = sets.wait_available(client, NAMESPACE, "llm")

    assert rolled["status"]["revision"] != first["status"]["revision"]
    assert rolled["status"]["history"] == history.NOT_KEPT
    degraded = sets.condition(rolled, "Degraded")
    assert degraded is not None and degraded["status"] == "False"
    assert client.list(kube.REVISIONS, namespace=NAMESPACE) == []
    calls = plane.hook_calls("sync", f"{NAMESPACE}/llm")
    assert calls
    assert all(api.REVISION_KIND not in call["children"] for call in calls)
    # The RoleScaler reads the set's status, not its history.
    scaler = client.get(kube.SCALERS, "llm-decode", namespace=NAMESPACE)
    ready = sets.condition(scaler, "Ready")
    assert ready is not None and (ready["status"], ready["reason"]) == ("True", "Bound")
    assert scaler["status"]["replicas"] == 1

    undo = kubectl_ds(plane, NAMESPACE, "rollout", "undo", "llm")
    assert undo.returncode == 1 and undo.stdout == ""
    assert len(undo.stderr.strip().splitlines()) == 1, undo.stderr
    assert f"(its status.history: {history.NOT_KEPT})" in undo.stderr, undo.stderr
