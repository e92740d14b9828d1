"""Python and CEL agree: `validation.check` and the CRD's CEL rules judge random sets alike.

Both sides see what the API server would store: the manifest after the CRD's defaulting. Only
manifests that pass the OpenAPI schema are compared (the API server runs CEL on no others).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from hooks import api
from hooks.core import validation
from tests import cel_eval

JsonObject = dict[str, Any]

_PERCENTS = st.sampled_from(
    ["0%", "00%", "1%", "9%", "10%", "25%", "50%", "99%", "100%", "0100%", "101%", "1000%", "007%"]
)
_BAD_STRINGS = st.sampled_from(["0", "5", "abc", "-5%", "+5%", "%", "", "5%%", "1.5%", " 5%"])
_INT_OR_STRING = st.one_of(
    st.integers(-2, 4),
    _PERCENTS,
    st.integers(0, 150).map(lambda p: f"{p}%"),
    _BAD_STRINGS,
)
_CONFIG = st.fixed_dictionaries(
    {},
    optional={
        "maxSurge": _INT_OR_STRING,
        "maxUnavailable": _INT_OR_STRING,
        "partition": st.sampled_from([0, 0, 1, 4]),
    },
)
_ROLLOUT = st.fixed_dictionaries(
    {}, optional={"type": st.just("RollingUpdate"), "rollingUpdateConfiguration": _CONFIG}
)
_ANNOTATION_KEYS = st.sampled_from(
    [api.EXCLUSIVE_TOPOLOGY_ANNOTATION, api.SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION, "team"]
)
_ANNOTATIONS = st.none() | st.dictionaries(_ANNOTATION_KEYS, st.sampled_from(["", "rack"]))
_SHORT_ROLE_NAMES = st.sampled_from(["prefill", "decode", "encode", "router", "a", "b"])
_ROLE_NAMES = st.one_of(
    _SHORT_ROLE_NAMES,
    _SHORT_ROLE_NAMES,
    _SHORT_ROLE_NAMES,
    st.sampled_from(["r" * 20, "long-" + "x" * 35, "z" * 63]),
)


@st.composite
def _roles(draw: st.DrawFn) -> list[JsonObject]:
    names = draw(st.lists(_ROLE_NAMES, min_size=2, max_size=5, unique=True))
    roles = []
    for name in names:
        role = cel_eval.make_role(
            name,
            replicas=draw(st.none() | st.sampled_from([0, 0, 1, 2, 3, 5, 9, 10, 100])),
            rollout=draw(st.none() | _ROLLOUT),
            annotations=draw(_ANNOTATIONS),
            leader_annotations=draw(_ANNOTATIONS),
            worker_annotations=draw(_ANNOTATIONS),
        )
        scaling = draw(st.sampled_from([None, None, {}, {"mode": "Static"}, {"mode": "External"}]))
        if scaling is not None:
            role["scaling"] = scaling
        roles.append(role)
    return roles


_PLACEMENT = st.none() | st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["None", "ExclusiveSlice", "ExclusiveTopology"]),
        "topology": st.sampled_from(["", "cloud.google.com/gke-nodepool"]),
    },
)
_SLICES = st.none() | st.sampled_from([1, 1, 2, 9, 10, 11, 99, 100]) | st.integers(1, 100)
# Mostly names that fit, some near the 63-character budget, a few that only a scaler rejects.
_SET_NAMES = st.one_of(
    st.integers(1, 20), st.integers(1, 20), st.integers(21, 60), st.integers(180, 253)
).map(lambda n: "s" * n)


@st.composite
def _manifests(draw: st.DrawFn) -> JsonObject:
    return cel_eval.make_ds(
        *draw(_roles()),
        name=draw(_SET_NAMES),
        slices=draw(_SLICES),
        placement=draw(_PLACEMENT),
    )


@pytest.fixture(scope="module")
def harness() -> cel_eval.CrdHarness:
    """Built outside the hypothesis-run test: cel-python raises the recursion limit once."""
    return cel_eval.ds_harness()


@given(manifest=_manifests())
def test_python_and_cel_agree(harness: cel_eval.CrdHarness, manifest: JsonObject) -> None:
    admission = harness.admit(manifest)
    assume(not admission.schema_errors)
    stored = admission.defaulted
    spec = api.DisaggregatedSetSpec.model_validate(stored["spec"])
    violations = validation.check(name=stored["metadata"]["name"], spec=spec)
    assert {v.rule for v in violations} == admission.failed_rule_ids
    for failure in admission.cel_failures:
        assert any(
            v.rule == failure.rule_id
            and v.field.startswith(failure.path)
            and v.message == failure.message
            for v in violations
        ), failure


@given(manifest=_manifests())
def test_schema_accepts_every_generated_manifest(
    harness: cel_eval.CrdHarness, manifest: JsonObject
) -> None:
    """The generator stays inside the schema, so the agreement test never runs empty."""
    assert harness.admit(manifest).schema_errors == []
