"""`python -m tools.sandbox`: its arguments here, its work in `tools.sandbox.session` (loaded
once the arguments are read, so that `--help` and a usage error start nothing)."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from hooks.cli import console

PROG: Final = "python -m tools.sandbox"
DEFAULT_READY_AFTER_SECONDS: Final = 2.0


def build_parser() -> argparse.ArgumentParser:
    """The sandbox's command line."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Start etcd, kube-apiserver, the garbage collector, the hook server and "
        "Metacontroller on 127.0.0.1, install the kit, play the LeaderWorkerSet controller "
        "(every LeaderWorkerSet becomes ready a moment after each change; no pod runs) and "
        "print the KUBECONFIG to export, then wait: kubectl apply, kubectl ds and kubectl get "
        "work against it. Ctrl-C (SIGINT) or SIGTERM stops everything it started and removes "
        "its directory. The programs are found as the cluster tests find them: "
        "KUBEBUILDER_ASSETS and DS_TESTCLUSTER_ASSETS (docs/operations.md, 'The sandbox').",
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
    parser.set_defaults(run=_run_sandbox, report_as=PROG)
    return parser


def _run_sandbox(args: argparse.Namespace) -> int:
    from tools.sandbox import session  # the control plane's code, loaded when it runs

    return session.run(args)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds, 0 or more")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    """Run the sandbox until a stop signal; its exit code."""
    return console.run(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
