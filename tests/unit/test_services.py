"""Headless Services of one slice (`hooks.core.services`, docs/rollout.md step 3.4)."""

from __future__ import annotations

from hooks import api
from hooks.core import children, records, services
from tests import builders

OLD, NEW = "aaaaaaaa", "bbbbbbbb"
ROLES = ["prefill", "decode"]


def service(revision: str, role: str, slice_index: int = 0) -> builders.JsonObject:
    name = f"llm-{slice_index}-{revision}-{role}-prv"
    labels = {
        api.LABEL_NAME: "llm",
        api.LABEL_ROLE: role,
        api.LABEL_REVISION: revision,
        api.LABEL_SLICE: str(slice_index),
    }
    return builders.observe(children.render_service(name=name, labels=labels))


def plan(
    lws: list[builders.JsonObject], existing: list[builders.JsonObject]
) -> tuple[dict[str, builders.JsonObject], list[str]]:
    kept = builders.parse_children(*lws)
    observed = builders.parse_children(*existing) if existing else []
    result, dropped = services.plan_slice(
        set_name="llm",
        slice_index=0,
        revision=NEW,
        role_names=ROLES,
        lws=kept,
        services=observed,
    )
    return {s["metadata"]["name"]: s for s in result}, dropped


def test_until_the_target_is_ready_every_service_stays_and_none_is_created() -> None:
    lws = [
        builders.make_lws("prefill", revision=NEW, replicas=1, ready=1),
        builders.make_lws("decode", revision=NEW, replicas=1, ready=0),
        builders.make_lws("prefill", revision=OLD, replicas=2),
        builders.make_lws("decode", revision=OLD, replicas=1),
    ]
    result, dropped = plan(lws, [service(OLD, "prefill"), service(OLD, "decode")])
    assert set(result) == {f"llm-0-{OLD}-prefill-prv", f"llm-0-{OLD}-decode-prv"}
    assert dropped == []


def test_a_ready_target_gets_its_services_and_a_drained_revision_loses_its_own() -> None:
    lws = [
        builders.make_lws("prefill", revision=NEW, replicas=2, ready=1),
        builders.make_lws("decode", revision=NEW, replicas=1, ready=1),
        builders.make_lws("prefill", revision=OLD, replicas=0, ready=0),
        builders.make_lws("decode", revision=OLD, replicas=0, ready=0),
    ]
    result, dropped = plan(lws, [service(OLD, "prefill"), service(OLD, "decode")])
    assert set(result) == {f"llm-0-{NEW}-prefill-prv", f"llm-0-{NEW}-decode-prv"}
    assert sorted(dropped) == [f"llm-0-{OLD}-decode-prv", f"llm-0-{OLD}-prefill-prv"]
    created = result[f"llm-0-{NEW}-prefill-prv"]
    assert created["spec"] == {
        "clusterIP": "None",
        "selector": {
            api.LABEL_NAME: "llm",
            api.LABEL_ROLE: "prefill",
            api.LABEL_REVISION: NEW,
            api.LABEL_SLICE: "0",
        },
    }
    assert created["metadata"]["labels"] == created["spec"]["selector"]


def test_an_old_revision_that_still_serves_keeps_its_services() -> None:
    lws = [
        builders.make_lws("prefill", revision=NEW, replicas=1, ready=1),
        builders.make_lws("decode", revision=NEW, replicas=1, ready=1),
        builders.make_lws("prefill", revision=OLD, replicas=2, ready=2),
        builders.make_lws("decode", revision=OLD, replicas=1, ready=1),
    ]
    result, dropped = plan(lws, [service(OLD, "prefill"), service(OLD, "decode")])
    assert len(result) == 4
    assert dropped == []


def test_an_existing_service_is_returned_as_it_was_never_rendered_again() -> None:
    lws = [
        builders.make_lws("prefill", revision=NEW, replicas=1, ready=1),
        builders.make_lws("decode", revision=NEW, replicas=1, ready=1),
    ]
    existing = service(NEW, "prefill")
    existing["metadata"]["annotations"][api.LAST_APPLIED_ANNOTATION] = existing["metadata"][
        "annotations"
    ][api.LAST_APPLIED_ANNOTATION].replace('"clusterIP":"None"', '"clusterIP":"None","x":1')
    result, _ = plan(lws, [existing])
    assert result[f"llm-0-{NEW}-prefill-prv"]["spec"]["x"] == 1


def test_a_role_at_zero_replicas_keeps_the_target_from_being_ready() -> None:
    lws = [
        builders.make_lws("prefill", revision=NEW, replicas=1, ready=1),
        builders.make_lws("decode", revision=NEW, replicas=0, ready=0),
    ]
    result, dropped = plan(lws, [])
    assert result == {}
    assert dropped == []


def test_services_are_a_child_type_when_declared_or_when_no_controller_says() -> None:
    every = records.DS_CHILD_KINDS
    assert services.is_child_type(None)
    assert services.is_child_type(every)
    assert not services.is_child_type(every - {records.ChildKind.SERVICE})
    assert not services.is_child_type(frozenset())
