"""Placement: the affinity terms that keep a slice in one topology domain (docs/rollout.md,
"Placement"), appended to a copy of a pod template (`build_placed_template`) and taken off again
(`without_placement`, for a record rebuilt from running LWS). Never mutates its input.
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
    affinity_terms, anti_affinity_terms = _terms(
        topology=str(policy.topology),
        set_name=set_name,
        slice_index=slice_index,
        exclusive_topology=policy.type is api.PlacementType.EXCLUSIVE_TOPOLOGY,
    )
    spec = dict(template.get("spec") or {})
    affinity = dict(spec.get("affinity") or {})
    affinity["podAffinity"] = _with_required_terms(affinity.get("podAffinity"), affinity_terms)
    affinity["podAntiAffinity"] = _with_required_terms(
        affinity.get("podAntiAffinity"), anti_affinity_terms
    )
    spec["affinity"] = affinity
    return {**template, "spec": spec}


def without_placement(template: JsonObject, *, set_name: str, slice_index: int) -> JsonObject:
    """The pod template as it was before `build_placed_template` placed it in slice
    `slice_index` under any policy and topology key (an empty affinity section of its own does
    not come back); `template` itself when it ends in no such terms."""
    spec = template.get("spec")
    affinity = spec.get("affinity") if isinstance(spec, dict) else None
    if not isinstance(spec, dict) or not isinstance(affinity, dict):
        return template
    placed = _required(affinity, "podAffinity")
    topology = placed[-1].get("topologyKey") if placed and isinstance(placed[-1], dict) else None
    if not isinstance(topology, str):
        return template
    for exclusive_topology in (True, False):
        affinity_terms, anti_affinity_terms = _terms(
            topology=topology,
            set_name=set_name,
            slice_index=slice_index,
            exclusive_topology=exclusive_topology,
        )
        anti = _required(affinity, "podAntiAffinity")
        if placed[-len(affinity_terms) :] == affinity_terms and (
            anti[-len(anti_affinity_terms) :] == anti_affinity_terms
        ):
            kept = dict(affinity)
            _strip(kept, "podAffinity", len(affinity_terms))
            _strip(kept, "podAntiAffinity", len(anti_affinity_terms))
            unplaced = {key: value for key, value in spec.items() if key != "affinity"}
            if kept:
                unplaced["affinity"] = kept
            return {**template, "spec": unplaced}
    return template


def _terms(
    *, topology: str, set_name: str, slice_index: int, exclusive_topology: bool
) -> tuple[list[JsonObject], list[JsonObject]]:
    """The podAffinity and podAntiAffinity terms a policy appends in one slice."""
    slice_label = str(slice_index)

    def term(*expressions: JsonObject) -> JsonObject:
        return {"labelSelector": {"matchExpressions": list(expressions)}, "topologyKey": topology}

    same_set = _expression(api.LABEL_NAME, "In", set_name)
    spread = [same_set]
    # Pods without a slice label count as slice 0, which must not repel them (upstream's rule).
    if slice_index == 0:
        spread.append(_expression(api.LABEL_SLICE, "Exists"))
    spread.append(_expression(api.LABEL_SLICE, "NotIn", slice_label))

    affinity_terms = [term(same_set, _expression(api.LABEL_SLICE, "In", slice_label))]
    anti_affinity_terms = [term(*spread)]
    if exclusive_topology:
        anti_affinity_terms.append(
            term(
                _expression(api.LABEL_NAME, "Exists"),
                _expression(api.LABEL_NAME, "NotIn", set_name),
                _expression(api.LABEL_SLICE, "Exists"),
            )
        )
    return affinity_terms, anti_affinity_terms


def _expression(key: str, operator: str, *values: str) -> JsonObject:
    expression: JsonObject = {"key": key, "operator": operator}
    if values:
        expression["values"] = list(values)
    return expression


_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def _with_required_terms(existing: object, terms: list[JsonObject]) -> JsonObject:
    section = dict(existing) if isinstance(existing, dict) else {}
    current = section.get(_REQUIRED)
    section[_REQUIRED] = [*(current if isinstance(current, list) else []), *terms]
    return section


def _required(affinity: JsonObject, section: str) -> list[object]:
    found = affinity.get(section)
    terms = found.get(_REQUIRED) if isinstance(found, dict) else None
    return terms if isinstance(terms, list) else []


def _strip(affinity: JsonObject, section: str, count: int) -> None:
    """Drop the last `count` required terms of `section` (on a copy), and what empties."""
    kept = dict(affinity[section])
    terms = kept[_REQUIRED][:-count]
    if terms:
        kept[_REQUIRED] = terms
    else:
        del kept[_REQUIRED]
    if kept:
        affinity[section] = kept
    else:
        del affinity[section]
