"""The frozen records of Metacontroller hook calls: what a request holds and what a hook answers.

Only `hooks.wire` builds request records and writes answers as JSON; this module holds data
only (no JSON, no decisions). Never mutate an observed object's parts: copy what you change.
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

DS_CHILD_KINDS: Final = frozenset(ChildKind) - {ChildKind.DISAGGREGATED_SET}


@dataclass(frozen=True, slots=True)
class ReplicaStatus:
    """`status.replicas`, `readyReplicas` and `updatedReplicas` (0 when absent)."""

    replicas: int = 0
    ready_replicas: int = 0
    updated_replicas: int = 0


@dataclass(frozen=True, slots=True)
class StoredRevision:
    """What a DisaggregatedSetRevision stores (`revision`, `firstRevision`, `completedAs`, its
    roles, as parsed and exactly as stored) and the revision its roles hash to."""

    number: int
    first_number: int
    completed_as: int | None
    roles: tuple[api.Role, ...]
    roles_json: tuple[api.JsonObject, ...]
    hash: str


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
    """What the hook answered for this child last time (from Metacontroller's last-applied
    annotation); empty for a related object."""
    slice_index: int | None = 0
    """The slice label: 0 when absent or empty, None when not a canonical decimal (such a child
    is kept but never planned)."""
    status_error: str | None = None
    """Why `status` was ignored (all zero): the observed one holds impossible counts."""
    stored: StoredRevision | None = None
    """A DisaggregatedSetRevision's body; None for other kinds or when `stored_error` says why."""
    stored_error: str | None = None
    spec: api.JsonObject = field(default_factory=dict)
    """The observed `spec` as stored (`hooks.core.dropped` compares it with `applied`'s)."""
    resource_version: str = ""
    owner_uids: tuple[str, ...] = ()
    controller_object: str | None = None
    """Its controller as `Kind.group/name` (`Kind/name` in the core group), None without one."""

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
    """The DisaggregatedSet being synced; `spec` is None when the stored one does not fit the
    API's structure (`spec_violations` says why)."""

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
    """`status.observedGeneration`."""
    role_replicas: Mapping[str, int] = field(default_factory=dict)
    """`status.roleStatuses`: role -> its `replicas`."""
    revision: str | None = None
    slice_phases: Mapping[int, str] = field(default_factory=dict)
    """`status.rollout.slices`: index -> phase, of each slice that is not steady."""
    ready: str | None = None
    history: str | None = None
    resource_version: str = ""


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


@dataclass(frozen=True, slots=True)
class SyncRequest:
    """A DisaggregatedSet sync call; children and related are sorted by kind and name."""

    parent: Parent
    children: tuple[ObservedObject, ...]
    related: tuple[ObservedObject, ...]
    declared: frozenset[ChildKind] | None = None
    """The child types the CompositeController declares (`controller.spec.childResources`);
    None when the request names no controller (built by hand)."""
    unknown_children: tuple[api.JsonObject, ...] = ()
    """Children of kinds this version does not know, as last applied: answered unchanged."""


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
    """Fields of the observed status this version does not compute, answered as they are."""


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
    """The sync request answered, for `hooks.wire.answers.writes`; None when not counted."""
