"""The API's well-known strings: group, kinds, resources, label and annotation keys, ours and
the foreign ones the controller reads or writes. Data only: no imports from `hooks`."""

from __future__ import annotations

from typing import Final

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
