"""Keyword-default factories for test objects: sets, roles, observed children and requests.

Everything returns plain JSON-shaped dicts (what Metacontroller would send), so tests exercise the
real parsing in `envelope`. Defaults follow what a kube-apiserver stores with the CRDs installed
(restartPolicy, startupPolicy and port protocols filled in).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import orjson

from hooks import api
from hooks.core import children, compact

JsonObject = dict[str, Any]

DS_UID = "11111111-2222-3333-4444-555555555555"
NAMESPACE = "default"
CREATED = "2026-11-29T10:00:00Z"
NOW = "2026-11-29T12:00:00Z"


def make_template(
    *,
    image: str = "vllm/vllm-openai:v0.11.0",
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> JsonObject:
    """A pod template with one container."""
    metadata: JsonObject = {}
    if labels:
        metadata["labels"] = dict(labels)
    if annotations:
        metadata["annotations"] = dict(annotations)
    template: JsonObject = {
        "spec": {
            "containers": [
                {
                    "name": "server",
                    "image": image,
                    "ports": [{"containerPort": 8000, "protocol": "TCP"}],
                }
            ]
        }
    }
    if metadata:
        template["metadata"] = metadata
    return template


def make_role(
    name: str,
    *,
    replicas: int | None = 1,
    image: str = "vllm/vllm-openai:v0.11.0",
    size: int = 1,
    external: bool = False,
    max_surge: int | str | None = None,
    max_unavailable: int | str | None = None,
    leader: bool = False,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    template_annotations: Mapping[str, str] | None = None,
) -> JsonObject:
    """A role of a DisaggregatedSet as the API server stores it."""
    template: JsonObject = {
        "restartPolicy": "RecreateGroupOnPodRestart",
        "size": size,
        "workerTemplate": make_template(
            image=image, labels={"role": name}, annotations=template_annotations
        ),
    }
    if leader:
        template["leaderTemplate"] = make_template(
            image=image, labels={"role": name}, annotations=template_annotations
        )
    spec: JsonObject = {"leaderWorkerTemplate": template, "startupPolicy": "LeaderCreated"}
    if replicas is not None:
        spec["replicas"] = replicas
    if max_surge is not None or max_unavailable is not None:
        spec["rolloutStrategy"] = {
            "type": "RollingUpdate",
            "rollingUpdateConfiguration": {
                "maxSurge": 0 if max_surge is None else max_surge,
                "maxUnavailable": 0 if max_unavailable is None else max_unavailable,
                "partition": 0,
            },
        }
    role: JsonObject = {"name": name, "spec": spec}
    if labels or annotations:
        role["metadata"] = {}
        if labels:
            role["metadata"]["labels"] = dict(labels)
        if annotations:
            role["metadata"]["annotations"] = dict(annotations)
    if external:
        role["scaling"] = {"mode": "External"}
    return role


def make_ds(
    *,
    name: str = "llm",
    roles: Sequence[JsonObject] | None = None,
    slices: int = 1,
    placement: JsonObject | None = None,
    generation: int = 1,
    uid: str = DS_UID,
    status: JsonObject | None = None,
) -> JsonObject:
    """A stored DisaggregatedSet (prefill 2 + decode 1 by default)."""
    spec: JsonObject = {
        "roles": list(roles)
        if roles is not None
        else [
            make_role("prefill", replicas=2),
            make_role("decode", replicas=1),
        ],
        "slices": slices,
    }
    if placement is not None:
        spec["placementPolicy"] = placement
    ds: JsonObject = {
        "apiVersion": api.API_VERSION,
        "kind": api.DS_KIND,
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": uid,
            "generation": generation,
            "creationTimestamp": CREATED,
        },
        "spec": spec,
    }
    if status is not None:
        ds["status"] = status
    return ds


def observe(
    desired: JsonObject,
    *,
    owner_uid: str = DS_UID,
    owner_name: str = "llm",
    created: str = CREATED,
    status: JsonObject | None = None,
    spec_overrides: Mapping[str, Any] | None = None,
) -> JsonObject:
    """What Metacontroller observes after applying a child the hook returned.

    Adds the namespace, the controller-uid label, the controller ownerReference, the
    last-applied annotation (compact JSON with sorted keys, as Metacontroller writes it), a uid
    and a creationTimestamp; `spec_overrides` simulate later changes by someone else (an HPA, a
    user) that are not in the annotation.
    """
    applied = copy.deepcopy(desired)
    applied["metadata"]["namespace"] = NAMESPACE
    applied["metadata"].setdefault("labels", {})[api.CONTROLLER_UID_LABEL] = owner_uid
    observed = copy.deepcopy(applied)
    observed["metadata"].setdefault("annotations", {})[api.LAST_APPLIED_ANNOTATION] = orjson.dumps(
        applied, option=orjson.OPT_SORT_KEYS
    ).decode()
    observed["metadata"]["uid"] = f"uid-{desired['metadata']['name']}"
    observed["metadata"]["creationTimestamp"] = created
    observed["metadata"]["ownerReferences"] = [
        {
            "apiVersion": api.API_VERSION,
            "kind": api.DS_KIND,
            "name": owner_name,
            "uid": owner_uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    if spec_overrides:
        observed["spec"] = {**observed.get("spec", {}), **spec_overrides}
    if status is not None:
        observed["status"] = status
    return observed


def make_record(
    *,
    revision: str,
    number: int,
    roles: Sequence[api.Role],
    set_name: str = "llm",
    change_cause: str | None = None,
    legacy: bool = False,
) -> JsonObject:
    """A DisaggregatedSetRevision as the hooks render it (roles packed); with `legacy`, with its
    roles as a list, as earlier versions wrote them."""
    recorded = children.history_roles(roles)
    rendered = children.render_history(
        set_name=set_name,
        revision=revision,
        number=number,
        packed_roles=compact.pack_roles(recorded),
        change_cause=change_cause,
    )
    if legacy:
        del rendered["packedRoles"]
        rendered["roles"] = recorded
    return rendered


def record_roles(record: JsonObject) -> list[JsonObject]:
    """The roles a DisaggregatedSetRevision stores, its `packedRoles` unpacked (or its `roles`)."""
    if "roles" in record:
        listed: list[JsonObject] = record["roles"]
        return listed
    unpacked: list[JsonObject] = orjson.loads(compact.unpack_roles(record["packedRoles"]))
    return unpacked


def packed(record: JsonObject) -> JsonObject:
    """A record with `roles` (as earlier versions wrote it, perhaps edited since) holding them
    as this version does, in `packedRoles`."""
    repacked = {key: value for key, value in record.items() if key != "roles"}
    repacked["packedRoles"] = compact.pack_roles(record["roles"])
    return repacked


def lws_status(
    replicas: int, *, ready: int | None = None, updated: int | None = None
) -> JsonObject:
    """An LWS status block (ready and updated default to `replicas`)."""
    return {
        "replicas": replicas,
        "readyReplicas": replicas if ready is None else ready,
        "updatedReplicas": replicas if updated is None else updated,
    }


def child_key(obj: JsonObject) -> str:
    """The outer key of `children` for an object (`<Kind>.<apiVersion>`)."""
    return f"{obj['kind']}.{obj['apiVersion']}"


# The child types of the kit's DisaggregatedSet CompositeController
# (metacontroller/compositecontrollers.yaml), as `<Kind>.<apiVersion>` and as its childResources.
KIT_CHILD_TYPES: Final = (
    (f"{api.SCALER_KIND}.{api.API_VERSION}", api.SCALER_PLURAL),
    (f"{api.LWS_KIND}.{api.LWS_API_VERSION}", api.LWS_PLURAL),
    (f"{api.SERVICE_KIND}.{api.SERVICE_API_VERSION}", api.SERVICE_PLURAL),
    (f"{api.REVISION_KIND}.{api.API_VERSION}", api.REVISION_PLURAL),
)


def make_controller(*, without: Sequence[str] = ()) -> JsonObject:
    """The `controller` of a sync request: the kit's CompositeController as Metacontroller sends
    it, less the child resources (plurals) in `without`."""
    return {
        "kind": "CompositeController",
        "apiVersion": "metacontroller.k8s.io/v1alpha1",
        "metadata": {"name": "disaggregatedset-controller"},
        "spec": {
            "parentResource": {"apiVersion": api.API_VERSION, "resource": api.DS_PLURAL},
            "childResources": [
                {
                    "apiVersion": key.split(".", 1)[1],
                    "resource": resource,
                    "updateStrategy": {"method": "InPlace", "statusChecks": {}},
                }
                for key, resource in KIT_CHILD_TYPES
                if resource not in without
            ],
            "generateSelector": True,
        },
        "status": {},
    }


def make_request(
    parent: JsonObject,
    *,
    children: Iterable[JsonObject] = (),
    related: Iterable[JsonObject] = (),
    version: str = "v1",
    without: Sequence[str] = (),
) -> JsonObject:
    """A DisaggregatedSet sync request in hook format v1 (keys by name) or v2 (namespace/name),
    from the kit's CompositeController less the child resources in `without` (plurals)."""

    def group(objects: Iterable[JsonObject], kinds: Sequence[str]) -> JsonObject:
        grouped: JsonObject = {kind: {} for kind in kinds}
        for obj in objects:
            name = obj["metadata"]["name"]
            key = name if version == "v1" else f"{NAMESPACE}/{name}"
            grouped.setdefault(child_key(obj), {})[key] = obj
        return grouped

    declared = [key for key, resource in KIT_CHILD_TYPES if resource not in without]
    return {
        "controller": make_controller(without=without),
        "parent": parent,
        "children": group(children, declared),
        "related": group(related, [f"{api.SCALER_KIND}.{api.API_VERSION}"]),
        "finalizing": False,
    }


def children_by_name(response: JsonObject) -> dict[str, JsonObject]:
    """The children of a sync response keyed by name."""
    return {child["metadata"]["name"]: child for child in response["children"]}


def make_lws(
    role: str,
    *,
    revision: str,
    replicas: int | None = 1,
    ready: int | None = None,
    set_name: str = "llm",
    slice_index: int = 0,
    initial: int | str | None = None,
    created: str = CREATED,
    labels: Mapping[str, str] | None = None,
    record: int | str | None = None,
) -> JsonObject:
    """An observed LWS child of the set (ready defaults to its replicas; `record`, the rollout's
    record of its role's target)."""
    name = f"{set_name}-{slice_index}-{revision}-{role}"
    own_labels = {
        "app": f"{set_name}-{slice_index}-{role}",
        api.LABEL_NAME: set_name,
        api.LABEL_ROLE: role,
        api.LABEL_SLICE: str(slice_index),
        api.LABEL_REVISION: revision,
    }
    if labels is not None:
        own_labels = dict(labels)
    spec: JsonObject = {"leaderWorkerTemplate": {"size": 1, "workerTemplate": make_template()}}
    if replicas is not None:
        spec["replicas"] = replicas
    desired: JsonObject = {
        "apiVersion": api.LWS_API_VERSION,
        "kind": api.LWS_KIND,
        "metadata": {"name": name, "labels": own_labels},
        "spec": spec,
    }
    annotations = {}
    if initial is not None:
        annotations[api.ANNOTATION_INITIAL_REPLICAS] = str(initial)
    if record is not None:
        annotations[api.ANNOTATION_ROLLOUT_TARGET] = str(record)
    if annotations:
        desired["metadata"]["annotations"] = annotations
    count = 1 if replicas is None else replicas
    return observe(
        desired,
        owner_name=set_name,
        created=created,
        status=lws_status(count, ready=count if ready is None else ready),
    )


def parse_children(*objects: JsonObject) -> list[Any]:
    """Observed objects parsed by the real envelope (`records.ObservedObject`)."""
    from hooks.wire import envelope

    return list(envelope.parse_sync_request(make_request(make_ds(), children=objects)).children)
