"""A run ends with one line per skip reason, just before pytest's closing counts (tests/skips.py).

Regression (issue 35 item 9): the README's test command ended with 220 skips and no summary of
why. Runs a small suite of its own in a subprocess, with the plugin the suite's conftest loads.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.shared import REPO_ROOT

SUITE = """
import pytest

@pytest.mark.parametrize("case", range(3))
def test_golden(case):
    pytest.skip("../shared/golden/x.json is not available in this checkout")

def test_cluster():
    pytest.skip("no etcd for the control plane")

@pytest.mark.skipif(True, reason="no etcd for the control plane")
def test_marked():
    pass

def test_runs():
    pass
"""


@pytest.mark.parametrize("report", ["-ra", "-rfEX"], ids=["all", "the-suites"])
def test_the_run_ends_with_each_skip_reason_and_its_count(tmp_path: Path, report: str) -> None:
    (tmp_path / "test_suite.py").write_text(SUITE)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    finished = subprocess.run(
        [
            *(sys.executable, "-m", "pytest", "-p", "tests.skips", report),
            *("-c", str(tmp_path / "pytest.ini"), str(tmp_path / "test_suite.py")),
        ],
        cwd=REPO_ROOT,
        env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        input="",
    )
    tail = [line for line in finished.stdout.splitlines() if line.strip()][-4:]

    assert finished.returncode == 0, finished.stdout
    assert tail[0].strip("= ") == "skips by reason"
    assert tail[1:3] == [
        "3 skipped: ../shared/golden/x.json is not available in this checkout",
        "2 skipped: no etcd for the control plane",
    ]
    assert tail[3].strip("= ").startswith("1 passed, 5 skipped")
