"""What one slice holds at the start of a pass: its LWS by revision and role (`take_stock`), and
the two annotations a rollout writes on them (`initial_of`, `recorded_target`; docs/rollout.md,
"Words" and "The record"). Pure: reads its arguments only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from hooks import api
from hooks.api import limits, naming
from hooks.core import planner, records


@dataclass(frozen=True, slots=True)
class RoleInput:
    """A spec role as the slice planner sees it."""

    name: str
    target: int | None
    """Target replicas per slice; None when unknown (External role whose scaler name is taken)."""
    config: planner.RoleConfig


Group = Mapping[str, records.ObservedObject]
"""The LWS of one revision in one slice, by role."""


@dataclass(frozen=True, slots=True)
class Grouping:
    """A slice's LWS by revision and role."""

    groups: Mapping[str, Group]
    """revision -> role -> the LWS planned for it."""
    members: Mapping[str, tuple[records.ObservedObject, ...]]
    """revision -> every LWS labelled with it, duplicates included."""


def group(lws: Sequence[records.ObservedObject], *, set_name: str, slice_index: int) -> Grouping:
    """Group by revision and role. Of several LWS for one (revision, role), the one with the
    canonical name is planned (else the first by name); the others are kept unchanged. LWS
    without a role or revision label are in no group."""
    groups: dict[str, dict[str, records.ObservedObject]] = {}
    members: dict[str, list[records.ObservedObject]] = {}
    for item in sorted(lws, key=lambda x: x.name):
        revision = item.labels.get(api.LABEL_REVISION, "")
        role = item.labels.get(api.LABEL_ROLE, "")
        if not revision or not role:
            continue
        members.setdefault(revision, []).append(item)
        by_role = groups.setdefault(revision, {})
        canonical = naming.lws_name(
            set_name=set_name, slice_index=slice_index, revision=revision, role=role
        )
        if role not in by_role or item.name == canonical:
            by_role[role] = item
    return Grouping(
        groups=groups, members={revision: tuple(items) for revision, items in members.items()}
    )


@dataclass(frozen=True, slots=True)
class SliceState:
    """What a slice holds at the start of the pass."""

    index: int
    old: Mapping[str, Group]
    """Old revisions that still have replicas, revision -> role -> LWS."""
    new: Group
    """The target revision's LWS by role."""
    dropped: tuple[str, ...]
    """LWS of drained old revisions (every LWS labelled with them, duplicates included)."""
    replicas: Mapping[str, int]
    """Current spec.replicas of every LWS that stays, by name."""


def take_stock(
    lws: Sequence[records.ObservedObject], *, set_name: str, slice_index: int, revision: str
) -> SliceState:
    """Group the slice's LWS and set aside old revisions that finished draining."""
    grouping = group(lws, set_name=set_name, slice_index=slice_index)
    drained = {
        rev
        for rev, items in grouping.members.items()
        if rev != revision and all(item.replicas == 0 for item in items)
    }
    dropped = tuple(sorted(item.name for rev in drained for item in grouping.members[rev]))
    return SliceState(
        index=slice_index,
        old={
            rev: by_role
            for rev, by_role in grouping.groups.items()
            if rev != revision and rev not in drained
        },
        new=grouping.groups.get(revision, {}),
        dropped=dropped,
        replicas={item.name: item.replicas for item in lws if item.name not in dropped},
    )


def serves_spec_roles(state: SliceState, role_names: Sequence[str]) -> bool:
    """Whether an old revision still has replicas on a spec role (removed roles do not count)."""
    return any(
        by_role[name].replicas > 0
        for by_role in state.old.values()
        for name in role_names
        if name in by_role
    )


def newest_first(old: Mapping[str, Group]) -> list[Group]:
    """Old revisions by the latest creation time among their LWS, newest first (revisions
    created at the same second in name order)."""

    def newest(rev: str) -> str:
        return max(item.creation_timestamp for item in old[rev].values())

    # Sorting is stable, so revisions created at the same second keep their name order.
    ordered = sorted(sorted(old), key=newest, reverse=True)
    return [old[rev] for rev in ordered]


def ready_of(lws: records.ObservedObject) -> int:
    """The LWS's Ready groups, at most its replicas."""
    return max(0, min(lws.status.ready_replicas, lws.replicas))


_GO_INT: Final = re.compile(r"(?P<sign>[+-]?)(?P<digits>[0-9]+)")
_INT32_MIN: Final = -limits.INT32_MAX - 1


def initial_of(lws: records.ObservedObject) -> int:
    """The `initial-replicas` annotation as Go's `strconv.ParseInt(text, 10, 32)` reads it (an
    optional sign, then ASCII digits, within int32), else the current replicas."""
    match = _GO_INT.fullmatch(lws.annotations.get(api.ANNOTATION_INITIAL_REPLICAS, ""))
    # Leading zeros go before int(), which refuses strings of over 4,300 digits.
    significant = "" if match is None else match["digits"].lstrip("0")
    if match is None or len(significant) > len(str(limits.INT32_MAX)):
        return lws.replicas
    number = int(match["sign"] + (significant or "0"))
    return number if _INT32_MIN <= number <= limits.INT32_MAX else lws.replicas


_COUNT: Final = re.compile(r"[0-9]{1,10}")


def recorded_target(lws: records.ObservedObject) -> int | None:
    """The record on a target LWS (`rollout-target-replicas`): decimal digits within int32, else
    None (missing, malformed or out of range: the record is written again)."""
    value = lws.annotations.get(api.ANNOTATION_ROLLOUT_TARGET, "")
    if _COUNT.fullmatch(value) is None or int(value) > limits.INT32_MAX:
        return None
    return int(value)
