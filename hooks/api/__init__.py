"""The disaggregatedset.x-k8s.io/v1 API, each part in one module (docs/architecture.md).

Here: its well-known strings (group, kinds, resources, label and annotation keys, ours and the
foreign ones the controller reads or writes), and the names of the other modules used everywhere,
re-exported (`api.Role`, `api.Reason`); `naming`, `times` and `rules` are used as modules. No
behaviour, no I/O, no clock.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Final

from hooks.api.conditions import ConditionStatus as ConditionStatus
from hooks.api.conditions import ConditionType as ConditionType
from hooks.api.conditions import Reason as Reason
from hooks.api.documents import JsonObject as JsonObject
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

GROUP: Final = "disaggregatedset.x-k8s.io"
VERSION: Final = "v1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
DS_KIND: Final = "DisaggregatedSet"
DS_PLURAL: Final = "disaggregatedsets"
DS_SHORT_NAME: Final = "dset"  # `ds` is DaemonSet's
SCALER_KIND: Final = "DisaggregatedSetRoleScaler"
SCALER_PLURAL: Final = "disaggregatedsetrolescalers"
SCALER_SHORT_NAME: Final = "dsrs"
REVISION_KIND: Final = "DisaggregatedSetRevision"
REVISION_PLURAL: Final = "disaggregatedsetrevisions"
REVISION_SHORT_NAME: Final = "dsrev"

LWS_API_VERSION: Final = "leaderworkerset.x-k8s.io/v1"
LWS_KIND: Final = "LeaderWorkerSet"
LWS_PLURAL: Final = "leaderworkersets"
SERVICE_API_VERSION: Final = "v1"
SERVICE_KIND: Final = "Service"
SERVICE_PLURAL: Final = "services"

LABEL_NAME: Final = f"{GROUP}/name"
LABEL_ROLE: Final = f"{GROUP}/role"
LABEL_SLICE: Final = f"{GROUP}/slice"
LABEL_REVISION: Final = f"{GROUP}/revision"
LABEL_APP: Final = "app"
ANNOTATION_INITIAL_REPLICAS: Final = f"{GROUP}/initial-replicas"
# Beyond upstream: the role's per-slice target when a slice's rollout started, on each LWS of the
# revision it rolls to (docs/rollout.md, "Scaling while a rollout runs").
ANNOTATION_ROLLOUT_TARGET: Final = f"{GROUP}/rollout-target-replicas"
# Rollout control, beyond upstream: annotations on the DisaggregatedSet, so that the spec stays
# upstream's (docs/rollout.md).
ANNOTATION_PAUSED: Final = f"{GROUP}/paused"
ANNOTATION_PROGRESS_DEADLINE: Final = f"{GROUP}/progress-deadline-seconds"
ANNOTATION_HISTORY_LIMIT: Final = f"{GROUP}/revision-history-limit"
ANNOTATION_ROLLOUT_PARTITION: Final = f"{GROUP}/rollout-partition"
ANNOTATION_ROLLOUT_HOLD_AT: Final = f"{GROUP}/rollout-hold-at"
# kubectl's convention; copied onto the DisaggregatedSetRevision of each revision the set moves to.
CHANGE_CAUSE_ANNOTATION: Final = "kubernetes.io/change-cause"

LAST_APPLIED_ANNOTATION: Final = "metacontroller.k8s.io/last-applied-configuration"
CONTROLLER_UID_LABEL: Final = "controller-uid"
LWS_WORKER_INDEX_LABEL: Final = "leaderworkerset.sigs.k8s.io/worker-index"
EXCLUSIVE_TOPOLOGY_ANNOTATION: Final = "leaderworkerset.sigs.k8s.io/exclusive-topology"
SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION: Final = (
    "leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology"
)
EXCLUSIVE_ANNOTATIONS: Final = (
    EXCLUSIVE_TOPOLOGY_ANNOTATION,
    SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION,
)

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
