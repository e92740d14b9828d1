"""The DisaggregatedSet customize hook: only the scalers of External roles, by name (why:
docs/operations.md, "Metacontroller wiring").
"""

from __future__ import annotations

from hooks import api
from hooks.api import naming
from hooks.core import records


def customize(request: records.CustomizeRequest) -> records.HookResult:
    """The related objects one DisaggregatedSet's sync needs."""
    parent = request.parent
    scaler_names = tuple(
        naming.scaler_name(set_name=parent.name, role=role.name)
        for role in (parent.spec.roles if parent.spec is not None else ())
        if role.is_external
    )
    rules = (
        records.RelatedRule(
            api_version=api.API_VERSION,
            resource=api.SCALER_PLURAL,
            namespace=parent.namespace,
            names=scaler_names,
        ),
    )
    return records.HookResult(
        answer=records.CustomizeAnswer(related=rules if scaler_names else ()),
        summary={
            "hook": "customize",
            "object": f"{parent.namespace}/{parent.name}",
            "rules": 1 if scaler_names else 0,
        },
    )
