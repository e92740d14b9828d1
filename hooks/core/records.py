"""The frozen records of Metacontroller hook calls: what a request holds and what a hook answers.

This module owns their shapes: `ChildKind` (the `<Kind>.<apiVersion>` keys of `children` and
`related`), the observed parent, scaler, children and conditions, one request record per hook, and
the typed answers (`SyncAnswer`, `CustomizeAnswer`, inside a `HookResult`). Request records are
built only by `hooks.wire` (`envelope`, from a request body), and answers become JSON only there
(`answers.render_answer`). This module reads and writes no JSON, decides nothing and holds only
data (pure: no I/O, clock, logging or state).

An observed child's `applied` is the object as this hook last returned it
(`hooks.wire.objects` says how it is recovered). Never mutate it: copy the parts you change. A
DisaggregatedSetRevision's body is parsed once, from the object itself, into `stored`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final, TypeAlias

from hooks import api


class ChildKind(StrEnum):
    """Outer keys of `children` and `related` (`<Kind>.<apiVersion>`)."""

    LWS = f"{api.LWS_KIND}.{api.LWS_API_VERSION}"
    SERVICE = f"{api.SERVICE_KIND}.{api.SERVICE_API_VERSION}"
    SCALER = f"{api.SCALER_KIND}.{api.API_VERSION}"
    REVISION = f"{api.REVISION_KIND}.{api.API_VERSION}"
    DISAGGREGATED_SET = f"{api.DS_KIND}.{api.API_VERSION}"

    @property
    def kind(self) -> str:
        return self.value.split(".", 1)[0]

    @property
    def api_version(self) -> str:
        return self.value.split(".", 1)[1]

    @property
    def resource(self) -> str:
        """The plural a CompositeController's `childResources` names this kind by."""
        return _RESOURCES[self]


_RESOURCES: Final = {
    ChildKind.LWS: api.LWS_PLURAL,
    ChildKind.SERVICE: api.SERVICE_PLURAL,
    ChildKind.SCALER: api.SCALER_PLURAL,
    ChildKind.REVISION: api.REVISION_PLURAL,
    ChildKind.DISAGGREGATED_SET: api.DS_PLURAL,
}

DS_CHILD_KINDS: Final = frozenset(
    {ChildKind.LWS, ChildKind.SERVICE, ChildKind.SCALER, ChildKind.REVISION}
)


@dataclass(frozen=True, slots=True)
class ReplicaStatus:
    """`status.replicas`, `readyReplicas` and `updatedReplicas` (0 when absent)."""

    replicas: int = 0
    ready_replicas: int = 0
    updated_replicas: int = 0


@dataclass(frozen=True, slots=True)
class StoredRevision:
    """What a DisaggregatedSetRevision stores, as read from the object itself: its numbers, its
    roles, and the revision those roles hash to (which its name and labels claim;
    `hooks.core.history` checks that they agree)."""

    number: int
    """`revision`: its place in the set's history."""
    first_number: int
    """`firstRevision`: the number it was created with."""
    completed_as: int | None
    """`completedAs`: its number when every slice of the set last ran it together."""
    roles: tuple[api.Role, ...]
    roles_json: tuple[api.JsonObject, ...]
    """The roles exactly as stored (what `kubectl ds rollout undo` restores)."""
    hash: str
    """The revision the roles hash to (`hooks.gocompat.revision`)."""


@dataclass(frozen=True, slots=True)
class ObservedObject:
    """A child or related object as Metacontroller observed it."""

    kind: ChildKind
    name: str
    namespace: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    creation_timestamp: str
    controller_uid: str | None
    spec_replicas: int | None
    status: ReplicaStatus
    applied: api.JsonObject
    """What the hook answered for this child last time (Metacontroller's last-applied
    annotation, when it names exactly this object); empty for a related object, which the hooks
    look at but never answer with."""
    slice_index: int | None = 0
    """The slice label: 0 when absent or empty (objects from before slices existed), None when
    it is not a canonical decimal number (such a child is kept but never planned)."""
    status_error: str | None = None
    """Why `status` was ignored (all zero) when the observed one holds impossible counts."""
    stored: StoredRevision | None = None
    """A DisaggregatedSetRevision's body; None for other kinds, or when it is not a record's
    (`stored_error` says why)."""
    stored_error: str | None = None
    """Why a DisaggregatedSetRevision's body is not a record's."""
    spec: api.JsonObject = field(default_factory=dict)
    """The observed `spec` as stored (`hooks.core.dropped` compares it with `applied`'s). Never
    mutate it."""
    resource_version: str = ""
    """`metadata.resourceVersion`, for a write that must not overwrite a change made meanwhile
    (`kubectl ds adopt`)."""
    owner_uids: tuple[str, ...] = ()
    """The uid of each of its ownerReferences, the controller's among them (`kubectl ds adopt`
    hands a set only an orphan that has none)."""
    controller_object: str | None = None
    """Its controller as `Kind.group/name` (`Kind/name` in the core group), None without one:
    `kubectl ds adopt` trusts only a controller reference to the set itself, the kind of
    reference the kit's admission policy guards."""

    @property
    def replicas(self) -> int:
        """`spec.replicas`, or the LWS default when unset."""
        return api.LWS_DEFAULT_REPLICAS if self.spec_replicas is None else self.spec_replicas

    def is_controlled_by(self, uid: str) -> bool:
        return self.controller_uid is not None and self.controller_uid == uid


@dataclass(frozen=True, slots=True)
class ObservedCondition:
    """A condition found in the parent's observed status."""

    type: str
    status: str
    last_transition_time: str
    reason: str
    message: str
    observed_generation: int | None


@dataclass(frozen=True, slots=True)
class ObservedRollout:
    """The rollout record found in the parent's observed status (`status.rollout`)."""

    revision: str
    last_progress_time: str
    ready_replicas: int
    updated_replicas: int


@dataclass(frozen=True, slots=True)
class Parent:
    """The DisaggregatedSet being synced.

    `spec` is None when the stored spec does not fit the API's structure; `spec_violations` then
    says why (the sync holds instead of acting).
    """

    name: str
    namespace: str
    uid: str
    generation: int
    spec: api.DisaggregatedSetSpec | None
    spec_violations: tuple[api.Violation, ...]
    status: api.JsonObject
    conditions: tuple[ObservedCondition, ...]
    annotations: Mapping[str, str] = field(default_factory=dict)
    rollout: ObservedRollout | None = None
    creating: Mapping[tuple[str, str], str] = field(default_factory=dict)
    """`status.creating`: (kind, name) -> when a pass first found that child missing."""
    status_generation: int | None = None
    """`status.observedGeneration`: the generation the last written status reflects."""
    role_replicas: Mapping[str, int] = field(default_factory=dict)
    """`status.roleStatuses`: role -> its LWS groups, as the last written status counted them."""
    revision: str | None = None
    """`status.revision`: the spec's revision when the status was last written."""
    slice_phases: Mapping[int, str] = field(default_factory=dict)
    """`status.rollout.slices`: the phase of each slice that is not steady, by index."""
    ready: str | None = None
    """`status.ready`: ready groups over those asked for, as `kubectl get` shows them."""
    history: str | None = None
    """`status.history`: what the revision history does not record, and why."""
    resource_version: str = ""
    """`metadata.resourceVersion`, for a write that must not overwrite a change made meanwhile
    (`kubectl ds rollout undo`)."""


@dataclass(frozen=True, slots=True)
class ScalerParent:
    """The DisaggregatedSetRoleScaler being synced by the RoleScaler controller."""

    name: str
    namespace: str
    uid: str
    generation: int
    labels: Mapping[str, str]
    owner_name: str | None
    owner_uid: str | None
    spec_replicas: int
    conditions: tuple[ObservedCondition, ...]
    status: api.JsonObject = field(default_factory=dict)
    """The observed status as it is."""


@dataclass(frozen=True, slots=True)
class SyncRequest:
    """A DisaggregatedSet sync call; children and related are sorted by kind and name."""

    parent: Parent
    children: tuple[ObservedObject, ...]
    related: tuple[ObservedObject, ...]
    declared: frozenset[ChildKind] | None = None
    """The child types the CompositeController declares (`controller.spec.childResources`), the
    only ones Metacontroller observes; None when the request names no controller (built by
    hand, as in tests or `python -m hooks render`)."""
    unknown_children: tuple[api.JsonObject, ...] = ()
    """Children of kinds this version does not know (a newer version's CompositeController
    lists them, while both versions answer during an upgrade), as they were last applied:
    answered unchanged, never deleted. Sorted by kind and name."""


@dataclass(frozen=True, slots=True)
class CustomizeRequest:
    """A DisaggregatedSet customize call."""

    parent: Parent


@dataclass(frozen=True, slots=True)
class ScalerSyncRequest:
    """A RoleScaler sync call: the scaler and the owning set (when it exists)."""

    scaler: ScalerParent
    owners: tuple[Parent, ...]


@dataclass(frozen=True, slots=True)
class ScalerCustomizeRequest:
    """A RoleScaler customize call."""

    scaler: ScalerParent


@dataclass(frozen=True, slots=True)
class RelatedRule:
    """One entry of a customize answer's `relatedResources`."""

    api_version: str
    resource: str
    namespace: str
    label_selector: Mapping[str, str] | None = None
    names: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class HeldStatus:
    """The status of a held set: the observed status as it is, with Degraded replaced."""

    observed: api.JsonObject
    degraded: api.Condition


# A string, so that reading a request's records never loads the API's models (`hooks.api`).
Status: TypeAlias = "api.DisaggregatedSetStatus | api.DisaggregatedSetRoleScalerStatus | HeldStatus"


@dataclass(frozen=True, slots=True)
class SyncAnswer:
    """A sync hook's answer: the complete desired children, the status, an optional resync."""

    status: Status
    children: tuple[api.JsonObject, ...] = ()
    resync_after_seconds: float | None = None
    status_kept: api.JsonObject = field(default_factory=dict)
    """Fields of the observed status this version does not compute (a newer version writes
    them), answered as they are beside `status`."""


@dataclass(frozen=True, slots=True)
class CustomizeAnswer:
    """A customize hook's answer: which related objects Metacontroller should send."""

    related: tuple[RelatedRule, ...]


@dataclass(frozen=True, slots=True)
class HookResult:
    """What a hook answers (typed; `hooks.wire.answers` writes it as JSON) and a summary of its
    decisions for the log line."""

    answer: SyncAnswer | CustomizeAnswer
    summary: Mapping[str, object]
    request: SyncRequest | None = None
    """The sync request answered, against which the server counts what Metacontroller writes for
    the answer (`hooks.wire.answers.writes`); None when that is not counted."""
