"""The hook's re-check of the CRD's rules, which `sync` runs before it acts (an older or
hand-edited CRD may have let a set in: docs/safety.md, "Bad input").

Each check reports under the id and message of its rule in `hooks.api.rules`; what pydantic
checks when the spec is parsed is not repeated. Absent fields read as the CRD defaults them; an
absent `replicas` is unset, counted with the zero side by rule 2 and exempt from rule 4, as
upstream's rules do. Never raises for bad data. Violations come in rule-table order, then by
role index (rule 4's three checks role by role).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, Final

from hooks import api
from hooks.api import naming, rules
from hooks.core import planner

_PERCENT: Final = re.compile(r"[0-9]+%")
_ROLL_PATH: Final = "spec.rolloutStrategy"
_RUC_PATH: Final = f"{_ROLL_PATH}.rollingUpdateConfiguration"


def check(*, name: str, spec: api.DisaggregatedSetSpec) -> tuple[api.Violation, ...]:
    """Every broken rule of a parsed spec; empty when the set is valid."""
    return (
        *_role_names_and_replicas(spec),
        *_rollout_strategy(spec),
        *_placement(spec),
        *_external_single_slice(spec),
        *_names(name=name, spec=spec),
        *_lws_admission(spec),
    )


def _violation(rule: rules.CelRule | rules.SchemaRule, field: str) -> api.Violation:
    return api.Violation(rule=rule.id, field=field, message=rule.message)


def _role_path(index: int, suffix: str = "") -> str:
    return f"spec.roles[{index}]" + (f".{suffix}" if suffix else "")


def _role_names_and_replicas(spec: api.DisaggregatedSetSpec) -> Iterator[api.Violation]:
    seen: set[str] = set()
    for index, role in enumerate(spec.roles):
        if role.name in seen:
            yield _violation(rules.ROLE_NAMES_UNIQUE, _role_path(index, "name"))
        seen.add(role.name)
    counted = [role.replicas for role in spec.roles if not role.is_external]
    if any(replicas is not None and replicas < 0 for replicas in counted):
        return  # the schema's error (replicas at least 0), not this rule's: said once
    all_zero = all(replicas is None or replicas == 0 for replicas in counted)
    all_positive = all(replicas is not None and replicas > 0 for replicas in counted)
    if not (all_zero or all_positive):
        yield _violation(rules.REPLICAS_ALL_OR_NOTHING, "spec.roles")


def _rollout_strategy(spec: api.DisaggregatedSetSpec) -> Iterator[api.Violation]:
    """The rolloutStrategy's rules: type, partition, then rule 4 (per role with replicas > 0 and
    a rollingUpdateConfiguration)."""
    for index, role in enumerate(spec.roles):
        if role.rollout_type not in (None, "", "RollingUpdate"):
            yield _violation(
                rules.ROLLOUT_TYPE_ROLLING_UPDATE, _role_path(index, f"{_ROLL_PATH}.type")
            )
    for index, role in enumerate(spec.roles):
        config = role.rolling_update_configuration
        if config is not None and config.get("partition", 0) != 0:
            yield _violation(
                rules.ROLLOUT_PARTITION_UNSET, _role_path(index, f"{_RUC_PATH}.partition")
            )
    for index, role in enumerate(spec.roles):
        replicas = role.replicas
        budget = role.rolling_update_budget
        if budget is None or replicas is None or replicas <= 0:
            continue
        yield from budget_violations(
            max_surge=budget[0],
            max_unavailable=budget[1],
            replicas=replicas,
            path=_role_path(index, _RUC_PATH),
        )


def budget_violations(
    *, max_surge: Any, max_unavailable: Any, replicas: int, path: str
) -> Iterator[api.Violation]:
    """Rule 4 for one role with `replicas` > 0, its maxSurge and maxUnavailable defaulted,
    under `path`: the pair is checked only when both values are valid (as upstream's webhook)."""
    surge = int_or_percent(max_surge)
    unavailable = int_or_percent(max_unavailable)
    if surge is None:
        yield _violation(rules.MAX_SURGE_INT_OR_PERCENT, f"{path}.maxSurge")
    if unavailable is None:
        yield _violation(rules.MAX_UNAVAILABLE_INT_OR_PERCENT, f"{path}.maxUnavailable")
    if surge is not None and unavailable is not None and both_zero(surge, unavailable, replicas):
        yield _violation(rules.SURGE_OR_UNAVAILABLE_NONZERO, f"{path}.maxUnavailable")


def both_zero(surge: int | str, unavailable: int | str, replicas: int) -> bool:
    """Whether maxSurge (rounded up) and maxUnavailable (rounded down) both resolve to 0."""
    return (
        planner.scaled_value(surge, total=replicas, round_up=True) == 0
        and planner.scaled_value(unavailable, total=replicas, round_up=False) == 0
    )


def int_or_percent(value: Any) -> int | str | None:
    """A valid maxSurge/maxUnavailable in canonical form (a percentage without leading zeros),
    or None: valid is a non-negative int or "<digits>%" of at most 100% within the CRD's
    `maxLength` (upstream's IsValidPercent and its bound)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if (
        not isinstance(value, str)
        or len(value) > api.INT_OR_PERCENT_MAX_LENGTH
        or _PERCENT.fullmatch(value) is None
    ):
        return None
    digits = value[:-1].lstrip("0") or "0"
    if len(digits) > 3 or int(digits) > 100:
        return None
    return f"{digits}%"


def _placement(spec: api.DisaggregatedSetSpec) -> Iterator[api.Violation]:
    policy = spec.placement_policy
    if policy is None or not policy.is_active:
        return
    if not policy.topology:
        yield _violation(rules.PLACEMENT_TOPOLOGY_REQUIRED, "spec.placementPolicy.topology")
    for index, role in enumerate(spec.roles):
        annotation_maps = [role.annotations]
        for template in role.pod_templates():
            metadata = template.get("metadata") or {}
            annotation_maps.append(metadata.get("annotations") or {})
        if any(
            key in annotations
            for annotations in annotation_maps
            for key in api.EXCLUSIVE_ANNOTATIONS
        ):
            yield _violation(rules.PLACEMENT_EXCLUSIVE_ANNOTATION_CONFLICT, _role_path(index))


def _external_single_slice(spec: api.DisaggregatedSetSpec) -> Iterator[api.Violation]:
    if spec.slices > 1 and any(role.is_external for role in spec.roles):
        yield _violation(rules.EXTERNAL_SINGLE_SLICE, "spec.slices")


def _names(*, name: str, spec: api.DisaggregatedSetSpec) -> Iterator[api.Violation]:
    """Rule 7: every role's generated names fit their budget (`naming.budget`), and an External
    role's scaler name <name>-<role> fits 253."""
    for index, role in enumerate(spec.roles):
        budget = naming.budget(
            set_name=name, role=role.name, slices=spec.slices, replicas=role.replicas
        )
        if not budget.fits:
            yield api.Violation(
                rule=rules.GENERATED_NAMES_FIT.id,
                field=_role_path(index, "name"),
                message=rules.GENERATED_NAMES_TEMPLATE.format(
                    length=budget.length, combined_limit=budget.combined_limit
                ),
            )
    for index, role in enumerate(spec.roles):
        scaler = naming.scaler_name(set_name=name, role=role.name)
        if role.is_external and len(scaler) > naming.DNS1123_SUBDOMAIN_MAX:
            yield _violation(rules.SCALER_NAME_FITS, _role_path(index, "name"))


def warnings(*, name: str, spec: api.DisaggregatedSetSpec) -> list[str]:
    """What a valid spec asks for that is ignored: each External role's `spec.replicas` above 1,
    in the words of the kit's ValidatingAdmissionPolicy (1 is the CRD's default: silent)."""
    return [
        f'spec.roles[name="{role.name}"].spec.replicas is {role.replicas} but the role has'
        " scaling.mode External, so this value is ignored: its replicas are driven by the"
        f' DisaggregatedSetRoleScaler "{naming.scaler_name(set_name=name, role=role.name)}"'
        " (scale that object or let its autoscaler do it). Remove spec.replicas from the role"
        " or set it to 1."
        for role in spec.roles
        if role.is_external and role.replicas is not None and role.replicas > 1
    ]


def _lws_admission(spec: api.DisaggregatedSetSpec) -> Iterator[api.Violation]:
    """What LeaderWorkerSet's admission refuses of a role's LWS that its spec decides alone."""
    for index, role in enumerate(spec.roles):
        size = role.size
        if size < 1:
            yield _violation(
                rules.LWS_SIZE_AT_LEAST_ONE, _role_path(index, "spec.leaderWorkerTemplate.size")
            )
        pods = None if role.is_external or role.replicas is None else role.replicas * size
        if pods is not None and pods > api.INT32_MAX:
            yield _violation(rules.LWS_PODS_FIT_INT32, _role_path(index, "spec.replicas"))
        policy = role.sub_group_policy
        if policy is not None and not subgroups_fit(policy, size=size):
            yield _violation(
                rules.LWS_SUBGROUP_SIZE,
                _role_path(index, "spec.leaderWorkerTemplate.subGroupPolicy.subGroupSize"),
            )
        exclusive = api.SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION in role.annotations
        if exclusive and policy is None:
            yield _violation(
                rules.LWS_SUBGROUP_EXCLUSIVE_NEEDS_SUBGROUPS,
                _role_path(index, "metadata.annotations"),
            )


def subgroups_fit(policy: api.JsonObject, *, size: int) -> bool:
    """Whether LeaderWorkerSet admits a subGroupPolicy for groups of `size` pods."""
    subgroup = policy.get("subGroupSize")
    if not isinstance(subgroup, int) or isinstance(subgroup, bool) or not 1 <= subgroup <= size:
        return False
    if policy.get("subGroupPolicyType") == "LeaderExcluded":
        return (size - 1) % subgroup == 0
    return size % subgroup == 0 or (size - 1) % subgroup == 0
