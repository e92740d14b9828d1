"""DisaggregatedSet customize and sync hooks: the top of the reconcile, orchestration only.

`sync` reads like the algorithm (docs/architecture.md walks one request through it):

1. validate the parent; an invalid spec holds the set (every observed child returned unchanged,
   the status kept, Degraded=True with the broken rules);
2. compute the target revision;
3. plan the scalers of External roles (`scalers`), which fixes every role's target;
4. reconcile each slice on its own (`reconcile_slice`: its rollout step from `rollout`, its
   LWS from `children`, its Services from `services`);
5. collect the answer (`desired.DesiredChildren`), whose guard refuses to drop an observed child
   the spec does not let go, and compute the status (`status`).

It returns a typed answer (`records.SyncAnswer`); `hooks.edge.envelope` writes it as JSON.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from hooks import api
from hooks.api import naming
from hooks.core import (
    canary,
    children,
    controls,
    desired,
    history,
    progress,
    records,
    rollout,
    scalers,
    services,
    status,
    validation,
)
from hooks.gocompat import gotext, revision

JsonObject = api.JsonObject
Objects = Sequence[records.ObservedObject]


def customize(request: records.CustomizeRequest) -> records.HookResult:
    """Related objects: whatever exists at the names of the target revision's LWS, of its
    ControllerRevision and of the scalers, so that an object the set does not own at a name it
    wants is seen (and reported, never overwritten).

    Names, not a label selector: Metacontroller matches every LWS event against every parent's
    rules, and a name costs it a string comparison where a selector is built anew each time.
    """
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
        summary={"hook": "customize", "object": _key(parent), "rules": len(rules)},
    )


def _target_of(parent: records.Parent) -> str | None:
    """The spec's revision; None for a spec the sync holds."""
    if parent.spec is None or validation.violations(parent):
        return None
    try:
        return _revision_of(parent.spec)
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


def _revision_of(spec: api.DisaggregatedSetSpec) -> str:
    """The spec's revision; `gotext.EncodingError` for a template Go could not decode."""
    return revision.compute_revision(
        [(role.name, role.leader_worker_template) for role in spec.roles]
    )


def sync(request: records.SyncRequest, *, now: str) -> records.HookResult:
    """The desired children and status of one DisaggregatedSet."""
    parent = request.parent
    violations = validation.violations(parent)
    if parent.spec is None or violations:
        return _hold(request, [_invalid(v) for v in violations], now=now)
    spec = parent.spec
    try:
        target = _revision_of(spec)
    except gotext.EncodingError as error:
        problem = status.Problem(api.Reason.INVALID_SPEC, f"spec.roles: {error}")
        return _hold(request, [problem], now=now)
    return _reconcile(request, spec, target, now=now)


# --- one slice ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SetContext:
    """What every slice of one pass shares."""

    set_name: str
    spec: api.DisaggregatedSetSpec
    revision: str
    roles: tuple[rollout.RoleInput, ...]
    foreign_lws: frozenset[str]
    """Names of LWS that exist but are not this set's (never created over)."""
    control: controls.Control
    """What the set's annotations ask (pause, partition, hold)."""
    rollback: bool = False
    """The target is a revision the set ran before another one: no hold (`canary`)."""
    stable: canary.Stable | None = None
    """The revision partitioned slices serve, for one that is new."""


@dataclass(frozen=True, slots=True)
class _SliceTarget:
    """The revision a slice plans for, its roles, and the role specs its new LWS render from."""

    revision: str
    roles: tuple[rollout.RoleInput, ...]
    specs: Mapping[str, api.Role]


@dataclass(frozen=True, slots=True)
class SliceResult:
    """One slice's part of the answer."""

    plan: rollout.SlicePlan
    children: tuple[JsonObject, ...]
    """The slice's LWS (kept and new) and Services."""
    deletions: tuple[desired.ChildKey, ...]
    """Observed children this slice lets go: drained LWS, Services that stopped serving."""
    kept_lws: tuple[records.ObservedObject, ...]
    """Observed LWS that stay (for the status)."""
    created: Mapping[str, str]
    """LWS name -> role, for the LWS this slice creates."""
    foreign: Mapping[str, str]
    """LWS name -> role, for LWS this slice wants but a foreign object holds."""
    revision: str
    """The revision the slice planned for (the spec's, or for a new slice past the partition
    the stable one)."""


def reconcile_slice(
    context: SetContext, index: int, *, lws: Objects, services_: Objects
) -> SliceResult:
    """One slice, one pass: its rollout step, its LWS and its Services."""
    control = canary.slice_control(context.control, index, rollback=context.rollback)
    target = _slice_target(context, partitioned=control.partitioned, lws=lws)
    plan = rollout.plan_slice(
        set_name=context.set_name,
        slice_index=index,
        revision=target.revision,
        roles=target.roles,
        lws=lws,
        control=control,
    )
    if target.revision != context.revision:
        plan = dataclasses.replace(plan, phase=rollout.Phase.PARTITIONED)
    dropped = set(plan.dropped)
    kept = tuple(item for item in lws if item.name not in dropped)
    existing = [
        children.reemit_lws(
            item,
            replicas=plan.replicas[item.name],
            initial_replicas=plan.initial_replicas.get(item.name),
        )
        for item in kept
    ]
    new, created, foreign = _new_lws(context, index, plan, target)
    slice_services, dropped_services = services.plan_slice(
        set_name=context.set_name,
        slice_index=index,
        revision=target.revision,
        role_names=[role.name for role in target.roles],
        lws=kept,
        services=services_,
        frozen=plan.phase in (rollout.Phase.PAUSED, rollout.Phase.PARTITIONED),
    )
    return SliceResult(
        plan=plan,
        children=(*existing, *new, *slice_services),
        deletions=(
            *((api.LWS_KIND, name) for name in sorted(dropped)),
            *((api.SERVICE_KIND, name) for name in dropped_services),
        ),
        kept_lws=kept,
        created=created,
        foreign=foreign,
        revision=target.revision,
    )


def _slice_target(context: SetContext, *, partitioned: bool, lws: Objects) -> _SliceTarget:
    """The spec's revision; for a new slice past the partition, the stable revision."""
    stable = context.stable
    if not partitioned or lws or stable is None:
        return _SliceTarget(
            revision=context.revision,
            roles=context.roles,
            specs={role.name: role for role in context.spec.roles},
        )
    targets = {role.name: role.target for role in context.roles}
    roles = []
    for role in stable.roles:
        wanted = targets.get(role.name)
        per_slice = role.replicas_or_default if wanted is None else wanted
        roles.append(
            rollout.RoleInput(
                name=role.name, target=per_slice, config=rollout.role_config(role, per_slice)
            )
        )
    return _SliceTarget(
        revision=stable.revision,
        roles=tuple(roles),
        specs={role.name: role for role in stable.roles},
    )


def _new_lws(
    context: SetContext, index: int, plan: rollout.SlicePlan, target: _SliceTarget
) -> tuple[list[JsonObject], dict[str, str], dict[str, str]]:
    """The LWS the plan creates, rendered; and by name, the roles created and those whose name a
    foreign object holds (never created over)."""
    rendered: list[JsonObject] = []
    created: dict[str, str] = {}
    foreign: dict[str, str] = {}
    for role_name, replicas in plan.created.items():
        name = naming.lws_name(
            set_name=context.set_name, slice_index=index, revision=target.revision, role=role_name
        )
        role = target.specs.get(role_name)
        if role is None:
            raise ValueError(f"planned a new LWS for unknown role {role_name!r}")
        if name in context.foreign_lws:
            foreign[name] = role_name
            continue
        created[name] = role_name
        rendered.append(
            children.render_lws(
                set_name=context.set_name,
                role=role,
                slice_index=index,
                revision=target.revision,
                replicas=replicas,
                policy=context.spec.placement_policy,
            )
        )
    return rendered, created, foreign


# --- the whole set ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _SetPlan:
    """The decisions every slice depends on, and the observed children sorted by slice."""

    context: SetContext
    control: controls.Control
    scalers: scalers.ScalerPlan
    targets: Mapping[str, int | None]
    capped: tuple[status.Problem, ...]
    """External roles asking for more groups than their names allow."""
    history: history.HistoryPlan
    lws: _BySlice
    services: _BySlice


def _reconcile(
    request: records.SyncRequest, spec: api.DisaggregatedSetSpec, target: str, *, now: str
) -> records.HookResult:
    parent = request.parent
    plan = _plan_set(request, spec, target)
    results = [
        reconcile_slice(
            plan.context,
            index,
            lws=plan.lws.by_slice[index],
            services_=plan.services.by_slice[index],
        )
        for index in range(spec.slices)
    ]
    answer = _collect(request.children, plan, results)
    ordered = answer.checked_children()
    set_status, verdict = _status(request, plan, results, answer, now=now)
    resync = progress.resync_after(plan.control, verdict, now=now)
    return records.HookResult(
        answer=records.SyncAnswer(status=set_status, children=ordered, resync_after_seconds=resync),
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
            "conflicts": len(answer.conflicts)
            + len(plan.scalers.conflicts)
            + sum(len(result.foreign) for result in results),
        },
    )


def _plan_set(
    request: records.SyncRequest, spec: api.DisaggregatedSetSpec, target: str
) -> _SetPlan:
    """Scalers first (they fix the External roles' targets), then what every slice shares."""
    parent = request.parent
    observed = _by_kind(request.children)
    foreign = _foreign_names(request.related, uid=parent.uid)
    scaler_plan = scalers.plan(
        set_name=parent.name,
        spec=spec,
        observed=observed[records.ChildKind.SCALER],
        lws=observed[records.ChildKind.LWS],
        foreign_names=foreign[records.ChildKind.SCALER],
    )
    targets, capped = _per_slice_targets(parent.name, spec, scaler_plan)
    control = controls.control_of(parent.annotations)
    lws_by_slice = _split_by_slice(observed[records.ChildKind.LWS], slices=spec.slices)
    history_plan = history.plan(
        set_name=parent.name,
        spec=spec,
        target=target,
        observed=observed[records.ChildKind.REVISION],
        lws=observed[records.ChildKind.LWS],
        foreign_names=foreign[records.ChildKind.REVISION],
        annotations=parent.annotations,
        limit=control.history_limit,
    )
    context = SetContext(
        set_name=parent.name,
        spec=spec,
        revision=target,
        roles=_role_inputs(spec, targets),
        foreign_lws=foreign[records.ChildKind.LWS],
        control=control,
        rollback=canary.is_rollback(target, observed[records.ChildKind.REVISION]),
        stable=_stable(control, lws_by_slice, target, observed[records.ChildKind.REVISION]),
    )
    return _SetPlan(
        context=context,
        control=control,
        scalers=scaler_plan,
        targets=targets,
        capped=capped,
        history=history_plan,
        lws=lws_by_slice,
        services=_split_by_slice(observed[records.ChildKind.SERVICE], slices=spec.slices),
    )


def _role_inputs(
    spec: api.DisaggregatedSetSpec, targets: Mapping[str, int | None]
) -> tuple[rollout.RoleInput, ...]:
    return tuple(
        rollout.RoleInput(
            name=role.name,
            target=targets[role.name],
            config=rollout.role_config(role, targets[role.name]),
        )
        for role in spec.roles
    )


def _stable(
    control: controls.Control, lws: _BySlice, target: str, history: Objects
) -> canary.Stable | None:
    """The revision partitioned slices serve (None without a partition)."""
    if control.partition is None:
        return None
    return canary.stable_revision(
        lws.by_slice, partition=control.partition, target=target, history=history
    )


def _collect(
    observed: Objects, plan: _SetPlan, results: Sequence[SliceResult]
) -> desired.DesiredChildren:
    """The answer: scalers, children of removed or unparsable slices, and every slice's part."""
    answer = desired.DesiredChildren(observed)
    for item in (*plan.lws.removed, *plan.services.removed):
        answer.allow_deletion(desired.key_of(item))
    for name in plan.scalers.dropped:
        answer.allow_deletion((api.SCALER_KIND, name))
    for child in plan.scalers.children:
        answer.add(child)
    for name in plan.history.pruned:
        answer.allow_deletion((api.REVISION_KIND, name))
    for child in plan.history.children:
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
    results: Sequence[SliceResult],
    answer: desired.DesiredChildren,
    *,
    now: str,
) -> tuple[api.DisaggregatedSetStatus, progress.Verdict]:
    foreign_lws = {name: role for result in results for name, role in result.foreign.items()}
    # A role whose new LWS cannot be created has no known target: it is never Available.
    blocked = set(foreign_lws.values()) | {
        role
        for result in results
        for name, role in result.created.items()
        if (api.LWS_KIND, name) in answer.conflicts
    }
    known = {name: None if name in blocked else value for name, value in plan.targets.items()}
    spec = plan.context.spec
    kept_lws = [*plan.lws.elsewhere, *(item for result in results for item in result.kept_lws)]
    verdict = _verdict(request, plan, results, now=now)
    return status.compute(
        roles=status.role_progress(spec.roles, known, slices=spec.slices),
        lws=kept_lws,
        revision=plan.context.revision,
        generation=request.parent.generation,
        problems=[
            *_problems(request, foreign_lws, plan.scalers, answer.conflicts),
            *plan.capped,
            *plan.history.problems,
            *plan.control.problems,
        ],
        observed=request.parent.conditions,
        now=now,
        progressing=verdict.progressing,
        rollout=verdict.rollout,
    ), verdict


def _verdict(
    request: records.SyncRequest, plan: _SetPlan, results: Sequence[SliceResult], *, now: str
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
    return progress.judge(
        control=plan.control,
        rolling=phases != {rollout.Phase.STEADY},
        stepped=bool(phases & {rollout.Phase.STARTING, rollout.Phase.STEPPING}),
        revision=revision,
        new_lws=new_lws,
        parent=request.parent,
        now=now,
        standing=canary.progressing(
            [result.plan for result in results],
            revision=revision,
            hold_at=plan.control.hold_at_percent,
            share=canary.share(new_lws, held=held, roles=plan.context.roles),
        ),
        slices=[
            _rollout_slice(result)
            for result in results
            if result.plan.phase is not rollout.Phase.STEADY
        ],
    )


def _rollout_slice(result: SliceResult) -> api.RolloutSlice:
    """Where a slice that is not steady stands, for status.rollout."""
    revisions = {item.labels.get(api.LABEL_REVISION, "") for item in result.kept_lws}
    if result.created:
        revisions.add(result.revision)
    return api.RolloutSlice(
        index=result.plan.slice_index,
        phase=_SLICE_PHASES.get(result.plan.phase, "Rolling"),
        revisions=sorted(revision for revision in revisions if revision),
    )


# How status.rollout names where a slice stands: whether it moves, not each pass's phase (a
# slice waiting between two steps is rolling), so that the status changes only when that does.
_SLICE_PHASES: Final = {
    rollout.Phase.STALLED: "Stalled",
    rollout.Phase.PAUSED: "Paused",
    rollout.Phase.HELD: "Held",
    rollout.Phase.PARTITIONED: "Partitioned",
}


def _problems(
    request: records.SyncRequest,
    foreign_lws: Mapping[str, str],
    scaler_plan: scalers.ScalerPlan,
    conflicts: Iterable[desired.ChildKey],
) -> list[status.Problem]:
    """Why the set is Degraded, most actionable first."""
    problems = [
        status.Problem(
            api.Reason.NAME_CONFLICT,
            f"LeaderWorkerSet {name!r} exists and is not controlled by this DisaggregatedSet; "
            "delete or rename it so the set can create its own",
        )
        for name in sorted(foreign_lws)
    ]
    problems.extend(
        status.Problem(
            api.Reason.SCALER_CONFLICT,
            f"DisaggregatedSetRoleScaler {name!r} for External role {role!r} exists and is not "
            "controlled by this DisaggregatedSet; delete it so the set can create its own",
        )
        for role, name in sorted(scaler_plan.conflicts.items())
    )
    problems.extend(
        status.Problem(
            api.Reason.CHILD_CONFLICT,
            f"{kind} {name!r} is claimed twice by this DisaggregatedSet's slices or revisions (a"
            f" {api.GROUP} label of a child was removed or edited): it is kept exactly as it"
            " is; restore the labels its name implies",
        )
        for kind, name in sorted(conflicts)
    )
    problems.extend(
        status.Problem(
            api.Reason.INVALID_CHILD_STATUS,
            f"{item.kind.kind} {item.name!r}: {item.status_error}, more than any"
            f" {api.LWS_KIND} can have; its status is ignored (counted as not ready) until it is"
            " sane again",
        )
        for item in request.children
        if item.status_error is not None
    )
    return problems


def _hold(
    request: records.SyncRequest, problems: Sequence[status.Problem], *, now: str
) -> records.HookResult:
    """Every observed child unchanged, the status kept, Degraded set from `problems`."""
    parent = request.parent
    answer = desired.DesiredChildren(request.children)
    for child in request.children:
        answer.add(children.unchanged(child))
    held = status.compute_held(
        status=parent.status,
        problems=problems,
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
            "reason": problems[0].reason if problems else api.Reason.INVALID_SPEC,
            "children": _count_kinds(kept),
            "deleted": 0,
        },
    )


def _invalid(violation: api.Violation) -> status.Problem:
    reason = (
        api.Reason.INVALID_METADATA
        if violation.field.startswith("metadata.")
        else api.Reason.INVALID_SPEC
    )
    return status.Problem(reason, f"{violation.field}: {violation.message}")


def _per_slice_targets(
    set_name: str, spec: api.DisaggregatedSetSpec, scaler_plan: scalers.ScalerPlan
) -> tuple[dict[str, int | None], tuple[status.Problem, ...]]:
    """Each spec role's replicas per slice: spec.replicas (default applied) for Static roles;
    for External ones the scaler's (None when unknown), capped at the most groups whose pods'
    names fit (admission checks a Static role's replicas; an autoscaler's are never admitted),
    with a problem for each role capped."""
    targets: dict[str, int | None] = {}
    capped = []
    for role in spec.roles:
        if not role.is_external:
            targets[role.name] = role.replicas_or_default
            continue
        wanted = scaler_plan.targets.get(role.name)
        longest = naming.lws_name(
            set_name=set_name,
            slice_index=spec.slices - 1,
            revision="0" * naming.REVISION_LENGTH,
            role=role.name,
        )
        most = naming.max_fitting_replicas(lws=longest)
        if wanted is not None and wanted > most:
            capped.append(
                status.Problem(
                    api.Reason.NAME_BUDGET_EXCEEDED,
                    f"External role {role.name!r} is scaled to {wanted} groups, but the pods of"
                    f" group {most} and beyond would carry a controller-revision-hash label"
                    f" longer than {naming.DNS1035_LABEL_MAX} characters and never start: it"
                    f" runs {most}; shorten the DisaggregatedSet name or the role name",
                )
            )
            wanted = most
        targets[role.name] = wanted
    return targets, tuple(capped)


def _by_kind(
    objects: Iterable[records.ObservedObject],
) -> dict[records.ChildKind, list[records.ObservedObject]]:
    grouped: dict[records.ChildKind, list[records.ObservedObject]] = {
        kind: [] for kind in records.ChildKind
    }
    for item in objects:
        grouped[item.kind].append(item)
    return grouped


def _foreign_names(
    related: Iterable[records.ObservedObject], *, uid: str
) -> dict[records.ChildKind, frozenset[str]]:
    names: dict[records.ChildKind, set[str]] = {kind: set() for kind in records.ChildKind}
    for item in related:
        if not item.is_controlled_by(uid):
            names[item.kind].add(item.name)
    return {kind: frozenset(found) for kind, found in names.items()}


@dataclass(frozen=True, slots=True)
class _BySlice:
    by_slice: Mapping[int, Objects]
    """Objects of kept slices, by index (every index present)."""
    elsewhere: Objects
    """Objects whose slice label is not a number: kept unchanged, never planned."""
    removed: Objects
    """Objects of slices >= spec.slices: deleted."""


def _split_by_slice(objects: Iterable[records.ObservedObject], *, slices: int) -> _BySlice:
    by_slice: dict[int, list[records.ObservedObject]] = {index: [] for index in range(slices)}
    elsewhere = []
    removed = []
    for item in objects:
        if item.slice_index is None:
            elsewhere.append(item)
        elif item.slice_index >= slices:
            removed.append(item)
        else:
            by_slice[item.slice_index].append(item)
    return _BySlice(by_slice=by_slice, elsewhere=tuple(elsewhere), removed=tuple(removed))


def _count_kinds(objects: Iterable[JsonObject]) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for child in objects:
        counts[child["kind"]] += 1
    return dict(sorted(counts.items()))


def _describe(plan: rollout.SlicePlan) -> str:
    if plan.step is None:
        return plan.phase.value
    step = plan.step
    return f"{plan.phase.value}:{step.rule.value} old={list(step.old)} new={list(step.new)}"


def _key(parent: records.Parent) -> str:
    return f"{parent.namespace}/{parent.name}"
