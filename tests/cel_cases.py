"""Manifests that exercise the DisaggregatedSet CRD's validation, shared by the cel-python tests
(`tests/unit/test_cel_rules.py`) and the real API server (`tests/cluster/test_validation.py`).

`CASES`: (id, manifest, ids of the CEL rules it breaks; empty when accepted). Every manifest
passes the OpenAPI schema. `STRUCTURAL`: (id, manifest, ids of the CEL rules it breaks) for
manifests that the schema itself rejects; the API server still evaluates the CEL rules unless a
schema error blocks them (a wrong type, enum value, missing field, or a string or list too long).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hooks import api
from tests.cel_eval import make_ds, make_role

JsonObject = dict[str, Any]

EXCLUSIVE = api.EXCLUSIVE_TOPOLOGY_ANNOTATION
SUBGROUP_EXCLUSIVE = api.SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION
PLACED = {"type": "ExclusiveSlice", "topology": "cloud.google.com/gke-nodepool"}


def sized(
    size: int,
    *,
    replicas: int = 1,
    subgroup: JsonObject | None = None,
    annotations: dict[str, str] | None = None,
    scaling: str | None = None,
) -> JsonObject:
    """Two roles; the first of groups of `size` pods, with `subgroup` as its subGroupPolicy."""
    first = make_role("prefill", replicas=replicas, scaling=scaling, annotations=annotations)
    first["spec"]["leaderWorkerTemplate"]["size"] = size
    if subgroup is not None:
        first["spec"]["leaderWorkerTemplate"]["subGroupPolicy"] = subgroup
    return make_ds(first, make_role("decode", replicas=replicas))


def rolling(replicas: int | None, surge: Any = None, unavailable: Any = None) -> JsonObject:
    """Two roles; the first has `replicas` and the given rollingUpdateConfiguration values."""
    config: JsonObject = {}
    if surge is not None:
        config["maxSurge"] = surge
    if unavailable is not None:
        config["maxUnavailable"] = unavailable
    rollout = {"rollingUpdateConfiguration": config}
    return make_ds(
        make_role("prefill", replicas=replicas, rollout=rollout),
        make_role("decode", replicas=replicas),
    )


def name_of(length: int) -> str:
    return "n" * length


# id, manifest, CEL rule ids expected to fail (empty: accepted).
CASES: list[tuple[str, JsonObject, set[str]]] = [
    ("plain-two-roles", make_ds(), set()),
    # rule 2
    (
        "replicas-all-zero",
        make_ds(make_role("a", replicas=0), make_role("b", replicas=0)),
        set(),
    ),
    (
        "replicas-all-positive",
        make_ds(make_role("a", replicas=3), make_role("b", replicas=1)),
        set(),
    ),
    (
        "replicas-mixed",
        make_ds(make_role("a", replicas=0), make_role("b", replicas=2)),
        {"replicas-all-or-nothing"},
    ),
    (
        "replicas-unset-defaults-to-one-beside-zero",
        make_ds(make_role("a", replicas=None), make_role("b", replicas=0)),
        {"replicas-all-or-nothing"},
    ),
    (
        "replicas-external-role-is-exempt",
        make_ds(
            make_role("a", replicas=0, scaling="External"),
            make_role("b", replicas=2),
            make_role("c", replicas=1, scaling="Static"),
        ),
        set(),
    ),
    # rule 3
    ("rollout-type-rolling-update", rolling(2, 1, 0), set()),
    (
        "partition-zero",
        make_ds(
            make_role("a", rollout={"rollingUpdateConfiguration": {"partition": 0}}),
            make_role("b"),
        ),
        set(),
    ),
    (
        "partition-set",
        make_ds(
            make_role("a", rollout={"rollingUpdateConfiguration": {"partition": 2}}),
            make_role("b"),
        ),
        {"rollout-partition-unset"},
    ),
    # rule 4
    ("surge-1-unavailable-0", rolling(2, 1, 0), set()),
    ("defaults-surge-0-unavailable-1", rolling(2), set()),
    ("surge-100-percent", rolling(2, "100%", 0), set()),
    ("surge-leading-zero-percent", rolling(2, "007%", 0), set()),
    ("surge-leading-zeros-at-max-length", rolling(2, "0" * 13 + "25%", 0), set()),
    ("surge-negative", rolling(2, -1, 1), {"max-surge-int-or-percent"}),
    ("surge-over-100-percent", rolling(2, "101%", 1), {"max-surge-int-or-percent"}),
    ("surge-not-a-percentage", rolling(2, "5", 1), {"max-surge-int-or-percent"}),
    ("surge-garbage", rolling(2, "abc%", 1), {"max-surge-int-or-percent"}),
    ("unavailable-negative", rolling(2, 1, -3), {"max-unavailable-int-or-percent"}),
    (
        "unavailable-over-100-percent",
        rolling(2, 1, "1000%"),
        {"max-unavailable-int-or-percent"},
    ),
    (
        "both-invalid",
        rolling(2, "x", "y"),
        {"max-surge-int-or-percent", "max-unavailable-int-or-percent"},
    ),
    (
        "invalid-unavailable-skips-the-pair-check",
        rolling(2, 0, "0"),
        {"max-unavailable-int-or-percent"},
    ),
    ("both-zero", rolling(2, 0, 0), {"surge-or-unavailable-nonzero"}),
    ("both-zero-percent", rolling(2, "0%", "0%"), {"surge-or-unavailable-nonzero"}),
    (
        "unavailable-percent-rounds-down-to-zero",
        rolling(5, 0, "10%"),
        {"surge-or-unavailable-nonzero"},
    ),
    ("unavailable-percent-rounds-down-to-one", rolling(10, 0, "10%"), set()),
    ("surge-percent-rounds-up-to-one", rolling(1, "1%", 0), set()),
    ("zero-replicas-are-exempt", rolling(0, 0, 0), set()),
    ("zero-replicas-exempt-invalid-values", rolling(0, -1, "abc"), set()),
    # rule 5
    ("placement-none-needs-no-topology", make_ds(placement={"type": "None"}), set()),
    ("placement-with-topology", make_ds(placement=PLACED), set()),
    (
        "placement-without-topology",
        make_ds(placement={"type": "ExclusiveTopology"}),
        {"placement-topology-required"},
    ),
    (
        "placement-empty-topology",
        make_ds(placement={"type": "ExclusiveSlice", "topology": ""}),
        {"placement-topology-required"},
    ),
    (
        "exclusive-annotation-on-role-metadata",
        make_ds(make_role("a", annotations={EXCLUSIVE: "rack"}), make_role("b"), placement=PLACED),
        {"placement-exclusive-annotation-conflict"},
    ),
    (
        "subgroup-annotation-on-leader-template",
        make_ds(
            make_role("a"),
            make_role("b", leader_annotations={SUBGROUP_EXCLUSIVE: "rack"}),
            placement=PLACED,
        ),
        {"placement-exclusive-annotation-conflict"},
    ),
    (
        "exclusive-annotation-on-worker-template",
        make_ds(
            make_role("a", worker_annotations={EXCLUSIVE: ""}), make_role("b"), placement=PLACED
        ),
        {"placement-exclusive-annotation-conflict"},
    ),
    (
        "exclusive-annotation-without-placement",
        make_ds(make_role("a", annotations={EXCLUSIVE: "rack"}), make_role("b")),
        set(),
    ),
    (
        "other-annotations-with-placement",
        make_ds(
            make_role("a", annotations={"x": "y"}, leader_annotations={"z": "w"}),
            make_role("b"),
            placement=PLACED,
        ),
        set(),
    ),
    # rule 6
    (
        "external-with-one-slice",
        make_ds(make_role("a", scaling="External"), make_role("b"), slices=1),
        set(),
    ),
    ("static-with-slices", make_ds(slices=4), set()),
    (
        "external-with-slices",
        make_ds(make_role("a", scaling="External"), make_role("b"), slices=2),
        {"external-single-slice"},
    ),
    # rule 7, the name budget of lws PR #991: <name>-<slice>-<8 hex>-<role> plus the pod
    # revision-hash label of the last group, -<group>-<10 characters>: len(name) + len(role) +
    # 25 characters with one slice digit and one group digit, so name and role share 38.
    ("names-fit-exactly", make_ds(make_role("prefill"), make_role("b"), name=name_of(31)), set()),
    (
        "names-one-too-long",
        make_ds(make_role("prefill"), make_role("b"), name=name_of(32)),
        {"generated-names-fit"},
    ),
    (
        "names-of-the-issue-forty-and-prefill",
        make_ds(make_role("prefill"), make_role("b"), name=name_of(40)),
        {"generated-names-fit"},
    ),
    (
        "names-fit-with-ten-slices",
        make_ds(make_role("prefill"), make_role("b"), name=name_of(31), slices=10),
        set(),
    ),
    (
        "names-too-long-with-eleven-slices",
        make_ds(make_role("prefill"), make_role("b"), name=name_of(31), slices=11),
        {"generated-names-fit"},
    ),
    (
        "names-fit-with-ten-replicas",
        make_ds(make_role("prefill", replicas=10), make_role("b", replicas=10), name=name_of(31)),
        set(),
    ),
    (
        "names-too-long-with-eleven-replicas",
        make_ds(make_role("prefill", replicas=11), make_role("b", replicas=11), name=name_of(31)),
        {"generated-names-fit"},
    ),
    (
        "names-fit-with-zero-replicas",
        make_ds(make_role("prefill", replicas=0), make_role("b", replicas=0), name=name_of(31)),
        set(),
    ),
    (
        "names-fit-with-unset-replicas",
        make_ds(
            make_role("prefill", replicas=None), make_role("b", replicas=None), name=name_of(31)
        ),
        set(),
    ),
    (
        "names-too-long-with-a-thousand-and-one-replicas",
        make_ds(make_role("p", replicas=1001), make_role("b", replicas=1001), name=name_of(35)),
        {"generated-names-fit"},
    ),
    (
        "names-fit-with-a-thousand-replicas",
        make_ds(make_role("p", replicas=1000), make_role("b", replicas=1000), name=name_of(35)),
        set(),
    ),
    (
        "scaler-name-too-long",
        make_ds(make_role("a" * 63, scaling="External"), make_role("b"), name=name_of(200)),
        {"generated-names-fit", "scaler-name-fits"},
    ),
    # What LeaderWorkerSet's admission refuses of a role's LWS (issue 33 item 6).
    ("size-one", sized(1), set()),
    ("size-zero", sized(0), {"lws-size-at-least-one"}),
    ("size-negative", sized(-3), {"lws-size-at-least-one"}),
    ("pods-at-int32", sized(2147, replicas=1_000_000), set()),
    ("pods-past-int32", sized(2148, replicas=1_000_000), {"lws-pods-fit-int32"}),
    # An External role's pods come from its scaler: the hooks report those (core/admission.py).
    ("pods-external-exempt", sized(4000, replicas=1_000_000, scaling="External"), set()),
    ("subgroup-divides-size", sized(4, subgroup={"subGroupSize": 2}), set()),
    ("subgroup-divides-size-less-one", sized(5, subgroup={"subGroupSize": 2}), set()),
    ("subgroup-divides-neither", sized(5, subgroup={"subGroupSize": 3}), {"lws-subgroup-size"}),
    ("subgroup-past-size", sized(2, subgroup={"subGroupSize": 3}), {"lws-subgroup-size"}),
    ("subgroup-zero", sized(2, subgroup={"subGroupSize": 0}), {"lws-subgroup-size"}),
    ("subgroup-without-size", sized(2, subgroup={}), {"lws-subgroup-size"}),
    (
        "subgroup-leader-excluded-size-less-one",
        sized(5, subgroup={"subGroupSize": 2, "subGroupPolicyType": "LeaderExcluded"}),
        set(),
    ),
    (
        "subgroup-leader-excluded-size",
        sized(4, subgroup={"subGroupSize": 2, "subGroupPolicyType": "LeaderExcluded"}),
        {"lws-subgroup-size"},
    ),
    (
        "subgroup-exclusive-without-subgroups",
        sized(4, annotations={SUBGROUP_EXCLUSIVE: "rack"}),
        {"lws-subgroup-exclusive-needs-subgroups"},
    ),
    (
        "subgroup-exclusive-with-subgroups",
        sized(4, subgroup={"subGroupSize": 2}, annotations={SUBGROUP_EXCLUSIVE: "rack"}),
        set(),
    ),
]


def with_spec(change: Callable[[JsonObject], None]) -> JsonObject:
    manifest = make_ds()
    change(manifest["spec"])
    return manifest


STRUCTURAL: list[tuple[str, JsonObject, set[str]]] = [
    ("one-role", make_ds(make_role("a")), set()),
    ("eleven-roles", make_ds(*(make_role(f"r{i}") for i in range(11))), set()),
    ("duplicate-role-names", make_ds(make_role("a"), make_role("a")), set()),
    ("role-name-uppercase", make_ds(make_role("Prefill"), make_role("b")), set()),
    ("role-name-too-long", make_ds(make_role("a" * 64), make_role("b")), set()),
    ("slices-zero", make_ds(slices=0), set()),
    ("slices-over-100", make_ds(slices=101), set()),
    ("placement-type-unknown", make_ds(placement={"type": "Rack", "topology": "k"}), set()),
    ("scaling-mode-unknown", make_ds(make_role("a", scaling="Auto"), make_role("b")), set()),
    ("role-without-spec", with_spec(lambda spec: spec["roles"][0].pop("spec")), set()),
    (
        "role-without-template",
        with_spec(lambda spec: spec["roles"][0]["spec"].pop("leaderWorkerTemplate")),
        set(),
    ),
    # A minimum is not a blocking error: the CEL rule sees -1, and leaves it to the schema's
    # message (regression, issue 35 item 8: it added its own, spurious, all-or-nothing error).
    (
        "replicas-negative",
        make_ds(make_role("a", replicas=-1), make_role("b", replicas=-1)),
        set(),
    ),
    (
        "replicas-negative-beside-positive",
        make_ds(make_role("a", replicas=-1), make_role("b", replicas=3)),
        set(),
    ),
    ("no-roles", with_spec(lambda spec: spec.pop("roles")), set()),
    ("surge-longer-than-max-length", rolling(2, "0" * 14 + "25%", 0), set()),
]
