"""The revision history (`hooks.core.history`): which records count, numbering, `completedAs`,
pruning, rollbacks, the stable revision, and records that are forged, tied or numbered past what a
history holds (issue 25, items 3, 4, 5 and 10)."""

from __future__ import annotations

import base64
import copy
import random
import zlib
from typing import Any

import pytest

from hooks import api
from hooks.core import children, compact, history, records
from hooks.gocompat import revision
from hooks.wire import envelope
from tests import builders

JsonObject = dict[str, Any]
SET = "llm"
V1, V2, V3 = (f"vllm/vllm-openai:v0.{minor}.0" for minor in (11, 12, 13))


def _spec(image: str = V1) -> api.DisaggregatedSetSpec:
    ds = builders.make_ds(
        roles=[
            builders.make_role("prefill", replicas=2, image=image),
            builders.make_role("decode", replicas=1, image=image, external=True),
        ]
    )
    return api.DisaggregatedSetSpec.model_validate(ds["spec"])


def _hash(image: str) -> str:
    return revision.of_spec(_spec(image))


A, B, C = _hash(V1), _hash(V2), _hash(V3)


def _record(
    image: str,
    number: int,
    *,
    first: int | None = None,
    completed: int | None = None,
    name: str | None = None,
    label: str | None = None,
    created: str = builders.CREATED,
    legacy: bool = False,
) -> JsonObject:
    rendered = builders.make_record(
        revision=_hash(image), number=first or number, roles=_spec(image).roles, legacy=legacy
    )
    rendered["revision"] = number
    if completed is not None:
        rendered["completedAs"] = completed
    if name is not None:
        rendered["metadata"]["name"] = name
    if label is not None:
        rendered["metadata"]["labels"][api.LABEL_REVISION] = label
    return builders.observe(rendered, created=created)


def _parse(*objects: JsonObject) -> list[records.ObservedObject]:
    request = builders.make_request(builders.make_ds(), children=objects)
    return list(envelope.parse_sync_request(request).children)


def _read(*objects: JsonObject) -> history.History:
    observed = [item for item in _parse(*objects) if item.kind is records.ChildKind.REVISION]
    return history.read(observed, set_name=SET, set_uid=builders.DS_UID)


def _plan(
    target: str,
    *objects: JsonObject,
    in_use: frozenset[str] = frozenset(),
    limit: int = 10,
    annotations: dict[str, str] | None = None,
    complete: bool = False,
    running: tuple[JsonObject, ...] = (),
) -> history.HistoryPlan:
    return history.plan(
        _read(*objects),
        set_name=SET,
        spec=_spec(),
        target=target,
        in_use=in_use,
        annotations=annotations or {},
        limit=limit,
        complete=complete,
        running=_running(*running),
    )


def _lws(image: str, *, created: str = builders.CREATED) -> list[JsonObject]:
    """The LWS the set runs of revision `image` (slice 0), as Metacontroller observes them."""
    return [
        builders.observe(
            copy.deepcopy(
                children.render_lws(
                    set_name=SET,
                    role=role,
                    slice_index=0,
                    revision=_hash(image),
                    replicas=1,
                    policy=None,
                )
            ),
            created=created,
        )
        for role in _spec(image).roles
    ]


def _running(*lws: JsonObject) -> list[records.ObservedObject]:
    parsed: list[records.ObservedObject] = builders.parse_children(*lws)
    return parsed


def _numbers(plan: history.HistoryPlan) -> dict[str, int]:
    return {child["metadata"]["name"]: child["revision"] for child in plan.children}


# --- numbering, change-cause, completedAs, pruning ------------------------------------------------


def test_the_first_revision_is_recorded_as_number_one_with_the_roles_as_stored() -> None:
    plan = _plan(A)
    (record,) = plan.children
    assert record["apiVersion"] == api.API_VERSION and record["kind"] == api.REVISION_KIND
    assert record["metadata"] == {
        "name": f"llm-{A}",
        "labels": {api.LABEL_NAME: SET, api.LABEL_REVISION: A},
    }
    assert (record["revision"], record["firstRevision"]) == (1, 1) and "completedAs" not in record
    roles = _spec().roles
    assert "roles" not in record
    assert builders.record_roles(record) == [
        {"name": "prefill", "spec": roles[0].spec},
        {"name": "decode", "scaling": {"mode": "External"}, "spec": roles[1].spec},
    ]
    assert plan.pruned == () and plan.problems == ()


def test_a_new_revision_gets_the_next_number_and_the_old_one_stays() -> None:
    plan = _plan(B, _record(V1, 1))
    assert _numbers(plan) == {f"llm-{A}": 1, f"llm-{B}": 2}


def test_the_current_revision_keeps_its_number_and_roles() -> None:
    current = _record(V2, 2)
    plan = _plan(B, _record(V1, 1), current)
    (kept,) = [c for c in plan.children if c["metadata"]["name"] == f"llm-{B}"]
    (observed,) = _parse(current)
    assert kept == observed.applied


def test_a_revert_gives_the_old_record_the_next_number_and_keeps_its_first_and_roles() -> None:
    old = _record(V1, 1)
    plan = _plan(A, old, _record(V2, 2))
    assert _numbers(plan) == {f"llm-{A}": 3, f"llm-{B}": 2}
    (reverted,) = [c for c in plan.children if c["metadata"]["name"] == f"llm-{A}"]
    assert reverted["packedRoles"] == old["packedRoles"] and reverted["firstRevision"] == 1


def test_the_change_cause_is_copied_when_a_revision_gets_its_number() -> None:
    cause = {api.CHANGE_CAUSE_ANNOTATION: "vllm 0.11 with speculative decoding"}
    (new,) = _plan(A, annotations=cause).children
    assert new["metadata"]["annotations"] == cause
    plan = _plan(A, _record(V1, 1), _record(V2, 2), annotations=cause)
    (reverted,) = [c for c in plan.children if c["metadata"]["name"] == f"llm-{A}"]
    assert reverted["metadata"]["annotations"] == cause
    # A record that keeps its number keeps its annotations: the cause is of its own time.
    later = {api.CHANGE_CAUSE_ANNOTATION: "scaled decode"}
    (kept,) = _plan(A, _record(V1, 1), annotations=later).children
    assert "annotations" not in kept["metadata"]


def test_the_target_records_its_number_when_every_slice_runs_it() -> None:
    (fresh,) = _plan(A, complete=True).children
    assert fresh["completedAs"] == 1
    (marked,) = _plan(A, _record(V1, 1), complete=True).children
    assert marked["completedAs"] == 1
    (kept,) = _plan(A, _record(V1, 3, first=1, completed=1), complete=False).children
    assert (kept["revision"], kept["completedAs"]) == (3, 1)
    back = _plan(A, _record(V1, 1, completed=1), _record(V2, 2, completed=2), complete=True)
    (renumbered,) = [c for c in back.children if c["metadata"]["name"] == f"llm-{A}"]
    assert (renumbered["revision"], renumbered["completedAs"]) == (3, 3)


def test_old_revisions_past_the_limit_go_oldest_first() -> None:
    images = [f"example/server:v{n}" for n in range(1, 6)]
    objects = [_record(image, n) for n, image in enumerate(images, start=1)]
    target = _hash(images[-1])
    plan = _plan(target, *objects, limit=2)
    assert plan.pruned == (f"llm-{_hash(images[0])}", f"llm-{_hash(images[1])}")
    assert len(plan.children) == 3


def test_a_revision_that_still_has_lws_is_never_pruned_but_counts() -> None:
    images = [f"example/server:v{n}" for n in range(1, 5)]
    objects = [_record(image, n) for n, image in enumerate(images, start=1)]
    hashes = [_hash(image) for image in images]
    plan = _plan(hashes[3], *objects, in_use=frozenset({hashes[0]}), limit=1)
    # Old: 1 (in use), 2, 3; two too many: 1 is skipped, so 2 and 3 go.
    assert plan.pruned == tuple(sorted(f"llm-{h}" for h in hashes[1:3]))
    assert f"llm-{hashes[0]}" in _numbers(plan)


def test_a_limit_of_zero_keeps_only_the_current_revision_and_those_in_use() -> None:
    plan = _plan(B, _record(V1, 1), _record(V2, 2), limit=0)
    assert plan.pruned == (f"llm-{A}",)


def test_the_stable_revisions_record_outlives_the_limit_until_the_target_runs_everywhere() -> None:
    """Regression: A ran everywhere, then B; the set rolled back to A under a partition, the limit
    went to "0" and the slices past the partition went, so B's record was pruned; slices added
    again past the partition got A, which the partition holds back, where they should get B."""
    rolled_back = (_record(V1, 3, first=1, completed=1), _record(V2, 2, completed=2))
    rolling = _plan(A, *rolled_back, in_use=frozenset({A}), limit=0)
    assert _numbers(rolling) == {f"llm-{A}": 3, f"llm-{B}": 2} and rolling.pruned == ()
    stable = _read(*rolled_back).stable(A, spec_roles=_spec(V1).roles, running={A})
    assert stable is not None and stable.revision == B
    done = _plan(A, *rolled_back, in_use=frozenset({A}), limit=0, complete=True)
    assert done.pruned == (f"llm-{B}",)


# --- the predicate: which records count (item 3) -------------------------------------------------


@pytest.mark.parametrize(
    ("change", "why"),
    [
        pytest.param(lambda r: r["metadata"].update(name="llm-renamed"), "its name", id="renamed"),
        pytest.param(
            lambda r: r["metadata"]["labels"].update({api.LABEL_REVISION: B}),
            "its name",
            id="label-of-another-revision",
        ),
        pytest.param(
            lambda r: r["metadata"]["labels"].update({api.LABEL_NAME: "other"}),
            "label",
            id="another-sets-name-label",
        ),
        pytest.param(
            lambda r: r["roles"][0]["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"][
                "containers"
            ][0].update(image="evil/miner:latest"),
            "hash to revision",
            id="roles-of-another-template",
        ),
        pytest.param(lambda r: r.update(firstRevision=2), "created with number 2", id="first-late"),
        pytest.param(lambda r: r.update(completedAs=2), "completedAs 2", id="completed-late"),
        pytest.param(lambda r: r.update(revision=0), "revision", id="number-zero"),
        pytest.param(lambda r: r.update(revision=2**63 - 1), "revision", id="number-past-int64"),
        pytest.param(lambda r: r.update(revision="1"), "revision", id="number-a-string"),
        pytest.param(lambda r: r.pop("firstRevision"), "firstRevision", id="no-first"),
        pytest.param(lambda r: r.update(roles=[]), "roles", id="no-roles"),
        pytest.param(
            lambda r: r["roles"][1].update(name="prefill"), "must be unique", id="a-role-twice"
        ),
        pytest.param(lambda r: r["roles"][0].pop("spec"), "roles[0].spec", id="role-without-spec"),
    ],
)
@pytest.mark.parametrize("listed", [False, True], ids=["packed", "listed"])
def test_issue25_item3_a_record_counts_only_when_name_labels_and_roles_agree(
    change: Any, why: str, listed: bool
) -> None:
    """In either form of its roles: packed as this version writes them, or listed as earlier
    versions did."""
    forged = copy.deepcopy(_record(V1, 1, legacy=True))
    change(forged)
    if not listed and isinstance(forged.get("roles"), list):
        forged = builders.packed(forged)
    forged["metadata"]["annotations"].pop(api.LAST_APPLIED_ANNOTATION)
    found = _read(forged)
    assert found.counted == ()
    ((item, reason),) = found.uncounted
    assert why in reason, reason
    assert item.name == forged["metadata"]["name"]


def test_issue25_item3_a_record_another_set_controls_never_counts() -> None:
    other = builders.observe(
        builders.make_record(revision=A, number=1, roles=_spec().roles),
        owner_uid="uid-of-another-set",
    )
    found = _read(other)
    assert found.counted == () and "not controlled" in found.uncounted[0][1]


def test_issue25_item3_a_record_that_fails_is_kept_as_it_is_never_counted_and_reported() -> None:
    """Its time in 2099, its number above the others: it changes no number and no decision."""
    forged = _record(V1, 9, name="llm-zzzzzzzz", label=A, created="2099-01-01T00:00:00Z")
    plan = _plan(B, _record(V1, 1), _record(V2, 2), forged)
    (observed_forged,) = [item for item in _parse(forged) if item.name == "llm-zzzzzzzz"]
    assert observed_forged.applied in plan.children  # exactly as it is
    assert _numbers(plan)[f"llm-{B}"] == 2  # not renumbered past the forged 9
    (problem,) = plan.problems
    assert problem.reason is api.Reason.INVALID_HISTORY
    assert "'llm-zzzzzzzz'" in problem.message
    assert not _read(_record(V1, 1), _record(V2, 2), forged).is_rollback(B)


def test_issue25_item3_a_record_whose_labels_do_not_match_its_name_keeps_its_slot() -> None:
    """The record the target needs is named `<set>-<target>`; when one that does not count
    holds that name, it is kept as it is and no record of the target is created."""
    forged = _record(V1, 1, name=f"llm-{B}")
    plan = _plan(B, forged)
    assert [child["metadata"]["name"] for child in plan.children] == [f"llm-{B}"]
    assert plan.children[0]["packedRoles"] == forged["packedRoles"]
    assert [problem.reason for problem in plan.problems] == [api.Reason.INVALID_HISTORY]


# --- the compact form (issue 33 item 2) ----------------------------------------------------------


def test_issue33_item2_records_of_the_previous_build_count_and_are_renumbered_as_they_are() -> None:
    """A cluster mid-upgrade holds records with their roles listed: they are read alike, and
    re-emitted in their own form (the CRD keeps the form a record was written in)."""
    old = _record(V1, 1, legacy=True)
    plan = _plan(A, old, _record(V2, 2))
    (reverted,) = [c for c in plan.children if c["metadata"]["name"] == f"llm-{A}"]
    assert reverted["revision"] == 3 and "packedRoles" not in reverted
    assert reverted["roles"] == old["roles"]
    assert _read(old, _record(V2, 2)).is_rollback(A)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        pytest.param(
            lambda r: r.update(roles=builders.record_roles(r)),
            "holds its roles once",
            id="both-forms",
        ),
        pytest.param(lambda r: r.pop("packedRoles"), "holds its roles once", id="no-form"),
        pytest.param(lambda r: r.update(packedRoles="x!"), "not base64", id="not-base64"),
        pytest.param(
            lambda r: r.update(packedRoles=compact.pack_roles([{"name": "a"}])),
            "packedRoles: roles",
            id="packs-one-role",
        ),
        pytest.param(
            lambda r: r.update(packedRoles=base64.b64encode(zlib.compress(b"{")).decode()),
            "packedRoles:",
            id="packs-no-json",
        ),
        pytest.param(
            lambda r: r.update(packedRoles="A" * (api.PACKED_ROLES_MAX_LENGTH + 4)),
            "packedRoles",
            id="longer-than-the-crd-allows",
        ),
    ],
)
def test_issue33_item2_a_record_whose_packed_roles_do_not_unpack_never_counts(
    change: Any, why: str
) -> None:
    forged = copy.deepcopy(_record(V1, 1))
    change(forged)
    found = _read(forged)
    assert found.counted == ()
    ((_, reason),) = found.uncounted
    assert why in reason, reason


def test_issue33_item2_the_change_cause_is_cut_to_its_bound_when_copied() -> None:
    long = "kubectl apply -f llm.yaml --record " * 4000  # 140,000 bytes
    (new,) = _plan(A, annotations={api.CHANGE_CAUSE_ANNOTATION: long}).children
    assert new["metadata"]["annotations"][api.CHANGE_CAUSE_ANNOTATION] == (
        compact.cut_change_cause(long)
    )
    assert new["metadata"]["annotations"][api.CHANGE_CAUSE_ANNOTATION].endswith(
        " [cut: 140000 bytes in all]"
    )
    plan = _plan(A, _record(V1, 1), _record(V2, 2), annotations={api.CHANGE_CAUSE_ANNOTATION: long})
    (reverted,) = [c for c in plan.children if c["metadata"]["name"] == f"llm-{A}"]
    assert reverted["metadata"]["annotations"] == new["metadata"]["annotations"]


def test_issue33_item2_roles_too_large_for_a_record_give_none_and_a_note() -> None:
    """Random bytes do not compress: a set carrying 200 KiB of them in a template packs past
    what a record holds. It gets no record (the others stay), and status.history says so."""
    noise = base64.b64encode(random.Random(2).randbytes(200 * 1024)).decode()
    spec = _spec()
    template = spec.roles[0].leader_worker_template
    template["workerTemplate"]["spec"]["containers"][0]["env"] = [{"name": "B", "value": noise}]
    target = revision.of_spec(spec)
    plan = history.plan(
        _read(_record(V1, 1)),
        set_name=SET,
        spec=spec,
        target=target,
        in_use=frozenset(),
        annotations={},
        limit=10,
        complete=False,
    )
    assert _numbers(plan) == {f"llm-{A}": 1}
    assert plan.problems == ()
    assert plan.note is not None
    assert plan.note.startswith(f"revision {target} has no record: its roles pack to ")
    assert f"more than the {api.PACKED_ROLES_MAX_LENGTH}" in plan.note


# --- a history that starts from what runs (issue 33 item 5) --------------------------------------


def _observed(plan: history.HistoryPlan) -> list[JsonObject]:
    return [builders.observe(copy.deepcopy(child)) for child in plan.children]


def test_issue33_item5_a_revision_running_without_a_record_gets_one_below_the_target() -> None:
    """The hooks were upgraded during a rollout from A to B: B got record 1 from the build
    with a history, A none. A's record is made from its LWS under B's first number, B moves up:
    going back to A is a rollback, B stays a new revision, and undo finds A."""
    plan = _plan(B, _record(V2, 1), running=(*_lws(V1), *_lws(V2)))
    assert _numbers(plan) == {f"llm-{A}": 1, f"llm-{B}": 2}
    (rebuilt,) = [c for c in plan.children if c["metadata"]["name"] == f"llm-{A}"]
    assert rebuilt["firstRevision"] == 1 and "annotations" not in rebuilt["metadata"]
    assert plan.problems == () and plan.notes == ()
    after = _read(*_observed(plan))
    assert after.of(A) is not None and after.uncounted == ()
    assert after.is_rollback(A) and not after.is_rollback(B)
    assert after.stable(B, spec_roles=(), running=frozenset({A, B})) is None  # never completed


def test_issue33_item5_with_no_record_at_all_the_running_revision_comes_first() -> None:
    """From B to the spec's A, with no record yet: B's is made first, then A's."""
    plan = _plan(A, running=(*_lws(V2), *_lws(V1)))
    assert _numbers(plan) == {f"llm-{B}": 1, f"llm-{A}": 2}
    after = _read(*_observed(plan))
    assert after.uncounted == () and after.is_rollback(B) and not after.is_rollback(A)


def test_issue33_item5_the_newest_running_revision_takes_the_one_number_left() -> None:
    """A to B to C, C recorded as 1: one number lies below C's first; B ran later than A, so
    undo goes to B. A gets no record, and the status says so."""
    plan = _plan(
        C,
        _record(V3, 1),
        running=(
            *_lws(V1, created="2026-11-29T08:00:00Z"),
            *_lws(V2, created="2026-11-29T09:00:00Z"),
            *_lws(V3),
        ),
    )
    assert _numbers(plan) == {f"llm-{B}": 1, f"llm-{C}": 2}
    assert plan.note is not None and plan.note.startswith(f"revision {A} runs without a record")


def test_issue33_item5_under_a_rollback_every_running_revision_gets_its_record() -> None:
    """The target A was recorded first, then C (3): A is a rollback whatever the numbers
    below, so B (running, unrecorded) gets the next number and A the one after."""
    plan = _plan(A, _record(V1, 2, first=1), _record(V3, 3), running=(*_lws(V1), *_lws(V2)))
    assert _numbers(plan) == {f"llm-{A}": 5, f"llm-{B}": 4, f"llm-{C}": 3}
    after = _read(*_observed(plan))
    assert after.is_rollback(A) and after.is_rollback(B)


def test_issue33_item5_a_target_moved_up_keeps_its_completion() -> None:
    plan = _plan(B, _record(V2, 1, completed=1), running=(*_lws(V1), *_lws(V2)))
    (target,) = [c for c in plan.children if c["metadata"]["name"] == f"llm-{B}"]
    assert (target["revision"], target["completedAs"], target["firstRevision"]) == (2, 2, 1)


def test_issue33_item5_forged_lws_give_no_record_and_the_status_says_why() -> None:
    forged = _lws(V1)
    forged[0]["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0][
        "image"
    ] = "evil/miner:latest"
    plan = _plan(B, _record(V2, 1), running=(*forged, *_lws(V2)))
    assert _numbers(plan) == {f"llm-{B}": 1}
    assert plan.note is not None and "none can be made from its LeaderWorkerSets" in plan.note


def test_issue33_item5_a_name_held_by_a_record_that_does_not_count_is_left_alone() -> None:
    held = _record(V1, 1, label="0badc0de")  # named llm-A, stores A's roles, labelled otherwise
    plan = _plan(B, held, _record(V2, 2), running=(*_lws(V1), *_lws(V2)))
    assert _numbers(plan)[f"llm-{B}"] == 2
    assert [c["metadata"]["name"] for c in plan.children].count(f"llm-{A}") == 1
    assert plan.notes == ()


def test_issue33_item5_a_running_revisions_record_is_never_pruned() -> None:
    """Pruning skips every revision that still has LWS: a limit cannot take a running one's."""
    plan = _plan(C, _record(V1, 1), _record(V2, 2), _record(V3, 3), in_use=frozenset({A}), limit=0)
    assert plan.pruned == (f"llm-{B}",)


# --- two records with one number (item 4) --------------------------------------------------------


def test_issue25_item4_two_records_with_one_number_hold_the_history_and_name_both() -> None:
    tied = (_record(V1, 2), _record(V2, 2), _record(V3, 1))
    found = _read(*tied)
    assert not found.is_ordered
    assert not found.is_rollback(A) and not found.is_rollback(B)
    assert found.stable(C, spec_roles=(), running=frozenset()) is None
    plan = _plan(C, *tied, limit=0, complete=True)
    observed = [item.applied for item in _parse(*tied)]
    assert sorted(plan.children, key=str) == sorted(observed, key=str)  # nothing moves
    assert plan.pruned == ()
    (problem,) = plan.problems
    assert problem.reason is api.Reason.INVALID_HISTORY
    assert f"'llm-{A}'" in problem.message and f"'llm-{B}'" in problem.message


# --- numbers past what a history holds (item 5) ------------------------------------------------


def test_issue25_item5_a_record_at_the_highest_number_stops_numbering_and_is_named() -> None:
    top = _record(V1, api.MAX_HISTORY_NUMBER)
    plan = _plan(B, top)
    assert _numbers(plan) == {f"llm-{A}": api.MAX_HISTORY_NUMBER}
    (problem,) = plan.problems
    assert problem.reason is api.Reason.INVALID_HISTORY and f"'llm-{A}'" in problem.message
    assert all(child["revision"] <= api.MAX_HISTORY_NUMBER for child in plan.children)


def test_issue25_item5_a_number_past_what_a_history_holds_is_an_untrusted_record() -> None:
    huge = _record(V1, 2**63 - 1)
    plan = _plan(B, huge)
    assert _numbers(plan) == {f"llm-{A}": 2**63 - 1, f"llm-{B}": 1}
    assert [problem.reason for problem in plan.problems] == [api.Reason.INVALID_HISTORY]


# --- rollbacks (item 10) ---------------------------------------------------------------------


def test_a_target_first_recorded_before_another_revisions_number_is_a_rollback() -> None:
    found = _read(_record(V1, 3, first=1), _record(V2, 2))
    assert found.is_rollback(A)  # renumbered 3 by the move back: first recorded as 1
    assert found.is_rollback(B)  # B ran (2) before the set moved back to A (3)
    assert not found.is_rollback(C)  # never recorded: something new
    assert not _read(_record(V1, 1), _record(V2, 2)).is_rollback(B)


def test_issue25_item10_a_record_created_again_after_pruning_is_a_rollback_by_its_numbers() -> None:
    """Limit 1: A ran (1), then B (2), then C (3), A was pruned; A was run again (its record
    created anew as 4), then C again (renumbered 5). Moving back to A is a rollback although
    A's record object is newer than C's."""
    found = _read(
        _record(V3, 5, first=3, created="2026-11-29T10:00:00Z"),
        _record(V1, 4, created="2026-11-29T11:00:00Z"),
    )
    assert found.is_rollback(A)


def test_issue25_item10_creation_times_decide_nothing() -> None:
    for created in ("1999-01-01T00:00:00Z", "2099-01-01T00:00:00Z", "not a time"):
        found = _read(_record(V1, 1, created=created), _record(V2, 2))
        assert not found.is_rollback(B) and found.is_rollback(A)


# --- the stable revision (item 1) ----------------------------------------------------------


def test_the_stable_revision_is_the_one_every_slice_ran_last_before_this_rollout() -> None:
    running = frozenset({A, B, C})
    found = _read(_record(V1, 1, completed=1), _record(V2, 2), _record(V3, 3))
    stable = found.stable(C, spec_roles=_spec(V3).roles, running=running)
    assert stable is not None and stable.revision == A
    assert stable.roles == tuple(_spec(V1).roles)
    # B ran everywhere during its own rollout (its slices past the partition were removed):
    # not before that rollout began, so A stays the stable one.
    during = _read(_record(V1, 1, completed=1), _record(V2, 2, completed=2))
    stable = during.stable(B, spec_roles=_spec(V2).roles, running=running)
    assert stable is not None and stable.revision == A
    # Back to A from B, which every slice ran since: B is the stable one.
    back = _read(_record(V1, 3, first=1, completed=1), _record(V2, 2, completed=2))
    stable = back.stable(A, spec_roles=_spec(V1).roles, running=running)
    assert stable is not None and stable.revision == B
    # Back to A, which every slice ran last: A (the spec's roles).
    again = _read(_record(V1, 3, first=1, completed=1), _record(V2, 2))
    stable = again.stable(A, spec_roles=_spec(V1).roles, running=running)
    assert stable is not None and (stable.revision, stable.roles) == (A, tuple(_spec(V1).roles))
    # Two records claiming one completion: the history cannot tell.
    tied = _read(_record(V1, 2, first=1, completed=2), _record(V2, 3, first=2, completed=2))
    assert tied.stable(C, spec_roles=(), running=running) is None


def test_the_stable_revision_is_the_target_only_while_nothing_else_was_recorded_or_runs() -> None:
    roles = _spec(V2).roles
    stable = _read().stable(B, spec_roles=roles, running=frozenset())
    assert stable is not None and (stable.revision, stable.roles) == (B, tuple(roles))
    assert _read(_record(V2, 1)).stable(B, spec_roles=roles, running=frozenset({B})) is not None
    assert _read(_record(V2, 1)).stable(B, spec_roles=roles, running=frozenset({A})) is None
    assert (
        _read(_record(V1, 1), _record(V2, 2)).stable(B, spec_roles=roles, running=frozenset())
        is None
    )


def test_a_history_pruned_down_to_the_target_has_no_stable_revision() -> None:
    """Regression (found by test_sim_properties' canary histories): under revision-history-limit
    "0", A's record went once every slice ran B; a slice added past a partition got B, which
    the partition holds back, as if the set had never run anything else."""
    roles = _spec(V2).roles
    pruned = _read(_record(V2, 2, completed=2))
    assert pruned.stable(B, spec_roles=roles, running=frozenset({B})) is None
    assert _read(_record(V2, 1, completed=1)).stable(B, spec_roles=roles, running=frozenset({B}))


# --- the child type -------------------------------------------------------------------------------


def test_records_are_a_child_type_when_declared_or_when_no_controller_says() -> None:
    every = records.DS_CHILD_KINDS
    assert history.is_child_type(None)
    assert history.is_child_type(every)
    assert not history.is_child_type(every - {records.ChildKind.REVISION})
    assert not history.is_child_type(frozenset())


def test_a_set_without_history_plans_no_record_and_says_why() -> None:
    assert history.NO_HISTORY.children == () and history.NO_HISTORY.pruned == ()
    assert history.NO_HISTORY.note == history.NOT_KEPT
    assert _plan(A).note is None
