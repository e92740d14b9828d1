"""The parent of a hook call, read from its JSON: a DisaggregatedSet (its spec validated against
the API models, a spec that fails them kept as violations; the status fields the hooks wrote,
read leniently: an entry of another shape is dropped, one listed twice keeps its first value), or
a DisaggregatedSetRoleScaler.
"""

from __future__ import annotations

from typing import Final

import pydantic

from hooks import api
from hooks.api.documents import list_of, object_of
from hooks.core import records
from hooks.wire import values

JsonObject = values.JsonObject

_NEGATIVE_GENERATION: Final = api.Violation(
    rule="metadata",
    field="metadata.generation",
    message="is negative, which no API server writes: the set is held until it is repaired",
)


def parse_parent(obj: JsonObject) -> records.Parent:
    """A DisaggregatedSet object; its spec is validated against the API models."""
    _require_kind(obj, api.DS_KIND)
    metadata = values.require_object(obj.get("metadata"), "parent metadata")
    spec: api.DisaggregatedSetSpec | None = None
    violations: tuple[api.Violation, ...] = ()
    try:
        spec = api.DisaggregatedSetSpec.model_validate(obj.get("spec"))
    except pydantic.ValidationError as error:
        violations = _violations_from(error)
    status = object_of(obj.get("status"))
    generation = _generation(metadata)
    if generation < 0:
        violations = (*violations, _NEGATIVE_GENERATION)
    return records.Parent(
        name=values.require_str(metadata.get("name"), "parent metadata.name"),
        namespace=values.optional_str(metadata.get("namespace")),
        uid=values.optional_str(metadata.get("uid")),
        generation=max(generation, 0),
        spec=spec,
        spec_violations=violations,
        status=status,
        conditions=_parse_conditions(status.get("conditions")),
        annotations=values.string_map(metadata.get("annotations"), "parent metadata.annotations"),
        rollout=_parse_rollout(status.get("rollout")),
        creating=_parse_creating(status.get("creating")),
        status_generation=_int_or_none(status.get("observedGeneration")),
        role_replicas=_parse_role_replicas(status.get("roleStatuses")),
        revision=_str_or_none(status.get("revision")),
        ready=_str_or_none(status.get("ready")),
        history=_str_or_none(status.get("history")),
        slice_phases=_parse_slice_phases(object_of(status.get("rollout")).get("slices")),
        resource_version=values.optional_str(metadata.get("resourceVersion")),
    )


def parse_spec_ignoring_bounds(raw: object) -> api.DisaggregatedSetSpec | None:
    """A DisaggregatedSet spec whose values have the API's types but may be out of its bounds
    (the number of roles, a role name, a role's replicas, slices), kept as written; None when a
    type is wrong or a required field is missing. For `render`, which checks the rules where only
    bounds fail, as the API server runs CEL; never for a sync."""
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
    """`status.rollout.slices` as this hook wrote it: index -> phase."""
    found: dict[int, str] = {}
    for entry in _entries(value):
        index = _int_or_none(entry.get("index"))
        if isinstance(entry.get("phase"), str) and index is not None:
            found.setdefault(index, entry["phase"])
    return found


def _parse_creating(value: object) -> dict[tuple[str, str], str]:
    """`status.creating` as this hook wrote it: (kind, name) -> since."""
    found: dict[tuple[str, str], str] = {}
    for entry in _entries(value):
        kind, name, since = entry.get("kind"), entry.get("name"), entry.get("since")
        if isinstance(kind, str) and isinstance(name, str) and isinstance(since, str):
            found.setdefault((kind, name), since)
    return found


def _parse_role_replicas(value: object) -> dict[str, int]:
    """`status.roleStatuses` as this hook wrote it: role -> replicas (0 for a count that is no
    count)."""
    found: dict[str, int] = {}
    for entry in _entries(value):
        if isinstance(entry.get("name"), str):
            found.setdefault(entry["name"], _count_or_zero(entry.get("replicas")))
    return found


def _entries(value: object) -> list[JsonObject]:
    """The objects of a status list the hooks wrote (anything else in it is dropped)."""
    return [entry for entry in list_of(value) if isinstance(entry, dict)]


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _count_or_zero(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return 0


def _generation(metadata: JsonObject) -> int:
    """metadata.generation (0 when absent); a negative one is the caller's to report."""
    return values.optional_int(metadata.get("generation"), "parent metadata.generation") or 0


def parse_scaler(obj: JsonObject) -> records.ScalerParent:
    _require_kind(obj, api.SCALER_KIND)
    metadata = values.require_object(obj.get("metadata"), "parent metadata")
    spec = object_of(obj.get("spec"))
    status = object_of(obj.get("status"))
    owner = values.controller_ref(metadata)
    return records.ScalerParent(
        name=values.require_str(metadata.get("name"), "parent metadata.name"),
        namespace=values.optional_str(metadata.get("namespace")),
        uid=values.optional_str(metadata.get("uid")),
        generation=max(_generation(metadata), 0),
        labels=values.string_map(metadata.get("labels"), "parent metadata.labels"),
        owner_name=values.optional_str(owner.get("name")) or None if owner else None,
        owner_uid=values.optional_str(owner.get("uid")) or None if owner else None,
        spec_replicas=values.optional_int(spec.get("replicas"), "parent spec.replicas") or 0,
        conditions=_parse_conditions(status.get("conditions")),
        status=status,
    )


def _parse_conditions(value: object) -> tuple[records.ObservedCondition, ...]:
    conditions = []
    for item in _entries(value):
        generation = item.get("observedGeneration")
        if isinstance(item.get("type"), str):
            condition = records.ObservedCondition(
                type=item["type"],
                status=values.optional_str(item.get("status")),
                last_transition_time=values.optional_str(item.get("lastTransitionTime")),
                reason=values.optional_str(item.get("reason")),
                message=values.optional_str(item.get("message")),
                observed_generation=generation if isinstance(generation, int) else None,
            )
            conditions.append(condition)
    return tuple(conditions)


# Messages that say what to do, where pydantic's own words would not (by location and error type).
_SCHEMA_MESSAGES: Final[dict[tuple[tuple[int | str, ...], str], str]] = {
    (("roles",), "too_short"): f"must list at least {api.MIN_ROLES} roles: add a role",
    (("roles",), "too_long"): f"must list at most {api.MAX_ROLES} roles: remove or merge roles",
    (("roles",), "missing"): f"is required: list {api.MIN_ROLES} to {api.MAX_ROLES} roles",
}


def _violations_from(error: pydantic.ValidationError) -> tuple[api.Violation, ...]:
    return tuple(
        api.Violation(
            rule="schema",
            field=values.field_path(detail["loc"], root="spec"),
            message=_SCHEMA_MESSAGES.get((tuple(detail["loc"]), detail["type"]), detail["msg"]),
        )
        for detail in error.errors(include_url=False)
    )


def _require_kind(obj: JsonObject, kind: str) -> None:
    if obj.get("kind") != kind or obj.get("apiVersion") != api.API_VERSION:
        raise values.RequestError(
            f"parent must be a {api.API_VERSION} {kind}, got "
            f"{obj.get('apiVersion')!r} {obj.get('kind')!r}"
        )
