"""The revision history (`hooks.core.history`): numbering, change-cause, pruning, conflicts."""

from __future__ import annotations

from typing import Any

from hooks import api
from hooks.core import children, history, records
from hooks.wire import envelope
from tests import builders

JsonObject = dict[str, Any]
SET = "llm"


def _spec(image: str = "vllm/vllm-openai:v0.11.0") -> api.DisaggregatedSetSpec:
    ds = builders.make_ds(
        roles=[
            builders.make_role("prefill", replicas=2, image=image),
            builders.make_role("decode", replicas=1, image=image, external=True),
        ]
    )
    return api.DisaggregatedSetSpec.model_validate(ds["spec"])


def _record(revision: str, number: int, *, name: str | None = None) -> JsonObject:
    rendered = children.render_history(
        set_name=SET, revision=revision, number=number, roles=_spec().roles, change_cause=None
    )
    if name is not None:
        rendered["metadata"]["name"] = name
    return builders.observe(rendered)


def _parse(*objects: JsonObject) -> list[records.ObservedObject]:
    request = builders.make_request(builders.make_ds(), children=objects)
    return list(envelope.parse_sync_request(request).children)


def _plan(
    target: str,
    *objects: JsonObject,
    lws: tuple[JsonObject, ...] = (),
    limit: int = 10,
    annotations: dict[str, str] | None = None,
    foreign: frozenset[str] = frozenset(),
) -> history.HistoryPlan:
    observed = _parse(*objects, *lws)
    return history.plan(
        set_name=SET,
        spec=_spec(),
        target=target,
        observed=[item for item in observed if item.kind is records.ChildKind.REVISION],
        lws=[item for item in observed if item.kind is records.ChildKind.LWS],
        foreign_names=foreign,
        annotations=annotations or {},
        limit=limit,
    )


def _numbers(plan: history.HistoryPlan) -> dict[str, int]:
    return {child["metadata"]["name"]: child["revision"] for child in plan.children}


def test_the_first_revision_is_recorded_as_number_one_with_the_roles_as_stored() -> None:
    plan = _plan("aaaaaaaa")
    (record,) = plan.children
    assert record["apiVersion"] == api.API_VERSION and record["kind"] == api.REVISION_KIND
    assert record["metadata"] == {
        "name": "llm-aaaaaaaa",
        "labels": {api.LABEL_NAME: SET, api.LABEL_REVISION: "aaaaaaaa"},
    }
    assert record["revision"] == 1
    roles = _spec().roles
    assert record["roles"] == [
        {"name": "prefill", "spec": roles[0].spec},
        {"name": "decode", "scaling": {"mode": "External"}, "spec": roles[1].spec},
    ]
    assert plan.pruned == () and plan.problems == ()


def test_a_new_revision_gets_the_next_number_and_the_old_one_stays() -> None:
    plan = _plan("bbbbbbbb", _record("aaaaaaaa", 1))
    assert _numbers(plan) == {"llm-aaaaaaaa": 1, "llm-bbbbbbbb": 2}


def test_the_current_revision_keeps_its_number_and_data() -> None:
    current = _record("bbbbbbbb", 2)
    plan = _plan("bbbbbbbb", _record("aaaaaaaa", 1), current)
    (kept,) = [c for c in plan.children if c["metadata"]["name"] == "llm-bbbbbbbb"]
    (observed,) = _parse(current)
    assert kept == observed.applied


def test_a_revert_gives_the_old_record_the_next_number_with_its_data_unchanged() -> None:
    old = _record("aaaaaaaa", 1)
    plan = _plan("aaaaaaaa", old, _record("bbbbbbbb", 2))
    assert _numbers(plan) == {"llm-aaaaaaaa": 3, "llm-bbbbbbbb": 2}
    (reverted,) = [c for c in plan.children if c["metadata"]["name"] == "llm-aaaaaaaa"]
    assert reverted["roles"] == old["roles"]


def test_the_change_cause_is_copied_when_a_revision_gets_its_number() -> None:
    cause = {api.CHANGE_CAUSE_ANNOTATION: "vllm 0.11 with speculative decoding"}
    (new,) = _plan("aaaaaaaa", annotations=cause).children
    assert new["metadata"]["annotations"] == cause
    plan = _plan("aaaaaaaa", _record("aaaaaaaa", 1), _record("bbbbbbbb", 2), annotations=cause)
    (reverted,) = [c for c in plan.children if c["metadata"]["name"] == "llm-aaaaaaaa"]
    assert reverted["metadata"]["annotations"] == cause
    # A record that keeps its number keeps its annotations: the cause is of its own time.
    later = {api.CHANGE_CAUSE_ANNOTATION: "scaled decode"}
    (kept,) = _plan("aaaaaaaa", _record("aaaaaaaa", 1), annotations=later).children
    assert "annotations" not in kept["metadata"]


def test_old_revisions_past_the_limit_go_oldest_first() -> None:
    records_ = [_record(f"{n:08x}", n) for n in range(1, 6)]  # 1..5; the target is 5
    plan = _plan(f"{5:08x}", *records_, limit=2)
    assert plan.pruned == ("llm-00000001", "llm-00000002")
    assert set(_numbers(plan)) == {"llm-00000003", "llm-00000004", "llm-00000005"}


def test_a_revision_that_still_has_lws_is_never_pruned_but_counts() -> None:
    records_ = [_record(f"{n:08x}", n) for n in range(1, 5)]  # target 4, three old
    serving = builders.make_lws("prefill", revision=f"{1:08x}", replicas=2)
    plan = _plan(f"{4:08x}", *records_, lws=(serving,), limit=1)
    # Old: 1 (in use), 2, 3; two too many: 1 is skipped, so 2 and 3 go.
    assert plan.pruned == ("llm-00000002", "llm-00000003")
    assert "llm-00000001" in _numbers(plan)


def test_a_limit_of_zero_keeps_only_the_current_revision_and_those_in_use() -> None:
    plan = _plan("bbbbbbbb", _record("aaaaaaaa", 1), _record("bbbbbbbb", 2), limit=0)
    assert plan.pruned == ("llm-aaaaaaaa",)


def test_a_record_whose_labels_do_not_match_its_name_is_kept_and_never_counted() -> None:
    odd = _record("aaaaaaaa", 1, name="llm-renamed")
    plan = _plan("bbbbbbbb", odd, _record("cccccccc", 2), limit=0)
    assert "llm-renamed" in _numbers(plan)
    assert plan.pruned == ("llm-cccccccc",)


def test_a_name_held_by_a_foreign_object_is_reported_and_not_created() -> None:
    plan = _plan("aaaaaaaa", foreign=frozenset({"llm-aaaaaaaa"}))
    assert plan.children == ()
    (problem,) = plan.problems
    assert problem.reason is api.Reason.HISTORY_CONFLICT
    assert "'llm-aaaaaaaa'" in problem.message


def test_numbers_that_clash_are_resolved_by_renumbering_the_current_revision() -> None:
    plan = _plan("aaaaaaaa", _record("aaaaaaaa", 2), _record("bbbbbbbb", 2))
    assert _numbers(plan) == {"llm-aaaaaaaa": 3, "llm-bbbbbbbb": 2}
