"""Scaling while a rollout runs: one slice's pass once a role's target moved mid-rollout.

The arithmetic of docs/rollout.md's "One scaled pass" (`rolling`) and of its "Controls: the
rollout stops, scaling does not" (`held`, `stopped`), over integer vectors: one entry per role
(spec roles in spec order, then roles only old revisions have, target 0), old revisions newest
first. Pure and integer-only: imports nothing but the planner's budget type.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction
from math import floor

from hooks.core import planner

Counts = tuple[int | None, ...]
"""One old revision's replicas per role; None where it has no LWS of the role."""


@dataclass(frozen=True, slots=True)
class Role:
    """One role of the slice: its target and budget, its new LWS, its old revisions' snapshot."""

    target: int
    config: planner.RoleConfig
    new: int
    new_ready: int
    """Ready groups of the new LWS, at most `new`."""
    initial_old: int = 0
    """Old replicas when the rollout started (the `initial-replicas` snapshot)."""
    has_new: bool = True
    """Whether the role has a new LWS (one deleted by hand may be missing while paused)."""

    @property
    def ceiling(self) -> int:
        """The most groups the role may grow to: target + maxSurge."""
        return self.target + self.config.max_surge

    @property
    def floor(self) -> int:
        """The fewest Ready groups a removal may leave: target - maxUnavailable."""
        return max(0, self.target - self.config.max_unavailable)


@dataclass(frozen=True, slots=True)
class Old:
    """One old revision of the slice."""

    replicas: Counts
    ready: tuple[int, ...]
    """Ready groups per role, each at most its replicas."""


class Move(StrEnum):
    """What a pass did, for the log and `python -m hooks plan`."""

    GROW = "grow"
    DRAIN = "drain"
    SHRINK = "shrink"
    RETIRE = "retire"


class Wait(StrEnum):
    """Why a role did not move in a pass that changed nothing."""

    NEW_NOT_READY = "its new groups are not Ready"
    OLD_NOT_READY = "some of its old groups are not Ready"
    SURGE = "the surge ceiling leaves no room"
    STEP = "the other roles' step"
    FLOOR = "fewer groups would leave fewer Ready groups than its floor"
    KEEP_ONE = "each old revision keeps one group of it until the rollout moves on"


@dataclass(frozen=True, slots=True)
class Pass:
    """The replicas a pass asks for: new per role, and per old revision (newest first)."""

    new: tuple[int, ...]
    old: tuple[Counts, ...]
    moves: frozenset[Move]
    waits: tuple[tuple[int, Wait], ...] = ()
    """(role index, reason): in a rollout that moved nothing, every role short of its end state;
    in a slice that stands still, every role that runs other than its target."""


def is_scaled(roles: Sequence[tuple[int | None, int | None, int]]) -> bool:
    """Whether a slice is in scaled mode: some role, as (target, recorded target, new replicas),
    has a known target that differs from its recorded one, or runs more new groups than it."""
    return any(
        target is not None and ((recorded is not None and recorded != target) or new > target)
        for target, recorded, new in roles
    )


@dataclass(frozen=True, slots=True)
class _Totals:
    old: tuple[int, ...]
    old_ready: tuple[int, ...]


def _totals(count: int, old: Sequence[Old]) -> _Totals:
    return _Totals(
        old=tuple(sum(rev.replicas[r] or 0 for rev in old) for r in range(count)),
        old_ready=tuple(sum(rev.ready[r] for rev in old) for r in range(count)),
    )


def rolling(roles: Sequence[Role], old: Sequence[Old]) -> Pass:
    """The scaled pass of a rollout that moves (steps 1 to 6 of "One scaled pass")."""
    totals = _totals(len(roles), old)
    keep = [
        planner.keep_for(floor=role.floor, old=o, old_ready=ready, new_ready=role.new_ready)
        for role, o, ready in zip(roles, totals.old, totals.old_ready, strict=True)
    ]
    keep = _old_window(roles, totals.old, keep)
    drained = _drain(old, budget=[o - k for o, k in zip(totals.old, keep, strict=True)])
    grown = _grow(roles, totals.old)
    if not _moves(roles, old, drained, grown):
        drained, grown = _escape(roles, old, totals)
    after = _totals(len(roles), drained).old
    new = tuple(
        _shrunk(role, n, old_after=a, old_ready_after=max(0, ready - (o - a)))
        for role, n, o, a, ready in zip(
            roles, grown, totals.old, after, totals.old_ready, strict=True
        )
    )
    moves = _moves(roles, old, drained, new)
    waits = () if moves else _waits(roles, totals)
    return Pass(new=new, old=tuple(rev.replicas for rev in drained), moves=moves, waits=waits)


def _old_window(roles: Sequence[Role], old: Sequence[int], keep: list[int]) -> list[int]:
    """Step 2, old in step: `keep` raised so that no role drains more than one window past the
    share the most held-back role may drain now."""
    initial = [max(role.initial_old, o) for role, o in zip(roles, old, strict=True)]
    tracked = [(i, k) for i, k in zip(initial, keep, strict=True) if i > 0]
    if not tracked:
        return keep
    share = min(Fraction(i - k, i) for i, k in tracked)
    window = Fraction(1, min(i for i, _ in tracked))
    return [
        k if i == 0 else min(o, max(k, i - floor(i * (share + window))))
        for i, k, o in zip(initial, keep, old, strict=True)
    ]


def _drain(old: Sequence[Old], *, budget: Sequence[int], retire: bool = True) -> list[Old]:
    """Step 3: old revisions after spending `budget` per role, newest first; each goes whole
    (only when `retire`) or keeps one group of every role it runs."""
    remaining = list(budget)
    result = []
    for rev in old:
        live = [r for r, n in enumerate(rev.replicas) if n]
        take = {r: max(0, min(remaining[r], rev.replicas[r] or 0)) for r in live}
        emptied = [r for r in live if take[r] == rev.replicas[r]]
        if emptied and (len(emptied) < len(live) or not retire):
            for r in emptied:
                take[r] -= 1
        result.append(_minus(rev, take))
        for r, amount in take.items():
            remaining[r] -= amount
    return result


def _minus(rev: Old, take: dict[int, int]) -> Old:
    replicas = tuple(None if n is None else n - take.get(r, 0) for r, n in enumerate(rev.replicas))
    ready = tuple(min(ready, n or 0) for ready, n in zip(rev.ready, replicas, strict=True))
    return Old(replicas=replicas, ready=ready)


def _grow(roles: Sequence[Role], old: Sequence[int]) -> tuple[int, ...]:
    """Step 4, grow: up to the target within the surge ceiling, roles in step."""
    reach = [min(role.target, role.ceiling - o) for role, o in zip(roles, old, strict=True)]
    tracked = [(role, r) for role, r in zip(roles, reach, strict=True) if role.target > 0]
    if not tracked:
        return tuple(role.new for role in roles)
    share = min(Fraction(max(role.new, r), role.target) for role, r in tracked)
    window = Fraction(1, min(role.target for role, _ in tracked))
    return tuple(
        max(role.new, min(r, floor(role.target * (share + window))))
        if role.target > 0
        else role.new
        for role, r in zip(roles, reach, strict=True)
    )


def _shrunk(role: Role, new: int, *, old_after: int, old_ready_after: int) -> int:
    """Step 6, shrink: a new revision above its target sheds what runs over the ceiling."""
    if new <= role.target:
        return new
    over_ceiling = old_after + new - role.ceiling
    slack = old_ready_after + role.new_ready - role.floor
    return new - max(0, min(new - role.target, over_ceiling, slack))


def _escape(
    roles: Sequence[Role], old: Sequence[Old], totals: _Totals
) -> tuple[list[Old], tuple[int, ...]]:
    """Step 5, escape: one old group of the first role that may lose one, else one new group."""
    current = tuple(role.new for role in roles)
    for r, role in enumerate(roles):
        slack = totals.old_ready[r] + role.new_ready - role.floor
        if totals.old[r] == 0 or (role.new_ready < role.floor and slack < 1):
            continue
        index = _losing_one(old, r)
        if index is not None:
            drained = list(old)
            drained[index] = _minus(old[index], {r: 1})
            return drained, current
    for r, role in enumerate(roles):
        if min(role.target, role.ceiling - totals.old[r]) > role.new:
            return list(old), tuple(n + (k == r) for k, n in enumerate(current))
    return list(old), current


def _losing_one(old: Sequence[Old], r: int) -> int | None:
    """The newest old revision that can lose one group of role `r` and stay whole or
    coordinated (it keeps another of that role, or that was its last group of any role)."""
    for index, rev in enumerate(old):
        n = rev.replicas[r] or 0
        alone = all(not other for k, other in enumerate(rev.replicas) if k != r)
        if n >= 2 or (n == 1 and alone):
            return index
    return None


def _moves(
    roles: Sequence[Role], before: Sequence[Old], after: Sequence[Old], new: Sequence[int]
) -> frozenset[Move]:
    moves = set()
    for role, n in zip(roles, new, strict=True):
        if n > role.new:
            moves.add(Move.GROW)
        elif n < role.new:
            moves.add(Move.SHRINK)
    for rev, rev_after in zip(before, after, strict=True):
        if any(rev.replicas) and not any(rev_after.replicas):
            moves.add(Move.RETIRE)
        elif rev_after.replicas != rev.replicas:
            moves.add(Move.DRAIN)
    return frozenset(moves)


def _waits(roles: Sequence[Role], totals: _Totals) -> tuple[tuple[int, Wait], ...]:
    """Why each role short of its end state (old 0, new at its target) did not move."""
    waits = []
    for r, role in enumerate(roles):
        if totals.old[r] == 0 and role.new == role.target:
            continue
        if role.new < role.target and role.ceiling - totals.old[r] <= role.new:
            reason = Wait.SURGE
        elif role.new_ready < role.new:
            reason = Wait.NEW_NOT_READY
        elif totals.old_ready[r] < totals.old[r]:
            reason = Wait.OLD_NOT_READY
        else:
            reason = Wait.STEP
        waits.append((r, reason))
    return tuple(waits)


def held(roles: Sequence[Role], old: Sequence[Old], *, percent: int) -> Pass:
    """A held rollout's pass: each role's new revision at its share of the current target, its
    old revisions serving the rest (never retired); no removal leaves fewer Ready groups than
    the target."""
    totals = _totals(len(roles), old)
    new = []
    for role, o, ready in zip(roles, totals.old, totals.old_ready, strict=True):
        share = -(-percent * role.target // 100)
        if role.new < share:
            new.append(max(role.new, min(share, role.ceiling - o)))
        else:
            slack = ready + role.new_ready - role.target
            new.append(role.new - max(0, min(role.new - role.target, slack)))
    served = _serve_old(roles, old, totals, new=new, floors=[role.target for role in roles])
    return _standing(roles, old, served, new)


def stopped(roles: Sequence[Role], old: Sequence[Old]) -> Pass:
    """A paused slice's pass (or a partitioned one caught mid-way): each role's groups follow its
    target, a raise split in proportion to what each revision runs, a lower out of the old
    revisions first; no removal leaves fewer Ready groups than the floor."""
    totals = _totals(len(roles), old)
    floors = [role.floor for role in roles]
    new = []
    for r, role in enumerate(roles):
        sizes = [role.new if role.has_new else None, *(rev.replicas[r] for rev in old)]
        new.append(role.new + _proportional(role.target - role.new - totals.old[r], sizes)[0])
    served = _serve_old(roles, old, totals, new=new, floors=floors)
    after = _totals(len(roles), served).old
    for r, role in enumerate(roles):
        if new[r] > role.target:
            lost = totals.old[r] - after[r]
            slack = totals.old_ready[r] - lost + role.new_ready - floors[r]
            new[r] -= max(0, min(new[r] - role.target, slack))
    return _standing(roles, old, served, new)


def _standing(
    roles: Sequence[Role], old: Sequence[Old], served: Sequence[Old], new: Sequence[int]
) -> Pass:
    """The pass of a slice that stands still, with why a role runs other than its target."""
    waits = []
    for r, role in enumerate(roles):
        total = new[r] + sum(rev.replicas[r] or 0 for rev in served)
        if total < role.target:
            waits.append((r, Wait.SURGE))
        elif total > role.target:
            spare = new[r] > role.target or any((rev.replicas[r] or 0) > 1 for rev in served)
            waits.append((r, Wait.FLOOR if spare else Wait.KEEP_ONE))
    return Pass(
        new=tuple(new),
        old=tuple(rev.replicas for rev in served),
        moves=_moves(roles, old, served, new),
        waits=tuple(waits),
    )


def _serve_old(
    roles: Sequence[Role],
    old: Sequence[Old],
    totals: _Totals,
    *,
    new: Sequence[int],
    floors: Sequence[int],
) -> list[Old]:
    """The old revisions serving what the new revision (now `new`) leaves of each target: grown
    in proportion to what each runs within the surge ceiling, or drained newest first with none
    retired and no removal leaving fewer Ready groups than `floors`."""
    grown: list[dict[int, int]] = [{} for _ in old]
    budget = [0] * len(roles)
    for r, role in enumerate(roles):
        rest = max(0, role.target - new[r])
        if totals.old[r] < rest:
            room = role.ceiling - role.new - totals.old[r]
            extra = max(0, min(rest - totals.old[r], room))
            for index, amount in enumerate(_proportional(extra, [rev.replicas[r] for rev in old])):
                grown[index][r] = amount
        else:
            new_ready = max(0, role.new_ready - max(0, role.new - new[r]))
            slack = totals.old_ready[r] + new_ready - floors[r]
            budget[r] = max(0, min(totals.old[r] - rest, slack))
    raised = [
        _minus(rev, {r: -amount for r, amount in adds.items()})
        for rev, adds in zip(old, grown, strict=True)
    ]
    return _drain(raised, budget=budget, retire=False)


def _proportional(amount: int, sizes: Sequence[int | None]) -> list[int]:
    """`amount` split in proportion to `sizes` by largest remainders (ties to the first); a size
    of None takes nothing; with nothing running, the first that may take it takes all."""
    taking = [0 if size is None else size for size in sizes]
    total = sum(taking)
    if amount <= 0:
        return [0] * len(sizes)
    if total == 0:
        first = next((i for i, size in enumerate(sizes) if size is not None), None)
        return [amount if i == first else 0 for i in range(len(sizes))]
    shares = [amount * size // total for size in taking]
    order = sorted(range(len(sizes)), key=lambda i: (-(amount * taking[i] % total), i))
    for i in order[: amount - sum(shares)]:
        shares[i] += 1
    return shares
