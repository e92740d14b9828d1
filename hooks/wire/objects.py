"""One Kubernetes object a set observes, read from its JSON: a child or related object of a
request, an object of a child kind as kubectl lists it, or a child of a kind this version does
not know.

An observed child's `applied` (never mutated) is Metacontroller's last-applied annotation
without the namespace and `controller-uid` label Metacontroller adds, only when it names exactly
this object, else a cleaned copy of the object (why: docs/safety.md, "Bad input"). A
DisaggregatedSetRevision is always its cleaned copy (re-emitting it never asks to change its
immutable roles), its body parsed once into `stored` or `stored_error`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final

import orjson
import pydantic

from hooks import api
from hooks.api import rules
from hooks.api.documents import list_of, object_of
from hooks.core import compact, records
from hooks.gocompat import gotext, revision
from hooks.wire import values

JsonObject = values.JsonObject

RevisionOf = Callable[[Sequence[tuple[str, api.JsonObject]]], str]
"""What hashes a list of (role name, leaderWorkerTemplate): `revision.compute_revision`, or a
memo of it."""

# A record's fields besides its identity: what its cleaned copy keeps, exactly as stored.
_RECORD_FIELDS: Final = ("revision", "firstRevision", "completedAs", "packedRoles", "roles")


def parse_child(obj: object, *, where: str) -> records.ObservedObject | None:
    """An object of a set's child kinds (read from its own apiVersion and kind) as a sync
    request's children are read; None for another kind; RequestError when it is malformed."""
    found = values.require_object(obj, where)
    kind = known_kind(f"{found.get('kind')}.{found.get('apiVersion')}")
    return parse_observed(kind, found, where) if kind in records.DS_CHILD_KINDS else None


def parse_object(kind: records.ChildKind, obj: object, *, where: str) -> records.ObservedObject:
    """One object of `kind` as it is stored (kubectl's output, a related object): without
    `applied`. RequestError when it is malformed."""
    return parse_observed(kind, values.require_object(obj, where), where, related=True)


def parse_records(items: Iterable[object]) -> tuple[records.ObservedObject, ...]:
    """DisaggregatedSetRevisions as `kubectl get` lists them, read as a sync request's children
    are (sorted by name); RequestError for an object without a name."""
    found = [
        parse_observed(records.ChildKind.REVISION, values.require_object(item, "record"), "record")
        for item in items
    ]
    return tuple(sorted(found, key=lambda item: item.name))


def known_kind(key: str) -> records.ChildKind | None:
    """The kind of a `children` or `related` key (`Kind.apiVersion`), None for one this hook
    does not handle."""
    try:
        return records.ChildKind(key)
    except ValueError:
        return None


def parse_unknown_child(obj: JsonObject, where: str) -> JsonObject:
    """A child of a kind this version does not know, to answer as it is: its last-applied copy
    (see the module), else every field but its status and the metadata Metacontroller and the API
    server add."""
    metadata = values.require_object(obj.get("metadata"), f"{where} metadata")
    name = values.require_str(metadata.get("name"), f"{where} metadata.name")
    api_version = values.require_str(obj.get("apiVersion"), f"{where} apiVersion")
    kind = values.require_str(obj.get("kind"), f"{where} kind")
    labels = values.string_map(metadata.get("labels"), f"{where} metadata.labels")
    annotations = values.string_map(metadata.get("annotations"), f"{where} metadata.annotations")
    applied = _last_applied(obj, api_version, kind, name, annotations)
    if applied is not None:
        return applied
    cleaned = _cleaned(api_version, kind, name, labels, annotations)
    for field, value in obj.items():
        if field not in ("apiVersion", "kind", "metadata", "status"):
            cleaned[field] = value
    return cleaned


def parse_observed(
    kind: records.ChildKind,
    obj: JsonObject,
    where: str,
    *,
    related: bool = False,
    revision_of: RevisionOf = revision.compute_revision,
) -> records.ObservedObject:
    """One object of `kind` at `where` in the request (see the module: `applied`, and a record's
    `stored` hashed with `revision_of`); a related object gets no `applied`."""
    metadata = values.require_object(obj.get("metadata"), f"{where} metadata")
    name = values.require_str(metadata.get("name"), f"{where} metadata.name")
    labels = values.string_map(metadata.get("labels"), f"{where} metadata.labels")
    annotations = values.string_map(metadata.get("annotations"), f"{where} metadata.annotations")
    spec = object_of(obj.get("spec"))
    owner = values.controller_ref(metadata)
    replica_status, status_error = _replica_status(object_of(obj.get("status")))
    stored, stored_error = (
        _stored_revision(obj, revision_of) if kind is records.ChildKind.REVISION else (None, None)
    )
    return records.ObservedObject(
        kind=kind,
        name=name,
        namespace=values.optional_str(metadata.get("namespace")),
        labels=labels,
        annotations=annotations,
        creation_timestamp=values.optional_str(metadata.get("creationTimestamp")),
        controller_uid=values.optional_str(owner.get("uid")) or None if owner else None,
        spec_replicas=values.optional_int(spec.get("replicas"), f"{where} spec.replicas"),
        status=replica_status,
        applied={} if related else _applied_object(kind, obj, name, labels, annotations),
        slice_index=_slice_index(labels),
        status_error=status_error,
        stored=stored,
        stored_error=stored_error,
        spec=spec,
        resource_version=values.optional_str(metadata.get("resourceVersion")),
        owner_uids=_owner_uids(metadata),
        controller_object=_controller_object(owner),
    )


def _controller_object(owner: JsonObject | None) -> str | None:
    """`Kind.group/name` of a controller reference (`Kind/name` in the core group)."""
    if owner is None:
        return None
    group = values.optional_str(owner.get("apiVersion")).rpartition("/")[0]
    kind = values.optional_str(owner.get("kind")) + (f".{group}" if group else "")
    return f"{kind}/{values.optional_str(owner.get('name'))}"


def _owner_uids(metadata: JsonObject) -> tuple[str, ...]:
    refs = list_of(metadata.get("ownerReferences"))
    return tuple(values.optional_str(ref.get("uid")) for ref in refs if isinstance(ref, dict))


def _stored_revision(
    obj: JsonObject, revision_of: RevisionOf
) -> tuple[records.StoredRevision | None, str | None]:
    """A DisaggregatedSetRevision's body (`api.RevisionRecord`), its roles parsed as a spec's
    roles are and hashed by `revision_of`; or why it is not one."""
    try:
        body = api.RevisionRecord.model_validate(obj, strict=True)
    except pydantic.ValidationError as error:
        return None, _first_error(error, root="")
    stored_roles, why = _record_roles(body)
    if stored_roles is None:
        return None, why
    roles = []
    for index, role in enumerate(stored_roles):
        try:
            roles.append(api.Role.model_validate(role))
        except pydantic.ValidationError as error:
            return None, _first_error(error, root=f"roles[{index}]")
    names = [role.name for role in roles]
    if len(set(names)) != len(names):
        return None, f"{rules.RECORD_ROLE_NAMES_UNIQUE.message} ({', '.join(names)})"
    try:
        hashed = revision_of([(r.name, r.leader_worker_template) for r in roles])
    except gotext.EncodingError as error:
        return None, f"roles: {error}"
    stored = records.StoredRevision(
        number=body.revision,
        first_number=body.first_revision,
        completed_as=body.completed_as,
        roles=tuple(roles),
        roles_json=tuple(stored_roles),
        hash=hashed,
    )
    return stored, None


def _record_roles(body: api.RevisionRecord) -> tuple[list[JsonObject] | None, str]:
    """The roles a record stores, `packedRoles` unpacked (`hooks.core.compact`) or `roles` as
    earlier versions wrote them; or why it holds none."""
    if (body.roles is None) == (body.packed_roles is None):
        return None, rules.RECORD_ONE_ROLES_FORM.message
    if body.packed_roles is None:
        return body.roles, ""
    try:
        decoded = orjson.loads(compact.unpack_roles(body.packed_roles))
    except (compact.PackError, orjson.JSONDecodeError) as error:
        return None, f"packedRoles: {error}"
    try:
        unpacked = api.RevisionRecord.model_validate(
            {"revision": body.revision, "firstRevision": body.first_revision, "roles": decoded},
            strict=True,
        )
    except pydantic.ValidationError as error:
        return None, f"packedRoles: {_first_error(error, root='')}"
    return unpacked.roles, ""


def _slice_index(labels: Mapping[str, str]) -> int | None:
    """The slice label as a number (`records.ObservedObject.slice_index`): a canonical decimal has
    no sign, no leading zero and ASCII digits only."""
    value = labels.get(api.LABEL_SLICE, "")
    if value == "":
        return 0
    if not value.isascii() or not value.isdigit() or str(int(value)) != value:
        return None
    return int(value)


def _replica_status(status: JsonObject) -> tuple[records.ReplicaStatus, str | None]:
    """The replica counts of an observed status, or zeros and why when one is outside
    0..LWS_MAX_REPLICAS, a state no retry fixes (docs/safety.md, "Bad input")."""
    counts: dict[str, int] = {}
    for key, attribute in (
        ("replicas", "replicas"),
        ("readyReplicas", "ready_replicas"),
        ("updatedReplicas", "updated_replicas"),
    ):
        value = status.get(key)
        if value is None or isinstance(value, bool) or not isinstance(value, int):
            counts[attribute] = 0
        elif 0 <= value <= api.LWS_MAX_REPLICAS:
            counts[attribute] = value
        else:
            return records.ReplicaStatus(), f"status.{key} is {value}"
    return records.ReplicaStatus(**counts), None


def _applied_object(
    kind: records.ChildKind,
    obj: JsonObject,
    name: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
) -> JsonObject:
    """What the hook answered for this child last time (see the module)."""
    if kind is not records.ChildKind.REVISION:
        applied = _last_applied(obj, kind.api_version, kind.kind, name, annotations)
        if applied is not None:
            return applied
    cleaned = _cleaned(kind.api_version, kind.kind, name, labels, annotations)
    if kind is records.ChildKind.REVISION:
        cleaned.update((field, obj[field]) for field in _RECORD_FIELDS if field in obj)
    elif isinstance(obj.get("spec"), dict | int) and not isinstance(obj["spec"], bool):
        cleaned["spec"] = obj["spec"]
    return cleaned


def _last_applied(
    obj: JsonObject, api_version: str, kind: str, name: str, annotations: Mapping[str, str]
) -> JsonObject | None:
    """Metacontroller's last-applied copy of `obj` without the fields Metacontroller adds; None
    when it is absent, no JSON, or has another identity (apiVersion, kind, name, namespace)."""
    text = annotations.get(api.LAST_APPLIED_ANNOTATION)
    try:
        applied = None if text is None else orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(applied, dict) or not isinstance(metadata := applied.get("metadata"), dict):
        return None
    namespace = values.optional_str(obj["metadata"].get("namespace"))
    found = (applied.get("apiVersion"), applied.get("kind"), metadata.get("name"))
    if (*found, metadata.get("namespace", namespace)) != (api_version, kind, name, namespace):
        return None
    metadata = dict(metadata)
    metadata.pop("namespace", None)
    labels = metadata.get("labels")
    if isinstance(labels, dict) and api.CONTROLLER_UID_LABEL in labels:
        labels = {k: v for k, v in labels.items() if k != api.CONTROLLER_UID_LABEL}
        if labels:
            metadata["labels"] = labels
        else:
            del metadata["labels"]
    return {**applied, "metadata": metadata}


def _cleaned(
    api_version: str,
    kind: str,
    name: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
) -> JsonObject:
    """The identity of a child, its labels and annotations, without Metacontroller's."""
    metadata: JsonObject = {"name": name}
    own_labels = {k: v for k, v in labels.items() if k != api.CONTROLLER_UID_LABEL}
    own_annotations = {k: v for k, v in annotations.items() if k != api.LAST_APPLIED_ANNOTATION}
    if own_labels:
        metadata["labels"] = own_labels
    if own_annotations:
        metadata["annotations"] = own_annotations
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata}


def _first_error(error: pydantic.ValidationError, *, root: str) -> str:
    detail = error.errors(include_url=False)[0]
    return f"{values.field_path(detail['loc'], root=root)}: {detail['msg']}"
