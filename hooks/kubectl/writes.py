"""How `kubectl ds rollout undo` writes a set back: only what the undo changes, leaving every
apply's bookkeeping usable (README, "Rolling back", tells users).

The set's manifest is usually kept by `kubectl apply`, client-side (the last-applied annotation,
fields owned by `kubectl-client-side-apply` with operation Update) or server-side (fields owned
by an Apply manager, `kubectl` by default). An undo must leave both able to apply the next
manifest, and must refuse a set that changed since it was read:

- **Server-side apply.** When one Apply manager owns the roles' templates, the undo applies as
  that manager: the configuration it owns now (the live object cut down to its managed fields),
  with the restored roles and, when it owns it, the change-cause annotation. The manager keeps
  exactly the fields it had, so its next apply of any manifest finds no conflict. The
  configuration carries the resourceVersion read, which server-side apply takes as a
  precondition.
- **Otherwise** (client-side apply, `kubectl create`, edits): a JSON patch, its first operation a
  test of the resourceVersion read. It replaces each template that changes in place, or the
  whole role list when roles come back, go or move. It never touches the last-applied
  annotation, so the next `kubectl apply` merges the manifest over the rolled-back set as
  usual (and re-applying the newer manifest rolls forward again, as for a Deployment).
- The change-cause annotation follows the restored revision in the same write, but for a
  server-side applier that does not own it: then a merge patch of that one annotation follows
  the apply (it overwrites nothing else).

Pure: from the set as kubectl printed it (with `--show-managed-fields`) to the writes to make.
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

TEMPLATE: Final = "leaderWorkerTemplate"
APPLY: Final = "Apply"
PATCH_MANAGER: Final = "kubectl-ds"
"""The field manager of the undo's patches, so that `managedFields` names who changed what."""


class Method(StrEnum):
    APPLY = "apply"
    """A server-side apply as `Write.manager`; the body is the configuration."""
    JSON_PATCH = "json"
    """A JSON patch; the body is the operation list."""
    MERGE_PATCH = "merge"
    """A JSON merge patch."""


@dataclass(frozen=True, slots=True)
class Write:
    """One request to make."""

    method: Method
    body: JsonObject | list[JsonObject]
    manager: str = PATCH_MANAGER

    @property
    def text(self) -> str:
        return json.dumps(self.body)


def undo_writes(
    live: JsonObject, *, roles: Sequence[JsonObject], change_cause: str | None
) -> list[Write]:
    """The writes that give `live` the spec `roles` and the `change_cause` annotation (None:
    none), guarded by its resourceVersion (see the module)."""
    owner = template_owner(live)
    if owner is None:
        return [_patch(live, roles=roles, change_cause=change_cause)]
    configuration = owned_configuration(live, manager=owner)
    spec = object_of(configuration.get("spec"))
    owned = {str(role.get("name")): role for role in map(object_of, list_of(spec.get("roles")))}
    configuration["spec"] = {**spec, "roles": [_owned_role(role, owned) for role in roles]}
    if not _owns_change_cause(live, owner):
        apply = Write(Method.APPLY, configuration, manager=owner)
        if _annotations(live).get(api.CHANGE_CAUSE_ANNOTATION) == change_cause:
            return [apply]
        annotation = {"metadata": {"annotations": {api.CHANGE_CAUSE_ANNOTATION: change_cause}}}
        return [apply, Write(Method.MERGE_PATCH, annotation)]
    metadata = configuration["metadata"]
    annotations = dict(metadata.get("annotations", {}))
    annotations.pop(api.CHANGE_CAUSE_ANNOTATION, None)
    if change_cause is not None:
        annotations[api.CHANGE_CAUSE_ANNOTATION] = change_cause
    if annotations:
        metadata["annotations"] = annotations
    else:
        metadata.pop("annotations", None)
    return [Write(Method.APPLY, configuration, manager=owner)]


def _owned_role(role: JsonObject, owned: Mapping[str, JsonObject]) -> JsonObject:
    """A restored role as the applier writes it: what it owns of the role now, with the
    restored template; a role coming back, as the revision recorded it."""
    mine = owned.get(str(role.get("name")))
    if mine is None:
        return role
    template = object_of(role.get("spec")).get(TEMPLATE)
    return {**mine, "spec": {**object_of(mine.get("spec")), TEMPLATE: template}}


def template_owner(live: JsonObject) -> str | None:
    """The Apply manager that owns the template of every role, when no other manager owns any
    field of a template; else None."""
    names = [
        object_of(role).get("name") for role in list_of(object_of(live.get("spec")).get("roles"))
    ]
    owners = set()
    complete = False
    for entry in _managed_fields(live):
        roles = _dig(entry.get("fieldsV1"), "f:spec", "f:roles")
        templates = {
            object_of(_item_key(key)).get("name")
            for key, role in roles.items()
            if key.startswith("k:") and TEMPLATE_KEY in object_of(object_of(role).get("f:spec"))
        }
        if templates:
            owners.add((str(entry.get("manager", "")), str(entry.get("operation", ""))))
            complete = templates >= set(names)
    if len(owners) != 1 or not complete:
        return None
    ((manager, operation),) = owners
    return manager if operation == APPLY and manager else None


TEMPLATE_KEY: Final = f"f:{TEMPLATE}"


def owned_configuration(live: JsonObject, *, manager: str) -> JsonObject:
    """What Apply manager `manager` owns of `live`, as an apply configuration: apiVersion, kind,
    name, namespace and the resourceVersion read, and every field of its managed-fields entry
    with the live value (list items in their live order)."""
    fields: JsonObject = {}
    for entry in _managed_fields(live):
        if entry.get("manager") == manager and entry.get("operation") == APPLY:
            fields = object_of(entry.get("fieldsV1"))
    owned = _project(live, fields)
    result: JsonObject = owned if isinstance(owned, dict) else {}
    metadata = object_of(live.get("metadata"))
    result["apiVersion"] = live.get("apiVersion")
    result["kind"] = live.get("kind")
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
    if not fields:
        return copy.deepcopy(value)
    if isinstance(value, dict):
        return {
            key[2:]: _project(value[key[2:]], object_of(sub))
            for key, sub in fields.items()
            if key.startswith("f:") and key[2:] in value
        }
    if isinstance(value, list):
        return _project_list(value, fields)
    return copy.deepcopy(value)


def _project_list(items: list[Any], fields: Mapping[str, Any]) -> list[Any]:
    """The items of a list that `fields` names, by key (`k:`) or as a set member (`v:`), in
    their live order."""
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
    try:
        key = json.loads(text[2:])
    except ValueError:
        return None
    return key if isinstance(key, dict) and key else None


def _member(text: str) -> object:
    """The value of a `v:...` entry (a value no list holds when it is not JSON)."""
    try:
        return json.loads(text[2:])
    except ValueError:
        return object()


def _owns_change_cause(live: JsonObject, manager: str) -> bool:
    for entry in _managed_fields(live):
        if entry.get("manager") == manager and entry.get("operation") == APPLY:
            annotations = _dig(entry.get("fieldsV1"), "f:metadata", "f:annotations")
            return f"f:{api.CHANGE_CAUSE_ANNOTATION}" in annotations
    return False


def _patch(live: JsonObject, *, roles: Sequence[JsonObject], change_cause: str | None) -> Write:
    """The JSON patch: the resourceVersion test, the templates or the role list, the
    change-cause annotation."""
    operations = [_version_test(live)]
    current = [object_of(role) for role in list_of(object_of(live.get("spec")).get("roles"))]
    if [role.get("name") for role in current] == [role.get("name") for role in roles]:
        for index, (before, after) in enumerate(zip(current, roles, strict=True)):
            template = object_of(after.get("spec")).get(TEMPLATE)
            if object_of(before.get("spec")).get(TEMPLATE) != template:
                operations.append(
                    {
                        "op": "replace",
                        "path": f"/spec/roles/{index}/spec/{TEMPLATE}",
                        "value": template,
                    }
                )
    else:
        operations.append({"op": "replace", "path": "/spec/roles", "value": list(roles)})
    operations.extend(_change_cause_operations(live, change_cause))
    return Write(Method.JSON_PATCH, operations)


def _change_cause_operations(live: JsonObject, change_cause: str | None) -> list[JsonObject]:
    """What makes the change-cause annotation `change_cause`."""
    operations: list[JsonObject] = []
    annotations = _annotations(live)
    path = "/metadata/annotations/" + api.CHANGE_CAUSE_ANNOTATION.replace("~", "~0").replace(
        "/", "~1"
    )
    if annotations.get(api.CHANGE_CAUSE_ANNOTATION) == change_cause:
        return operations
    if change_cause is None:
        operations.append({"op": "remove", "path": path})
    elif "annotations" not in object_of(live.get("metadata")):
        operations.append(
            {
                "op": "add",
                "path": "/metadata/annotations",
                "value": {api.CHANGE_CAUSE_ANNOTATION: change_cause},
            }
        )
    else:
        operations.append({"op": "add", "path": path, "value": change_cause})
    return operations


def _version_test(live: JsonObject) -> JsonObject:
    version = object_of(live.get("metadata")).get("resourceVersion")
    return {"op": "test", "path": "/metadata/resourceVersion", "value": version}


def _managed_fields(live: JsonObject) -> list[JsonObject]:
    return [
        object_of(entry) for entry in list_of(object_of(live.get("metadata")).get("managedFields"))
    ]


def _annotations(live: JsonObject) -> dict[str, Any]:
    return object_of(object_of(live.get("metadata")).get("annotations"))


def _dig(value: Any, *keys: str) -> JsonObject:
    for key in keys:
        value = object_of(value).get(key)
    return object_of(value)
