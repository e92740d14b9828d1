"""Properties of `sync.sync` over random parents and observed children (docs/safety.md).

The parents carry random rollout annotations (paused, partition, hold, history limit, valid or
malformed) and a random `status.creating`. The observed children are what Metacontroller could
send: LWS of the target and of other revisions, of spec roles and removed ones, in kept and
removed slices, with random replicas, readiness and `initial-replicas` annotations (some
garbage); Services of random revisions; scalers of External, Static and removed roles;
DisaggregatedSetRevisions, valid (numbered, some run by every slice) and hostile (mislabelled,
storing another revision's roles, orphaned, numbered past what a history holds or before they were
created, two of one number); some objects with malformed or missing labels, some under the legacy
name `<set>-<revision>-<role>`. Related objects include foreign LWS and scalers at desired names.

(a) Every observed child the answer leaves out is one docs/safety.md allows to go, by the
    predicate of `tests.sim.deletions` (written from docs/safety.md, independent of sync's guard).
(b) The answer is deterministic: the same request gives the same bytes, and so do the request
    with its children maps shuffled and the request in the other hook version.
(c) An invalid spec returns every observed child unchanged (applying the answer with
    Metacontroller's three-way merge changes nothing), keeps the status and says
    Degraded=True with reason InvalidSpec.
(d) Nothing raises on a well-formed request; a malformed child raises `values.RequestError`
    only (the documented non-200 path).
(e) Installed without Services (components/no-services: the controller declares no Services, so
    none is observed), the answer holds no Service, and its other children, its status and its
    resync are those of the same request with Services.

tests/property/test_canary_props.py holds the canary and history properties over the same
requests.


(e) What a newer version wrote is never dropped (docs/operations.md, "Upgrading the hook
    server"): every child of a kind this version does not know is answered as it was last
    applied, and every status field it does not compute is answered as observed, valid spec
    or not.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hooks import api
from hooks.api import limits
from hooks.core import sync, validation
from hooks.gocompat import gotext, revision
from hooks.wire import answers, envelope, values
from hooks.wire import parents as parent_reader
from tests.builders import (
    NAMESPACE,
    NOW,
    lws_status,
    make_ds,
    make_request,
    make_role,
    observe,
)
from tests.sim import apply, views
from tests.sim.deletions import allowed_deletions, child_id

JsonObject = dict[str, Any]

SPEC_ROLES = ("prefill", "decode", "encode", "embed")
TIMES = ("2026-11-29T09:00:00Z", "2026-11-29T10:00:00Z", "2026-11-29T11:00:00Z")
IMAGES = ("example/server:v1", "example/server:v2")
OTHER_IMAGES = ("example/server:v7", "example/server:v8")
EVIL = "evil/miner:latest"
PROPS = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def target_of(parent: JsonObject) -> str | None:
    """The target revision when the spec parses and validates, else None (the hold path)."""
    parsed = parent_reader.parse_parent(parent)
    if parsed.spec is None or parsed.spec_violations:
        return None
    if validation.check(name=parsed.name, spec=parsed.spec):
        return None
    try:
        return revision.compute_revision(
            [(role.name, role.leader_worker_template) for role in parsed.spec.roles]
        )
    except gotext.EncodingError:
        return None


@st.composite
def parents(draw: st.DrawFn, *, valid: bool = True) -> JsonObject:
    count = draw(st.integers(2, 4))
    names = list(SPEC_ROLES[:count])
    external = draw(st.sets(st.sampled_from(names), max_size=1))
    roles = []
    for name in names:
        config = draw(
            st.one_of(
                st.none(),
                st.sampled_from([(s, u) for s in range(3) for u in range(3) if (s, u) != (0, 0)]),
            )
        )
        roles.append(
            make_role(
                name,
                replicas=draw(st.integers(1, 4)),
                image=draw(st.sampled_from(IMAGES)),
                external=name in external,
                max_surge=None if config is None else config[0],
                max_unavailable=None if config is None else config[1],
            )
        )
    slices = 1 if external else draw(st.integers(1, 3))
    status = draw(
        st.one_of(
            st.none(),
            st.builds(
                lambda available, time: {
                    "observedGeneration": 1,
                    "roleStatuses": [],
                    "conditions": [
                        {
                            "type": "Available",
                            "status": "True" if available else "False",
                            "lastTransitionTime": time,
                            "reason": "AllRolesReady",
                            "message": "m",
                            "observedGeneration": 1,
                        },
                        {
                            "type": "Progressing",
                            "status": "False" if available else "True",
                            "lastTransitionTime": time,
                            "reason": "AllRolesReady",
                            "message": "m",
                            "observedGeneration": 1,
                        },
                    ],
                },
                st.booleans(),
                st.sampled_from(TIMES),
            ),
        )
    )
    parent = make_ds(roles=roles, slices=slices, generation=draw(st.integers(1, 4)), status=status)
    annotations = {
        key: value
        for key, values in ANNOTATIONS.items()
        if (value := draw(st.one_of(st.none(), st.sampled_from(values)))) is not None
    }
    if annotations:
        parent["metadata"]["annotations"] = annotations
    creating = draw(
        st.lists(st.sampled_from(CREATING), max_size=3, unique_by=lambda entry: entry["name"])
    )
    if creating:
        parent["status"] = {**(parent.get("status") or {}), "creating": creating}
        parent["status"].setdefault("observedGeneration", parent["metadata"]["generation"])
    if not valid:
        breaker = draw(st.sampled_from(sorted(BREAKERS)))
        BREAKERS[breaker](parent["spec"])
    return parent


ANNOTATIONS = {
    api.ANNOTATION_PAUSED: ("true", "false", "True", "yes"),
    api.ANNOTATION_ROLLOUT_PARTITION: ("0", "1", "2", "3", "one"),
    api.ANNOTATION_ROLLOUT_HOLD_AT: ("0%", "25%", "50%", "100%", "25"),
    api.ANNOTATION_HISTORY_LIMIT: ("0", "1", "2", "ten"),
    api.CHANGE_CAUSE_ANNOTATION: ("a new image",),
}
CREATING = [
    {"kind": kind, "name": name, "since": since}
    for kind, name in (
        (api.LWS_KIND, "llm-0-aaaaaaaa-prefill"),
        (api.REVISION_KIND, "llm-aaaaaaaa"),
        (api.SCALER_KIND, "llm-decode"),
    )
    for since in ("2026-11-29T11:59:50Z", "2026-11-29T11:00:00Z", "2099-01-01T00:00:00Z", "now")
]


def _duplicate_name(spec: JsonObject) -> None:
    spec["roles"][1]["name"] = spec["roles"][0]["name"]


def _mixed_zero(spec: JsonObject) -> None:
    for role in spec["roles"]:
        role.pop("scaling", None)
    spec["roles"][0]["spec"]["replicas"] = 0


def _partition(spec: JsonObject) -> None:
    spec["roles"][0]["spec"]["rolloutStrategy"] = {
        "type": "RollingUpdate",
        "rollingUpdateConfiguration": {"maxSurge": 1, "maxUnavailable": 0, "partition": 2},
    }


def _on_delete(spec: JsonObject) -> None:
    spec["roles"][0]["spec"]["rolloutStrategy"] = {"type": "OnDelete"}


def _both_zero(spec: JsonObject) -> None:
    spec["roles"][0]["spec"]["rolloutStrategy"] = {
        "type": "RollingUpdate",
        "rollingUpdateConfiguration": {"maxSurge": 0, "maxUnavailable": 0, "partition": 0},
    }


def _external_slices(spec: JsonObject) -> None:
    spec["roles"][0]["scaling"] = {"mode": "External"}
    spec["slices"] = 2


def _placement_without_topology(spec: JsonObject) -> None:
    spec["placementPolicy"] = {"type": "ExclusiveSlice"}


def _long_role_name(spec: JsonObject) -> None:
    spec["roles"][0]["name"] = "r" * 60


BREAKERS = {
    "duplicate-name": _duplicate_name,
    "mixed-zero-replicas": _mixed_zero,
    "partition": _partition,
    "on-delete": _on_delete,
    "surge-and-unavailable-zero": _both_zero,
    "external-with-slices": _external_slices,
    "placement-without-topology": _placement_without_topology,
    "name-too-long": _long_role_name,
}


def _labels(
    draw: st.DrawFn, *, slice_label: str | None, revision_: str, role: str, service: bool
) -> dict[str, str]:
    labels = {api.LABEL_NAME: "llm", api.LABEL_ROLE: role, api.LABEL_REVISION: revision_}
    if slice_label is not None:
        labels[api.LABEL_SLICE] = slice_label
    if not service:
        labels[api.LABEL_APP] = f"llm-{slice_label}-{role}"
    for key in draw(st.sets(st.sampled_from([api.LABEL_ROLE, api.LABEL_REVISION]), max_size=1)):
        if draw(st.integers(0, 9)) == 0:
            del labels[key]
    return labels


def _slice_label(draw: st.DrawFn, slices: int) -> str | None:
    return draw(
        st.one_of(
            st.integers(0, slices + 1).map(str),
            st.integers(0, slices - 1).map(str),
            st.sampled_from([None, "", "01", "x", "-1"]),
        )
    )


def roles_with_image(parent: JsonObject, image: str) -> list[JsonObject]:
    """The parent's roles with every container at `image` (another revision of the set)."""
    roles = copy.deepcopy(parent["spec"]["roles"])
    for role in roles:
        for container in role["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"][
            "containers"
        ]:
            container["image"] = image
    return roles


def hash_of(roles: list[JsonObject]) -> str:
    pairs = [(role["name"], role["spec"]["leaderWorkerTemplate"]) for role in roles]
    try:
        return revision.compute_revision(pairs)
    except gotext.EncodingError:
        return "0badc0de"


def other_revisions(parent: JsonObject) -> dict[str, list[JsonObject]]:
    """Two other revisions of the parent (its roles at other images), by hash."""
    found = {}
    for image in OTHER_IMAGES:
        roles = roles_with_image(parent, image)
        found[hash_of(roles)] = roles
    return found


def record_child(
    revision_: str,
    roles: list[JsonObject],
    *,
    number: object,
    first: object,
    completed: object = None,
    name: str | None = None,
) -> JsonObject:
    """A DisaggregatedSetRevision as Metacontroller observes it (`completed`: its completedAs)."""
    body: JsonObject = {
        "apiVersion": api.API_VERSION,
        "kind": api.REVISION_KIND,
        "metadata": {
            "name": name or f"llm-{revision_}",
            "labels": {api.LABEL_NAME: "llm", api.LABEL_REVISION: revision_},
        },
        "revision": number,
        "firstRevision": first,
        "roles": roles,
    }
    if completed is not None:
        body["completedAs"] = completed
    return observe(body)


HOSTILE = ("mislabelled", "another-revisions-roles", "orphan", "huge", "first-late", "tie")


@st.composite
def history_records(
    draw: st.DrawFn, parent: JsonObject, target: str, others: dict[str, list[JsonObject]]
) -> list[JsonObject]:
    """Records that count (some run by every slice) of the target and the other revisions, and
    hostile ones
    (`HOSTILE`). None when the roles share a name, which the CRD refuses."""
    by_revision = {target: parent["spec"]["roles"], **others}
    names = [role["name"] for role in parent["spec"]["roles"]]
    if len(set(names)) != len(names):
        return []
    found: dict[str, JsonObject] = {}
    for revision_, roles in by_revision.items():
        if draw(st.booleans()):
            number = draw(st.integers(1, 6))
            first = draw(st.integers(1, number))
            found[f"llm-{revision_}"] = record_child(
                revision_,
                roles,
                number=number,
                first=first,
                completed=draw(st.one_of(st.none(), st.integers(first, number))),
            )
    for kind in draw(st.lists(st.sampled_from(HOSTILE), max_size=2)):
        revision_ = draw(st.sampled_from(sorted(by_revision)))
        roles = by_revision[revision_]
        number = draw(st.integers(1, 6))
        name = None
        if kind == "mislabelled":
            name = draw(st.sampled_from(["llm-forged", *(f"llm-{r}" for r in by_revision)]))
            if name == f"llm-{revision_}":
                name = "llm-forged"
        if kind == "another-revisions-roles":
            roles = roles_with_image(parent, EVIL)
        if kind == "huge":
            number = draw(st.sampled_from([api.MAX_HISTORY_NUMBER, 2**63 - 1]))
        record = record_child(
            revision_,
            roles,
            number=number,
            first=number + 1 if kind == "first-late" else number,
            completed=draw(st.sampled_from([None, number, number + 1])),
            name=name,
        )
        if kind == "orphan":  # carries the set's label, no controller: the set does not own it
            del record["metadata"]["ownerReferences"]
        if kind == "tie" and found:
            tied = draw(st.sampled_from(sorted(found)))
            record["revision"] = record["firstRevision"] = found[tied]["revision"]
        found[record["metadata"]["name"]] = record
    return list(found.values())


@st.composite
def observed_children(draw: st.DrawFn, parent: JsonObject, target: str) -> list[JsonObject]:
    slices = parent["spec"].get("slices", 1)
    roles = [role["name"] for role in parent["spec"]["roles"]]
    others = other_revisions(parent)
    revisions = st.sampled_from([target, target, *sorted(others)])
    role_names = st.sampled_from([*roles, "gone"])
    # A slice left without LWS (added, added again, or emptied by hand), often the last one.
    empty = draw(st.sampled_from([None, str(slices - 1), str(slices - 1), "0"]))
    children: dict[tuple[str, str], JsonObject] = {}
    for _ in range(draw(st.integers(0, 10))):
        slice_label = _slice_label(draw, slices)
        if slice_label == empty or (slice_label in (None, "") and empty == "0"):
            continue
        rev = draw(revisions)
        role = draw(role_names)
        labels = _labels(draw, slice_label=slice_label, revision_=rev, role=role, service=False)
        legacy = draw(st.integers(0, 7)) == 0
        name = f"llm-{rev}-{role}" if legacy else f"llm-{slice_label}-{rev}-{role}"
        replicas = draw(st.one_of(st.none(), st.integers(0, 4)))
        metadata: JsonObject = {"name": name, "labels": labels}
        initial = draw(st.one_of(st.none(), st.integers(0, 5).map(str), st.just("many")))
        if initial is not None:
            metadata["annotations"] = {api.ANNOTATION_INITIAL_REPLICAS: initial}
        spec: JsonObject = {"leaderWorkerTemplate": {"size": 1}}
        if replicas is not None:
            spec["replicas"] = replicas
        count = 1 if replicas is None else replicas
        ready = draw(st.integers(0, count))
        lws = observe(
            {
                "apiVersion": api.LWS_API_VERSION,
                "kind": api.LWS_KIND,
                "metadata": metadata,
                "spec": spec,
            },
            created=draw(st.sampled_from(TIMES)),
            status=lws_status(count, ready=ready),
        )
        children[child_id(lws)] = lws
    for _ in range(draw(st.integers(0, 5))):
        slice_label = _slice_label(draw, slices)
        rev = draw(revisions)
        role = draw(role_names)
        labels = _labels(draw, slice_label=slice_label, revision_=rev, role=role, service=True)
        service = observe(
            {
                "apiVersion": api.SERVICE_API_VERSION,
                "kind": api.SERVICE_KIND,
                "metadata": {"name": f"llm-{slice_label}-{rev}-{role}-prv", "labels": labels},
                "spec": {"clusterIP": "None", "selector": dict(labels)},
            }
        )
        children[child_id(service)] = service
    for role in draw(st.sets(role_names, max_size=3)):
        scaler = observe(
            {
                "apiVersion": api.API_VERSION,
                "kind": api.SCALER_KIND,
                "metadata": {
                    "name": f"llm-{role}",
                    "labels": {api.LABEL_NAME: "llm", api.LABEL_ROLE: role},
                },
                "spec": {"replicas": 1},
            },
            spec_overrides={"replicas": draw(st.integers(0, 6))},
        )
        children[child_id(scaler)] = scaler
    for record in draw(history_records(parent, target, others)):
        children[child_id(record)] = record
    return list(children.values())


@st.composite
def foreign_related(draw: st.DrawFn, parent: JsonObject) -> list[JsonObject]:
    """Scalers at names the set wants, controlled by someone else (seen through customize, which
    asks for no other kind)."""
    roles = [role["name"] for role in parent["spec"]["roles"]]
    found = []
    for role in draw(st.sets(st.sampled_from(roles), max_size=1)):
        found.append(
            observe(
                {
                    "apiVersion": api.API_VERSION,
                    "kind": api.SCALER_KIND,
                    "metadata": {"name": f"llm-{role}", "labels": {}},
                    "spec": {"replicas": 3},
                },
                owner_uid="uid-of-someone-else",
                owner_name="other",
            )
        )
    return found


@st.composite
def requests(
    draw: st.DrawFn, *, valid: bool = True
) -> tuple[JsonObject, list[JsonObject], JsonObject]:
    """(parent, observed children, request)."""
    parent = draw(parents(valid=valid))
    target = target_of(parent) or "cccccccc"
    children = draw(observed_children(parent, target))
    # A child cannot share a name with a foreign object: Metacontroller would not see both.
    taken = {child_id(child) for child in children}
    related = [obj for obj in draw(foreign_related(parent)) if child_id(obj) not in taken]
    version = draw(st.sampled_from(["v1", "v2"]))
    return (
        parent,
        children,
        make_request(parent, children=children, related=related, version=version),
    )


def run_sync(request: JsonObject) -> JsonObject:
    result = sync.sync(envelope.parse_sync_request(copy.deepcopy(request)), now=NOW)
    response: JsonObject = orjson.loads(orjson.dumps(answers.render_answer(result.answer)))
    return response


def response_ids(response: JsonObject) -> set[tuple[str, str]]:
    return {child_id(child) for child in response["children"]}


def condition(response: JsonObject, condition_type: str) -> JsonObject:
    for item in response["status"]["conditions"]:
        if item["type"] == condition_type:
            found: JsonObject = item
            return found
    raise KeyError(condition_type)


@PROPS
@given(requests())
def test_omitted_children_are_only_those_the_spec_lets_go(
    drawn: tuple[JsonObject, list[JsonObject], JsonObject],
) -> None:
    parent, children, request = drawn
    response = run_sync(request)
    missing = {child_id(child) for child in children} - response_ids(response)
    allowed = allowed_deletions(parent=parent, children=children, target=target_of(parent))
    assert missing <= allowed, f"deleted without a documented reason: {sorted(missing - allowed)}"


@PROPS
@given(requests(), st.randoms(use_true_random=False))
def test_sync_is_deterministic_and_ignores_child_order_and_hook_version(
    drawn: tuple[JsonObject, list[JsonObject], JsonObject], rng: random.Random
) -> None:
    parent, children, request = drawn
    expected = orjson.dumps(run_sync(request))
    assert orjson.dumps(run_sync(request)) == expected
    shuffled = copy.deepcopy(request)
    for field in ("children", "related"):
        groups = list(shuffled[field].items())
        rng.shuffle(groups)
        shuffled[field] = {
            key: dict(rng.sample(list(group.items()), len(group))) for key, group in groups
        }
    assert orjson.dumps(run_sync(shuffled)) == expected
    related = [obj for group in request["related"].values() for obj in group.values()]
    for version in ("v1", "v2"):
        other = make_request(parent, children=children, related=related, version=version)
        assert orjson.dumps(run_sync(other)) == expected


@PROPS
@given(requests(valid=False))
def test_invalid_spec_keeps_every_child_unchanged_and_says_invalid_spec(
    drawn: tuple[JsonObject, list[JsonObject], JsonObject],
) -> None:
    parent, children, request = drawn
    assert target_of(parent) is None
    response = run_sync(request)
    assert response_ids(response) == {child_id(child) for child in children}
    desired = {child_id(child): child for child in response["children"]}
    for live in children:
        full = apply.with_metacontroller_fields(
            desired[child_id(live)], namespace=NAMESPACE, parent_uid=parent["metadata"]["uid"]
        )
        merged = apply.three_way_merge(live, apply.read_last_applied(live), full)
        apply.annotate(merged, full)
        # Metacontroller's own bookkeeping may change (an autoscaler's value becomes the last
        # applied one); the object itself must not.
        live = copy.deepcopy(live)
        for obj in (merged, live):
            obj["metadata"]["annotations"].pop(api.LAST_APPLIED_ANNOTATION)
        if live["kind"] == api.LWS_KIND and "replicas" not in live["spec"]:
            # The hook materialises an unset replicas as the LWS default (1), which the API
            # server would have stored anyway.
            assert merged["spec"].pop("replicas") == 1
        assert merged == live, f"applying the held answer would change {child_id(live)}"
    degraded = condition(response, "Degraded")
    assert degraded["status"] == "True"
    assert degraded["reason"] == "InvalidSpec"
    # Nothing else of the status changes: only Degraded, and the reason beside it.
    rewritten = {"conditions", "degraded"}
    kept = {k: v for k, v in (parent.get("status") or {}).items() if k not in rewritten}
    assert {k: v for k, v in response["status"].items() if k not in rewritten} == kept
    assert response["status"]["degraded"] == "InvalidSpec"
    assert "resyncAfterSeconds" not in response or response["resyncAfterSeconds"] > 0


NEWER_KIND = "DisaggregatedSetCanary"  # a kind a later version might add
# What a JSON body from the API server can hold: integers within int64, as Go decodes them.
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=limits.INT64_MIN, max_value=limits.INT64_MAX)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=8,
)


@st.composite
def newer_children(draw: st.DrawFn) -> list[JsonObject]:
    """Children a newer version made, of a kind this one does not know, some with their
    last-applied annotation and some without."""
    found = []
    for name in draw(st.lists(st.sampled_from(("llm-a", "llm-b", "llm-c")), unique=True)):
        desired = {
            "apiVersion": api.API_VERSION,
            "kind": NEWER_KIND,
            "metadata": {"name": name, "labels": {api.LABEL_NAME: "llm"}},
            "data": draw(st.dictionaries(st.sampled_from("xyz"), json_values, max_size=2)),
        }
        child = observe(desired, status={"seen": draw(json_values)})
        if draw(st.booleans()):
            del child["metadata"]["annotations"][api.LAST_APPLIED_ANNOTATION]
        found.append(child)
    return found


@PROPS
@given(
    st.booleans().flatmap(lambda valid: requests(valid=valid)),
    newer_children(),
    st.dictionaries(st.sampled_from(("futureField", "canary", "zz")), json_values),
)
def test_an_answer_never_drops_a_status_field_or_child_it_does_not_know(
    drawn: tuple[JsonObject, list[JsonObject], JsonObject],
    newer: list[JsonObject],
    fields: JsonObject,
) -> None:
    _, _, request = drawn
    request = copy.deepcopy(request)
    request["parent"]["status"] = {**(request["parent"].get("status") or {}), **fields}
    request["children"][f"{NEWER_KIND}.{api.API_VERSION}"] = {
        child["metadata"]["name"]: child for child in newer
    }
    response = run_sync(request)
    answered = {child["metadata"]["name"]: child for child in response["children"]}
    for child in newer:
        expected = {k: v for k, v in child.items() if k != "status"}
        metadata = expected["metadata"] = {"name": child["metadata"]["name"]}
        metadata["labels"] = {api.LABEL_NAME: "llm"}
        assert answered[child["metadata"]["name"]] == expected
    for key, value in fields.items():
        assert response["status"][key] == value


@PROPS
@given(st.booleans().flatmap(lambda valid: requests(valid=valid)))
def test_well_formed_requests_never_raise(
    drawn: tuple[JsonObject, list[JsonObject], JsonObject],
) -> None:
    _, _, request = drawn
    response = run_sync(request)
    assert set(response) <= {"status", "children", "resyncAfterSeconds"}


def without_services(request: JsonObject, *, declared: bool = False) -> JsonObject:
    """The request with no Service observed; with `declared`, Services stay a child type (the
    default install), else the CompositeController declares none (components/no-services)."""
    lean = copy.deepcopy(request)
    lean["children"][SERVICE_KEY] = {}
    if not declared:
        del lean["children"][SERVICE_KEY]
        spec = lean["controller"]["spec"]
        spec["childResources"] = [
            entry for entry in spec["childResources"] if entry["resource"] != api.SERVICE_PLURAL
        ]
    return lean


def without_service_children(response: JsonObject) -> list[JsonObject]:
    return [child for child in response["children"] if child["kind"] != api.SERVICE_KIND]


@PROPS
@given(st.booleans().flatmap(lambda valid: requests(valid=valid)))
def test_without_services_no_service_is_answered_and_nothing_else_changes(
    drawn: tuple[JsonObject, list[JsonObject], JsonObject],
) -> None:
    _, _, request = drawn
    lean = run_sync(without_services(request))
    assert without_service_children(lean) == lean["children"]
    # The other children do not depend on Services, observed or not.
    assert lean["children"] == without_service_children(run_sync(request))
    # Nor does the status (observed Services can hold a name twice, which it reports).
    plain = run_sync(without_services(request, declared=True))
    assert lean["children"] == without_service_children(plain)
    assert lean["status"] == plain["status"]
    assert lean.get("resyncAfterSeconds") == plain.get("resyncAfterSeconds")


_MALFORMED = {
    "label-value-not-a-string": lambda obj: obj["metadata"].update(
        labels={**obj["metadata"].get("labels", {}), api.LABEL_SLICE: 0}
    ),
    "replicas-not-an-integer": lambda obj: obj["spec"].update(replicas="3"),
    "metadata-not-an-object": lambda obj: obj.update(metadata=[]),
    "name-missing": lambda obj: obj["metadata"].pop("name"),
}
LWS_KEY = f"{api.LWS_KIND}.{api.LWS_API_VERSION}"
SERVICE_KEY = f"{api.SERVICE_KIND}.{api.SERVICE_API_VERSION}"


@PROPS
@given(
    st.booleans().flatmap(lambda valid: requests(valid=valid)),
    st.sampled_from(sorted(_MALFORMED)),
    st.randoms(use_true_random=False),
)
def test_malformed_children_raise_only_request_error(
    drawn: tuple[JsonObject, list[JsonObject], JsonObject], breaker: str, rng: random.Random
) -> None:
    _, _, request = drawn
    request = copy.deepcopy(request)
    group = request["children"][LWS_KEY]
    if group:
        key = rng.choice(sorted(group))
    else:
        key = "llm-0-aaaaaaaa-prefill"
        group[key] = observe(
            {
                "apiVersion": api.LWS_API_VERSION,
                "kind": api.LWS_KIND,
                "metadata": {"name": key, "labels": {}},
                "spec": {"replicas": 1},
            }
        )
    _MALFORMED[breaker](group[key])
    with pytest.raises(values.RequestError):
        sync.sync(envelope.parse_sync_request(request), now=NOW)


def test_a_duplicate_lws_keeps_its_revision_from_being_drained() -> None:
    """Two LWS of one old revision and role in a slice: not drained while one of them runs.

    Regression: docs/rollout.md drops an old revision "whose LWS for all its roles have replicas
    == 0", and §8 allows no other deletion. Here revision aaaaaaaa still runs 2 decode groups in
    slice 0 (under the legacy name, no slice label), so none of its LWS may go. The sync used to
    group LWS by (revision, role), set the second one aside unplanned, see only the 0-replica LWS,
    call the revision drained and delete `llm-0-aaaaaaaa-decode`.
    """
    parent = make_ds(roles=[make_role("prefill", replicas=1), make_role("decode", replicas=1)])
    target = target_of(parent)
    assert target is not None
    lwt = {"leaderWorkerTemplate": {"size": 1}}

    def lws(name: str, labels: dict[str, str], replicas: int) -> JsonObject:
        return observe(
            {
                "apiVersion": api.LWS_API_VERSION,
                "kind": api.LWS_KIND,
                "metadata": {"name": name, "labels": {api.LABEL_NAME: "llm", **labels}},
                "spec": {**lwt, "replicas": replicas},
            },
            status=lws_status(replicas),
        )

    def at(revision_: str, role: str, slice_label: str | None = "0") -> dict[str, str]:
        labels = {api.LABEL_ROLE: role, api.LABEL_REVISION: revision_}
        if slice_label is not None:
            labels[api.LABEL_SLICE] = slice_label
        return labels

    children = [
        lws(f"llm-0-{target}-prefill", at(target, "prefill"), 1),
        lws(f"llm-0-{target}-decode", at(target, "decode"), 1),
        lws("llm-0-aaaaaaaa-decode", at("aaaaaaaa", "decode"), 0),
        lws("llm-aaaaaaaa-decode", at("aaaaaaaa", "decode", None), 2),
    ]
    response = run_sync(make_request(parent, children=children))
    missing = {child_id(child) for child in children} - response_ids(response)
    allowed = allowed_deletions(parent=parent, children=children, target=target)
    assert missing <= allowed, f"deleted without a documented reason: {sorted(missing - allowed)}"


def test_invalid_spec_breakers_all_break_validation() -> None:
    """Each way the tests break a spec is caught by the hook's re-check (guards the generator)."""
    for name, breaker in BREAKERS.items():
        parent = make_ds()
        breaker(parent["spec"])
        assert target_of(parent) is None, name


# --- hostile and impossible states (the mutations black-box attacks found) ----------------


def _annotation_identity(request: JsonObject, rng: random.Random) -> None:
    """Rewrite a child's last-applied annotation under another apiVersion (or none)."""
    objects = [obj for group in request["children"].values() for obj in group.values()]
    if not objects:
        return
    obj = rng.choice(objects)
    annotations = obj["metadata"].get("annotations") or {}
    if api.LAST_APPLIED_ANNOTATION not in annotations:
        return
    applied = orjson.loads(annotations[api.LAST_APPLIED_ANNOTATION])
    if rng.random() < 0.5:
        applied.pop("apiVersion", None)
    else:
        applied["apiVersion"] = applied.get("apiVersion", "v1") + "beta"
    annotations[api.LAST_APPLIED_ANNOTATION] = orjson.dumps(applied).decode()


def _wrong_type(request: JsonObject, rng: random.Random) -> None:
    spec = request["parent"]["spec"]
    value = rng.choice([True, "2", " 2", 2.0, "1"])
    if rng.random() < 0.5:
        spec["slices"] = value
    else:
        rng.choice(spec["roles"])["spec"]["replicas"] = value


def _lost_label(request: JsonObject, rng: random.Random) -> None:
    """A child loses a label and the annotation that would restore it (two claims, one name)."""
    objects = [
        obj
        for key in (LWS_KEY, f"{api.SERVICE_KIND}.{api.SERVICE_API_VERSION}")
        for obj in request["children"].get(key, {}).values()
    ]
    if not objects:
        return
    obj = rng.choice(objects)
    obj["metadata"]["labels"].pop(rng.choice([api.LABEL_SLICE, api.LABEL_REVISION]), None)
    (obj["metadata"].get("annotations") or {}).pop(api.LAST_APPLIED_ANNOTATION, None)


def _overflow(request: JsonObject, rng: random.Random) -> None:
    group = request["children"].get(LWS_KEY, {})
    for obj in rng.sample(sorted(group.values(), key=child_id), k=min(2, len(group))):
        obj.setdefault("status", {})[rng.choice(["replicas", "readyReplicas"])] = rng.choice(
            [2**63 - 1, 2**31, -5]
        )


def _negative_generation(request: JsonObject, rng: random.Random) -> None:
    request["parent"]["metadata"]["generation"] = -rng.randint(1, 3)


MUTATIONS = {
    "annotation-identity": _annotation_identity,
    "wrong-json-type": _wrong_type,
    "lost-label": _lost_label,
    "status-overflow": _overflow,
    "negative-generation": _negative_generation,
}


def is_serving(obj: JsonObject, *, slices: object) -> bool:
    """An LWS meant to run groups, with ready ones, in a slice the spec keeps (docs/rollout.md
    deletes removed slices outright, serving or not)."""
    if obj["kind"] != api.LWS_KIND:
        return False
    index = views.slice_of(obj)
    kept_slices = slices if isinstance(slices, int) and not isinstance(slices, bool) else None
    if kept_slices is not None and index is not None and index >= kept_slices:
        return False
    ready = (obj.get("status") or {}).get("readyReplicas", 0)
    return obj["spec"].get("replicas", 1) != 0 and isinstance(ready, int) and ready >= 1


@PROPS
@given(
    st.booleans().flatmap(lambda valid: requests(valid=valid)),
    st.lists(st.sampled_from(sorted(MUTATIONS)), min_size=1, max_size=3),
    st.randoms(use_true_random=False),
)
def test_mutated_requests_answer_200_and_never_drop_a_serving_child(
    drawn: tuple[JsonObject, list[JsonObject], JsonObject],
    mutations: list[str],
    rng: random.Random,
) -> None:
    parent, _, request = drawn
    request = copy.deepcopy(request)
    for mutation in mutations:
        MUTATIONS[mutation](request, rng)
    children = [obj for group in request["children"].values() for obj in group.values()]
    response = run_sync(request)  # no exception: a 200 answer
    # Every serving LWS stays, and, beyond that, only what docs/safety.md lets go.
    missing = {child_id(child) for child in children} - response_ids(response)
    slices = request["parent"]["spec"].get("slices", 1)
    for child in children:
        assert not (child_id(child) in missing and is_serving(child, slices=slices)), child_id(
            child
        )
    allowed = allowed_deletions(
        parent=request["parent"], children=children, target=target_of(request["parent"])
    )
    assert missing <= allowed, f"deleted without a documented reason: {sorted(missing - allowed)}"
    del parent
