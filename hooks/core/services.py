"""Headless Services of one slice (docs/rollout.md).

A revision is ready in a slice when every spec role has an LWS of that revision whose status
reports at least one ready replica. When the target revision is ready, its Services are kept or
created (named after the LWS, `<lws>-prv`, selecting name, role, revision and slice) and the
Services of revisions that are neither the target nor ready go; until then every existing Service
of the slice stays, so clients keep reaching the revision that still serves. A Service is never
updated once created. `lws` must be the slice's LWS that remain after this pass; which revision a
slice plans its Services for is `hooks.core.slices`'s to say.

A set has Services only while they are one of its child types (`is_child_type`): an install
may leave them out of the CompositeController (components/no-services, docs/operations.md).
Metacontroller then observes no Service, and would create one in an answer but never update or
delete it, so the set answers with none and nothing else of its answer changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet

from hooks import api
from hooks.api import naming
from hooks.core import children, records, stock

JsonObject = api.JsonObject


def is_child_type(declared: AbstractSet[records.ChildKind] | None) -> bool:
    """Whether Services are a child type of the set: the CompositeController declares them, or
    the request names no controller (a request built by hand keeps the default install's)."""
    return declared is None or records.ChildKind.SERVICE in declared


def plan_slice(
    *,
    set_name: str,
    slice_index: int,
    revision: str,
    role_names: Sequence[str],
    lws: Sequence[records.ObservedObject],
    services: Sequence[records.ObservedObject],
    frozen: bool = False,
    keep_others: bool = False,
) -> tuple[list[JsonObject], list[str]]:
    """The slice's Services, and the names of the observed ones that go: none when `frozen` (the
    Services stay as they are) or `keep_others` (those of `revision` are created when it is
    ready, and every other one stays)."""
    groups = stock.group(lws, set_name=set_name, slice_index=slice_index).groups

    def ready(candidate: str) -> bool:
        group = groups.get(candidate, {})
        return all(name in group and group[name].status.ready_replicas >= 1 for name in role_names)

    if frozen or not ready(revision):
        return [children.reemit(service) for service in services], []
    serving = {candidate for candidate in groups if ready(candidate)} | {revision}
    existing = {service.name: service for service in services}
    result = []
    wanted = set()
    for name in role_names:
        service_name = naming.service_name(groups[revision][name].name)
        wanted.add(service_name)
        if service_name in existing:
            result.append(children.reemit(existing[service_name]))
        else:
            result.append(
                children.render_service(
                    name=service_name,
                    labels=naming.service_labels(
                        set_name=set_name, slice_index=slice_index, revision=revision, role=name
                    ),
                )
            )
    dropped = []
    for service in services:
        if service.name in wanted:
            continue
        if keep_others or service.labels.get(api.LABEL_REVISION, "") in serving:
            result.append(children.reemit(service))
        else:
            dropped.append(service.name)
    return result, dropped
