"""Metacontroller's request envelope: a hook's request body in, the frozen records of
`hooks.core.records` out.

It accepts both hook versions (v1 keys children by name, v2 by namespace/name: the records are
built from each object's own metadata) and reads each object with `hooks.wire.objects` or
`hooks.wire.parents`. It decides nothing about DisaggregatedSets. A body it cannot use raises
`RequestError`: the server answers non-200, so Metacontroller changes nothing and retries.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from hooks.core import records
from hooks.gocompat import revision
from hooks.wire import objects, parents, values

JsonObject = values.JsonObject


def parse_sync_request(
    body: object, *, revision_of: objects.RevisionOf = revision.compute_revision
) -> records.SyncRequest:
    """A DisaggregatedSet sync request; raises RequestError when it cannot be used.

    Children of a kind this version does not know (a newer version's CompositeController lists
    it) come back apart, as last applied, to be answered unchanged; one with a known child's kind
    and name makes the request unusable. Related objects are read only of the kind the customize
    hook asks for, scalers (`hooks.core.sync.customize`). A record's roles are hashed with
    `revision_of`."""
    request = values.require_object(body, "request body")
    parent = parents.parse_parent(_parent(request))
    # `finalizing` is not read: neither controller has a finalize hook, so it is always false.
    children, unknown = _parse_children(request.get("children"), revision_of)
    related = _sorted(
        objects.parse_object(kind, obj, where=where)
        for kind, where, obj in _objects(request.get("related", {}), "related")
        if kind is records.ChildKind.SCALER
    )
    declared = _declared_kinds(request.get("controller"))
    if declared is not None and any(child.kind not in declared for child in children):
        # Metacontroller observes only the types it declares: such a body is not its own.
        raise values.RequestError(
            "children hold a type that controller.spec.childResources leaves out"
        )
    known = {(child.kind.kind, child.name) for child in children}
    for item in unknown:
        if values.key_of(item) in known:
            # An answer holds one object per kind and name: one of the two would be deleted.
            raise values.RequestError(
                f"children hold two {item['kind']}s named {item['metadata']['name']!r} (one of"
                f" apiVersion {item['apiVersion']}, which this version does not know): an answer"
                " can keep only one"
            )
    return records.SyncRequest(
        parent=parent,
        children=children,
        related=related,
        declared=declared,
        unknown_children=unknown,
    )


def _declared_kinds(controller: object) -> frozenset[records.ChildKind] | None:
    """The set's child types the CompositeController declares in `spec.childResources` (other
    entries are not ours to judge); None without a controller."""
    if controller is None:
        return None
    spec = values.require_object(
        values.require_object(controller, "controller").get("spec"), "controller spec"
    )
    entries = spec.get("childResources", [])
    if not isinstance(entries, list):
        raise values.RequestError("controller spec.childResources must be a list")
    listed = set()
    for entry in entries:
        entry = values.require_object(entry, "controller spec.childResources[]")
        listed.add((entry.get("apiVersion"), entry.get("resource")))
    return frozenset(
        kind for kind in records.DS_CHILD_KINDS if (kind.api_version, kind.resource) in listed
    )


def parse_customize_request(body: object) -> records.CustomizeRequest:
    """A DisaggregatedSet customize request."""
    return records.CustomizeRequest(parent=parents.parse_parent(_parent(body)))


def parse_scaler_sync_request(body: object) -> records.ScalerSyncRequest:
    """A RoleScaler sync request; the owning set is read from `related` (the only kind its
    customize hook asks for)."""
    request = values.require_object(body, "request body")
    scaler = parents.parse_scaler(_parent(request))
    owners = [
        parents.parse_parent(values.require_object(obj, where))
        for kind, where, obj in _objects(request.get("related", {}), "related")
        if kind is records.ChildKind.DISAGGREGATED_SET
    ]
    owners.sort(key=lambda owner: (owner.namespace, owner.name))
    return records.ScalerSyncRequest(scaler=scaler, owners=tuple(owners))


def parse_scaler_customize_request(body: object) -> records.ScalerCustomizeRequest:
    """A RoleScaler customize request."""
    return records.ScalerCustomizeRequest(scaler=parents.parse_scaler(_parent(body)))


def _parent(body: object) -> JsonObject:
    """The parent of a request body (RequestError unless both are JSON objects)."""
    request = values.require_object(body, "request body")
    return values.require_object(request.get("parent"), "parent")


def _parse_children(
    groups: object, revision_of: objects.RevisionOf
) -> tuple[tuple[records.ObservedObject, ...], tuple[JsonObject, ...]]:
    """The children of the kinds a set has, and apart, those of kinds this version does not know
    as last applied (sorted by kind and name)."""
    children: list[records.ObservedObject] = []
    unknown: list[JsonObject] = []
    for kind, where, obj in _objects(groups, "children"):
        found = values.require_object(obj, where)
        if kind in records.DS_CHILD_KINDS:
            children.append(objects.parse_observed(kind, found, where, revision_of=revision_of))
        else:
            unknown.append(objects.parse_unknown_child(found, where))
    unknown.sort(key=lambda item: (item["kind"], item["metadata"]["name"]))
    return _sorted(children), tuple(unknown)


def _objects(groups: object, where: str) -> Iterator[tuple[records.ChildKind | None, str, object]]:
    """Each object of `children` or `related` (keyed by <Kind>.<apiVersion>, then by name): its
    kind (None for one this hook does not handle), where it is, and the object."""
    if not isinstance(groups, dict):
        raise values.RequestError(f"{where} must be an object keyed by <Kind>.<apiVersion>")
    for key, named in groups.items():
        if named is None:
            continue
        if not isinstance(named, dict):
            raise values.RequestError(f"{where}[{key!r}] must be an object keyed by name")
        kind = objects.known_kind(key)
        for inner_key, obj in named.items():
            yield kind, f"{where}[{key!r}][{inner_key!r}]", obj


def _sorted(found: Iterable[records.ObservedObject]) -> tuple[records.ObservedObject, ...]:
    """Observed objects sorted by kind, namespace and name."""
    return tuple(sorted(found, key=lambda obj: (obj.kind.value, obj.namespace, obj.name)))
