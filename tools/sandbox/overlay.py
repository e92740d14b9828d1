"""The kit as a control plane installs it: an overlay that points its hooks at a local server.

On a cluster the kit's CompositeControllers call the hook Service in the kit's namespace; a
control plane on 127.0.0.1 runs the hook server as a local process, where no Service leads.
`write_kit` writes a kustomize overlay of the kit (and of the components an overlay would
list) with a patch that moves every hook URL to the local server. `kubectl apply -k` of it is, on
that control plane, what the docs' `kubectl apply -k .` is on a cluster (an upgrade, a
migration's step): it renders the checkout's kit anew each time, so the newer CRDs and
CompositeControllers of an upgrade come with it, and the sandbox prints it (docs/operations.md,
"The sandbox").
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import yaml

DIRECTORY: Final = "kit"
"""The overlay's directory, in the control plane's work directory."""
NAMESPACE: Final = "disaggregatedset-system"
# The in-cluster address of the hook Service in the kit's CompositeControllers.
HOOK_SERVICE_URL: Final = f"http://disaggregatedset-hooks.{NAMESPACE}.svc"
_KUSTOMIZATION: Final = "kustomization.yaml"


def write_kit(
    kit: Path, directory: Path, *, components: Sequence[Path] = (), hook_url: str
) -> Path:
    """Write the overlay of `kit` (a checkout's root) and `components` into `directory`, every
    CompositeController hook URL moved to `hook_url`; returns `directory`."""
    directory.mkdir(exist_ok=True)
    kustomization: dict[str, Any] = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(kit, directory)],
    }
    if components:
        kustomization["components"] = [os.path.relpath(path, directory) for path in components]
    (directory / _KUSTOMIZATION).write_text(yaml.safe_dump(kustomization, sort_keys=False))
    rendered = subprocess.run(
        ["kubectl", "kustomize", str(directory)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    kustomization["patches"] = [
        patch
        for document in yaml.safe_load_all(rendered)
        if document and (patch := hooks_patch(document, hook_url)) is not None
    ]
    (directory / _KUSTOMIZATION).write_text(yaml.safe_dump(kustomization, sort_keys=False))
    return directory


def hooks_patch(document: dict[str, Any], hook_url: str) -> dict[str, Any] | None:
    """A kustomize patch moving every hook URL of a CompositeController from the in-cluster
    Service to `hook_url`; None for any other document."""
    if document.get("kind") != "CompositeController":
        return None
    operations = [
        {
            "op": "replace",
            "path": f"/spec/hooks/{name}/webhook/url",
            "value": hook_url + url.removeprefix(HOOK_SERVICE_URL),
        }
        for name, hook in document["spec"].get("hooks", {}).items()
        if (url := hook.get("webhook", {}).get("url", "")).startswith(HOOK_SERVICE_URL)
    ]
    return {
        "target": {
            "group": "metacontroller.k8s.io",
            "kind": "CompositeController",
            "name": document["metadata"]["name"],
        },
        "patch": json.dumps(operations),
    }
