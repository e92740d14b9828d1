"""Programs the tests run that `pip install` does not bring: kubectl, prometheus and promtool.

Without one, the calling test skips with a reason that says how to get it; under `CI=true` (as
`.ci/run` runs) it fails instead, so CI cannot pass by skipping. The cluster suite's control
plane follows the same rule (tests/cluster/conftest.py).
"""

from __future__ import annotations

import os
import shutil
from typing import NoReturn

import pytest


def missing(reason: str) -> NoReturn:
    """Skip the calling test for `reason`, or fail it under CI=true."""
    if os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail(f"CI=true and {reason}")
    pytest.skip(reason)


def require(program: str, how_to_install: str) -> str:
    """The path of `program` on PATH; see `missing` when there is none."""
    path = shutil.which(program)
    if path is None:
        missing(f"{program} is not installed ({how_to_install})")
    return path
