"""examples/overlay/ owns a namespace of the hooks' own, never one that runs workloads.

`namespace:` in an overlay renames the kit's Namespace object, so the overlay creates and owns the
namespace it names: `kubectl delete -k` of the overlay deletes it with everything in it. Regression
(issue 17, item 12): the example renamed it to `llm-serving`, the namespace its own comments used
for the model servers, so deleting a copy deleted the workloads. The overlay is rendered as its
header says to use it (copied out of the clone); the image, replicas and hook URLs are tested in
tests/deploy/. Rendering needs `kubectl` (without it, see tests/kustomize.py).
"""

from __future__ import annotations

import os
import shutil
from typing import Any, Final

import pytest
import yaml

from tests import kustomize
from tests.shared import REPO_ROOT

OVERLAY_DIR: Final = REPO_ROOT / "examples" / "overlay"
HOOK_NAME: Final = "disaggregatedset-hooks"
# The hook server's namespaced objects in the kit: all that may live in the hooks' namespace.
HOOK_OBJECTS: Final = {
    ("Deployment", HOOK_NAME),
    ("Service", HOOK_NAME),
    ("PodDisruptionBudget", HOOK_NAME),
    ("NetworkPolicy", HOOK_NAME),
}
# Namespaces that hold other things: the cluster's own, Metacontroller's and monitoring's (as the
# NetworkPolicy expects them), and the workload namespace the overlay's header names.
FOREIGN_NAMESPACES: Final = frozenset(
    {"default", "kube-system", "kube-public", "kube-node-lease", "metacontroller", "monitoring"}
)
WORKLOAD_NAMESPACE: Final = "llm-serving"

Manifest = dict[str, Any]


@pytest.fixture(scope="module")
def overlay() -> Manifest:
    document: Manifest = yaml.safe_load((OVERLAY_DIR / "kustomization.yaml").read_text())
    return document


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory, overlay: Manifest) -> list[Manifest]:
    kustomize.require_crds()
    copy = tmp_path_factory.mktemp("user") / "my-install"
    shutil.copytree(OVERLAY_DIR, copy)
    document = {**overlay, "resources": [os.path.relpath(REPO_ROOT, copy)]}
    (copy / "kustomization.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    return kustomize.render(copy)


@pytest.fixture(scope="module")
def base() -> list[Manifest]:
    kustomize.require_crds()
    return kustomize.render(REPO_ROOT)


def _workload_namespaces() -> set[str]:
    """The namespaces the example DisaggregatedSets (and whatever they bring) are created in."""
    found = {WORKLOAD_NAMESPACE}
    for path in sorted((REPO_ROOT / "examples").glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if document and "namespace" in document.get("metadata", {}):
                found.add(document["metadata"]["namespace"])
    return found


def test_the_overlays_only_namespace_is_the_kits_own_renamed_for_the_hooks(
    overlay: Manifest, rendered: list[Manifest], base: list[Manifest]
) -> None:
    [namespace] = [o for o in rendered if o["kind"] == "Namespace"]
    [kit_namespace] = [o for o in base if o["kind"] == "Namespace"]
    name = namespace["metadata"]["name"]

    assert name == overlay["namespace"] == "llm-serving-hooks"
    # The same object as the kit's (its Pod Security labels and the kit's labels), renamed.
    assert namespace == {
        **kit_namespace,
        "metadata": {**kit_namespace["metadata"], "name": name},
    }
    assert namespace["metadata"]["labels"]["app.kubernetes.io/part-of"] == "disaggregatedset"


def test_the_overlay_owns_no_workload_or_shared_namespace(
    overlay: Manifest, rendered: list[Manifest]
) -> None:
    owned = {o["metadata"]["name"] for o in rendered if o["kind"] == "Namespace"}
    assert owned == {overlay["namespace"]}
    assert not owned & _workload_namespaces()
    assert not owned & FOREIGN_NAMESPACES
    assert "default" in _workload_namespaces()  # the example sets name theirs


def test_nothing_but_the_hook_server_lives_in_the_hooks_namespace(
    overlay: Manifest, rendered: list[Manifest]
) -> None:
    namespaced = {
        (o["kind"], o["metadata"]["name"]): o["metadata"]["namespace"]
        for o in rendered
        if "namespace" in o["metadata"]
    }
    assert namespaced == dict.fromkeys(HOOK_OBJECTS, overlay["namespace"])


def _flat(text: str) -> str:
    """Prose without comment markers, backticks or line breaks."""
    lines = (line.strip().removeprefix("#") for line in text.splitlines())
    return " ".join(" ".join(lines).replace("`", "").split())


def test_the_overlay_and_the_docs_say_the_namespace_is_the_hooks_alone(overlay: Manifest) -> None:
    header = _flat((OVERLAY_DIR / "kustomization.yaml").read_text().split("\napiVersion:")[0])
    name = overlay["namespace"]
    assert "The namespace is the hooks' alone." in header
    assert f"this overlay creates {name} and owns it" in header
    assert "kubectl delete -k my-install deletes that namespace with everything in it" in header
    assert "Never set it to a namespace that exists already or holds anything else" in header

    operations = _flat((REPO_ROOT / "docs" / "operations.md").read_text())
    assert "## The hooks' namespace" in (REPO_ROOT / "docs" / "operations.md").read_text()
    assert f"as examples/overlay/ does (to {name})" in operations
    assert "So the hooks' namespace must be theirs alone" in operations
    readme = _flat((REPO_ROOT / "README.md").read_text())
    assert f"The overlay creates and owns the hooks' namespace, {name}" in readme
    assert "docs/operations.md#the-hooks-namespace" in readme
