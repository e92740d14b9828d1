"""Checks of scaling while a rollout runs, after every simulated pass (docs/rollout.md, "Scaling
while a rollout runs"), written from the rules, not from the hook's code.

In every slice an old revision served before the pass (but for one that runs one old revision
and no LWS of the target, which scales as a steady slice), for every role whose target is
known:

- surge: in a scaled pass, a role whose new revision grew runs at most target + maxSurge groups,
  its old groups counted as they were before the pass (Metacontroller may apply the pass's
  writes in any order);
- availability: a role that lost groups keeps its floor of Ready groups, every removed group
  counted as Ready: target - maxUnavailable in a scaled pass, the target while held, and
  `min(initial old, target) - maxUnavailable` in upstream's step (parity mode), initial old
  summed over the old revisions that still run a group (one drained whole is retired, as the
  hook's stock of a slice retires it);
- coordination: an old revision grows only while its slice stands still on purpose (paused,
  held, past the partition), and after every pass runs either no group or at least one group of
  every role it ran before (but for a role scaled to 0 in a slice standing still, which serves
  its target);
- direction: the new revision never grows above the target, and never shrinks below it.

A pass is scaled when the sync's summary says so (`<phase>:scaled ...`); the phase says whether
the slice stands still. The checks read Ready counts from the statuses the pass observed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hooks import api
from tests.sim.metacontroller import LWS_TYPE, SCALER_TYPE, PassRecord
from tests.sim.views import (
    initial_of,
    is_external,
    labels_of,
    ready_of,
    replicas_of,
    resolved_config,
    slice_of,
    static_target,
)

JsonObject = dict[str, Any]
STANDING = ("paused", "held", "partitioned")


@dataclass(frozen=True, slots=True)
class _Counts:
    """One slice's LWS: revision -> role -> (replicas, ready), and their initial replicas."""

    by_revision: Mapping[str, Mapping[str, tuple[int, int]]]
    initial: Mapping[str, Mapping[str, int]]

    def total(self, revisions: set[str], role: str) -> tuple[int, int]:
        pairs = [
            self.by_revision[rev][role]
            for rev in revisions
            if role in self.by_revision.get(rev, {})
        ]
        return sum(p[0] for p in pairs), sum(p[1] for p in pairs)


def violations(record: PassRecord, parent: JsonObject, *, target: str) -> list[str]:
    """Every broken rule of the pass, in words."""
    name = parent["metadata"]["name"]
    before = _by_slice(record.request["children"].get(LWS_TYPE, {}).values(), name)
    uid = parent["metadata"]["uid"]
    after = _by_slice(
        [
            obj
            for key, obj in record.after.items()
            if key[0] == LWS_TYPE
            and any(
                ref.get("controller") is True and ref.get("uid") == uid
                for ref in obj["metadata"].get("ownerReferences") or []
            )
        ],
        name,
    )
    targets = _targets(record, parent)
    found = []
    slices = parent["spec"].get("slices", 1)
    for index, was in before.items():
        if index >= slices:
            continue  # a removed slice goes whole, at once
        old = {rev for rev in was.by_revision if rev != target}
        if not any(was.total(old, role)[0] for role in targets):
            continue
        if target not in was.by_revision and len(old) == 1:
            continue  # steady on one old revision (paused or partitioned before its rollout)
        phase = str((record.summary.get("slices") or {}).get(str(index), ""))
        now = after.get(index, _Counts({}, {}))
        found += [
            f"slice {index} ({phase}): {problem}"
            for problem in _slice_violations(was, now, target=target, phase=phase, targets=targets)
        ]
    return found


def _slice_violations(
    was: _Counts,
    now: _Counts,
    *,
    target: str,
    phase: str,
    targets: Mapping[str, tuple[int, int, int]],
) -> list[str]:
    old = {rev for rev in was.by_revision if rev != target}
    scaled = ":scaled" in phase
    standing = phase.split(":")[0] in STANDING
    idle = {role for role, (value, _, _) in targets.items() if value == 0}
    found = _coordination(was, now, old=old, standing=standing, idle=idle if standing else set())
    for role, (value, surge, unavailable) in targets.items():
        old_before, old_ready = was.total(old, role)
        old_after = now.total(old, role)[0]
        new_before, new_ready = was.total({target}, role)
        new_after = now.total({target}, role)[0]
        if new_after > new_before and new_after > value:
            found.append(f"{role}'s new revision grew to {new_after}, above its target {value}")
        if new_after < new_before and new_after < value:
            found.append(f"{role}'s new revision shrank to {new_after}, below its target {value}")
        if scaled and new_after > new_before and old_before + new_after > value + surge:
            found.append(
                f"{role} grew to {old_before} old + {new_after} new, above target {value} +"
                f" maxSurge {surge}"
            )
        lost_old, lost_new = max(0, old_before - old_after), max(0, new_before - new_after)
        if not (lost_old or lost_new):
            continue
        if scaled:
            floor = value if phase.startswith("held") else value - unavailable
        else:
            running = {rev for rev in old if any(n for n, _ in was.by_revision[rev].values())}
            initial = sum(was.initial[rev].get(role, 0) for rev in running)
            floor = min(initial, value) - unavailable
        worst = max(0, old_ready - lost_old) + max(0, new_ready - lost_new)
        if worst < floor:
            found.append(
                f"{role} lost {lost_old} old and {lost_new} new groups: as few as {worst} Ready"
                f" remain, below its floor {floor}"
            )
    return found


def _coordination(
    was: _Counts, now: _Counts, *, old: set[str], standing: bool, idle: set[str]
) -> list[str]:
    """`idle`: roles scaled to 0, whose old groups a slice standing still serves to 0."""
    found = []
    for rev in sorted(old):
        before = {role: pair[0] for role, pair in was.by_revision[rev].items()}
        after = {role: pair[0] for role, pair in now.by_revision.get(rev, {}).items()}
        grew = [role for role, count in after.items() if count > before.get(role, 0)]
        if grew and not standing:
            found.append(f"old revision {rev} grew ({', '.join(grew)}) while the rollout moves")
        ran = [role for role, count in before.items() if count > 0 and role not in idle]
        left = [after.get(role, 0) for role in ran]
        if any(left) and not all(left):
            found.append(f"old revision {rev} lost every group of some of {ran}: {after}")
    return found


def _targets(record: PassRecord, parent: JsonObject) -> dict[str, tuple[int, int, int]]:
    """Per spec role with a known target: (target, maxSurge, maxUnavailable)."""
    scalers = {
        labels_of(obj).get(api.LABEL_ROLE, ""): obj.get("spec", {}).get("replicas")
        for obj in record.request["children"].get(SCALER_TYPE, {}).values()
    }
    targets = {}
    for role in parent["spec"]["roles"]:
        value = scalers.get(role["name"]) if is_external(role) else static_target(role)
        if isinstance(value, int):
            targets[role["name"]] = (value, *resolved_config(role, value))
    return targets


def _by_slice(lws: Any, set_name: str) -> dict[int, _Counts]:
    grouped: dict[int, dict[str, dict[str, tuple[int, int]]]] = {}
    initial: dict[int, dict[str, dict[str, int]]] = {}
    for obj in lws:
        labels = labels_of(obj)
        index = slice_of(obj)
        role, rev = labels.get(api.LABEL_ROLE, ""), labels.get(api.LABEL_REVISION, "")
        if labels.get(api.LABEL_NAME) != set_name or index is None or not role or not rev:
            continue
        counts = grouped.setdefault(index, {}).setdefault(rev, {})
        replicas, ready = counts.get(role, (0, 0))
        counts[role] = (replicas + replicas_of(obj), ready + min(ready_of(obj), replicas_of(obj)))
        initials = initial.setdefault(index, {}).setdefault(rev, {})
        initials[role] = initials.get(role, 0) + initial_of(obj)
    return {index: _Counts(grouped[index], initial[index]) for index in grouped}
