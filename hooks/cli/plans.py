"""`plan`: the pass-by-pass table of one slice's rolling update, from replica vectors or from two
DisaggregatedSet manifests.

The table is `planner.rollout_sequence` with instant readiness and each role's floor (the hooks'
parity mode); with `--rescale` or `--ready-after` the slice is played through the reconcile's own
slice planner instead (`hooks.cli.trajectory`). Roles follow the controller's order: the target's
roles as given, then removed roles (target 0) by name.
"""

from __future__ import annotations

import argparse
import functools
from collections.abc import Callable, Sequence

from hooks import api
from hooks.cli import console, manifests, trajectory
from hooks.core import controls, planner, records, rollout, validation
from hooks.gocompat import gotext, revision

_Value = int | str | None


def run(args: argparse.Namespace) -> int:
    vectors = args.old is not None or args.target is not None
    from_files = args.from_file is not None or args.to_file is not None
    if vectors == from_files:
        raise console.CliError("give either --old and --target, or --from and --to", exit_code=2)
    planned = (_roles_from_vectors(args), []) if vectors else _roles_from_files(args)
    if planned is None:
        return 0
    roles, notes = planned
    names = {role.name for role in roles}
    unknown = sorted({name for _, pairs in args.rescale or () for name, _ in pairs} - names)
    if unknown:
        raise console.CliError(f"--rescale names unknown roles: {', '.join(unknown)}", exit_code=2)
    for line in notes:
        print(line)
    for role in roles:
        config = role.config_for(role.target)
        print(
            f"role {role.name}: old {role.initial_old} -> target {role.target} "
            f"(maxSurge {config.max_surge}, maxUnavailable {config.max_unavailable})"
        )
    print()
    if args.rescale or args.ready_after is not None:
        return _simulated(args, roles)
    return _sequence(args, roles)


def _roles_from_vectors(args: argparse.Namespace) -> list[trajectory.Role]:
    """Roles from `--old`/`--target` pairs, each with its --max-surge and --max-unavailable."""
    if args.old is None or args.target is None:
        raise console.CliError("--old and --target go together", exit_code=2)
    old, target = dict(args.old), dict(args.target)
    names = [*target, *sorted(set(old) - set(target))]
    surge, surges = _fold_budget(args.max_surge)
    unavailable, unavailables = _fold_budget(args.max_unavailable)
    for per_role, option in ((surges, "--max-surge"), (unavailables, "--max-unavailable")):
        unknown = sorted(set(per_role) - set(names))
        if unknown:
            raise console.CliError(
                f"{option} names unknown roles: {', '.join(unknown)}", exit_code=2
            )
    roles = []
    problems = []
    for name in names:
        replicas = target.get(name, 0)
        budget = surges.get(name, surge), unavailables.get(name, unavailable)
        problems += _budget_problems(name, *budget, replicas=replicas)
        roles.append(trajectory.Role(name, old.get(name, 0), replicas, _config_for(*budget)))
    if problems:
        raise console.CliError(*problems, exit_code=2)
    return roles


def _fold_budget(
    values: Sequence[Sequence[tuple[str | None, int | str]]] | None,
) -> tuple[_Value, dict[str, int | str]]:
    """The value for every role and the per-role ones; a later one for the same role wins."""
    default: _Value = None
    per_role: dict[str, int | str] = {}
    for items in values or ():
        for name, value in items:
            if name is None:
                default = value
            else:
                per_role[name] = value
    return default, per_role


def _budget_problems(role: str, surge: _Value, unavailable: _Value, *, replicas: int) -> list[str]:
    """The API's rule for maxSurge and maxUnavailable, with its messages, for a role given either
    (the other then 0, so `--max-surge 0` alone is refused); a role with target 0 is exempt."""
    if (surge is None and unavailable is None) or replicas <= 0:
        return []
    violations = validation.budget_violations(
        max_surge=0 if surge is None else surge,
        max_unavailable=0 if unavailable is None else unavailable,
        replicas=replicas,
        path="rollingUpdateConfiguration",
    )
    return [f"role {role}: {violation.message}" for violation in violations]


def _config_for(surge: _Value, unavailable: _Value) -> Callable[[int], planner.RoleConfig]:
    """A role's budget, resolved against whichever target it has."""
    return lambda target: planner.resolve_config(
        replicas=target, max_surge=surge, max_unavailable=unavailable
    )


def _roles_from_files(args: argparse.Namespace) -> tuple[list[trajectory.Role], list[str]] | None:
    """The roles of a rollout from --from to --to and notes on them, None when both have one
    revision; the --to manifest's hold annotation stands in for a missing --hold-at."""
    if args.from_file is None or args.to_file is None:
        raise console.CliError("--from and --to go together", exit_code=2)
    if args.max_surge or args.max_unavailable:
        raise console.CliError(
            "with --from/--to the budgets come from the --to manifest's "
            "rollingUpdateConfiguration; drop --max-surge/--max-unavailable",
            exit_code=2,
        )
    old = manifests.load_set(args.from_file)
    new = manifests.load_set(args.to_file)
    old_key, new_key = f"{old.namespace}/{old.name}", f"{new.namespace}/{new.name}"
    if old_key != new_key:
        console.report(
            args.report_as,
            "warning",
            f"--from is {api.DS_KIND} {old_key} but --to is {new_key}: applying --to creates a "
            "second set beside the first instead of rolling it; the plan treats them as one set",
        )
    old_revision, new_revision = _revision_of(old), _revision_of(new)
    if old_revision == new_revision:
        print(
            f"no rollout: both manifests have revision {new_revision} (only role names and "
            "leaderWorkerTemplates decide it); replica changes are applied in place"
        )
        return None
    roles, notes = _roles_from_manifests(_spec_of(old), _spec_of(new))
    if args.hold_at is None:
        args.hold_at = controls.control_of(new.annotations).hold_at_percent
    return roles, [f"revision {old_revision} -> {new_revision}", *notes]


def _roles_from_manifests(
    old: api.DisaggregatedSetSpec, new: api.DisaggregatedSetSpec
) -> tuple[list[trajectory.Role], list[str]]:
    """Old replicas from `old`; targets, budgets and role order from `new` (removed roles last)."""
    old_replicas = {role.name: role.replicas_or_default for role in old.roles}
    roles = []
    notes = []
    for role in new.roles:
        target = role.replicas_or_default
        config = functools.partial(rollout.role_config, role)
        roles.append(trajectory.Role(role.name, old_replicas.get(role.name, 0), target, config))
        if role.is_external:
            notes.append(
                f"role {role.name} is External: its target is its scaler's spec.replicas; "
                f"spec.replicas ({target}) stands in for it here"
            )
    removed = sorted(set(old_replicas) - {role.name for role in new.roles})
    default = _config_for(None, None)
    roles += [trajectory.Role(name, old_replicas[name], 0, default) for name in removed]
    if new.slices > 1:
        notes.append(f"each of the {new.slices} slices follows this table on its own")
    return roles, notes


def _spec_of(parent: records.Parent) -> api.DisaggregatedSetSpec:
    if parent.spec is None:
        raise console.CliError(f"DisaggregatedSet {parent.name!r} has no usable spec")
    return parent.spec


def _revision_of(parent: records.Parent) -> str:
    """The revision a stored manifest gets."""
    try:
        return revision.of_spec(_spec_of(parent))
    except gotext.EncodingError as error:
        raise console.CliError(f"{parent.name}: cannot compute the revision: {error}") from None


def _default_max_passes(roles: Sequence[trajectory.Role]) -> int:
    """A pass limit every rollout meets: each pass moves at least one replica on one side."""
    return sum(role.initial_old + role.target for role in roles) + 1


# --- the pass table ------------------------------------------------------------------------------


def _sequence(args: argparse.Namespace, roles: Sequence[trajectory.Role]) -> int:
    """The table of `planner.rollout_sequence`, the pass where --hold-at stands still marked."""
    max_passes = args.max_passes or _default_max_passes(roles)
    sequence = planner.rollout_sequence(
        initial_old=[role.initial_old for role in roles],
        target=[role.target for role in roles],
        config=[role.config_for(role.target) for role in roles],
        max_passes=max_passes,
        floor=True,
    )
    hold_at = args.hold_at if args.hold_at is not None and args.hold_at < 100 else None
    hold = None if hold_at is None else _hold_pass(roles, sequence, percent=hold_at)
    header = ["pass", *_per_role("old", roles), *_per_role("new", roles), "rule"]
    rows = [
        [
            str(index),
            *map(str, step.old),
            *map(str, step.new),
            step.rule.value + ("  <- holds here" if index == hold else ""),
        ]
        for index, step in enumerate(sequence)
    ]
    print(_table(header, rows))
    print()
    if hold_at is not None and hold is None:
        print(f"held at {hold_at}%: the old revision is gone before the share is reached")
    elif hold_at is not None:
        print(
            f"held at {hold_at}%: stands still after pass {hold}, both revisions serving,"
            " until the hold is raised or removed; then"
        )
    complete, summary = _outcome(roles, sequence, max_passes=max_passes)
    print(summary)
    return 0 if complete else 1


def _hold_pass(
    roles: Sequence[trajectory.Role], sequence: Sequence[planner.Step], *, percent: int
) -> int | None:
    """The first pass whose new replicas reach `percent` of every role's target while the old
    revision still serves (`rollout.has_reached`); None when the rollout ends before."""
    targets = [role.target for role in roles]
    for index, step in enumerate(sequence):
        if not any(step.old):
            return None
        if rollout.has_reached(step.new, targets, percent=percent):
            return index
    return None


def _outcome(
    roles: Sequence[trajectory.Role], sequence: Sequence[planner.Step], *, max_passes: int
) -> tuple[bool, str]:
    """Whether the sequence completed, and a line saying so (or why not)."""
    last = sequence[-1]
    passes = len(sequence) - 1
    done = all(old == 0 for old in last.old) and all(
        new >= role.target for new, role in zip(last.new, roles, strict=True)
    )
    if done:
        return True, f"complete after {_passes(passes)}"
    if passes >= max_passes:
        return False, f"not complete after {_passes(max_passes)} (raise --max-passes to see more)"
    return False, f"stuck after {_passes(passes)}: no rule yields a step from the last state"


def _passes(count: int) -> str:
    return manifests.counted(count, "pass", "passes")


def _simulated(args: argparse.Namespace, roles: Sequence[trajectory.Role]) -> int:
    """The table of `trajectory.simulate`: per pass the targets read, old and new replicas (new
    ones not yet Ready in parentheses), and what the pass did."""
    rescale: dict[int, dict[str, int]] = {}
    for at, pairs in args.rescale or ():
        rescale.setdefault(at, {}).update(pairs)
    budget = (
        (args.max_passes or _default_max_passes(roles))
        + max(rescale, default=0)
        + sum(value for pairs in rescale.values() for value in pairs.values())
    )
    rows = trajectory.simulate(
        roles,
        rescale=rescale,
        ready_after=args.ready_after or 1,
        hold_at=args.hold_at if args.hold_at is not None and args.hold_at < 100 else None,
        max_passes=args.max_passes or budget * (args.ready_after or 1),
    )
    header = [
        "pass",
        *_per_role("target", roles),
        *_per_role("old", roles),
        *_per_role("new", roles),
        "what",
    ]
    table = [
        [
            str(row.index),
            *map(str, row.targets),
            *map(str, row.old),
            *(
                str(n) if n == ready else f"{n} ({ready})"
                for n, ready in zip(row.new, row.new_ready, strict=True)
            ),
            row.what,
        ]
        for row in rows
    ]
    print(_table(header, table))
    print()
    complete, summary = trajectory.outcome(rows)
    print(summary)
    return 0 if complete else 1


def _per_role(title: str, roles: Sequence[trajectory.Role]) -> list[str]:
    return [f"{title} {role.name}" for role in roles]


def _table(header: list[str], rows: list[list[str]]) -> str:
    """Aligned text: every column right-aligned but the last."""
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(len(header))]
    return "\n".join(
        "  ".join(
            [*(cell.rjust(width) for cell, width in zip(row[:-1], widths, strict=False)), row[-1]]
        )
        for row in [header, *rows]
    )
