"""The hook's re-check of the CRD rules: ids, field paths, messages and order."""

from __future__ import annotations

from typing import Any

import pytest

from hooks import api
from hooks.api import rules
from hooks.core import validation
from tests.cel_cases import sized
from tests.cel_eval import make_ds, make_role
from tests.shared import by_name, golden_params, lws_refused, names_over_budget

JsonObject = dict[str, Any]

EXCLUSIVE = api.EXCLUSIVE_TOPOLOGY_ANNOTATION
SUBGROUP_EXCLUSIVE = api.SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION
PLACED = {"type": "ExclusiveSlice", "topology": "cloud.google.com/gke-nodepool"}
RUC = "spec.rolloutStrategy.rollingUpdateConfiguration"
LWT = "spec.leaderWorkerTemplate"


def _check(manifest: JsonObject) -> list[tuple[str, str]]:
    spec = api.DisaggregatedSetSpec.model_validate(manifest["spec"])
    violations = validation.check(name=manifest["metadata"]["name"], spec=spec)
    return [(v.rule, v.field) for v in violations]


def _rolling(replicas: int | None, config: JsonObject) -> JsonObject:
    rollout = {"rollingUpdateConfiguration": config}
    return make_ds(
        make_role("prefill", replicas=replicas, rollout=rollout),
        make_role("decode", replicas=replicas),
    )


def _role(index: int, suffix: str) -> str:
    return f"spec.roles[{index}].{suffix}"


def _partition(value: int) -> JsonObject:
    return {"rollingUpdateConfiguration": {"partition": value}}


CASES: list[tuple[str, JsonObject, list[tuple[str, str]]]] = [
    ("valid-two-roles", make_ds(), []),
    # unique names (structural in the CRD)
    (
        "duplicate-role-name",
        make_ds(make_role("a"), make_role("b"), make_role("a")),
        [("role-names-unique", _role(2, "name"))],
    ),
    # rule 2
    ("replicas-all-zero", make_ds(make_role("a", replicas=0), make_role("b", replicas=0)), []),
    (
        "replicas-mixed",
        make_ds(make_role("a", replicas=0), make_role("b", replicas=3)),
        [("replicas-all-or-nothing", "spec.roles")],
    ),
    (
        "replicas-unset-counts-with-zero",
        make_ds(make_role("a", replicas=None), make_role("b", replicas=0)),
        [],
    ),
    (
        "replicas-unset-beside-positive",
        make_ds(make_role("a", replicas=None), make_role("b", replicas=2)),
        [("replicas-all-or-nothing", "spec.roles")],
    ),
    (
        "replicas-external-exempt",
        make_ds(make_role("a", replicas=0, scaling="External"), make_role("b", replicas=2)),
        [],
    ),
    (
        "replicas-only-external-roles",
        make_ds(
            make_role("a", replicas=0, scaling="External"),
            make_role("b", replicas=4, scaling="External"),
        ),
        [],
    ),
    # rule 3
    (
        "rollout-type-recreate",
        make_ds(make_role("a", rollout={"type": "Recreate"}), make_role("b")),
        [("rollout-type-rolling-update", _role(0, "spec.rolloutStrategy.type"))],
    ),
    ("rollout-type-empty", make_ds(make_role("a", rollout={"type": ""}), make_role("b")), []),
    (
        "partition-set",
        make_ds(make_role("a"), make_role("b", replicas=1, rollout=_partition(2))),
        [("rollout-partition-unset", _role(1, f"{RUC}.partition"))],
    ),
    ("partition-zero", make_ds(make_role("a"), make_role("b", rollout=_partition(0))), []),
    # rule 4
    ("surge-and-unavailable-absent", _rolling(2, {}), []),
    ("surge-one", _rolling(2, {"maxSurge": 1, "maxUnavailable": 0}), []),
    ("percent-leading-zeros", _rolling(2, {"maxSurge": "0050%", "maxUnavailable": "0%"}), []),
    (
        "surge-negative",
        _rolling(2, {"maxSurge": -1}),
        [("max-surge-int-or-percent", _role(0, f"{RUC}.maxSurge"))],
    ),
    (
        "surge-over-100-percent",
        _rolling(2, {"maxSurge": "150%", "maxUnavailable": 1}),
        [("max-surge-int-or-percent", _role(0, f"{RUC}.maxSurge"))],
    ),
    (
        "unavailable-without-percent-sign",
        _rolling(2, {"maxSurge": 0, "maxUnavailable": "1"}),
        [("max-unavailable-int-or-percent", _role(0, f"{RUC}.maxUnavailable"))],
    ),
    (
        "unavailable-signed-percent",
        _rolling(2, {"maxSurge": 1, "maxUnavailable": "+5%"}),
        [("max-unavailable-int-or-percent", _role(0, f"{RUC}.maxUnavailable"))],
    ),
    (
        "unavailable-zero-surge-default",
        _rolling(2, {"maxUnavailable": 0}),
        [("surge-or-unavailable-nonzero", _role(0, f"{RUC}.maxUnavailable"))],
    ),
    (
        "percent-rounds-down-to-zero",
        _rolling(9, {"maxSurge": "0%", "maxUnavailable": "11%"}),
        [("surge-or-unavailable-nonzero", _role(0, f"{RUC}.maxUnavailable"))],
    ),
    ("percent-rounds-down-to-one", _rolling(10, {"maxSurge": 0, "maxUnavailable": "10%"}), []),
    ("surge-percent-rounds-up", _rolling(1, {"maxSurge": "1%", "maxUnavailable": 0}), []),
    ("zero-replicas-exempt", _rolling(0, {"maxSurge": -5, "maxUnavailable": "bad"}), []),
    ("unset-replicas-exempt", _rolling(None, {"maxSurge": 0, "maxUnavailable": 0}), []),
    (
        "huge-percent-does-not-raise",
        _rolling(2, {"maxSurge": "9" * 5000 + "%", "maxUnavailable": "0" * 5000 + "5%"}),
        [
            ("max-surge-int-or-percent", _role(0, f"{RUC}.maxSurge")),
            ("max-unavailable-int-or-percent", _role(0, f"{RUC}.maxUnavailable")),
        ],
    ),
    (
        "leading-zeros-up-to-the-crd-max-length",
        _rolling(2, {"maxSurge": "0" * 13 + "25%", "maxUnavailable": "0" * 14 + "25%"}),
        [("max-unavailable-int-or-percent", _role(0, f"{RUC}.maxUnavailable"))],
    ),
    # rule 5
    ("placement-none", make_ds(placement={"type": "None"}), []),
    ("placement-absent-type", make_ds(placement={}), []),
    (
        "placement-without-topology",
        make_ds(placement={"type": "ExclusiveSlice"}),
        [("placement-topology-required", "spec.placementPolicy.topology")],
    ),
    (
        "annotation-on-role-and-worker-template",
        make_ds(
            make_role("a", annotations={EXCLUSIVE: "x"}),
            make_role("b"),
            make_role("c", worker_annotations={SUBGROUP_EXCLUSIVE: "x"}),
            placement=PLACED,
        ),
        [
            ("placement-exclusive-annotation-conflict", "spec.roles[0]"),
            ("placement-exclusive-annotation-conflict", "spec.roles[2]"),
        ],
    ),
    (
        "annotation-on-leader-template",
        make_ds(
            make_role("a", leader_annotations={EXCLUSIVE: ""}), make_role("b"), placement=PLACED
        ),
        [("placement-exclusive-annotation-conflict", "spec.roles[0]")],
    ),
    (
        "annotation-without-placement",
        make_ds(make_role("a", annotations={EXCLUSIVE: "x"}), make_role("b")),
        [],
    ),
    # rule 6
    (
        "external-with-two-slices",
        make_ds(make_role("a", scaling="External"), make_role("b"), slices=2),
        [("external-single-slice", "spec.slices")],
    ),
    ("static-with-two-slices", make_ds(slices=2), []),
    # rule 7
    ("names-fit", make_ds(make_role("prefill"), make_role("decode"), name="n" * 31), []),
    (
        "names-too-long-for-both-roles",
        make_ds(make_role("prefill"), make_role("decode"), make_role("x"), name="n" * 33),
        [
            ("generated-names-fit", _role(0, "name")),
            ("generated-names-fit", _role(1, "name")),
        ],
    ),
    (
        "slice-digits-count",
        make_ds(make_role("prefill"), make_role("b"), name="n" * 31, slices=11),
        [("generated-names-fit", _role(0, "name"))],
    ),
    (
        "replica-digits-count",
        make_ds(make_role("prefill", replicas=11), make_role("b", replicas=11), name="n" * 31),
        [("generated-names-fit", _role(0, "name"))],
    ),
    (
        "scaler-name-too-long",
        make_ds(make_role("b"), make_role("a" * 60, scaling="External"), name="n" * 200),
        [
            ("generated-names-fit", _role(0, "name")),
            ("generated-names-fit", _role(1, "name")),
            ("scaler-name-fits", _role(1, "name")),
        ],
    ),
    # What LeaderWorkerSet's admission refuses of a role's LWS (issue 33 item 6)
    ("size-zero", sized(0), [("lws-size-at-least-one", _role(0, LWT + ".size"))]),
    (
        "pods-past-int32",
        sized(2148, replicas=1_000_000),
        [("lws-pods-fit-int32", _role(0, "spec.replicas"))],
    ),
    ("pods-external-exempt", sized(4000, replicas=1_000_000, scaling="External"), []),
    (
        "subgroup-divides-neither",
        sized(5, subgroup={"subGroupSize": 3}),
        [("lws-subgroup-size", _role(0, LWT + ".subGroupPolicy.subGroupSize"))],
    ),
    (
        "subgroup-leader-excluded",
        sized(4, subgroup={"subGroupSize": 2, "subGroupPolicyType": "LeaderExcluded"}),
        [("lws-subgroup-size", _role(0, LWT + ".subGroupPolicy.subGroupSize"))],
    ),
    ("subgroup-fits", sized(5, subgroup={"subGroupSize": 2}), []),
    (
        "subgroup-exclusive-without-subgroups",
        sized(4, annotations={SUBGROUP_EXCLUSIVE: "rack"}),
        [("lws-subgroup-exclusive-needs-subgroups", _role(0, "metadata.annotations"))],
    ),
    (
        "size-zero-and-subgroups",
        sized(0, subgroup={"subGroupSize": 1}),
        [
            ("lws-size-at-least-one", _role(0, LWT + ".size")),
            ("lws-subgroup-size", _role(0, LWT + ".subGroupPolicy.subGroupSize")),
        ],
    ),
]


@pytest.mark.parametrize(
    ("manifest", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_check(manifest: JsonObject, expected: list[tuple[str, str]]) -> None:
    assert _check(manifest) == expected


def test_every_rule_is_checked() -> None:
    seen = {rule for _, _, expected in CASES for rule, _ in expected}
    assert seen == {rule.id for rule in rules.CEL_RULES} | {rules.ROLE_NAMES_UNIQUE.id}


def test_violations_come_in_rule_table_order() -> None:
    manifest = make_ds(
        make_role("a", replicas=0, scaling="External", rollout=_partition(1)),
        make_role("a", replicas=2),
        slices=3,
        placement={"type": "ExclusiveTopology"},
        name="n" * 60,
    )
    assert [rule for rule, _ in _check(manifest)] == [
        "role-names-unique",
        "rollout-partition-unset",
        "placement-topology-required",
        "external-single-slice",
        "generated-names-fit",
        "generated-names-fit",
    ]


def test_messages_and_ids_come_from_the_rule_table() -> None:
    messages = {rule.id: rule.message for rule in rules.CEL_RULES}
    messages[rules.ROLE_NAMES_UNIQUE.id] = rules.ROLE_NAMES_UNIQUE.message
    for _, manifest, _ in CASES:
        spec = api.DisaggregatedSetSpec.model_validate(manifest["spec"])
        for violation in validation.check(name=manifest["metadata"]["name"], spec=spec):
            if violation.rule == rules.GENERATED_NAMES_FIT.id:
                continue  # its message names the lengths: the next test
            assert violation.message == messages[violation.rule]


@pytest.mark.parametrize(
    ("name", "role", "slices", "replicas", "length", "limit"),
    [
        ("n" * 40, "prefill", 1, 1, 72, 38),  # the example: pods would never start
        ("n" * 32, "prefill", 1, 1, 64, 38),
        ("n" * 31, "prefill", 11, 1, 64, 37),
        ("n" * 31, "prefill", 1, 11, 64, 37),
        ("n" * 31, "prefill", 1, 0, None, 38),
        ("n" * 31, "prefill", 1, None, None, 38),
        ("n" * 30, "prefill", 100, 101, 65, 35),
    ],
)
def test_generated_names_message_is_upstreams_with_the_lengths(
    name: str, role: str, slices: int, replicas: int | None, length: int | None, limit: int
) -> None:
    """lws PR #991's message: the longest generated name and the combined limit, per role."""
    manifest = make_ds(make_role(role, replicas=replicas), make_role("b"), name=name, slices=slices)
    spec = api.DisaggregatedSetSpec.model_validate(manifest["spec"])
    found = [
        v for v in validation.check(name=name, spec=spec) if v.rule == rules.GENERATED_NAMES_FIT.id
    ]
    if length is None:
        assert found == []
        return
    assert found[0].field == "spec.roles[0].name"
    assert found[0].message == (
        f"the generated names ({length} chars) would exceed the DNS-1035 limit of 63 characters"
        " (accounting for service name and StatefulSet revision hash labels); reduce the"
        f" DisaggregatedSet name and/or role name (combined limit: {limit} characters)"
    )


def test_check_is_deterministic() -> None:
    manifest = CASES[-1][1]
    spec = api.DisaggregatedSetSpec.model_validate(manifest["spec"])
    assert validation.check(name="n" * 200, spec=spec) == validation.check(
        name="n" * 200, spec=spec
    )


@pytest.mark.parametrize("vector", golden_params("revision_vectors.json", by_name))
def test_stored_objects_match_upstream_webhook(vector: JsonObject) -> None:
    """Upstream's verdict at the vectors' commit, plus the later name budget (lws PR #991) and
    what LeaderWorkerSet's admission refuses of a role's LWS (issue 33 item 6)."""
    stored = vector["stored"]
    error = vector["webhook_error"]
    expected = [error.split(":", 1)[0]] if error else []
    expected += names_over_budget(stored)
    expected += lws_refused(stored)
    assert [field for _, field in _check(stored)] == expected


@pytest.mark.parametrize(
    ("replicas", "external", "warned"),
    [(5, True, True), (1, True, False), (None, True, False), (5, False, False)],
    ids=["external-5", "external-1", "external-unset", "static-5"],
)
def test_only_an_external_roles_replicas_above_one_is_warned_of(
    replicas: int | None, external: bool, warned: bool
) -> None:
    role = make_role("decode", replicas=replicas, scaling="External" if external else None)
    spec = api.DisaggregatedSetSpec.model_validate(
        make_ds(make_role("prefill", replicas=2), role)["spec"]
    )
    found = validation.warnings(name="llm", spec=spec)
    assert found == (
        [
            'spec.roles[name="decode"].spec.replicas is 5 but the role has scaling.mode External,'
            " so this value is ignored: its replicas are driven by the DisaggregatedSetRoleScaler"
            ' "llm-decode" (scale that object or let its autoscaler do it). Remove spec.replicas'
            " from the role or set it to 1."
        ]
        if warned
        else []
    )
