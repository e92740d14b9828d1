"""Every small state of a slice whose target moved, through each scaled pass (core/rescale.py),
against the invariants of docs/rollout.md ("Scaling while a rollout runs"), written from the rules:

- surge: a role whose new revision grows runs at most target + maxSurge, old counted before the
  pass (the pass's writes may land in any order); an old revision that grows (only while the
  slice stands still) does so within the same ceiling, new counted before the pass;
- availability: a role that loses groups keeps at least its floor Ready, every removed group
  counted as Ready (target - maxUnavailable; the target while held);
- coordination: an old revision grows only while the slice stands still, and after the pass runs
  no group or at least one of every role it ran (a held or stopped slice never retires one);
- direction: the new revision never grows above the target nor shrinks below it;
- liveness: with targets fixed and every group Ready by the next pass, a rolling slice retires
  every old revision, its new revision at the target, within a bounded number of passes.

Two and three roles, counts up to 3 or 4, four budgets, Ready counts at none, some and all, one
and two old revisions: every combination for two roles and one old revision, a seeded sample of
the rest.
"""

from __future__ import annotations

import itertools
import os
import random
from collections.abc import Iterator, Sequence

import pytest

from hooks.core import planner, rescale

BUDGETS = (
    planner.RoleConfig(1, 0),
    planner.RoleConfig(0, 1),
    planner.RoleConfig(2, 1),
    planner.RoleConfig(1, 1),
)


def _problems(
    roles: Sequence[rescale.Role],
    old: Sequence[rescale.Old],
    result: rescale.Pass,
    *,
    held: bool = False,
    standing: bool = False,
) -> list[str]:
    found = []
    for r, role in enumerate(roles):
        old_before = sum(rev.replicas[r] or 0 for rev in old)
        old_ready = sum(rev.ready[r] for rev in old)
        old_after = sum(counts[r] or 0 for counts in result.old)
        new_after = result.new[r]
        if new_after > role.new and (
            new_after > role.target or old_before + new_after > role.ceiling
        ):
            found.append(f"role {r}: new grew to {new_after} beside {old_before} old")
        if new_after < role.new and new_after < role.target:
            found.append(f"role {r}: new shrank to {new_after} below the target")
        if old_after > old_before and (not standing or old_after + role.new > role.ceiling):
            found.append(f"role {r}: old grew to {old_after} beside {role.new} new")
        lost_old, lost_new = max(0, old_before - old_after), max(0, role.new - new_after)
        floor = role.target if held else role.floor
        ready_left = max(0, old_ready - lost_old) + max(0, role.new_ready - lost_new)
        if (lost_old or lost_new) and ready_left < floor:
            found.append(f"role {r}: as few as {ready_left} Ready left, floor {floor}")
    for rev, counts in zip(old, result.old, strict=True):
        ran = [r for r, n in enumerate(rev.replicas) if n]
        left = [counts[r] or 0 for r in ran]
        if any(left) and not all(left):
            found.append(f"an old revision lost every group of a role: {rev.replicas} -> {counts}")
        if (held or standing) and ran and not any(left):
            found.append(f"an old revision was retired while the slice stands still: {counts}")
    return found


FULL = os.environ.get("DS_SCALING_STATES") == "full"
"""`DS_SCALING_STATES=full` widens the bounds (targets and counts up to 4, every Ready count,
50,000 samples a seed: docs/CONTRIBUTING.md gives the command and its figures); the suite's own
bounds take about a minute."""


def _ready_levels(count: int) -> list[int]:
    return list(range(count + 1)) if FULL else sorted({0, count - 1 if count else 0, count})


def _one_old_states(
    targets: Sequence[int], news: int, olds: int
) -> Iterator[tuple[list[rescale.Role], list[rescale.Old]]]:
    """Two roles, one old revision: every target, count and Ready level up to the bounds."""
    for config, (t0, t1), (n0, n1), (o0, o1) in itertools.product(
        BUDGETS,
        itertools.product(targets, repeat=2),
        itertools.product(range(news + 1), repeat=2),
        itertools.product(range(olds + 1), repeat=2),
    ):
        if not (o0 or o1):
            continue
        for nr0, nr1, or0, or1 in itertools.product(
            _ready_levels(n0), _ready_levels(n1), _ready_levels(o0), _ready_levels(o1)
        ):
            roles = [
                rescale.Role(target=t0, config=config, new=n0, new_ready=nr0, initial_old=o0),
                rescale.Role(target=t1, config=config, new=n1, new_ready=nr1, initial_old=o1 + 1),
            ]
            yield roles, [rescale.Old(replicas=(o0, o1), ready=(or0, or1))]


def _sampled_states(
    seed: int, count: int
) -> Iterator[tuple[list[rescale.Role], list[rescale.Old]]]:
    """Two or three roles, one or two old revisions (a role may be missing from one)."""
    rng = random.Random(seed)
    for _ in range(count):
        width = rng.choice((2, 3))
        roles = []
        for _ in range(width):
            new = rng.randint(0, 4)
            roles.append(
                rescale.Role(
                    target=rng.randint(0, 4),
                    config=rng.choice(BUDGETS),
                    new=new,
                    new_ready=rng.randint(0, new),
                    initial_old=rng.randint(0, 6),
                )
            )
        old = []
        for _ in range(rng.choice((1, 2))):
            replicas = tuple(rng.choice((None, 0, 1, 2, 3)) for _ in range(width))
            ready = tuple(rng.randint(0, n or 0) for n in replicas)
            old.append(rescale.Old(replicas=replicas, ready=ready))
        if any(any(rev.replicas) for rev in old):
            yield roles, old


def _check_every_pass(roles: list[rescale.Role], old: list[rescale.Old]) -> list[str]:
    found = [f"rolling: {p}" for p in _problems(roles, old, rescale.rolling(roles, old))]
    for percent in (25, 50):
        held = rescale.held(roles, old, percent=percent)
        found += [
            f"held {percent}%: {p}" for p in _problems(roles, old, held, held=True, standing=True)
        ]
    stopped = rescale.stopped(roles, old)
    found += [f"stopped: {p}" for p in _problems(roles, old, stopped, standing=True)]
    return found


BOUNDS = (
    {"targets": range(5), "news": 4, "olds": 4}
    if FULL
    else {
        "targets": range(4),
        "news": 3,
        "olds": 2,
    }
)
SAMPLES = 50_000 if FULL else 5_000


def test_every_two_role_state_keeps_the_invariants_in_every_pass() -> None:
    checked = 0
    for roles, old in _one_old_states(**BOUNDS):
        problems = _check_every_pass(roles, old)
        assert not problems, (roles, old, problems)
        checked += 1
    assert checked >= 80_000


@pytest.mark.parametrize("seed", range(4))
def test_sampled_states_with_three_roles_and_two_old_revisions_keep_the_invariants(
    seed: int,
) -> None:
    for roles, old in _sampled_states(seed, SAMPLES):
        problems = _check_every_pass(roles, old)
        assert not problems, (roles, old, problems)


def _walk(roles: list[rescale.Role], old: list[rescale.Old], *, bound: int) -> int | None:
    """Passes until every old revision is retired, each pass's groups Ready by the next one
    (None: not within `bound`)."""
    for passes in range(bound):
        if not any(any(rev.replicas) for rev in old):
            return passes
        result = rescale.rolling(roles, old)
        assert not _problems(roles, old, result)
        roles = [
            rescale.Role(
                target=role.target,
                config=role.config,
                new=n,
                new_ready=n,
                initial_old=role.initial_old,
            )
            for role, n in zip(roles, result.new, strict=True)
        ]
        old = [
            rescale.Old(replicas=counts, ready=tuple(n or 0 for n in counts))
            for counts in result.old
        ]
    return None


def test_every_two_role_rollout_with_fixed_targets_retires_the_old_revision() -> None:
    for roles, old in _one_old_states(**BOUNDS):
        if any(role.new_ready < role.new for role in roles) or any(
            ready < (n or 0)
            for rev in old
            for ready, n in zip(rev.ready, rev.replicas, strict=True)
        ):
            continue
        bound = 4 * sum(role.target + role.new for role in roles) + 4 * 6 + 10
        assert _walk(roles, old, bound=bound) is not None, (roles, old)


@pytest.mark.parametrize("seed", range(2))
def test_sampled_rollouts_with_two_old_revisions_retire_them(seed: int) -> None:
    for roles, old in _sampled_states(100 + seed, SAMPLES):
        ready_roles = [
            rescale.Role(role.target, role.config, role.new, role.new, role.initial_old)
            for role in roles
        ]
        ready_old = [rescale.Old(rev.replicas, tuple(n or 0 for n in rev.replicas)) for rev in old]
        bound = 4 * sum(role.target + role.new for role in roles) + 40
        assert _walk(ready_roles, ready_old, bound=bound) is not None, (roles, old)
