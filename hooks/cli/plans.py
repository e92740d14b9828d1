"""The `plan` command: per-role vectors, the pass-by-pass table, and the command's run.

The roles come from replica vectors or from two DisaggregatedSet manifests; the sequence itself is
`planner.rollout_sequence` with instant readiness and each role's floor (the hooks' parity mode),
which is what one slice goes through when every pass becomes ready before the next. With targets
that change during the rollout (`--rescale`) or groups that take passes to become Ready
(`--ready-after`), the slice is played pass by pass through the reconcile's own slice planner
instead (`hooks.cli.trajectory`). Roles follow the controller's order: the target's roles as
given, then removed roles (target 0) by name.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

from hooks import api
from hooks.cli import console, manifests
from hooks.core import controls, planner, records, rollout, validation
from hooks.gocompat import gotext, revision


class PlanError(Exception):
    """The inputs do not describe a plan; `lines` says why, one problem a line, and `usage`
    marks a mistake in how the command was called."""

    def __init__(self, *lines: str, usage: bool = False) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines
        self.usage = usage


@dataclass(frozen=True, slots=True)
class Budget:
    """A --max-surge or --max-unavailable value: for every role, and per-role overrides."""

    default: int | str | None
    per_role: Mapping[str, int | str]

    def for_role(self, role: str) -> int | str | None:
        return self.per_role.get(role, self.default)


@dataclass(frozen=True, slots=True)
class PlanRole:
    """One role of a plan: its old replicas, its target and its resolved budgets."""

    name: str
    initial_old: int
    target: int
    config: planner.RoleConfig
    budget: tuple[int | str | None, int | str | None] = (None, None)
    """maxSurge and maxUnavailable as given, to resolve against another target."""

    def config_for(self, target: int) -> planner.RoleConfig:
        """The role's budget resolved against `target`."""
        return planner.resolve_config(
            replicas=target, max_surge=self.budget[0], max_unavailable=self.budget[1]
        )


def roles_from_vectors(
    *,
    old: Sequence[tuple[str, int]],
    target: Sequence[tuple[str, int]],
    max_surge: Budget,
    max_unavailable: Budget,
) -> list[PlanRole]:
    """Roles from `--old`/`--target` pairs, budgets resolved against each target."""
    old_by_role = dict(old)
    target_by_role = dict(target)
    # The controller's order: spec (target) roles as given, then removed roles by name.
    names = [name for name, _ in target]
    names += sorted(set(old_by_role) - set(target_by_role))
    for budget, option in ((max_surge, "--max-surge"), (max_unavailable, "--max-unavailable")):
        unknown = sorted(set(budget.per_role) - set(names))
        if unknown:
            raise PlanError(f"{option} names unknown roles: {', '.join(unknown)}", usage=True)
    roles = []
    problems = []
    for name in names:
        replicas = target_by_role.get(name, 0)
        surge, unavailable = max_surge.for_role(name), max_unavailable.for_role(name)
        problems += _budget_problems(name, surge=surge, unavailable=unavailable, replicas=replicas)
        config = planner.resolve_config(
            replicas=replicas, max_surge=surge, max_unavailable=unavailable
        )
        roles.append(
            PlanRole(
                name=name,
                initial_old=old_by_role.get(name, 0),
                target=replicas,
                config=config,
                budget=(surge, unavailable),
            )
        )
    if problems:
        raise PlanError(*problems, usage=True)
    return roles


def _budget_problems(
    role: str, *, surge: int | str | None, unavailable: int | str | None, replicas: int
) -> list[str]:
    """The API's rule for maxSurge and maxUnavailable (`validation.budget_violations`, so with
    its messages), for a role given either. A value given for only one of the two leaves the
    other at 0, so `--max-surge 0` alone is refused like both at 0 (the planner would otherwise
    fall back to maxSurge 1 without a word); a role with target 0 is exempt, as in the API."""
    if (surge is None and unavailable is None) or replicas <= 0:
        return []
    violations = validation.budget_violations(
        max_surge=0 if surge is None else surge,
        max_unavailable=0 if unavailable is None else unavailable,
        replicas=replicas,
        path="rollingUpdateConfiguration",
    )
    return [f"role {role}: {violation.message}" for violation in violations]


def roles_from_manifests(
    *, old: records.Parent, new: records.Parent
) -> tuple[list[PlanRole], list[str]]:
    """Old replicas from `old`; targets, budgets and role order from `new` (removed roles last)."""
    old_spec = _spec_of(old)
    new_spec = _spec_of(new)
    old_by_role = {role.name: _spec_replicas(role) for role in old_spec.roles}
    roles = []
    notes = []
    for role in new_spec.roles:
        target = _spec_replicas(role)
        roles.append(
            PlanRole(
                name=role.name,
                initial_old=old_by_role.get(role.name, 0),
                target=target,
                config=rollout.role_config(role, target),
                budget=role.rolling_update_budget or (None, None),
            )
        )
        if role.is_external:
            notes.append(
                f"role {role.name} is External: its target is its scaler's spec.replicas; "
                f"spec.replicas ({target}) stands in for it here"
            )
    new_names = {role.name for role in new_spec.roles}
    for name in sorted(set(old_by_role) - new_names):
        roles.append(
            PlanRole(
                name=name, initial_old=old_by_role[name], target=0, config=planner.DEFAULT_CONFIG
            )
        )
    if new_spec.slices > 1:
        notes.append(f"each of the {new_spec.slices} slices follows this table on its own")
    return roles, notes


def _spec_replicas(role: api.Role) -> int:
    return 1 if role.replicas is None else role.replicas


def _spec_of(parent: records.Parent) -> api.DisaggregatedSetSpec:
    if parent.spec is None:
        raise PlanError(f"DisaggregatedSet {parent.name!r} has no usable spec")
    return parent.spec


def revision_of(parent: records.Parent) -> str:
    """The revision a stored manifest gets."""
    spec = _spec_of(parent)
    try:
        return revision.compute_revision(
            [(role.name, role.leader_worker_template) for role in spec.roles]
        )
    except gotext.EncodingError as error:
        raise PlanError(f"{parent.name}: cannot compute the revision: {error}") from None


def default_max_passes(roles: Sequence[PlanRole]) -> int:
    """A pass limit every rollout meets: each pass moves at least one replica on one side."""
    return sum(role.initial_old + role.target for role in roles) + 1


def hold_pass(
    roles: Sequence[PlanRole], sequence: Sequence[planner.Step], *, percent: int
) -> int | None:
    """The pass at which a rollout held at `percent` stands still: the first whose new replicas
    reach that share of every role's target (`rollout.has_reached`), while the old revision
    still serves. None when the rollout ends before."""
    targets = [role.target for role in roles]
    for index, step in enumerate(sequence):
        if not any(step.old):
            return None
        if rollout.has_reached(step.new, targets, percent=percent):
            return index
    return None


def render_table(
    roles: Sequence[PlanRole], sequence: Sequence[planner.Step], *, hold: int | None = None
) -> str:
    """The sequence as an aligned text table, one row per pass; `hold` marks the pass where a
    held rollout stands still."""
    header = [
        "pass",
        *(f"old {role.name}" for role in roles),
        *(f"new {role.name}" for role in roles),
        "rule",
    ]
    rows = [
        [
            str(index),
            *map(str, step.old),
            *map(str, step.new),
            step.rule.value + ("  <- holds here" if index == hold else ""),
        ]
        for index, step in enumerate(sequence)
    ]
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(len(header))]
    lines = []
    for row in [header, *rows]:
        cells = [cell.rjust(width) for cell, width in zip(row[:-1], widths, strict=False)]
        lines.append("  ".join([*cells, row[-1]]))
    return "\n".join(lines)


def outcome(
    roles: Sequence[PlanRole], sequence: Sequence[planner.Step], *, max_passes: int
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


def different_sets(*, old: records.Parent, new: records.Parent) -> str | None:
    """Why a plan between two manifests describes no real rollout, when they are different sets
    (another name or namespace: applying the new one creates a set beside the old one)."""
    old_key = f"{old.namespace}/{old.name}"
    new_key = f"{new.namespace}/{new.name}"
    if old_key == new_key:
        return None
    return (
        f"--from is {api.DS_KIND} {old_key} but --to is {new_key}: applying --to creates a "
        "second set beside the first instead of rolling it; the plan treats them as one set"
    )


def fold_budget(values: Sequence[Sequence[tuple[str | None, int | str]]] | None) -> Budget:
    """Repeated options combine; a later value for the same role (or for all) wins."""
    default: int | str | None = None
    per_role: dict[str, int | str] = {}
    for items in values or ():
        for name, value in items:
            if name is None:
                default = value
            else:
                per_role[name] = value
    return Budget(default, per_role)


# --- the command ---------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    try:
        return _plan(args)
    except PlanError as error:
        raise console.CliError(*error.lines, exit_code=2 if error.usage else 1) from None


def _plan(args: argparse.Namespace) -> int:
    vectors = args.old is not None or args.target is not None
    from_files = args.from_file is not None or args.to_file is not None
    if vectors == from_files:
        raise console.CliError("give either --old and --target, or --from and --to", exit_code=2)
    planned = _roles_from_vectors(args) if vectors else _roles_from_files(args)
    if planned is None:
        return 0
    roles, notes = planned
    max_passes = args.max_passes or default_max_passes(roles)
    _check_rescale(args, roles)
    _print_roles(roles, notes)
    if args.rescale or args.ready_after is not None:
        return _simulated(args, roles, max_passes=max_passes)
    sequence = planner.rollout_sequence(
        initial_old=[role.initial_old for role in roles],
        target=[role.target for role in roles],
        config=[role.config for role in roles],
        max_passes=max_passes,
        floor=True,
    )
    complete, summary = outcome(roles, sequence, max_passes=max_passes)
    _print_table(roles, sequence, hold_at=args.hold_at)
    print(summary)
    return 0 if complete else 1


def _check_rescale(args: argparse.Namespace, roles: Sequence[PlanRole]) -> None:
    """Refuse a --rescale naming a role the plan does not have."""
    names = {role.name for role in roles}
    unknown = sorted({name for _, pairs in args.rescale or () for name, _ in pairs} - names)
    if unknown:
        raise PlanError(f"--rescale names unknown roles: {', '.join(unknown)}", usage=True)


def _print_roles(roles: Sequence[PlanRole], notes: Sequence[str]) -> None:
    for line in notes:
        print(line)
    for role in roles:
        print(
            f"role {role.name}: old {role.initial_old} -> target {role.target} "
            f"(maxSurge {role.config.max_surge}, maxUnavailable {role.config.max_unavailable})"
        )
    print()


def _simulated(args: argparse.Namespace, roles: Sequence[PlanRole], *, max_passes: int) -> int:
    """The slice pass by pass through the reconcile's planner (`trajectory.simulate`), with the
    targets changed by --rescale and groups Ready --ready-after passes after they are asked for."""
    from hooks.cli import trajectory

    rescale: dict[int, dict[str, int]] = {}
    for at, pairs in args.rescale or ():
        rescale.setdefault(at, {}).update(pairs)
    budget = (
        max_passes
        + max(rescale, default=0)
        + sum(value for pairs in rescale.values() for value in pairs.values())
    )
    rows = trajectory.simulate(
        [
            trajectory.Role(
                name=role.name,
                initial_old=role.initial_old,
                target=role.target,
                config_for=role.config_for,
            )
            for role in roles
        ],
        rescale=rescale,
        ready_after=args.ready_after or 1,
        hold_at=args.hold_at if args.hold_at is not None and args.hold_at < 100 else None,
        max_passes=args.max_passes or budget * (args.ready_after or 1),
    )
    print(trajectory.render(roles=[role.name for role in roles], rows=rows))
    print()
    complete, summary = trajectory.outcome(rows)
    print(summary)
    return 0 if complete else 1


_PlannedRoles: TypeAlias = tuple[list[PlanRole], list[str]]


def _roles_from_vectors(args: argparse.Namespace) -> _PlannedRoles:
    if args.old is None or args.target is None:
        raise console.CliError("--old and --target go together", exit_code=2)
    roles = roles_from_vectors(
        old=args.old,
        target=args.target,
        max_surge=fold_budget(args.max_surge),
        max_unavailable=fold_budget(args.max_unavailable),
    )
    return roles, []


def _roles_from_files(args: argparse.Namespace) -> _PlannedRoles | None:
    """The roles of a rollout from --from to --to (None: the two have one revision, no rollout);
    the --to manifest's hold annotation becomes --hold-at when that is not given."""
    if args.from_file is None or args.to_file is None:
        raise console.CliError("--from and --to go together", exit_code=2)
    if args.max_surge or args.max_unavailable:
        raise console.CliError(
            "with --from/--to the budgets come from the --to manifest's "
            "rollingUpdateConfiguration; drop --max-surge/--max-unavailable",
            exit_code=2,
        )
    old_parent = _load_manifest(args.from_file)
    new_parent = _load_manifest(args.to_file)
    warning = different_sets(old=old_parent, new=new_parent)
    if warning is not None:
        console.report(args.report_as, "warning", warning)
    old_revision = revision_of(old_parent)
    new_revision = revision_of(new_parent)
    if old_revision == new_revision:
        print(
            f"no rollout: both manifests have revision {new_revision} (only role names and "
            "leaderWorkerTemplates decide it); replica changes are applied in place"
        )
        return None
    roles, notes = roles_from_manifests(old=old_parent, new=new_parent)
    notes.insert(0, f"revision {old_revision} -> {new_revision}")
    if args.hold_at is None:
        args.hold_at = controls.control_of(new_parent.annotations).hold_at_percent
    return roles, notes


def _print_table(
    roles: Sequence[PlanRole], sequence: Sequence[planner.Step], *, hold_at: int | None
) -> None:
    """The pass table, with the pass where a hold at `hold_at`% stands still marked."""
    if hold_at is None or hold_at >= 100:  # 100%: no hold, as in the API
        print(render_table(roles, sequence))
        print()
        return
    hold = hold_pass(roles, sequence, percent=hold_at)
    print(render_table(roles, sequence, hold=hold))
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
        raise console.CliError(*error.lines) from None
