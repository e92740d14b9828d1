"""How `kubectl ds rollout undo` writes a set back: only what the undo changes, guarded by what
was read, so that client- and server-side apply go on working (the rules:
docs/rollout.md, "Rolling back with kubectl ds"). Pure: from the set as kubectl printed it (with
`--show-managed-fields`) to the writes to make, and whether the set read again right before them
is still the one the undo was planned from.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from hooks import api
from hooks.api.documents import JsonObject, list_of, object_of
from hooks.kubectl import TEMPLATE, dig

APPLY: Final = "Apply"
PATCH_MANAGER: Final = "kubectl-ds"
"""The field manager of the undo's patches, so that `managedFields` names who changed what."""
_CAUSE: Final = api.CHANGE_CAUSE_ANNOTATION


class Method(StrEnum):
    """A server-side apply as `Write.manager` (the body: the configuration), a JSON patch (the
    operation list) or a JSON merge patch."""

    APPLY = "apply"
    JSON_PATCH = "json"
    MERGE_PATCH = "merge"


@dataclass(frozen=True, slots=True)
class Write:
    """One request to make."""

    method: Method
    body: JsonObject | list[JsonObject]
    manager: str = PATCH_MANAGER


def undo_writes(
    live: JsonObject, *, roles: Sequence[JsonObject], change_cause: str | None
) -> list[Write]:
    """The writes that give `live` the spec `roles` and the `change_cause` (None: none)."""
    owner = template_owner(live)
    if owner is None:
        return [_patch(live, roles=roles, change_cause=change_cause)]
    configuration = owned_configuration(live, manager=owner)
    spec = object_of(configuration.get("spec"))
    owned = {str(role.get("name")): role for role in map(object_of, list_of(spec.get("roles")))}
    configuration["spec"] = {**spec, "roles": [_owned_role(role, owned) for role in roles]}
    if not _owns_change_cause(live, owner):
        apply = Write(Method.APPLY, configuration, manager=owner)
        if dig(live, "metadata", "annotations").get(_CAUSE) == change_cause:
            return [apply]
        cause = {"metadata": {"annotations": {_CAUSE: change_cause}}}
        return [apply, Write(Method.MERGE_PATCH, cause)]
    metadata = configuration["metadata"]
    annotations = {k: v for k, v in metadata.get("annotations", {}).items() if k != _CAUSE}
    if change_cause is not None:
        annotations[_CAUSE] = change_cause
    if annotations:
        metadata["annotations"] = annotations
    else:
        metadata.pop("annotations", None)
    return [Write(Method.APPLY, configuration, manager=owner)]


def same_spec(read: JsonObject, now: JsonObject) -> bool:
    """Whether `now`, the set read again, still is what an undo planned from `read` restores:
    the same object (uid), generation, spec and annotations. Its status, resourceVersion and
    managed fields may have moved; the writes are then planned from `now`."""
    before, after = dig(read, "metadata"), dig(now, "metadata")
    same = all(before.get(key) == after.get(key) for key in ("uid", "generation", "annotations"))
    return same and read.get("spec") == now.get("spec")


def _owned_role(role: JsonObject, owned: Mapping[str, JsonObject]) -> JsonObject:
    """A restored role as the applier writes it: what it owns of it, with the template."""
    mine = owned.get(str(role.get("name")))
    if mine is None:
        return role
    template = object_of(role.get("spec")).get(TEMPLATE)
    return {**mine, "spec": {**object_of(mine.get("spec")), TEMPLATE: template}}


def template_owner(live: JsonObject) -> str | None:
    """The Apply manager that owns the template of every role, when no other manager owns any
    field of a template; else None."""
    names = [object_of(role).get("name") for role in list_of(dig(live, "spec").get("roles"))]
    owners = set()
    complete = False
    for entry in _managed_fields(live):
        roles = dig(entry.get("fieldsV1"), "f:spec", "f:roles")
        templates = {
            object_of(_item_key(key)).get("name")
            for key, role in roles.items()
            if key.startswith("k:") and f"f:{TEMPLATE}" in dig(role, "f:spec")
        }
        if templates:
            owners.add((str(entry.get("manager", "")), str(entry.get("operation", ""))))
            complete = templates >= set(names)
    if len(owners) != 1 or not complete:
        return None
    ((manager, operation),) = owners
    return manager if operation == APPLY and manager else None


def owned_configuration(live: JsonObject, *, manager: str) -> JsonObject:
    """What Apply manager `manager` owns of `live`, as an apply configuration: apiVersion, kind,
    name, namespace and the resourceVersion read, and every field of its managed-fields entry
    with the live value (list items in their live order)."""
    owned = _owned_fields(live, manager)
    result = object_of(_project(live, owned[-1] if owned else {}))
    metadata = dig(live, "metadata")
    result |= {"apiVersion": live.get("apiVersion"), "kind": live.get("kind")}
    result["metadata"] = {
        **object_of(result.get("metadata")),
        **{
            key: metadata[key]
            for key in ("name", "namespace", "resourceVersion")
            if isinstance(metadata.get(key), str)
        },
    }
    return result


def _project(value: Any, fields: Mapping[str, Any]) -> Any:
    """`value` cut down to `fields` (a managed-fields set: `f:` fields, `k:` list items by key,
    `v:` set members, `.` the item itself); a leaf, or an empty set, is the whole value."""
    if fields and isinstance(value, dict):
        return {
            key[2:]: _project(value[key[2:]], object_of(sub))
            for key, sub in fields.items()
            if key.startswith("f:") and key[2:] in value
        }
    if not fields or not isinstance(value, list):
        return copy.deepcopy(value)
    return _project_list(value, fields)


def _project_list(items: list[Any], fields: Mapping[str, Any]) -> list[Any]:
    """The items that `fields` names, by key (`k:`) or as a set member (`v:`), in live order."""
    keyed = [
        (key, object_of(sub))
        for text, sub in fields.items()
        if text.startswith("k:") and (key := _item_key(text)) is not None
    ]
    members = [_member(text) for text in fields if text.startswith("v:")]
    result = []
    for item in items:
        if item in members:
            result.append(copy.deepcopy(item))
        for key, sub in keyed:
            if isinstance(item, dict) and all(item.get(k) == v for k, v in key.items()):
                result.append({**object_of(_project(item, sub)), **key})
    return result


def _item_key(text: str) -> JsonObject | None:
    """The key of a `k:{...}` entry; None when it is no key (it then matches no item)."""
    key = _member(text)
    return key if isinstance(key, dict) and key else None


def _member(text: str) -> object:
    """The value of a `v:...` entry (a value no list holds when it is not JSON)."""
    try:
        return json.loads(text[2:])
    except ValueError:
        return object()


def _patch(live: JsonObject, *, roles: Sequence[JsonObject], change_cause: str | None) -> Write:
    """The JSON patch: the tests of what was read, the templates that change (or the role list,
    when roles come back, go or move), the change-cause annotation."""
    operations = _tests(live)
    current = [object_of(role) for role in list_of(dig(live, "spec").get("roles"))]
    same = [role.get("name") for role in current] == [role.get("name") for role in roles]
    if not same:
        operations.append({"op": "replace", "path": "/spec/roles", "value": list(roles)})
    for index, (before, after) in enumerate(zip(current, roles, strict=True) if same else ()):
        template = dig(after, "spec").get(TEMPLATE)
        if dig(before, "spec").get(TEMPLATE) != template:
            path = f"/spec/roles/{index}/spec/{TEMPLATE}"
            operations.append({"op": "replace", "path": path, "value": template})
    path = "/metadata/annotations/" + _CAUSE.replace("~", "~0").replace("/", "~1")
    if dig(live, "metadata", "annotations").get(_CAUSE) == change_cause:
        return Write(Method.JSON_PATCH, operations)
    if change_cause is None:
        operations.append({"op": "remove", "path": path})
    elif "annotations" not in dig(live, "metadata"):
        value = {_CAUSE: change_cause}
        operations.append({"op": "add", "path": "/metadata/annotations", "value": value})
    else:
        operations.append({"op": "add", "path": path, "value": change_cause})
    return Write(Method.JSON_PATCH, operations)


def _tests(live: JsonObject) -> list[JsonObject]:
    """The JSON patch's tests: the uid, the generation (which every change of the spec moves)
    and the annotations read, so that a status written meanwhile does not refuse it; for a set
    without annotations, whose patch may add the whole map, the resourceVersion read."""
    metadata = dig(live, "metadata")
    keys = (
        ("uid", "generation", "annotations") if "annotations" in metadata else ("resourceVersion",)
    )
    return [{"op": "test", "path": f"/metadata/{key}", "value": metadata.get(key)} for key in keys]


def _owns_change_cause(live: JsonObject, manager: str) -> bool:
    owned = _owned_fields(live, manager)[:1]
    return any(f"f:{_CAUSE}" in dig(fields, "f:metadata", "f:annotations") for fields in owned)


def _owned_fields(live: JsonObject, manager: str) -> list[JsonObject]:
    """The fields of each Apply entry of `manager`."""
    return [
        object_of(entry.get("fieldsV1"))
        for entry in _managed_fields(live)
        if entry.get("manager") == manager and entry.get("operation") == APPLY
    ]


def _managed_fields(live: JsonObject) -> list[JsonObject]:
    return [object_of(entry) for entry in list_of(dig(live, "metadata").get("managedFields"))]
