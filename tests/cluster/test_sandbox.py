"""`python -m hooks sandbox` on the real programs, as the README tells a newcomer to run it.

The command runs as a subprocess from the checkout's root, finding the programs through the two
variables alone (a directory of links, as a user's `DS_TESTCLUSTER_ASSETS` holds them). The test
waits for its KUBECONFIG line, applies the README's set with kubectl, sees it Available through
the fake LWS controller, sends SIGINT, and checks that every process the sandbox started is gone
and its directory removed.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any, Final

from hooks.sandbox import assets, kube
from tests.shared import REPO_ROOT

START_SECONDS: Final = 180
STOP_SECONDS: Final = 60
EXPORT: Final = "export KUBECONFIG="
# The programs the sandbox starts (the hook server runs as Python; gunicorn's worker too).
PROGRAMS: Final = {"etcd", "kube-apiserver", "kube-controller-manager", "metacontroller"}


def _assets_directory(found: assets.Assets, directory: Path) -> Path:
    """One directory of links to every program and CRD, for both variables."""
    directory.mkdir()
    links = {
        "etcd": found.etcd,
        "kube-apiserver": found.kube_apiserver,
        "kube-controller-manager": found.kube_controller_manager,
        "metacontroller": found.metacontroller,
        assets.METACONTROLLER_CRDS[0]: found.metacontroller_crds,
        assets.LWS_CRDS[0]: found.lws_crd,
    }
    for name, target in links.items():
        (directory / name).symlink_to(target)
    return directory


def _lines(stream: IO[str], into: queue.Queue[str | None]) -> None:
    for line in stream:
        into.put(line.rstrip("\n"))
    into.put(None)


def _wait_for_export(lines: queue.Queue[str | None], stderr: Path) -> list[str]:
    """The sandbox's standard output up to its KUBECONFIG line."""
    seen: list[str] = []
    while not seen or not seen[-1].startswith(EXPORT):
        try:
            line = lines.get(timeout=START_SECONDS)
        except queue.Empty:
            raise AssertionError(
                f"no KUBECONFIG line after {START_SECONDS} s; stdout: {seen}; stderr: "
                f"{stderr.read_text()}"
            ) from None
        if line is None:
            raise AssertionError(f"the sandbox ended; stdout: {seen}; stderr: {stderr.read_text()}")
        seen.append(line)
    return seen


def _processes() -> dict[int, tuple[int, str, str]]:
    """Every process: pid -> (parent pid, state, program name)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            argv0 = (entry / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue  # gone meanwhile
        # `pid (comm) state ppid ...`; comm may hold spaces and parentheses.
        state, parent = stat[stat.rindex(")") + 2 :].split()[:2]
        found[int(entry.name)] = (int(parent), state, Path(argv0).name)
    return found


def _descendants(pid: int) -> dict[int, str]:
    """The processes below `pid`, by pid, with their program names."""
    table = _processes()
    below: dict[int, str] = {}
    parents = {pid}
    while parents:
        children = {p for p, (parent, _, _) in table.items() if parent in parents} - below.keys()
        below.update({p: table[p][2] for p in children})
        parents = children
    return below


def _running(pids: set[int]) -> set[int]:
    """Those of `pids` still running (a zombie has stopped: only its entry waits for a reaper)."""
    table = _processes()
    return {pid for pid in pids if pid in table and table[pid][1] != "Z"}


def _kubectl(kubeconfig: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kubectl", f"--kubeconfig={kubeconfig}", *arguments],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _set(kubeconfig: str) -> Any:
    shown = _kubectl(kubeconfig, "get", "disaggregatedset", "llm", "-o", "json")
    return json.loads(shown.stdout) if shown.returncode == 0 else shown.stderr


def _is_available(ds: Any) -> bool:
    if not isinstance(ds, dict):
        return False
    conditions = ds.get("status", {}).get("conditions", [])
    generation = ds["metadata"]["generation"]
    return any(
        c["type"] == "Available"
        and c["status"] == "True"
        and c.get("observedGeneration") == generation
        for c in conditions
    )


def test_the_sandbox_serves_a_set_until_sigint_and_leaves_nothing_behind(
    control_plane_assets: assets.Assets, tmp_path: Path
) -> None:
    directory = str(_assets_directory(control_plane_assets, tmp_path / "assets"))
    env = {**os.environ, assets.ENVTEST_VARIABLE: directory, assets.EXTRA_VARIABLE: directory}
    stderr = tmp_path / "sandbox.err"
    with stderr.open("w") as errors:
        sandbox = subprocess.Popen(
            [sys.executable, "-m", "hooks", "sandbox"],
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )
    lines: queue.Queue[str | None] = queue.Queue()
    assert sandbox.stdout is not None
    reader = threading.Thread(target=_lines, args=(sandbox.stdout, lines), daemon=True)
    reader.start()
    try:
        kubeconfig = _wait_for_export(lines, stderr)[-1].removeprefix(EXPORT)
        started = _descendants(sandbox.pid)
        assert set(started.values()) >= PROGRAMS, started

        applied = _kubectl(kubeconfig, "apply", "-f", str(REPO_ROOT / "examples" / "llm.yaml"))
        assert applied.returncode == 0, applied.stderr
        kube.wait_for(
            lambda: _set(kubeconfig),
            until=_is_available,
            timeout=START_SECONDS,
            message="llm Available in the sandbox",
        )

        sandbox.send_signal(signal.SIGINT)
        assert sandbox.wait(timeout=STOP_SECONDS) == 0, stderr.read_text()
    finally:
        if sandbox.poll() is None:  # the test failed: stop it as a user would, or kill it
            sandbox.terminate()
            try:
                sandbox.wait(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                sandbox.kill()
                sandbox.wait()
        reader.join(timeout=STOP_SECONDS)
        sandbox.stdout.close()

    kube.wait_for(
        lambda: _running(set(started)),
        until=lambda running: not running,
        timeout=STOP_SECONDS,
        message="every process the sandbox started gone",
        show=lambda running: str({pid: started[pid] for pid in running}),
    )
    assert not Path(kubeconfig).parent.exists()
    assert (
        stderr.read_text()
        .splitlines()[-1]
        .endswith("note: SIGINT: stopped everything the sandbox started")
    )
