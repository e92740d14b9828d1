"""A history that starts from what runs, against forged LWS (issue 33 item 5).

A set mid-rollout from one revision to its spec's, the old revision's LWS running without a
record, some of them edited or planted by someone who can write LWS: the image changed, a
template label added, the revision label moved, a role's LWS gone, an affinity term added, a
label added to the LWS itself. Whatever is drawn, every record the sync asks for counts by the
simulation's independent predicate (`tests.sim.views.record_of`: its roles hash to the revision
its name and labels claim) and its roles are those of LWS the set runs of that revision
(re-rendered, they give their templates back); and the old revision gets a record exactly when,
for each of its roles, the LWS of the lowest slice still labelled with it has templates nobody
changed.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from hooks import api
from hooks.core import children
from hooks.gocompat import revision
from tests import builders
from tests.property.test_sync_props import PROPS, run_sync
from tests.sim import views

JsonObject = dict[str, Any]
OLD, NEW = "example/server:v1", "example/server:v2"


def _set(image: str, *, placement: str, slices: int) -> JsonObject:
    roles = [
        builders.make_role("prefill", replicas=2, image=image, labels={"team": "a"}, leader=True),
        builders.make_role("decode", replicas=1, image=image),
    ]
    ds = builders.make_ds(roles=roles, slices=slices)
    ds["spec"]["placementPolicy"] = (
        {"type": placement} if placement == "None" else {"type": placement, "topology": "rack"}
    )
    return ds


def _rendered(ds: JsonObject) -> list[JsonObject]:
    """Every LWS the set renders for its spec, slice by slice (copies: they share its parts)."""
    spec = api.DisaggregatedSetSpec.model_validate(ds["spec"])
    return [
        copy.deepcopy(
            children.render_lws(
                set_name="llm",
                role=role,
                slice_index=index,
                revision=revision.of_spec(spec),
                replicas=1,
                policy=spec.placement_policy,
            )
        )
        for index in range(spec.slices)
        for role in spec.roles
    ]


def _pod_template(lws: JsonObject) -> JsonObject:
    template: JsonObject = lws["spec"]["leaderWorkerTemplate"]
    found: JsonObject = template.get("leaderTemplate") or template["workerTemplate"]
    return found


def _affinity_term(lws: JsonObject) -> None:
    affinity = _pod_template(lws)["spec"].setdefault("affinity", {})
    terms = affinity.setdefault("podAffinity", {}).setdefault(
        "requiredDuringSchedulingIgnoredDuringExecution", []
    )
    terms.append({"topologyKey": "rack", "labelSelector": {}})


# Each forgery, and whether it changes what the LWS's templates say the role was.
FORGERIES: dict[str, tuple[Callable[[JsonObject], object], bool]] = {
    "image": (
        lambda lws: _pod_template(lws)["spec"]["containers"][0].update(image="evil/miner:latest"),
        True,
    ),
    "template-label": (lambda lws: _pod_template(lws)["metadata"]["labels"].update(x="y"), True),
    "affinity-term": (_affinity_term, True),
    "lws-label": (lambda lws: lws["metadata"]["labels"].update(planted="yes"), False),
    "revision-label": (
        lambda lws: lws["metadata"]["labels"].update({api.LABEL_REVISION: "0badc0de"}),
        False,  # it leaves the old revision's LWS: `_expected` sees it gone
    ),
}


@st.composite
def forged_rollouts(draw: st.DrawFn) -> tuple[JsonObject, bool]:
    """The request of a set rolling from OLD to NEW, OLD unrecorded and some of its LWS forged
    or deleted, and whether OLD's record can be made (see the module)."""
    placement = draw(st.sampled_from(["None", "ExclusiveSlice", "ExclusiveTopology"]))
    slices = draw(st.integers(1, 2))
    old_lws = _rendered(_set(OLD, placement=placement, slices=slices))
    new_set = _set(NEW, placement=placement, slices=slices)
    changed: set[int] = set()
    for index in draw(st.sets(st.integers(0, len(old_lws) - 1), max_size=3)):
        forge, changes_roles = FORGERIES[draw(st.sampled_from(sorted(FORGERIES)))]
        forge(old_lws[index])
        if changes_roles:
            changed.add(index)
    gone = draw(st.sets(st.integers(0, len(old_lws) - 1), max_size=1))
    kept = {index: lws for index, lws in enumerate(old_lws) if index not in gone}
    observed = [builders.observe(lws) for lws in (*kept.values(), *_rendered(new_set))]
    return builders.make_request(new_set, children=observed), _expected(kept, changed)


def _expected(kept: dict[int, JsonObject], changed: set[int]) -> bool:
    """Whether OLD's record can be made: each role's lowest-slice LWS still labelled OLD
    exists, and none of those had its templates changed."""
    label = revision.compute_revision(
        [
            (role["name"], role["spec"]["leaderWorkerTemplate"])
            for role in _set(OLD, placement="None", slices=1)["spec"]["roles"]
        ]
    )
    chosen: dict[str, tuple[str, int]] = {}
    for index, lws in kept.items():
        labels = lws["metadata"]["labels"]
        if labels[api.LABEL_REVISION] == label:
            key = (labels[api.LABEL_SLICE], index)
            chosen[labels[api.LABEL_ROLE]] = min(chosen.get(labels[api.LABEL_ROLE], key), key)
    return set(chosen) == {"prefill", "decode"} and not {i for _, i in chosen.values()} & changed


@PROPS
@given(forged_rollouts())
def test_issue33_item5_a_forged_lws_never_yields_a_record_that_does_not_count(
    drawn: tuple[JsonObject, bool],
) -> None:
    request, expected = drawn
    parent = request["parent"]
    response = run_sync(request)
    target = response["status"]["revision"]
    records = [c for c in response["children"] if c["kind"] == api.REVISION_KIND]
    running = [
        obj
        for group in request["children"].values()
        for obj in group.values()
        if obj["kind"] == api.LWS_KIND
    ]
    for record in records:
        label = record["metadata"]["labels"][api.LABEL_REVISION]
        assert views.record_of(builders.observe(copy.deepcopy(record)), parent=parent) == label
        if label != target:
            _assert_made_from_running_lws(record, label, parent, running)
    rebuilt = [r for r in records if r["metadata"]["labels"][api.LABEL_REVISION] != target]
    assert len(rebuilt) == int(expected), [r["metadata"]["name"] for r in rebuilt]


def _assert_made_from_running_lws(
    record: JsonObject, label: str, parent: JsonObject, running: list[JsonObject]
) -> None:
    """Each recorded role, rendered again, gives the templates of an LWS of that revision."""
    spec = api.DisaggregatedSetSpec.model_validate(
        {**parent["spec"], "roles": builders.record_roles(record)}
    )
    for role in spec.roles:
        templates = [
            lws["spec"]["leaderWorkerTemplate"]
            for lws in running
            if lws["metadata"]["labels"].get(api.LABEL_REVISION) == label
            and lws["metadata"]["labels"].get(api.LABEL_ROLE) == role.name
        ]
        again = [
            children.render_lws(
                set_name="llm",
                role=role,
                slice_index=index,
                revision=label,
                replicas=1,
                policy=spec.placement_policy,
            )["spec"]["leaderWorkerTemplate"]
            for index in range(spec.slices)
        ]
        assert any(template in again for template in templates), role.name
