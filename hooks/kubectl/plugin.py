"""`kubectl ds`: the kubectl plugin of DisaggregatedSets (the `kubectl-ds` console script).

kubectl runs a `kubectl-NAME` program on PATH as `kubectl NAME`, so `pip install` makes this
`kubectl ds`. It reaches the cluster only through the `kubectl` binary on PATH, passing on the
user's `-n/--namespace`, `--context` and `--kubeconfig` (and the environment): no credentials
and no client library of its own. It parses arguments, runs kubectl and prints; what it decides
is `hooks.kubectl.rollout`'s (for `adopt`, `hooks.kubectl.adopt`'s), and how an undo writes is
`hooks.kubectl.writes`'s. Each command's `--help` says what it does: `rollout status` (a paused
rollout keeps it waiting, as for a Deployment; a held or partitioned one with every new group
ready is where a canary pipeline's gate continues, exit 0), `rollout history`, `rollout undo`
(only the templates and the change-cause change, guarded by the resourceVersion read: a set
changed meanwhile is refused, never overwritten), `rollout pause|resume|hold|release|partition`
(a merge patch of one annotation, its value checked as `hooks.core.controls` reads it), `adopt`
(label children another controller made for Metacontroller, one merge patch with the
resourceVersion read per object; an orphan only when `hooks.kubectl.adoptable` finds it exactly
what the set would have made; only for a user the API server allows the verb `adopt` on the
set, which the kit's admission policy asks of whoever hands a set an object), and `plan` and
`render`, which are `python -m hooks plan|render` (hooks.cli.commands). A command imports only
what it runs: `--help` and usage errors need neither the API's models nor YAML.

Exit status: 0 done (`rollout status`: Available, or held or partitioned on purpose; an
annotation already as asked); 1 failure (deadline exceeded, Degraded, a refused undo, an object
adopt left alone, adopt without the verb adopt, kubectl failing: not found, a conflict, no
access, or kubectl that cannot be run at all; a failed plan or render); 2 usage error; 3
`rollout status --timeout` ran out while the rollout still moved, waited or was paused; 130
interrupted. 0, 1 and 2 are `python -m hooks`'s (1 is also kubectl's failure);
kubectl gives 1 for a timeout too, and 3 lets a pipeline tell "give it longer" from "broken".
Every error is one line, `kubectl ds COMMAND: error: ...`. A patch or an object goes to kubectl
in a file or on its standard input, never on its command line, where Linux takes no argument
over 128 KiB and a set's templates can be ten times that.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol, TypeAlias, TypeVar

from hooks import api, version
from hooks.cli import commands, console
from hooks.core import controls, records
from hooks.kubectl import adopt, adoptable, rollout, writes
from hooks.wire import envelope

PROG: Final = "kubectl ds"
POLL_SECONDS: Final = 1.0
ADOPT_ATTEMPTS: Final = 3
KUBECTL_TIMEOUT_SECONDS: Final = 120
SETS: Final = f"{api.DS_PLURAL}.{api.GROUP}"
LWS: Final = f"{api.LWS_PLURAL}.{api.LWS_API_VERSION.split('/')[0]}"
REVISIONS: Final = f"{api.REVISION_PLURAL}.{api.GROUP}"
_DURATION_PART: Final = r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(h|m|s)"
_UNIT_SECONDS: Final = {"h": 3600.0, "m": 60.0, "s": 1.0}

_Read = TypeVar("_Read")
_Parser: TypeAlias = argparse.ArgumentParser
_Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
JsonObject = dict[str, Any]


class Clock(Protocol):
    """What `rollout status` waits with: the `time` module, or a fake one in tests."""

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float, /) -> None: ...


def _note(args: argparse.Namespace, text: str) -> None:
    print(f"{args.report_as}: note: {text}", file=sys.stderr)


# --- kubectl -------------------------------------------------------------------------------------


class Kubectl:
    """The kubectl binary with the user's connection flags; a failure, whether kubectl reports it
    or cannot be run at all, is a `console.CliError` on one line (kubectl's own words when it
    has some). Objects and patches go to kubectl on its standard input or in a file, never on
    its command line: Linux takes no argument over 128 KiB, and a set's templates can be ten
    times that."""

    def __init__(self, args: argparse.Namespace) -> None:
        given = (("kubeconfig", args.kubeconfig), ("context", args.context))
        self._flags = [f"--{flag}={value}" for flag, value in given if value is not None]
        if args.namespace is not None:
            self._flags.append(f"--namespace={args.namespace}")

    def run(self, *arguments: str, stdin: str | None = None) -> str:
        try:
            done = subprocess.run(
                ["kubectl", *self._flags, *arguments],
                input=stdin,
                capture_output=True,
                text=True,
                encoding="utf-8",
                errors="replace",
                timeout=KUBECTL_TIMEOUT_SECONDS,
                check=False,
            )
        except FileNotFoundError:
            raise console.CliError(
                "kubectl is not on PATH, and kubectl ds works through it"
            ) from None
        except subprocess.TimeoutExpired:
            raise console.CliError(
                f"kubectl {arguments[0]} did not finish within {KUBECTL_TIMEOUT_SECONDS} s"
            ) from None
        except OSError as error:
            raise console.CliError(
                f"kubectl {arguments[0]} could not be run: {error.strerror or error}"
            ) from None
        if done.returncode != 0:
            lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
            text = "; ".join(lines) or f"kubectl {arguments[0]} exited with {done.returncode}"
            raise console.CliError(text.removeprefix("error: "))
        return done.stdout

    def patch(self, *arguments: str, body: object) -> str:
        """`kubectl patch ARGUMENTS` with `body`, as JSON, in a temporary file of its own
        (`--patch-file`), which is gone when kubectl has read it."""
        try:
            scratch = tempfile.TemporaryDirectory(prefix="kubectl-ds-")
            path = os.path.join(scratch.name, "patch.json")
            with open(path, "w", encoding="utf-8") as file:
                json.dump(body, file)
        except OSError as error:
            message = f"cannot write a patch for kubectl: {error.strerror or error}"
            raise console.CliError(message) from None
        with scratch:
            return self.run("patch", *arguments, f"--patch-file={path}")

    def get(self, *arguments: str) -> JsonObject:
        """`kubectl get ... -o json`, parsed."""
        return _json_object(self.run("get", *arguments, "--output=json"), "kubectl get")

    def may(self, verb: str, resource: str, name: str, *, namespace: str) -> bool:
        """Whether the user may `verb` the object `name` of `resource` (`plural.group`), as the
        API server answers a SelfSubjectAccessReview."""
        plural, _, group = resource.partition(".")
        attributes = {"namespace": namespace, "verb": verb, "group": group}
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {**attributes, "resource": plural, "name": name}},
        }
        arguments = ("--filename=-", "--validate=false", "--output=json")
        shown = self.run("create", *arguments, stdin=json.dumps(review))
        status = _json_object(shown, "kubectl create").get("status")
        return isinstance(status, dict) and status.get("allowed") is True

    def get_set(self, name: str, *, managed_fields: bool = False) -> JsonObject:
        """The set as kubectl prints it (with `managedFields` when asked)."""
        shown = ["--show-managed-fields"] if managed_fields else []
        return self.get(SETS, name, *shown)

    def read_set(self, name: str) -> records.Parent:
        """The set as the hooks read it."""
        return _read(rollout.read_set, self.get_set(name))

    def lws_of(self, parent: records.Parent) -> list[records.ObservedObject]:
        """The LeaderWorkerSets the set controls."""
        listing = self.get(LWS, f"--selector={api.LABEL_NAME}={parent.name}")
        return _read(lambda value: rollout.read_children(_LWS, value, parent=parent), listing)

    def history(self, parent: records.Parent) -> rollout.History:
        """The set's history: the records with its name label, read as the hooks read them; the
        ones that do not count, those it does not control included, are named in its notes."""
        items = self.get(REVISIONS, f"--selector={api.LABEL_NAME}={parent.name}").get("items")
        try:
            observed = envelope.parse_records(items if isinstance(items, list) else [])
        except envelope.RequestError as error:
            raise console.CliError(f"kubectl get {REVISIONS}: {error}") from None
        return rollout.records_of(parent, observed)


_LWS: Final = records.ChildKind.LWS


def _json_object(text: str, command: str) -> JsonObject:
    """What kubectl printed with `--output=json`, parsed: the one place its output is read."""
    try:
        value = json.loads(text)
    except ValueError as error:
        raise console.CliError(f"{command} printed no JSON: {error}") from None
    if not isinstance(value, dict):
        raise console.CliError(f"{command} printed no JSON object")
    return value


def _read(reader: Callable[[JsonObject], _Read], value: JsonObject) -> _Read:
    """`reader(value)`, its RolloutError a CliError."""
    try:
        return reader(value)
    except rollout.RolloutError as error:
        raise console.CliError(str(error)) from None


# --- rollout status ------------------------------------------------------------------------------


def _add_status(actions: _Subcommands) -> None:
    parser = _leaf(
        actions,
        "status",
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
    parser.set_defaults(run=_run_status)


def _run_status(args: argparse.Namespace) -> int:
    kubectl, clock = Kubectl(args), args.clock
    seconds, text = args.timeout
    deadline = clock.monotonic() + seconds if seconds else None
    shown: dict[str, str] = {}
    while True:
        parent = kubectl.read_set(args.set)
        lws = kubectl.lws_of(parent)
        verdict = rollout.judge(parent, lws)
        lines = rollout.progress(parent, lws)
        if verdict.outcome not in rollout.FINAL:
            lines = {"set": verdict.message, **lines}
        for key, line in lines.items():
            if shown.get(key) != line:
                print(line, flush=True)
                shown[key] = line
        if verdict.outcome in rollout.FAILED:
            raise console.CliError(verdict.message)
        if verdict.outcome in rollout.FINAL:
            print(verdict.message)
            if verdict.outcome is not rollout.Outcome.AVAILABLE:
                print(
                    "not a failure: the rollout stands on purpose, where a canary gate goes on; "
                    f"`{PROG} rollout release|partition --clear {args.set}` rolls on, "
                    + _undo_hint(kubectl, parent, args.set)
                )
            return 0
        if deadline is not None and clock.monotonic() >= deadline:
            raise console.CliError(f"timed out after {text}: {verdict.message}", exit_code=3)
        left = POLL_SECONDS if deadline is None else deadline - clock.monotonic()
        clock.sleep(max(0.0, min(POLL_SECONDS, left)))


def _undo_hint(kubectl: Kubectl, parent: records.Parent, name: str) -> str:
    """What `rollout undo` would do now: never an undo that cannot be done."""
    try:
        current = rollout.spec_revision(parent)
        record = rollout.undo_target(kubectl.history(parent), current=current, number=None)
    except (console.CliError, rollout.RolloutError) as error:
        return f"and `{PROG} rollout undo {name}` has nothing to go back to ({error})"
    return f"`{PROG} rollout undo {name}` goes back to revision {record.number} ({record.revision})"


def _duration(text: str) -> tuple[float, str]:
    """A duration as kubectl takes it (`90s`, `5m`, `1h30m`, `0`): seconds, and the text."""
    if text == "0":
        return 0.0, text
    if not re.fullmatch(f"(?:{_DURATION_PART})+", text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration such as 90s, 5m or 1h30m")
    parts = re.findall(_DURATION_PART, text)
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts), text


# --- rollout history and undo --------------------------------------------------------------------


def _add_history(actions: _Subcommands) -> None:
    parser = _leaf(
        actions,
        "history",
        help="list the set's revisions, or show one",
        description="List the revisions the set has run (its DisaggregatedSetRevisions): number, "
        "revision hash, change-cause (the set's kubernetes.io/change-cause when it moved there) "
        "and creation time, the current revision marked. With --revision N, print that "
        "revision's roles and templates as YAML.",
    )
    parser.add_argument("--revision", type=_whole, metavar="N", help="show revision N in full")
    parser.set_defaults(run=_run_history)


def _run_history(args: argparse.Namespace) -> int:
    kubectl = Kubectl(args)
    parent = kubectl.read_set(args.set)
    known = kubectl.history(parent)
    history = known.records
    for text in known.notes:
        _note(args, text)
    try:
        current: str | None = rollout.spec_revision(parent)
    except rollout.RolloutError as error:
        _note(args, str(error))
        current = None
    if args.revision is not None:
        try:
            record = rollout.find(history, args.revision)
        except rollout.RolloutError as error:
            raise console.CliError(str(error)) from None
        detail = rollout.record_detail(record, current=current)
        import yaml  # only this command prints YAML: the others start without it

        print(yaml.safe_dump(detail, sort_keys=False, width=100), end="")
        return 0
    if not history:
        print(f"No rollout history found for {args.set}.")
        return 0
    print(rollout.history_table(history, current=current))
    if current is not None and all(record.revision != current for record in history):
        _note(args, f"the spec's revision {current} is not recorded yet (its rollout starts)")
    return 0


def _add_undo(actions: _Subcommands) -> None:
    parser = _leaf(
        actions,
        "undo",
        help="roll back to the previous revision, or to --to-revision N",
        description="Restore a recorded revision: each of its roles' leaderWorkerTemplate goes "
        "into the spec role of that name, which keeps its replicas, scaling, rollout strategy "
        "and other settings; a recorded role the spec no longer has comes back as recorded; a "
        "role the revision does not have goes; the order is the revision's. The set then rolls "
        "back with its coordinated rollout (at once while that revision's LWS still exist). The "
        "restored spec must hash to the recorded revision. Only the templates (and the "
        "change-cause annotation) are written, guarded by the resourceVersion read, so a set "
        "changed meanwhile is refused and `kubectl apply`, client- or server-side, keeps "
        "working: a server-side applier that owns the templates re-applies its own fields.",
    )
    parser.add_argument(
        "--to-revision",
        type=_whole,
        metavar="N",
        help="the revision number to restore (default, and 0: the previous one)",
    )
    parser.set_defaults(run=_run_undo)


# A status the hooks write meanwhile changes the set's resourceVersion but not its generation:
# undo then reads the set again and tries anew, this many times in all.
_UNDO_ATTEMPTS = 3


class _StatusMoved(Exception):
    """The set's resourceVersion changed under the undo's first write, its generation did not."""


def _run_undo(args: argparse.Namespace) -> int:
    kubectl = Kubectl(args)
    for _ in range(_UNDO_ATTEMPTS - 1):
        try:
            return _undo(args, kubectl)
        except _StatusMoved:
            continue
    try:
        return _undo(args, kubectl)
    except _StatusMoved:
        raise console.CliError(
            f"{args.set}'s status kept changing while undo ran, so nothing was written: run undo"
            " again"
        ) from None


def _undo(args: argparse.Namespace, kubectl: Kubectl) -> int:
    """One attempt of `rollout undo`; raises `_StatusMoved` when only the status moved under it."""
    live = kubectl.get_set(args.set, managed_fields=True)
    parent = _read(rollout.read_set, live)
    known = kubectl.history(parent)
    for text in known.notes:
        _note(args, text)
    try:
        current = rollout.spec_revision(parent)
        record = rollout.undo_target(known, current=current, number=args.to_revision)
        restored = rollout.restore(rollout.spec_roles(live), record)
    except rollout.RolloutError as error:
        lacking = f" (its status.history: {parent.history})" if parent.history else ""
        raise console.CliError(f"{error}{lacking}") from None
    lws = kubectl.lws_of(parent)
    planned = writes.undo_writes(live, roles=restored.roles, change_cause=record.change_cause)
    for index, write in enumerate(planned):
        try:
            _write(kubectl, args.set, write)
        except console.CliError:
            if index == 0:
                _raise_if_moved(kubectl, parent)
            raise
    print(f"{args.set} rolled back to revision {record.number} ({record.revision}) from {current}")
    for change in [*restored.changes, *rollout.change_cause_change(parent, record)]:
        print(f"  {change}")
    control = controls.control_of(parent.annotations)
    if control.paused:
        print(f"  {args.set} is paused: the rollback starts on `{PROG} rollout resume {args.set}`")
    elif any(item.labels.get(api.LABEL_REVISION) == record.revision for item in lws):
        print(f"  revision {record.revision}'s LWS still run: the set goes back to them at once")
    if control.partition is not None:
        _note(args, f"only slices below the partition ({control.partition}) roll back")
    return 0


def _raise_if_moved(kubectl: Kubectl, parent: records.Parent) -> None:
    """After an undo's first write failed: `_StatusMoved` when the set's resourceVersion changed
    but not its generation or annotations (its status moved), an error when more changed."""
    now = kubectl.read_set(parent.name)
    if now.resource_version == parent.resource_version:
        return
    if now.generation == parent.generation and now.annotations == parent.annotations:
        raise _StatusMoved
    raise console.CliError(
        f"{parent.name} changed while undo ran, so nothing was written: run undo again"
    )


def _write(kubectl: Kubectl, name: str, write: writes.Write) -> None:
    """Make one of an undo's writes."""
    manager = f"--field-manager={write.manager}"
    if write.method is writes.Method.APPLY:
        kubectl.run(
            "apply", "--server-side", manager, "--filename=-", "--output=name", stdin=write.text
        )
        return
    kubectl.patch(SETS, name, f"--type={write.method}", manager, body=write.body)


def _whole(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number")
    return int(text)


# --- the rollout annotations ---------------------------------------------------------------------


def _add_annotations(actions: _Subcommands) -> None:
    for name, text in _ANNOTATION_HELP.items():
        parser = _leaf(actions, name, help=text.split(" (")[0], description=text)
        parser.set_defaults(run=_run_annotate)
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


def _change(args: argparse.Namespace) -> tuple[str, str | None, str]:
    """The annotation a command changes, the value it writes (None: removes it), what it did."""
    if args.action in ("pause", "resume"):
        return api.ANNOTATION_PAUSED, "true" if args.action == "pause" else None, args.action + "d"
    if args.action == "hold":
        return api.ANNOTATION_ROLLOUT_HOLD_AT, args.at, f"holds at {args.at}"
    if args.action == "release":
        return api.ANNOTATION_ROLLOUT_HOLD_AT, None, "released"
    if (args.k is None) != args.clear:
        args.parser.error("give either K or --clear")
    if args.clear:
        return api.ANNOTATION_ROLLOUT_PARTITION, None, "partition cleared"
    return api.ANNOTATION_ROLLOUT_PARTITION, args.k, f"partitioned at {args.k}"


def _run_annotate(args: argparse.Namespace) -> int:
    key, value, done = _change(args)
    kubectl = Kubectl(args)
    shown = f"{key}={value}" if value is not None else f"{key} removed"
    parent = kubectl.read_set(args.set)
    hint = (
        rollout.partition_hint(parent, value) if key == api.ANNOTATION_ROLLOUT_PARTITION else None
    )
    if parent.annotations.get(key) == value:
        print(f"{args.set} already {done} ({shown}): nothing to change")
    else:
        kubectl.patch(SETS, args.set, "--type=merge", body=rollout.annotation_patch({key: value}))
        print(f"{args.set} {done} ({shown})")
    if hint is not None:
        _note(args, hint)
    return 0


def _checked(text: str, *, key: str, wanted: str) -> str:
    """`text` when the hooks read it as a valid value of annotation `key`."""
    if controls.control_of({key: text}).problems:
        raise argparse.ArgumentTypeError(f"{text!r} is not {wanted}")
    return text


def _hold_at(text: str) -> str:
    wanted = "a percentage from 0% to 100%"
    if text.isdigit():
        wanted += f" (did you mean {text}%?)"
    return _checked(text, key=api.ANNOTATION_ROLLOUT_HOLD_AT, wanted=wanted)


def _partition(text: str) -> str:
    return _checked(text, key=api.ANNOTATION_ROLLOUT_PARTITION, wanted="a whole number")


# --- adopt ---------------------------------------------------------------------------------------


def _add_adopt(commands: _Subcommands) -> None:
    parser = commands.add_parser(
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
    parser.set_defaults(run=_run_adopt, report_as=parser.prog, parser=parser)


def _run_adopt(args: argparse.Namespace) -> int:
    if (args.set is None) != args.all or (args.all_namespaces and not args.all):
        args.parser.error("give either SET or --all (-A only with --all)")
    kubectl = Kubectl(args)
    parents, candidates = _adoption_candidates(kubectl, args)
    known = adopt.known_of(parents, candidates)
    planned = adopt.plan(parents, candidates, orphans=args.orphans, known=known)
    if not args.dry_run:
        _check_allowed(kubectl, planned)
    decisions = []
    for decision in planned:
        if decision.verdict is adopt.Verdict.ADOPT and not args.dry_run:
            decision = _adopted(kubectl, decision, parents, orphans=args.orphans, known=known)
        if decision.verdict is adopt.Verdict.ADOPT:
            print(("(dry run) " if args.dry_run else "") + decision.line)
        elif decision.verdict is not adopt.Verdict.ADOPTED:
            print(f"{args.report_as}: error: {decision.line}", file=sys.stderr)
        decisions.append(decision)
    for parent in parents:
        print(adopt.summary(decisions, parent))
    return int(any(d.verdict in (adopt.Verdict.REFUSED, adopt.Verdict.ORPHAN) for d in decisions))


def _check_allowed(kubectl: Kubectl, planned: Sequence[adopt.Decision]) -> None:
    """Before anything is written: the user may adopt for every set that would be handed an
    object, or it is one error line (the kit's admission policy would refuse the label)."""
    for namespace, name in dict.fromkeys(
        (d.namespace, d.set_name) for d in planned if d.verdict is adopt.Verdict.ADOPT
    ):
        if not kubectl.may(adopt.VERB, SETS, name, namespace=namespace):
            raise console.CliError(
                f"you may not adopt for {namespace}/{name}: that takes the RBAC verb"
                f" {adopt.VERB} on the set (kubectl auth can-i {adopt.VERB} {SETS}/{name} -n"
                f" {namespace}), which the admin role has, and the kit's admission policy refuses"
                " the label without it; nothing was written"
            )


def _adoption_candidates(
    kubectl: Kubectl, args: argparse.Namespace
) -> tuple[list[records.Parent], list[records.ObservedObject]]:
    """The sets `adopt` works on (SET, or every set with --all) and the objects of a child kind
    that carry their name label."""
    scope = ["--all-namespaces"] if args.all_namespaces else []
    if args.set:
        parents = [kubectl.read_set(args.set)]
    else:
        parents = [_read(rollout.read_set, item) for item in _items(kubectl.get(SETS, *scope))]
    label = api.LABEL_NAME + (f"={args.set}" if args.set else "")
    kinds = ",".join(adopt.RESOURCES.values())
    listed = _items(kubectl.get(kinds, f"--selector={label}", *scope))
    return parents, [child for item in listed if (child := _child(item)) is not None]


def _child(item: JsonObject) -> records.ObservedObject | None:
    """An object kubectl listed, read as the hooks read it (None: not of a child kind)."""
    try:
        return envelope.parse_child(item, where="kubectl's list")
    except envelope.RequestError as error:
        raise console.CliError(f"kubectl printed an unusable object: {error}") from None


def _adopted(
    kubectl: Kubectl,
    decision: adopt.Decision,
    parents: list[records.Parent],
    *,
    orphans: bool,
    known: Mapping[tuple[str, str], adoptable.Known],
) -> adopt.Decision:
    """Patch one object; when it changed since it was read (a conflict), read and judge it
    again, a few times."""
    (parent,) = (p for p in parents if adopt.key_of(p) == (decision.namespace, decision.set_name))
    where = (decision.resource, decision.name, f"--namespace={decision.namespace}")
    for _ in range(ADOPT_ATTEMPTS):
        if decision.patch is None:
            return decision
        try:
            kubectl.patch(*where, "--type=merge", body=decision.patch)
            return decision
        except console.CliError as error:
            if "Conflict" not in str(error) and "has been modified" not in str(error):
                raise
        fresh = _child(kubectl.get(*where))
        if fresh is None or adopt.set_of(fresh) != adopt.key_of(parent):
            raise console.CliError(
                f"{decision.kind} {decision.name} lost {decision.set_name}'s label"
            )
        decision = adopt.decide(parent, fresh, orphans=orphans, known=known[adopt.key_of(parent)])
    raise console.CliError(f"{decision.kind} {decision.name} kept changing: run adopt again")


def _items(listing: JsonObject) -> list[JsonObject]:
    found = listing.get("items")
    return [item for item in (found if isinstance(found, list) else []) if isinstance(item, dict)]


# --- the parser and the entry point --------------------------------------------------------------


def _connection(*, default: object) -> argparse.ArgumentParser:
    """kubectl's connection flags, taken before and after the command."""
    flags = argparse.ArgumentParser(add_help=False)
    group = flags.add_argument_group("kubectl options")
    group.add_argument("-n", "--namespace", default=default, help="the set's namespace")
    group.add_argument("--context", default=default, help="the kubeconfig context to use")
    group.add_argument("--kubeconfig", default=default, help="the kubeconfig file to use")
    return flags


def _leaf(actions: _Subcommands, name: str, *, description: str, **text: Any) -> _Parser:
    """A `rollout` subcommand taking SET and the connection flags (`text`: help, epilog)."""
    about = description[:1].upper() + description[1:].replace("%%", "%")
    about += "" if about.endswith(".") else "."
    flags = _connection(default=argparse.SUPPRESS)
    parser = actions.add_parser(name, parents=[flags], description=about, **text)
    parser.add_argument("set", metavar="SET", help="the DisaggregatedSet's name")
    parser.set_defaults(report_as=parser.prog, parser=parser)
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
    shown = f"{PROG} {version.package_version()}"
    parser.add_argument("--version", action="version", version=shown)
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
    try:
        return console.run(args)
    except KeyboardInterrupt:
        return 130
