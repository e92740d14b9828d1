"""The fields of a DisaggregatedSet manifest the API server does not know: what its strict field
validation refuses (`unknown_fields`) and its pruning drops (`without_unknown_fields`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from hooks.api.documents import JsonObject, list_of
from hooks.cli import crdgen

# The API server decodes a resource's metadata as ObjectMeta (k8s.io/apimachinery meta/v1), not by
# the CRD's schema: these are its fields, and those of the two object lists in it.
OBJECT_META_FIELDS: Final = frozenset(
    {
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    }
)
OBJECT_META_LISTS: Final[Mapping[str, frozenset[str]]] = {
    "ownerReferences": frozenset(
        {"apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion"}
    ),
    "managedFields": frozenset(
        {"manager", "operation", "apiVersion", "time", "fieldsType", "fieldsV1", "subresource"}
    ),
}
# Kept at the root of the manifest whatever the schema says.
_RESOURCE_FIELDS: Final = frozenset({"apiVersion", "kind", "metadata"})
# The groups the API server reports unknown fields in, in its order.
_METADATA, _PRUNED = range(2)


@dataclass(frozen=True, slots=True)
class _Field:
    """An unknown field: its group, its path, the object that holds it and its key there."""

    group: int
    path: str
    holder: JsonObject
    key: str


def unknown_fields(document: JsonObject) -> list[str]:
    """The fields strict field validation (`kubectl apply`'s default) refuses as unknown, as the
    API server writes their paths (`spec.roles[1].spec.replica`) and in its order: the
    metadata's (decoded as ObjectMeta), then the others, each group sorted.

    A field is unknown where its object's schema has no such property and no
    `additionalProperties`; a null value counts like any other (only client-side `kubectl apply`
    drops null fields). The CRD uses no embedded resources and no preserved unknown fields
    (tests/unit/test_manifests.py checks it), so neither is read here.
    """
    return [unknown.path for unknown in _unknown(document)]


def without_unknown_fields(document: JsonObject) -> JsonObject:
    """A copy of a DisaggregatedSet manifest without the fields `unknown_fields` names: what
    the API server goes on with when it only warns of them (`kubectl apply --validate=warn`)."""
    copied: JsonObject = json.loads(json.dumps(document))
    for unknown in _unknown(copied):
        unknown.holder.pop(unknown.key, None)
    return copied


def _unknown(document: JsonObject) -> list[_Field]:
    found: list[_Field] = []
    meta = document.get("metadata")
    if isinstance(meta, dict):
        _add_unknown_keys(meta, OBJECT_META_FIELDS, "metadata", found)
        for key, known in OBJECT_META_LISTS.items():
            for index, item in enumerate(list_of(meta.get(key))):
                if isinstance(item, dict):
                    _add_unknown_keys(item, known, f"metadata.{key}[{index}]", found)
    root = crdgen.openapi_schema(crdgen.DS_FILE)
    _in_object(document, root, "", found, skip=_RESOURCE_FIELDS)
    return sorted(found, key=lambda unknown: (unknown.group, unknown.path))


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _add_unknown_keys(
    value: JsonObject, known: frozenset[str], path: str, found: list[_Field]
) -> None:
    found += (_Field(_METADATA, f"{path}.{key}", value, key) for key in value if key not in known)


def _in(value: Any, schema: JsonObject | None, path: str, found: list[_Field]) -> None:
    """Record every unknown field at and below `value` (`schema` None: every key is unknown)."""
    if isinstance(value, dict):
        _in_object(value, schema, path, found)
    elif isinstance(value, list):
        items = None if schema is None else schema.get("items")
        for index, child in enumerate(value):
            child_schema = items if isinstance(items, dict) else None
            _in(child, child_schema, f"{path}[{index}]", found)


def _in_object(
    value: JsonObject,
    schema: JsonObject | None,
    path: str,
    found: list[_Field],
    *,
    skip: frozenset[str] = frozenset(),
) -> None:
    """The keys of one object (but `skip`): declared properties and `additionalProperties`
    values are checked against their schema; any other key is unknown."""
    properties: JsonObject = {} if schema is None else schema.get("properties", {})
    additional = None if schema is None else schema.get("additionalProperties")
    for key, child in value.items():
        if key in skip:
            continue
        if key in properties:
            _in(child, properties[key], _join(path, key), found)
        elif additional is not None:
            # `additionalProperties: true` has no schema for the values.
            child_schema = additional if isinstance(additional, dict) else None
            _in(child, child_schema, _join(path, key), found)
        else:
            found.append(_Field(_PRUNED, _join(path, key), value, key))
