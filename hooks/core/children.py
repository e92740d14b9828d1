"""The child objects a sync returns: new ones rendered once, existing ones re-emitted.

An existing child is never re-rendered from the spec (that would rewrite a live pod template):
it is re-emitted from what this hook returned before (`ObservedObject.applied`), changing only an
LWS's replicas and rollout annotations, a scaler's observed replicas, or a record's number,
change-cause and `completedAs`. Nothing here mutates its inputs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hooks import api
from hooks.api import naming
from hooks.core import compact, placement, records

JsonObject = api.JsonObject

POD_TEMPLATE_KEYS = ("leaderTemplate", "workerTemplate")


def render_lws(
    *,
    set_name: str,
    role: api.Role,
    slice_index: int,
    revision: str,
    replicas: int,
    policy: api.PlacementPolicy | None,
    record: int | None = None,
) -> JsonObject:
    """A new LWS for a role in a slice at a revision, its labels and placement on both pod
    templates; `record`: the role's target when its rollout started (docs/rollout.md, "The
    record")."""
    labels = naming.lws_labels(
        set_name=set_name, slice_index=slice_index, revision=revision, role=role.name
    )
    template = dict(role.leader_worker_template)
    for key in POD_TEMPLATE_KEYS:
        if key in template:
            labelled = _with_template_labels(template[key], labels)
            template[key] = placement.build_placed_template(
                labelled, policy=policy, set_name=set_name, slice_index=slice_index
            )
    metadata: JsonObject = {
        "name": naming.lws_name(
            set_name=set_name, slice_index=slice_index, revision=revision, role=role.name
        ),
        "labels": {**role.labels, **labels},
    }
    annotations = dict(role.annotations)
    if record is not None:
        annotations[api.ANNOTATION_ROLLOUT_TARGET] = str(record)
    if annotations:
        metadata["annotations"] = annotations
    return {
        "apiVersion": api.LWS_API_VERSION,
        "kind": api.LWS_KIND,
        "metadata": metadata,
        "spec": {**role.spec, "replicas": replicas, "leaderWorkerTemplate": template},
    }


def render_service(*, name: str, labels: dict[str, str]) -> JsonObject:
    """A headless Service (no ports) selecting the pods that carry `labels`."""
    return {
        "apiVersion": api.SERVICE_API_VERSION,
        "kind": api.SERVICE_KIND,
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": {"clusterIP": "None", "selector": dict(labels)},
    }


def render_scaler(*, set_name: str, role: str, replicas: int) -> JsonObject:
    """A new DisaggregatedSetRoleScaler for an External role, seeded with `replicas`."""
    return {
        "apiVersion": api.API_VERSION,
        "kind": api.SCALER_KIND,
        "metadata": {
            "name": naming.scaler_name(set_name=set_name, role=role),
            "labels": naming.scaler_labels(set_name=set_name, role=role),
        },
        "spec": {"replicas": replicas},
    }


def render_history(
    *,
    set_name: str,
    revision: str,
    number: int,
    packed_roles: str,
    change_cause: str | None,
    completed: bool = False,
) -> JsonObject:
    """A new DisaggregatedSetRevision of `revision`, numbered `number` (also its
    `firstRevision`, and its `completedAs` when `completed`)."""
    metadata: JsonObject = {
        "name": naming.history_name(set_name=set_name, revision=revision),
        "labels": naming.history_labels(set_name=set_name, revision=revision),
    }
    if change_cause is not None:
        metadata["annotations"] = {
            api.CHANGE_CAUSE_ANNOTATION: compact.cut_change_cause(change_cause)
        }
    record: JsonObject = {
        "apiVersion": api.API_VERSION,
        "kind": api.REVISION_KIND,
        "metadata": metadata,
        "revision": number,
        "firstRevision": number,
        "packedRoles": packed_roles,
    }
    if completed:
        record["completedAs"] = number
    return record


def history_roles(roles: Sequence[api.Role]) -> list[JsonObject]:
    """Roles as a DisaggregatedSetRevision records them: name, metadata, scaling and the LWS spec
    as stored (so that a restore gives the same revision)."""
    recorded = []
    for role in roles:
        entry: JsonObject = {"name": role.name}
        for key, part in (("metadata", role.metadata), ("scaling", role.scaling)):
            if part is not None:
                entry[key] = part.model_dump(mode="json", by_alias=True, exclude_none=True)
        entry["spec"] = role.spec
        recorded.append(entry)
    return recorded


def update_history(
    child: records.ObservedObject,
    *,
    number: int,
    completed_as: int | None,
    change_cause: str | None = None,
) -> JsonObject:
    """An existing DisaggregatedSetRevision with its number, `completedAs` and change-cause (when
    given) set; its roles and firstRevision are immutable."""
    result = {**child.applied, "revision": number}
    if completed_as is not None:
        result["completedAs"] = completed_as
    if change_cause is not None:
        cause = compact.cut_change_cause(change_cause)
        result["metadata"] = _annotated(child.applied, {api.CHANGE_CAUSE_ANNOTATION: cause})
    return result


def reemit(child: records.ObservedObject) -> JsonObject:
    """An existing child exactly as this hook returned it before."""
    return child.applied


def reemit_lws(
    child: records.ObservedObject,
    *,
    replicas: int,
    annotations: Mapping[str, str | None] | None = None,
) -> JsonObject:
    """An existing LWS with only `spec.replicas` and the rollout's own annotations changed
    (`annotations`: a key given None is removed)."""
    applied = child.applied
    spec = applied.get("spec")
    spec = dict(spec) if isinstance(spec, dict) else {}
    spec["replicas"] = replicas
    result = {**applied, "spec": spec}
    if annotations:
        result["metadata"] = _annotated(applied, annotations)
    return result


def _annotated(applied: JsonObject, edits: Mapping[str, str | None]) -> JsonObject:
    """A copy of `applied`'s metadata with each key of `edits` set, or removed when None."""
    metadata = dict(applied["metadata"])
    current = metadata.get("annotations")
    edited = dict(current) if isinstance(current, dict) else {}
    for key, value in edits.items():
        if value is None:
            edited.pop(key, None)
        else:
            edited[key] = value
    if edited:
        metadata["annotations"] = edited
    else:
        metadata.pop("annotations", None)
    return metadata


def reemit_scaler(child: records.ObservedObject) -> JsonObject:
    """An existing scaler with the replicas it has now (whatever last scaled it)."""
    applied = child.applied
    spec = applied.get("spec")
    spec = dict(spec) if isinstance(spec, dict) else {}
    if child.spec_replicas is not None:
        spec["replicas"] = child.spec_replicas
    spec.setdefault("replicas", 0)
    return {**applied, "spec": spec}


def unchanged(child: records.ObservedObject) -> JsonObject:
    """An existing child exactly as it is now (the hold path)."""
    if child.kind is records.ChildKind.LWS:
        return reemit_lws(child, replicas=child.replicas)
    if child.kind is records.ChildKind.SCALER:
        return reemit_scaler(child)
    return reemit(child)


def _with_template_labels(template: object, labels: dict[str, str]) -> JsonObject:
    template = dict(template) if isinstance(template, dict) else {}
    metadata = template.get("metadata")
    metadata = dict(metadata) if isinstance(metadata, dict) else {}
    own = metadata.get("labels")
    metadata["labels"] = {**(own if isinstance(own, dict) else {}), **labels}
    if not metadata.get("annotations"):
        metadata.pop("annotations", None)
    template["metadata"] = metadata
    return template
