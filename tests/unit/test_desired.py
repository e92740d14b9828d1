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


def test_there_is_no_way_to_the_children_around_the_guard() -> None:
    """The deletion guard cannot be skipped: the only accessor of the answer's children checks."""
    public = {name for name in dir(desired.DesiredChildren) if not name.startswith("_")}
    assert public == {"add", "allow_deletion", "checked_children", "deleted", "keep", "requested"}


def test_the_hold_path_goes_through_the_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    """A held set's answer (every observed child unchanged) is checked like any other."""
    checked: list[int] = []
    original = desired.DesiredChildren.checked_children

    def spy(self: desired.DesiredChildren) -> tuple[api.JsonObject, ...]:
        result = original(self)
        checked.append(len(result))
        return result

    monkeypatch.setattr(desired.DesiredChildren, "checked_children", spy)
    parent = builders.make_ds()
    parent["spec"]["slices"] = True  # a wrong JSON type holds the set
    body = builders.make_request(parent, children=[_observed_lws("llm-0-aaaaaaaa-prefill")])
    result = sync.sync(envelope.parse_sync_request(body), now="2026-01-01T00:00:00Z")
    assert result.summary["outcome"] == "held"
    assert checked == [1]
