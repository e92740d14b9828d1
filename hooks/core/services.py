"""The headless `-prv` Services of one slice, and whether a set has Services at all.

Rules: docs/rollout.md, "One pass", step 4.4; without Services: docs/operations.md, "Without the
`-prv` Services". Which revision a slice plans its Services for is `hooks.core.slices`'s to say.
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet

from hooks import api
from hooks.api import naming
from hooks.core import children, records, stock

JsonObject = api.JsonObject


def is_child_type(declared: AbstractSet[records.ChildKind] | None) -> bool:
    """Whether the CompositeController declares Services (or none is named)."""
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
    """The slice's Services, and the names of the observed ones that go. `lws`: the slice's LWS
    after this pass; `frozen`: all stay as they are; `keep_others`: those of `revision` are
    made once it is ready, every other stays."""
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
