"""Read-only views of the simulated cluster: per-slice replica vectors and role targets.

Written from the definitions of docs/rollout.md (not from the hook's code) so the checks and traces
built on them are independent of what they check.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from hooks import api

JsonObject = dict[str, Any]


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    labels: Mapping[str, str] = obj.get("metadata", {}).get("labels") or {}
    return labels


def slice_of(obj: Mapping[str, Any]) -> int | None:
    """The slice label as docs/rollout.md reads it: absent or empty is 0, non-canonical is None."""
    value = labels_of(obj).get(api.LABEL_SLICE, "")
    if value == "":
        return 0
    if not (value.isascii() and value.isdigit()) or str(int(value)) != value:
        return None
    return int(value)


def replicas_of(lws: Mapping[str, Any]) -> int:
    """`spec.replicas`, 1 when unset."""
    value = lws.get("spec", {}).get("replicas")
    return 1 if value is None else int(value)


def initial_of(lws: Mapping[str, Any]) -> int:
    annotations = lws.get("metadata", {}).get("annotations") or {}
    try:
        return int(annotations.get(api.ANNOTATION_INITIAL_REPLICAS, ""))
    except ValueError:
        return replicas_of(lws)


def ready_of(lws: Mapping[str, Any]) -> int:
    value = (lws.get("status") or {}).get("readyReplicas", 0)
    return value if isinstance(value, int) else 0


def is_external(role: Mapping[str, Any]) -> bool:
    return (role.get("scaling") or {}).get("mode") == "External"


def role_names(spec: Mapping[str, Any]) -> list[str]:
    return [role["name"] for role in spec["roles"]]


def static_target(role: Mapping[str, Any]) -> int:
    value = role["spec"].get("replicas")
    return 1 if value is None else int(value)


def resolved_config(role: Mapping[str, Any], target: int) -> tuple[int, int]:
    """(maxSurge, maxUnavailable) of a role, resolved as docs/rollout.md says (ints only)."""
    config = (role["spec"].get("rolloutStrategy") or {}).get("rollingUpdateConfiguration")
    if config is None:
        return (1, 0)

    def resolve(value: Any, round_up: bool) -> int:
        if isinstance(value, int):
            return value
        if isinstance(value, str) and value.endswith("%") and value[:-1].isdigit():
            product = int(value[:-1]) * target
            return -(-product // 100) if round_up else product // 100
        return 0

    surge = resolve(config.get("maxSurge", 0), True)
    unavailable = resolve(config.get("maxUnavailable", 0), False)
    if unavailable > 0:
        return (surge, unavailable)
    if surge > 0:
        return (surge, 0)
    return (1, 0)


@dataclass(frozen=True, slots=True)
class SliceState:
    """One slice's LWS by revision: old (non-target) and new (target) replicas per role."""

    old: Mapping[str, int]
    new: Mapping[str, int]
    initial: Mapping[str, int]
    old_ready: Mapping[str, int]
    new_ready: Mapping[str, int]
    old_revisions: frozenset[str]
    """Non-target revisions that still have an LWS in the slice."""

    def vector(self, roles: Iterable[str]) -> tuple[tuple[int, ...], tuple[int, ...]]:
        names = list(roles)
        return (
            tuple(self.old.get(name, 0) for name in names),
            tuple(self.new.get(name, 0) for name in names),
        )


def slice_states(lws: Iterable[Mapping[str, Any]], *, target: str) -> dict[int, SliceState]:
    """Per slice (by label), the replica picture of its LWS relative to the target revision."""
    grouped: dict[int, list[Mapping[str, Any]]] = {}
    for item in lws:
        index = slice_of(item)
        if index is not None:
            grouped.setdefault(index, []).append(item)
    states = {}
    for index, items in sorted(grouped.items()):
        old: dict[str, int] = {}
        new: dict[str, int] = {}
        initial: dict[str, int] = {}
        old_ready: dict[str, int] = {}
        new_ready: dict[str, int] = {}
        revisions = set()
        for item in items:
            labels = labels_of(item)
            role = labels.get(api.LABEL_ROLE, "")
            revision = labels.get(api.LABEL_REVISION, "")
            if not role or not revision:
                continue
            if revision == target:
                new[role] = new.get(role, 0) + replicas_of(item)
                new_ready[role] = new_ready.get(role, 0) + ready_of(item)
            else:
                revisions.add(revision)
                old[role] = old.get(role, 0) + replicas_of(item)
                initial[role] = initial.get(role, 0) + initial_of(item)
                old_ready[role] = old_ready.get(role, 0) + ready_of(item)
        states[index] = SliceState(
            old=old,
            new=new,
            initial=initial,
            old_ready=old_ready,
            new_ready=new_ready,
            old_revisions=frozenset(revisions),
        )
    return states


def format_vectors(state: SliceState, roles: Iterable[str]) -> str:
    """`role old/new` pairs, e.g. `prefill 2/3 decode 1/1`."""
    return " ".join(f"{name} {state.old.get(name, 0)}/{state.new.get(name, 0)}" for name in roles)
