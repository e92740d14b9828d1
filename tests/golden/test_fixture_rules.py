"""What each recorded answer must say, written from the rules (docs/rollout.md, docs/safety.md).

The recorded answers (`test_hook_fixtures.py`) were produced by these hooks, so matching them only
shows that nothing changed. The assertions here judge each request's answer against the rules,
reading the raw request JSON with the test's own helpers (`tests/sim/views.py`), not the hooks'.
"""

from __future__ import annotations

from typing import Any

import orjson

from hooks import api
from hooks.core import planner
from tests.golden import make_fixtures
from tests.sim import views

JsonObject = dict[str, Any]
LWS_GROUP = f"{api.LWS_KIND}.{api.LWS_API_VERSION}"


def load(name: str) -> tuple[JsonObject, JsonObject]:
    request: JsonObject = orjson.loads((make_fixtures.REQUESTS / name).read_bytes())
    answer: JsonObject = orjson.loads((make_fixtures.RESPONSES / name).read_bytes())
    return request, answer


def observed(request: JsonObject, group: str = LWS_GROUP) -> dict[str, JsonObject]:
    return {obj["metadata"]["name"]: obj for obj in (request["children"].get(group) or {}).values()}


def answered(answer: JsonObject, kind: str = api.LWS_KIND) -> dict[str, JsonObject]:
    return {c["metadata"]["name"]: c for c in answer["children"] if c["kind"] == kind}


def condition(answer: JsonObject, kind: str) -> JsonObject:
    found: JsonObject = next(c for c in answer["status"]["conditions"] if c["type"] == kind)
    return found


def test_first_sync_creates_one_lws_per_role_and_the_scaler_of_the_external_role() -> None:
    request, answer = load("ds-sync-first.json")
    parent = request["parent"]
    revision = answer["status"]["revision"]
    assert set(answered(answer)) == {
        f"{parent['metadata']['name']}-0-{revision}-{role['name']}"
        for role in parent["spec"]["roles"]
    }
    for role in parent["spec"]["roles"]:
        lws = answered(answer)[f"{parent['metadata']['name']}-0-{revision}-{role['name']}"]
        # A Static role gets its spec.replicas; an External role the scaler's seed, 1.
        wanted = 1 if views.is_external(role) else views.static_target(role)
        assert lws["spec"]["replicas"] == wanted, role["name"]
        assert views.labels_of(lws)[api.LABEL_SLICE] == "0"
    (scaler,) = answered(answer, api.SCALER_KIND).values()
    assert scaler["spec"] == {"replicas": 1}
    assert answered(answer, api.SERVICE_KIND) == {}  # nothing is ready yet
    assert condition(answer, "Progressing")["status"] == "True"


def test_a_template_change_starts_a_rollout_with_a_snapshot_and_new_lws_at_zero() -> None:
    for name in ("ds-sync-with-children.json", "ds-sync-v2.json"):
        request, answer = load(name)
        target = answer["status"]["revision"]
        old = observed(request)
        lws = answered(answer)
        for lws_name, obj in old.items():
            kept = lws[lws_name]
            assert kept["spec"]["replicas"] == views.replicas_of(obj), lws_name
            snapshot = kept["metadata"]["annotations"][api.ANNOTATION_INITIAL_REPLICAS]
            assert snapshot == str(views.replicas_of(obj))
        new = {n: c for n, c in lws.items() if views.labels_of(c)[api.LABEL_REVISION] == target}
        assert len(new) == len(request["parent"]["spec"]["roles"])
        assert all(c["spec"]["replicas"] == 0 for c in new.values())
        # The old revision still serves: its Services stay, and a resync is asked for.
        services = observed(request, f"{api.SERVICE_KIND}.{api.SERVICE_API_VERSION}")
        assert {s["metadata"]["name"] for s in services.values()} <= set(
            answered(answer, api.SERVICE_KIND)
        )
        assert answer["resyncAfterSeconds"] > 0


def test_steady_sync_returns_every_child_as_it_is() -> None:
    request, answer = load("ds-sync-steady.json")
    for group in request["children"].values():
        for obj in (group or {}).values():
            last = orjson.loads(obj["metadata"]["annotations"][api.LAST_APPLIED_ANNOTATION])
            returned = answered(answer, obj["kind"])[obj["metadata"]["name"]]
            # Everything but metadata (a spec, or a DisaggregatedSetRevision's roles and number).
            assert {k: v for k, v in returned.items() if k != "metadata"} == {
                k: v for k, v in last.items() if k != "metadata"
            }
    assert "resyncAfterSeconds" not in answer
    assert condition(answer, "Available")["status"] == "True"


def test_mid_rollout_sync_moves_exactly_one_planner_step() -> None:
    request, answer = load("ds-sync-mid-rollout.json")
    parent = request["parent"]
    roles = [role["name"] for role in parent["spec"]["roles"]]
    target = answer["status"]["revision"]
    (before,) = views.slice_states(observed(request).values(), target=target).values()
    assert before.new_ready == before.new  # the new LWS are ready: the gate is open
    configs = [
        views.resolved_config(role, views.static_target(role)) for role in parent["spec"]["roles"]
    ]
    step = planner.next_step(
        initial_old=tuple(before.initial.get(name, 0) for name in roles),
        current_old=tuple(before.old.get(name, 0) for name in roles),
        current_new=tuple(before.new.get(name, 0) for name in roles),
        target=tuple(views.static_target(role) for role in parent["spec"]["roles"]),
        config=tuple(planner.RoleConfig(surge, unavailable) for surge, unavailable in configs),
    )
    assert step is not None
    (after,) = views.slice_states(answered(answer).values(), target=target).values()
    assert after.vector(roles) == (step.old, step.new)
    assert after.vector(roles) != before.vector(roles)
    assert answer["resyncAfterSeconds"] > 0


def test_rolescaler_sync_counts_its_roles_groups_from_the_owners_status() -> None:
    """The RoleScaler wiring relates only the owning set, whose status counts the role's LWS."""
    request, answer = load("rolescaler-sync-owner-status.json")
    labels = request["parent"]["metadata"]["labels"]
    (owner,) = request["related"][f"{api.DS_KIND}.{api.API_VERSION}"].values()
    (groups,) = (
        entry["replicas"]
        for entry in owner["status"]["roleStatuses"]
        if entry["name"] == labels[api.LABEL_ROLE]
    )
    assert groups > 0
    status = answer["status"]
    assert status["replicas"] == groups
    assert status["selector"] == (
        f"{api.LABEL_NAME}={labels[api.LABEL_NAME]},{api.LABEL_ROLE}={labels[api.LABEL_ROLE]},"
        f"{api.LWS_WORKER_INDEX_LABEL}=0"
    )
    assert condition(answer, "Ready")["reason"] == "Bound"


def test_customize_asks_only_for_the_scaler_names() -> None:
    request, answer = load("ds-customize.json")
    parent = request["parent"]
    set_name = parent["metadata"]["name"]
    external = [r["name"] for r in parent["spec"]["roles"] if views.is_external(r)]
    assert external
    assert answer["relatedResources"] == [
        {
            "apiVersion": api.API_VERSION,
            "resource": api.SCALER_PLURAL,
            "namespace": parent["metadata"]["namespace"],
            "names": [f"{set_name}-{role}" for role in external],
        },
    ]
