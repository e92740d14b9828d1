"""Canary and history that no input can widen, release or break (issue 25, item 9).

Over the random requests of `tests.property.test_sync_props` (random rollout annotations, valid
and hostile records, `status.creating`, and a slice often left without LWS), and over slices held
mid-rollout: a slice at or past the partition never gets an LWS of a revision other than one it
runs or the stable one; no new LWS carries templates other than its revision's; a held slice never
moves; every slice whose LWS all run one ready revision has its Services; records that do not
count change no decision. The oracles restate docs/rollout.md and docs/safety.md
(`tests.sim.views.record_of` says which records count).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from hooks import api
from tests.builders import make_ds, make_lws, make_request, make_role
from tests.property.test_sync_props import (
    EVIL,
    IMAGES,
    PROPS,
    SPEC_ROLES,
    condition,
    hash_of,
    other_revisions,
    record_child,
    requests,
    roles_with_image,
    run_sync,
    target_of,
)
from tests.sim import views
from tests.sim.deletions import child_id

JsonObject = dict[str, Any]


def partition_of(parent: JsonObject) -> int | None:
    """The partition as docs/rollout.md reads it: a malformed value is 0 (nothing rolls)."""
    text = (parent["metadata"].get("annotations") or {}).get(api.ANNOTATION_ROLLOUT_PARTITION)
    if text is None:
        return None
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 9 else 0


def counted_records(parent: JsonObject, children: list[JsonObject]) -> dict[str, JsonObject]:
    """The records that count (`views.record_of`), by revision."""
    return {
        revision_: child
        for child in children
        if (revision_ := views.record_of(child, parent=parent)) is not None
    }


def stable_of(parent: JsonObject, children: list[JsonObject], target: str) -> str | None:
    """The stable revision as docs/rollout.md defines it, from the records that count."""
    records = counted_records(parent, children)
    numbers = [record["revision"] for record in records.values()]
    if len(set(numbers)) != len(numbers):
        return None
    ran = [
        (r["completedAs"], rev)
        for rev, r in records.items()
        if "completedAs" in r and not (rev == target and r["completedAs"] == r["revision"])
    ]
    if ran:
        last = max(ran)
        return None if [entry[0] for entry in ran].count(last[0]) > 1 else last[1]
    running = {
        views.labels_of(child).get(api.LABEL_REVISION, "")
        for child in children
        if child["kind"] == api.LWS_KIND
    }
    return target if set(records) | running <= {target} else None


def images_of(roles: list[JsonObject]) -> set[str]:
    return {
        container["image"]
        for role in roles
        for container in role["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"][
            "containers"
        ]
    }


def new_lws(response: JsonObject, children: list[JsonObject]) -> list[JsonObject]:
    observed = {child_id(child) for child in children}
    return [
        child
        for child in response["children"]
        if child["kind"] == api.LWS_KIND and child_id(child) not in observed
    ]


@PROPS
@given(requests())
def test_issue25_item9_slices_past_the_partition_never_get_a_held_back_revision(
    drawn: tuple[JsonObject, list[JsonObject], JsonObject],
) -> None:
    """A new LWS in a slice at or past the partition is of the stable revision, or of the target
    in a slice that runs the target already; every new LWS carries its revision's templates
    (the spec's, or a record that counts)."""
    parent, children, request = drawn
    target = target_of(parent)
    if target is None:
        return
    response = run_sync(request)
    partition = partition_of(parent)
    stable = stable_of(parent, children, target)
    recorded = counted_records(parent, children)
    for created in new_lws(response, children):
        label = views.labels_of(created)[api.LABEL_REVISION]
        index = views.slice_of(created)
        assert index is not None
        if label == target:
            allowed_images = images_of(parent["spec"]["roles"])
        else:
            assert label in recorded, f"{created['metadata']['name']}: revision {label} unrecorded"
            allowed_images = images_of(recorded[label]["roles"])
        worker = created["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
        assert {container["image"] for container in worker["containers"]} <= allowed_images
        if partition is None or index < partition:
            continue
        runs_target = any(
            child["kind"] == api.LWS_KIND
            and views.slice_of(child) == index
            and views.labels_of(child).get(api.LABEL_REVISION) == target
            and views.labels_of(child).get(api.LABEL_ROLE)
            for child in children
        )
        assert label == stable or (label == target and runs_target), (
            f"slice {index} past partition {partition} got {created['metadata']['name']};"
            f" stable {stable}"
        )


@PROPS
@given(requests())
def test_issue25_item9_every_slice_standing_on_one_ready_revision_has_its_services(
    drawn: tuple[JsonObject, list[JsonObject], JsonObject],
) -> None:
    parent, children, request = drawn
    target = target_of(parent)
    if target is None:
        return
    response = run_sync(request)
    answered = {child["metadata"]["name"] for child in response["children"]}
    spec_roles = [role["name"] for role in parent["spec"]["roles"]]
    for index in range(parent["spec"].get("slices", 1)):
        by_revision: dict[str, dict[str, JsonObject]] = {}
        for child in sorted(children, key=lambda c: c["metadata"]["name"]):
            labels = views.labels_of(child)
            role, rev = labels.get(api.LABEL_ROLE, ""), labels.get(api.LABEL_REVISION, "")
            if (
                child["kind"] != api.LWS_KIND
                or views.slice_of(child) != index
                or not role
                or not rev
            ):
                continue
            chosen = by_revision.setdefault(rev, {})
            if role not in chosen or child["metadata"]["name"] == f"llm-{index}-{rev}-{role}":
                chosen[role] = child
        if len(by_revision) != 1:
            continue
        ((rev, chosen),) = by_revision.items()
        roles = spec_roles if rev == target else sorted(chosen)
        if rev != target and all(views.replicas_of(child) == 0 for child in chosen.values()):
            continue  # a drained revision goes in this pass
        ready = all(
            role in chosen and 1 <= views.ready_of(chosen[role]) <= api.LWS_MAX_REPLICAS
            for role in roles
        )
        if ready:
            for role in roles:
                assert f"{chosen[role]['metadata']['name']}-prv" in answered, (index, rev, role)


FORGERIES = ("mislabelled", "another-revisions-roles", "orphan", "huge", "first-late")


@PROPS
@given(requests(), st.lists(st.sampled_from(FORGERIES), min_size=1, max_size=3), st.data())
def test_issue25_item9_records_that_do_not_count_change_no_decision(
    drawn: tuple[JsonObject, list[JsonObject], JsonObject],
    forgeries: list[str],
    data: st.DataObject,
) -> None:
    """Records that do not count, at names no decision needs, are kept exactly as they are; the
    answer is otherwise the same, its status too but for Degraded."""
    parent, children, _ = drawn
    target = target_of(parent)
    if target is None:
        return
    others = other_revisions(parent)
    # A record that does not count at the name of the target's record, or of one the set would
    # make from a running revision's LWS, keeps that record from being made (docs/rollout.md).
    running = {
        f"llm-{child['metadata']['labels'].get(api.LABEL_REVISION)}"
        for child in children
        if child["kind"] == api.LWS_KIND
    }
    taken = {child["metadata"]["name"] for child in children} | {f"llm-{target}"} | running
    forged = []
    for index, kind in enumerate(forgeries):
        revision_ = data.draw(st.sampled_from(sorted(others)))
        name = f"llm-{revision_}" if f"llm-{revision_}" not in taken else f"llm-forged-{index}"
        taken.add(name)
        roles = others[revision_]
        number = data.draw(st.integers(1, 6))
        if kind == "mislabelled":
            name = f"llm-forged-{index}"
        if kind == "another-revisions-roles":
            roles = roles_with_image(parent, EVIL)
        if kind == "huge":
            number = 2**63 - 1
        record = record_child(
            revision_,
            roles,
            number=number,
            first=number + 1 if kind == "first-late" else number,
            completed=number,
            name=name,
        )
        if kind == "orphan":
            del record["metadata"]["ownerReferences"]
        forged.append(record)
    plain = run_sync(make_request(parent, children=children))
    hostile = run_sync(make_request(parent, children=[*children, *forged]))
    names = {record["metadata"]["name"] for record in forged}
    kept = {c["metadata"]["name"]: c for c in hostile["children"] if c["metadata"]["name"] in names}
    assert set(kept) == names
    for record in forged:
        assert kept[record["metadata"]["name"]]["roles"] == record["roles"]
        assert kept[record["metadata"]["name"]]["revision"] == record["revision"]
    assert [c for c in hostile["children"] if c["metadata"]["name"] not in names] == plain[
        "children"
    ]

    def without_degraded(answer: JsonObject) -> JsonObject:
        status = {k: v for k, v in answer["status"].items() if k != "degraded"}
        status["conditions"] = [c for c in status["conditions"] if c["type"] != "Degraded"]
        return {**answer, "status": status, "children": []}

    assert without_degraded(hostile) == without_degraded(plain)
    degraded = condition(hostile, "Degraded")
    assert degraded["status"] == "True"


@st.composite
def held_slices(draw: st.DrawFn) -> tuple[JsonObject, list[JsonObject], int]:
    """A 1-slice set mid-rollout from revision A to the spec's, every group ready, with a hold:
    (parent, children, the hold's percent)."""
    count = draw(st.integers(2, 3))
    targets = [draw(st.integers(1, 6)) for _ in range(count)]
    names = list(SPEC_ROLES[:count])
    config = draw(st.sampled_from([(1, 0), (2, 1), (0, 1), (0, 2)]))
    new_roles = [
        make_role(
            name, replicas=target, image=IMAGES[1], max_surge=config[0], max_unavailable=config[1]
        )
        for name, target in zip(names, targets, strict=True)
    ]
    percent = draw(st.sampled_from([0, 10, 25, 50, 75, 99]))
    parent = make_ds(roles=new_roles, generation=2)
    parent["metadata"]["annotations"] = {api.ANNOTATION_ROLLOUT_HOLD_AT: f"{percent}%"}
    target = target_of(parent)
    assert target is not None
    old_roles = roles_with_image(parent, IMAGES[0])
    old = hash_of(old_roles)
    children = [
        record_child(old, old_roles, number=1, first=1, completed=1),
        record_child(target, parent["spec"]["roles"], number=2, first=2),
    ]
    for name, wanted in zip(names, targets, strict=True):
        initial = draw(st.integers(1, 6))
        replicas = draw(st.integers(1, initial))
        children.append(make_lws(name, revision=old, replicas=replicas, initial=initial))
        children.append(make_lws(name, revision=target, replicas=draw(st.integers(0, wanted))))
    return parent, children, percent


@PROPS
@given(held_slices())
def test_issue25_item9_a_held_slice_never_moves(
    drawn: tuple[JsonObject, list[JsonObject], int],
) -> None:
    """Once every spec role of the new revision has the hold's share of its target (every group
    ready), the slice holds: no LWS is created, scaled or deleted, as long as each role runs
    what upstream's step can leave it (old and new together within `min(initial, target) -
    maxUnavailable` and `max(initial, target) + maxSurge`); outside that, its groups follow the
    target (docs/rollout.md, "Scaling while a rollout runs")."""
    parent, children, percent = drawn
    target = target_of(parent)
    targets = {role["name"]: role["spec"]["replicas"] for role in parent["spec"]["roles"]}
    new: dict[str, int] = {}
    old: dict[str, int] = {}
    initial: dict[str, int] = {}
    for child in children:
        if child["kind"] != api.LWS_KIND:
            continue
        role = views.labels_of(child)[api.LABEL_ROLE]
        if views.labels_of(child)[api.LABEL_REVISION] == target:
            new[role] = views.replicas_of(child)
        else:
            old[role] = views.replicas_of(child)
            initial[role] = views.initial_of(child)
    if not all(new[role] * 100 >= percent * wanted for role, wanted in targets.items()):
        return
    for spec_role in parent["spec"]["roles"]:
        role, wanted = spec_role["name"], targets[spec_role["name"]]
        surge, unavailable = views.resolved_config(spec_role, wanted)
        total = old[role] + new[role]
        fewest = min(initial[role], wanted) - unavailable
        if not fewest <= total <= max(initial[role], wanted) + max(surge, 1):
            return
    response = run_sync(make_request(parent, children=children))
    before = {
        child["metadata"]["name"]: views.replicas_of(child)
        for child in children
        if child["kind"] == api.LWS_KIND
    }
    after = {
        child["metadata"]["name"]: child["spec"]["replicas"]
        for child in response["children"]
        if child["kind"] == api.LWS_KIND
    }
    assert after == before
    assert condition(response, "Progressing")["reason"] == "RolloutHeld"
