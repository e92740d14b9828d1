"""The disaggregatedset.x-k8s.io/v1 API, each part in one module (docs/architecture.md).

The names used everywhere are re-exported here (`api.LABEL_NAME`, `api.Role`, `api.Reason`);
`naming`, `times` and `rules` are used as modules. No behaviour, no I/O, no clock.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Final

from hooks.api.conditions import ConditionStatus as ConditionStatus
from hooks.api.conditions import ConditionType as ConditionType
from hooks.api.conditions import Reason as Reason
from hooks.api.documents import JsonObject as JsonObject
from hooks.api.keys import ANNOTATION_HISTORY_LIMIT as ANNOTATION_HISTORY_LIMIT
from hooks.api.keys import ANNOTATION_INITIAL_REPLICAS as ANNOTATION_INITIAL_REPLICAS
from hooks.api.keys import ANNOTATION_PAUSED as ANNOTATION_PAUSED
from hooks.api.keys import ANNOTATION_PROGRESS_DEADLINE as ANNOTATION_PROGRESS_DEADLINE
from hooks.api.keys import ANNOTATION_ROLLOUT_HOLD_AT as ANNOTATION_ROLLOUT_HOLD_AT
from hooks.api.keys import ANNOTATION_ROLLOUT_PARTITION as ANNOTATION_ROLLOUT_PARTITION
from hooks.api.keys import ANNOTATION_ROLLOUT_TARGET as ANNOTATION_ROLLOUT_TARGET
from hooks.api.keys import API_VERSION as API_VERSION
from hooks.api.keys import CHANGE_CAUSE_ANNOTATION as CHANGE_CAUSE_ANNOTATION
from hooks.api.keys import CONTROLLER_UID_LABEL as CONTROLLER_UID_LABEL
from hooks.api.keys import DS_KIND as DS_KIND
from hooks.api.keys import DS_PLURAL as DS_PLURAL
from hooks.api.keys import DS_SHORT_NAME as DS_SHORT_NAME
from hooks.api.keys import EXCLUSIVE_ANNOTATIONS as EXCLUSIVE_ANNOTATIONS
from hooks.api.keys import EXCLUSIVE_TOPOLOGY_ANNOTATION as EXCLUSIVE_TOPOLOGY_ANNOTATION
from hooks.api.keys import GROUP as GROUP
from hooks.api.keys import LABEL_APP as LABEL_APP
from hooks.api.keys import LABEL_NAME as LABEL_NAME
from hooks.api.keys import LABEL_REVISION as LABEL_REVISION
from hooks.api.keys import LABEL_ROLE as LABEL_ROLE
from hooks.api.keys import LABEL_SLICE as LABEL_SLICE
from hooks.api.keys import LAST_APPLIED_ANNOTATION as LAST_APPLIED_ANNOTATION
from hooks.api.keys import LWS_API_VERSION as LWS_API_VERSION
from hooks.api.keys import LWS_KIND as LWS_KIND
from hooks.api.keys import LWS_PLURAL as LWS_PLURAL
from hooks.api.keys import LWS_WORKER_INDEX_LABEL as LWS_WORKER_INDEX_LABEL
from hooks.api.keys import REVISION_KIND as REVISION_KIND
from hooks.api.keys import REVISION_PLURAL as REVISION_PLURAL
from hooks.api.keys import REVISION_SHORT_NAME as REVISION_SHORT_NAME
from hooks.api.keys import SCALER_KIND as SCALER_KIND
from hooks.api.keys import SCALER_PLURAL as SCALER_PLURAL
from hooks.api.keys import SCALER_SHORT_NAME as SCALER_SHORT_NAME
from hooks.api.keys import SERVICE_API_VERSION as SERVICE_API_VERSION
from hooks.api.keys import SERVICE_KIND as SERVICE_KIND
from hooks.api.keys import SERVICE_PLURAL as SERVICE_PLURAL
from hooks.api.keys import (
    SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION as SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION,
)
from hooks.api.keys import VERSION as VERSION
from hooks.api.limits import CREATION_GRACE_SECONDS as CREATION_GRACE_SECONDS
from hooks.api.limits import DEFAULT_PROGRESS_DEADLINE_SECONDS as DEFAULT_PROGRESS_DEADLINE_SECONDS
from hooks.api.limits import DEFAULT_REVISION_HISTORY_LIMIT as DEFAULT_REVISION_HISTORY_LIMIT
from hooks.api.limits import INT32_MAX as INT32_MAX
from hooks.api.limits import INT_OR_PERCENT_MAX_LENGTH as INT_OR_PERCENT_MAX_LENGTH
from hooks.api.limits import LWS_DEFAULT_REPLICAS as LWS_DEFAULT_REPLICAS
from hooks.api.limits import LWS_MAX_REPLICAS as LWS_MAX_REPLICAS
from hooks.api.limits import MAX_HISTORY_NUMBER as MAX_HISTORY_NUMBER
from hooks.api.limits import MAX_ROLES as MAX_ROLES
from hooks.api.limits import MIN_ROLES as MIN_ROLES
from hooks.api.limits import PACKED_ROLES_MAX_LENGTH as PACKED_ROLES_MAX_LENGTH
from hooks.api.limits import QUANTITY_MAX_LENGTH as QUANTITY_MAX_LENGTH
from hooks.api.limits import ROLE_NAME_MAX_LENGTH as ROLE_NAME_MAX_LENGTH
from hooks.api.limits import ROLE_NAME_PATTERN as ROLE_NAME_PATTERN

if TYPE_CHECKING:
    from hooks.api.models import EMBED_KEY as EMBED_KEY
    from hooks.api.models import EMBED_LWS_SPEC as EMBED_LWS_SPEC
    from hooks.api.models import EMBED_STORED_ROLE as EMBED_STORED_ROLE
    from hooks.api.models import REQUIRED_KEY as REQUIRED_KEY
    from hooks.api.models import Condition as Condition
    from hooks.api.models import CreatingChild as CreatingChild
    from hooks.api.models import DisaggregatedSetRoleScalerSpec as DisaggregatedSetRoleScalerSpec
    from hooks.api.models import (
        DisaggregatedSetRoleScalerStatus as DisaggregatedSetRoleScalerStatus,
    )
    from hooks.api.models import DisaggregatedSetSpec as DisaggregatedSetSpec
    from hooks.api.models import DisaggregatedSetStatus as DisaggregatedSetStatus
    from hooks.api.models import PlacementPolicy as PlacementPolicy
    from hooks.api.models import PlacementType as PlacementType
    from hooks.api.models import RevisionRecord as RevisionRecord
    from hooks.api.models import Role as Role
    from hooks.api.models import RoleStatus as RoleStatus
    from hooks.api.models import RolloutSlice as RolloutSlice
    from hooks.api.models import RolloutStatus as RolloutStatus
    from hooks.api.models import Violation as Violation
    from hooks.api.models import json_names as json_names

# The models are the one heavy part of the API (pydantic builds their validators on import): they
# load when a name of theirs is first used, so that a command needing only keys and names
# (`kubectl ds --help`) starts without them.
_MODEL_NAMES: Final = frozenset(
    {
        "EMBED_KEY",
        "EMBED_LWS_SPEC",
        "EMBED_STORED_ROLE",
        "REQUIRED_KEY",
        "Condition",
        "CreatingChild",
        "DisaggregatedSetRoleScalerSpec",
        "DisaggregatedSetRoleScalerStatus",
        "DisaggregatedSetSpec",
        "DisaggregatedSetStatus",
        "PlacementPolicy",
        "PlacementType",
        "RevisionRecord",
        "Role",
        "RoleStatus",
        "RolloutSlice",
        "RolloutStatus",
        "Violation",
        "json_names",
    }
)


def __getattr__(name: str) -> object:
    if name in _MODEL_NAMES:
        return getattr(importlib.import_module("hooks.api.models"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
