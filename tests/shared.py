"""Access to the team's shared reference data (`../shared`), which a checkout may not have.

Tests that compare against upstream's golden vectors or captured requests call these helpers; when
the directory is missing they skip with a reason instead of failing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DIR = REPO_ROOT.parent / "shared"
GOLDEN_DIR = SHARED_DIR / "golden"
REFERENCE_DIR = SHARED_DIR / "reference"


def shared_path(relative: str) -> Path:
    """Path of a file under ../shared, skipping the calling test when it is absent."""
    path = SHARED_DIR / relative
    if not path.exists():
        pytest.skip(f"../shared/{relative} is not available in this checkout")
    return path


def load_golden(name: str) -> Any:
    """Parsed JSON of ../shared/golden/<name> (skips when absent)."""
    return json.loads(shared_path(f"golden/{name}").read_text())


def load_golden_or_empty(name: str) -> list[Any]:
    """For parametrisation at collection time: the vectors, or [] when ../shared is absent."""
    path = GOLDEN_DIR / name
    if not path.exists():
        return []
    data: list[Any] = json.loads(path.read_text())
    return data
