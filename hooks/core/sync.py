"""The DisaggregatedSet hooks: customize, and sync (the top of the reconcile, orchestration only).

Customize asks only for the scalers of External roles, by name (why: docs/operations.md,
"Metacontroller wiring"). Sync validates (an invalid spec holds the set), computes the target
revision, plans the set (scalers, history, controls), reconciles each slice, collects the guarded
answer, computes the status. docs/architecture.md, "One /sync call", walks one request through it.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from hooks import api
from hooks.api import naming
from hooks.core import (
    admission,
    canary,
    children,
    controls,
    creations,
    desired,
    dropped,
    history,
    problems,
    progress,
    records,
    rollout,
    scalers,
    services,
    slices,
    status,
    stock,
    validation,
)
from hooks.gocompat import gotext, revision


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
        summary={"hook": "customize", "object": _key(parent), "rules": 1 if scaler_names else 0},
    )


def sync(
    request: records.SyncRequest,
    *,
    now: str,
    revision_of: Callable[[api.DisaggregatedSetSpec], str] = revision.of_spec,
) -> records.HookResult:
    """The desired children and status of one DisaggregatedSet; `revision_of` computes the
    spec's revision."""
    parent = request.parent
    spec = parent.spec
    violations = parent.spec_violations
    if spec is not None:
        violations += validation.check(name=parent.name, spec=spec)
    if spec is None or violations:
        return _hold(request, [problems.of_violation(v) for v in violations], now=now)
    try:
        target = revision_of(spec)
    except gotext.EncodingError as error:
        problem = problems.Problem(api.Reason.INVALID_SPEC, f"spec.roles: {error}")
        return _hold(request, [problem], now=now)
    return _reconcile(request, spec, target, now=now)


@dataclass(frozen=True, slots=True)
class _SetPlan:
    """The decisions every slice depends on, and the observed children sorted by slice."""

    context: slices.SetContext
    scalers: scalers.ScalerPlan
    targets: Mapping[str, int | None]
    found: tuple[problems.Problem, ...]
    """LWS that lack fields the set asked for, External roles capped by their names."""
    history: history.History
    lws: slices.BySlice
    services: slices.BySlice


def _reconcile(
    request: records.SyncRequest, spec: api.DisaggregatedSetSpec, target: str, *, now: str
) -> records.HookResult:
    parent = request.parent
    plan = _plan_set(request, spec, target)
    results = [
        slices.reconcile_slice(
            plan.context,
            index,
            lws=plan.lws.by_slice[index],
            services_=plan.services.by_slice[index],
        )
        for index in range(spec.slices)
    ]
    records_plan = _history(request, plan, results)
    answer = _collect(request, plan, results, records_plan)
    ordered = answer.checked_children()
    awaited = creations.track(
        answer.requested(),
        parent.creating,
        asked_before=parent.status_generation == parent.generation,
        now=now,
    )
    refused = admission.refused(request.children, ordered)
    set_status, verdict = _status(
        request,
        plan,
        results,
        answer,
        awaited,
        (*refused, *awaited.problems),
        records_plan,
        now=now,
    )
    delays = (progress.resync_after(plan.context.control, verdict, now=now), awaited.resync_after)
    resync = min((delay for delay in delays if delay is not None), default=None)
    kept = status.unknown_fields(parent.status, known=api.json_names(api.DisaggregatedSetStatus))
    return records.HookResult(
        answer=records.SyncAnswer(
            status=set_status, children=ordered, resync_after_seconds=resync, status_kept=kept
        ),
        summary={
            "hook": "sync",
            "object": _key(parent),
            "generation": parent.generation,
            "revision": target,
            "outcome": "synced",
            "slices": {str(index): _describe(r.plan) for index, r in enumerate(results)},
            "children": _count_kinds(ordered),
            "related": len(request.related),
            "deleted": answer.deleted(),
            "resync_after": resync,
            "scalers_created": len(plan.scalers.created),
            "conflicts": len(answer.conflicts) + len(plan.scalers.conflicts),
            "missing": len(awaited.problems),
            "kept": len(kept) + len(request.unknown_children),
        },
    )


def _plan_set(
    request: records.SyncRequest, spec: api.DisaggregatedSetSpec, target: str
) -> _SetPlan:
    """Scalers first (they fix the External roles' targets), then what every slice shares."""
    parent = request.parent
    observed = {
        kind: [item for item in request.children if item.kind is kind] for kind in records.ChildKind
    }
    lacking = dropped.find(observed[records.ChildKind.LWS], revision=target)
    names = {item.name for item in lacking}
    observed[records.ChildKind.LWS] = [
        dropped.not_ready(item) if item.name in names else item
        for item in observed[records.ChildKind.LWS]
    ]
    scaler_plan = scalers.plan(
        set_name=parent.name,
        spec=spec,
        observed=observed[records.ChildKind.SCALER],
        lws=observed[records.ChildKind.LWS],
        foreign_names=frozenset(
            item.name for item in request.related if not item.is_controlled_by(parent.uid)
        ),
    )
    targets, capped = scalers.per_slice_targets(parent.name, spec, scaler_plan)
    control = controls.control_of(parent.annotations)
    lws_by_slice = slices.split_by_slice(observed[records.ChildKind.LWS], slices=spec.slices)
    recorded = history.read(
        observed[records.ChildKind.REVISION], set_name=parent.name, set_uid=parent.uid
    )
    stable = None
    if control.partition is not None:
        running = _revisions_of(observed[records.ChildKind.LWS])
        stable = recorded.stable(target, spec_roles=spec.roles, running=running)
    context = slices.SetContext(
        set_name=parent.name,
        spec=spec,
        revision=target,
        roles=tuple(
            stock.RoleInput(
                name=role.name,
                target=targets[role.name],
                config=rollout.role_config(role, targets[role.name]),
            )
            for role in spec.roles
        ),
        control=control,
        rollback=recorded.is_rollback(target),
        stable=stable,
        services=services.is_child_type(request.declared),
    )
    return _SetPlan(
        context=context,
        scalers=scaler_plan,
        targets=targets,
        found=(*dropped.reported(lacking), *capped),
        history=recorded,
        lws=lws_by_slice,
        services=slices.split_by_slice(observed[records.ChildKind.SERVICE], slices=spec.slices),
    )


def _revisions_of(lws: Iterable[records.ObservedObject]) -> frozenset[str]:
    return frozenset(item.labels.get(api.LABEL_REVISION, "") for item in lws)


def _history(
    request: records.SyncRequest, plan: _SetPlan, results: Sequence[slices.SliceResult]
) -> history.HistoryPlan:
    """The records after this pass (none when the set keeps no history)."""
    if not history.is_child_type(request.declared):
        return history.NO_HISTORY
    target = plan.context.revision
    complete = all(
        result.plan.phase is rollout.Phase.STEADY and result.revision == target
        for result in results
    )
    lws = [item for item in request.children if item.kind is records.ChildKind.LWS]
    return history.plan(
        plan.history,
        set_name=request.parent.name,
        spec=plan.context.spec,
        target=target,
        in_use=_revisions_of(lws),
        running=lws,
        annotations=request.parent.annotations,
        limit=plan.context.control.history_limit,
        complete=complete,
    )


def _collect(
    request: records.SyncRequest,
    plan: _SetPlan,
    results: Sequence[slices.SliceResult],
    records_plan: history.HistoryPlan,
) -> desired.DesiredChildren:
    """The answer: unknown kinds, scalers, records, other slices' children, every slice's part."""
    answer = desired.DesiredChildren(request.children)
    for child in request.unknown_children:
        answer.keep(child)
    for item in (*plan.lws.removed, *plan.services.removed):
        answer.allow_deletion(desired.key_of(item))
    for name in plan.scalers.dropped:
        answer.allow_deletion((api.SCALER_KIND, name))
    for child in plan.scalers.children:
        answer.add(child)
    for name in records_plan.pruned:
        answer.allow_deletion((api.REVISION_KIND, name))
    for child in records_plan.children:
        answer.add(child)
    for item in (*plan.lws.elsewhere, *plan.services.elsewhere):
        answer.add(children.unchanged(item))
    for result in results:
        for child in result.children:
            answer.add(child)
        for key in result.deletions:
            answer.allow_deletion(key)
    return answer


def _status(
    request: records.SyncRequest,
    plan: _SetPlan,
    results: Sequence[slices.SliceResult],
    answer: desired.DesiredChildren,
    awaited: creations.Creations,
    found: Sequence[problems.Problem],
    records_plan: history.HistoryPlan,
    *,
    now: str,
) -> tuple[api.DisaggregatedSetStatus, progress.Verdict]:
    """The set's status; `found`: what LeaderWorkerSet would refuse, then missing children."""
    # A role whose new LWS cannot be created (or never appears) is never Available.
    unmade = answer.conflicts | awaited.missing
    blocked = {
        role
        for result in results
        for name, role in result.created.items()
        if (api.LWS_KIND, name) in unmade
    }
    known = {name: None if name in blocked else value for name, value in plan.targets.items()}
    spec = plan.context.spec
    kept_lws = [*plan.lws.elsewhere, *(item for result in results for item in result.kept_lws)]
    verdict = _verdict(request, plan, results, now=now)
    rollback = canary.rollback_note(
        plan.context.control, rollback=plan.context.rollback, revision=plan.context.revision
    )
    scaled = progress.scaling_note([result.plan for result in results])
    return status.compute(
        desired=status.role_progress(spec.roles, known, slices=spec.slices),
        lws=kept_lws,
        revision=plan.context.revision,
        generation=request.parent.generation,
        problems=[
            *problems.of_children(
                request.children,
                set_name=request.parent.name,
                scaler_conflicts=plan.scalers.conflicts,
                orphans=problems.orphan_scalers(request.related, set_name=request.parent.name),
                conflicts=answer.conflicts,
            ),
            *found,
            *plan.found,
            *records_plan.problems,
            *plan.context.control.problems,
        ],
        observed=request.parent.conditions,
        now=now,
        progressing=_noted(verdict.progressing, scaled),
        rollout=verdict.rollout,
        creating=awaited.record,
        note="; ".join(part for part in (rollback, scaled) if part),
        warnings=validation.warnings(name=request.parent.name, spec=spec),
        history=records_plan.note,
    ), verdict


def _noted(update: status.ConditionUpdate | None, note: str) -> status.ConditionUpdate | None:
    """A Progressing override that also says what scaling does (`progress.scaling_note`)."""
    if update is None or not note:
        return update
    return dataclasses.replace(update, message=f"{update.message} ({note})")


def _verdict(
    request: records.SyncRequest, plan: _SetPlan, results: Sequence[slices.SliceResult], *, now: str
) -> progress.Verdict:
    """What the pass says about its rollout: the record, and how Progressing reads."""
    phases = {result.plan.phase for result in results}
    revision = plan.context.revision
    new_lws = [
        item
        for result in results
        for item in result.kept_lws
        if item.labels.get(api.LABEL_REVISION) == revision
    ]
    held = {r.plan.slice_index for r in results if r.plan.phase is rollout.Phase.HELD}
    empty = {
        r.plan.slice_index
        for r in results
        if r.plan.phase is rollout.Phase.PARTITIONED and not r.kept_lws and not r.created
    }
    created, coming_up = _coming_up(results, new_lws)
    return progress.judge(
        control=plan.context.control,
        rolling=phases != {rollout.Phase.STEADY},
        stepped=created or bool(phases & {rollout.Phase.STARTING, rollout.Phase.STEPPING}),
        coming_up=coming_up,
        revision=revision,
        new_lws=new_lws,
        parent=request.parent,
        now=now,
        standing=canary.progressing(
            [result.plan for result in results],
            revision=revision,
            control=plan.context.control,
            share=canary.share(new_lws, held=held, roles=plan.context.roles),
            empty=empty,
        ),
        slices=[
            slices.rollout_slice(result)
            for result in results
            if result.plan.phase is not rollout.Phase.STEADY
        ],
    )


def _coming_up(
    results: Sequence[slices.SliceResult], new_lws: Sequence[records.ObservedObject]
) -> tuple[bool, bool]:
    """Whether this pass creates an LWS, and whether the target revision is still coming up."""
    created = any(result.created for result in results)
    return created, created or any(item.status.ready_replicas < item.replicas for item in new_lws)


def _hold(
    request: records.SyncRequest, found: Sequence[problems.Problem], *, now: str
) -> records.HookResult:
    """Every observed child unchanged, the status kept, Degraded set from `found`."""
    parent = request.parent
    answer = desired.DesiredChildren(request.children)
    for child in request.children:
        answer.add(children.unchanged(child))
    for unknown in request.unknown_children:
        answer.keep(unknown)
    held = status.compute_held(
        status=parent.status,
        problems=found,
        observed=parent.conditions,
        generation=parent.generation,
        now=now,
    )
    kept = answer.checked_children()
    return records.HookResult(
        answer=records.SyncAnswer(status=held, children=kept),
        summary={
            "hook": "sync",
            "object": _key(parent),
            "generation": parent.generation,
            "outcome": "held",
            "reason": found[0].reason if found else api.Reason.INVALID_SPEC,
            "children": _count_kinds(kept),
            "deleted": 0,
        },
    )


def _count_kinds(objects: Iterable[api.JsonObject]) -> dict[str, int]:
    return dict(sorted(Counter(child["kind"] for child in objects).items()))


def _describe(plan: rollout.SlicePlan) -> str:
    if plan.moves:
        return f"{plan.phase.value}:scaled " + "+".join(sorted(move.value for move in plan.moves))
    if plan.step is None:
        return plan.phase.value
    step = plan.step
    return f"{plan.phase.value}:{step.rule.value} old={list(step.old)} new={list(step.new)}"


def _key(parent: records.Parent) -> str:
    return f"{parent.namespace}/{parent.name}"
