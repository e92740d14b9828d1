"""Read-only views of the simulated cluster: per-slice replica vectors and role targets.

Written from the definitions of docs/rollout.md (not from the hook's code) so the checks and traces
built on them are independent of what they check.
"""

from __future__ import annotations

import base64
import json
import re
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from hooks import api
from hooks.gocompat import gotext, revision

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

    # One left out reads as the LWS CRD defaults it (docs/rollout.md).
    surge = resolve(config.get("maxSurge", 0), True)
    unavailable = resolve(config.get("maxUnavailable", 1), False)
    if unavailable > 0:
        return (surge, unavailable)
    if surge > 0:
        return (surge, 0)
    return (1, 0)


_ROLE_NAME = re.compile(api.ROLE_NAME_PATTERN)


def record_of(obj: Mapping[str, Any], *, parent: Mapping[str, Any]) -> str | None:
    """The revision a DisaggregatedSetRevision is the set's record of, when it counts
    (docs/safety.md, "Hostile records"): controlled by the set, labelled with its name, named
    `<set>-<revision>` after its revision label, numbered 1 to the most a history holds with
    firstRevision at most its number (and a completedAs between the two), and storing 2 to 10
    roles with unique names and a leaderWorkerTemplate each that hash to that revision. None
    otherwise."""
    metadata = obj.get("metadata", {})
    set_name = parent["metadata"]["name"]
    label = labels_of(obj).get(api.LABEL_REVISION, "")
    controller = [r for r in metadata.get("ownerReferences") or [] if r.get("controller") is True]
    if (
        obj.get("kind") != api.REVISION_KIND
        or [r.get("uid") for r in controller] != [parent["metadata"].get("uid")]
        or labels_of(obj).get(api.LABEL_NAME) != set_name
        or not label
        or metadata.get("name") != f"{set_name}-{label}"
    ):
        return None
    number, first, roles = obj.get("revision"), obj.get("firstRevision"), stored_roles(obj)
    completed = obj.get("completedAs", first)
    numbers = [value for value in (number, first, completed) if type(value) is int]
    if len(numbers) != 3 or not 1 <= numbers[1] <= numbers[2] <= numbers[0]:
        return None
    if numbers[0] > api.MAX_HISTORY_NUMBER:
        return None
    if not isinstance(roles, list) or not api.MIN_ROLES <= len(roles) <= api.MAX_ROLES:
        return None
    pairs = []
    for role in roles:
        name = role.get("name") if isinstance(role, dict) else None
        template = (role.get("spec") or {}).get("leaderWorkerTemplate") if name else None
        if (
            not isinstance(name, str)
            or not _ROLE_NAME.match(name)
            or not isinstance(template, dict)
        ):
            return None
        pairs.append((name, template))
    if len({name for name, _ in pairs}) != len(pairs):
        return None
    try:
        hashed = revision.compute_revision(pairs)
    except gotext.EncodingError:
        return None
    return label if hashed == label else None


def stored_roles(obj: Mapping[str, Any]) -> object:
    """The roles a DisaggregatedSetRevision stores: `roles`, or `packedRoles` unpacked (base64
    of zlib of the JSON list, docs/rollout.md); None when it holds both, neither, or packed
    roles that do not unpack."""
    packed, roles = obj.get("packedRoles"), obj.get("roles")
    if (packed is None) == (roles is None):
        return None
    if packed is None:
        return roles
    try:
        return json.loads(zlib.decompress(base64.b64decode(packed, validate=True)))
    except (TypeError, ValueError, zlib.error):
        return None


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
