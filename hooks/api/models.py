"""The disaggregatedset.x-k8s.io/v1 API's pydantic models: both kinds and the revision record.

The single source of truth for the API's shape: `hooks.cli.crdgen` makes the CRDs from them (field
docstrings become descriptions; how: docs/architecture.md, "The CRDs"). A role's `spec` stays the
raw LWS object, type-checked in the fields the controller reads, never rebuilt (a round-trip would
change the revision hash). No behaviour, no I/O, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Final, cast

from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator
from pydantic.alias_generators import to_camel

from hooks.api import limits, lwsfields
from hooks.api.conditions import ConditionStatus
from hooks.api.documents import JsonObject

JsonDict = dict[str, JsonValue]

# json_schema_extra fragments, and the two keys that instruct crdgen rather than describe a schema.
_INT32: Final[JsonDict] = {"format": "int32"}
_INT64: Final[JsonDict] = {"format": "int64"}
_DATE_TIME: Final[JsonDict] = {"format": "date-time"}
EMBED_KEY: Final = "x-crdgen-embed"
REQUIRED_KEY: Final = "x-crdgen-required"
EMBED_LWS_SPEC: Final = "leaderworkerset-spec"
EMBED_STORED_ROLE: Final = "stored-role"


def _list_map(*keys: str) -> JsonDict:
    return {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": list(keys)}


class ScalingMode(StrEnum):
    STATIC = "Static"
    EXTERNAL = "External"


class PlacementType(StrEnum):
    NONE = "None"
    EXCLUSIVE_SLICE = "ExclusiveSlice"
    EXCLUSIVE_TOPOLOGY = "ExclusiveTopology"


class _Model(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        populate_by_name=True,
        alias_generator=to_camel,
        use_attribute_docstrings=True,
        extra="ignore",
    )


class RoleMetadata(_Model):
    """Metadata copied onto the role's LeaderWorkerSets."""

    labels: dict[str, str] = Field(default_factory=dict)
    """Labels copied onto every LeaderWorkerSet of the role. The controller's own labels
    (`app` and the disaggregatedset.x-k8s.io/* keys) override same-named entries."""

    annotations: dict[str, str] = Field(default_factory=dict)
    """Annotations copied onto every LeaderWorkerSet of the role."""

    name: str | None = None
    """Accepted for compatibility and ignored: the controller names LeaderWorkerSets itself."""

    namespace: str | None = None
    """Accepted for compatibility and ignored: LeaderWorkerSets live in the set's namespace."""

    finalizers: list[str] | None = None
    """Accepted for compatibility and ignored."""


class RoleScaling(_Model):
    """How the role's replica count is decided."""

    mode: ScalingMode = ScalingMode.STATIC
    """Static (default): the role runs spec.replicas groups per slice. External: the controller
    creates a DisaggregatedSetRoleScaler named <set>-<role> whose spec.replicas (written by an
    HPA, KEDA or `kubectl scale`) drives the role; spec.replicas of the role is then ignored.
    External requires slices: 1."""


class Role(_Model):
    """One role (for example prefill or decode): a LeaderWorkerSet template."""

    name: str = Field(
        min_length=1, max_length=limits.ROLE_NAME_MAX_LENGTH, pattern=limits.ROLE_NAME_PATTERN
    )
    """Role name, a DNS label unique within the set. It appears in child names and in the
    disaggregatedset.x-k8s.io/role label."""

    metadata: RoleMetadata | None = None
    """Labels and annotations for the role's LeaderWorkerSets."""

    spec: JsonObject = Field(json_schema_extra={EMBED_KEY: EMBED_LWS_SPEC})
    """Required. A full LeaderWorkerSet spec (the same schema and defaults as the LWS CRD). Only the
    name and spec.leaderWorkerTemplate decide the revision: editing replicas, rolloutStrategy,
    startupPolicy or networkConfig scales or reconfigures in place without a rollout."""

    scaling: RoleScaling | None = None
    """Optional scaling mode. Without it the role is Static."""

    @field_validator("spec")
    @classmethod
    def _check_read_fields(cls, value: JsonObject) -> JsonObject:
        lwsfields.ROLE_SPEC_FIELDS.validate_python(value, strict=True)
        return value

    @property
    def is_external(self) -> bool:
        return self.scaling is not None and self.scaling.mode is ScalingMode.EXTERNAL

    @property
    def replicas(self) -> int | None:
        """`spec.replicas` as stored (None when unset)."""
        return cast("int | None", self.spec.get("replicas"))

    @property
    def replicas_or_default(self) -> int:
        """`spec.replicas`, or the LWS default when unset (what a Static role targets)."""
        return limits.LWS_DEFAULT_REPLICAS if self.replicas is None else self.replicas

    @property
    def leader_worker_template(self) -> JsonObject:
        return cast(JsonObject, self.spec["leaderWorkerTemplate"])

    @property
    def rollout_type(self) -> str | None:
        return cast("str | None", (self.spec.get("rolloutStrategy") or {}).get("type"))

    @property
    def rolling_update_configuration(self) -> JsonObject | None:
        """`spec.rolloutStrategy.rollingUpdateConfiguration`, or None when absent."""
        strategy = self.spec.get("rolloutStrategy") or {}
        return cast("JsonObject | None", strategy.get("rollingUpdateConfiguration"))

    @property
    def rolling_update_budget(self) -> tuple[int | str, int | str] | None:
        """maxSurge and maxUnavailable of the rollingUpdateConfiguration, one left out read as
        the LWS CRD defaults it (validation and the planner both read them here); None without
        a rollingUpdateConfiguration."""
        config = self.rolling_update_configuration
        if config is None:
            return None
        surge: int | str = config.get("maxSurge", limits.LWS_DEFAULT_MAX_SURGE)
        unavailable: int | str = config.get("maxUnavailable", limits.LWS_DEFAULT_MAX_UNAVAILABLE)
        return surge, unavailable

    @property
    def labels(self) -> dict[str, str]:
        return self.metadata.labels if self.metadata is not None else {}

    @property
    def annotations(self) -> dict[str, str]:
        return self.metadata.annotations if self.metadata is not None else {}

    @property
    def size(self) -> int:
        """`leaderWorkerTemplate.size`: pods per group, leader included (1, the LWS default)."""
        return cast(int, self.leader_worker_template.get("size", limits.LWS_DEFAULT_SIZE))

    @property
    def sub_group_policy(self) -> JsonObject | None:
        """`leaderWorkerTemplate.subGroupPolicy`, None when unset."""
        return cast("JsonObject | None", self.leader_worker_template.get("subGroupPolicy"))

    def pod_templates(self) -> list[JsonObject]:
        """The leader template (when present) and the worker template, in that order."""
        template = self.leader_worker_template
        return [template[key] for key in ("leaderTemplate", "workerTemplate") if key in template]


class PlacementPolicy(_Model):
    """Co-locates a slice's roles in one topology domain and spreads slices across domains."""

    type: PlacementType = PlacementType.NONE
    """None (default), ExclusiveSlice (a slice's roles share one domain; this set's slices use
    different domains) or ExclusiveTopology (ExclusiveSlice, and no other set's slice shares the
    domain). Injected as pod affinity when a LeaderWorkerSet is created: a change reaches a slice
    on its next rollout, never by itself."""

    topology: str | None = None
    """Node-label key that defines a domain (the affinity topologyKey), for example
    cloud.google.com/gke-nodepool. Required when type is not None."""

    @property
    def is_active(self) -> bool:
        """Whether the policy places slices (type not None; a topology key is then required)."""
        return self.type is not PlacementType.NONE


class DisaggregatedSetSpec(_Model):
    """Desired state: the roles, how many copies (slices) of them, and where slices go."""

    roles: list[Role] = Field(
        min_length=limits.MIN_ROLES,
        max_length=limits.MAX_ROLES,
        json_schema_extra=_list_map("name"),
    )
    """The roles (2 to 10, unique names). Adding, removing or renaming a role, or changing a
    role's leaderWorkerTemplate, starts a coordinated rolling update of every role."""

    slices: int = Field(
        default=1, ge=1, le=limits.MAX_SLICES, strict=True, json_schema_extra=_INT32
    )
    """Number of copies of the whole role topology, each with its own LeaderWorkerSets
    (<set>-<slice>-<revision>-<role>). Changing it adds or deletes whole slices without a
    rollout. Must be 1 while any role is External."""

    placement_policy: PlacementPolicy | None = None
    """Optional topology placement for slices."""

    def role(self, name: str) -> Role | None:
        return next((role for role in self.roles if role.name == name), None)


class RoleStatus(_Model):
    """Observed replicas of one role, summed over all slices."""

    name: str
    """Role name."""

    replicas: int = Field(default=0, json_schema_extra=_INT32)
    """LeaderWorkerSet groups that exist (all slices and revisions)."""

    ready_replicas: int = Field(default=0, json_schema_extra=_INT32)
    """Ready groups (all slices and revisions)."""

    updated_replicas: int = Field(default=0, json_schema_extra=_INT32)
    """Groups of the current revision that are up to date."""


class Condition(_Model):
    """A standard Kubernetes condition (metav1.Condition)."""

    type: str = Field(
        max_length=limits.CONDITION_TYPE_MAX_LENGTH,
        pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
        r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
    )
    """Condition type (Available, Progressing, Degraded; Ready on scalers)."""

    status: ConditionStatus
    """True, False or Unknown."""

    observed_generation: int | None = Field(default=None, ge=0, json_schema_extra=_INT64)
    """The metadata.generation this condition was computed from."""

    last_transition_time: str = Field(json_schema_extra=_DATE_TIME)
    """When the status last flipped (RFC 3339)."""

    reason: str = Field(
        min_length=1,
        max_length=limits.CONDITION_REASON_MAX_LENGTH,
        pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
    )
    """A CamelCase reason, for example AllRolesReady, RolloutInProgress or InvalidSpec."""

    message: str = Field(max_length=limits.CONDITION_MESSAGE_MAX_LENGTH)
    """What is happening, in words a person can act on."""


class RolloutSlice(_Model):
    """Where one slice that is not steady at the spec's revision stands."""

    index: int = Field(json_schema_extra=_INT32)
    """The slice."""

    phase: str
    """Rolling (taking steps, or waiting for readiness between them), Stalled (no step can be
    taken), Paused, Held (at the hold's share) or Partitioned (past the partition, serving the
    revisions it ran)."""

    revisions: list[str] = Field(default_factory=list)
    """The revisions whose LeaderWorkerSets the slice runs, sorted."""


class RolloutStatus(_Model):
    """The rollout under way, for the progress deadline (absent when every slice is steady)."""

    revision: str
    """The revision being rolled out."""

    last_progress_time: str = Field(json_schema_extra=_DATE_TIME)
    """When the rollout last moved: it started, a step was applied, the new revision's ready or
    updated replicas rose, or it was resumed."""

    ready_replicas: int = Field(default=0, json_schema_extra=_INT32)
    """The new revision's ready replicas (all roles and slices) at that time."""

    updated_replicas: int = Field(default=0, json_schema_extra=_INT32)
    """The new revision's updated replicas (all roles and slices) at that time."""

    slices: list[RolloutSlice] = Field(default_factory=list, json_schema_extra=_list_map("index"))
    """Every slice not yet steady at the revision, and where it stands."""


class CreatingChild(_Model):
    """A child the set asked Metacontroller to create that it has not observed yet."""

    kind: str
    """LeaderWorkerSet, DisaggregatedSetRevision or DisaggregatedSetRoleScaler (a Service is not
    tracked: it is asked for whenever its revision turns ready)."""

    name: str
    """The child's name."""

    since: str = Field(
        json_schema_extra=_DATE_TIME,
        description="When the set first asked for it. A child missing for"
        f" {limits.CREATION_GRACE_SECONDS} s makes the set Degraded (reason ChildNotCreated).",
    )


class DisaggregatedSetStatus(_Model):
    """Observed state, written by the controller."""

    observed_generation: int | None = Field(default=None, json_schema_extra=_INT64)
    """The metadata.generation the status reflects."""

    revision: str | None = None
    """The revision of the current spec: the 8-hex hash in its LeaderWorkerSet names."""

    ready: str | None = None
    """Ready groups over the groups the spec asks for, summed over every role and slice, for
    example 5/6 (`?` for a target not known yet); the READY column of `kubectl get`."""

    ready_by_role: str | None = None
    """The same per role, in spec order, for example `prefill 3/4, decode 2/2`; the ROLES column
    of `kubectl get -o wide`."""

    degraded: str | None = None
    """The reason of the Degraded condition while it is True; the DEGRADED column of
    `kubectl get`."""

    role_statuses: list[RoleStatus] = Field(
        default_factory=list, json_schema_extra=_list_map("name")
    )
    """One entry per spec role, in spec order."""

    conditions: list[Condition] = Field(default_factory=list, json_schema_extra=_list_map("type"))
    """Available, Progressing and Degraded."""

    rollout: RolloutStatus | None = None
    """The rollout under way (absent when every slice is steady)."""

    creating: list[CreatingChild] | None = Field(
        default=None, json_schema_extra=_list_map("kind", "name")
    )
    """Children the set asked for that are not observed yet (absent once they all exist)."""

    warnings: list[str] | None = Field(default=None, max_length=limits.MAX_ROLES)
    """What the spec asks for that the controller ignores, one sentence per role: an External
    role's `spec.replicas` above 1 (its DisaggregatedSetRoleScaler sets its replicas), which the
    API server also answers `kubectl apply` with a warning for. Absent when there is none."""
    history: str | None = None
    """What the revision history does not record, and why (absent while it records every
    revision the set runs): none at all when the set's CompositeController does not declare
    DisaggregatedSetRevisions as a child type; `kubectl ds rollout undo` restores, and a move
    back is a rollback, only for a recorded revision."""


class DisaggregatedSetRoleScalerSpec(_Model):
    """Desired replicas of one External role; written by an autoscaler, never by users."""

    replicas: int = Field(
        default=0, ge=0, le=limits.INT32_MAX, json_schema_extra={**_INT32, REQUIRED_KEY: True}
    )
    """Desired LeaderWorkerSet groups for the role. Seeded when the scaler is created (1 for a
    new role, the running total for a Static to External switch), then owned by whatever
    scales it (HPA, KEDA, `kubectl scale`). Always present: the /scale subresource needs it."""


class DisaggregatedSetRoleScalerStatus(_Model):
    """Observed state of the role behind the scaler."""

    observed_generation: int | None = Field(default=None, json_schema_extra=_INT64)
    """The metadata.generation the status reflects."""

    replicas: int = Field(default=0, json_schema_extra=_INT32)
    """LeaderWorkerSet groups (leader pods) of the role, all revisions: what an HPA reads as
    the current count."""

    selector: str | None = None
    """Label selector matching one pod per group (the leader), across revisions:
    disaggregatedset.x-k8s.io/name=<set>,disaggregatedset.x-k8s.io/role=<role>,
    leaderworkerset.sigs.k8s.io/worker-index=0."""

    conditions: list[Condition] = Field(default_factory=list, json_schema_extra=_list_map("type"))
    """Ready: True (reason Bound) when the owning set exists and the role is External."""


class RevisionRecord(_Model):
    """A DisaggregatedSetRevision: one revision in a DisaggregatedSet's history, as the set's
    controller writes it (besides apiVersion, kind and metadata: named <set>-<revision>, labelled
    with the set's name and the revision, controller-owned by the set)."""

    revision: int = Field(ge=1, le=limits.MAX_HISTORY_NUMBER, strict=True, json_schema_extra=_INT64)
    """The revision's place in the set's history: 1 for the first revision the set ran, the
    next number for each revision it moves to, a recorded one included (the number changes,
    nothing else does)."""

    first_revision: int = Field(
        ge=1, le=limits.MAX_HISTORY_NUMBER, strict=True, json_schema_extra=_INT64
    )
    """The number the record was created with. Immutable. A revision whose firstRevision is
    below the number of another recorded revision ran before that one: moving back to it is a
    rollback, which a rollout-hold-at never holds."""

    completed_as: int | None = Field(
        default=None, ge=1, le=limits.MAX_HISTORY_NUMBER, strict=True, json_schema_extra=_INT64
    )
    """The number the record held when every slice of the set last ran its revision together
    (absent until then). The revision that did so last before the current rollout began is the
    stable one, at which a slice past a rollout-partition is created."""

    packed_roles: str | None = Field(
        default=None, max_length=limits.PACKED_ROLES_MAX_LENGTH, strict=True
    )
    """The roles as the set's spec had them (name, metadata, scaling and the whole LWS spec),
    exactly as written, packed: the base64 of the zlib-compressed JSON list of them. They hash to
    the revision in the name, and `kubectl ds rollout undo` restores them. Immutable. A record
    holds either this or `roles`."""

    roles: (
        list[Annotated[JsonObject, Field(json_schema_extra={EMBED_KEY: EMBED_STORED_ROLE})]] | None
    ) = Field(default=None, min_length=limits.MIN_ROLES, max_length=limits.MAX_ROLES)
    """The roles as a list, as records of earlier versions hold them (this version writes
    `packedRoles`). Immutable."""


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken validation rule: the rule id, the offending field path and a message."""

    rule: str
    field: str
    message: str


def json_names(model: type[BaseModel]) -> frozenset[str]:
    """The JSON names of a model's fields (their camelCase aliases)."""
    return frozenset(info.alias or name for name, info in model.model_fields.items())
