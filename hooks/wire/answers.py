"""The answers of the hooks as Metacontroller reads them: the one place an answer becomes JSON,
and what Metacontroller writes for a sync's answer (for the log line)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pydantic

from hooks import api
from hooks.core import records
from hooks.wire import values

JsonObject = values.JsonObject


def render_answer(answer: records.SyncAnswer | records.CustomizeAnswer) -> JsonObject:
    """The JSON a hook answers Metacontroller with."""
    if isinstance(answer, records.CustomizeAnswer):
        return render_customize_response(answer.related)
    response: JsonObject = {
        # The computed status, beside the observed fields the answer keeps.
        "status": {**answer.status_kept, **render_status(answer.status)},
        "children": list(answer.children),
    }
    if answer.resync_after_seconds is not None:
        response["resyncAfterSeconds"] = answer.resync_after_seconds
    return response


def render_status(status: records.Status) -> JsonObject:
    """JSON of a status: camelCase keys, unset optional fields left out. A held status is the
    observed one with its Degraded condition (and the `degraded` reason beside it) replaced, or
    appended when there was none: a hold rewrites nothing else."""
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


def writes(request: records.SyncRequest, response: JsonObject) -> Mapping[str, int]:
    """What Metacontroller writes for a sync's `response` (its answer as `render_answer` wrote
    it): children to create, to update, to delete, and 1 under "status" when the status changes.
    All zero: the answer is the observed state.

    A child counts as updated when it differs from its last-applied annotation (Metacontroller
    updates a child when the answer, merged over the live object, changes it). Metacontroller sets
    observedGeneration in the status before it compares, so this does too.
    """
    applied = {(item.kind.kind, item.name): item.applied for item in request.children}
    applied.update((values.key_of(item), item) for item in request.unknown_children)
    create = update = 0
    for child in response["children"]:
        previous = applied.pop(values.key_of(child), None)
        if previous is None:
            create += 1
        elif previous != child:
            update += 1
    status = {**response["status"], "observedGeneration": request.parent.generation}
    return {
        "create": create,
        "update": update,
        "delete": len(applied),
        "status": int(status != request.parent.status),
    }


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
