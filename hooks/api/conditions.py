"""The API's conditions: their types, statuses and every reason the hooks write, spelled here
only, as `kubectl get`, kube-state-metrics, the alerts and GitOps tools read them. Data only."""

from __future__ import annotations

from enum import StrEnum
from typing import Final


class ConditionType(StrEnum):
    AVAILABLE = "Available"
    PROGRESSING = "Progressing"
    DEGRADED = "Degraded"
    READY = "Ready"


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Reason(StrEnum):
    # Available and Progressing of a DisaggregatedSet.
    ALL_ROLES_READY = "AllRolesReady"
    ROLLOUT_IN_PROGRESS = "RolloutInProgress"
    ROLLOUT_PAUSED = "RolloutPaused"
    ROLLOUT_HELD = "RolloutHeld"
    ROLLOUT_PARTITIONED = "RolloutPartitioned"
    PROGRESS_DEADLINE_EXCEEDED = "ProgressDeadlineExceeded"
    ROLE_SCALED_TO_ZERO = "RoleScaledToZero"
    # Degraded of a DisaggregatedSet: AsExpected when False, else the first problem.
    AS_EXPECTED = "AsExpected"
    INVALID_SPEC = "InvalidSpec"
    INVALID_METADATA = "InvalidMetadata"
    INVALID_ANNOTATION = "InvalidAnnotation"
    CHILD_NOT_CREATED = "ChildNotCreated"
    SCALER_CONFLICT = "ScalerConflict"
    CHILD_CONFLICT = "ChildConflict"
    INVALID_CHILD_STATUS = "InvalidChildStatus"
    NAME_BUDGET_EXCEEDED = "NameBudgetExceeded"
    INVALID_HISTORY = "InvalidHistory"
    LWS_FIELD_DROPPED = "LWSFieldDropped"
    LWS_REFUSED = "LWSRefused"
    # Ready of a DisaggregatedSetRoleScaler.
    BOUND = "Bound"
    OWNER_NOT_FOUND = "OwnerNotFound"
    OWNER_SPEC_INVALID = "OwnerSpecInvalid"
    ROLE_NOT_EXTERNAL = "RoleNotExternal"
    LABELS_MISSING = "LabelsMissing"


DELIBERATE_STOPS: Final = (Reason.ROLLOUT_PAUSED, Reason.ROLLOUT_HELD, Reason.ROLLOUT_PARTITIONED)
"""The Progressing reasons (status Unknown) of a rollout that stands still because an annotation
asks it to: a pause, a hold, a partition. The alerts never call such a set stuck."""
