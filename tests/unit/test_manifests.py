"""Manifests judged as the API server judges them: unknown fields, YAML errors, metadata.name."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any, Final

import jsonschema
import pytest
import yaml

from hooks.api import naming, rules
from hooks.cli import crdgen, manifests, pruning

JsonObject = dict[str, Any]

EXAMPLES: Final = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))


def make_set(name: str = "llm", roles: tuple[str, ...] = ("prefill", "decode")) -> JsonObject:
    return {
        "apiVersion": "disaggregatedset.x-k8s.io/v1",
        "kind": "DisaggregatedSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "roles": [
                {
                    "name": role,
                    "spec": {
                        "replicas": 1,
                        "leaderWorkerTemplate": {
                            "size": 1,
                            "workerTemplate": {
                                "spec": {"containers": [{"name": "server", "image": "vllm"}]}
                            },
                        },
                    },
                }
                for role in roles
            ]
        },
    }


def _container(document: JsonObject, role: int = 0) -> JsonObject:
    template = document["spec"]["roles"][role]["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    container: JsonObject = template["spec"]["containers"][0]
    return container


# --- unknown fields (issue 17, item 11) ----------------------------------------------------------


def test_the_issues_typos_are_unknown_fields_with_the_servers_paths() -> None:
    """Regression, issue 17 item 11: `replica: 1` and `slice: 3` rendered with exit 0, while
    `kubectl apply` fails with `unknown field "spec.roles[1].spec.replica"`."""
    document = make_set()
    document["spec"]["slice"] = 3
    document["spec"]["roles"][1]["spec"]["replica"] = document["spec"]["roles"][1]["spec"].pop(
        "replicas"
    )

    assert pruning.unknown_fields(document) == ["spec.roles[1].spec.replica", "spec.slice"]
    assert manifests.check(document).problems == (
        'unknown field "spec.roles[1].spec.replica"',
        'unknown field "spec.slice"',
    )


def _set_path(document: JsonObject, path: tuple[str | int, ...], value: object) -> None:
    target: Any = document
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value


_TEMPLATE: Final = ("spec", "roles", 0, "spec", "leaderWorkerTemplate", "workerTemplate")
_CONTAINER: Final = (*_TEMPLATE, "spec", "containers", 0)
_T: Final = "spec.roles[0].spec.leaderWorkerTemplate.workerTemplate"
_C: Final = f"{_T}.spec.containers[0]"


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        pytest.param(("zeta",), 1, ["zeta"], id="top-level"),
        pytest.param(("status",), {"phase": "x"}, ["status.phase"], id="status"),
        pytest.param(("metadata", "lables"), {"a": "b"}, ["metadata.lables"], id="metadata"),
        pytest.param(("metadata", "clusterName"), "x", ["metadata.clusterName"], id="removed-meta"),
        pytest.param(
            ("metadata", "ownerReferences"),
            [{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "1", "owner": True}],
            ["metadata.ownerReferences[0].owner"],
            id="owner-reference",
        ),
        pytest.param(
            ("metadata", "managedFields"),
            [{"manager": "kubectl", "fieldsV1": {"f:anything": {}}, "extra": 1}],
            ["metadata.managedFields[0].extra"],
            id="managed-fields-entry",
        ),
        pytest.param(
            (*_CONTAINER, "imagePullPolicyy"), "Always", [f"{_C}.imagePullPolicyy"], id="container"
        ),
        pytest.param((*_CONTAINER, "Name"), "x", [f"{_C}.Name"], id="case-matters"),
        pytest.param(
            (*_CONTAINER, "image"), {"repo": "vllm"}, [f"{_C}.image.repo"], id="object-for-string"
        ),
        pytest.param(
            (*_CONTAINER, "args"), [{"a": 1}], [f"{_C}.args[0].a"], id="object-in-a-string-list"
        ),
        pytest.param(
            (*_CONTAINER, "resources"),
            {"limits": {"cpu": {"w": 1}}},
            [f"{_C}.resources.limits.cpu.w"],
            id="map-value",
        ),
        pytest.param(
            (*_TEMPLATE, "metadata"),
            {"creationTimestamp": None, "labels": {"a": "b"}},
            [f"{_T}.metadata.creationTimestamp"],
            id="null-in-template-metadata",
        ),
        pytest.param(
            ("spec", "roles", 1, "metadata"),
            {"labels": {"team": {"a": 1}}},
            ["spec.roles[1].metadata.labels.team.a"],
            id="object-as-a-label",
        ),
    ],
)
def test_unknown_fields_are_found_where_the_schema_has_no_place_for_them(
    path: tuple[str | int, ...], value: object, expected: list[str]
) -> None:
    document = make_set()
    _set_path(document, path, value)

    assert pruning.unknown_fields(document) == expected


def test_unknown_fields_known_to_objectmeta_are_not_reported() -> None:
    document = make_set()
    document["metadata"].update(
        {
            "generateName": "llm-",
            "uid": "u",
            "resourceVersion": "1",
            "generation": 3,
            "creationTimestamp": None,
            "labels": {"a": "b"},
            "annotations": {"a": "b"},
            "finalizers": ["x"],
        }
    )

    assert pruning.unknown_fields(document) == []


def test_unknown_fields_come_in_the_servers_order_metadata_first() -> None:
    document = make_set()
    document["zeta"] = 1
    document["alpha"] = 1
    document["metadata"]["zz"] = 1
    document["metadata"]["aa"] = 1
    document["spec"]["Roles"] = []

    assert pruning.unknown_fields(document) == [
        "metadata.aa",
        "metadata.zz",
        "alpha",
        "spec.Roles",
        "zeta",
    ]


def test_the_crd_has_none_of_the_keywords_pruning_does_not_read() -> None:
    """`pruning` reads no embedded resources and no preserved unknown fields, which the
    DisaggregatedSet CRD does not use: a CRD that gains one needs them read as the server does."""
    schema = json.dumps(crdgen.openapi_schema(crdgen.DS_FILE))
    assert "x-kubernetes-embedded-resource" not in schema
    assert "x-kubernetes-preserve-unknown-fields" not in schema


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.name)
def test_the_examples_have_no_unknown_fields(path: Path) -> None:
    for document in yaml.safe_load_all(path.read_text()):
        if manifests.is_set(document):
            assert pruning.unknown_fields(document) == []


MANY_PROBLEMS: Final = Path(__file__).resolve().parents[1] / "fixtures/manifests/many-problems.yaml"


def test_every_problem_is_reported_in_one_run() -> None:
    """Regression, issue 27 item 3: a manifest with several problems was reported one kind at a
    time: its unknown fields only, then with those fixed its schema errors only, while a broken
    rule (`maxSurge: 150%`) stayed hidden until the schema held. As the API server asked only to
    warn of unknown fields (the paths and order of tests/cluster/test_render_strict.py)."""
    [document] = yaml.safe_load_all(MANY_PROBLEMS.read_text())

    problems = manifests.check(document).problems

    surge = "spec.roles[0].spec.rolloutStrategy.rollingUpdateConfiguration.maxSurge"
    assert [problem.partition(": ")[0] for problem in problems] == [
        'unknown field "metadata.lables"',
        'unknown field "spec.roles[0].spec.replica"',
        "metadata.name",
        "spec.roles[1].name",
        "spec.roles[1].spec.replicas",
        "spec.slices",
        surge,
        "spec.placementPolicy.topology",
    ]
    # `replicas: -1` is the schema's error alone (regression, issue 35 item 8: it added a
    # spurious replicas-all-or-nothing line).
    assert problems[4] == "spec.roles[1].spec.replicas: -1 is less than the minimum of 0"
    assert problems[6] == (
        f"{surge}: must be a non-negative integer or a percentage from 0% to 100% (for example 25%)"
    )


def test_a_wrong_type_leaves_the_rules_unchecked_and_says_so() -> None:
    # As the API server: after a wrong type or a value outside an enum it runs no CEL rule, and
    # answers "some validation rules were not checked".
    document = make_set()
    document["spec"]["roles"][0]["spec"]["replicas"] = 0  # breaks replicas-all-or-nothing
    _container(document)["image"] = 5  # a schema type error
    document["spec"]["typo"] = True

    assert manifests.check(document).problems == (
        'unknown field "spec.typo"',
        f"{_C}.image: 5 is not of type 'string'",
        manifests.RULES_NOT_CHECKED,
    )


def test_a_bound_broken_beside_a_rule_leaves_the_rule_checked() -> None:
    document = make_set()
    document["spec"]["roles"][0]["spec"]["replicas"] = 0  # breaks replicas-all-or-nothing
    document["spec"]["roles"][1]["name"] = "Decode"  # breaks the name pattern, a bound

    assert [problem.partition(":")[0] for problem in manifests.check(document).problems] == [
        "spec.roles[1].name",
        "spec.roles",
    ]


def test_unknown_fields_are_dropped_before_the_rest_is_judged() -> None:
    document = make_set()
    document["spec"]["roles"][0]["spec"]["replica"] = 3
    _container(document)["image"] = {"repository": "vllm"}  # an object where a string belongs
    document["metadata"]["lables"] = {"a": "b"}

    known = pruning.without_unknown_fields(document)

    assert "replica" not in known["spec"]["roles"][0]["spec"]
    assert "lables" not in known["metadata"]
    assert _container(known)["image"] == {}  # as the server prunes it: then a type error
    assert "replica" in document["spec"]["roles"][0]["spec"]  # the original is left alone
    assert manifests.check(document).problems[3] == f"{_C}.image: {{}} is not of type 'string'"


@pytest.mark.parametrize(
    "rule",
    [
        rules.ROLE_NAMES_UNIQUE,
        rules.MAX_SURGE_INT_OR_PERCENT,
        rules.SURGE_OR_UNAVAILABLE_NONZERO,
        rules.PLACEMENT_TOPOLOGY_REQUIRED,
        rules.EXTERNAL_SINGLE_SLICE,
    ],
    ids=lambda rule: rule.id,
)
def test_no_problem_repeats_its_own_field(rule: rules.CelRule | rules.SchemaRule) -> None:
    """Regression, issue 27 item 3: `spec.roles[0]...maxSurge: spec.roles[]...maxSurge must
    be ...` said the field twice (a rule's message names its field, to read on its own)."""
    document = make_set()
    roles = document["spec"]["roles"]
    if rule is rules.ROLE_NAMES_UNIQUE:
        roles[1]["name"] = roles[0]["name"]
    elif rule is rules.MAX_SURGE_INT_OR_PERCENT:
        roles[0]["spec"]["rolloutStrategy"] = {"rollingUpdateConfiguration": {"maxSurge": "1x"}}
    elif rule is rules.SURGE_OR_UNAVAILABLE_NONZERO:
        budgets = {"maxSurge": 0, "maxUnavailable": 0}
        roles[0]["spec"]["rolloutStrategy"] = {"rollingUpdateConfiguration": budgets}
    elif rule is rules.PLACEMENT_TOPOLOGY_REQUIRED:
        document["spec"]["placementPolicy"] = {"type": "ExclusiveSlice"}
    else:
        document["spec"]["slices"] = 2
        roles[1]["scaling"] = {"mode": "External"}

    [problem] = manifests.check(document).problems

    field, _, message = problem.partition(": ")
    generic = re.sub(r"\[[0-9]+\]", "[]", field)
    assert rule.message.startswith(generic + " ")  # the rule's own wording names the field
    assert not message.startswith(generic)
    assert message == rule.message.removeprefix(generic + " ")


def test_check_accepts_a_valid_set_and_returns_it_stored() -> None:
    checked = manifests.check(make_set())

    assert checked.problems == ()
    assert checked.parent is not None and checked.parent.name == "llm"
    assert checked.stored["metadata"]["uid"] == manifests.RENDER_UID


# --- YAML errors (issue 17, item 13) -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "kind: [unclosed\n",
            "f.yaml:2:1: expected ',' or ']', but got '<stream end>' (while parsing a flow "
            "sequence at 1:7)",
            id="unclosed-flow",
        ),
        pytest.param("a: b: c\n", "f.yaml:1:5: mapping values are not allowed here", id="colon"),
        pytest.param(
            "a: 1\n---\nb:\n  - x\n - y\n",
            "f.yaml:5:2: expected <block end>, but found '<block sequence start>' (while parsing "
            "a block mapping at 3:1)",
            id="second-document",
        ),
        pytest.param(
            "a: 1\nb: \x07\n",
            "f.yaml:2:4: unacceptable character #x0007: special characters are not allowed",
            id="control-character",
        ),
        pytest.param("*nothing\n", "f.yaml:1:1: found undefined alias 'nothing'", id="alias"),
    ],
)
def test_yaml_errors_are_file_line_column_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, expected: str
) -> None:
    """Regression, issue 17 item 13: a YAML error was one long line with pyyaml's own marks
    (`... is not valid YAML: while parsing ... in "<unicode string>", line 1, column 7: ...`)."""
    monkeypatch.chdir(tmp_path)
    Path("f.yaml").write_text(text, encoding="utf-8")

    with pytest.raises(manifests.ManifestError) as raised:
        manifests.read_documents("f.yaml")

    assert raised.value.lines == (expected,)


# --- metadata.name (issue 17, item 13) -----------------------------------------------------------


def test_a_set_name_too_long_on_its_own_is_reported_under_metadata_name() -> None:
    """Regression, issue 17 item 13: a long set name was reported once per role, under
    `spec.roles[i].name`, as if the role names were at fault."""
    name = "n" * 40  # the budget leaves 38 characters for set and role name together

    problems = manifests.check(make_set(name=name)).problems

    assert problems == (
        "metadata.name: is too long: 40 characters, at most 31 with these roles, slices and"
        " replicas (the generated names would have 72 characters, over the DNS-1035 limit of"
        " 63): shorten the set's name",
    )


def test_a_name_too_long_gives_one_limit() -> None:
    """Regression (issue 35 item 8): a 60-character name gave two limits in one line, 31 for
    the set name and upstream's 38 for set and role names together."""
    [problem] = manifests.check(make_set(name="n" * 60)).problems
    assert "at most 31" in problem
    assert "38" not in problem and "combined limit" not in problem


def test_a_name_budget_broken_by_a_long_role_name_stays_under_the_role() -> None:
    problems = manifests.check(make_set(roles=("prefill", "d" * 40))).problems

    assert len(problems) == 1
    assert problems[0].startswith("spec.roles[1].name: the generated names")


def test_a_name_budget_broken_by_both_names_together_stays_under_the_role() -> None:
    # 20 + 20 > 38, while each alone leaves room for the other.
    problems = manifests.check(make_set(name="n" * 20, roles=("p" * 20, "decode"))).problems

    assert [problem.partition(":")[0] for problem in problems] == ["spec.roles[0].name"]


def test_a_name_over_the_api_servers_limit_says_so_in_its_words() -> None:
    name = "n" * (naming.DNS1123_SUBDOMAIN_MAX + 1)

    problems = manifests.check(make_set(name=name)).problems

    assert problems[0] == "metadata.name: must be no more than 253 characters"
    assert problems[1].startswith("metadata.name: is too long: 254 characters, at most 31 ")
    assert len(problems) == 2


@pytest.mark.parametrize("name", ["LLM", "llm_1", "-llm", "llm."])
def test_a_name_that_is_no_dns_subdomain_is_refused_in_the_servers_words(name: str) -> None:
    problems = manifests.check(make_set(name=name)).problems

    assert problems == (
        "metadata.name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
        "characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
        "'example.com', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
    )


# --- counts --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("count", "expected"), [(0, "0 passes"), (1, "1 pass"), (2, "2 passes")], ids=str
)
def test_counted_is_singular_for_one(count: int, expected: str) -> None:
    assert manifests.counted(count, "pass", "passes") == expected


def test_a_list_bound_of_one_item_is_singular(monkeypatch: pytest.MonkeyPatch) -> None:
    document = make_set()
    crd = crdgen.build_crds()[crdgen.DS_FILE]
    schema = copy.deepcopy(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    schema["properties"]["spec"]["properties"]["roles"]["maxItems"] = 1
    validator = jsonschema.Draft4Validator(schema)
    monkeypatch.setattr(manifests, "_schema_validator", lambda: validator)

    assert manifests.check(document).problems == ("spec.roles: must have at most 1 item, has 2",)
