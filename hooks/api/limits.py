"""The API's numbers: sizes, ranges and defaults, each written once for the models, the CEL
rules, the hook's re-check and the command line. Data only: no imports from `hooks`."""

from __future__ import annotations

from typing import Final

MIN_ROLES: Final = 2
MAX_ROLES: Final = 10
MAX_SLICES: Final = 100
ROLE_NAME_PATTERN: Final = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
ROLE_NAME_MAX_LENGTH: Final = 63
INT32_MAX: Final = 2**31 - 1
# Go's int64, which a Kubernetes integer field (a resource quantity's value, a percentage in an
# annotation) must fit.
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
LWS_MAX_REPLICAS: Final = 1_000_000  # the LWS CRD's maximum for spec.replicas
LWS_DEFAULT_REPLICAS: Final = 1  # what an unset spec.replicas means, on a role and on an LWS
LWS_DEFAULT_SIZE: Final = 1  # what an unset leaderWorkerTemplate.size means (the leader alone)
# What the LWS CRD defaults an absent maxSurge and maxUnavailable of a rollingUpdateConfiguration
# to, and how the rules read an undefaulted object.
LWS_DEFAULT_MAX_SURGE: Final = 0
LWS_DEFAULT_MAX_UNAVAILABLE: Final = 1
# Added bound on the int-or-percent strings of a role's rollingUpdateConfiguration, which CEL
# rules match against regular expressions (their cost: docs/architecture.md, "The CRDs"). Any
# int32 as a string and any percentage fit.
INT_OR_PERCENT_MAX_LENGTH: Final = 16
# Added bound on every resource.Quantity string of a role's spec: an unbounded one let a valid set
# cost seconds per sync. Quantities people write ("1536Mi", "2.5", "100m") are far shorter.
QUANTITY_MAX_LENGTH: Final = 64

# metav1.Condition's bounds, which every condition the hooks write must fit.
CONDITION_TYPE_MAX_LENGTH: Final = 316
CONDITION_REASON_MAX_LENGTH: Final = 1024
CONDITION_MESSAGE_MAX_LENGTH: Final = 32768

DEFAULT_PROGRESS_DEADLINE_SECONDS: Final = 1800  # large models load for 10-20 minutes
DEFAULT_REVISION_HISTORY_LIMIT: Final = 10  # old revisions kept, as Deployments keep
# The highest number a revision's record holds: the largest whole number every JSON reader
# (JavaScript's included) holds exactly; a record that claims more was written by hand.
MAX_HISTORY_NUMBER: Final = 2**53 - 1
# The API server's bound on an object's annotations, keys and values together (bytes), which
# Metacontroller's last-applied copy of a child shares (`hooks.core.compact`).
ANNOTATIONS_MAX_BYTES: Final = 262_144
# A history record keeps the set's change-cause up to this many bytes as Go's JSON writes it (in
# Metacontroller's last-applied copy); a longer one is cut, with a marker saying so.
CHANGE_CAUSE_MAX_BYTES: Final = 4096
# A history record's packed roles, in characters of base64: the annotations' bound less the
# change-cause twice and the rest of the record (tests/unit/test_compact.py builds the largest).
PACKED_ROLES_MAX_LENGTH: Final = 250_000
# The most a record's packed roles unpack to (bytes): more than any object the API server
# stores, so that a forged record cannot make a sync inflate it without bound.
UNPACKED_ROLES_MAX_BYTES: Final = 3 * 1024 * 1024
# How long a child the set asked for may take to appear before the set reports it
# (`hooks.core.creations`): far more than a watch event takes on a loaded API server.
CREATION_GRACE_SECONDS: Final = 30
# The longest resync the hooks ask Metacontroller for (`resyncAfterSeconds`); a longer wait is
# asked for again by a later sync.
MAX_RESYNC_SECONDS: Final = 3600
