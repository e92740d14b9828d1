"""Validation rules of the DisaggregatedSet API, one definition each: a table of facts.

The CRD carries each rule as CEL at its `path` (`hooks.cli.crdgen`); `hooks.core.validation`
re-checks it in Python under the same id and message, for an older or hand-edited CRD. The
numbers come from `hooks.api.limits` and `hooks.api.naming`, which the Python check reads too.
Writing a rule: docs/architecture.md, "The CRDs".
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from hooks import api
from hooks.api import limits, naming


class RuleNode(StrEnum):
    """The schema node a CEL rule attaches to (`self` in the rule)."""

    ROOT = "root"
    SPEC = "spec"
    PLACEMENT_POLICY = "spec.placementPolicy"
    ROLE = "spec.roles[]"
    # A DisaggregatedSetRevision's fields.
    RECORD_ROLES = "roles"
    RECORD_PACKED_ROLES = "packedRoles"
    RECORD_FIRST_REVISION = "firstRevision"


class RuleReason(StrEnum):
    """The `reason` a CEL rule reports (the values Kubernetes accepts)."""

    INVALID = "FieldValueInvalid"
    FORBIDDEN = "FieldValueForbidden"
    REQUIRED = "FieldValueRequired"


@dataclass(frozen=True, slots=True)
class CelRule:
    """One CRD validation rule: where it attaches, its CEL expression, and what it reports
    (`field_path` is relative to `path`, without list indices, as Kubernetes wants)."""

    id: str
    path: RuleNode
    rule: str
    message: str
    field_path: str | None = None
    reason: RuleReason = RuleReason.INVALID
    message_expression: str | None = None
    """A CEL expression for the message, when it names values (`message` is the fallback)."""


@dataclass(frozen=True, slots=True)
class SchemaRule:
    """A rule the OpenAPI schema enforces by structure (no CEL), re-checked by the hook."""

    id: str
    message: str


ROLE_NAMES_UNIQUE: Final = SchemaRule(
    id="role-names-unique",
    message="spec.roles[].name must be unique within the set: rename or remove the duplicate role",
)


def _is_external(role: str) -> str:
    return f"(has({role}.scaling) && has({role}.scaling.mode) && {role}.scaling.mode == 'External')"


def _annotated(node: str) -> str:
    """Whether `node`'s metadata carries an exclusive-placement annotation."""
    annotations = f"{node}.metadata.annotations"
    any_key = " || ".join(f"'{key}' in {annotations}" for key in api.EXCLUSIVE_ANNOTATIONS)
    return f"has({node}.metadata) && has({annotations}) && ({any_key})"


def _carries_exclusive_annotation(role: str) -> str:
    leader = f"{role}.spec.leaderWorkerTemplate.leaderTemplate"
    worker = f"{role}.spec.leaderWorkerTemplate.workerTemplate"
    return (
        f"({_annotated(role)}) || (has({leader}) && {_annotated(leader)}) || ({_annotated(worker)})"
    )


_STRATEGY = "self.spec.rolloutStrategy"
_RUC = f"{_STRATEGY}.rollingUpdateConfiguration"
_SURGE = f"{_RUC}.maxSurge"
_UNAVAILABLE = f"{_RUC}.maxUnavailable"
# A role whose maxSurge/maxUnavailable matter: replicas > 0 and a rollingUpdateConfiguration.
_ROLLING = f"has(self.spec.replicas) && self.spec.replicas > 0 && has({_STRATEGY}) && has({_RUC})"
# A non-negative int, or a percentage string ("[0-9]+%" as upstream parses it) of at most 100%.
_PERCENT_AT_MOST_100 = "'^0*(100|[0-9]{1,2})%$'"


def _int_or_percent(value: str) -> str:
    return f"(type({value}) == int ? {value} >= 0 : {value}.matches({_PERCENT_AT_MOST_100}))"


# maxSurge resolves (rounding up) to 0 exactly when it is 0 or "0%" (the role has replicas > 0).
_SURGE_IS_ZERO = (
    f"(!has({_SURGE}) || (type({_SURGE}) == int ? {_SURGE} == 0 : {_SURGE}.matches('^0+%$')))"
)
# maxUnavailable resolves (rounding down) to 0 when it is 0, or a percentage p with
# p * replicas < 100; p <= 99 then, so the regular expression also keeps int() in range.
_UNAVAILABLE_IS_ZERO = (
    f"(has({_UNAVAILABLE}) && (type({_UNAVAILABLE}) == int ? {_UNAVAILABLE} == 0"
    f" : ({_UNAVAILABLE}.matches('^0*[0-9]{{1,2}}%$')"
    f" && int({_UNAVAILABLE}.substring(0, {_UNAVAILABLE}.size() - 1)) * self.spec.replicas"
    " < 100)))"
)

REPLICAS_ALL_OR_NOTHING: Final = CelRule(
    id="replicas-all-or-nothing",
    path=RuleNode.SPEC,
    field_path=".roles",
    # A negative count is the schema's error (`minimum: 0`), which the API server reports too:
    # this rule says nothing more of it.
    rule=(
        f"self.roles.exists(r, !{_is_external('r')} && has(r.spec.replicas)"
        " && r.spec.replicas < 0)"
        f" || self.roles.all(r, {_is_external('r')} || !has(r.spec.replicas)"
        " || r.spec.replicas == 0)"
        f" || self.roles.all(r, {_is_external('r')}"
        " || (has(r.spec.replicas) && r.spec.replicas > 0))"
    ),
    message=(
        "spec.roles[].spec.replicas must be 0 on every role that is not External, or greater than"
        " 0 on every such role (External roles are exempt): set them all to 0 to scale the set"
        " to zero, or give each at least 1"
    ),
)

ROLLOUT_TYPE_ROLLING_UPDATE: Final = CelRule(
    id="rollout-type-rolling-update",
    path=RuleNode.ROLE,
    field_path=".spec.rolloutStrategy.type",
    rule=(
        f"!has({_STRATEGY}) || !has({_STRATEGY}.type)"
        f" || {_STRATEGY}.type == 'RollingUpdate' || {_STRATEGY}.type == ''"
    ),
    message=(
        "spec.roles[].spec.rolloutStrategy.type must be RollingUpdate or omitted: the"
        " DisaggregatedSet controller runs one coordinated rolling update across roles"
    ),
)

ROLLOUT_PARTITION_UNSET: Final = CelRule(
    id="rollout-partition-unset",
    path=RuleNode.ROLE,
    field_path=".spec.rolloutStrategy.rollingUpdateConfiguration.partition",
    reason=RuleReason.FORBIDDEN,
    rule=(f"!has({_STRATEGY}) || !has({_RUC}) || !has({_RUC}.partition) || {_RUC}.partition == 0"),
    message=(
        "spec.roles[].spec.rolloutStrategy.rollingUpdateConfiguration.partition is not supported:"
        " remove it or set it to 0 (the DisaggregatedSet controller manages rollouts across roles)"
    ),
)

MAX_SURGE_INT_OR_PERCENT: Final = CelRule(
    id="max-surge-int-or-percent",
    path=RuleNode.ROLE,
    field_path=".spec.rolloutStrategy.rollingUpdateConfiguration.maxSurge",
    rule=f"!({_ROLLING}) || !has({_SURGE}) || {_int_or_percent(_SURGE)}",
    message=(
        "spec.roles[].spec.rolloutStrategy.rollingUpdateConfiguration.maxSurge must be a"
        " non-negative integer or a percentage from 0% to 100% (for example 25%)"
    ),
)

MAX_UNAVAILABLE_INT_OR_PERCENT: Final = CelRule(
    id="max-unavailable-int-or-percent",
    path=RuleNode.ROLE,
    field_path=".spec.rolloutStrategy.rollingUpdateConfiguration.maxUnavailable",
    rule=f"!({_ROLLING}) || !has({_UNAVAILABLE}) || {_int_or_percent(_UNAVAILABLE)}",
    message=(
        "spec.roles[].spec.rolloutStrategy.rollingUpdateConfiguration.maxUnavailable must be a"
        " non-negative integer or a percentage from 0% to 100% (for example 25%)"
    ),
)

SURGE_OR_UNAVAILABLE_NONZERO: Final = CelRule(
    id="surge-or-unavailable-nonzero",
    path=RuleNode.ROLE,
    field_path=".spec.rolloutStrategy.rollingUpdateConfiguration.maxUnavailable",
    rule=f"!({_ROLLING}) || !({_SURGE_IS_ZERO} && {_UNAVAILABLE_IS_ZERO})",
    message=(
        "spec.roles[].spec.rolloutStrategy.rollingUpdateConfiguration.maxUnavailable must not be"
        " 0 when maxSurge is 0, or the rollout can never progress (percentages are of the role's"
        " spec.replicas; maxSurge rounds up, maxUnavailable rounds down): set maxSurge or"
        " maxUnavailable to at least 1"
    ),
)

# What LeaderWorkerSet's admission refuses of the LWS a role becomes (its webhook at 060ab4d and
# v0.8.0; hooks/core/admission.py predicts all of it for each LWS a sync writes, this is the part
# a role's spec decides alone). A role's size, as the LWS CRD defaults it.
_LWT = "self.spec.leaderWorkerTemplate"
_SIZE = f"(has({_LWT}.size) ? {_LWT}.size : {limits.LWS_DEFAULT_SIZE})"
_SGP = f"{_LWT}.subGroupPolicy"
_SGS = f"{_SGP}.subGroupSize"

LWS_SIZE_AT_LEAST_ONE: Final = CelRule(
    id="lws-size-at-least-one",
    path=RuleNode.ROLE,
    field_path=".spec.leaderWorkerTemplate.size",
    rule=f"{_SIZE} >= 1",
    message=(
        "spec.roles[].spec.leaderWorkerTemplate.size must be at least 1 (a group is its leader"
        " and size - 1 workers): LeaderWorkerSet refuses a smaller size"
    ),
)

LWS_PODS_FIT_INT32: Final = CelRule(
    id="lws-pods-fit-int32",
    path=RuleNode.ROLE,
    field_path=".spec.replicas",
    rule=(
        f"{_is_external('self')} || !has(self.spec.replicas)"
        f" || self.spec.replicas * {_SIZE} <= {limits.INT32_MAX}"
    ),
    message=(
        "spec.roles[].spec.replicas times spec.leaderWorkerTemplate.size (the role's pods in one"
        f" slice) must be at most {limits.INT32_MAX}: LeaderWorkerSet refuses more"
    ),
)

LWS_SUBGROUP_SIZE: Final = CelRule(
    id="lws-subgroup-size",
    path=RuleNode.ROLE,
    field_path=".spec.leaderWorkerTemplate.subGroupPolicy.subGroupSize",
    rule=(
        f"!has({_SGP}) || (has({_SGS}) && {_SGS} >= 1 && {_SGS} <= {_SIZE}"
        f" && ({_SIZE} % {_SGS} == 0 || ({_SIZE} - 1) % {_SGS} == 0)"
        f" && (!has({_SGP}.subGroupPolicyType) || {_SGP}.subGroupPolicyType != 'LeaderExcluded'"
        f" || ({_SIZE} - 1) % {_SGS} == 0))"
    ),
    message=(
        "spec.roles[].spec.leaderWorkerTemplate.subGroupPolicy.subGroupSize must be set, from 1"
        " to size, and divide size or size - 1 (size - 1 with subGroupPolicyType"
        " LeaderExcluded): LeaderWorkerSet refuses it otherwise"
    ),
)

LWS_SUBGROUP_EXCLUSIVE_NEEDS_SUBGROUPS: Final = CelRule(
    id="lws-subgroup-exclusive-needs-subgroups",
    path=RuleNode.ROLE,
    field_path=".metadata.annotations",
    rule=(
        "!(has(self.metadata) && has(self.metadata.annotations)"
        f" && '{api.SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION}' in self.metadata.annotations)"
        f" || has({_SGP})"
    ),
    message=(
        f"spec.roles[].metadata.annotations may carry {api.SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION}"
        " only with spec.leaderWorkerTemplate.subGroupPolicy: LeaderWorkerSet refuses it"
        " without subgroups"
    ),
)

PLACEMENT_TOPOLOGY_REQUIRED: Final = CelRule(
    id="placement-topology-required",
    path=RuleNode.PLACEMENT_POLICY,
    field_path=".topology",
    reason=RuleReason.REQUIRED,
    rule="!has(self.type) || self.type == 'None' || (has(self.topology) && self.topology != '')",
    message=(
        "spec.placementPolicy.topology is required when spec.placementPolicy.type is not None:"
        " set it to a node-label key (for example cloud.google.com/gke-nodepool) or set the type"
        " to None"
    ),
)

PLACEMENT_EXCLUSIVE_ANNOTATION_CONFLICT: Final = CelRule(
    id="placement-exclusive-annotation-conflict",
    path=RuleNode.SPEC,
    field_path=".roles",
    reason=RuleReason.FORBIDDEN,
    rule=(
        "!has(self.placementPolicy) || !has(self.placementPolicy.type)"
        " || self.placementPolicy.type == 'None'"
        f" || self.roles.all(r, !({_carries_exclusive_annotation('r')}))"
    ),
    message=(
        f"spec.roles[] must not carry the {api.EXCLUSIVE_TOPOLOGY_ANNOTATION} or"
        f" {api.SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION} annotation (in its metadata or its"
        " leader or worker pod template) while spec.placementPolicy.type is not None: remove"
        " the annotation or set spec.placementPolicy.type to None"
    ),
)

EXTERNAL_SINGLE_SLICE: Final = CelRule(
    id="external-single-slice",
    path=RuleNode.SPEC,
    field_path=".slices",
    reason=RuleReason.FORBIDDEN,
    rule=f"!has(self.slices) || self.slices <= 1 || !self.roles.exists(r, {_is_external('r')})",
    message=(
        "spec.slices must be 1 while any role has scaling.mode External: set spec.slices to 1 or"
        " change those roles to scaling.mode Static"
    ),
)

# The name budget (docs/rollout.md, "Names and their budget"): the longest name a role makes.
_SLICE_DIGITS = "size(string((has(self.spec.slices) ? self.spec.slices : 1) - 1))"
_LAST_GROUP = "(has(r.spec.replicas) && r.spec.replicas > 1 ? r.spec.replicas - 1 : 0)"
_SUFFIX = (
    f"(1 + size(string({_LAST_GROUP})) + {naming.POD_REVISION_LABEL_FIXED - 1}"
    f" > {len(naming.SERVICE_SUFFIX)} ? 1 + size(string({_LAST_GROUP}))"
    f" + {naming.POD_REVISION_LABEL_FIXED - 1} : {len(naming.SERVICE_SUFFIX)})"
)
_OVERHEAD = f"({naming.SEPARATORS} + {_SLICE_DIGITS} + {naming.REVISION_LENGTH} + {_SUFFIX})"
_NAMES_LENGTH = f"(size(self.metadata.name) + size(r.name) + {_OVERHEAD})"
_NAMES_FIT = f"{_NAMES_LENGTH} <= {naming.DNS1035_LABEL_MAX}"
_NAMES_TOO_LONG = (
    f"would exceed the DNS-1035 limit of {naming.DNS1035_LABEL_MAX} characters (accounting for"
    " service name and StatefulSet revision hash labels); reduce the DisaggregatedSet name and/or"
    " role name"
)
GENERATED_NAMES_TEMPLATE: Final = (
    f"the generated names ({{length}} chars) {_NAMES_TOO_LONG} (combined limit:"
    " {combined_limit} characters)"
)
"""Upstream's message, per role (`str.format` with `length` and `combined_limit`)."""


_DIGITS = "[" + ", ".join(f"'{digit}'" for digit in "0123456789") + "]"


def _cel_decimal(value: str) -> str:
    """A CEL string expression of the decimal digits of an int expression in 0..999, built from
    one-character literals: kube-apiserver estimates `string(int)` as long as a whole request and
    would refuse the message expression as 100 times over its cost budget."""
    number = f"({value})"
    return (
        f"({number} >= 100 ? {_DIGITS}[{number} / 100 % 10] : '')"
        f" + ({number} >= 10 ? {_DIGITS}[{number} / 10 % 10] : '')"
        f" + {_DIGITS}[{number} % 10]"
    )


def _cel_template(template: str, values: dict[str, str]) -> str:
    """A CEL string expression of a `str.format` template whose fields are CEL ints in 0..999."""
    parts = []
    for text, name, _, _ in string.Formatter().parse(template):
        parts.append(repr(text))
        if name is not None:
            parts.append(_cel_decimal(values[name]))
    return " + ".join(part for part in parts if part != "''")


GENERATED_NAMES_FIT: Final = CelRule(
    id="generated-names-fit",
    path=RuleNode.ROOT,
    field_path=".spec.roles",
    rule=f"!has(self.metadata.name) || self.spec.roles.all(r, {_NAMES_FIT})",
    message=f"the generated names {_NAMES_TOO_LONG}",
    message_expression=(
        f"self.spec.roles.filter(r, !({_NAMES_FIT})).map(r, "
        + _cel_template(
            GENERATED_NAMES_TEMPLATE,
            {
                "length": _NAMES_LENGTH,
                "combined_limit": f"{naming.DNS1035_LABEL_MAX} - {_OVERHEAD}",
            },
        )
        + ")[0]"
    ),
)

SCALER_NAME_FITS: Final = CelRule(
    id="scaler-name-fits",
    path=RuleNode.ROOT,
    field_path=".spec.roles",
    rule=(
        "!has(self.metadata.name) || self.spec.roles.all(r,"
        f" !{_is_external('r')} || size(self.metadata.name) + 1 + size(r.name)"
        f" <= {naming.DNS1123_SUBDOMAIN_MAX})"
    ),
    message=(
        "metadata.name and the name of an External role in spec.roles[] are too long together:"
        " the DisaggregatedSetRoleScaler name <metadata.name>-<role> must be at most"
        f" {naming.DNS1123_SUBDOMAIN_MAX}"
        " characters; shorten the DisaggregatedSet name or the role name"
    ),
)

CEL_RULES: Final[tuple[CelRule, ...]] = (
    REPLICAS_ALL_OR_NOTHING,
    ROLLOUT_TYPE_ROLLING_UPDATE,
    ROLLOUT_PARTITION_UNSET,
    MAX_SURGE_INT_OR_PERCENT,
    MAX_UNAVAILABLE_INT_OR_PERCENT,
    SURGE_OR_UNAVAILABLE_NONZERO,
    PLACEMENT_TOPOLOGY_REQUIRED,
    PLACEMENT_EXCLUSIVE_ANNOTATION_CONFLICT,
    EXTERNAL_SINGLE_SLICE,
    GENERATED_NAMES_FIT,
    SCALER_NAME_FITS,
    LWS_SIZE_AT_LEAST_ONE,
    LWS_PODS_FIT_INT32,
    LWS_SUBGROUP_SIZE,
    LWS_SUBGROUP_EXCLUSIVE_NEEDS_SUBGROUPS,
)
"""Every CEL rule of the DisaggregatedSet CRD, in the order of the README's Validation section."""


RECORD_ROLES_IMMUTABLE: Final = CelRule(
    id="record-roles-immutable",
    path=RuleNode.RECORD_ROLES,
    rule="self == oldSelf",
    message=(
        "roles are immutable: a DisaggregatedSetRevision records the roles of its revision once;"
        " to record other roles, delete it"
    ),
)

RECORD_ROLE_NAMES_UNIQUE: Final = CelRule(
    id="record-role-names-unique",
    path=RuleNode.RECORD_ROLES,
    rule="self.all(r, self.filter(s, s.name == r.name).size() == 1)",
    message="roles[].name must be unique: a record holds each role of its revision once",
)

RECORD_FIRST_REVISION_IMMUTABLE: Final = CelRule(
    id="record-first-revision-immutable",
    path=RuleNode.RECORD_FIRST_REVISION,
    rule="self == oldSelf",
    message=(
        "firstRevision is immutable: it is the number the DisaggregatedSetRevision was created"
        " with, which tells a rollback from a new revision"
    ),
)

RECORD_PACKED_ROLES_IMMUTABLE: Final = CelRule(
    id="record-packed-roles-immutable",
    path=RuleNode.RECORD_PACKED_ROLES,
    rule="self == oldSelf",
    message=(
        "packedRoles are immutable: a DisaggregatedSetRevision records the roles of its revision"
        " once; to record other roles, delete it"
    ),
)

RECORD_ONE_ROLES_FORM: Final = CelRule(
    id="record-one-roles-form",
    path=RuleNode.ROOT,
    rule="has(self.packedRoles) != has(self.roles)",
    message=(
        "a DisaggregatedSetRevision holds its roles once: either packedRoles (as this version"
        " writes them) or roles (as earlier versions did)"
    ),
)

RECORD_ROLES_FORM_KEPT: Final = CelRule(
    id="record-roles-form-kept",
    path=RuleNode.ROOT,
    rule="has(self.packedRoles) == has(oldSelf.packedRoles)",
    message=(
        "a DisaggregatedSetRevision keeps the form its roles were recorded in (packedRoles or"
        " roles): its roles are immutable"
    ),
)

RECORD_CEL_RULES: Final[tuple[CelRule, ...]] = (
    RECORD_ROLES_IMMUTABLE,
    RECORD_ROLE_NAMES_UNIQUE,
    RECORD_PACKED_ROLES_IMMUTABLE,
    RECORD_ONE_ROLES_FORM,
    RECORD_ROLES_FORM_KEPT,
    RECORD_FIRST_REVISION_IMMUTABLE,
)
"""The CEL rules of the DisaggregatedSetRevision CRD. The hook re-checks the names and the one
form of the roles, not the transition rules; it checks instead that a record's roles hash to its
revision (docs/safety.md)."""
