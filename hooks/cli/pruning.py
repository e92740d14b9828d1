"""The fields of a DisaggregatedSet manifest the API server does not know (`unknown_fields`):
what its strict field validation refuses and its pruning drops (`without_unknown_fields`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
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


@dataclass(frozen=True, slots=True)
class _Field:
    """An unknown field: its path, the object that holds it and its key there."""

    path: str
    holder: JsonObject
    key: str


@dataclass(slots=True)
class _Unknown:
    """Unknown fields in the three groups the API server reports, in its order."""

    metadata: list[_Field] = field(default_factory=list)
    pruned: list[_Field] = field(default_factory=list)
    embedded_metadata: list[_Field] = field(default_factory=list)

    def in_order(self) -> list[_Field]:
        """The metadata's, then the others, each group sorted by path."""
        groups = (self.metadata, self.pruned, self.embedded_metadata)
        return [f for group in groups for f in sorted(group, key=lambda f: f.path)]


def unknown_fields(document: JsonObject, *, schema: JsonObject | None = None) -> list[str]:
    """The fields of a DisaggregatedSet manifest that the API server's strict field validation
    (`kubectl apply`'s default) refuses as unknown, as it writes their paths
    (`spec.roles[1].spec.replica`) and in its order: the metadata's, then the others, each group
    sorted.

    The CRD's structural schema decides (its pruning): a field is unknown where its object's
    schema has no such property, no `additionalProperties` and no
    `x-kubernetes-preserve-unknown-fields`, so every key of an object given where the schema
    has none (a string field, say) is unknown too. Metadata is decoded as ObjectMeta instead
    (`OBJECT_META_FIELDS`). A field with a null value counts like any other (client-side
    `kubectl apply` drops null fields before it sends the object; the server and other clients
    do not). `schema` is the DisaggregatedSet CRD's unless given.
    """
    return [unknown.path for unknown in _unknown(document, schema).in_order()]


def without_unknown_fields(document: JsonObject) -> JsonObject:
    """A copy of a DisaggregatedSet manifest without the fields `unknown_fields` names: what
    the API server goes on with when it only warns of them (`kubectl apply --validate=warn`)."""
    copied: JsonObject = json.loads(json.dumps(document))
    for unknown in _unknown(copied).in_order():
        unknown.holder.pop(unknown.key, None)
    return copied


def _unknown(document: JsonObject, schema: JsonObject | None = None) -> _Unknown:
    found = _Unknown()
    root = crdgen.openapi_schema(crdgen.DS_FILE) if schema is None else schema
    _unknown_in_resource(document, root, "", found, metadata=found.metadata)
    return found


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _unknown_in_resource(
    value: JsonObject, schema: JsonObject, path: str, found: _Unknown, *, metadata: list[_Field]
) -> None:
    """A resource (the manifest, or an embedded one): its metadata as ObjectMeta, the rest by
    the schema."""
    metadata.extend(_unknown_in_metadata(value.get("metadata"), _join(path, "metadata")))
    _unknown_in_object(value, schema, path, found, skip=_RESOURCE_FIELDS)


def _unknown_in_metadata(meta: object, path: str) -> Iterator[_Field]:
    """Unknown fields of a resource's metadata, decoded as ObjectMeta."""
    if not isinstance(meta, dict):
        return
    yield from _unknown_keys(meta, OBJECT_META_FIELDS, path)
    for key, known in OBJECT_META_LISTS.items():
        items = meta.get(key)
        for index, item in enumerate(list_of(items)):
            if isinstance(item, dict):
                yield from _unknown_keys(item, known, f"{path}.{key}[{index}]")


def _unknown_keys(value: JsonObject, known: frozenset[str], path: str) -> Iterator[_Field]:
    return (_Field(_join(path, key), value, key) for key in value if key not in known)


def _unknown_in(value: Any, schema: JsonObject | None, path: str, found: _Unknown) -> None:
    """Record every unknown field at and below `value`, whose schema is `schema` (None: no
    schema, so every key of an object below is unknown)."""
    if schema is not None and schema.get(_PRESERVE) is True:
        _unknown_below_preserved(value, schema, path, found)
    elif isinstance(value, dict):
        if schema is not None and schema.get(_EMBEDDED) is True:
            _unknown_in_resource(value, schema, path, found, metadata=found.embedded_metadata)
        else:
            _unknown_in_object(value, schema, path, found, skip=frozenset())
    elif isinstance(value, list):
        items = None if schema is None else schema.get("items")
        for index, child in enumerate(value):
            _unknown_in(
                child, items if isinstance(items, dict) else None, f"{path}[{index}]", found
            )


def _unknown_in_object(
    value: JsonObject,
    schema: JsonObject | None,
    path: str,
    found: _Unknown,
    *,
    skip: frozenset[str],
    preserve: bool = False,
) -> None:
    """The keys of one object (but `skip`): declared properties and `additionalProperties`
    values are checked against their schema; any other key is unknown unless `preserve`."""
    properties: JsonObject = {} if schema is None else schema.get("properties", {})
    additional = None if schema is None else schema.get("additionalProperties")
    for key, child in value.items():
        if key in skip:
            continue
        if key in properties:
            _unknown_in(child, properties[key], _join(path, key), found)
        elif additional is not None:
            # `additionalProperties: true` has no schema for the values.
            child_schema = additional if isinstance(additional, dict) else None
            _unknown_in(child, child_schema, _join(path, key), found)
        elif not preserve:
            found.pruned.append(_Field(_join(path, key), value, key))


def _unknown_below_preserved(value: Any, schema: JsonObject, path: str, found: _Unknown) -> None:
    """Below `x-kubernetes-preserve-unknown-fields`: unknown keys are kept, while the declared
    properties (and `additionalProperties`) are checked as usual."""
    if isinstance(value, dict):
        skip: frozenset[str] = frozenset()
        if schema.get(_EMBEDDED) is True:
            found.embedded_metadata.extend(
                _unknown_in_metadata(value.get("metadata"), _join(path, "metadata"))
            )
            skip = _RESOURCE_FIELDS
        _unknown_in_object(value, schema, path, found, skip=skip, preserve=True)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, child in enumerate(value):
            _unknown_below_preserved(child, schema["items"], f"{path}[{index}]", found)
