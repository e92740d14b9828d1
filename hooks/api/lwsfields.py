"""The parts of a role's LeaderWorkerSet spec the controller reads, typed (`ROLE_SPEC_FIELDS`):
`hooks.api.models` checks a role's raw `spec` against them strictly, converting nothing, so that
a bool, string or float where an integer belongs holds the set instead of being coerced.
"""

from __future__ import annotations

from typing import Annotated, Required

from pydantic import Field, TypeAdapter
from typing_extensions import TypedDict  # pydantic needs it for TypedDicts before 3.12

from hooks.api import limits
from hooks.api.documents import JsonObject


class _TemplateMetadataFields(TypedDict, total=False):
    labels: dict[str, str]
    annotations: dict[str, str]


class _PodTemplateFields(TypedDict, total=False):
    metadata: _TemplateMetadataFields
    spec: JsonObject


class _SubGroupPolicyFields(TypedDict, total=False):
    subGroupSize: int
    subGroupPolicyType: str


class _LeaderWorkerTemplateFields(TypedDict, total=False):
    leaderTemplate: _PodTemplateFields
    workerTemplate: Required[_PodTemplateFields]
    size: int
    subGroupPolicy: _SubGroupPolicyFields


class _RollingUpdateFields(TypedDict, total=False):
    maxSurge: int | str
    maxUnavailable: int | str
    partition: int


class _RolloutStrategyFields(TypedDict, total=False):
    type: str
    rollingUpdateConfiguration: _RollingUpdateFields


class _RoleSpecFields(TypedDict, total=False):
    replicas: Annotated[int, Field(ge=0, le=limits.LWS_MAX_REPLICAS)]
    rolloutStrategy: _RolloutStrategyFields
    leaderWorkerTemplate: Required[_LeaderWorkerTemplateFields]


ROLE_SPEC_FIELDS = TypeAdapter(_RoleSpecFields)
