"""Metacontroller's default ("dynamic") apply, as v4.17 does it for children.

- A new child gets the parent's namespace, the `controller-uid` label, the controller
  ownerReference and the annotation `metacontroller.k8s.io/last-applied-configuration`: compact
  JSON with sorted keys of the object as the hook returned it plus the namespace and the label
  (no ownerReferences, no status, no server defaults).
- An existing child is updated with a three-way merge of (live, last applied, desired): fields in
  desired overwrite live ones, fields that were in the last applied object but are no longer
  desired are removed, fields only the live object has (server defaults, an HPA's write, status)
  are kept. Lists of objects that share a known key (`containerPort`, `port`, `name`) merge item
  by item; other lists are replaced. The annotation is refreshed to the new desired object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from hooks import api
from tests.sim.store import clone

JsonObject = dict[str, Any]

LIST_MAP_KEYS = ("containerPort", "port", "name")


def with_metacontroller_fields(
    desired: JsonObject, *, namespace: str, parent_uid: str
) -> JsonObject:
    """The desired child as Metacontroller sends it to the API server (before the annotation): a
    new object and metadata, sharing the rest with `desired` (copy before changing it deeper)."""
    metadata = dict(desired.get("metadata") or {})
    metadata["namespace"] = namespace
    metadata["labels"] = {**(metadata.get("labels") or {}), api.CONTROLLER_UID_LABEL: parent_uid}
    return {**desired, "metadata": metadata}


def last_applied_text(applied: JsonObject) -> str:
    """The annotation value: compact JSON with sorted keys."""
    return orjson.dumps(applied, option=orjson.OPT_SORT_KEYS).decode()


def annotate(obj: JsonObject, applied: JsonObject) -> None:
    """Set the last-applied annotation of `obj` to `applied`."""
    annotations = obj["metadata"].setdefault("annotations", {})
    annotations[api.LAST_APPLIED_ANNOTATION] = last_applied_text(applied)


def owner_reference(*, api_version: str, kind: str, name: str, uid: str) -> JsonObject:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def read_last_applied(obj: Mapping[str, Any]) -> JsonObject:
    """The parsed annotation of a live object ({} when it has none)."""
    annotations = obj.get("metadata", {}).get("annotations") or {}
    text = annotations.get(api.LAST_APPLIED_ANNOTATION)
    if text is None:
        return {}
    parsed: JsonObject = orjson.loads(text)
    return parsed


def three_way_merge(live: JsonObject, last: JsonObject, desired: JsonObject) -> JsonObject:
    """A copy of `live` with `desired` applied against the previous `last` applied object."""
    merged = clone(live)
    _merge_object(merged, last, clone(desired))
    return merged


def _merge(live: Any, last: Any, desired: Any) -> Any:
    if isinstance(live, dict) and isinstance(desired, dict):
        return _merge_object(live, last if isinstance(last, dict) else {}, desired)
    if isinstance(live, list) and isinstance(desired, list):
        return _merge_list(live, last if isinstance(last, list) else [], desired)
    return desired


def _merge_object(live: JsonObject, last: Mapping[str, Any], desired: JsonObject) -> JsonObject:
    for key in last:
        if key not in desired:
            live.pop(key, None)
    for key, value in desired.items():
        live[key] = _merge(live.get(key), last.get(key), value)
    return live


def _list_map_key(*lists: list[Any]) -> str | None:
    sample = next((items for items in lists if items), None)
    if sample is None or not isinstance(sample[0], dict):
        return None
    for key in LIST_MAP_KEYS:
        if key in sample[0] and all(
            isinstance(item, dict) and key in item for items in lists for item in items
        ):
            return key
    return None


def _merge_list(live: list[Any], last: list[Any], desired: list[Any]) -> list[Any]:
    key = _list_map_key(live, last, desired)
    if key is None:
        return desired
    live_map = {str(item[key]): item for item in live}
    last_map = {str(item[key]): item for item in last}
    desired_map = {str(item[key]): item for item in desired}
    _merge_object(live_map, last_map, desired_map)
    result = []
    seen = set()
    for item in [*live, *desired]:
        name = str(item[key])
        if name in live_map and name not in seen:
            result.append(live_map[name])
            seen.add(name)
    return result
