"""`python -m tools.sandbox` refusing to start: one line on stderr, the right exit status, never a
traceback, and nothing started. (tests/cluster/test_sandbox.py runs it for real.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tools.sandbox import assets

REPO_ROOT = Path(__file__).resolve().parents[1]


def run(*arguments: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tools.sandbox", *arguments],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )


def test_the_sandbox_runs_from_the_checkout_and_not_from_the_package() -> None:
    sandbox = run("--help")
    hooks = subprocess.run(
        [sys.executable, "-m", "hooks", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )

    assert sandbox.returncode == 0
    assert sandbox.stdout.startswith("usage: python -m tools.sandbox [-h] [--kit DIR]")
    assert "sandbox" not in hooks.stdout


@pytest.mark.parametrize("value", ["-1", "soon", "nan", "inf"])
def test_a_delay_that_is_no_number_of_seconds_is_a_usage_error(value: str) -> None:
    finished = run("--lws-ready-after", value)

    assert finished.returncode == 2
    [*_, line] = finished.stderr.splitlines()
    assert line.startswith("python -m tools.sandbox: error: argument --lws-ready-after: ")


def test_without_the_programs_it_says_what_to_install(tmp_path: Path) -> None:
    env = {
        **os.environ,
        assets.ENVTEST_VARIABLE: str(tmp_path),
        assets.EXTRA_VARIABLE: str(tmp_path),
        "TMPDIR": str(tmp_path),
    }

    finished = run(env=env)

    assert finished.returncode == 1
    [line] = finished.stderr.splitlines()
    assert line == (
        "python -m tools.sandbox: error: no etcd, kube-apiserver, metacontroller,"
        f" kube-controller-manager for the control plane: {assets.HOW_TO_INSTALL}"
    )
    assert finished.stdout == ""
    assert list(tmp_path.iterdir()) == []  # no work directory was made


def test_what_to_install_names_each_programs_release_and_nothing_else() -> None:
    """Regression (issue 35 item 4): the sandbox also wanted metacontroller-crds-v1.yaml and "the
    LeaderWorkerSet CRD of 060ab4d", files a newcomer had to guess; it writes its own now."""
    said = assets.HOW_TO_INSTALL
    assert "setup-envtest use -p path 1.36.x" in said  # etcd and kube-apiserver
    assert (
        "/usr/bin/metacontroller of the image ghcr.io/metacontroller/metacontroller:v4.17.2" in said
    )
    assert "https://dl.k8s.io/v1.36.2/bin/linux/amd64/kube-controller-manager" in said
    assert "crd" not in said.lower()


def test_a_release_crd_missing_names_the_file_and_where_it_comes_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in (*assets.ENVTEST_PROGRAMS, *assets.EXTRA_PROGRAMS):
        (tmp_path / name).write_text("")
    monkeypatch.setenv(assets.ENVTEST_VARIABLE, str(tmp_path))
    monkeypatch.setenv(assets.EXTRA_VARIABLE, str(tmp_path))

    found = assets.find_assets()
    with pytest.raises(assets.AssetsMissing) as missing:
        assets.find_assets(lws_release="v0.8.0")

    assert (found.metacontroller_crds, found.lws_crd) == (None, None)  # the sandbox's own then
    assert str(missing.value) == (
        f"no LeaderWorkerSet CRD of v0.8.0 in {assets.EXTRA_VARIABLE}:"
        " config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml of kubernetes-sigs/lws"
        " at the tag v0.8.0, saved as leaderworkersets-crd-v0.8.0.yaml"
    )


def test_without_a_kit_it_says_where_it_looked(tmp_path: Path) -> None:
    programs = tmp_path / "programs"
    programs.mkdir()
    for name in (*assets.ENVTEST_PROGRAMS, *assets.EXTRA_PROGRAMS):
        (programs / name).write_text("")
    kit = tmp_path / "kit"
    kit.mkdir()
    env = {**os.environ, assets.ENVTEST_VARIABLE: str(programs), "TMPDIR": str(kit)}
    env[assets.EXTRA_VARIABLE] = str(programs)

    finished = run("--kit", str(kit), env=env)

    assert finished.returncode == 1
    assert finished.stderr.splitlines() == [
        f"python -m tools.sandbox: error: {kit} holds no kustomization.yaml: no kit to install"
    ]
    assert list(kit.iterdir()) == []  # no work directory was made
