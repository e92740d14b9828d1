"""What `kubectl ds adopt --orphans` asks of an orphan before it hands it to a set: that it is
exactly what the set would have made at its name, in the object and in Metacontroller's
last-applied copy alike (the rules: docs/safety.md, "What `kubectl ds adopt` trusts";
`difference` names the first disagreement). An LWS is compared with what
`hooks.core.children.render_lws` makes for its role, slice and revision, as LWS's admission stores
it (`admitted`), its template in upstream's typed Go encoding (`hooks.gocompat.gojson`), as
upstream's controller re-encodes it. Pure: reads the objects kubectl printed, as parsed.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from hooks import api
from hooks.api import limits, naming
from hooks.api.documents import JsonObject, list_of, object_of
from hooks.core import children, history, problems, records
from hooks.gocompat import gojson, gotext
from hooks.kubectl import TEMPLATE, dig, rollout

POD_TEMPLATES: Final = ("leaderTemplate", "workerTemplate")
SERVED: Final[Mapping[str, object]] = {
    "clusterIPs": ["None"],
    "type": "ClusterIP",
    "sessionAffinity": "None",
    "internalTrafficPolicy": "Cluster",
    "ipFamilies": None,
    "ipFamilyPolicy": None,
}
"""The fields the API server fills in for a headless Service, with the value it gives (None: any,
as the cluster's IP families decide)."""
SHOWN_CHARACTERS: Final = 80
"""Of a value a difference names."""


@dataclass(frozen=True, slots=True)
class Source:
    """What vouches for the templates of a revision: the spec, or a history record."""

    what: str
    roles: Mapping[str, api.Role]


@dataclass(frozen=True, slots=True)
class Known:
    """The revisions a set can vouch for (`sources`, by revision: the spec when it is the
    spec's, then its records by name), and what it renders them with."""

    set_name: str
    policy: api.PlacementPolicy | None
    spec_revision: str | None
    sources: Mapping[str, tuple[Source, ...]]


def known(parent: records.Parent, items: Iterable[records.ObservedObject]) -> Known:
    """What `parent` can vouch for: its spec's revision and the revisions of its records among
    `items` that count, or would once adopted (orphans that would count)."""
    sources: dict[str, list[Source]] = {}
    try:
        spec_revision: str | None = rollout.spec_revision(parent)
    except rollout.RolloutError:
        spec_revision = None
    if parent.spec is not None and spec_revision is not None:
        sources[spec_revision] = [Source("the spec", {r.name: r for r in parent.spec.roles})]
    for item in sorted(items, key=lambda item: item.name):
        if item.kind is not records.ChildKind.REVISION or item.stored is None:
            continue
        if item.controller_uid is None and not item.owner_uids:
            why = history.problem_with_body(item, set_name=parent.name)
        else:
            why = history.problem_with(item, set_name=parent.name, set_uid=parent.uid)
        if why is None:
            roles = {role.name: role for role in item.stored.roles}
            sources.setdefault(item.stored.hash, []).append(Source(f"record {item.name}", roles))
    return Known(
        set_name=parent.name,
        policy=parent.spec.placement_policy if parent.spec is not None else None,
        spec_revision=spec_revision,
        sources={key: tuple(found) for key, found in sources.items()},
    )


def difference(item: records.ObservedObject, known: Known) -> str | None:
    """Why orphan `item` is not what the set would have made at its name; None when it is."""
    if item.kind is records.ChildKind.LWS:
        return _lws_difference(item, known)
    if item.kind is records.ChildKind.SERVICE:
        return _service_difference(item, known)
    if item.kind is records.ChildKind.SCALER:
        return _scaler_difference(item, known)
    return history.problem_with_body(item, set_name=known.set_name)


def admitted(spec: JsonObject) -> JsonObject:
    """A copy of an LWS spec as LWS's defaulting webhook leaves it (kubernetes-sigs/lws at
    060ab4d, `LeaderWorkerSetWebhook.Default`, and the CRD's defaults), so that an LWS made where
    that webhook runs compares equal to one made where it does not."""
    result = copy.deepcopy(spec)
    template = _defaulted(result, TEMPLATE)
    if template is not None and not template.get("restartPolicy"):
        template["restartPolicy"] = "RecreateGroupOnPodRestart"
    elif template is not None and template["restartPolicy"] == "Default":
        template["restartPolicy"] = "None"
    strategy = _defaulted(result, "rolloutStrategy")
    if strategy is not None and not strategy.get("type"):
        strategy["type"] = "RollingUpdate"
    if strategy is not None and strategy["type"] == "RollingUpdate":
        configuration = _defaulted(strategy, "rollingUpdateConfiguration")
        if configuration is not None:
            configuration.setdefault("maxUnavailable", limits.LWS_DEFAULT_MAX_UNAVAILABLE)
            configuration.setdefault("maxSurge", limits.LWS_DEFAULT_MAX_SURGE)
            configuration.setdefault("partition", 0)
    network = _defaulted(result, "networkConfig")
    if network is not None and network.get("subdomainPolicy") is None:
        network["subdomainPolicy"] = "Shared"
    return result


def _defaulted(container: JsonObject, key: str) -> JsonObject | None:
    """`container[key]`, an object, made empty when it is absent; None when it holds anything
    else (left as it is, to compare as it is)."""
    if container.get(key) is None:
        container[key] = {}
    value = container[key]
    return value if isinstance(value, dict) else None


@dataclass(frozen=True, slots=True)
class _View:
    """An object as stored, or what the hooks would write back for it."""

    where: str
    labels: JsonObject
    annotations: JsonObject
    spec: JsonObject


def _views(item: records.ObservedObject) -> list[_View]:
    """The object itself, and Metacontroller's last-applied copy of it when there is one."""
    observed = _View("", dict(item.labels), dict(item.annotations), item.spec)
    if api.LAST_APPLIED_ANNOTATION not in item.annotations:
        return [observed]
    where = "its last-applied annotation (what the set would write back): "
    return [observed, _view_of(item.applied, where=where)]


def _view_of(obj: JsonObject, *, where: str) -> _View:
    """A whole object as JSON (a last-applied copy, or one the set renders) as a view."""
    metadata = dig(obj, "metadata")
    labels, annotations = dig(metadata, "labels"), dig(metadata, "annotations")
    return _View(where, labels, annotations, dig(obj, "spec"))


@dataclass(frozen=True, slots=True)
class _Lws:
    """What adoption compares of an LWS view: the spec as admitted without replicas and the
    template (`rest`), and the template in upstream's typed Go encoding (or, not `readable`, why
    it has none)."""

    where: str
    labels: JsonObject
    annotations: JsonObject
    rest: JsonObject
    template: str
    readable: bool


def _lws(view: _View) -> _Lws:
    rest = admitted(view.spec)
    template = rest.pop(TEMPLATE)
    rest.pop("replicas", None)
    try:
        text, readable = gojson.committed_table().encode(template), True
    except gotext.EncodingError as error:
        text, readable = str(error), False
    labels = _without(view.labels, {api.CONTROLLER_UID_LABEL})
    unrendered = {api.LAST_APPLIED_ANNOTATION, api.ANNOTATION_INITIAL_REPLICAS}
    annotations = _without(view.annotations, unrendered)
    return _Lws(view.where, labels, annotations, rest, text, readable)


def _lws_difference(item: records.ObservedObject, known: Known) -> str | None:
    placed = _placed(item, known)
    if isinstance(placed, str):
        return placed
    slice_index, revision_, role_name = placed
    roles = _roles_of(known, revision_, role_name)
    if isinstance(roles, str):
        return roles
    views = [_lws(view) for view in _views(item)]
    closest: _Difference | None = None
    for source, role in roles:
        for policy in _policies(known.policy, item.spec):
            rendered = children.render_lws(
                set_name=known.set_name,
                role=role,
                slice_index=slice_index,
                revision=revision_,
                replicas=0,
                policy=policy,
            )
            wanted = _lws(_view_of(rendered, where=""))
            found = [
                why
                for index, view in enumerate(views)
                if (why := _lws_mismatch(view, wanted, index)) is not None
            ]
            if not found:
                return None
            if closest is None or found[0].at > closest.at:
                words = f"{found[0].words} (as {known.set_name} renders it from {source.what})"
                closest = _Difference(found[0].at, words)
    return None if closest is None else closest.words


def _roles_of(known: Known, revision_: str, role: str) -> list[tuple[Source, api.Role]] | str:
    """Each source's role `role` of revision `revision_`; or why there is none."""
    sources = known.sources.get(revision_, ())
    if not sources:
        return (
            f"its revision {revision_} is neither the spec's ({known.spec_revision or 'none'})"
            " nor one a history record that counts holds, so nothing says what its templates"
            " must be"
        )
    roles = [(source, source.roles[role]) for source in sources if role in source.roles]
    if not roles:
        held = ", ".join(source.what for source in sources)
        return f"revision {revision_} has no role {role!r} ({held})"
    return roles


def _lws_mismatch(seen: _Lws, wanted: _Lws, index: int) -> _Difference | None:
    """The first difference between an LWS (view `index`) and one the set renders."""
    why = (
        _first_difference(seen.labels, wanted.labels, "metadata.labels", (index, 0))
        or _first_difference(
            seen.annotations, wanted.annotations, "metadata.annotations", (index, 1)
        )
        or _first_difference(seen.rest, wanted.rest, "spec", (index, 2))
    )
    if why is None and not seen.readable:
        unreadable = f"spec.{TEMPLATE} is not what upstream's types can read ({seen.template})"
        why = _Difference((index, 3), unreadable)
    if why is None and seen.template != wanted.template:
        found = json.loads(seen.template), json.loads(wanted.template)
        why = _first_difference(*found, f"spec.{TEMPLATE}", (index, 4))
        why = why or _Difference((index, 4), f"spec.{TEMPLATE} differs")
    return None if why is None else _Difference(why.at, seen.where + why.words)


def _policies(
    current: api.PlacementPolicy | None, spec: JsonObject
) -> list[api.PlacementPolicy | None]:
    """The placement policies an LWS may have been rendered with (a placement change reaches an
    LWS only when it is created): the spec's, none, and each kind with a topology key its pod
    templates' required pod-affinity terms name."""
    template = object_of(spec.get(TEMPLATE))
    keys = sorted(
        {
            term["topologyKey"]
            for key in POD_TEMPLATES
            for term in list_of(
                dig(template, key, "spec", "affinity", "podAffinity").get(
                    "requiredDuringSchedulingIgnoredDuringExecution"
                )
            )
            if isinstance(term, dict) and isinstance(term.get("topologyKey"), str)
        }
    )
    found: list[api.PlacementPolicy | None] = [current, None]
    found.extend(
        api.PlacementPolicy(type=kind, topology=key)
        for key in keys
        for kind in (api.PlacementType.EXCLUSIVE_SLICE, api.PlacementType.EXCLUSIVE_TOPOLOGY)
    )
    unique: dict[tuple[str, str | None], api.PlacementPolicy | None] = {}
    for policy in found:
        active = policy is not None and policy.is_active
        key = (policy.type.value, policy.topology) if policy and active else ("None", None)
        unique.setdefault(key, policy)
    return list(unique.values())


def _service_difference(item: records.ObservedObject, known: Known) -> str | None:
    placed = _placed(item, known, service=True)
    if isinstance(placed, str):
        return placed
    slice_index, revision_, role = placed
    labels = naming.service_labels(
        set_name=known.set_name, slice_index=slice_index, revision=revision_, role=role
    )
    wanted = {"clusterIP": "None", "selector": labels}
    for view in _views(item):
        spec = {
            key: value
            for key, value in view.spec.items()
            if not (key in SERVED and SERVED[key] in (None, value))
            and not (key == "ports" and value == [])
        }
        labels_seen = _without(view.labels, {api.CONTROLLER_UID_LABEL})
        annotations = _without(view.annotations, {api.LAST_APPLIED_ANNOTATION})
        why = (
            _first_difference(labels_seen, labels, "metadata.labels")
            or _first_difference(annotations, {}, "metadata.annotations")
            or _first_difference(spec, wanted, "spec")
        )
        if why is not None:
            return view.where + why.words
    return None


def _scaler_difference(item: records.ObservedObject, known: Known) -> str | None:
    role = item.labels.get(api.LABEL_ROLE, "")
    if not role:
        return f"it has no {api.LABEL_ROLE} label"
    name = naming.scaler_name(set_name=known.set_name, role=role)
    if item.name != name:
        return f"its name is not {name!r}, the one its labels give"
    wanted = naming.scaler_labels(set_name=known.set_name, role=role)
    for view in _views(item):
        labels = _without(view.labels, {api.CONTROLLER_UID_LABEL})
        why = _first_difference(labels, wanted, "metadata.labels")
        if why is not None:
            return view.where + why.words
    return None


def _placed(
    item: records.ObservedObject, known: Known, *, service: bool = False
) -> tuple[int, str, str] | str:
    """The slice, revision and role the labels give, when the name is theirs; else why not."""
    revision_ = item.labels.get(api.LABEL_REVISION, "")
    role = item.labels.get(api.LABEL_ROLE, "")
    if not revision_ or not role:
        return f"it lacks the {api.LABEL_REVISION} or the {api.LABEL_ROLE} label"
    if item.slice_index is None:
        slice_label = item.labels.get(api.LABEL_SLICE)
        return f"its {api.LABEL_SLICE} label {slice_label!r} is not a slice number"
    name = naming.lws_name(
        set_name=known.set_name, slice_index=item.slice_index, revision=revision_, role=role
    )
    if service:
        name = naming.service_name(name)
    if item.name != name:
        return f"its name is not {name!r}, the one its labels give"
    return item.slice_index, revision_, role


@dataclass(frozen=True, slots=True)
class _Difference:
    """Where an object first differs from what the set renders, in words, and how far the
    comparison got (positions in the order fields are compared: larger, more agreed)."""

    at: tuple[int, ...]
    words: str


def _first_difference(
    seen: object, wanted: object, path: str, at: tuple[int, ...] = ()
) -> _Difference | None:
    """Where `seen` first differs from `wanted` (fields in `wanted`'s order, then the others)."""
    if isinstance(seen, dict) and isinstance(wanted, dict):
        have, want, step = seen, wanted, path + ".{}"
    elif isinstance(seen, list) and isinstance(wanted, list):
        have, want, step = dict(enumerate(seen)), dict(enumerate(wanted)), path + "[{}]"
    elif seen == wanted:
        return None
    else:
        return _Difference(at, f"{path} is {_shown(seen)}, not {_shown(wanted)}")
    for position, key in enumerate([*want, *(key for key in have if key not in want)]):
        where, here = step.format(key), (*at, position)
        if key not in want:
            return _Difference(here, f"{where} is {_shown(have[key])}, where the set has none")
        if key not in have:
            return _Difference(here, f"{where} is missing (the set has {_shown(want[key])})")
        found = _first_difference(have[key], want[key], where, here)
        if found is not None:
            return found
    return None


def _shown(value: object) -> str:
    return problems.cut(json.dumps(value, sort_keys=True), SHOWN_CHARACTERS)


def _without(value: object, keys: Iterable[str]) -> JsonObject:
    dropped = set(keys)
    return {key: item for key, item in object_of(value).items() if key not in dropped}
