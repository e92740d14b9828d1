"""`metadata.managedFields` as kube-apiserver writes them for Update operations (no server-side
apply).

The simulated API server (`tests.sim.store`) calls `written` on every create, update and status
write, with the writer as field manager. Per manager, operation (always `Update`) and subresource
the API server keeps one entry with the set of fields that manager set, as a `fieldsV1` tree:

- a create: the creator owns every field it sent;
- an update: the writer takes over every field whose value it added or changed, fields that are
  gone leave every entry, and the other managers keep the rest of what they owned;
- a write to the `status` subresource covers only `status` (its entry says `subresource:
  status`); a write to the object itself never covers `status`.
- An entry left with no field is dropped; the writer's entry gets the write's time.

Not tracked: `apiVersion`, `kind`, and the metadata the server owns or that names the object (all
but labels, annotations, ownerReferences and finalizers).

`fieldsV1` keys: `f:<name>` for a map field, `k:<key JSON>` for an item of a list keyed by some of
its fields (the first of `LIST_MAP_KEYS` every item has and that tells the items apart: what the
schemas' list-map keys are for the lists the simulation writes), and `.` inside a map or list item
the manager owns itself (every one but the root and `metadata`, which always exist). Other lists
are atomic: one field, owned whole.

Stored objects are never changed in place (the store copies on write), so `written` never touches
its inputs and returns new entries.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import orjson

JsonObject = dict[str, Any]
Path = tuple[str, ...]

OPERATION: Final = "Update"
TRACKED_METADATA: Final = ("annotations", "finalizers", "labels", "ownerReferences")
LIST_MAP_KEYS: Final[tuple[tuple[str, ...], ...]] = (
    ("containerPort", "protocol"),
    ("port", "protocol"),
    ("uid",),
    ("mountPath",),
    ("type",),
    ("name",),
)
_UNOWNED_NODES: Final[frozenset[Path]] = frozenset({(), ("f:metadata",)})


def written(
    previous: Mapping[str, Any] | None,
    current: Mapping[str, Any],
    *,
    manager: str,
    time: str,
    subresource: str | None = None,
) -> list[JsonObject]:
    """The managedFields of `current` once `manager` wrote it over `previous` (None: a create)."""
    before = _tracked(previous, subresource) if previous is not None else {}
    after = _tracked(current, subresource)
    changes: list[tuple[Path, Any]] = []
    _diff(before, after, (), changes)
    entries: list[JsonObject] = []
    if previous is not None:
        entries = orjson.loads(orjson.dumps(previous["metadata"].get("managedFields") or []))
    mine = next((entry for entry in entries if _is_entry_of(entry, manager, subresource)), None)
    if mine is None and any(value is not _GONE for _, value in changes):
        mine = {"manager": manager, "operation": OPERATION, "fieldsType": "FieldsV1"}
        if subresource is not None:
            mine["subresource"] = subresource
        mine["fieldsV1"] = {}
        entries.append(mine)
    for path, value in changes:
        for entry in entries:
            _discard(entry["fieldsV1"], path)
        subtree = {} if value is _GONE else _tree(value, path)
        # An empty `metadata` is no field (a leaf `{}` would claim one).
        if mine is not None and value is not _GONE and (subtree or path not in _UNOWNED_NODES):
            _graft(mine["fieldsV1"], path, subtree)
    if mine is not None:
        mine["apiVersion"] = current["apiVersion"]
        mine["time"] = time
    return [entry for entry in entries if entry.get("fieldsV1")]


class _Gone:
    """The value of a field a write removed."""


_GONE: Final = _Gone()


def _is_entry_of(entry: Mapping[str, Any], manager: str, subresource: str | None) -> bool:
    return (
        entry.get("manager") == manager
        and entry.get("operation") == OPERATION
        and entry.get("subresource") == subresource
    )


def _tracked(obj: Mapping[str, Any], subresource: str | None) -> JsonObject:
    """The part of `obj` a write to the object (or to its `subresource`) can own."""
    if subresource is not None:
        return {subresource: obj[subresource]} if subresource in obj else {}
    tracked = {
        key: value
        for key, value in obj.items()
        if key not in ("apiVersion", "kind", "metadata", "status")
    }
    metadata = obj.get("metadata") or {}
    tracked["metadata"] = {key: metadata[key] for key in TRACKED_METADATA if key in metadata}
    return tracked


def _list_key(items: list[Any]) -> tuple[str, ...] | None:
    """The fields that key the items of a list, or None for an atomic list."""
    if not items or not all(isinstance(item, dict) for item in items):
        return None
    for fields in LIST_MAP_KEYS:
        if not all(fields[0] in item for item in items):
            continue
        keys = {_item_key(item, fields) for item in items}
        if len(keys) == len(items):
            return fields
    return None


def _item_key(item: Mapping[str, Any], fields: tuple[str, ...]) -> str:
    key = {name: item[name] for name in fields if name in item}
    return "k:" + orjson.dumps(key, option=orjson.OPT_SORT_KEYS).decode()


def _members(value: Any) -> dict[str, Any] | None:
    """The fields of a map or keyed list by `fieldsV1` key; None for a leaf or an atomic list."""
    if isinstance(value, dict):
        return {f"f:{key}": item for key, item in value.items()}
    if isinstance(value, list):
        fields = _list_key(value)
        if fields is not None:
            return {_item_key(item, fields): item for item in value}
    return None


def _diff(before: Any, after: Any, path: Path, changes: list[tuple[Path, Any]]) -> None:
    """Append (path, new value or _GONE) for every field that differs, at the highest path."""
    if before == after:
        return
    old, new = _members(before), _members(after)
    if old is None or new is None or type(before) is not type(after):
        changes.append((path, after))
        return
    for key in old:
        if key not in new:
            changes.append(((*path, key), _GONE))
    for key, value in new.items():
        if key in old:
            _diff(old[key], value, (*path, key), changes)
        else:
            changes.append(((*path, key), value))


def _tree(value: Any, path: Path) -> JsonObject:
    """The `fieldsV1` tree of owning `value` (at `path`) and everything in it."""
    members = _members(value)
    if members is None:
        return {}
    tree: JsonObject = {} if path in _UNOWNED_NODES else {".": {}}
    for key, item in members.items():
        tree[key] = _tree(item, (*path, key))
    return tree


def _graft(tree: JsonObject, path: Path, subtree: JsonObject) -> None:
    node = tree
    for key in path[:-1]:
        node = node.setdefault(key, {})
    if path:
        node[path[-1]] = subtree
    else:
        node.update(subtree)


def _discard(tree: JsonObject, path: Path) -> None:
    """Remove the field at `path` and everything in it, and the maps it leaves empty."""
    if not path:
        tree.clear()
        return
    trail = [tree]
    for key in path[:-1]:
        node = trail[-1].get(key)
        if not isinstance(node, dict):
            return
        trail.append(node)
    if trail[-1].pop(path[-1], None) is None:
        return
    for depth in range(len(trail) - 1, 0, -1):
        if trail[depth]:
            break
        del trail[depth - 1][path[depth - 1]]
