"""`kubectl kustomize` for the tests of the kit and its components.

Rendering needs `kubectl` (its built-in kustomize): without it the calling test skips, or fails
under CI=true (`tests.programs`). A build error, or any warning (deprecated or ignored fields,
which the kit must not use), fails it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from tests import programs
from tests.shared import REPO_ROOT
from tools import install_yaml

KIT: Final = REPO_ROOT / "kustomization.yaml"
CRDS_DIR: Final = "crds/"

Manifest = dict[str, Any]


def render(directory: Path) -> list[Manifest]:
    """The objects of `kubectl kustomize <directory>`."""
    try:
        text = install_yaml.kustomize_build(directory)
    except install_yaml.KubectlMissing as missing:
        programs.missing(f"{missing}; the kustomize build cannot be rendered")
    except install_yaml.GenerationError as error:
        pytest.fail(str(error))
    return [doc for doc in yaml.safe_load_all(text) if doc]


def crd_files(kustomization: Path = KIT) -> list[str]:
    """The generated CRD files a kustomization names among its resources (`crds/...`)."""
    resources = yaml.safe_load(kustomization.read_text())["resources"]
    return [name for name in resources if name.startswith(CRDS_DIR)]


def require_crds(root: Path = REPO_ROOT) -> None:
    """Skip when a generated CRD that the kit's kustomization names is missing under `root`."""
    named = crd_files(root / KIT.name)
    missing = [name for name in named if not (root / name).is_file()]
    if missing:
        pytest.skip(f"{', '.join(missing)} not generated yet (python -m hooks crds)")


def one(objects: list[Manifest], kind: str, name: str) -> Manifest:
    """The single rendered object of that kind and name."""
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"expected exactly one {kind} {name}, found {len(found)}"
    return found[0]


def kinds_and_names(objects: list[Manifest]) -> set[tuple[str, str]]:
    return {(o["kind"], o["metadata"]["name"]) for o in objects}
