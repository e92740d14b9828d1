"""The example overlay (examples/overlay/), copied out of the clone as its header says and built
with `kubectl kustomize`: it sets the image, namespace, replicas and resources, moves the hook URLs
to its namespace, and keeps the base install's memory limit. Rendering needs `kubectl` (without it,
see tests/kustomize.py).
"""

from __future__ import annotations

import os
import shutil

import pytest
import yaml

from tests import kustomize
from tests.deploy.kit import BASE_OBJECTS, CLUSTER_SCOPED_KINDS, HOOK_NAME, NAMESPACE, _container
from tests.kustomize import Manifest
from tests.shared import REPO_ROOT

OVERLAY_DIR = REPO_ROOT / "examples" / "overlay"
OVERLAY_NAMESPACE = "llm-serving-hooks"


@pytest.fixture(scope="module")
def overlay() -> Manifest:
    document: Manifest = yaml.safe_load((OVERLAY_DIR / "kustomization.yaml").read_text())
    return document


@pytest.fixture(scope="module")
def rendered_overlay(tmp_path_factory: pytest.TempPathFactory, overlay: Manifest) -> list[Manifest]:
    """The example overlay copied out of the clone, as its comment says, and built."""
    kustomize.require_crds()
    # The documented layout: the overlay directory next to a clone named disaggregatedset-hooks.
    assert overlay["resources"] == ["../disaggregatedset-hooks"]
    copy = tmp_path_factory.mktemp("user") / "my-install"
    shutil.copytree(OVERLAY_DIR, copy)
    kustomization = {**overlay, "resources": [os.path.relpath(REPO_ROOT, copy)]}
    (copy / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return kustomize.render(copy)


def test_example_overlay_sets_image_namespace_replicas_and_resources(
    overlay: Manifest, rendered_overlay: list[Manifest]
) -> None:
    assert overlay["namespace"] == OVERLAY_NAMESPACE
    assert kustomize.kinds_and_names(rendered_overlay) == (
        BASE_OBJECTS - {("Namespace", NAMESPACE)} | {("Namespace", OVERLAY_NAMESPACE)}
    )
    deployment = kustomize.one(rendered_overlay, "Deployment", HOOK_NAME)
    [image] = overlay["images"]
    assert _container(deployment)["image"] == f"{image['newName']}:{image['newTag']}"
    [replicas] = overlay["replicas"]
    assert deployment["spec"]["replicas"] == replicas["count"] != 2
    [patch] = overlay["patches"]
    [operation] = yaml.safe_load(patch["patch"])
    assert _container(deployment)["resources"] == operation["value"]


def test_example_overlay_moves_the_hook_urls_to_its_namespace(
    rendered_overlay: list[Manifest],
) -> None:
    for obj in rendered_overlay:
        if obj["kind"] == "CompositeController":
            assert "namespace" not in obj["metadata"]
            for hook in obj["spec"]["hooks"].values():
                url = hook["webhook"]["url"]
                assert url.startswith(f"http://{HOOK_NAME}.{OVERLAY_NAMESPACE}.svc/")
        elif obj["kind"] not in CLUSTER_SCOPED_KINDS:
            assert obj["metadata"]["namespace"] == OVERLAY_NAMESPACE


def test_example_overlay_keeps_the_memory_limit_that_holds_the_largest_request(
    rendered: list[Manifest], rendered_overlay: list[Manifest]
) -> None:
    base = _container(kustomize.one(rendered, "Deployment", HOOK_NAME))["resources"]["limits"][
        "memory"
    ]
    deployment = kustomize.one(rendered_overlay, "Deployment", HOOK_NAME)
    assert _container(deployment)["resources"]["limits"]["memory"] == base
