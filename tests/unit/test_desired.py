"""The answer's children and the deletion guard (`hooks.core.desired`)."""

from __future__ import annotations

import pytest

from hooks import api
from hooks.core import children, desired, sync
from hooks.wire import envelope
from tests import builders


def _observed_lws(name: str, replicas: int = 2) -> builders.JsonObject:
    lws = builders.make_lws("prefill", revision="aaaaaaaa", replicas=replicas)
    lws["metadata"]["name"] = name
    return lws


def test_children_come_out_by_kind_then_name() -> None:
    answer = desired.DesiredChildren(())
    for kind, name in (("Service", "a"), ("LeaderWorkerSet", "b"), ("LeaderWorkerSet", "a")):
        answer.add({"kind": kind, "metadata": {"name": name}})
    ordered = answer.checked_children()
    assert [(c["kind"], c["metadata"]["name"]) for c in ordered] == [
        ("LeaderWorkerSet", "a"),
        ("LeaderWorkerSet", "b"),
        ("Service", "a"),
    ]


def test_an_observed_child_may_go_only_when_allowed() -> None:
    (item,) = builders.parse_children(_observed_lws("llm-0-aaaaaaaa-prefill"))
    answer = desired.DesiredChildren([item])
    with pytest.raises(desired.UnsafeDeletionError, match="LeaderWorkerSet llm-0-aaaaaaaa"):
        answer.checked_children()
    answer.allow_deletion(desired.key_of(item))
    assert answer.checked_children() == ()
    assert answer.deleted() == 1


def test_the_same_child_twice_is_one_child() -> None:
    answer = desired.DesiredChildren(())
    child = children.render_service(name="x-prv", labels={"a": "b"})
    answer.add(child)
    answer.add(dict(child))
    assert answer.checked_children() == (child,)
    assert answer.conflicts == set()


def test_two_different_children_under_an_observed_name_hold_the_observed_one() -> None:
    (item,) = builders.parse_children(_observed_lws("llm-1-aaaaaaaa-prefill", replicas=3))
    answer = desired.DesiredChildren([item])
    answer.add(children.reemit_lws(item, replicas=5))
    answer.add(children.reemit_lws(item, replicas=0))
    answer.add(children.reemit_lws(item, replicas=7))  # still held
    (kept,) = answer.checked_children()
    assert kept["spec"]["replicas"] == 3  # exactly as observed
    assert answer.conflicts == {(api.LWS_KIND, "llm-1-aaaaaaaa-prefill")}


def test_the_answer_requests_only_the_children_that_are_not_observed() -> None:
    (item,) = builders.parse_children(_observed_lws("llm-0-aaaaaaaa-prefill"))
    answer = desired.DesiredChildren([item])
    answer.add(children.reemit_lws(item, replicas=2))
    answer.add(children.render_service(name="llm-prv", labels={"a": "b"}))
    assert answer.requested() == {("Service", "llm-prv")}
    assert answer.deleted() == 0


def test_a_kept_child_is_answered_as_it_is_and_counts_as_observed() -> None:
    """A child of a kind this version does not know: answered as last applied, never created."""
    unknown = {"apiVersion": "example.com/v9", "kind": "Gadget", "metadata": {"name": "g"}}
    answer = desired.DesiredChildren(())
    answer.keep(unknown)
    assert answer.checked_children() == (unknown,)
    assert answer.requested() == frozenset()
    assert answer.deleted() == 0


@pytest.mark.parametrize("held", [False, True], ids=["reconciled", "held"])
def test_there_is_no_way_to_the_children_around_the_guard(
    monkeypatch: pytest.MonkeyPatch, held: bool
) -> None:
    """Whichever path a pass takes, an answer that lost an observed child is refused, not sent.

    The loss is a bug planted in the answer (it drops every LWS added to it)."""
    parent = builders.make_ds()
    if held:
        parent["spec"]["slices"] = True  # a wrong JSON type holds the set
    body = builders.make_request(parent, children=[_observed_lws("llm-0-aaaaaaaa-prefill")])
    request = envelope.parse_sync_request(body)
    sound = sync.sync(request, now="2026-01-01T00:00:00Z")
    assert sound.summary["outcome"] == ("held" if held else "synced")
    assert "llm-0-aaaaaaaa-prefill" in {c["metadata"]["name"] for c in sound.answer.children}
    original = desired.DesiredChildren.add

    def losing(self: desired.DesiredChildren, child: api.JsonObject) -> None:
        if child["kind"] != api.LWS_KIND:
            original(self, child)

    monkeypatch.setattr(desired.DesiredChildren, "add", losing)

    with pytest.raises(desired.UnsafeDeletionError, match="LeaderWorkerSet llm-0-aaaaaaaa"):
        sync.sync(request, now="2026-01-01T00:00:00Z")
