"""`python -m hooks sandbox`: its arguments here, its work in `hooks.sandbox.session`.

Registering it costs only argparse, as `hooks.cli.commands` does for `render` and `plan`: every
`python -m hooks` command line loads this module, and the control plane's code is imported only
when the sandbox runs.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Final, TypeAlias

_Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

DEFAULT_READY_AFTER_SECONDS: Final = 2.0


def add_sandbox(commands: _Subcommands) -> None:
    """Register `sandbox` on a command line's subcommands."""
    parser = commands.add_parser(
        "sandbox",
        help="run a throwaway control plane with the hooks installed, until Ctrl-C",
        description="Start etcd, kube-apiserver, the garbage collector, the hook server and "
        "Metacontroller on 127.0.0.1, install the kit, play the LeaderWorkerSet controller "
        "(every LeaderWorkerSet becomes ready a moment after each change; no pod runs) and "
        "print the KUBECONFIG to export, then wait: kubectl apply, kubectl ds and kubectl get "
        "work against it. Ctrl-C (SIGINT) or SIGTERM stops everything it started and removes "
        "its directory. The programs are found as the cluster tests find them: "
        "KUBEBUILDER_ASSETS and DS_TESTCLUSTER_ASSETS (the README's 'Run the cluster tests').",
    )
    parser.add_argument(
        "--kit",
        type=Path,
        default=Path(),
        metavar="DIR",
        help="the checkout whose kit to install: its root, with kustomization.yaml (default: "
        "the current directory)",
    )
    parser.add_argument(
        "--lws-ready-after",
        type=_seconds,
        default=DEFAULT_READY_AFTER_SECONDS,
        metavar="SECONDS",
        help="how long a LeaderWorkerSet takes to report every group ready after a change "
        f"(default {DEFAULT_READY_AFTER_SECONDS:g})",
    )
    parser.set_defaults(run=_run_sandbox, report_as=parser.prog)


def _run_sandbox(args: argparse.Namespace) -> int:
    from hooks.sandbox import session  # the command's work, loaded when it runs (see above)

    return session.run(args)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds, 0 or more")
    return value
