"""`python -m tools.sandbox` on the real programs, as the README tells a newcomer to run it.

The command runs as a subprocess from the checkout's root, finding the programs through the two
variables alone (a directory of links to the four programs and nothing else: the sandbox writes
the CRDs of Metacontroller and LWS itself). The test waits for its KUBECONFIG line and runs what
the sandbox printed in "another shell" (bash, with a PATH that lacks this virtualenv): it applies
the README's set and waits for it with `kubectl ds rollout status`, applies the kit as an upgrade
does (the printed `kubectl apply -k`), rolls the set to a new revision, sends SIGINT, and checks
that every process the sandbox started is gone and its directory removed.
"""

from __future__ import annotations

import json
import os
import queue
import shlex
import signal
import subprocess
import sys
import sysconfig
import threading
from pathlib import Path
from typing import IO, Any, Final

from tests.shared import REPO_ROOT
from tools.sandbox import assets, kube

START_SECONDS: Final = 180
STOP_SECONDS: Final = 60
EXPORT: Final = "export KUBECONFIG="
UPGRADE: Final = "`kubectl apply -k .`"
EXAMPLES: Final = REPO_ROOT / "examples"
STATUS: Final = "kubectl ds rollout status llm --timeout 3m"
# The programs the sandbox starts (the hook server runs as Python; gunicorn's worker too).
PROGRAMS: Final = {"etcd", "kube-apiserver", "kube-controller-manager", "metacontroller"}


def _assets_directory(found: assets.Assets, directory: Path) -> Path:
    """One directory of links to the four programs, for both variables."""
    directory.mkdir()
    links = {
        "etcd": found.etcd,
        "kube-apiserver": found.kube_apiserver,
        "kube-controller-manager": found.kube_controller_manager,
        "metacontroller": found.metacontroller,
    }
    for name, target in links.items():
        (directory / name).symlink_to(target)
    return directory


def _another_shell(export: str, command: str) -> subprocess.CompletedProcess[str]:
    """`command` in a new bash after the sandbox's export line: no KUBECONFIG and no virtualenv
    on the PATH before it, as in a terminal a newcomer opens."""
    scripts = sysconfig.get_path("scripts")
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if p != scripts)
    env = {key: value for key, value in os.environ.items() if key != "KUBECONFIG"}
    return subprocess.run(
        ["bash", "-c", f"{export}\n{command}"],
        env={**env, "PATH": path},
        capture_output=True,
        text=True,
        timeout=START_SECONDS,
        check=False,
    )


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
            [sys.executable, "-m", "tools.sandbox"],
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
        *comments, export = _wait_for_export(lines, stderr)
        kubeconfig = shlex.split(export.removeprefix("export "))[0].removeprefix("KUBECONFIG=")
        started = _descendants(sandbox.pid)
        assert set(started.values()) >= PROGRAMS, started
        [upgrade] = [line.split(": ", 1)[1] for line in comments if UPGRADE in line]

        first = _another_shell(export, f"kubectl apply -f {EXAMPLES}/llm.yaml && {STATUS}")
        assert first.returncode == 0, (first.stdout, first.stderr)
        assert first.stdout.splitlines()[-1].startswith("llm successfully rolled out")
        # An upgrade's `kubectl apply -k .`, as the sandbox says to run it: syncs go on.
        second = _another_shell(
            export, f"{upgrade} && kubectl apply -f {EXAMPLES}/llm-v2.yaml && {STATUS}"
        )
        assert second.returncode == 0, (second.stdout, second.stderr)
        assert "compositecontroller.metacontroller.k8s.io/disaggregatedset-controller" in (
            second.stdout
        )
        assert second.stdout.splitlines()[-1].startswith("llm successfully rolled out")
        ds = _set(kubeconfig)
        assert _is_available(ds) and ds["metadata"]["generation"] == 2

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
