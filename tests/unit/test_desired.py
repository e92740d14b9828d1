"""The answer's children and the deletion guard (`hooks.core.desired`)."""

from __future__ import annotations

import pytest

from hooks import api
from hooks.core import children, desired
from tests import builders


def _observed_lws(name: str, replicas: int = 2) -> builders.JsonObject:
    lws = builders.make_lws("prefill", revision="aaaaaaaa", replicas=replicas)
    lws["metadata"]["name"] = name
    return lws


def test_children_come_out_by_kind_then_name() -> None:
    answer = desired.DesiredChildren(())
    for kind, name in (("Service", "a"), ("LeaderWorkerSet", "b"), ("LeaderWorkerSet", "a")):
        answer.add({"kind": kind, "metadata": {"name": name}})
    ordered = answer.sorted_children()
    assert [(c["kind"], c["metadata"]["name"]) for c in ordered] == [
        ("LeaderWorkerSet", "a"),
        ("LeaderWorkerSet", "b"),
        ("Service", "a"),
    ]


def test_an_observed_child_may_go_only_when_allowed() -> None:
    (item,) = builders.parse_children(_observed_lws("llm-0-aaaaaaaa-prefill"))
    answer = desired.DesiredChildren([item])
    with pytest.raises(desired.UnsafeDeletionError, match="LeaderWorkerSet llm-0-aaaaaaaa"):
        answer.check()
    answer.allow_deletion(desired.key_of(item))
    answer.check()
    assert answer.deleted() == 1


def test_the_same_child_twice_is_one_child() -> None:
    answer = desired.DesiredChildren(())
    child = children.render_service(name="x-prv", labels={"a": "b"})
    answer.add(child)
    answer.add(dict(child))
    assert answer.sorted_children() == (child,)
    assert answer.conflicts == set()


def test_two_different_children_under_an_observed_name_hold_the_observed_one() -> None:
    (item,) = builders.parse_children(_observed_lws("llm-1-aaaaaaaa-prefill", replicas=3))
    answer = desired.DesiredChildren([item])
    answer.add(children.reemit_lws(item, replicas=5, initial_replicas=None))
    answer.add(children.reemit_lws(item, replicas=0, initial_replicas=None))
    answer.add(children.reemit_lws(item, replicas=7, initial_replicas=None))  # still held
    (kept,) = answer.sorted_children()
    assert kept["spec"]["replicas"] == 3  # exactly as observed
    assert answer.conflicts == {(api.LWS_KIND, "llm-1-aaaaaaaa-prefill")}
    answer.check()
