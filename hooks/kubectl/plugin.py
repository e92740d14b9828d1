"""`kubectl ds`: the kubectl plugin of DisaggregatedSets (the `kubectl-ds` console script), its
arguments and `--help` (each command's, and the exit statuses in the epilogs). A command's module,
`hooks.kubectl.commands`, loads only when it runs: `--help` and usage errors load the parser alone
(tests/test_architecture.py). Exit status 3 (`rollout status --timeout` ran out) tells "give it
longer" from "broken", which kubectl reports alike (1); 130 is an interrupt.
"""

from __future__ import annotations

import argparse
import importlib
import re
import time
from collections.abc import Sequence
from typing import Any, Final, Protocol

from hooks import api
from hooks.cli import commands, console
from hooks.kubectl import PROG

_DURATION_PART: Final = r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(h|m|s)"
_UNIT_SECONDS: Final = {"h": 3600.0, "m": 60.0, "s": 1.0}


class Clock(Protocol):
    """What `rollout status` waits with: the `time` module, or a fake one in tests."""

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float, /) -> None: ...


def _add_status(actions: commands.Subcommands) -> None:
    parser = _leaf(
        actions,
        "status",
        "run_status",
        help="watch a rollout until it is done, held or partitioned, or fails",
        description="Print each slice's phase and, per role, the old and new revision's "
        "ready/replicas when they change, until the rollout of the set's current generation "
        "is done (Available: exit 0), stands where a hold or partition keeps it with every "
        "group of the new revision ready (exit 0: a canary pipeline's gate continues there), "
        "or fails: Progressing=False with ProgressDeadlineExceeded, or Degraded=True (exit 1, "
        "with the condition's message). A paused rollout keeps it waiting.",
        epilog="exit status: 0 done, held or partitioned; 1 failed; 2 usage error; 3 timed out",
    )
    parser.add_argument(
        "--timeout",
        type=_duration,
        default=(0.0, "0"),
        metavar="D",
        help="give up after D (90s, 5m, 1h30m) with exit status 3; 0 (default) waits for ever",
    )


def _duration(text: str) -> tuple[float, str]:
    """A duration as kubectl takes it (`90s`, `5m`, `1h30m`, `0`): seconds, and the text."""
    if text == "0":
        return 0.0, text
    if not re.fullmatch(f"(?:{_DURATION_PART})+", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration such as 90s, 5m or 1h30m")
    parts = re.findall(_DURATION_PART, text)
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts), text


def _add_history(actions: commands.Subcommands) -> None:
    parser = _leaf(
        actions,
        "history",
        "run_history",
        help="list the set's revisions, or show one",
        description="List the revisions the set has run (its DisaggregatedSetRevisions): number, "
        "revision hash, change-cause (the set's kubernetes.io/change-cause when it moved there) "
        "and creation time, the current revision marked. With --revision N, print that "
        "revision's roles and templates as YAML.",
    )
    parser.add_argument("--revision", type=_whole, metavar="N", help="show revision N in full")


def _add_undo(actions: commands.Subcommands) -> None:
    parser = _leaf(
        actions,
        "undo",
        "run_undo",
        help="roll back to the previous revision, or to --to-revision N",
        description="Restore a recorded revision: each of its roles' leaderWorkerTemplate goes "
        "into the spec role of that name, which keeps its replicas, scaling, rollout strategy "
        "and other settings; a recorded role the spec no longer has comes back as recorded; a "
        "role the revision does not have goes; the order is the revision's. The set then rolls "
        "back with its coordinated rollout (at once while that revision's LWS still exist). The "
        "restored spec must hash to the recorded revision. Only the templates (and the "
        "change-cause annotation) are written, guarded by the set as read, so a set whose "
        "spec or annotations changed meanwhile is refused and `kubectl apply`, client- or "
        "server-side, keeps working: a server-side applier that owns the templates re-applies "
        "its own fields.",
    )
    parser.add_argument(
        "--to-revision",
        type=_whole,
        metavar="N",
        help="the revision number to restore (default, and 0: the previous one)",
    )


def _whole(text: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number")
    return int(text)


def _add_annotations(actions: commands.Subcommands) -> None:
    for name, text in _ANNOTATION_HELP.items():
        parser = _leaf(actions, name, "run_annotate", help=text.split(" (")[0], description=text)
        if name == "hold":
            parser.add_argument(
                "--at", required=True, type=_hold_at, metavar="P%", help="0%%-100%%"
            )
        if name == "partition":
            parser.add_argument("k", nargs="?", type=_partition, metavar="K", help="0, 1, 2, ...")
            parser.add_argument("--clear", action="store_true", help="remove the partition")


_ANNOTATION_HELP: Final = {
    "pause": "freeze the set's rollouts as they stand",
    "resume": "let a paused set's rollouts go on",
    "hold": "hold rolling slices once every role of the new revision has P%% of its target "
    "(rounded up, both revisions serving; 100%% is no hold, and a rollback is never held)",
    "release": "remove the hold: rolling slices roll on",
    "partition": "roll only slices below K to new revisions, or --clear the partition (1: "
    "only slice 0; the others keep the revision they run)",
}


def _checked(text: str, *, key: str, wanted: str) -> str:
    """`text` when the hooks read it as a valid value of annotation `key`."""
    from hooks.core import controls  # loaded when the argument is given: --help needs none

    if controls.control_of({key: text}).problems:
        raise argparse.ArgumentTypeError(f"{text!r} is not {wanted}")
    return text


def _hold_at(text: str) -> str:
    wanted = "a percentage from 0% to 100%"
    if text.isascii() and text.isdigit():
        wanted += f" (did you mean {text}%?)"
    return _checked(text, key=api.ANNOTATION_ROLLOUT_HOLD_AT, wanted=wanted)


def _partition(text: str) -> str:
    return _checked(text, key=api.ANNOTATION_ROLLOUT_PARTITION, wanted="a whole number")


def _add_adopt(actions: commands.Subcommands) -> None:
    parser = actions.add_parser(
        "adopt",
        parents=[_connection(default=argparse.SUPPRESS)],
        help="hand a set's children that another controller made to Metacontroller",
        description="Label each LeaderWorkerSet, Service, RoleScaler and history record that "
        "carries the set's name label and is controlled by the set (a controller "
        "ownerReference to its uid) with controller-uid=<set uid>, the label Metacontroller "
        "finds a set's children by: run it after upstream's controller stopped and before the "
        "CompositeControllers exist. Objects controlled by another owner are refused and left "
        "alone; orphans with the set's name label too, unless --orphans, and then an orphan "
        "that is not exactly what the set would have made at its name (for an LWS: its "
        "labels, annotations and spec, replicas aside, and so every template its revision's), "
        "naming the difference. Each patch carries the resourceVersion read: an object changed "
        "meanwhile is read and judged again. Adopting takes the RBAC verb adopt on the set, "
        "which the admin role has: without it nothing is written.",
        epilog="exit status: 0 every candidate adopted; 1 something refused or left alone, or "
        "kubectl failing; 2 usage error",
    )
    parser.add_argument("set", nargs="?", metavar="SET", help="the DisaggregatedSet's name")
    parser.add_argument("--all", action="store_true", help="every set of the namespace")
    parser.add_argument(
        "-A", "--all-namespaces", action="store_true", help="with --all: of every namespace"
    )
    parser.add_argument(
        "--orphans",
        action="store_true",
        help="adopt objects with no owner as well, each only if exactly what the set would make",
    )
    parser.add_argument("--dry-run", action="store_true", help="print what would be adopted")
    parser.set_defaults(run="run_adopt", report_as=parser.prog, parser=parser)


def _connection(*, default: object) -> argparse.ArgumentParser:
    """kubectl's connection flags, taken before and after the command."""
    flags = argparse.ArgumentParser(add_help=False)
    group = flags.add_argument_group("kubectl options")
    group.add_argument("-n", "--namespace", default=default, help="the set's namespace")
    group.add_argument("--context", default=default, help="the kubeconfig context to use")
    group.add_argument("--kubeconfig", default=default, help="the kubeconfig file to use")
    return flags


def _leaf(
    actions: commands.Subcommands, name: str, run: str, *, description: str, **text: Any
) -> argparse.ArgumentParser:
    """A `rollout` subcommand taking SET that runs `run` of `hooks.kubectl.commands`."""
    about = description[:1].upper() + description[1:].replace("%%", "%")
    about += "" if about.endswith(".") else "."
    flags = _connection(default=argparse.SUPPRESS)
    parser = actions.add_parser(name, parents=[flags], description=about, **text)
    parser.add_argument("set", metavar="SET", help="the DisaggregatedSet's name")
    parser.set_defaults(run=run, report_as=parser.prog, parser=parser)
    return parser


def build_parser() -> argparse.ArgumentParser:
    """`kubectl ds` with its `rollout` subcommands, `plan` and `render`."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        parents=[_connection(default=None)],
        description="DisaggregatedSet rollouts and adoption (disaggregatedset.x-k8s.io/v1), "
        "through kubectl.",
        epilog="exit status: 0 done; 1 failed; 2 usage error; 3 rollout status timed out",
    )
    parser.add_argument("--version", action=console.Version)
    subcommands = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, title="commands"
    )
    group = subcommands.add_parser(
        "rollout",
        parents=[_connection(default=argparse.SUPPRESS)],
        help="watch, list, undo, pause, hold or partition a set's rollouts",
        description="Manage the rollouts of a DisaggregatedSet.",
    )
    actions = group.add_subparsers(dest="action", metavar="ACTION", required=True, title="actions")
    for add in (_add_status, _add_history, _add_undo, _add_annotations):
        add(actions)
    _add_adopt(subcommands)
    commands.add_manifest_commands(subcommands)
    for name in ("plan", "render"):
        subcommands.choices[name].set_defaults(parser=subcommands.choices[name])
    return parser


def main(argv: Sequence[str] | None = None, *, clock: Clock = time) -> int:
    """Run one command; returns its exit status."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        leaf: argparse.ArgumentParser = getattr(args, "parser", parser)
        leaf.error(f"unrecognized arguments: {' '.join(unknown)}")
    args.clock = clock
    if isinstance(args.run, str):  # a command of hooks.kubectl.commands, loaded only to run
        args.run = getattr(importlib.import_module("hooks.kubectl.commands"), args.run)
    try:
        return console.run(args)
    except KeyboardInterrupt:
        return 130
