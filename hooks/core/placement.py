"""Placement: the affinity terms that keep a slice in one topology domain.

Given a pod template, returns a copy whose `spec.affinity` has the placement terms appended to
whatever affinity the template already had (docs/rollout.md, Placement). It never mutates its
input. It runs only when an LWS is created, so a placement change reaches a slice on its next
rollout.

All terms are `requiredDuringSchedulingIgnoredDuringExecution` with the policy's topology key:

- podAffinity `name In [set]`, `slice In [slice]`: a slice's roles share one domain.
- podAntiAffinity `name In [set]`, (slice 0 only: `slice Exists`), `slice NotIn [slice]`: this
  set's other slices go elsewhere. Pods without a slice label count as slice 0, so slice 0 must
  not repel them: that is what the extra `Exists` does (an upstream rule kept as is).
- ExclusiveTopology adds podAntiAffinity `name Exists`, `name NotIn [set]`, `slice Exists`: no
  other set's slice shares the domain, while unrelated workloads still may.
"""

from __future__ import annotations

from hooks import api

JsonObject = api.JsonObject


def build_placed_template(
    template: JsonObject, *, policy: api.PlacementPolicy | None, set_name: str, slice_index: int
) -> JsonObject:
    """A copy of a pod template with the placement terms appended to its affinity."""
    # Validation holds a set whose active policy lacks a topology key before this runs.
    if policy is None or not policy.is_active or not policy.topology:
        return template
    topology = str(policy.topology)
    slice_label = str(slice_index)

    def term(*expressions: JsonObject) -> JsonObject:
        return {"labelSelector": {"matchExpressions": list(expressions)}, "topologyKey": topology}

    same_set = _expression(api.LABEL_NAME, "In", set_name)
    spread = [same_set]
    if slice_index == 0:
        spread.append(_expression(api.LABEL_SLICE, "Exists"))
    spread.append(_expression(api.LABEL_SLICE, "NotIn", slice_label))

    affinity_terms = [term(same_set, _expression(api.LABEL_SLICE, "In", slice_label))]
    anti_affinity_terms = [term(*spread)]
    if policy.type is api.PlacementType.EXCLUSIVE_TOPOLOGY:
        anti_affinity_terms.append(
            term(
                _expression(api.LABEL_NAME, "Exists"),
                _expression(api.LABEL_NAME, "NotIn", set_name),
                _expression(api.LABEL_SLICE, "Exists"),
            )
        )

    spec = dict(template.get("spec") or {})
    affinity = dict(spec.get("affinity") or {})
    affinity["podAffinity"] = _with_required_terms(affinity.get("podAffinity"), affinity_terms)
    affinity["podAntiAffinity"] = _with_required_terms(
        affinity.get("podAntiAffinity"), anti_affinity_terms
    )
    spec["affinity"] = affinity
    return {**template, "spec": spec}


def _expression(key: str, operator: str, *values: str) -> JsonObject:
    expression: JsonObject = {"key": key, "operator": operator}
    if values:
        expression["values"] = list(values)
    return expression


def _with_required_terms(existing: object, terms: list[JsonObject]) -> JsonObject:
    section = dict(existing) if isinstance(existing, dict) else {}
    key = "requiredDuringSchedulingIgnoredDuringExecution"
    current = section.get(key)
    section[key] = [*(current if isinstance(current, list) else []), *terms]
    return section
