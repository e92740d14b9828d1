"""The sync hook on whole requests, by example (docs/rollout.md).

Each request is the settled state of a set in the simulated cluster, edited the way a user edits
the set; each test states what the next answer must do.
"""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from hooks import api
from hooks.core import history, sync
from hooks.wire import answers, envelope
from tests.builders import NOW, lws_status, make_ds, make_request, make_role, observe
from tests.sim import scenarios
from tests.sim.cluster import Cluster
from tests.sim.metacontroller import DS_CHILD_TYPES, LWS_TYPE, REVISION_TYPE, SERVICE_TYPE

JsonObject = dict[str, Any]
LATER = "2026-11-29T12:00:31Z"  # NOW and a little more than the grace of a child to appear


def settled(*, slices: int = 1) -> JsonObject:
    roles = [make_role("prefill", replicas=2), make_role("decode", replicas=1)]
    return scenarios.settled_request(make_ds(roles=roles, slices=slices))


def answer(request: JsonObject) -> JsonObject:
    result = sync.sync(envelope.parse_sync_request(copy.deepcopy(request)), now=NOW)
    decoded: JsonObject = orjson.loads(orjson.dumps(answers.render_answer(result.answer)))
    return decoded


def names(answer_: JsonObject, kind: str) -> set[str]:
    return {c["metadata"]["name"] for c in answer_["children"] if c["kind"] == kind}


def replicas(answer_: JsonObject) -> dict[str, int]:
    return {
        c["metadata"]["name"]: c["spec"]["replicas"]
        for c in answer_["children"]
        if c["kind"] == api.LWS_KIND
    }


def test_a_steady_set_is_answered_with_its_children_unchanged() -> None:
    request = settled()
    result = answer(request)
    observed = {
        obj["metadata"]["name"] for group in request["children"].values() for obj in group.values()
    }
    kinds = (api.LWS_KIND, api.SERVICE_KIND, api.REVISION_KIND)
    assert set().union(*(names(result, kind) for kind in kinds)) == observed
    assert "resyncAfterSeconds" not in result


def test_without_services_a_ready_set_asks_for_none_and_keeps_every_other_child() -> None:
    """components/no-services: the controller declares no Services, so none is observed. The
    ready target would otherwise get its Services created; it gets none, and nothing else of
    the answer moves."""
    request = settled()
    del request["children"][SERVICE_TYPE]
    spec = request["controller"]["spec"]
    spec["childResources"] = [
        entry for entry in spec["childResources"] if entry["resource"] != api.SERVICE_PLURAL
    ]
    result = answer(request)
    assert names(result, api.SERVICE_KIND) == set()
    full = answer(settled())
    assert names(full, api.SERVICE_KIND)  # the default install has them
    assert result["status"] == full["status"]
    assert [c for c in full["children"] if c["kind"] != api.SERVICE_KIND] == result["children"]


def _without_history(request: JsonObject) -> JsonObject:
    """`request` from a CompositeController that declares no DisaggregatedSetRevisions: none is
    observed."""
    lean = copy.deepcopy(request)
    del lean["children"][REVISION_TYPE]
    spec = lean["controller"]["spec"]
    spec["childResources"] = [
        entry for entry in spec["childResources"] if entry["resource"] != api.REVISION_PLURAL
    ]
    return lean


def test_without_history_a_set_asks_for_no_record_keeps_every_other_child_and_says_why() -> None:
    """Records are answered only to a controller that declares them, as Services are: one that
    does not would be asked to create a record on every pass and never observe it. The rest of
    the answer is the default install's, and `status.history` says what the set lacks."""
    request = settled()
    assert request["children"][REVISION_TYPE]  # the default install keeps one
    result = answer(_without_history(request))
    full = answer(request)
    assert names(result, api.REVISION_KIND) == set()
    assert [c for c in full["children"] if c["kind"] != api.REVISION_KIND] == result["children"]
    assert result["status"].pop("history") == history.NOT_KEPT
    assert "history" not in full["status"]
    assert result["status"] == full["status"]


@pytest.mark.parametrize("declared", [True, False], ids=["with-history", "without-history"])
def test_without_history_a_move_back_is_held_like_a_new_revision(declared: bool) -> None:
    """With its history, going back to the revision the set ran before is a rollback, which a
    hold does not stop; without one, nothing is known to have run before: it is held."""
    types = tuple(kind for kind in DS_CHILD_TYPES if declared or kind != REVISION_TYPE)
    cluster = Cluster(seed=3, child_types=types)
    roles = [make_role(name, image="example/server:v1") for name in ("prefill", "decode")]
    cluster.create(make_ds(roles=roles))
    cluster.run(max_ticks=200)
    first = cluster.revision()
    cluster.edit("llm", lambda spec: scenarios.set_image(spec, "example/server:v2"))
    cluster.run(max_ticks=200)
    cluster.annotate("llm", api.ANNOTATION_ROLLOUT_HOLD_AT, "50%")
    cluster.edit("llm", lambda spec: scenarios.set_image(spec, "example/server:v1"))
    cluster.run(max_ticks=200)
    assert cluster.revision() == first
    progressing = cluster.condition("Progressing")
    assert progressing is not None
    if declared:
        assert cluster.is_true("Available")
        assert "history" not in cluster.ds()["status"]
    else:
        assert progressing["reason"] == api.Reason.ROLLOUT_HELD
        assert cluster.objects(REVISION_TYPE) == []
        assert cluster.ds()["status"]["history"] == history.NOT_KEPT


@pytest.mark.parametrize("declared", [True, False], ids=["with-history", "without-history"])
def test_without_history_a_new_slice_past_a_partition_runs_nothing(declared: bool) -> None:
    """A slice added past a partition mid-rollout starts at the stable revision, which only the
    history knows; without one it runs nothing (fail closed) instead of the held-back one."""
    types = tuple(kind for kind in DS_CHILD_TYPES if declared or kind != REVISION_TYPE)
    cluster = Cluster(seed=5, child_types=types)
    roles = [make_role(name, image="example/server:v1") for name in ("prefill", "decode")]
    cluster.create(make_ds(roles=roles, slices=2))
    cluster.run(max_ticks=200)
    first = cluster.revision()
    cluster.annotate("llm", api.ANNOTATION_ROLLOUT_PARTITION, "1")
    cluster.edit("llm", lambda spec: scenarios.set_image(spec, "example/server:v2"))
    cluster.run(max_ticks=200)
    cluster.edit("llm", lambda spec: spec.update(slices=3))
    cluster.run(max_ticks=200)
    third = {
        lws["metadata"]["labels"][api.LABEL_REVISION]
        for lws in cluster.objects(LWS_TYPE)
        if lws["metadata"]["labels"][api.LABEL_SLICE] == "2"
    }
    assert third == ({first} if declared else set())


def test_more_replicas_scale_the_lws_in_place_without_a_new_revision() -> None:
    request = settled()
    before = answer(request)
    request["parent"]["spec"]["roles"][0]["spec"]["replicas"] = 5
    result = answer(request)
    assert result["status"]["revision"] == before["status"]["revision"]
    prefill = f"llm-0-{result['status']['revision']}-prefill"
    assert replicas(result)[prefill] == 5
    assert names(result, api.LWS_KIND) == names(before, api.LWS_KIND)


def test_a_new_slice_gets_its_lws_and_no_other_child_moves() -> None:
    request = settled(slices=1)
    before = replicas(answer(request))
    request["parent"]["spec"]["slices"] = 2
    result = answer(request)
    revision = result["status"]["revision"]
    assert replicas(result) == {
        **before,
        f"llm-1-{revision}-prefill": 2,
        f"llm-1-{revision}-decode": 1,
    }


def test_fewer_slices_delete_the_removed_slices_children_at_once() -> None:
    request = settled(slices=2)
    request["parent"]["spec"]["slices"] = 1
    result = answer(request)
    remaining = names(result, api.LWS_KIND) | names(result, api.SERVICE_KIND)
    assert remaining
    assert all(name.startswith("llm-0-") for name in remaining)
    observed = request["children"][SERVICE_TYPE] | request["children"][LWS_TYPE]
    assert {name for name in observed if name.startswith("llm-1-")}  # they existed


def test_a_template_change_starts_a_rollout_next_to_the_serving_revision() -> None:
    request = settled()
    old_revision = answer(request)["status"]["revision"]
    template = request["parent"]["spec"]["roles"][1]["spec"]["leaderWorkerTemplate"]
    template["workerTemplate"]["spec"]["containers"][0]["image"] = "example/server:v2"
    result = answer(request)
    new_revision = result["status"]["revision"]
    assert new_revision != old_revision
    by_name = {c["metadata"]["name"]: c for c in result["children"] if c["kind"] == api.LWS_KIND}
    for role in ("prefill", "decode"):
        assert by_name[f"llm-0-{new_revision}-{role}"]["spec"]["replicas"] == 0
        old = by_name[f"llm-0-{old_revision}-{role}"]
        assert old["metadata"]["annotations"][api.ANNOTATION_INITIAL_REPLICAS] == str(
            old["spec"]["replicas"]
        )
    assert names(result, api.SERVICE_KIND) == {
        f"llm-0-{old_revision}-prefill-prv",
        f"llm-0-{old_revision}-decode-prv",
    }
    assert result["resyncAfterSeconds"] > 0


def test_reverting_to_a_revision_whose_lws_still_exist_creates_nothing() -> None:
    request = settled()
    serving = answer(request)
    template = request["parent"]["spec"]["roles"][1]["spec"]["leaderWorkerTemplate"]
    image = template["workerTemplate"]["spec"]["containers"][0]["image"]
    template["workerTemplate"]["spec"]["containers"][0]["image"] = "example/server:v2"
    started = answer(request)  # the rollout to v2 starts: v2's LWS exist at 0 from now on
    observed_lws = request["children"][LWS_TYPE]
    for child in started["children"]:
        name = child["metadata"]["name"]
        if child["kind"] == api.LWS_KIND and name not in observed_lws:
            observed_lws[name] = observe(child, status=lws_status(0))
    template["workerTemplate"]["spec"]["containers"][0]["image"] = image
    result = answer(request)
    assert result["status"]["revision"] == serving["status"]["revision"]
    # Nothing is created: the serving LWS are the target again, and v2's LWS, all at 0, are a
    # drained revision and go.
    assert names(result, api.LWS_KIND) == names(serving, api.LWS_KIND)
    assert replicas(result) == replicas(serving)


def test_a_target_raised_mid_rollout_is_recorded_served_and_reported() -> None:
    """docs/rollout.md, "Scaling while a rollout runs": the start pass records each role's
    target on its new LWS; a raise afterwards goes to the new revision at once (within the
    surge ceiling) and the status says the target moved."""
    request = settled()
    template = request["parent"]["spec"]["roles"][1]["spec"]["leaderWorkerTemplate"]
    template["workerTemplate"]["spec"]["containers"][0]["image"] = "example/server:v2"
    started = answer(request)
    observed_lws = request["children"][LWS_TYPE]
    for child in started["children"]:
        name = child["metadata"]["name"]
        if child["kind"] == api.LWS_KIND and name not in observed_lws:
            assert child["metadata"]["annotations"][api.ANNOTATION_ROLLOUT_TARGET] in ("2", "1")
            observed_lws[name] = observe(child, status=lws_status(0))
        elif child["kind"] == api.LWS_KIND:
            observed_lws[name] = observe(child, status=lws_status(child["spec"]["replicas"]))
    request["parent"]["spec"]["roles"][0]["spec"]["replicas"] = 4
    result = answer(request)
    revision = result["status"]["revision"]
    assert replicas(result)[f"llm-0-{revision}-prefill"] == 3  # 4 + maxSurge 1 - 2 old
    available = next(c for c in result["status"]["conditions"] if c["type"] == "Available")
    assert "target changed during the rollout: prefill 2 → 4" in available["message"]


# --- customize -----------------------------------------------------------------------------------


def customize(ds: JsonObject) -> list[JsonObject]:
    request = envelope.parse_customize_request({"parent": ds})
    rules: list[JsonObject] = answers.render_answer(sync.customize(request).answer)[
        "relatedResources"
    ]
    return rules


def test_a_new_lws_that_never_appeared_is_reported_and_still_asked_for() -> None:
    """An LWS the first pass of a rollout asked for and that is still not observed after the
    grace: an object the set does not see holds the name, or the API server refuses it. The role
    waits, Degraded (ChildNotCreated) names the LWS, every serving child stays, and the LWS stays
    in the answer for when it can be created."""
    request = settled()
    template = request["parent"]["spec"]["roles"][0]["spec"]["leaderWorkerTemplate"]
    template["workerTemplate"]["spec"]["containers"][0]["image"] = "example/server:v2"
    request["parent"]["metadata"]["generation"] = 2
    started = answer(request)
    wanted = f"llm-0-{started['status']['revision']}-prefill"
    assert "creating" not in started["status"]  # the first ask costs nothing

    # The next pass: every other child appeared, this one did not.
    for child in started["children"]:
        name = child["metadata"]["name"]
        group = request["children"].setdefault(f"{child['kind']}.{child['apiVersion']}", {})
        if name != wanted and name not in group:
            status = lws_status(0) if child["kind"] == api.LWS_KIND else None
            group[name] = observe(child, status=status)
    request["parent"]["status"] = {**started["status"], "observedGeneration": 2}
    second = answer(request)
    assert second["status"]["creating"] == [{"kind": api.LWS_KIND, "name": wanted, "since": NOW}]
    assert second["resyncAfterSeconds"] == api.CREATION_GRACE_SECONDS

    request["parent"]["status"] = {**second["status"], "observedGeneration": 2}
    result = sync.sync(envelope.parse_sync_request(copy.deepcopy(request)), now=LATER)
    rendered = answers.render_answer(result.answer)
    degraded = next(c for c in rendered["status"]["conditions"] if c["type"] == "Degraded")
    assert degraded["status"] == "True" and degraded["reason"] == "ChildNotCreated"
    assert wanted in degraded["message"]
    assert rendered["status"]["creating"] == second["status"]["creating"]
    assert rendered["resyncAfterSeconds"] == api.CREATION_GRACE_SECONDS
    assert wanted in names(rendered, api.LWS_KIND)
    kept = {(child["kind"], child["metadata"]["name"]) for child in rendered["children"]}
    observed = {
        (obj["kind"], name) for group in request["children"].values() for name, obj in group.items()
    }
    assert observed <= kept


def test_customize_asks_for_nothing_without_external_roles() -> None:
    """LWS, Services and DisaggregatedSetRevisions are not related objects: a rule for them
    would cost Metacontroller a pass over every parent per event (a missing child is found from
    the status instead, `hooks.core.creations`)."""
    ds = make_ds(roles=[make_role("prefill"), make_role("decode")], slices=2)
    assert customize(ds) == []


def test_customize_names_the_scalers_of_external_roles() -> None:
    ds = make_ds(roles=[make_role("prefill"), make_role("decode", external=True)])
    assert customize(ds) == [
        {
            "apiVersion": api.API_VERSION,
            "resource": api.SCALER_PLURAL,
            "namespace": ds["metadata"]["namespace"],
            "names": ["llm-decode"],
        }
    ]


def test_an_external_role_grown_past_its_name_budget_runs_what_its_names_allow() -> None:
    """An autoscaler is never admitted: past the most groups whose pod labels fit (10 here,
    group indexes 0..9), the role is capped and the set says why, instead of creating LWS
    groups whose pods would never start."""
    name = "n" * 32  # <name>-0-<8 hex>-decode is 50: room for one digit of group index
    roles = [make_role("p", replicas=1), make_role("decode", replicas=1, external=True)]
    request = scenarios.settled_request(make_ds(name=name, roles=roles))
    scaler = request["children"][scenarios.SCALER_TYPE][f"{name}-decode"]
    scaler["spec"]["replicas"] = 12
    decided = answer(request)
    assert replicas(decided)[f"{name}-0-{decided['status']['revision']}-decode"] == 10
    degraded = next(c for c in decided["status"]["conditions"] if c["type"] == "Degraded")
    assert degraded["status"] == "True"
    assert degraded["reason"] == "NameBudgetExceeded"
    assert "scaled to 12 groups" in degraded["message"]
    assert "it runs 10" in degraded["message"]


def test_an_external_role_within_its_name_budget_follows_its_scaler() -> None:
    name = "n" * 32
    roles = [make_role("p", replicas=1), make_role("decode", replicas=1, external=True)]
    request = scenarios.settled_request(make_ds(name=name, roles=roles))
    request["children"][scenarios.SCALER_TYPE][f"{name}-decode"]["spec"]["replicas"] = 10
    decided = answer(request)
    assert replicas(decided)[f"{name}-0-{decided['status']['revision']}-decode"] == 10
    degraded = next(c for c in decided["status"]["conditions"] if c["type"] == "Degraded")
    assert degraded["status"] == "False"


def test_an_orphan_scaler_with_the_sets_label_is_reported_with_the_adoption_that_fixes_it() -> None:
    """Metacontroller releases children that another controller made and nobody adopted: the
    scaler is still seen (a related object) and the set says how to take it back."""
    roles = [make_role("prefill", replicas=2), make_role("decode", external=True)]
    request = scenarios.settled_request(make_ds(roles=roles))
    scalers = request["children"].pop(f"{api.SCALER_KIND}.{api.API_VERSION}")
    (scaler,) = scalers.values()
    del scaler["metadata"]["ownerReferences"]
    del scaler["metadata"]["labels"][api.CONTROLLER_UID_LABEL]
    request["related"][f"{api.SCALER_KIND}.{api.API_VERSION}"] = dict(scalers)
    request["children"][f"{api.SCALER_KIND}.{api.API_VERSION}"] = {}
    degraded = {c["type"]: c for c in answer(request)["status"]["conditions"]}["Degraded"]
    assert degraded["reason"] == api.Reason.SCALER_CONFLICT
    assert (
        "`kubectl ds adopt llm --orphans` hands it to the set when it has no owner and its name"
        " and labels are the ones the set gives it"
    ) in degraded["message"]
    foreign = copy.deepcopy(request)
    group = foreign["related"][f"{api.SCALER_KIND}.{api.API_VERSION}"]
    group["llm-decode"]["metadata"]["labels"][api.LABEL_NAME] = "other"
    degraded = {c["type"]: c for c in answer(foreign)["status"]["conditions"]}["Degraded"]
    assert "delete it so the set can create its own" in degraded["message"]


# --- the progress deadline of a set coming up (issue 35 item 5) ----------------------------------


def _next_pass(request: JsonObject, previous: JsonObject, *, ready: int | None) -> JsonObject:
    """`request` once every child `previous` asked for exists, each LWS with `ready` groups
    ready and updated (None: all), and the set's status is `previous`'s."""
    following = copy.deepcopy(request)
    for child in previous["children"]:
        group = following["children"].setdefault(f"{child['kind']}.{child['apiVersion']}", {})
        status = None
        if child["kind"] == api.LWS_KIND:
            status = lws_status(child["spec"]["replicas"], ready=ready, updated=ready)
        group.setdefault(child["metadata"]["name"], observe(child, status=status))
    following["parent"]["status"] = {**previous["status"], "observedGeneration": 1}
    return following


def _sync_at(request: JsonObject, now: str) -> JsonObject:
    result = sync.sync(envelope.parse_sync_request(copy.deepcopy(request)), now=now)
    decoded: JsonObject = orjson.loads(orjson.dumps(answers.render_answer(result.answer)))
    return decoded


def _condition(answer_: JsonObject, kind: str) -> tuple[str, str]:
    found = next(c for c in answer_["status"]["conditions"] if c["type"] == kind)
    return found["status"], found["reason"]


def test_a_new_set_that_never_becomes_ready_reports_its_progress_deadline() -> None:
    """Regression (issue 35 item 5): a new set stayed Progressing=True RolloutInProgress for
    ever, since the deadline ran only between revisions."""
    ds = make_ds()
    ds["metadata"]["annotations"] = {api.ANNOTATION_PROGRESS_DEADLINE: "60"}
    first = _sync_at(make_request(ds), NOW)
    assert first["status"]["rollout"]["lastProgressTime"] == NOW
    assert first["resyncAfterSeconds"] == 61  # the first second past the deadline

    waiting = _next_pass(make_request(ds), first, ready=0)
    before = _sync_at(waiting, "2026-11-29T12:01:00Z")  # 60 s: not past it yet
    assert _condition(before, "Progressing") == ("True", "RolloutInProgress")
    assert before["resyncAfterSeconds"] == 1
    late = _sync_at(waiting, "2026-11-29T12:01:01Z")
    assert _condition(late, "Progressing") == ("False", "ProgressDeadlineExceeded")
    assert _condition(late, "Available") == ("False", "RolloutInProgress")
    message = next(c for c in late["status"]["conditions"] if c["type"] == "Progressing")
    assert f"llm-0-{late['status']['revision']}-prefill (0/2 ready)" in message["message"]
    assert "resyncAfterSeconds" not in late  # reported: nothing more to wait for
    assert replicas(late) == replicas(before)  # nothing is aborted


def test_a_new_set_that_becomes_ready_drops_its_record() -> None:
    first = _sync_at(make_request(make_ds()), NOW)
    ready = _sync_at(_next_pass(make_request(make_ds()), first, ready=None), LATER)
    assert _condition(ready, "Available") == ("True", "AllRolesReady")
    assert "rollout" not in ready["status"]
    assert "resyncAfterSeconds" not in ready


def test_a_ready_set_that_loses_a_group_starts_no_deadline() -> None:
    """As for a Deployment whose rollout completed: a group lost later is no stalled rollout."""
    request = settled()
    lws = request["children"][LWS_TYPE]
    prefill = next(name for name in lws if name.endswith("-prefill"))
    lws[prefill]["status"] = lws_status(2, ready=1)
    result = answer(request)
    assert _condition(result, "Progressing") == ("True", "RolloutInProgress")
    assert "rollout" not in result["status"]
    assert "resyncAfterSeconds" not in result
