"""The kubectl walk-throughs of the README and docs/rollout.md, run as written on the real control
plane (issue 27, item 4).

Each `console` block of `kubectl` commands (`tests.readme` reads them) runs in a namespace of its
own, through a kubeconfig whose context names that namespace, so that every command runs exactly
as the document writes it, `kubectl ds` found on PATH as `pip install` puts it there. Every
command must exit 0 and print what the document shows, its own lines the expected ones: a changed
output is one edit of the document. The session's fake LWS controller makes groups ready 0.25 s
after a change, where the sandbox takes 2 s; only what `...` stands for depends on that pace.
"""

from __future__ import annotations

import json
import os
import subprocess
import sysconfig
from pathlib import Path
from typing import Final

import pytest

from tests import readme
from tests.cluster import sets
from tests.shared import REPO_ROOT
from tools.sandbox.controlplane import ControlPlane

pytestmark = pytest.mark.usefixtures("lws_controller")

WALK_THROUGHS: Final = [
    block for block in readme.console_blocks() if readme.runs_on_a_cluster(block)
]
# A command waits at most this long (`rollout status` ends on its own once the set is there).
COMMAND_SECONDS: Final = 2 * sets.WAIT_SECONDS


def _kubeconfig_in(plane: ControlPlane, namespace: str, directory: Path) -> Path:
    """The control plane's kubeconfig with `namespace` as its context's namespace."""
    config = json.loads(plane.kubeconfig.read_text())
    for context in config["contexts"]:
        context["context"]["namespace"] = namespace
    path = directory / "kubeconfig"
    path.write_text(json.dumps(config))
    return path


def test_the_readme_has_walk_throughs() -> None:
    assert len(WALK_THROUGHS) >= 3


@pytest.mark.parametrize("block", WALK_THROUGHS, ids=lambda block: block.name)
def test_a_readme_walk_through_prints_what_it_shows(
    control_plane: ControlPlane, namespace: str, tmp_path: Path, block: readme.Block
) -> None:
    scripts = Path(sysconfig.get_path("scripts"))
    if not (scripts / "kubectl-ds").exists():
        pytest.fail(f"no kubectl-ds in {scripts}: install the package (pip install -e .)")
    env = {
        **os.environ,
        "KUBECONFIG": str(_kubeconfig_in(control_plane, namespace, tmp_path)),
        "PATH": f"{scripts}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    for step in block.steps():
        done = subprocess.run(
            step.argv,
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=COMMAND_SECONDS,
            check=False,
        )
        assert done.returncode == 0, f"{block.name}: $ {step.command}\n{done.stdout}"
        problem = readme.mismatch(step.expected, done.stdout)
        assert problem is None, f"{block.name}: $ {step.command}\n{problem}"
