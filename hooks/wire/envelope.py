"""Metacontroller's wire format: requests in, responses out.

This module is the edge of the pure core. It turns a decoded request body into the frozen records
of `hooks.core.records` (accepting both hook versions: v1 keys children by name, v2 by
namespace/name; the records are built from each object's own metadata, so the key format does not
matter) and renders responses. It decides nothing about DisaggregatedSets. A body it cannot use
raises `RequestError`, which the server answers with a non-200 status so that Metacontroller
changes nothing and retries.

An observed child carries `applied`: the object as this hook last returned it, read from
Metacontroller's last-applied annotation without the namespace and `controller-uid` label that
Metacontroller adds. When the annotation is missing or unreadable, or names another object
(apiVersion, kind, name or namespace differ from the observed object's: anyone who can edit the
child can edit the annotation, and Metacontroller deletes an observed child whose identity is
missing from the answer), `applied` is a cleaned copy of the observed object (apiVersion, kind,
name, labels, annotations, and its body: `spec`, or a DisaggregatedSetRevision's fields). Never
mutate it: copy the parts you change.

A DisaggregatedSetRevision is read from the object itself, never from the annotation: `applied`
is always its cleaned copy (re-emitting it never asks to change its immutable roles), and its body
is parsed here, once, into `stored` (`records.StoredRevision`: its numbers, roles, and the revision
those roles hash to), or `stored_error` says why it is not a record's. `parse_records` reads the
records `kubectl get` lists the same way, for the kubectl plugin.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final, TypeGuard

import orjson
import pydantic

from hooks import api
from hooks.api import rules
from hooks.core import compact, records
from hooks.gocompat import gotext, revision

JsonObject = api.JsonObject


class RequestError(Exception):
    """The request cannot be used; nothing may change."""


# --- parsing -------------------------------------------------------------------------------------


RevisionOf = Callable[[Sequence[tuple[str, api.JsonObject]]], str]
"""What hashes a list of (role name, leaderWorkerTemplate): `revision.compute_revision`, or a
memo of it."""


def parse_sync_request(
    body: object, *, revision_of: RevisionOf = revision.compute_revision
) -> records.SyncRequest:
    """A DisaggregatedSet sync request; raises RequestError when it cannot be used.

    Children of a kind this version does not know (a newer version's CompositeController lists
    it) come back apart, as they were last applied, to be answered unchanged; one that shares its
    kind and name with a known child makes the request unusable. Related objects are read only of
    the kind the customize hook asks for, scalers (`hooks.core.related`): they are never answered
    with. A history record's roles are hashed with `revision_of`."""
    request = _require_object(body, "request body")
    parent = parse_parent(_require_object(request.get("parent"), "parent"))
    # `finalizing` is not read: neither controller has a finalize hook, so it is always false.
    children, _, unknown = _parse_object_groups(
        request.get("children"),
        "children",
        allowed=records.DS_CHILD_KINDS,
        revision_of=revision_of,
    )
    related, _, _ = _parse_object_groups(
        request.get("related", {}),
        "related",
        allowed=frozenset({records.ChildKind.SCALER}),
        related=True,
    )
    declared = _declared_kinds(request.get("controller"))
    if declared is not None and any(child.kind not in declared for child in children):
        # Metacontroller observes only the types it declares: such a body is not its own.
        raise RequestError("children hold a type that controller.spec.childResources leaves out")
    known = {(child.kind.kind, child.name) for child in children}
    for item in unknown:
        if _key_of(item) in known:
            # An answer holds one object per kind and name: one of the two would be deleted.
            raise RequestError(
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
    """The set's child types that `controller` (the CompositeController) declares in
    `spec.childResources` (other entries are not ours to judge); None without a controller."""
    if controller is None:
        return None
    spec = _require_object(_require_object(controller, "controller").get("spec"), "controller spec")
    entries = spec.get("childResources", [])
    if not isinstance(entries, list):
        raise RequestError("controller spec.childResources must be a list")
    listed = set()
    for entry in entries:
        entry = _require_object(entry, "controller spec.childResources[]")
        listed.add((entry.get("apiVersion"), entry.get("resource")))
    return frozenset(
        kind for kind in records.DS_CHILD_KINDS if (kind.api_version, kind.resource) in listed
    )


def parse_customize_request(body: object) -> records.CustomizeRequest:
    """A DisaggregatedSet customize request."""
    request = _require_object(body, "request body")
    return records.CustomizeRequest(
        parent=parse_parent(_require_object(request.get("parent"), "parent"))
    )


def parse_scaler_sync_request(body: object) -> records.ScalerSyncRequest:
    """A RoleScaler sync request; the owning set is read from `related` (the only kind its
    customize hook asks for)."""
    request = _require_object(body, "request body")
    scaler = _parse_scaler(_require_object(request.get("parent"), "parent"))
    _, owners, _ = _parse_object_groups(
        request.get("related", {}),
        "related",
        allowed=frozenset({records.ChildKind.DISAGGREGATED_SET}),
        keep_parents=True,
        related=True,
    )
    return records.ScalerSyncRequest(scaler=scaler, owners=owners)


def parse_scaler_customize_request(body: object) -> records.ScalerCustomizeRequest:
    """A RoleScaler customize request."""
    request = _require_object(body, "request body")
    return records.ScalerCustomizeRequest(
        scaler=_parse_scaler(_require_object(request.get("parent"), "parent"))
    )


def parse_records(items: Iterable[object]) -> tuple[records.ObservedObject, ...]:
    """DisaggregatedSetRevisions as `kubectl get` lists them, read as a sync request's children
    are (sorted by name); RequestError for an object without a name."""
    found = [
        _parse_observed(records.ChildKind.REVISION, _require_object(item, "record"), "record")
        for item in items
    ]
    return tuple(sorted(found, key=lambda item: item.name))


def parse_parent(obj: JsonObject) -> records.Parent:
    """A DisaggregatedSet object; its spec is validated against the API models."""
    _require_kind(obj, api.DS_KIND)
    metadata = _require_object(obj.get("metadata"), "parent metadata")
    spec_raw = obj.get("spec")
    spec: api.DisaggregatedSetSpec | None = None
    violations: tuple[api.Violation, ...] = ()
    try:
        spec = api.DisaggregatedSetSpec.model_validate(spec_raw)
    except pydantic.ValidationError as error:
        violations = _violations_from(error)
    status = obj.get("status")
    status = status if isinstance(status, dict) else {}
    generation = _generation(metadata)
    if generation < 0:
        violations = (*violations, _negative_generation())
    return records.Parent(
        name=_require_str(metadata.get("name"), "parent metadata.name"),
        namespace=_optional_str(metadata.get("namespace")),
        uid=_optional_str(metadata.get("uid")),
        generation=max(generation, 0),
        spec=spec,
        spec_violations=violations,
        status=status,
        conditions=_parse_conditions(status.get("conditions")),
        annotations=_string_map(metadata.get("annotations"), "parent metadata.annotations"),
        rollout=_parse_rollout(status.get("rollout")),
        creating=_parse_creating(status.get("creating")),
        status_generation=_int_or_none(status.get("observedGeneration")),
        role_replicas=_parse_role_replicas(status.get("roleStatuses")),
        revision=_str_or_none(status.get("revision")),
        ready=_str_or_none(status.get("ready")),
        history=_str_or_none(status.get("history")),
        slice_phases=_parse_slice_phases(_object_or_empty(status.get("rollout")).get("slices")),
        resource_version=_optional_str(metadata.get("resourceVersion")),
    )


def parse_spec_ignoring_bounds(raw: object) -> api.DisaggregatedSetSpec | None:
    """A DisaggregatedSet spec whose values have the API's types but may be out of its bounds
    (the number of roles, a role name's pattern or length, a role's replicas, slices), kept as
    written; None when a type is wrong or a required field is missing.

    For `render`, which checks the rules even where the schema fails, as the API server runs its
    CEL rules over an object whose only schema errors are bounds. Never for a sync: the hook acts
    only on a spec that `parse_parent` parsed whole."""
    if not isinstance(raw, dict) or not isinstance(raw.get("roles"), list):
        return None
    slices = raw.get("slices", 1)
    policy = raw.get("placementPolicy")
    try:
        parsed = [_role_ignoring_bounds(role) for role in raw["roles"]]
        placement = None if policy is None else api.PlacementPolicy.model_validate(policy)
    except pydantic.ValidationError:
        return None
    roles = [role for role in parsed if role is not None]
    if type(slices) is not int or len(roles) != len(parsed):
        return None
    return api.DisaggregatedSetSpec.model_construct(
        roles=roles, slices=slices, placement_policy=placement
    )


def _role_ignoring_bounds(raw: object) -> api.Role | None:
    """One role parsed with stand-ins for its bounded values (name, replicas), which are then
    put back as written; None without a name or a spec."""
    if not isinstance(raw, dict):
        return None
    name, spec = raw.get("name"), raw.get("spec")
    if not isinstance(name, str) or not isinstance(spec, dict):
        return None
    stand_in = dict(spec)
    if type(spec.get("replicas")) is int:
        stand_in["replicas"] = 0
    parsed = api.Role.model_validate({**raw, "name": "r", "spec": stand_in})
    return parsed.model_copy(update={"name": name, "spec": spec})


def _parse_rollout(value: object) -> records.ObservedRollout | None:
    """`status.rollout` as this hook wrote it, or None (absent or not of that shape)."""
    if not isinstance(value, dict):
        return None
    revision = value.get("revision")
    time = value.get("lastProgressTime")
    if not isinstance(revision, str) or not isinstance(time, str):
        return None
    return records.ObservedRollout(
        revision=revision,
        last_progress_time=time,
        ready_replicas=_count_or_zero(value.get("readyReplicas")),
        updated_replicas=_count_or_zero(value.get("updatedReplicas")),
    )


def _parse_slice_phases(value: object) -> dict[int, str]:
    """`status.rollout.slices` as this hook wrote it: index -> phase (entries of another shape
    are dropped; an index listed twice keeps its first phase)."""
    found: dict[int, str] = {}
    for entry in value if isinstance(value, list) else ():
        if isinstance(entry, dict) and isinstance(entry.get("phase"), str):
            index = _int_or_none(entry.get("index"))
            if index is not None:
                found.setdefault(index, entry["phase"])
    return found


def _parse_creating(value: object) -> dict[tuple[str, str], str]:
    """`status.creating` as this hook wrote it: the entries of that shape (others are dropped,
    and a child recorded twice keeps its first time)."""
    found: dict[tuple[str, str], str] = {}
    for entry in value if isinstance(value, list) else ():
        if not isinstance(entry, dict):
            continue
        kind, name, since = entry.get("kind"), entry.get("name"), entry.get("since")
        if isinstance(kind, str) and isinstance(name, str) and isinstance(since, str):
            found.setdefault((kind, name), since)
    return found


def _parse_role_replicas(value: object) -> dict[str, int]:
    """`status.roleStatuses` as this hook wrote it: role -> replicas (a count that is no
    count is 0; a role listed twice keeps its first entry)."""
    found: dict[str, int] = {}
    for entry in value if isinstance(value, list) else ():
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            found.setdefault(entry["name"], _count_or_zero(entry.get("replicas")))
    return found


def _object_or_empty(value: object) -> JsonObject:
    return value if isinstance(value, dict) else {}


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _count_or_zero(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return 0


def _negative_generation() -> api.Violation:
    return api.Violation(
        rule="metadata",
        field="metadata.generation",
        message="is negative, which no API server writes: the set is held until it is repaired",
    )


def _generation(metadata: JsonObject) -> int:
    """metadata.generation (0 when absent); a negative one is the caller's to report."""
    return _optional_int(metadata.get("generation"), "parent metadata.generation") or 0


def _parse_scaler(obj: JsonObject) -> records.ScalerParent:
    _require_kind(obj, api.SCALER_KIND)
    metadata = _require_object(obj.get("metadata"), "parent metadata")
    spec = obj.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    status = obj.get("status")
    status = status if isinstance(status, dict) else {}
    owner = _controller_ref(metadata)
    return records.ScalerParent(
        name=_require_str(metadata.get("name"), "parent metadata.name"),
        namespace=_optional_str(metadata.get("namespace")),
        uid=_optional_str(metadata.get("uid")),
        generation=max(_generation(metadata), 0),
        labels=_string_map(metadata.get("labels"), "parent metadata.labels"),
        owner_name=_optional_str(owner.get("name")) or None if owner else None,
        owner_uid=_optional_str(owner.get("uid")) or None if owner else None,
        spec_replicas=_optional_int(spec.get("replicas"), "parent spec.replicas") or 0,
        conditions=_parse_conditions(status.get("conditions")),
        status=status,
    )


def parse_child(obj: object, *, where: str) -> records.ObservedObject | None:
    """An object of a set's child kinds, its kind read from its own apiVersion and kind, read
    as a sync request's children are (with `applied`: what the hooks would answer for it once
    it is a child); None for an object of another kind. RequestError when it is not an object
    of that shape."""
    found = _require_object(obj, where)
    kind = _known_kind(f"{found.get('kind')}.{found.get('apiVersion')}", records.DS_CHILD_KINDS)
    return None if kind is None else _parse_observed(kind, found, where)


def parse_object(kind: records.ChildKind, obj: object, *, where: str) -> records.ObservedObject:
    """One object of `kind` as it is stored (kubectl's output, a related object): what the hooks
    read of it, without Metacontroller's last-applied copy (`applied` is empty). RequestError
    when it is not an object of that shape."""
    return _parse_observed(kind, _require_object(obj, where), where, related=True)


def _parse_object_groups(
    groups: object,
    where: str,
    *,
    allowed: frozenset[records.ChildKind],
    keep_parents: bool = False,
    related: bool = False,
    revision_of: RevisionOf = revision.compute_revision,
) -> tuple[tuple[records.ObservedObject, ...], tuple[records.Parent, ...], tuple[JsonObject, ...]]:
    """The objects of `children` or `related`, sorted by kind, namespace and name; with
    `keep_parents`, DisaggregatedSets come back as parents, apart; objects of a kind not
    `allowed` come back apart as they were last applied (children) or not at all (related).
    Related objects are never answered with, so their last-applied annotation is not read."""
    if not isinstance(groups, dict):
        raise RequestError(f"{where} must be an object keyed by <Kind>.<apiVersion>")
    observed: list[records.ObservedObject] = []
    parents: list[records.Parent] = []
    unknown: list[JsonObject] = []
    for key, objects in groups.items():
        if objects is None:
            continue
        if not isinstance(objects, dict):
            raise RequestError(f"{where}[{key!r}] must be an object keyed by name")
        kind = _known_kind(key, allowed)
        for inner_key, obj in objects.items():
            label = f"{where}[{key!r}][{inner_key!r}]"
            if kind is None:
                if not related:
                    unknown.append(_unknown_child(_require_object(obj, label), label))
            elif kind is records.ChildKind.DISAGGREGATED_SET and keep_parents:
                parents.append(parse_parent(_require_object(obj, label)))
            else:
                observed.append(
                    _parse_observed(
                        kind,
                        _require_object(obj, label),
                        label,
                        related=related,
                        revision_of=revision_of,
                    )
                )
    return (
        tuple(sorted(observed, key=lambda obj: (obj.kind.value, obj.namespace, obj.name))),
        tuple(sorted(parents, key=lambda obj: (obj.namespace, obj.name))),
        tuple(sorted(unknown, key=lambda obj: (obj["kind"], obj["metadata"]["name"]))),
    )


def _known_kind(key: str, allowed: frozenset[records.ChildKind]) -> records.ChildKind | None:
    """The kind of a `children` or `related` key, None for one this hook does not handle."""
    try:
        kind = records.ChildKind(key)
    except ValueError:
        return None
    return kind if kind in allowed else None


def _unknown_child(obj: JsonObject, where: str) -> JsonObject:
    """A child of a kind this version does not know, to answer as it is: what was last applied
    when the annotation names exactly this object, else a cleaned copy (every field but its
    status and the metadata Metacontroller and the API server add)."""
    metadata = _require_object(obj.get("metadata"), f"{where} metadata")
    name = _require_str(metadata.get("name"), f"{where} metadata.name")
    api_version = _require_str(obj.get("apiVersion"), f"{where} apiVersion")
    kind = _require_str(obj.get("kind"), f"{where} kind")
    labels = _string_map(metadata.get("labels"), f"{where} metadata.labels")
    annotations = _string_map(metadata.get("annotations"), f"{where} metadata.annotations")
    applied = _last_applied(annotations)
    namespace = _optional_str(metadata.get("namespace"))
    if _is_applied_for(applied, api_version, kind, name, namespace):
        return _without_metacontroller_fields(applied)
    cleaned = _cleaned(api_version, kind, name, labels, annotations)
    for field, value in obj.items():
        if field not in ("apiVersion", "kind", "metadata", "status"):
            cleaned[field] = value
    return cleaned


def _parse_observed(
    kind: records.ChildKind,
    obj: JsonObject,
    where: str,
    *,
    related: bool = False,
    revision_of: RevisionOf = revision.compute_revision,
) -> records.ObservedObject:
    metadata = _require_object(obj.get("metadata"), f"{where} metadata")
    name = _require_str(metadata.get("name"), f"{where} metadata.name")
    labels = _string_map(metadata.get("labels"), f"{where} metadata.labels")
    annotations = _string_map(metadata.get("annotations"), f"{where} metadata.annotations")
    spec = obj.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    status = obj.get("status")
    status = status if isinstance(status, dict) else {}
    owner = _controller_ref(metadata)
    replica_status, status_error = _replica_status(status)
    stored, stored_error = (
        _stored_revision(obj, revision_of) if kind is records.ChildKind.REVISION else (None, None)
    )
    return records.ObservedObject(
        kind=kind,
        name=name,
        namespace=_optional_str(metadata.get("namespace")),
        labels=labels,
        annotations=annotations,
        creation_timestamp=_optional_str(metadata.get("creationTimestamp")),
        controller_uid=_optional_str(owner.get("uid")) or None if owner else None,
        spec_replicas=_optional_int(spec.get("replicas"), f"{where} spec.replicas"),
        status=replica_status,
        applied={} if related else _applied_object(kind, obj, name, labels, annotations),
        slice_index=_slice_index(labels),
        status_error=status_error,
        stored=stored,
        stored_error=stored_error,
        spec=spec,
        resource_version=_optional_str(metadata.get("resourceVersion")),
        owner_uids=_owner_uids(metadata),
        controller_object=_controller_object(owner),
    )


def _controller_object(owner: JsonObject | None) -> str | None:
    """`Kind.group/name` of a controller reference (`Kind/name` in the core group)."""
    if owner is None:
        return None
    group = _optional_str(owner.get("apiVersion")).rpartition("/")[0]
    kind = _optional_str(owner.get("kind")) + (f".{group}" if group else "")
    return f"{kind}/{_optional_str(owner.get('name'))}"


def _owner_uids(metadata: JsonObject) -> tuple[str, ...]:
    refs = metadata.get("ownerReferences")
    return (
        tuple(_optional_str(ref.get("uid")) for ref in refs if isinstance(ref, dict))
        if isinstance(refs, list)
        else ()
    )


def _stored_revision(
    obj: JsonObject, revision_of: RevisionOf
) -> tuple[records.StoredRevision | None, str | None]:
    """A DisaggregatedSetRevision's body as its CRD describes it (`api.RevisionRecord`), its
    roles parsed as a spec's roles are, and the revision they hash to (by `revision_of`); or why
    it is not one."""
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
        text = compact.unpack_roles(body.packed_roles)
        decoded = orjson.loads(text)
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
    """The slice label as a number: 0 when absent or empty (objects from before slices existed),
    None when it is not a canonical decimal (no sign, no leading zero, ASCII digits only)."""
    value = labels.get(api.LABEL_SLICE, "")
    if value == "":
        return 0
    if not value.isascii() or not value.isdigit() or str(int(value)) != value:
        return None
    return int(value)


_STATUS_COUNTS = (
    ("replicas", "replicas"),
    ("readyReplicas", "ready_replicas"),
    ("updatedReplicas", "updated_replicas"),
)


def _replica_status(status: JsonObject) -> tuple[records.ReplicaStatus, str | None]:
    """The replica counts of an observed status, or zeros and why when one is impossible.

    A count outside 0..LWS_MAX_REPLICAS (a LeaderWorkerSet cannot have more groups) is a state
    that no retry fixes: the whole status is ignored and the caller reports it, instead of
    summing it into roleStatuses that could not be written (or serialised) any more.
    """
    counts: dict[str, int] = {}
    for key, attribute in _STATUS_COUNTS:
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
    """What the hook answered for this child last time: Metacontroller's last-applied copy when
    it names exactly this object (never for a history record, which is re-sent as stored), else
    a cleaned copy of the object with its body."""
    if kind is not records.ChildKind.REVISION:
        applied = _last_applied(annotations)
        namespace = _optional_str(obj["metadata"].get("namespace"))
        if _is_applied_for(applied, kind.api_version, kind.kind, name, namespace):
            return _without_metacontroller_fields(applied)
    cleaned = _cleaned(kind.api_version, kind.kind, name, labels, annotations)
    for field in _BODY_FIELDS[kind]:
        if kind is records.ChildKind.REVISION and field in obj:
            cleaned[field] = obj[field]  # exactly as stored
        elif isinstance(obj.get(field), dict | int) and not isinstance(obj[field], bool):
            cleaned[field] = obj[field]
    return cleaned


def _last_applied(annotations: Mapping[str, str]) -> object:
    """Metacontroller's last-applied annotation, parsed (None when absent or no JSON)."""
    text = annotations.get(api.LAST_APPLIED_ANNOTATION)
    if text is None:
        return None
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return None


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


# The fields of a child besides its identity and status: what a cleaned copy keeps.
_BODY_FIELDS: Final[Mapping[records.ChildKind, tuple[str, ...]]] = {
    records.ChildKind.LWS: ("spec",),
    records.ChildKind.SERVICE: ("spec",),
    records.ChildKind.SCALER: ("spec",),
    records.ChildKind.REVISION: (
        "revision",
        "firstRevision",
        "completedAs",
        "packedRoles",
        "roles",
    ),
    records.ChildKind.DISAGGREGATED_SET: ("spec",),
}


def _is_applied_for(
    applied: object, api_version: str, kind: str, name: str, namespace: str
) -> TypeGuard[JsonObject]:
    """Whether a last-applied object has exactly the observed object's identity."""
    if not isinstance(applied, dict):
        return False
    metadata = applied.get("metadata")
    return (
        applied.get("apiVersion") == api_version
        and applied.get("kind") == kind
        and isinstance(metadata, dict)
        and metadata.get("name") == name
        and metadata.get("namespace", namespace) == namespace
    )


def _without_metacontroller_fields(applied: JsonObject) -> JsonObject:
    metadata = dict(applied["metadata"])
    metadata.pop("namespace", None)
    labels = metadata.get("labels")
    if isinstance(labels, dict) and api.CONTROLLER_UID_LABEL in labels:
        labels = {k: v for k, v in labels.items() if k != api.CONTROLLER_UID_LABEL}
        if labels:
            metadata["labels"] = labels
        else:
            del metadata["labels"]
    return {**applied, "metadata": metadata}


def _parse_conditions(value: object) -> tuple[records.ObservedCondition, ...]:
    if not isinstance(value, list):
        return ()
    conditions = []
    for item in value:
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            continue
        generation = item.get("observedGeneration")
        conditions.append(
            records.ObservedCondition(
                type=item["type"],
                status=_optional_str(item.get("status")),
                last_transition_time=_optional_str(item.get("lastTransitionTime")),
                reason=_optional_str(item.get("reason")),
                message=_optional_str(item.get("message")),
                observed_generation=generation if isinstance(generation, int) else None,
            )
        )
    return tuple(conditions)


# Messages that say what to do, where pydantic's own words would not (by location and error type).
_SCHEMA_MESSAGES: Final[dict[tuple[tuple[int | str, ...], str], str]] = {
    (("roles",), "too_short"): f"must list at least {api.MIN_ROLES} roles: add a role",
    (("roles",), "too_long"): f"must list at most {api.MAX_ROLES} roles: remove or merge roles",
    (("roles",), "missing"): f"is required: list {api.MIN_ROLES} to {api.MAX_ROLES} roles",
}


def field_path(parts: Iterable[object], *, root: str = "") -> str:
    """A field path as the API server writes it: `root.a.b[2].c` (list indexes in brackets)."""
    path = root
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path.lstrip(".")


def _first_error(error: pydantic.ValidationError, *, root: str) -> str:
    detail = error.errors(include_url=False)[0]
    return f"{field_path(detail['loc'], root=root)}: {detail['msg']}"


def _violations_from(error: pydantic.ValidationError) -> tuple[api.Violation, ...]:
    violations = []
    for detail in error.errors(include_url=False):
        path = field_path(detail["loc"], root="spec")
        message = _SCHEMA_MESSAGES.get((tuple(detail["loc"]), detail["type"]), detail["msg"])
        violations.append(api.Violation(rule="schema", field=path, message=message))
    return tuple(violations)


def _controller_ref(metadata: JsonObject) -> JsonObject | None:
    refs = metadata.get("ownerReferences")
    if not isinstance(refs, list):
        return None
    for ref in refs:
        if isinstance(ref, dict) and ref.get("controller") is True:
            return ref
    return None


def _require_kind(obj: JsonObject, kind: str) -> None:
    if obj.get("kind") != kind or obj.get("apiVersion") != api.API_VERSION:
        raise RequestError(
            f"parent must be a {api.API_VERSION} {kind}, got "
            f"{obj.get('apiVersion')!r} {obj.get('kind')!r}"
        )


def _require_object(value: object, where: str) -> JsonObject:
    if not isinstance(value, dict):
        raise RequestError(f"{where} must be a JSON object")
    return value


def _require_str(value: object, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise RequestError(f"{where} must be a non-empty string")
    return value


def _optional_str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _optional_int(value: object, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(f"{where} must be an integer")
    return value


def _string_map(value: object, where: str) -> Mapping[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise RequestError(f"{where} must map strings to strings")
    return value


# --- rendering -----------------------------------------------------------------------------------


def render_answer(answer: records.SyncAnswer | records.CustomizeAnswer) -> JsonObject:
    """The JSON a hook answers Metacontroller with: the one place answers become JSON."""
    if isinstance(answer, records.CustomizeAnswer):
        return render_customize_response(answer.related)
    response: JsonObject = {
        "status": _answered_status(answer),
        "children": list(answer.children),
    }
    if answer.resync_after_seconds is not None:
        response["resyncAfterSeconds"] = answer.resync_after_seconds
    return response


def _answered_status(answer: records.SyncAnswer) -> JsonObject:
    """The status an answer writes: the computed one, beside the observed fields it keeps."""
    return {**answer.status_kept, **render_status(answer.status)}


def render_status(status: records.Status) -> JsonObject:
    """JSON of a status: camelCase keys, unset optional fields left out.

    A held status is the observed one as it was, its Degraded condition (and the `degraded`
    reason beside it) replaced, appended when there was none, so a hold rewrites nothing else.
    """
    if isinstance(status, records.HeldStatus):
        kept = [
            condition
            for condition in status.observed.get("conditions") or []
            if isinstance(condition, dict) and condition.get("type") != api.ConditionType.DEGRADED
        ]
        held = {**status.observed, "conditions": [*kept, _model_json(status.degraded)]}
        held.pop("degraded", None)
        if status.degraded.status is api.ConditionStatus.TRUE:
            held["degraded"] = status.degraded.reason
        return held
    return _model_json(status)


def _model_json(model: pydantic.BaseModel) -> JsonObject:
    rendered: JsonObject = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return rendered


def writes(request: records.SyncRequest, answer: records.SyncAnswer) -> Mapping[str, int]:
    """What Metacontroller writes for `answer`: children to create, to update, to delete, and 1
    under "status" when the status changes. All zero: the answer is the observed state.

    A child counts as updated when it differs from its last-applied annotation (Metacontroller
    updates a child when the answer, merged over the live object, changes it). Metacontroller sets
    observedGeneration in the status before it compares, so this does too.
    """
    applied = {(item.kind.kind, item.name): item.applied for item in request.children}
    applied.update((_key_of(item), item) for item in request.unknown_children)
    create = update = 0
    for child in answer.children:
        previous = applied.pop(_key_of(child), None)
        if previous is None:
            create += 1
        elif previous != child:
            update += 1
    status = {**_answered_status(answer), "observedGeneration": request.parent.generation}
    return {
        "create": create,
        "update": update,
        "delete": len(applied),
        "status": int(status != request.parent.status),
    }


def _key_of(child: JsonObject) -> tuple[str, str]:
    return child["kind"], child["metadata"]["name"]


def render_customize_response(rules: Sequence[records.RelatedRule]) -> JsonObject:
    """The customize answer: which related objects Metacontroller should send with each sync."""
    related = []
    for rule in rules:
        entry: JsonObject = {"apiVersion": rule.api_version, "resource": rule.resource}
        if rule.namespace:
            entry["namespace"] = rule.namespace
        if rule.label_selector is not None:
            entry["labelSelector"] = {"matchLabels": dict(rule.label_selector)}
        if rule.names:
            entry["names"] = list(rule.names)
        related.append(entry)
    return {"relatedResources": related}
