"""What each `kubectl ds` command does: read through `hooks.kubectl.client`, decide with the
pure modules of `hooks.kubectl`, write and print. `hooks.kubectl.plugin` holds the arguments and
imports this module only when a command runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Final

from hooks import api
from hooks.api.documents import JsonObject, object_of
from hooks.cli import console
from hooks.core import controls, records
from hooks.kubectl import PROG, adopt, adoptable, client, rollout, status, writes
from hooks.kubectl.client import SETS, Kubectl

POLL_SECONDS: Final = 1.0
ADOPT_ATTEMPTS: Final = 3
# How many times undo reads the set and writes while only its status moves under the write (why
# it can move for seconds: docs/safety.md, "What the real stack adds").
UNDO_ATTEMPTS: Final = 10


def _note(args: argparse.Namespace, text: str) -> None:
    console.report(args.report_as, "note", text)


def run_status(args: argparse.Namespace) -> int:
    kubectl, clock = Kubectl(args), args.clock
    seconds, text = args.timeout
    deadline = clock.monotonic() + seconds if seconds else None
    shown: dict[str, str] = {}
    while True:
        parent = kubectl.read_set(args.set)
        lws = kubectl.lws_of(parent)
        outcome, message = status.judge(parent, lws)
        lines = status.progress(parent, lws)
        if outcome not in status.FINAL:
            lines = {"set": message, **lines}
        for key, line in lines.items():
            if shown.get(key) != line:
                print(line, flush=True)
                shown[key] = line
        if outcome in status.FAILED:
            raise console.CliError(message)
        if outcome in status.FINAL:
            print(message)
            if outcome is not status.Outcome.AVAILABLE:
                print(
                    "not a failure: the rollout stands on purpose, where a canary gate goes on; "
                    f"`{PROG} rollout release|partition --clear {args.set}` rolls on, "
                    + _undo_hint(kubectl, parent, args.set)
                )
            return 0
        if deadline is not None and clock.monotonic() >= deadline:
            raise console.CliError(f"timed out after {text}: {message}", exit_code=3)
        left = POLL_SECONDS if deadline is None else deadline - clock.monotonic()
        clock.sleep(max(0.0, min(POLL_SECONDS, left)))


def _undo_hint(kubectl: Kubectl, parent: records.Parent, name: str) -> str:
    """What `rollout undo` would do now: never an undo that cannot be done."""
    try:
        current = rollout.spec_revision(parent)
        record = rollout.undo_target(kubectl.history(parent), current=current, number=None)
    except console.CliError as error:  # a RolloutError, or kubectl failing
        return f"and `{PROG} rollout undo {name}` has nothing to go back to ({error})"
    return f"`{PROG} rollout undo {name}` goes back to revision {record.number} ({record.revision})"


def run_history(args: argparse.Namespace) -> int:
    parent = (kubectl := Kubectl(args)).read_set(args.set)
    history = _history(args, kubectl, parent).records
    try:
        current: str | None = rollout.spec_revision(parent)
    except rollout.RolloutError as error:
        _note(args, str(error))
        current = None
    if args.revision is not None:
        detail = rollout.record_detail(rollout.find(history, args.revision), current=current)
        import yaml  # only this command prints YAML: the others start without it

        print(yaml.safe_dump(detail, sort_keys=False, width=100), end="")
    elif not history:
        print(f"No rollout history found for {args.set}.")
    else:
        print(rollout.history_table(history, current=current))
        if current is not None and all(record.revision != current for record in history):
            _note(args, f"the spec's revision {current} is not recorded yet (its rollout starts)")
    return 0


def _history(args: argparse.Namespace, kubectl: Kubectl, parent: records.Parent) -> rollout.History:
    """The set's history, each record that does not count noted."""
    known = kubectl.history(parent)
    for text in known.notes:
        _note(args, text)
    return known


def run_undo(args: argparse.Namespace) -> int:
    kubectl = Kubectl(args)
    read = kubectl.get_set(args.set, managed_fields=True)
    parent = rollout.read_set(read)
    known = _history(args, kubectl, parent)
    try:
        current = rollout.spec_revision(parent)
        record = rollout.undo_target(known, current=current, number=args.to_revision)
        restored = rollout.restore(rollout.spec_roles(read), record)
    except rollout.RolloutError as error:
        lacking = f" (its status.history: {parent.history})" if parent.history else ""
        raise console.CliError(f"{error}{lacking}") from None
    lws = kubectl.lws_of(parent)
    _write_undo(kubectl, args.set, read, roles=restored.roles, change_cause=record.change_cause)
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


def _write_undo(
    kubectl: Kubectl,
    name: str,
    read: JsonObject,
    *,
    roles: Sequence[JsonObject],
    change_cause: str | None,
) -> None:
    """Write an undo planned from `read`: each try reads the set again right before its first
    write, which that read's resourceVersion guards, and another follows a write that failed
    while only the status moved (docs/rollout.md, "Rolling back with kubectl ds")."""
    failed: tuple[object, console.CliError] | None = None
    for _ in range(UNDO_ATTEMPTS):
        live = kubectl.get_set(name, managed_fields=True)
        version = object_of(live.get("metadata")).get("resourceVersion")
        if failed is not None and failed[0] == version:
            raise failed[1]  # the set did not move: the write failed for another reason
        if not writes.same_spec(read, live):
            raise console.CliError(
                f"{name} changed while undo ran, so nothing was written: run undo again"
            )
        first, *rest = writes.undo_writes(live, roles=roles, change_cause=change_cause)
        try:
            _write(kubectl, name, first)
        except console.CliError as error:
            failed = (version, error)
            continue
        for write in rest:
            _write(kubectl, name, write)
        return
    raise console.CliError(
        f"{name}'s status kept changing while undo ran, so nothing was written: run undo again"
    )


def _write(kubectl: Kubectl, name: str, write: writes.Write) -> None:
    manager = f"--field-manager={write.manager}"
    if write.method is writes.Method.APPLY:
        apply = ("apply", "--server-side", manager, "--filename=-", "--output=name")
        kubectl.run(*apply, stdin=json.dumps(write.body))
    else:
        kubectl.patch(SETS, name, f"--type={write.method}", manager, body=write.body)


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


def run_annotate(args: argparse.Namespace) -> int:
    key, value, done = _change(args)
    kubectl = Kubectl(args)
    shown = f"{key}={value}" if value is not None else f"{key} removed"
    parent = kubectl.read_set(args.set)
    hint = status.partition_hint(parent, value) if key == api.ANNOTATION_ROLLOUT_PARTITION else None
    if parent.annotations.get(key) == value:
        print(f"{args.set} already {done} ({shown}): nothing to change")
    else:
        body = {"metadata": {"annotations": {key: value}}}
        kubectl.patch(SETS, args.set, "--type=merge", body=body)
        print(f"{args.set} {done} ({shown})")
    if hint is not None:
        _note(args, hint)
    return 0


def run_adopt(args: argparse.Namespace) -> int:
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
    """The sets `adopt` works on, and the objects of a child kind with their name label."""
    scope = ["--all-namespaces"] if args.all_namespaces else []
    if args.set:
        parents = [kubectl.read_set(args.set)]
    else:
        listed = client.items(kubectl.get(SETS, *scope))
        parents = [rollout.read_set(item) for item in listed]
    label = api.LABEL_NAME + (f"={args.set}" if args.set else "")
    kinds = ",".join(adopt.RESOURCES.values())
    listed = client.items(kubectl.get(kinds, f"--selector={label}", *scope))
    return parents, [child for item in listed if (child := client.child(item)) is not None]


def _adopted(
    kubectl: Kubectl,
    decision: adopt.Decision,
    parents: list[records.Parent],
    *,
    orphans: bool,
    known: Mapping[tuple[str, str], adoptable.Known],
) -> adopt.Decision:
    """Patch one object; on a conflict, read and judge it again, a few times."""
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
        fresh = client.child(kubectl.get(*where))
        if fresh is None or adopt.set_of(fresh) != adopt.key_of(parent):
            raise console.CliError(
                f"{decision.kind} {decision.name} lost {decision.set_name}'s label"
            )
        decision = adopt.decide(parent, fresh, orphans=orphans, known=known[adopt.key_of(parent)])
    raise console.CliError(f"{decision.kind} {decision.name} kept changing: run adopt again")
