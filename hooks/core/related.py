"""The DisaggregatedSet customize hook: the related objects a sync needs to see.

Only the scalers of External roles, by name: a scaler name held by an object the set does not
control must be known before the first pass, which would otherwise seed the role's replicas
from a scaler that never exists (docs/rollout.md, "External roles"). Names, not a label
selector: Metacontroller matches every event of a related kind against every parent's rules, and
a name costs it a string comparison where a selector is parsed anew each time.

LeaderWorkerSets, Services and DisaggregatedSetRevisions are not asked for, though a name of theirs
can be held too: their events are most of a rollout's, and a related rule makes each of them cost
Metacontroller a pass over every parent in the cluster. A child that cannot be created at its
name is found after the fact instead (`hooks.core.creations`); a sync reads related objects of
no other kind (`hooks.wire.envelope`).
"""

from __future__ import annotations

from hooks import api
from hooks.api import naming
from hooks.core import records


def customize(request: records.CustomizeRequest) -> records.HookResult:
    """The related objects one DisaggregatedSet's sync needs (see the module docstring)."""
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
