"""A running revision's roles rebuilt from its LWS (`hooks.core.recovered`, issue 33 item 5):
exactly what the set added undone, and nothing returned unless the templates hash to the
revision."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from hooks import api
from hooks.core import children, records, recovered
from hooks.gocompat import revision
from tests import builders

JsonObject = dict[str, Any]
SET = "llm"


def _spec(
    *, placement: str = "None", image: str = "vllm/vllm-openai:v0.11.0"
) -> api.DisaggregatedSetSpec:
    prefill = builders.make_role(
        "prefill",
        replicas=3,
        image=image,
        leader=True,
        labels={"team": "serving"},
        annotations={"note": "<kept>"},
        template_annotations={"prometheus.io/scrape": "true"},
    )
    decode = builders.make_role("decode", replicas=2, image=image, external=True)
    decode["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}
        }
    }
    policy = {"type": placement} if placement == "None" else {"type": placement, "topology": "rack"}
    ds = builders.make_ds(roles=[prefill, decode], slices=2)
    ds["spec"]["placementPolicy"] = policy
    return api.DisaggregatedSetSpec.model_validate(ds["spec"])


def _running(
    spec: api.DisaggregatedSetSpec,
    *,
    label: str | None = None,
    edit: Callable[[JsonObject], None] | None = None,
) -> list[records.ObservedObject]:
    """Every LWS the set renders for `spec` in both slices, as Metacontroller observes them
    mid-rollout (an initial-replicas annotation on each), labelled `label` (default: the
    spec's revision), each changed by `edit`."""
    target = revision.of_spec(spec)
    found = []
    for index in range(spec.slices):
        for role in spec.roles:
            rendered = copy.deepcopy(  # it shares the spec's parts
                children.render_lws(
                    set_name=SET,
                    role=role,
                    slice_index=index,
                    revision=label or target,
                    replicas=2,
                    policy=spec.placement_policy,
                )
            )
            rendered["metadata"].setdefault("annotations", {})[api.ANNOTATION_INITIAL_REPLICAS] = (
                "5"
            )
            if edit is not None:
                edit(rendered)
            found.append(builders.observe(rendered))
    return builders.parse_children(*found)


def _recover(
    lws: Sequence[records.ObservedObject], spec: api.DisaggregatedSetSpec, label: str
) -> recovered.Recovered:
    return recovered.recover(
        lws, set_name=SET, revision_=label, order=[role.name for role in spec.roles]
    )


@pytest.mark.parametrize("placement", ["None", "ExclusiveSlice", "ExclusiveTopology"])
def test_the_roles_come_back_as_the_set_had_them_but_for_replicas_and_scaling(
    placement: str,
) -> None:
    spec = _spec(placement=placement)
    target = revision.of_spec(spec)
    found = _recover(_running(spec), spec, target)
    assert found.why == "" and found.roles is not None
    expected = []
    for role in children.history_roles(spec.roles):
        role.pop("scaling", None)
        role["spec"] = {key: value for key, value in role["spec"].items() if key != "replicas"}
        expected.append(role)
    assert list(found.roles) == expected
    assert found.newest == builders.CREATED


def test_the_lws_it_reads_are_not_changed() -> None:
    spec = _spec(placement="ExclusiveTopology")
    lws = _running(spec)
    before = copy.deepcopy([(item.spec, dict(item.labels)) for item in lws])
    _recover(lws, spec, revision.of_spec(spec))
    assert [(item.spec, dict(item.labels)) for item in lws] == before


def _image(lws: JsonObject) -> None:
    lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"] = (
        "evil/miner:latest"
    )


def _own_app_label(lws: JsonObject) -> None:
    lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"]["tier"] = "x"


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        pytest.param(_image, "hash to", id="a-template-edited"),
        pytest.param(_own_app_label, "hash to", id="a-template-label-added"),
    ],
)
def test_lws_whose_templates_do_not_hash_to_their_revision_give_no_roles(
    edit: Callable[[JsonObject], None], why: str
) -> None:
    spec = _spec()
    found = _recover(_running(spec, edit=edit), spec, revision.of_spec(spec))
    assert found.roles is None and why in found.why


def test_lws_labelled_with_another_revision_give_no_roles() -> None:
    """A planted LWS labelled with a revision it does not run: its templates hash to their own."""
    spec = _spec()
    found = _recover(_running(spec, label="0badc0de"), spec, "0badc0de")
    assert found.roles is None and revision.of_spec(spec) in found.why


def test_a_role_whose_own_template_label_the_set_overrides_gives_no_roles() -> None:
    """The role's own `app` label on a pod template was overwritten: it cannot come back."""
    spec_json = builders.make_ds(roles=[builders.make_role("a"), builders.make_role("b")])["spec"]
    spec_json["roles"][0]["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"][
        "app"
    ] = "mine"
    spec = api.DisaggregatedSetSpec.model_validate(spec_json)
    found = _recover(_running(spec), spec, revision.of_spec(spec))
    assert found.roles is None and "overrides" in found.why


def test_a_role_without_its_lws_gives_no_roles() -> None:
    spec = _spec()
    lws = [item for item in _running(spec) if item.labels[api.LABEL_ROLE] != "decode"]
    found = _recover(lws, spec, revision.of_spec(spec))
    assert found.roles is None and "'prefill'" in found.why


def test_roles_in_another_order_than_the_spec_give_no_roles() -> None:
    spec = _spec()
    found = recovered.recover(
        _running(spec), set_name=SET, revision_=revision.of_spec(spec), order=["decode", "prefill"]
    )
    assert found.roles is None and "order" in found.why


def test_a_role_the_spec_no_longer_has_comes_after_the_others() -> None:
    spec = _spec()
    found = recovered.recover(
        _running(spec), set_name=SET, revision_=revision.of_spec(spec), order=["prefill"]
    )
    assert found.roles is not None and [role["name"] for role in found.roles] == [
        "prefill",
        "decode",
    ]
