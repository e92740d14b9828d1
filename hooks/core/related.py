"""The DisaggregatedSet customize hook: the related objects a sync needs to see.

Whatever exists at the names of the target revision's LWS, of its ControllerRevision and of the
scalers of External roles, so that an object the set does not control at a name it wants is seen,
reported and never overwritten. Names, not a label selector: Metacontroller matches every event
of a related type against every parent's rules, and a name costs it a string comparison where a
selector is parsed anew each time. A spec the sync would hold asks for nothing.
"""

from __future__ import annotations

from hooks import api
from hooks.api import naming
from hooks.core import records, validation
from hooks.gocompat import gotext, revision


def customize(request: records.CustomizeRequest) -> records.HookResult:
    """The related objects one DisaggregatedSet's sync needs (see the module docstring)."""
    parent = request.parent
    rules = []
    wanted = _target_lws_names(parent)
    if wanted:
        rules.append(
            records.RelatedRule(
                api_version=api.LWS_API_VERSION,
                resource="leaderworkersets",
                namespace=parent.namespace,
                names=wanted,
            )
        )
    target = _target_of(parent)
    if target is not None:
        rules.append(
            records.RelatedRule(
                api_version=api.REVISION_API_VERSION,
                resource=api.REVISION_PLURAL,
                namespace=parent.namespace,
                names=(naming.history_name(set_name=parent.name, revision=target),),
            )
        )
    scaler_names = tuple(
        naming.scaler_name(set_name=parent.name, role=role.name)
        for role in (parent.spec.roles if parent.spec is not None else ())
        if role.is_external
    )
    if scaler_names:
        rules.append(
            records.RelatedRule(
                api_version=api.API_VERSION,
                resource=api.SCALER_PLURAL,
                namespace=parent.namespace,
                names=scaler_names,
            )
        )
    return records.HookResult(
        answer=records.CustomizeAnswer(related=tuple(rules)),
        summary={
            "hook": "customize",
            "object": f"{parent.namespace}/{parent.name}",
            "rules": len(rules),
        },
    )


def _target_of(parent: records.Parent) -> str | None:
    """The spec's revision; None for a spec the sync holds."""
    if parent.spec is None or validation.violations(parent):
        return None
    try:
        return revision.of_spec(parent.spec)
    except gotext.EncodingError:
        return None


def _target_lws_names(parent: records.Parent) -> tuple[str, ...]:
    """The LWS names of the spec's revision in every slice; none for a spec the sync holds."""
    spec = parent.spec
    target = _target_of(parent)
    if spec is None or target is None:
        return ()
    return tuple(
        naming.lws_name(set_name=parent.name, slice_index=index, revision=target, role=role.name)
        for index in range(spec.slices)
        for role in spec.roles
    )
