"""A revision's roles rebuilt from its running LWS, for a record it lacks (docs/rollout.md,
"Revision history"): from one LWS of each role (the lowest slice), exactly what
`children.render_lws` added taken away again. The result counts only when its templates hash to
the revision, so an edited, forged or planted LWS yields no record. Pure: reads its arguments.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hooks import api
from hooks.api import naming
from hooks.core import children, placement, records
from hooks.gocompat import gotext, revision

JsonObject = api.JsonObject

_SET_ANNOTATIONS = frozenset({api.ANNOTATION_INITIAL_REPLICAS, api.LAST_APPLIED_ANNOTATION})


@dataclass(frozen=True, slots=True)
class Recovered:
    """A running revision's roles as a record stores them, or why there are none."""

    roles: tuple[JsonObject, ...] | None
    why: str = ""
    newest: str = ""
    """The latest creation time among its LWS (which revision ran later)."""


def recover(
    lws: Sequence[records.ObservedObject], *, set_name: str, revision_: str, order: Sequence[str]
) -> Recovered:
    """The roles of `revision_` from `lws` (the set's LWS of that revision), in spec `order`."""
    by_role: dict[str, records.ObservedObject] = {}
    for item in sorted(lws, key=lambda item: (item.slice_index or 0, item.name)):
        if item.slice_index is not None:
            by_role.setdefault(item.labels.get(api.LABEL_ROLE, ""), item)
    newest = max((item.creation_timestamp for item in lws), default="")
    names = sorted(
        by_role, key=lambda name: (order.index(name) if name in order else len(order), name)
    )
    if not api.MIN_ROLES <= len(names) <= api.MAX_ROLES or "" in names:
        why = f"its LeaderWorkerSets hold roles {', '.join(map(repr, names))}, not a set's roles"
        return Recovered(None, why, newest)
    roles = tuple(_role(by_role[name], set_name=set_name, name=name) for name in names)
    pairs = [(str(role["name"]), role["spec"].get("leaderWorkerTemplate", {})) for role in roles]
    try:
        hashed = revision.compute_revision(pairs)
    except gotext.EncodingError as error:
        return Recovered(None, f"its templates cannot be hashed: {error}", newest)
    if hashed != revision_:
        why = (
            f"the templates of its LeaderWorkerSets, as the set made them, hash to {hashed} (a"
            " pod-template label of a role's own that the set overrides, a role's LWS missing,"
            " roles in another order than the spec's, or an edit)"
        )
        return Recovered(None, why, newest)
    return Recovered(roles, "", newest)


def _role(item: records.ObservedObject, *, set_name: str, name: str) -> JsonObject:
    """One role as the set had it when it rendered `item` (see the module)."""
    added = naming.lws_labels(
        set_name=set_name,
        slice_index=item.slice_index or 0,
        revision=item.labels.get(api.LABEL_REVISION, ""),
        role=name,
    )
    labels = {
        key: value
        for key, value in item.labels.items()
        if key not in added and key != api.CONTROLLER_UID_LABEL
    }
    annotations = {
        key: value for key, value in item.annotations.items() if key not in _SET_ANNOTATIONS
    }
    spec = {key: value for key, value in item.spec.items() if key != "replicas"}
    template = spec.get("leaderWorkerTemplate")
    if isinstance(template, dict):
        spec["leaderWorkerTemplate"] = _as_rendered_from(
            template, added=added, set_name=set_name, slice_index=item.slice_index or 0
        )
    role: JsonObject = {"name": name}
    metadata = {
        field: value for field, value in (("labels", labels), ("annotations", annotations)) if value
    }
    if metadata:
        role["metadata"] = metadata
    role["spec"] = spec
    return role


def _as_rendered_from(
    template: JsonObject, *, added: dict[str, str], set_name: str, slice_index: int
) -> JsonObject:
    """A leaderWorkerTemplate without the placement terms and labels the set put on its pod
    templates (a copy)."""
    result = dict(template)
    for key in children.POD_TEMPLATE_KEYS:
        if isinstance(result.get(key), dict):
            unplaced = placement.without_placement(
                result[key], set_name=set_name, slice_index=slice_index
            )
            result[key] = _without_labels(unplaced, added)
    return result


def _without_labels(template: JsonObject, added: dict[str, str]) -> JsonObject:
    """A pod template without the labels the set added (and the metadata they alone made)."""
    metadata = template.get("metadata")
    if not isinstance(metadata, dict):
        return template
    own = metadata.get("labels")
    kept = dict(metadata)
    labels = (
        {key: value for key, value in own.items() if key not in added}
        if isinstance(own, dict)
        else own
    )
    if labels:
        kept["labels"] = labels
    else:
        kept.pop("labels", None)
    result = {key: value for key, value in template.items() if key != "metadata"}
    if kept:
        result["metadata"] = kept
    return result
