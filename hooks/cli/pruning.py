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
# Kept at the root of a resource (and of an embedded one) whatever the schema says.
_RESOURCE_FIELDS: Final = frozenset({"apiVersion", "kind", "metadata"})
_PRESERVE: Final = "x-kubernetes-preserve-unknown-fields"
_EMBEDDED: Final = "x-kubernetes-embedded-resource"
# The groups the API server reports unknown fields in, in its order.
_METADATA, _PRUNED, _EMBEDDED_METADATA = range(3)


@dataclass(frozen=True, slots=True)
class _Field:
    """An unknown field: its group, its path, the object that holds it and its key there."""

    group: int
    path: str
    holder: JsonObject
    key: str


def unknown_fields(document: JsonObject, *, schema: JsonObject | None = None) -> list[str]:
    """The fields strict field validation (`kubectl apply`'s default) refuses as unknown, as the
    API server writes their paths (`spec.roles[1].spec.replica`) and in its order: the
    metadata's, then the others, each group sorted.

    A field is unknown where its object's schema (the DisaggregatedSet CRD's unless `schema` is
    given) has no such property, no `additionalProperties` and no
    `x-kubernetes-preserve-unknown-fields`, so every key of an object where the schema has none
    is; metadata is decoded as ObjectMeta. A null value counts like any other (only client-side
    `kubectl apply` drops null fields).
    """
    return [unknown.path for unknown in _unknown(document, schema)]


def without_unknown_fields(document: JsonObject) -> JsonObject:
    """A copy of a DisaggregatedSet manifest without the fields `unknown_fields` names: what
    the API server goes on with when it only warns of them (`kubectl apply --validate=warn`)."""
    copied: JsonObject = json.loads(json.dumps(document))
    for unknown in _unknown(copied):
        unknown.holder.pop(unknown.key, None)
    return copied


def _unknown(document: JsonObject, schema: JsonObject | None = None) -> list[_Field]:
    found: list[_Field] = []
    root = crdgen.openapi_schema(crdgen.DS_FILE) if schema is None else schema
    _in_resource(document, root, "", found, group=_METADATA, preserve=False)
    return sorted(found, key=lambda unknown: (unknown.group, unknown.path))


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _in_resource(
    value: JsonObject,
    schema: JsonObject,
    path: str,
    found: list[_Field],
    *,
    group: int,
    preserve: bool,
) -> None:
    """A resource (the manifest or an embedded one): metadata as ObjectMeta, the rest by schema."""
    meta = value.get("metadata")
    if isinstance(meta, dict):
        where = _join(path, "metadata")
        _add_unknown_keys(meta, OBJECT_META_FIELDS, where, found, group)
        for key, known in OBJECT_META_LISTS.items():
            for index, item in enumerate(list_of(meta.get(key))):
                if isinstance(item, dict):
                    _add_unknown_keys(item, known, f"{where}.{key}[{index}]", found, group)
    _in_object(value, schema, path, found, skip=_RESOURCE_FIELDS, preserve=preserve)


def _add_unknown_keys(
    value: JsonObject, known: frozenset[str], path: str, found: list[_Field], group: int
) -> None:
    found += (_Field(group, _join(path, key), value, key) for key in value if key not in known)


def _in(
    value: Any, schema: JsonObject | None, path: str, found: list[_Field], *, preserve: bool
) -> None:
    """Record every unknown field at and below `value` (`schema` None: every key of an object is
    unknown). `preserve` (x-kubernetes-preserve-unknown-fields) keeps the unknown keys of this
    object and of the list items under it; declared properties are still checked."""
    preserve = preserve or (schema is not None and schema.get(_PRESERVE) is True)
    if isinstance(value, dict):
        if schema is not None and schema.get(_EMBEDDED) is True:
            _in_resource(value, schema, path, found, group=_EMBEDDED_METADATA, preserve=preserve)
        else:
            _in_object(value, schema, path, found, skip=frozenset(), preserve=preserve)
    elif isinstance(value, list):
        items = None if schema is None else schema.get("items")
        if preserve and not isinstance(items, dict):
            return
        for index, child in enumerate(value):
            child_schema = items if isinstance(items, dict) else None
            _in(child, child_schema, f"{path}[{index}]", found, preserve=preserve)


def _in_object(
    value: JsonObject,
    schema: JsonObject | None,
    path: str,
    found: list[_Field],
    *,
    skip: frozenset[str],
    preserve: bool,
) -> None:
    """The keys of one object (but `skip`): declared properties and `additionalProperties`
    values are checked against their schema; any other key is unknown unless `preserve`."""
    properties: JsonObject = {} if schema is None else schema.get("properties", {})
    additional = None if schema is None else schema.get("additionalProperties")
    for key, child in value.items():
        if key in skip:
            continue
        if key in properties:
            _in(child, properties[key], _join(path, key), found, preserve=False)
        elif additional is not None:
            # `additionalProperties: true` has no schema for the values.
            child_schema = additional if isinstance(additional, dict) else None
            _in(child, child_schema, _join(path, key), found, preserve=False)
        elif not preserve:
            found.append(_Field(_PRUNED, _join(path, key), value, key))
