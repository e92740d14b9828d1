"""Canary and history that no input can widen, release or break (issue 25), on whole requests.

Each test is the regression test of one item of the issue, as a sync request crafted the way the
attack or the ordinary operation that found it left the cluster, and the answer the rules of
docs/rollout.md and docs/safety.md ("Hostile records and the canary controls") demand.
"""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from hooks import api
from hooks.core import sync
from hooks.gocompat import revision
from hooks.wire import answers, envelope
from tests import builders

JsonObject = dict[str, Any]
V1, V2, V3 = (f"vllm/vllm-openai:v0.{minor}.0" for minor in (11, 12, 13))
PARTITION = api.ANNOTATION_ROLLOUT_PARTITION
HOLD = api.ANNOTATION_ROLLOUT_HOLD_AT


def roles(image: str, *, config: JsonObject | None = None) -> list[JsonObject]:
    made = [
        builders.make_role("prefill", replicas=2, image=image),
        builders.make_role("decode", replicas=1, image=image),
    ]
    for role in made:
        if config is not None:
            role["spec"]["rolloutStrategy"] = {
                "type": "RollingUpdate",
                "rollingUpdateConfiguration": dict(config),
            }
    return made


def hash_of(image: str) -> str:
    return revision.compute_revision(
        [(role["name"], role["spec"]["leaderWorkerTemplate"]) for role in roles(image)]
    )


A, B, C = hash_of(V1), hash_of(V2), hash_of(V3)


def record(
    image: str,
    number: int,
    *,
    first: int | None = None,
    completed: bool = True,
    name: str | None = None,
    label: str | None = None,
    stored: list[JsonObject] | None = None,
    created: str = builders.CREATED,
) -> JsonObject:
    """A DisaggregatedSetRevision as Metacontroller observes it (forged when told so)."""
    revision_ = label or hash_of(image)
    body = {
        "apiVersion": api.API_VERSION,
        "kind": api.REVISION_KIND,
        "metadata": {
            "name": name or f"llm-{revision_}",
            "labels": {api.LABEL_NAME: "llm", api.LABEL_REVISION: revision_},
        },
        "revision": number,
        "firstRevision": first or number,
        "roles": stored if stored is not None else roles(image),
    }
    if completed:  # every slice ran it when it held this number
        body["completedAs"] = number
    return builders.observe(body, created=created)


def lws(
    role: str, revision_: str, replicas: int, *, index: int = 0, initial: int | None = None
) -> JsonObject:
    return builders.make_lws(
        role, revision=revision_, replicas=replicas, slice_index=index, initial=initial
    )


def a_set(image: str, *, slices: int = 1, **annotations: str) -> JsonObject:
    ds = builders.make_ds(roles=roles(image), slices=slices, generation=2)
    if annotations:
        ds["metadata"]["annotations"] = {
            {"partition": PARTITION, "hold": HOLD, "paused": api.ANNOTATION_PAUSED}[key]: value
            for key, value in annotations.items()
        }
    return ds


def sync_answer(
    parent: JsonObject, children: list[JsonObject], *, now: str = builders.NOW
) -> JsonObject:
    request = builders.make_request(parent, children=children)
    result = sync.sync(envelope.parse_sync_request(copy.deepcopy(request)), now=now)
    answer: JsonObject = orjson.loads(orjson.dumps(answers.render_answer(result.answer)))
    return answer


def lws_of(answer: JsonObject, index: int) -> dict[str, JsonObject]:
    return {
        child["metadata"]["name"]: child
        for child in answer["children"]
        if child["kind"] == api.LWS_KIND
        and child["metadata"]["labels"][api.LABEL_SLICE] == str(index)
    }


def services_of(answer: JsonObject, index: int) -> set[str]:
    return {
        child["metadata"]["name"]
        for child in answer["children"]
        if child["kind"] == api.SERVICE_KIND
        and child["metadata"]["labels"][api.LABEL_SLICE] == str(index)
    }


def condition(answer: JsonObject, kind: str) -> JsonObject:
    found: JsonObject = next(c for c in answer["status"]["conditions"] if c["type"] == kind)
    return found


def image_of(child: JsonObject) -> str:
    template = child["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    image: str = template["spec"]["containers"][0]["image"]
    return image


def mid_rollout(index: int = 0) -> list[JsonObject]:
    """Slice `index` in the middle of a rollout from A to B: both revisions run."""
    return [
        lws("prefill", A, 2, index=index, initial=2),
        lws("decode", A, 1, index=index, initial=1),
        lws("prefill", B, 1, index=index),
        lws("decode", B, 1, index=index),
    ]


def steady(revision_: str, index: int) -> list[JsonObject]:
    return [lws("prefill", revision_, 2, index=index), lws("decode", revision_, 1, index=index)]


# --- item 1: a partition is never widened by adding slices ----------------------------------


@pytest.mark.parametrize(
    "how",
    [
        "added",  # a 1-slice set mid-rollout, then spec.slices: 2
        "re-added",  # slices 2 -> 1 -> 2: slice 1 is gone, its record of A is all that is left
        "its-lws-deleted",  # slice 1 ran A; its LWS were deleted by hand
        "its-lws-drained",  # slice 1 ran A; its LWS were scaled to 0 by hand
    ],
)
def test_issue25_item1_a_slice_past_the_partition_never_gets_the_held_back_revision(
    how: str,
) -> None:
    children = [*mid_rollout(0), record(V1, 1), record(V2, 2, completed=False)]
    if how == "its-lws-drained":
        children += [lws("prefill", A, 0, index=1), lws("decode", A, 0, index=1)]
    answer = sync_answer(a_set(V2, slices=2, partition="1"), children)
    created = lws_of(answer, 1)
    assert set(created) == {f"llm-1-{A}-prefill", f"llm-1-{A}-decode"}, how
    assert {name: child["spec"]["replicas"] for name, child in created.items()} == {
        f"llm-1-{A}-prefill": 2,
        f"llm-1-{A}-decode": 1,
    }
    assert {image_of(child) for child in created.values()} == {V1}
    slices = answer["status"]["rollout"]["slices"]
    assert {(s["index"], s["phase"]) for s in slices} >= {(1, "Partitioned")}


def test_issue25_item1_without_a_stable_revision_a_slice_past_the_partition_runs_nothing() -> None:
    """No record says every slice ran a revision (A's is not complete): slice 1 waits, empty,
    rather than get B."""
    children = [*mid_rollout(0), record(V1, 1, completed=False), record(V2, 2, completed=False)]
    answer = sync_answer(a_set(V2, slices=2, partition="1"), children)
    assert lws_of(answer, 1) == {}
    slices = {
        s["index"]: (s["phase"], s["revisions"]) for s in answer["status"]["rollout"]["slices"]
    }
    assert slices[1] == ("Partitioned", [])
    held = sync_answer(a_set(V2, slices=2, partition="1", hold="0%"), children)
    assert "slice 1 is past annotation" in condition(held, "Progressing")["message"]
    assert (
        "runs nothing: the history records no revision every slice has run"
        in condition(held, "Progressing")["message"]
    )


def test_issue25_item1_a_new_set_with_a_partition_creates_every_slice_at_its_revision() -> None:
    answer = sync_answer(a_set(V1, slices=3, partition="1"), [])
    for index in range(3):
        assert set(lws_of(answer, index)) == {
            f"llm-{index}-{A}-prefill",
            f"llm-{index}-{A}-decode",
        }
    (created,) = [c for c in answer["children"] if c["kind"] == api.REVISION_KIND]
    assert created["completedAs"] == 1  # every slice runs it from the first pass


# --- item 2: a steady ready slice has its Services, whatever the annotations say -------------


def test_issue25_item2_a_slice_past_the_partition_steady_on_its_revision_gets_its_services() -> (
    None
):
    children = [*steady(B, 0), *steady(A, 1), record(V1, 1), record(V2, 2, completed=False)]
    answer = sync_answer(a_set(V2, slices=2, partition="1"), children)
    assert services_of(answer, 1) == {f"llm-1-{A}-prefill-prv", f"llm-1-{A}-decode-prv"}
    assert services_of(answer, 0) == {f"llm-0-{B}-prefill-prv", f"llm-0-{B}-decode-prv"}


def test_issue25_item2_a_paused_slice_standing_on_its_revision_gets_its_services() -> None:
    answer = sync_answer(a_set(V2, paused="true"), [*steady(A, 0), record(V1, 1)])
    assert services_of(answer, 0) == {f"llm-0-{A}-prefill-prv", f"llm-0-{A}-decode-prv"}
    assert set(lws_of(answer, 0)) == {f"llm-0-{A}-prefill", f"llm-0-{A}-decode"}


def test_issue25_item2_a_slice_past_the_partition_mid_way_keeps_its_services_as_they_are() -> None:
    children = [*steady(B, 0), *mid_rollout(1), record(V1, 1), record(V2, 2, completed=False)]
    answer = sync_answer(a_set(V2, slices=2, partition="1"), children)
    assert services_of(answer, 1) == set()


# --- item 3: forged records steer nothing ----------------------------------------------------


def test_issue25_item3a_a_mislabelled_record_from_2099_does_not_release_a_hold() -> None:
    forged = record(V1, 1, name="llm-zzzzzzzz", label=A, created="2099-01-01T00:00:00Z")
    children = [*mid_rollout(), record(V1, 1), record(V2, 2, completed=False), forged]
    answer = sync_answer(a_set(V2, hold="25%"), children)
    progressing = condition(answer, "Progressing")
    assert (progressing["status"], progressing["reason"]) == ("Unknown", "RolloutHeld")
    assert lws_of(answer, 0)[f"llm-0-{A}-prefill"]["spec"]["replicas"] == 2  # nothing drained
    degraded = condition(answer, "Degraded")
    assert degraded["reason"] == "InvalidHistory" and "'llm-zzzzzzzz'" in degraded["message"]
    assert forged["metadata"]["name"] in {c["metadata"]["name"] for c in answer["children"]}


def test_issue25_item3b_a_record_with_the_stable_label_and_another_template_renders_nothing() -> (
    None
):
    evil = roles("evil/miner:latest")
    forged = record(V1, 5, name="llm-evil", label=A, stored=evil)
    impostor = record(V1, 6, stored=evil)  # named and labelled A, its roles another revision
    children = [
        *mid_rollout(0),
        *steady(A, 1),
        record(V1, 1),
        record(V2, 2, completed=False),
        forged,
    ]
    answer = sync_answer(a_set(V2, slices=3, partition="1"), children)
    created = lws_of(answer, 2)
    assert set(created) == {f"llm-2-{A}-prefill", f"llm-2-{A}-decode"}
    assert {image_of(child) for child in created.values()} == {V1}
    # The impostor holds A's name: A's record does not count, so nothing is stable.
    children[-2:] = [impostor]
    answer = sync_answer(a_set(V2, slices=3, partition="1"), children)
    assert lws_of(answer, 2) == {}
    degraded = condition(answer, "Degraded")
    assert degraded["reason"] == "InvalidHistory" and f"'llm-{A}'" in degraded["message"]


def test_issue25_item3b_an_lws_is_never_created_with_a_template_that_is_not_its_revision() -> None:
    """Whatever records a request carries, every new LWS's templates hash to its label."""
    evil = roles("evil/miner:latest")
    children = [
        *mid_rollout(0),
        record(V1, 5, stored=evil),
        record(V1, 7, name="llm-evil", label=A, stored=evil),
        record(V2, 2, completed=False),
    ]
    answer = sync_answer(a_set(V2, slices=3, partition="1"), children)
    for child in answer["children"]:
        if child["kind"] == api.LWS_KIND and child["metadata"]["name"].startswith("llm-2-"):
            assert image_of(child) != "evil/miner:latest"


# --- item 4: two records with one number hold, never 500 -------------------------------------


def test_issue25_item4_two_records_of_one_number_hold_and_are_named_never_a_500() -> None:
    twin = record(V1, 1, name="llm-twin", label=A)  # the 500 of issue 25: one number, one label
    cases = [([twin], ["llm-twin"]), ([record(V2, 1)], [f"llm-{A}", f"llm-{B}"])]
    for extra, named in cases:
        children = [*steady(A, 1), record(V1, 1), *extra]
        answer = sync_answer(a_set(V3, slices=2, partition="1", hold="50%"), children)
        degraded = condition(answer, "Degraded")
        assert degraded["reason"] == "InvalidHistory"
        assert all(f"'{name}'" in degraded["message"] for name in named), degraded["message"]
        kept = {c["metadata"]["name"] for c in answer["children"]}
        assert {c["metadata"]["name"] for c in extra} <= kept


# --- item 5: numbers stay within what the API server stores ----------------------------------


def test_issue25_item5_a_record_numbered_past_int64_is_untrusted_and_numbers_stay_small() -> None:
    answer = sync_answer(a_set(V2), [*steady(A, 0), record(V1, 2**63 - 1)])
    numbers = {
        c["metadata"]["name"]: c["revision"]
        for c in answer["children"]
        if c["kind"] == api.REVISION_KIND
    }
    assert numbers == {f"llm-{A}": 2**63 - 1, f"llm-{B}": 1}
    assert condition(answer, "Degraded")["reason"] == "InvalidHistory"


# --- item 6: a malformed paused pauses ---------------------------------------------------------


@pytest.mark.parametrize("text", ["True", "yes", "1", ""])
def test_issue25_item6_a_malformed_paused_reads_as_paused(text: str) -> None:
    answer = sync_answer(a_set(V2, paused=text), [*steady(A, 0), record(V1, 1)])
    progressing = condition(answer, "Progressing")
    assert (progressing["status"], progressing["reason"]) == ("Unknown", "RolloutPaused")
    assert set(lws_of(answer, 0)) == {f"llm-0-{A}-prefill", f"llm-0-{A}-decode"}
    degraded = condition(answer, "Degraded")
    assert (
        degraded["reason"] == "InvalidAnnotation" and api.ANNOTATION_PAUSED in degraded["message"]
    )


# --- item 8: one defaulting rule for maxSurge and maxUnavailable -----------------------------


def test_issue25_item8_a_budget_left_out_reads_as_the_lws_defaults_in_the_planner_too() -> None:
    """maxSurge and maxUnavailable left out of an undefaulted object are 0 and 1, as validation
    reads them: the first step drains one old group, never surges."""
    parent = builders.make_ds(roles=roles(V2, config={}), generation=2)
    children = [
        lws("prefill", A, 2, initial=2),
        lws("decode", A, 1, initial=1),
        lws("prefill", B, 0),
        lws("decode", B, 0),
        record(V1, 1),
        record(V2, 2, completed=False),
    ]
    replicas = {
        name: child["spec"]["replicas"]
        for name, child in lws_of(sync_answer(parent, children), 0).items()
    }
    assert replicas == {
        f"llm-0-{A}-prefill": 1,
        f"llm-0-{A}-decode": 1,
        f"llm-0-{B}-prefill": 0,
        f"llm-0-{B}-decode": 0,
    }
    stored = builders.make_ds(
        roles=roles(V2, config={"maxSurge": 0, "maxUnavailable": 1}), generation=2
    )
    defaulted = {
        name: child["spec"]["replicas"]
        for name, child in lws_of(sync_answer(stored, children), 0).items()
    }
    assert defaulted == replicas


# --- item 10: an undo is never held ----------------------------------------------------------


def test_issue25_item10_an_undo_to_a_record_created_again_after_pruning_is_not_held() -> None:
    """Limit 1: A ran (1), then C (3); A was pruned, run again (its record created anew, 4,
    later than C's), then C again (renumbered 5): the undo to A is a rollback, never held."""
    children = [
        lws("prefill", C, 2, initial=2),
        lws("decode", C, 1, initial=1),
        lws("prefill", A, 1),
        lws("decode", A, 1),
        record(V3, 5, first=3, created="2026-11-29T10:30:00Z"),
        record(V1, 4, created="2026-11-29T11:00:00Z"),
    ]
    parent = a_set(V1, hold="25%")
    parent["metadata"]["annotations"][api.ANNOTATION_HISTORY_LIMIT] = "1"
    answer = sync_answer(parent, children)
    progressing = condition(answer, "Progressing")
    assert (progressing["status"], progressing["reason"]) == ("True", "RolloutInProgress")
    assert f"a rollback to revision {A}" in progressing["message"]
    assert f"{HOLD} (25%) does not hold" in progressing["message"]
