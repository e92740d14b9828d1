"""The base install as `kubectl kustomize .` renders it, built once per module for the
base-install and overlay tests (without kubectl, see tests/kustomize.py)."""

from __future__ import annotations

import pytest

from tests import kustomize
from tests.kustomize import Manifest
from tests.shared import REPO_ROOT


@pytest.fixture(scope="module")
def rendered() -> list[Manifest]:
    kustomize.require_crds()
    return kustomize.render(REPO_ROOT)
