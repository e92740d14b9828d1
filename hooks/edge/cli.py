"""The command line: `python -m hooks serve | render | plan | crds`.

It parses arguments, calls the modules below it and prints; it decides nothing itself. Each
subcommand is an `_add_<name>` function that registers its parser and sets `run` to a
`_run_<name>(args) -> exit code` function; `COMMANDS` lists them in `--help` order.

- `serve` runs the hook server (`hooks.edge.server`: the Flask app of `hooks.edge.app` under
  gunicorn with gevent workers).
- `render` prints the children and status a manifest gets on an empty cluster.
- `plan` prints the pass-by-pass table of a coordinated rollout (`planner.rollout_sequence`), from
  replica vectors (`--old/--target`) or from two DisaggregatedSet manifests (`--from/--to`).
- `crds` writes the CRDs (`crdgen.write_crds`) or checks the committed ones (`--check`).

Exit codes: 0 success (also when the reader of the output goes away, as in `plan ... | head`),
1 failure (stale CRDs, a plan that does not complete, a manifest that would be refused, unreadable
input), 2 usage error. Never a traceback: every message on stderr is one line in argparse's form
for usage errors, `python -m hooks COMMAND: error: ...` (or `warning:`, `note:`), whichever
command writes it; a problem in a file starts with where it is (`FILE:LINE:COLUMN:` for YAML,
`FILE: Kind name: field:` for a manifest), and `render` and `plan` word a manifest's problems
alike (`manifests.check`).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final, TypeAlias

import yaml

from hooks import api
from hooks.api import times
from hooks.core import controls, planner, records, sync
from hooks.edge import crdgen, envelope, manifests, plans, server, settings

PROG: Final = "python -m hooks"
DEFAULT_BIND: Final = "127.0.0.1:8080"
DEFAULT_WORKERS: Final = 1
DEFAULT_TIMEOUT_SECONDS: Final = 9
DEFAULT_CRDS_DIR: Final = Path("crds")
LOG_LEVELS: Final = ("debug", "info", "warning", "error", "critical")

_Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
_ROLE_NAME: Final = re.compile(api.ROLE_NAME_PATTERN)
_BUDGET_VALUE: Final = re.compile(r"[0-9]+%?")
_RENDER_NOW: Final = "2026-01-01T00:00:00Z"


class CliError(Exception):
    """A command cannot do what was asked; main prints each of `lines` as an error line and exits
    with `exit_code`."""

    def __init__(self, *lines: str, exit_code: int = 1) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines
        self.exit_code = exit_code


def _report(command: str, severity: str, text: str) -> None:
    """One line on stderr, as argparse writes usage errors: `python -m hooks COMMAND: error: ...`
    (severity "error", "warning" or "note"); `command` is the subcommand's prog (`report_as`)."""
    print(f"{command}: {severity}: {text}", file=sys.stderr)


# --- serve ---------------------------------------------------------------------------------------


def _add_serve(commands: _Subcommands) -> None:
    parser = commands.add_parser(
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
        type=_positive_int,
        default=DEFAULT_WORKERS,
        metavar="N",
        help="gunicorn worker processes, each serving many connections (default "
        f"{DEFAULT_WORKERS})",
    )
    parser.add_argument(
        "--max-body-bytes",
        type=_positive_int,
        default=settings.DEFAULT_MAX_BODY_BYTES,
        metavar="N",
        help="larger hook requests are answered 413; the bodies held at once by a worker, "
        "complete or still arriving, may take twice this and an eighth (plus 256 KiB each "
        "while read), more are answered 503 (default "
        f"{_mib(settings.DEFAULT_MAX_BODY_BYTES)})",
    )
    parser.add_argument(
        "--max-parse-bytes",
        type=_positive_int,
        default=settings.DEFAULT_MAX_PARSE_BYTES,
        metavar="N",
        help="memory a call on a request over "
        f"{_mib(settings.DEFAULT_ISOLATE_ABOVE_BYTES)} may take (parse, hook and answer, in a "
        "child process limited to it); one that needs more is answered 413 (default "
        f"{_mib(settings.DEFAULT_MAX_PARSE_BYTES)})",
    )
    parser.add_argument(
        "--timeout",
        type=_positive_int,
        default=DEFAULT_TIMEOUT_SECONDS,
        metavar="S",
        help="seconds a worker may be busy before it is restarted, and a call on a large "
        "request may run before it is answered 503 (default "
        f"{DEFAULT_TIMEOUT_SECONDS}, below Metacontroller's 10 s webhook timeout)",
    )
    parser.add_argument("--log-level", choices=LOG_LEVELS, default="info", help="default info")
    parser.set_defaults(run=_run_serve, report_as=parser.prog)


_SERVE_LIMITS: Final = (
    "Fixed limits: request headers within "
    f"{server.FIRST_REQUEST_SECONDS:.0f} s on a new connection and {server.KEEPALIVE_SECONDS} s "
    f"on a kept-alive one, at most {settings.MAX_HEADER_FIELDS} fields of "
    f"{settings.MAX_HEADER_FIELD_BYTES} bytes and {settings.MAX_HEADER_BYTES // 1024} KiB in "
    "all (431); while a request is handled, every socket read and write within "
    f"{settings.READ_TIMEOUT_SECONDS:.0f} s, and the whole body within "
    f"{settings.DEFAULT_BODY_DEADLINE_SECONDS:.0f} s (408, connection closed); at most "
    f"{server.WORKER_CONNECTIONS} connections per worker, the oldest idle or slow ones closed "
    "for new ones."
)


def _run_serve(args: argparse.Namespace) -> int:
    bind = _address("--bind", args.bind)
    metrics_bind = (
        None if args.metrics_bind is None else _address("--metrics-bind", args.metrics_bind)
    )
    try:
        server.serve(
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
    except server.ServerError as error:
        raise CliError(str(error)) from None
    return 0


def _mib(size: int) -> str:
    return f"{size // settings.MIB} MiB"


def _address(flag: str, text: str) -> server.Address:
    try:
        return server.parse_address(text)
    except server.AddressError as error:
        raise CliError(f"{flag}: {error}", exit_code=2) from None


# --- render --------------------------------------------------------------------------------------


def _add_render(commands: _Subcommands) -> None:
    parser = commands.add_parser(
        "render",
        help="print the children and status manifests get on an empty cluster",
        description="Apply the CRD defaults to each DisaggregatedSet in the files, check it as the "
        "API server and the hook would (schema, types, every validation rule) and print, as YAML, "
        "the children and status the sync hook returns on its first sync. Documents of other "
        "kinds are skipped with a note. A manifest that would be refused is reported on stderr "
        "(one line per problem, with its field path) instead of rendered; one that renders "
        "with a Degraded status (such as a malformed "
        f"{api.ANNOTATION_PROGRESS_DEADLINE} annotation) is rendered and reported. Either "
        "makes the exit status 1.",
    )
    parser.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help='YAML files ("-" reads standard input), e.g. examples/*.yaml',
    )
    parser.add_argument(
        "--now",
        default=_RENDER_NOW,
        type=_rfc3339,
        metavar="TIME",
        help="RFC 3339 time stamped on new conditions (default: a fixed time, for stable output)",
    )
    parser.set_defaults(run=_run_render, report_as=parser.prog)


def _run_render(args: argparse.Namespace) -> int:
    invalid = False
    found = False
    outputs = []
    for source in args.files:
        try:
            documents = manifests.read_documents(source)
        except manifests.ManifestError as error:
            for line in error.lines:
                _report(args.report_as, "error", line)
            invalid = True
            continue
        for document in documents:
            if not manifests.is_set(document):
                _report(
                    args.report_as, "note", f"{source}: skipping {manifests.describe(document)}"
                )
                continue
            found = True
            problems, output = _render_one(document, now=args.now)
            for problem in problems:
                _report(args.report_as, "error", manifests.located(source, document, problem))
            invalid = invalid or bool(problems)
            if output is not None:
                outputs.append(output)
    if outputs:
        print(yaml.safe_dump_all(outputs, sort_keys=False, width=100), end="")
    if not found and not invalid:
        _report(args.report_as, "error", f"no {api.DS_KIND} in {', '.join(args.files)}")
        invalid = True
    return 1 if invalid else 0


def _render_one(document: api.JsonObject, *, now: str) -> tuple[list[str], api.JsonObject | None]:
    """What is wrong with one manifest (refused, or Degraded on its first sync) and, unless it is
    refused, its first sync's children and status."""
    checked = manifests.check(document)
    if checked.problems:
        return list(checked.problems), None
    request = envelope.parse_sync_request(manifests.empty_cluster_request(checked.stored))
    result = sync.sync(request, now=now)
    response = envelope.render_answer(result.answer)
    degraded = [
        f"{c['reason']}: {c['message']}"
        for c in response["status"]["conditions"]
        if c["type"] == api.ConditionType.DEGRADED and c["status"] == api.ConditionStatus.TRUE
    ]
    if result.summary.get("outcome") == "held":  # refused by the hook: nothing to render
        return degraded, None
    return degraded, {"children": response["children"], "status": response["status"]}


def _rfc3339(text: str) -> str:
    if times.parse(text) is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not an RFC 3339 time")
    return text


# --- plan ----------------------------------------------------------------------------------------


def _add_plan(commands: _Subcommands) -> None:
    parser = commands.add_parser(
        "plan",
        help="print the pass-by-pass table of a coordinated rolling update",
        description="Print every pass of a coordinated rolling update of one slice, assuming\n"
        "each pass becomes ready before the next. Give the replicas either as vectors\n"
        "(--old and --target) or as two DisaggregatedSet manifests (--from and --to).",
        epilog="examples:\n"
        "  %(prog)s --old prefill=5,decode=2 --target prefill=5,decode=2 "
        "--max-surge 2 --max-unavailable 1\n"
        "  %(prog)s --old prefill=4,decode=4 --target prefill=4,decode=4 "
        "--max-surge 1 --max-surge decode=50%%\n"
        "  %(prog)s --from old.yaml --to new.yaml",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    vectors = parser.add_argument_group("replica vectors")
    vectors.add_argument(
        "--old",
        type=_replica_vector,
        metavar="ROLE=N,...",
        help="replicas of the old revision per role, in role order",
    )
    vectors.add_argument(
        "--target",
        type=_replica_vector,
        metavar="ROLE=N,...",
        help="target replicas per role; a role only in --old is removed (target 0)",
    )
    vectors.add_argument(
        "--max-surge",
        action="append",
        type=_budget_items,
        metavar="VALUE|ROLE=VALUE,...",
        help="an integer or a percentage of the role's target (rounded up); repeat or "
        "comma-separate ROLE=VALUE for per-role values",
    )
    vectors.add_argument(
        "--max-unavailable",
        action="append",
        type=_budget_items,
        metavar="VALUE|ROLE=VALUE,...",
        help="like --max-surge (percentages rounded down); a role given only one of the two "
        "has 0 for the other, one with neither gets maxSurge 1, maxUnavailable 0; values the "
        "API refuses (over 100%%, both 0) are refused",
    )
    files = parser.add_argument_group("manifests")
    files.add_argument(
        "--from",
        dest="from_file",
        type=Path,
        metavar="OLD.yaml",
        help="the DisaggregatedSet before the change (its replicas are the old replicas)",
    )
    files.add_argument(
        "--to",
        dest="to_file",
        type=Path,
        metavar="NEW.yaml",
        help="the DisaggregatedSet after the change (targets and rollingUpdateConfiguration)",
    )
    parser.add_argument(
        "--max-passes",
        type=_positive_int,
        metavar="N",
        help="stop after N passes (default: the sum of all old and target replicas + 1, "
        "a bound every rollout meets)",
    )
    parser.add_argument(
        "--hold-at",
        type=_hold_share,
        metavar="P%",
        help=f"mark the pass where a rollout held at P%% stands still (as annotation "
        f"{api.ANNOTATION_ROLLOUT_HOLD_AT} holds it; with --from/--to, the --to manifest's "
        "annotation when this is not given)",
    )
    parser.set_defaults(run=_run_plan, report_as=parser.prog)


def _hold_share(text: str) -> int:
    share = controls.percent(text)
    if share is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage from 0% to 100%")
    return share


def _run_plan(args: argparse.Namespace) -> int:
    try:
        return _plan(args)
    except plans.PlanError as error:
        raise CliError(*error.lines, exit_code=2 if error.usage else 1) from None


def _plan(args: argparse.Namespace) -> int:
    vectors = args.old is not None or args.target is not None
    from_files = args.from_file is not None or args.to_file is not None
    if vectors == from_files:
        raise CliError("give either --old and --target, or --from and --to", exit_code=2)
    planned = _roles_from_vectors(args) if vectors else _roles_from_files(args)
    if planned is None:
        return 0
    roles, notes = planned
    max_passes = args.max_passes or plans.default_max_passes(roles)
    sequence = planner.rollout_sequence(
        initial_old=[role.initial_old for role in roles],
        target=[role.target for role in roles],
        config=[role.config for role in roles],
        max_passes=max_passes,
    )
    for line in notes:
        print(line)
    for role in roles:
        print(
            f"role {role.name}: old {role.initial_old} -> target {role.target} "
            f"(maxSurge {role.config.max_surge}, maxUnavailable {role.config.max_unavailable})"
        )
    print()
    complete, summary = plans.outcome(roles, sequence, max_passes=max_passes)
    _print_table(roles, sequence, hold_at=args.hold_at)
    print(summary)
    return 0 if complete else 1


_PlannedRoles: TypeAlias = tuple[list[plans.PlanRole], list[str]]


def _roles_from_vectors(args: argparse.Namespace) -> _PlannedRoles:
    if args.old is None or args.target is None:
        raise CliError("--old and --target go together", exit_code=2)
    roles = plans.roles_from_vectors(
        old=args.old,
        target=args.target,
        max_surge=plans.fold_budget(args.max_surge),
        max_unavailable=plans.fold_budget(args.max_unavailable),
    )
    return roles, []


def _roles_from_files(args: argparse.Namespace) -> _PlannedRoles | None:
    """The roles of a rollout from --from to --to (None: the two have one revision, no rollout);
    the --to manifest's hold annotation becomes --hold-at when that is not given."""
    if args.from_file is None or args.to_file is None:
        raise CliError("--from and --to go together", exit_code=2)
    if args.max_surge or args.max_unavailable:
        raise CliError(
            "with --from/--to the budgets come from the --to manifest's "
            "rollingUpdateConfiguration; drop --max-surge/--max-unavailable",
            exit_code=2,
        )
    old_parent = _load_manifest(args.from_file)
    new_parent = _load_manifest(args.to_file)
    warning = plans.different_sets(old=old_parent, new=new_parent)
    if warning is not None:
        _report(args.report_as, "warning", warning)
    old_revision = plans.revision_of(old_parent)
    new_revision = plans.revision_of(new_parent)
    if old_revision == new_revision:
        print(
            f"no rollout: both manifests have revision {new_revision} (only role names and "
            "leaderWorkerTemplates decide it); replica changes are applied in place"
        )
        return None
    roles, notes = plans.roles_from_manifests(old=old_parent, new=new_parent)
    notes.insert(0, f"revision {old_revision} -> {new_revision}")
    if args.hold_at is None:
        args.hold_at = controls.control_of(new_parent.annotations).hold_at_percent
    return roles, notes


def _print_table(
    roles: Sequence[plans.PlanRole], sequence: Sequence[planner.Step], *, hold_at: int | None
) -> None:
    """The pass table, with the pass where a hold at `hold_at`% stands still marked."""
    if hold_at is None or hold_at >= 100:  # 100%: no hold, as in the API
        print(plans.render_table(roles, sequence))
        print()
        return
    hold = plans.hold_pass(roles, sequence, percent=hold_at)
    print(plans.render_table(roles, sequence, hold=hold))
    print()
    if hold is None:
        print(f"held at {hold_at}%: the old revision is gone before the share is reached")
    else:
        print(
            f"held at {hold_at}%: stands still after pass {hold}, both revisions serving,"
            " until the hold is raised or removed; then"
        )


def _load_manifest(path: Path) -> records.Parent:
    try:
        return manifests.load_set(path)
    except manifests.ManifestError as error:
        raise CliError(*error.lines) from None


def _replica_vector(text: str) -> tuple[tuple[str, int], ...]:
    pairs = []
    for item in text.split(","):
        name, sep, value = item.strip().partition("=")
        if not sep or not _ROLE_NAME.fullmatch(name) or not value.isdigit():
            raise argparse.ArgumentTypeError(
                f"{item!r} is not ROLE=N (a role name and a non-negative integer)"
            )
        pairs.append((name, int(value)))
    names = [name for name, _ in pairs]
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(f"a role appears twice in {text!r}")
    return tuple(pairs)


def _budget_items(text: str) -> tuple[tuple[str | None, int | str], ...]:
    items: list[tuple[str | None, int | str]] = []
    for item in text.split(","):
        name, sep, value = item.strip().rpartition("=")
        if sep and not _ROLE_NAME.fullmatch(name):
            raise argparse.ArgumentTypeError(f"{name!r} is not a role name")
        if not _BUDGET_VALUE.fullmatch(value):
            raise argparse.ArgumentTypeError(
                f"{value!r} is not a non-negative integer or a percentage such as 25%"
            )
        items.append((name if sep else None, value if value.endswith("%") else int(value)))
    return tuple(items)


# --- crds ----------------------------------------------------------------------------------------


def _add_crds(commands: _Subcommands) -> None:
    parser = commands.add_parser(
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
    # Only an explicit --dir is created: a default crds/ missing here means the wrong directory.
    if not directory.is_dir() and (args.check or args.dir is None):
        advice = "" if args.dir else ": run from the repository root, or pass --dir"
        raise CliError(f"{directory} is not a directory{advice}")
    if args.import_lws is not None:
        try:
            print(f"wrote {crdgen.import_lws(args.import_lws)}")
        except (OSError, crdgen.CrdGenError) as error:
            raise CliError(f"cannot import {args.import_lws}: {error}") from None
    if args.check:
        stale = crdgen.check_crds(directory)
        if stale:
            for name in stale:
                path = directory / name
                state = "out of date" if path.is_file() else "missing"
                _report(args.report_as, "error", f"{path} is {state}")
            command = f"{PROG} crds"
            if directory != DEFAULT_CRDS_DIR:
                command += f" --dir {directory}"
            _report(
                args.report_as,
                "note",
                f"regenerate the CRDs with `{command}` and commit the result",
            )
            return 1
        print(f"CRDs in {directory} are up to date")
        return 0
    for name in crdgen.write_crds(directory):
        print(f"wrote {directory / name}")
    return 0


# --- entry point ---------------------------------------------------------------------------------


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return int(text)


# Subcommands in --help order; each registers its parser and sets `run`.
COMMANDS: Final[tuple[Callable[[_Subcommands], None], ...]] = (
    _add_serve,
    _add_render,
    _add_plan,
    _add_crds,
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand of COMMANDS."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="DisaggregatedSet (disaggregatedset.x-k8s.io/v1) Metacontroller hooks.",
    )
    parser.add_argument(
        "--version", action="version", version=f"{PROG} {settings.package_version()}"
    )
    commands = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, title="commands"
    )
    for add in COMMANDS:
        add(commands)
    return parser


def _command_parser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    """The parser of one subcommand of `build_parser()`."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found: argparse.ArgumentParser = action.choices[command]
            return found
    raise LookupError(f"no subcommand {command!r}")


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns its exit code."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        # argparse would report these as the top-level parser's (`python -m hooks: error:`).
        _command_parser(parser, args.command).error(f"unrecognized arguments: {' '.join(unknown)}")
    return run(args)


def add_manifest_commands(commands: _Subcommands) -> None:
    """Register `render` and `plan`, which need no cluster, on another command line's
    subcommands (`kubectl ds`, hooks.edge.kubectl_ds)."""
    _add_render(commands)
    _add_plan(commands)


def run(args: argparse.Namespace) -> int:
    """Run a parsed command (`args.run`); a `CliError` is reported as `args.report_as: error:
    ...` and gives its exit code."""
    command: Callable[[argparse.Namespace], int] = args.run
    try:
        return command(args)
    except CliError as error:
        for line in error.lines:
            _report(args.report_as, "error", line)
        return error.exit_code
    except BrokenPipeError:
        # The reader went away (`plan ... | head`): what it read is all it wanted. Point stdout
        # at nothing so the interpreter's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
