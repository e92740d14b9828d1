"""Which observed children a DisaggregatedSet sync may delete, written from docs/safety.md alone.

Metacontroller deletes every observed child the sync answer leaves out, so this predicate is the
safety property of the whole controller. It is deliberately independent of `hooks.core.sync` (which
has its own guard): it reads the raw request, not the hook's parsed records, and it restates the
rules in those documents' words:

- an LWS or Service whose slice label is a slice index `>= spec.slices` (removed slice);
- an LWS of a revision other than the target whose LWS in that slice, for all its roles, have
  `replicas == 0` (drained revision; a missing replicas counts as 1);
- a Service of a revision that is not the target, when the target revision is ready on all spec
  roles in that slice and the Service's revision is not (a Service of a non-serving revision;
  "ready on all spec roles" = every spec role has an LWS of that revision in the slice with
  `status.readyReplicas >= 1`, and a drained revision, whose LWS go in this pass, never serves);
- a DisaggregatedSetRoleScaler whose name is not `<set>-<role>` of an External spec role;
- a DisaggregatedSetRevision that counts (`views.record_of`: a record that does not count is
  never deleted) of a revision that is not the target and that no LWS of the set (in any slice)
  carries, when the set keeps more old revisions than its history limit (`revision-history-limit`,
  10 unless a whole number says otherwise): only the oldest of those (by `revision`, then name),
  as many as the old revisions exceed the limit, counting the old revisions that still have LWS
  but never deleting them; and none while two records that count hold one number.

An LWS or Service whose slice label is not a canonical decimal is never deleted. Nothing at all
may go when the spec is invalid (the hold path); callers pass `target=None` then.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from hooks import api
from tests.sim.views import is_external, labels_of, ready_of, record_of, replicas_of, slice_of

ChildId = tuple[str, str, str]
"""(apiVersion, kind, name): how Metacontroller matches an answer's child to an observed one
(every child lives in the parent's namespace)."""


def child_id(obj: Mapping[str, Any]) -> ChildId:
    return (obj.get("apiVersion", ""), obj.get("kind", ""), obj["metadata"]["name"])


def allowed_deletions(
    *, parent: Mapping[str, Any], children: Iterable[Mapping[str, Any]], target: str | None
) -> set[ChildId]:
    """The observed children this sync may leave out of its answer."""
    if target is None:
        return set()
    items = list(children)
    spec = parent["spec"]
    slices = spec.get("slices", 1)
    set_name = parent["metadata"]["name"]
    spec_roles = [role["name"] for role in spec["roles"]]
    scaler_names = {f"{set_name}-{role['name']}" for role in spec["roles"] if is_external(role)}
    by_revision: dict[tuple[int | None, str], list[Mapping[str, Any]]] = {}
    for item in items:
        if item["kind"] == api.LWS_KIND and labels_of(item).get(api.LABEL_ROLE, ""):
            revision = labels_of(item).get(api.LABEL_REVISION, "")
            by_revision.setdefault((slice_of(item), revision), []).append(item)

    def revision_lws(index: int, revision: str) -> list[Mapping[str, Any]]:
        return by_revision.get((index, revision), [])

    def drained(index: int, revision: str) -> bool:
        group = revision_lws(index, revision)
        return revision != target and all(replicas_of(item) == 0 for item in group)

    def serving(index: int, revision: str) -> bool:
        group = revision_lws(index, revision)
        ready_roles = {labels_of(item)[api.LABEL_ROLE] for item in group if ready_of(item) >= 1}
        if revision != target and drained(index, revision):
            return False
        return all(role in ready_roles for role in spec_roles)

    allowed: set[ChildId] = _pruned_history(parent, items, target=target)
    for item in items:
        kind = item["kind"]
        labels = labels_of(item)
        if kind == api.SCALER_KIND:
            if item["metadata"]["name"] not in scaler_names:
                allowed.add(child_id(item))
            continue
        if kind == api.REVISION_KIND:
            continue
        index = slice_of(item)
        if index is None:
            continue
        if index >= slices:
            allowed.add(child_id(item))
            continue
        revision = labels.get(api.LABEL_REVISION, "")
        if kind == api.LWS_KIND:
            if revision and labels.get(api.LABEL_ROLE, "") and drained(index, revision):
                allowed.add(child_id(item))
        elif (
            kind == api.SERVICE_KIND
            and revision != target
            and serving(index, target)
            and not serving(index, revision)
        ):
            allowed.add(child_id(item))
    return allowed


def _pruned_history(
    parent: Mapping[str, Any], items: list[Mapping[str, Any]], *, target: str
) -> set[ChildId]:
    text = (parent["metadata"].get("annotations") or {}).get(api.ANNOTATION_HISTORY_LIMIT, "10")
    limit = int(text) if text.isascii() and text.isdigit() and len(text) <= 9 else 10
    in_use = {
        labels_of(item).get(api.LABEL_REVISION, "")
        for item in items
        if item["kind"] == api.LWS_KIND
    }
    counted = [item for item in items if record_of(item, parent=parent) is not None]
    numbers = [item["revision"] for item in counted]
    if len(set(numbers)) != len(numbers):
        return set()
    old = sorted(
        (item["revision"], item["metadata"]["name"], item)
        for item in counted
        if labels_of(item).get(api.LABEL_REVISION) != target
    )
    excess = len(old) - limit
    prunable = [
        item for _, _, item in old if labels_of(item).get(api.LABEL_REVISION, "") not in in_use
    ]
    return {child_id(item) for item in prunable[: max(excess, 0)]}
