"""DisaggregatedSet customize and sync hooks: orchestration only.

`sync` validates the parent, computes the target revision, plans the scalers, plans every slice
(`rollout`), renders the children (`children`), decides the Services and computes the status. It
returns the complete list of desired children, because Metacontroller deletes every observed
child that the answer leaves out. Before answering it checks that every observed child missing
from the answer is one the spec allows to go (SPEC §8): a drained revision, a removed slice, a
Service of a revision that stopped serving, or the scaler of a role that is no longer External.
Anything else is a bug and raises `UnsafeDeletionError`, which the server turns into a non-200
answer (nothing changes).

An invalid spec is not an error: the hold path returns every observed child unchanged, keeps the
status and sets Degraded=True with reason InvalidSpec and the broken rules.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence

from hooks import api
from hooks.core import (
    children,
    naming,
    planner,
    records,
    rollout,
    scalers,
    services,
    status,
    validation,
)
from hooks.gocompat import gotext, revision

RESYNC_SECONDS = 5.0

JsonObject = api.JsonObject
ChildKey = tuple[str, str]


class UnsafeDeletionError(Exception):
    """A pass would delete an observed child that the spec does not allow to go."""


class DesiredChildren:
    """The children of one answer, by (kind, name), and the observed ones allowed to go.

    Two different objects under one name mean the observed children contradict each other (a
    child whose slice, revision or role label was removed or edited is claimed by two slices, or
    by a slice and a revision). That is a state of the cluster, not a bug of the request: the
    name is held (an observed child under it is returned exactly as it is, a new one is not
    created) and reported, and everything else reconciles.
    """

    def __init__(self, observed: Iterable[records.ObservedObject]) -> None:
        self._observed = {_child_key(item): item for item in observed}
        self._children: dict[ChildKey, JsonObject] = {}
        self._allowed: set[ChildKey] = set()
        self.conflicts: set[ChildKey] = set()

    def add(self, child: JsonObject) -> None:
        key = (child["kind"], child["metadata"]["name"])
        if key in self.conflicts:
            return
        existing = self._children.get(key)
        if existing is None or existing == child:
            self._children[key] = child
            return
        self.conflicts.add(key)
        observed = self._observed.get(key)
        if observed is not None:
            self._children[key] = _unchanged(observed)

    def __contains__(self, key: ChildKey) -> bool:
        return key in self._children

    def allow_deletion(self, key: ChildKey) -> None:
        self._allowed.add(key)

    def check(self) -> None:
        """Raise `UnsafeDeletionError` if an observed child would go without a reason."""
        missing = set(self._observed) - set(self._children)
        unexpected = sorted(missing - self._allowed)
        if unexpected:
            listed = ", ".join(f"{kind} {name}" for kind, name in unexpected)
            raise UnsafeDeletionError(f"this pass would delete children it must keep: {listed}")

    def values(self) -> list[JsonObject]:
        return list(self._children.values())

    def deleted(self) -> int:
        return len(set(self._observed) - set(self._children))


def customize(request: records.CustomizeRequest) -> records.HookResult:
    """Related objects: LWS carrying the set's name label, and objects at its scaler names."""
    parent = request.parent
    rules = [
        records.RelatedRule(
            api_version=api.LWS_API_VERSION,
            resource="leaderworkersets",
            namespace=parent.namespace,
            label_selector={api.LABEL_NAME: parent.name},
        )
    ]
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


def sync(request: records.SyncRequest, *, now: str) -> records.HookResult:
    """The desired children and status of one DisaggregatedSet."""
    parent = request.parent
    spec = parent.spec
    violations = parent.spec_violations
    if spec is not None:
        violations += validation.check(name=parent.name, spec=spec)
    if spec is None or violations:
        return _hold(request, [_invalid(v) for v in violations], now=now)
    try:
        target = revision.compute_revision(
            [(role.name, role.leader_worker_template) for role in spec.roles]
        )
    except gotext.EncodingError as error:
        return _hold(
            request,
            [status.Problem(status.REASON_INVALID_SPEC, f"spec.roles: {error}")],
            now=now,
        )
    return _reconcile(request, spec, target, now=now)


def _reconcile(
    request: records.SyncRequest, spec: api.DisaggregatedSetSpec, target: str, *, now: str
) -> records.HookResult:
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
    targets = _role_targets(spec, scaler_plan)
    roles = [
        rollout.RoleInput(
            name=role.name,
            target=targets[role.name],
            config=role_config(role, targets[role.name]),
        )
        for role in spec.roles
    ]

    lws_by_slice, lws_elsewhere, lws_removed = _split_by_slice(
        observed[records.ChildKind.LWS], slices=spec.slices
    )
    svc_by_slice, svc_elsewhere, svc_removed = _split_by_slice(
        observed[records.ChildKind.SERVICE], slices=spec.slices
    )

    desired = DesiredChildren(request.children)
    for item in [*lws_removed, *svc_removed]:
        desired.allow_deletion(_child_key(item))
    for name in scaler_plan.dropped:
        desired.allow_deletion((api.SCALER_KIND, name))
    for child in scaler_plan.children:
        desired.add(child)
    blocked_roles_by_child: dict[str, str] = {}
    kept_lws = list(lws_elsewhere)
    for item in lws_elsewhere:
        desired.add(
            children.reemit_lws(item, replicas=rollout.replicas_of(item), initial_replicas=None)
        )
    for item in svc_elsewhere:
        desired.add(children.reemit(item))

    conflicts: list[tuple[str, str]] = []
    slice_summaries: dict[str, str] = {}
    resync = False
    for index in range(spec.slices):
        plan = rollout.plan_slice(
            set_name=parent.name,
            slice_index=index,
            revision=target,
            roles=roles,
            lws=lws_by_slice[index],
        )
        slice_summaries[str(index)] = _describe(plan)
        resync = resync or plan.phase is not rollout.Phase.STEADY
        dropped = set(plan.dropped)
        for name in dropped:
            desired.allow_deletion((api.LWS_KIND, name))
        slice_lws = [item for item in lws_by_slice[index] if item.name not in dropped]
        for item in slice_lws:
            desired.add(
                children.reemit_lws(
                    item,
                    replicas=plan.replicas[item.name],
                    initial_replicas=plan.initial_replicas.get(item.name),
                )
            )
        for role_name, replicas in plan.created.items():
            name = naming.lws_name(
                set_name=parent.name, slice_index=index, revision=target, role=role_name
            )
            if name in foreign[records.ChildKind.LWS]:
                conflicts.append((role_name, name))
                continue
            role = spec.role(role_name)
            if role is None:
                raise ValueError(f"planned a new LWS for unknown role {role_name!r}")
            rendered = children.render_lws(
                set_name=parent.name,
                role=role,
                slice_index=index,
                revision=target,
                replicas=replicas,
                policy=spec.placement_policy,
            )
            desired.add(rendered)
            if (api.LWS_KIND, name) in desired.conflicts:
                blocked_roles_by_child[name] = role_name
        kept_lws.extend(slice_lws)
        slice_services, dropped_services = services.plan_slice(
            set_name=parent.name,
            slice_index=index,
            revision=target,
            role_names=[role.name for role in spec.roles],
            lws=slice_lws,
            services=svc_by_slice[index],
        )
        for service in slice_services:
            desired.add(service)
        for name in dropped_services:
            desired.allow_deletion((api.SERVICE_KIND, name))

    desired.check()

    problems = [
        status.Problem(
            status.REASON_NAME_CONFLICT,
            f"LeaderWorkerSet {name!r} exists and is not controlled by this DisaggregatedSet; "
            "delete or rename it so the set can create its own",
        )
        for name in sorted({name for _, name in conflicts})
    ]
    problems.extend(
        status.Problem(
            status.REASON_SCALER_CONFLICT,
            f"DisaggregatedSetRoleScaler {name!r} for External role {role!r} exists and is not "
            "controlled by this DisaggregatedSet; delete it so the set can create its own",
        )
        for role, name in sorted(scaler_plan.conflicts.items())
    )
    problems.extend(
        status.Problem(
            status.REASON_CHILD_CONFLICT,
            f"{kind} {name!r} is claimed twice by this DisaggregatedSet's slices or revisions (a"
            f" {api.GROUP} label of a child was removed or edited): it is kept exactly as it"
            " is; restore the labels its name implies",
        )
        for kind, name in sorted(desired.conflicts)
    )
    problems.extend(
        status.Problem(
            status.REASON_INVALID_CHILD_STATUS,
            f"{item.kind.kind} {item.name!r}: {item.status_error}, more than any"
            f" {api.LWS_KIND} can have; its status is ignored (counted as not ready) until it is"
            " sane again",
        )
        for item in request.children
        if item.status_error is not None
    )
    blocked_roles = {role for role, _ in conflicts} | set(blocked_roles_by_child.values())
    progress = [
        status.RoleProgress(
            name=entry.name,
            desired=None if entry.name in blocked_roles else entry.desired,
        )
        for entry in status.role_targets(spec.roles, targets, slices=spec.slices)
    ]
    new_status = status.compute(
        roles=progress,
        lws=kept_lws,
        revision=target,
        generation=parent.generation,
        problems=problems,
        observed=parent.conditions,
        now=now,
    )
    ordered = children.sort_children(desired.values())
    answer = records.SyncAnswer(
        status=new_status,
        children=tuple(ordered),
        resync_after_seconds=RESYNC_SECONDS if resync else None,
    )
    return records.HookResult(
        answer=answer,
        summary={
            "hook": "sync",
            "object": _key(parent),
            "generation": parent.generation,
            "revision": target,
            "outcome": "synced",
            "slices": slice_summaries,
            "children": _count_kinds(ordered),
            "deleted": desired.deleted(),
            "scalers_created": len(scaler_plan.created),
            "conflicts": len(problems),
        },
    )


def _hold(
    request: records.SyncRequest, problems: Sequence[status.Problem], *, now: str
) -> records.HookResult:
    parent = request.parent
    kept = [_unchanged(child) for child in request.children]
    held = status.compute_held(
        status=parent.status,
        problems=problems,
        observed=parent.conditions,
        generation=parent.generation,
        now=now,
    )
    return records.HookResult(
        answer=records.SyncAnswer(status=held, children=tuple(children.sort_children(kept))),
        summary={
            "hook": "sync",
            "object": _key(parent),
            "generation": parent.generation,
            "outcome": "held",
            "reason": problems[0].reason if problems else status.REASON_INVALID_SPEC,
            "children": _count_kinds(kept),
            "deleted": 0,
        },
    )


def _unchanged(child: records.ObservedObject) -> JsonObject:
    if child.kind is records.ChildKind.LWS:
        return children.reemit_lws(
            child, replicas=rollout.replicas_of(child), initial_replicas=None
        )
    if child.kind is records.ChildKind.SCALER:
        return children.reemit_scaler(child)
    return children.reemit(child)


def _invalid(violation: api.Violation) -> status.Problem:
    reason = (
        status.REASON_INVALID_METADATA
        if violation.field.startswith("metadata.")
        else status.REASON_INVALID_SPEC
    )
    return status.Problem(reason, f"{violation.field}: {violation.message}")


def _role_targets(
    spec: api.DisaggregatedSetSpec, scaler_plan: scalers.ScalerPlan
) -> dict[str, int | None]:
    targets: dict[str, int | None] = {}
    for role in spec.roles:
        if role.is_external:
            targets[role.name] = scaler_plan.targets.get(role.name)
        else:
            targets[role.name] = 1 if role.replicas is None else role.replicas
    return targets


def role_config(role: api.Role, target: int | None) -> planner.RoleConfig:
    """The planner's surge/unavailable for a role, resolved against its target replicas."""
    config = role.rolling_update_configuration
    if config is None:
        return planner.DEFAULT_CONFIG
    return planner.resolve_config(
        replicas=target or 0,
        max_surge=config.get("maxSurge"),
        max_unavailable=config.get("maxUnavailable"),
    )


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


def _split_by_slice(
    objects: Iterable[records.ObservedObject], *, slices: int
) -> tuple[
    dict[int, list[records.ObservedObject]],
    list[records.ObservedObject],
    list[records.ObservedObject],
]:
    """Objects by slice index; those with an unparsable slice label; those in removed slices."""
    by_slice: dict[int, list[records.ObservedObject]] = defaultdict(list)
    elsewhere = []
    removed = []
    for item in objects:
        index = naming.parse_slice(item.labels)
        if index is None:
            elsewhere.append(item)
        elif index >= slices:
            removed.append(item)
        else:
            by_slice[index].append(item)
    return by_slice, elsewhere, removed


def _child_key(item: records.ObservedObject) -> ChildKey:
    return (item.kind.kind, item.name)


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
