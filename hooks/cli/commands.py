"""The arguments of `render` and `plan`, which both `python -m hooks` and `kubectl ds` offer; their
work is `hooks.cli.render`'s and `hooks.cli.plans`'s. Registering them costs only argparse: what
checks a value is imported when the argument is given, a command's work when it runs.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Final, TypeAlias

from hooks import api
from hooks.api import limits
from hooks.cli import console

Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
_ROLE_NAME: Final = re.compile(limits.ROLE_NAME_PATTERN)
_BUDGET_VALUE: Final = re.compile(r"[0-9]+%?")
RENDER_NOW: Final = "2026-01-01T00:00:00Z"


def add_manifest_commands(commands: Subcommands) -> None:
    """Register `render` and `plan` on a command line's subcommands."""
    _add_render(commands)
    _add_plan(commands)


# --- render --------------------------------------------------------------------------------------


def _add_render(commands: Subcommands) -> None:
    parser = commands.add_parser(
        "render",
        help="print the children and status manifests get on an empty cluster",
        description="Apply the CRD defaults to each DisaggregatedSet in the files, check it as the "
        "API server and the hook would (schema, types, every validation rule) and print, as YAML, "
        "the children and status the sync hook returns on its first sync. Documents of other "
        "kinds are skipped with a note. A manifest that would be refused is reported on stderr "
        "(every problem at once, one line each, with its field path) instead of rendered; one "
        "that renders with a Degraded status (such as a malformed "
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
        default=RENDER_NOW,
        type=_rfc3339,
        metavar="TIME",
        help="RFC 3339 time stamped on new conditions (default: a fixed time, for stable output)",
    )
    parser.set_defaults(run=_run_render, report_as=parser.prog)


def _run_render(args: argparse.Namespace) -> int:
    from hooks.cli import render

    return render.run(args)


def _rfc3339(text: str) -> str:
    from hooks.api import times

    if times.parse(text) is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not an RFC 3339 time")
    return text


# --- plan ----------------------------------------------------------------------------------------


def _add_plan(commands: Subcommands) -> None:
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
        "  %(prog)s --old prefill=4,decode=2 --target prefill=4,decode=2 --rescale 4:prefill=8\n"
        "  %(prog)s --from old.yaml --to new.yaml",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_plan_vectors(parser.add_argument_group("replica vectors"))
    _add_plan_manifests(parser.add_argument_group("manifests"))
    parser.add_argument(
        "--max-passes",
        type=console.positive_int,
        metavar="N",
        help="stop after N passes (default: the sum of all old and target replicas + 1, "
        "a bound every rollout meets)",
    )
    parser.add_argument(
        "--rescale",
        action="append",
        type=_rescale_item,
        metavar="PASS:ROLE=N,...",
        help="before pass PASS a role's target becomes N (an autoscaler or an edit during the "
        "rollout); prints the slice pass by pass through the reconcile's own planner, with "
        "the targets each pass reads; repeat for more changes",
    )
    parser.add_argument(
        "--ready-after",
        type=console.positive_int,
        metavar="PASSES",
        help="with --rescale (or alone, to see the passes that wait): groups asked for in one "
        "pass are Ready PASSES passes later (default 1: by the next pass)",
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


def _add_plan_vectors(vectors: argparse._ArgumentGroup) -> None:
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


def _add_plan_manifests(files: argparse._ArgumentGroup) -> None:
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


def _rescale_item(text: str) -> tuple[int, tuple[tuple[str, int], ...]]:
    """`PASS:ROLE=N,...`: the pass before which the targets change, and the new targets."""
    at, sep, rest = text.partition(":")
    if not sep or not (at.isascii() and at.isdigit()) or int(at) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not PASS:ROLE=N,... with PASS 1 or more")
    return int(at), _replica_vector(rest)


def _hold_share(text: str) -> int:
    from hooks.core import controls

    share = controls.percent(text)
    if share is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage from 0% to 100%")
    return share


def _run_plan(args: argparse.Namespace) -> int:
    from hooks.cli import plans

    return plans.run(args)


def _replica_vector(text: str) -> tuple[tuple[str, int], ...]:
    pairs = []
    for item in text.split(","):
        name, sep, value = item.strip().partition("=")
        if not sep or not _ROLE_NAME.fullmatch(name) or not value.isascii() or not value.isdigit():
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
