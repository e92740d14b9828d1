"""The disaggregatedset.x-k8s.io/v1 API: the contract, each part written once.

- `keys`: group, kinds, resources, label and annotation keys;
- `documents`: `JsonObject`, a Kubernetes object as JSON decodes it;
- `limits`: sizes, ranges and defaults;
- `conditions`: condition types, statuses and every reason the hooks write;
- `naming`: child names, labels and selectors, and the name budget they must fit;
- `times`: RFC 3339 timestamps;
- `models`: the pydantic models of both kinds (the CRDs are generated from them), and
  `lwsfields`, the parts of a role's LWS spec they read;
- `rules`: the validation rule table (CEL in the CRD, re-checked by `hooks.core.validation`).

Everything else in the package builds on these, and this module re-exports the names used
everywhere (`from hooks import api`, then `api.LABEL_NAME`, `api.Role`, `api.Reason`), so that
a reader finds each definition in one of the modules above. No behaviour, no I/O, no clock.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from hooks.api.conditions import ConditionStatus, ConditionType, Reason
from hooks.api.documents import JsonObject
from hooks.api.keys import (
    ANNOTATION_HISTORY_LIMIT,
    ANNOTATION_INITIAL_REPLICAS,
    ANNOTATION_PAUSED,
    ANNOTATION_PROGRESS_DEADLINE,
    ANNOTATION_ROLLOUT_HOLD_AT,
    ANNOTATION_ROLLOUT_PARTITION,
    ANNOTATION_ROLLOUT_TARGET,
    API_VERSION,
    CHANGE_CAUSE_ANNOTATION,
    CONTROLLER_UID_LABEL,
    DS_KIND,
    DS_PLURAL,
    DS_SHORT_NAME,
    EXCLUSIVE_ANNOTATIONS,
    EXCLUSIVE_TOPOLOGY_ANNOTATION,
    GROUP,
    LABEL_APP,
    LABEL_NAME,
    LABEL_REVISION,
    LABEL_ROLE,
    LABEL_SLICE,
    LAST_APPLIED_ANNOTATION,
    LWS_API_VERSION,
    LWS_KIND,
    LWS_PLURAL,
    LWS_WORKER_INDEX_LABEL,
    REVISION_KIND,
    REVISION_PLURAL,
    REVISION_SHORT_NAME,
    SCALER_KIND,
    SCALER_PLURAL,
    SCALER_SHORT_NAME,
    SERVICE_API_VERSION,
    SERVICE_KIND,
    SERVICE_PLURAL,
    SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    VERSION,
)
from hooks.api.limits import (
    CREATION_GRACE_SECONDS,
    DEFAULT_PROGRESS_DEADLINE_SECONDS,
    DEFAULT_REVISION_HISTORY_LIMIT,
    INT32_MAX,
    INT_OR_PERCENT_MAX_LENGTH,
    LWS_DEFAULT_REPLICAS,
    LWS_MAX_REPLICAS,
    MAX_HISTORY_NUMBER,
    MAX_ROLES,
    MIN_ROLES,
    PACKED_ROLES_MAX_LENGTH,
    QUANTITY_MAX_LENGTH,
    ROLE_NAME_MAX_LENGTH,
    ROLE_NAME_PATTERN,
)

if TYPE_CHECKING:
    from hooks.api.models import (
        EMBED_KEY,
        EMBED_LWS_SPEC,
        EMBED_STORED_ROLE,
        REQUIRED_KEY,
        Condition,
        CreatingChild,
        DisaggregatedSetRoleScalerSpec,
        DisaggregatedSetRoleScalerStatus,
        DisaggregatedSetSpec,
        DisaggregatedSetStatus,
        PlacementPolicy,
        PlacementType,
        RevisionRecord,
        Role,
        RoleStatus,
        RolloutSlice,
        RolloutStatus,
        Violation,
        json_names,
    )

__all__ = [
    "ANNOTATION_HISTORY_LIMIT",
    "ANNOTATION_INITIAL_REPLICAS",
    "ANNOTATION_PAUSED",
    "ANNOTATION_PROGRESS_DEADLINE",
    "ANNOTATION_ROLLOUT_HOLD_AT",
    "ANNOTATION_ROLLOUT_PARTITION",
    "ANNOTATION_ROLLOUT_TARGET",
    "API_VERSION",
    "CHANGE_CAUSE_ANNOTATION",
    "CONTROLLER_UID_LABEL",
    "CREATION_GRACE_SECONDS",
    "DEFAULT_PROGRESS_DEADLINE_SECONDS",
    "DEFAULT_REVISION_HISTORY_LIMIT",
    "DS_KIND",
    "DS_PLURAL",
    "DS_SHORT_NAME",
    "EMBED_KEY",
    "EMBED_LWS_SPEC",
    "EMBED_STORED_ROLE",
    "EXCLUSIVE_ANNOTATIONS",
    "EXCLUSIVE_TOPOLOGY_ANNOTATION",
    "GROUP",
    "INT32_MAX",
    "INT_OR_PERCENT_MAX_LENGTH",
    "LABEL_APP",
    "LABEL_NAME",
    "LABEL_REVISION",
    "LABEL_ROLE",
    "LABEL_SLICE",
    "LAST_APPLIED_ANNOTATION",
    "LWS_API_VERSION",
    "LWS_DEFAULT_REPLICAS",
    "LWS_KIND",
    "LWS_MAX_REPLICAS",
    "LWS_PLURAL",
    "LWS_WORKER_INDEX_LABEL",
    "MAX_HISTORY_NUMBER",
    "MAX_ROLES",
    "MIN_ROLES",
    "PACKED_ROLES_MAX_LENGTH",
    "QUANTITY_MAX_LENGTH",
    "REQUIRED_KEY",
    "REVISION_KIND",
    "REVISION_PLURAL",
    "REVISION_SHORT_NAME",
    "ROLE_NAME_MAX_LENGTH",
    "ROLE_NAME_PATTERN",
    "SCALER_KIND",
    "SCALER_PLURAL",
    "SCALER_SHORT_NAME",
    "SERVICE_API_VERSION",
    "SERVICE_KIND",
    "SERVICE_PLURAL",
    "SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION",
    "VERSION",
    "Condition",
    "ConditionStatus",
    "ConditionType",
    "CreatingChild",
    "DisaggregatedSetRoleScalerSpec",
    "DisaggregatedSetRoleScalerStatus",
    "DisaggregatedSetSpec",
    "DisaggregatedSetStatus",
    "JsonObject",
    "PlacementPolicy",
    "PlacementType",
    "Reason",
    "RevisionRecord",
    "Role",
    "RoleStatus",
    "RolloutSlice",
    "RolloutStatus",
    "Violation",
    "json_names",
]


# The models are the one heavy part of the API (pydantic builds their validators when they are
# imported): they load when a name of theirs is first used, so a command that needs only keys
# and names (`kubectl ds --help`, `kubectl ds rollout pause`) starts without them. A name of
# `__all__` this module does not define is theirs.
def __getattr__(name: str) -> object:
    if name in __all__:
        return getattr(importlib.import_module("hooks.api.models"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
