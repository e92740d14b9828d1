"""One sandbox, from its start to Ctrl-C: the control plane of `tools.sandbox.controlplane` with
the kit installed, the LeaderWorkerSet controller played by `tools.sandbox.lws`, and a KUBECONFIG
for the person at the terminal.

Standard output says where everything is, in shell comments, and ends with the line to run in
another shell, `export KUBECONFIG=... PATH=...`, once every part is ready (a script may wait for
it): the kubeconfig, and the directory of `kubectl-ds` (this Python's scripts, a virtualenv's
`bin`) ahead on the PATH, so that `kubectl ds` works there too. A comment before it gives the
`kubectl apply -k` of the kit with this sandbox's hook URLs (`tools.sandbox.overlay`):
what the docs' upgrade and migration steps run as `kubectl apply -k .`, which here would point
Metacontroller at the in-cluster Service, where no hook server runs. Notes go to standard
error. SIGINT (Ctrl-C) and SIGTERM stop the sandbox: the fake LWS controller, then every
process it started, newest first, each by its process group; then its directory is removed. A
second signal while it stops is ignored, so that the stopping is never cut short. A process that
exits on its own stops the sandbox too, with the end of its log (exit status 1).
"""

from __future__ import annotations

import argparse
import shlex
import signal
import subprocess
import sysconfig
import tempfile
import time
from pathlib import Path
from types import FrameType
from typing import Final, NoReturn

from hooks.cli import console
from tools.sandbox import assets, controlplane, processes
from tools.sandbox.controlplane import ControlPlane
from tools.sandbox.lws import FakeLwsController

STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)
# The kubectl plugin `pip install` puts beside this Python (pyproject.toml's scripts).
PLUGIN: Final = "kubectl-ds"
# How often the sandbox looks whether its processes still run.
CHECK_SECONDS: Final = 1.0


class _Stop(BaseException):
    """A stop signal arrived (raised in the main thread by its handler). A BaseException, like
    KeyboardInterrupt, so that everything on the way stops what it started."""


def run(args: argparse.Namespace) -> int:
    """Run a sandbox until a stop signal; 0 once everything it started is stopped."""
    try:
        found = assets.find_assets()
        controlplane.check_kit(args.kit)
    except (assets.AssetsMissing, processes.ProcessError) as error:
        raise console.CliError(str(error)) from None
    previous = {sig: signal.signal(sig, _on_stop_signal) for sig in STOP_SIGNALS}
    try:
        workdir = Path(tempfile.mkdtemp(prefix="ds-sandbox-"))
        console.report(args.report_as, "note", f"starting the control plane in {workdir}")
        _serve(found, workdir, args)
    except _Stop as stop:
        console.report(args.report_as, "note", f"{stop}: stopped everything the sandbox started")
        return 0
    except (processes.ProcessError, OSError, subprocess.SubprocessError) as error:
        raise console.CliError(*str(error).splitlines()) from None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _on_stop_signal(signum: int, _frame: FrameType | None) -> None:
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    raise _Stop(signal.Signals(signum).name)


def _serve(found: assets.Assets, workdir: Path, args: argparse.Namespace) -> NoReturn:
    """Start, announce, watch the processes; every way out stops what was started."""
    plane = ControlPlane.start(found, workdir, kit=args.kit.resolve())
    try:
        controller = FakeLwsController(plane.client, delay=args.lws_ready_after)
        controller.start()
        try:
            _announce(plane, ready_after=args.lws_ready_after)
            _watch(plane)
        finally:
            controller.stop()
            for failure in controller.failures():
                console.report(args.report_as, "warning", f"fake LWS controller: {failure}")
    finally:
        plane.stop()


def _announce(plane: ControlPlane, *, ready_after: float) -> None:
    logs = ",".join(plane.running)
    print(
        f"# kube-apiserver {plane.server}, the kit of {plane.kit} installed\n"
        f"# hook server {plane.hook_url} (/metrics); every LeaderWorkerSet ready"
        f" {ready_after:g} s after a change, no pod runs\n"
        f"# logs: {plane.workdir}/{{{logs}}}.log\n"
        "# the docs' `kubectl apply -k .` (upgrading, migrating) is, here:"
        f" kubectl apply -k {shlex.quote(str(plane.kit_overlay))}\n"
        f"# Ctrl-C stops everything and removes {plane.workdir}\n"
        f"{export_line(plane.kubeconfig)}",
        flush=True,
    )


def export_line(kubeconfig: Path) -> str:
    """The line that makes kubectl, and `kubectl ds`, work on the sandbox in another shell."""
    line = f"export KUBECONFIG={shlex.quote(str(kubeconfig))}"
    scripts = Path(sysconfig.get_path("scripts"))
    if (scripts / PLUGIN).is_file():
        line += f' PATH={shlex.quote(str(scripts))}:"$PATH"'
    return line


def _watch(plane: ControlPlane) -> NoReturn:
    """Wait for a stop signal; raise if a process exits meanwhile."""
    while True:
        for process in plane.running.values():
            if not process.running():
                raise processes.ProcessError(
                    f"{process.name} exited with {process.popen.returncode}:\n{process.log_tail()}"
                )
        time.sleep(CHECK_SECONDS)
