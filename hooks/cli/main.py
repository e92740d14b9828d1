"""The command line, `python -m hooks serve | render | plan | crds`: it parses arguments, calls
the modules below it and prints, and decides nothing itself. `serve` imports the server stack
only when it runs; `render` and `plan`, which `kubectl ds` offers too, are `hooks.cli.commands`'s.
Exit codes and error lines: `hooks.cli.console`.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

from hooks.cli import commands, console, crdgen, lwsspec
from hooks.server import settings

if TYPE_CHECKING:
    from hooks.server import serving

PROG: Final = "python -m hooks"
DEFAULT_BIND: Final = "127.0.0.1:8080"
DEFAULT_WORKERS: Final = 1
DEFAULT_CRDS_DIR: Final = Path("crds")
LOG_LEVELS: Final = ("debug", "info", "warning", "error", "critical")

# --- serve ---------------------------------------------------------------------------------------


def _add_serve(actions: commands.Subcommands) -> None:
    parser = actions.add_parser(
        "serve",
        help="run the hook server under gunicorn",
        description="Serve the Metacontroller hooks (POST /sync, /customize, /rolescaler/sync, "
        "/rolescaler/customize; GET /healthz, /metrics) with gunicorn.",
        epilog=_SERVE_LIMITS,
    )
    parser.add_argument(
        "--bind", default=DEFAULT_BIND, metavar="HOST:PORT", help=f"default {DEFAULT_BIND}"
    )
    parser.add_argument(
        "--metrics-bind",
        metavar="HOST:PORT",
        help="also listen here, serving only /metrics and /healthz (for a network policy that "
        "admits Prometheus to metrics but not to the hooks); default: metrics on --bind only",
    )
    parser.add_argument(
        "--workers",
        type=console.positive_int,
        default=DEFAULT_WORKERS,
        metavar="N",
        help="gunicorn worker processes, each serving many connections (default "
        f"{DEFAULT_WORKERS})",
    )
    parser.add_argument(
        "--max-body-bytes",
        type=console.positive_int,
        default=settings.DEFAULT_MAX_BODY_BYTES,
        metavar="N",
        help="larger hook requests are answered 413; the bodies held at once by a worker, "
        "complete or still arriving, may take twice this and an eighth (plus 256 KiB each "
        "while read), more are answered 503 (default "
        f"{_mib(settings.DEFAULT_MAX_BODY_BYTES)})",
    )
    parser.add_argument(
        "--max-parse-bytes",
        type=console.positive_int,
        default=settings.DEFAULT_MAX_PARSE_BYTES,
        metavar="N",
        help="memory a call on a request over "
        f"{_mib(settings.DEFAULT_ISOLATE_ABOVE_BYTES)} may take (parse, hook and answer, in a "
        "child process limited to it); one that needs more is answered 413 (default "
        f"{_mib(settings.DEFAULT_MAX_PARSE_BYTES)})",
    )
    parser.add_argument(
        "--timeout",
        type=console.positive_int,
        default=settings.DEFAULT_TIMEOUT_SECONDS,
        metavar="S",
        help="seconds a worker may be busy before it is restarted, and a call on a large "
        "request may run before it is answered 503 (default "
        f"{settings.DEFAULT_TIMEOUT_SECONDS}, below Metacontroller's 10 s webhook timeout)",
    )
    parser.add_argument("--log-level", choices=LOG_LEVELS, default="info", help="default info")
    parser.set_defaults(run=_run_serve, report_as=parser.prog)


_SERVE_LIMITS: Final = (
    "Fixed limits: request headers within "
    f"{settings.FIRST_REQUEST_SECONDS:.0f} s on a new connection and "
    f"{settings.KEEPALIVE_SECONDS} s "
    f"on a kept-alive one, at most {settings.MAX_HEADER_FIELDS} fields of "
    f"{settings.MAX_HEADER_FIELD_BYTES} bytes and {settings.MAX_HEADER_BYTES // 1024} KiB in "
    "all (431); while a request is handled, every socket read and write within "
    f"{settings.READ_TIMEOUT_SECONDS:.0f} s, and the whole body within "
    f"{settings.DEFAULT_BODY_DEADLINE_SECONDS:.0f} s (408, connection closed); at most "
    f"{settings.WORKER_CONNECTIONS} connections per worker, the oldest idle or slow ones closed "
    "for new ones."
)


def _run_serve(args: argparse.Namespace) -> int:
    from hooks.server import serving  # gunicorn: loaded only by the command that serves

    bind = _address("--bind", args.bind)
    metrics_bind = (
        None if args.metrics_bind is None else _address("--metrics-bind", args.metrics_bind)
    )
    try:
        serving.serve(
            bind=bind,
            workers=args.workers,
            timeout=args.timeout,
            log_level=args.log_level,
            limits=settings.Limits(
                max_body_bytes=args.max_body_bytes,
                max_parse_bytes=args.max_parse_bytes,
                call_deadline_seconds=float(args.timeout),
            ),
            metrics_bind=metrics_bind,
        )
    except serving.ServerError as error:
        raise console.CliError(str(error)) from None
    return 0


def _mib(size: int) -> str:
    return f"{size // settings.MIB} MiB"


def _address(flag: str, text: str) -> serving.Address:
    from hooks.server import serving

    try:
        return serving.parse_address(text)
    except serving.ServerError as error:
        raise console.CliError(f"{flag}: {error}", exit_code=2) from None


# --- crds ----------------------------------------------------------------------------------------


def _add_crds(actions: commands.Subcommands) -> None:
    parser = actions.add_parser(
        "crds",
        help="regenerate the CRDs, or --check the committed ones",
        description="Write the CustomResourceDefinitions generated from the API models, or "
        "check that the committed files match them.",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="change nothing; exit 1 when a file differs from what would be generated",
    )
    parser.add_argument(
        "--dir",
        type=Path,
        metavar="DIR",
        help="directory of the CRD files (default: crds/ in the current directory, which must "
        "exist; a missing --dir is created, except with --check)",
    )
    parser.add_argument(
        "--import-lws",
        type=Path,
        metavar="LWS_CRD",
        help="first refresh the embedded role spec schema (hooks/lws_spec_schema.json) from a "
        "LeaderWorkerSet CRD file, descriptions dropped",
    )
    parser.set_defaults(run=_run_crds, report_as=parser.prog)


def _run_crds(args: argparse.Namespace) -> int:
    directory: Path = args.dir or DEFAULT_CRDS_DIR
    # Only an explicit --dir is created: a missing crds/ means the wrong directory.
    if not directory.is_dir() and (args.check or args.dir is None):
        advice = "" if args.dir else ": run from the repository root, or pass --dir"
        raise console.CliError(f"{directory} is not a directory{advice}")
    if args.import_lws is not None:
        try:
            print(f"wrote {lwsspec.import_lws(args.import_lws)}")
        except (OSError, lwsspec.CrdGenError) as error:
            raise console.CliError(f"cannot import {args.import_lws}: {error}") from None
    if not args.check:
        for name in crdgen.write_crds(directory):
            print(f"wrote {directory / name}")
        return 0
    stale = crdgen.check_crds(directory)
    if not stale:
        print(f"CRDs in {directory} are up to date")
        return 0
    for name in stale:
        path = directory / name
        console.report(
            args.report_as, "error", f"{path} is {'out of date' if path.is_file() else 'missing'}"
        )
    command = f"{PROG} crds" + ("" if directory == DEFAULT_CRDS_DIR else f" --dir {directory}")
    console.report(
        args.report_as, "note", f"regenerate the CRDs with `{command}` and commit the result"
    )
    return 1


# --- entry point ---------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand, in `--help` order."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="DisaggregatedSet (disaggregatedset.x-k8s.io/v1) Metacontroller hooks.",
    )
    parser.add_argument("--version", action=console.Version)
    subcommands = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, title="commands"
    )
    _add_serve(subcommands)
    commands.add_manifest_commands(subcommands)
    _add_crds(subcommands)
    for command in subcommands.choices.values():
        command.set_defaults(parser=command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns its exit code."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        # argparse would report these as the top-level parser's (`python -m hooks: error:`).
        args.parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    return console.run(args)
