"""Rolling-update planner: the next step of a coordinated rollout, over integer vectors per role.

Owns the arithmetic of the rolling update only: standard library, no state, no Kubernetes objects.
Every vector holds one entry per role, in one role order. It is upstream's planner step for step,
quirks included (upstream's recorded vectors judge it); its rules (rules 1 to 7, orphan
prevention, `resolve_config`) are docs/rollout.md's "The planner", and the floor that
`next_step(keep=...)` adds is its "Two modes per slice".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

_PERCENT_NUMBER = re.compile(r"[+-]?[0-9]+")
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class RoleConfig:
    """A role's resolved rolling-update budget: replicas allowed above and below its target."""

    max_surge: int
    max_unavailable: int


DEFAULT_CONFIG = RoleConfig(max_surge=1, max_unavailable=0)


class StepRule(StrEnum):
    """Which planner rule produced a step (`START` marks the first state of a sequence)."""

    START = "start"
    ABNORMAL = "abnormal"
    NEW_AT_TARGET = "new-at-target"
    SCALE_UP = "scale-up"
    DRAIN = "drain"
    FORCE_DRAIN = "force-drain"


@dataclass(frozen=True, slots=True)
class Step:
    """The next old and new replicas per role, and the rule that chose them."""

    old: tuple[int, ...]
    new: tuple[int, ...]
    rule: StepRule


@dataclass(frozen=True, slots=True)
class _Role:
    """One role's observed counts and budget, for the rules below."""

    initial_old: int
    current_old: int
    current_new: int
    target: int
    config: RoleConfig

    def min_old(self, new: int) -> int:
        """Old replicas keeping old + `new` at `target - max_unavailable` (0 for a role whose
        initial old count is below its target)."""
        if self.initial_old < self.target:
            return 0
        return max(0, self.target - self.config.max_unavailable - new)


def _ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


def _trunc_div(numerator: int, denominator: int) -> int:
    """Quotient rounded toward zero, as Go's float64-to-int conversion of a quotient rounds it."""
    quotient = abs(numerator) // abs(denominator)
    return -quotient if (numerator < 0) != (denominator < 0) else quotient


def _batch(config: RoleConfig) -> int:
    if config.max_surge > 0:
        return config.max_surge
    return max(1, config.max_unavailable)


def _total_steps(roles: Sequence[_Role]) -> int:
    return max(
        (_ceil_div(max(r.initial_old, r.target, 0), _batch(r.config)) for r in roles), default=0
    )


def _next_new(roles: Sequence[_Role], steps: int) -> tuple[int, ...]:
    """Rule 4's candidate: every role at the ideal new count one index past the slowest role."""
    index = min(
        [steps]
        + [steps if r.target == 0 else _trunc_div(r.current_new * steps, r.target) for r in roles]
    )
    return tuple(
        max(min(_ceil_div((index + 1) * r.target, steps), r.target), r.current_new) for r in roles
    )


def _next_old(roles: Sequence[_Role], steps: int) -> list[int]:
    """Rule 5's candidate: every role at the ideal old count one index past the most drained."""
    index = max(
        [0]
        + [
            _trunc_div((r.initial_old - r.current_old) * steps, r.initial_old)
            for r in roles
            if r.initial_old != 0
        ]
    )
    return [
        min(max(0, r.initial_old - (index + 1) * r.initial_old // steps), r.current_old)
        for r in roles
    ]


def _prevent_orphans(
    old: Sequence[int], roles: Sequence[_Role], new: Sequence[int]
) -> tuple[int, ...]:
    """Orphan prevention: roles that had old replicas reach 0 old together, or keep one."""
    tracked = [o for o, r in zip(old, roles, strict=True) if r.initial_old != 0]
    if 0 not in tracked or all(o == 0 for o in tracked):
        return tuple(old)
    if all(
        n >= r.target - r.config.max_unavailable
        for n, r in zip(new, roles, strict=True)
        if r.initial_old >= r.target
    ):
        return (0,) * len(old)
    return tuple(1 if o == 0 and r.initial_old > 0 else o for o, r in zip(old, roles, strict=True))


def keep_for(*, floor: int, old: int, old_ready: int, new_ready: int) -> int:
    """Old groups a role keeps so that its Ready groups stay at `floor` or above, whichever
    groups a removal takes (a removed group is counted as Ready)."""
    if new_ready >= floor:
        return 0
    return min(old, floor - new_ready + old - old_ready)


def _kept(step: Step | None, roles: Sequence[_Role], keep: Sequence[int] | None) -> Step | None:
    """`step` with no role drained below `keep` (a role raised grows its new revision only to its
    surge ceiling, counting what it keeps); None when raising it leaves nothing to do."""
    if step is None or keep is None:
        return step
    old = [max(o, min(k, r.current_old)) for o, k, r in zip(step.old, keep, roles, strict=True)]
    if tuple(old) == step.old:
        return step
    old = _keep_one(old, roles)
    new = tuple(
        n
        if o == d or r.target == 0
        else max(r.current_new, min(n, r.target + r.config.max_surge - o))
        for n, o, d, r in zip(step.new, old, step.old, roles, strict=True)
    )
    if tuple(old) == tuple(r.current_old for r in roles) and new == tuple(
        r.current_new for r in roles
    ):
        return None
    return Step(tuple(old), new, step.rule)


def _keep_one(old: list[int], roles: Sequence[_Role]) -> list[int]:
    """Roles that had old replicas and would reach 0 while another keeps some keep one."""
    tracked = [o for o, r in zip(old, roles, strict=True) if r.initial_old > 0]
    if 0 not in tracked or not any(tracked):
        return old
    return [
        min(1, r.current_old) if o == 0 and r.initial_old > 0 else o
        for o, r in zip(old, roles, strict=True)
    ]


def _scale_up(roles: Sequence[_Role], next_new: tuple[int, ...]) -> Step | None:
    if not any(n > r.current_new for n, r in zip(next_new, roles, strict=True)):
        return None
    if any(
        r.target != 0 and r.current_old + n > r.target + r.config.max_surge
        for n, r in zip(next_new, roles, strict=True)
    ):
        return None
    return Step(tuple(r.current_old for r in roles), next_new, StepRule.SCALE_UP)


def _proportional_drain(roles: Sequence[_Role], steps: int) -> Step | None:
    current_new = tuple(r.current_new for r in roles)
    floored = [
        max(o, r.min_old(r.current_new))
        for o, r in zip(_next_old(roles, steps), roles, strict=True)
    ]
    old = _prevent_orphans(floored, roles, current_new)
    if not any(o < r.current_old for o, r in zip(old, roles, strict=True)):
        return None
    return Step(old, current_new, StepRule.DRAIN)


def _force_drain(roles: Sequence[_Role], next_new: tuple[int, ...]) -> Step | None:
    drained = [
        max(0, min(r.current_old, r.target + r.config.max_surge - n), r.min_old(n))
        for n, r in zip(next_new, roles, strict=True)
    ]
    if not any(o < r.current_old for o, r in zip(drained, roles, strict=True)):
        return None
    return Step(_prevent_orphans(drained, roles, next_new), next_new, StepRule.FORCE_DRAIN)


def next_step(
    *,
    initial_old: Sequence[int],
    current_old: Sequence[int],
    current_new: Sequence[int],
    target: Sequence[int],
    config: Sequence[RoleConfig],
    keep: Sequence[int] | None = None,
) -> Step | None:
    """The next state of the rollout, or None when there is nothing to do. `keep`: per role, old
    replicas no step drains below (None: upstream's planner). Raises ValueError when the vectors
    differ in length."""
    _same_lengths(
        initial_old=initial_old,
        current_old=current_old,
        current_new=current_new,
        target=target,
        config=config,
        **({} if keep is None else {"keep": keep}),
    )
    roles = tuple(
        _Role(initial_old=i, current_old=o, current_new=n, target=t, config=c)
        for i, o, n, t, c in zip(initial_old, current_old, current_new, target, config, strict=True)
    )
    steps = _total_steps(roles)
    if steps == 0 or all(r.current_old == 0 and r.current_new >= r.target for r in roles):
        return None
    unchanged_new = tuple(r.current_new for r in roles)
    if any(r.current_old > r.initial_old for r in roles):
        abnormal = tuple(min(r.initial_old, r.current_old) for r in roles)
        return _kept(Step(abnormal, unchanged_new, StepRule.ABNORMAL), roles, keep)
    if all(r.current_new >= r.target for r in roles):
        return _kept(Step((0,) * len(roles), unchanged_new, StepRule.NEW_AT_TARGET), roles, keep)
    candidate = _next_new(roles, steps)
    return (
        _kept(_scale_up(roles, candidate), roles, keep)
        or _kept(_proportional_drain(roles, steps), roles, keep)
        or _kept(_force_drain(roles, candidate), roles, keep)
    )


def _same_lengths(**vectors: Sequence[object]) -> None:
    if len({len(vector) for vector in vectors.values()}) != 1:
        raise ValueError(
            "planner vectors differ in length: "
            + " ".join(f"{name}={len(vector)}" for name, vector in vectors.items())
        )


def rollout_sequence(
    *,
    initial_old: Sequence[int],
    target: Sequence[int],
    config: Sequence[RoleConfig],
    max_passes: int,
    floor: bool = False,
) -> list[Step]:
    """Every state of a rollout from `(initial_old, zeros)`, each step Ready at once: START, then
    each step, up to `max_passes` (`sum(initial_old) + sum(target)` suffice). With `floor`, every
    step keeps each role's floor (the hooks' parity mode)."""
    old = tuple(initial_old)
    new = (0,) * len(old)
    sequence = [Step(old, new, StepRule.START)]
    for _ in range(max_passes):
        keep = None
        if floor:
            keep = [
                keep_for(
                    floor=max(0, min(i, t) - c.max_unavailable), old=o, old_ready=o, new_ready=n
                )
                for i, t, c, o, n in zip(initial_old, target, config, old, new, strict=True)
            ]
        step = next_step(
            initial_old=initial_old,
            current_old=old,
            current_new=new,
            target=target,
            config=config,
            keep=keep,
        )
        if step is None:
            break
        sequence.append(step)
        old, new = step.old, step.new
    return sequence


def scaled_value(value: int | str, *, total: int, round_up: bool) -> int:
    """An IntOrString resolved against `total` as Kubernetes' `GetScaledValueFromIntOrPercent`
    does ("NN%": a Go `Atoi` integer, then "%"). Raises ValueError for a string that is not such
    a percentage, TypeError for other types."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError(f"IntOrString must be an int or a string, not {type(value).__name__}")
    if isinstance(value, int):
        return value
    if not value.endswith("%"):
        raise ValueError(f"invalid IntOrString {value!r}: string is not a percentage")
    digits = value[:-1]
    if _PERCENT_NUMBER.fullmatch(digits) is None or not (_INT64_MIN <= int(digits) <= _INT64_MAX):
        raise ValueError(f"invalid IntOrString {value!r}: not an integer percentage")
    product = int(digits) * total
    return _ceil_div(product, 100) if round_up else product // 100


def resolve_config(
    *, replicas: int, max_surge: int | str | None, max_unavailable: int | str | None
) -> RoleConfig:
    """A role's planner budget from its rollingUpdateConfiguration, resolved against its target
    `replicas` (docs/rollout.md, "The rolling update of one slice")."""
    surge = _scaled_or_zero(max_surge, total=replicas, round_up=True)
    unavailable = _scaled_or_zero(max_unavailable, total=replicas, round_up=False)
    if surge <= 0 and unavailable <= 0:
        return DEFAULT_CONFIG
    return RoleConfig(max_surge=surge, max_unavailable=max(0, unavailable))


def _scaled_or_zero(value: int | str | None, *, total: int, round_up: bool) -> int:
    if value is None:
        return 0
    try:
        return scaled_value(value, total=total, round_up=round_up)
    except ValueError:
        # Upstream discards GetScaledValueFromIntOrPercent's error and uses the 0 it returns.
        return 0
