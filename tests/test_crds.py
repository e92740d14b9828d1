"""The generated CRDs: drift against `crds/`, the embedded LWS schema, structure and size."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hooks import api
from hooks.api import rules
from hooks.cli import crdgen, lwsspec, manifests
from tests import cel_eval
from tests.shared import REPO_ROOT, by_name, golden_params, load_golden_or_empty, shared_path

JsonObject = dict[str, Any]

CRD_DIR = REPO_ROOT / "crds"
KUBECTL_ANNOTATION_LIMIT = 262144  # bytes: the total size of an object's annotations
REGENERATE = f"`{crdgen.REGENERATE_COMMAND}`"


ALL_FILES = [crdgen.DS_FILE, crdgen.SCALER_FILE, crdgen.REVISION_FILE]


@pytest.fixture(scope="module")
def crds() -> dict[str, JsonObject]:
    return crdgen.build_crds()


@pytest.fixture(scope="module")
def ds_root(crds: dict[str, JsonObject]) -> JsonObject:
    return _root(crds[crdgen.DS_FILE])


@pytest.fixture(scope="module")
def scaler_root(crds: dict[str, JsonObject]) -> JsonObject:
    return _root(crds[crdgen.SCALER_FILE])


def _root(crd: JsonObject) -> JsonObject:
    schema: JsonObject = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _role_spec(ds_root: JsonObject) -> JsonObject:
    role: JsonObject = ds_root["properties"]["spec"]["properties"]["roles"]["items"]
    spec: JsonObject = role["properties"]["spec"]
    return spec


def _nodes(schema: JsonObject, path: str = "") -> Iterator[tuple[str, JsonObject]]:
    """Every schema node with its path (`.name` for properties, `[]` for items, `{}` for maps)."""
    yield path, schema
    for name, child in schema.get("properties", {}).items():
        yield from _nodes(child, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from _nodes(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _nodes(schema["additionalProperties"], f"{path}{{}}")
    for key in ("anyOf", "allOf", "oneOf"):
        for index, child in enumerate(schema.get(key, [])):
            yield from _nodes(child, f"{path}<{key}{index}>")


def _defaults(schema: JsonObject) -> dict[str, Any]:
    return {path: node["default"] for path, node in _nodes(schema) if "default" in node}


def _upstream_lws_spec() -> JsonObject:
    crd = lwsspec.load_yaml(shared_path("reference/leaderworkersets-crd.yaml").read_text())
    return lwsspec.extract_lws_spec_schema(crd)


# --- drift ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL_FILES)
def test_committed_crd_equals_generated(name: str) -> None:
    path = CRD_DIR / name
    assert path.is_file(), f"crds/{name} is missing: run {REGENERATE}"
    assert path.read_text() == crdgen.render_crds()[name], f"crds/{name} is stale: run {REGENERATE}"


def test_check_crds_passes_on_the_committed_directory() -> None:
    assert crdgen.check_crds(CRD_DIR) == [], f"stale CRDs: run {REGENERATE}"


def test_check_crds_names_stale_and_missing_files(tmp_path: Path) -> None:
    crdgen.write_crds(tmp_path)
    assert crdgen.check_crds(tmp_path) == []
    (tmp_path / crdgen.DS_FILE).write_text("# edited by hand\n")
    (tmp_path / crdgen.SCALER_FILE).unlink()
    assert crdgen.check_crds(tmp_path) == [crdgen.DS_FILE, crdgen.SCALER_FILE]
    assert sorted(path.name for path in CRD_DIR.glob("*.yaml")) == sorted(ALL_FILES)


def test_defaults_are_applied_as_the_api_server_stores_objects() -> None:
    manifest = {
        "apiVersion": api.API_VERSION,
        "kind": api.DS_KIND,
        "metadata": {"name": "llm"},
        "spec": {
            "roles": [
                {
                    "name": "prefill",
                    "spec": {
                        "rolloutStrategy": {"rollingUpdateConfiguration": {"maxSurge": 2}},
                        "leaderWorkerTemplate": {
                            "workerTemplate": {
                                "spec": {
                                    "containers": [{"name": "c", "ports": [{"containerPort": 80}]}]
                                }
                            }
                        },
                    },
                }
            ]
        },
    }
    stored = manifests.apply_defaults(manifest)
    role = stored["spec"]["roles"][0]
    assert stored["spec"]["slices"] == 1
    assert role["spec"]["replicas"] == 1
    assert role["spec"]["startupPolicy"] == "LeaderCreated"
    assert role["spec"]["rolloutStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdateConfiguration": {"maxSurge": 2, "maxUnavailable": 1, "partition": 0},
    }
    template = role["spec"]["leaderWorkerTemplate"]
    assert template["size"] == 1
    assert template["restartPolicy"] == "RecreateGroupOnPodRestart"
    assert template["workerTemplate"]["spec"]["containers"][0]["ports"][0]["protocol"] == "TCP"
    assert "slices" not in manifest["spec"]


def test_rendering_is_deterministic_and_free_of_yaml_anchors() -> None:
    first, second = crdgen.render_crds(), crdgen.render_crds()
    assert first == second
    for text in first.values():
        assert "&id" not in text and "*id" not in text
        assert text.startswith("# Generated by hooks/cli/crdgen.py")


# --- the embedded LeaderWorkerSet spec ----------------------------------------------------------


def test_committed_lws_schema_is_the_stripped_lws_crd_spec() -> None:
    committed = (REPO_ROOT / "hooks" / lwsspec.LWS_SPEC_SCHEMA_FILE).read_text()
    expected = lwsspec.render_lws_spec_schema(_upstream_lws_spec())
    assert committed == expected, (
        "hooks/lws_spec_schema.json is stale: run `python -m hooks crds --import-lws "
        "../shared/reference/leaderworkersets-crd.yaml`"
    )


# The only keywords the role spec adds to the LWS spec schema: bounds the API server's CEL cost
# budget needs on the int-or-percent fields (tests/cluster/test_install.py has the real server
# accept the CRD), and a maximum length on every resource.Quantity string.
INT_OR_PERCENT_BOUNDS = {
    (".rolloutStrategy.rollingUpdateConfiguration.maxSurge", "maxLength"),
    (".rolloutStrategy.rollingUpdateConfiguration.maxUnavailable", "maxLength"),
}
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
QUANTITY_BOUNDS = {
    (path, "maxLength")
    for path, node in _nodes(lwsspec.load_lws_spec_schema())
    if node.get("pattern") == QUANTITY_PATTERN
}
ADDED_BOUNDS = INT_OR_PERCENT_BOUNDS | QUANTITY_BOUNDS


def _without_added_bounds(schema: JsonObject) -> JsonObject:
    copy: JsonObject = json.loads(json.dumps(schema))
    nodes = dict(_nodes(copy))
    for path, keyword in ADDED_BOUNDS:
        del nodes[path][keyword]
    return copy


def _keywords(schema: JsonObject) -> set[tuple[str, str]]:
    return {(path, key) for path, node in _nodes(schema) for key in node}


def test_role_spec_schema_is_the_lws_spec_schema_plus_bounds(ds_root: JsonObject) -> None:
    role_spec = dict(_role_spec(ds_root))
    assert role_spec.pop("description").startswith("Required. A full LeaderWorkerSet spec")
    lws_spec = lwsspec.load_lws_spec_schema()
    assert _keywords(role_spec) - _keywords(lws_spec) == ADDED_BOUNDS
    assert _without_added_bounds(role_spec) == lws_spec


def test_int_or_percent_and_quantity_fields_are_bounded(ds_root: JsonObject) -> None:
    nodes = dict(_nodes(_role_spec(ds_root)))
    for path, keyword in INT_OR_PERCENT_BOUNDS:
        assert nodes[path][keyword] == api.INT_OR_PERCENT_MAX_LENGTH
        assert nodes[path]["x-kubernetes-int-or-string"] is True
    assert len(QUANTITY_BOUNDS) == 38  # requests, limits, overhead, sizeLimit, divisor, ...
    for path, keyword in QUANTITY_BOUNDS:
        assert nodes[path][keyword] == api.QUANTITY_MAX_LENGTH
    limits = ".leaderWorkerTemplate.workerTemplate.spec.containers[].resources.limits{}"
    assert (limits, "maxLength") in QUANTITY_BOUNDS


def test_role_spec_schema_equals_the_lws_crd_and_upstream_embedding(ds_root: JsonObject) -> None:
    stripped = lwsspec.without_keyword(_without_added_bounds(_role_spec(ds_root)), "description")
    assert stripped == _upstream_lws_spec()
    upstream = lwsspec.load_yaml(
        shared_path("reference/upstream-disaggregatedsets-crd.yaml").read_text()
    )
    upstream_role = _root(upstream)["properties"]["spec"]["properties"]["roles"]["items"]
    assert stripped == lwsspec.without_keyword(upstream_role["properties"]["spec"], "description")


def test_every_lws_spec_default_is_kept(ds_root: JsonObject) -> None:
    role_defaults = _defaults(_role_spec(ds_root))
    assert len(role_defaults) >= 100
    assert role_defaults == _defaults(lwsspec.load_lws_spec_schema())
    assert role_defaults[".replicas"] == 1
    assert role_defaults[".startupPolicy"] == "LeaderCreated"
    assert role_defaults[".leaderWorkerTemplate.restartPolicy"] == "RecreateGroupOnPodRestart"
    assert role_defaults[".leaderWorkerTemplate.size"] == 1


def test_every_default_of_the_lws_crd_is_kept(ds_root: JsonObject) -> None:
    assert _defaults(_role_spec(ds_root)) == _defaults(_upstream_lws_spec())


def test_no_embedded_descriptions_but_our_own_remain(ds_root: JsonObject) -> None:
    described = [path for path, node in _nodes(_role_spec(ds_root)) if "description" in node]
    assert described == [""]
    spec = ds_root["properties"]["spec"]
    slices_doc = api.DisaggregatedSetSpec.model_fields["slices"].description
    assert spec["properties"]["slices"]["description"] == slices_doc


def test_without_keyword_keeps_data_and_property_names() -> None:
    schema = {
        "description": "gone",
        "properties": {"description": {"type": "string", "description": "gone"}},
        "default": {"description": "kept"},
    }
    assert lwsspec.without_keyword(schema, "description") == {
        "properties": {"description": {"type": "string"}},
        "default": {"description": "kept"},
    }


# --- structure ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL_FILES)
def test_every_node_is_typed(crds: dict[str, JsonObject], name: str) -> None:
    untyped = [
        path
        for path, node in _nodes(_root(crds[name]))
        if "type" not in node
        and not node.get("x-kubernetes-int-or-string")
        and not node.get("x-kubernetes-preserve-unknown-fields")
        and "<anyOf" not in path
    ]
    assert untyped == []


@pytest.mark.parametrize("name", ALL_FILES)
def test_structural_schema_shape(crds: dict[str, JsonObject], name: str) -> None:
    for path, node in _nodes(_root(crds[name])):
        if "anyOf" in node:
            assert node.get("x-kubernetes-int-or-string"), path
        if "properties" in node:
            assert node.get("type") == "object" and "additionalProperties" not in node, path
        if "items" in node:
            assert node.get("type") == "array", path
        assert "nullable" not in node and "$ref" not in node and "title" not in node, path


@pytest.mark.parametrize("name", [crdgen.DS_FILE, crdgen.SCALER_FILE])
def test_list_map_keys_are_required_or_defaulted(crds: dict[str, JsonObject], name: str) -> None:
    checked = 0
    for path, node in _nodes(_root(crds[name])):
        if node.get("x-kubernetes-list-type") != "map":
            continue
        items = node["items"]
        for key in node["x-kubernetes-list-map-keys"]:
            assert key in items.get("required", []) or "default" in items["properties"][key], (
                f"{path}: list-map key {key}"
            )
        checked += 1
    assert checked >= 1


def test_status_schemas_have_no_defaults(ds_root: JsonObject, scaler_root: JsonObject) -> None:
    for root in (ds_root, scaler_root):
        assert _defaults(root["properties"]["status"]) == {}


def test_the_grace_of_a_child_not_created_is_told_from_its_constant(ds_root: JsonObject) -> None:
    """The number lives once (`api.CREATION_GRACE_SECONDS`); the CRD's words are built from it."""
    creating = ds_root["properties"]["status"]["properties"]["creating"]["items"]
    since = creating["properties"]["since"]["description"]
    assert f"missing for {api.CREATION_GRACE_SECONDS} s makes the set Degraded" in since


def test_ds_crd_is_well_under_the_kubectl_annotation_limit(crds: dict[str, JsonObject]) -> None:
    """Client-side `kubectl apply` stores the object as compact JSON in an annotation.

    The limit applies to that JSON, not to the indented YAML text (which is about three times
    larger because of the deep nesting); upstream's 1.5 MB CRD does not fit, ours must.
    """
    for crd in crds.values():
        size = len(json.dumps(crd, separators=(",", ":")).encode())
        assert size < 0.7 * KUBECTL_ANNOTATION_LIMIT


# --- names, versions, columns, subresources ---------------------------------------------------


def test_ds_names_and_version(crds: dict[str, JsonObject]) -> None:
    crd = crds[crdgen.DS_FILE]
    assert crd["metadata"]["name"] == "disaggregatedsets.disaggregatedset.x-k8s.io"
    assert crd["spec"]["group"] == "disaggregatedset.x-k8s.io"
    assert crd["spec"]["scope"] == "Namespaced"
    assert crd["spec"]["names"] == {
        "kind": "DisaggregatedSet",
        "listKind": "DisaggregatedSetList",
        "plural": "disaggregatedsets",
        "singular": "disaggregatedset",
        # Not `ds`, which is DaemonSet's.
        "shortNames": ["dset"],
    }
    [version] = crd["spec"]["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1", True, True)
    assert version["subresources"] == {"status": {}}
    columns = [
        (c["name"], c["jsonPath"], c["type"], c.get("priority", 0))
        for c in version["additionalPrinterColumns"]
    ]
    assert columns == [
        ("Slices", ".spec.slices", "integer", 0),
        ("Ready", ".status.ready", "string", 0),
        ("Revision", ".status.revision", "string", 0),
        ("Available", '.status.conditions[?(@.type=="Available")].status', "string", 0),
        ("Rollout", '.status.conditions[?(@.type=="Progressing")].reason', "string", 0),
        ("Degraded", ".status.degraded", "string", 0),
        ("Generation", ".metadata.generation", "integer", 0),
        ("Observed", ".status.observedGeneration", "integer", 0),
        ("Age", ".metadata.creationTimestamp", "date", 0),
        ("Roles", ".status.readyByRole", "string", 1),
    ]


def test_scaler_names_columns_and_scale_subresource(crds: dict[str, JsonObject]) -> None:
    crd = crds[crdgen.SCALER_FILE]
    assert crd["metadata"]["name"] == "disaggregatedsetrolescalers.disaggregatedset.x-k8s.io"
    assert crd["spec"]["names"]["kind"] == "DisaggregatedSetRoleScaler"
    assert crd["spec"]["names"]["plural"] == "disaggregatedsetrolescalers"
    assert crd["spec"]["names"]["shortNames"] == ["dsrs"]
    [version] = crd["spec"]["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1", True, True)
    assert version["subresources"] == {
        "status": {},
        "scale": {
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector",
        },
    }
    assert [(c["name"], c["jsonPath"]) for c in version["additionalPrinterColumns"]] == [
        ("Desired", ".spec.replicas"),
        ("Current", ".status.replicas"),
        ("Age", ".metadata.creationTimestamp"),
    ]


def test_revision_names_columns_and_fields(crds: dict[str, JsonObject]) -> None:
    """A record keeps its fields at the top level (no spec, no status, no subresource), and
    `kubectl get disaggregatedsetrevisions` lists a history without the plugin."""
    crd = crds[crdgen.REVISION_FILE]
    assert crd["metadata"]["name"] == "disaggregatedsetrevisions.disaggregatedset.x-k8s.io"
    names = crd["spec"]["names"]
    assert (names["kind"], names["plural"], names["shortNames"]) == (
        "DisaggregatedSetRevision",
        "disaggregatedsetrevisions",
        ["dsrev"],
    )
    [version] = crd["spec"]["versions"]
    assert "subresources" not in version
    assert [(c["name"], c["jsonPath"], c["type"]) for c in version["additionalPrinterColumns"]] == [
        ("Revision", ".revision", "integer"),
        ("Hash", ".metadata.labels.disaggregatedset\\.x-k8s\\.io/revision", "string"),
        ("Change-Cause", ".metadata.annotations.kubernetes\\.io/change-cause", "string"),
        ("Age", ".metadata.creationTimestamp", "date"),
    ]
    root = _root(crd)
    assert root["required"] == ["firstRevision", "revision"]  # and roles in one form: below
    for field in ("revision", "firstRevision", "completedAs"):
        number = root["properties"][field]
        assert (number["minimum"], number["maximum"], number["format"]) == (
            1,
            api.MAX_HISTORY_NUMBER,
            "int64",
        )
    assert "default" not in root["properties"]["completedAs"]


def test_recorded_roles_are_stored_as_written_and_immutable(crds: dict[str, JsonObject]) -> None:
    """No pruning and no default inside a recorded role: a default the API server added when it
    reads the record back would change what the roles hash to. Only a role's name is checked,
    once each (Metacontroller merges a list of named objects by name, which would fold two roles
    of one name into one). The roles, in their order, and the number a record was created with
    never change."""
    root = _root(crds[crdgen.REVISION_FILE])
    roles = root["properties"]["roles"]
    assert roles["items"]["x-kubernetes-preserve-unknown-fields"] is True
    assert roles["items"]["required"] == ["name"] and list(roles["items"]["properties"]) == ["name"]
    assert "x-kubernetes-list-type" not in roles  # atomic: the order is part of the roles
    assert (roles["minItems"], roles["maxItems"]) == (api.MIN_ROLES, api.MAX_ROLES)
    assert _defaults(roles) == {}
    attached = {
        field: [entry["rule"] for entry in root["properties"][field]["x-kubernetes-validations"]]
        for field in ("roles", "packedRoles", "firstRevision")
    }
    assert attached == {
        "roles": [rules.RECORD_ROLES_IMMUTABLE.rule, rules.RECORD_ROLE_NAMES_UNIQUE.rule],
        "packedRoles": ["self == oldSelf"],
        "firstRevision": ["self == oldSelf"],
    }
    assert rules.RECORD_ROLES_IMMUTABLE.rule == "self == oldSelf"
    assert [entry["rule"] for entry in root["x-kubernetes-validations"]] == [
        "has(self.packedRoles) != has(self.roles)",
        "has(self.packedRoles) == has(oldSelf.packedRoles)",
    ]


def test_packed_roles_are_one_string_within_the_annotations_bound(
    crds: dict[str, JsonObject],
) -> None:
    """The API server refuses a longer one, which could not fit the record's annotations with
    Metacontroller's last-applied copy (`hooks.core.compact`)."""
    packed = _root(crds[crdgen.REVISION_FILE])["properties"]["packedRoles"]
    assert (packed["type"], packed["maxLength"]) == ("string", api.PACKED_ROLES_MAX_LENGTH)


def test_scaler_spec_replicas_is_required_with_default_zero(scaler_root: JsonObject) -> None:
    spec = scaler_root["properties"]["spec"]
    assert spec["required"] == ["replicas"]
    replicas = spec["properties"]["replicas"]
    assert (replicas["type"], replicas["format"]) == ("integer", "int32")
    assert (replicas["default"], replicas["minimum"]) == (0, 0)


def test_ds_spec_fields(ds_root: JsonObject) -> None:
    assert ds_root["required"] == ["spec"]
    spec = ds_root["properties"]["spec"]
    assert spec["required"] == ["roles"]
    roles = spec["properties"]["roles"]
    assert (roles["minItems"], roles["maxItems"]) == (2, 10)
    assert roles["x-kubernetes-list-type"] == "map"
    assert roles["x-kubernetes-list-map-keys"] == ["name"]
    role = roles["items"]
    assert role["required"] == ["name", "spec"]
    assert role["properties"]["name"]["pattern"] == api.ROLE_NAME_PATTERN
    assert (role["properties"]["name"]["minLength"], role["properties"]["name"]["maxLength"]) == (
        1,
        63,
    )
    mode = role["properties"]["scaling"]["properties"]["mode"]
    assert (mode["default"], mode["enum"]) == ("Static", ["Static", "External"])
    assert set(role["properties"]["metadata"]["properties"]) == {
        "labels",
        "annotations",
        "name",
        "namespace",
        "finalizers",
    }
    slices = spec["properties"]["slices"]
    assert (slices["format"], slices["default"], slices["minimum"], slices["maximum"]) == (
        "int32",
        1,
        1,
        100,
    )
    placement_type = spec["properties"]["placementPolicy"]["properties"]["type"]
    assert placement_type["default"] == "None"
    assert placement_type["enum"] == ["None", "ExclusiveSlice", "ExclusiveTopology"]


def test_ds_status_fields(ds_root: JsonObject) -> None:
    status = ds_root["properties"]["status"]["properties"]
    assert set(status) == {
        "observedGeneration",
        "revision",
        "ready",
        "readyByRole",
        "degraded",
        "roleStatuses",
        "conditions",
        "rollout",
        "creating",
        "warnings",
        "history",
    }
    assert status["warnings"]["items"]["type"] == "string"
    assert status["warnings"]["maxItems"] == 10  # one per role at most
    assert status["history"]["type"] == "string"
    assert status["observedGeneration"]["format"] == "int64"
    rollout = status["rollout"]
    assert rollout["required"] == ["lastProgressTime", "revision"]
    assert rollout["properties"]["lastProgressTime"]["format"] == "date-time"
    assert status["conditions"]["x-kubernetes-list-map-keys"] == ["type"]
    assert status["roleStatuses"]["x-kubernetes-list-map-keys"] == ["name"]
    assert status["creating"]["x-kubernetes-list-map-keys"] == ["kind", "name"]
    assert status["creating"]["items"]["properties"]["since"]["format"] == "date-time"
    condition = status["conditions"]["items"]["properties"]
    assert condition["lastTransitionTime"]["format"] == "date-time"
    assert condition["status"]["enum"] == ["True", "False", "Unknown"]


# --- CEL rules in the schema ----------------------------------------------------------------------


def test_every_cel_rule_is_attached_once_where_the_table_says(ds_root: JsonObject) -> None:
    attached = [
        (path, entry["rule"])
        for path, node in _nodes(ds_root)
        for entry in node.get("x-kubernetes-validations", [])
    ]
    expected = {
        rules.RuleNode.ROOT: "",
        rules.RuleNode.SPEC: ".spec",
        rules.RuleNode.PLACEMENT_POLICY: ".spec.placementPolicy",
        rules.RuleNode.ROLE: ".spec.roles[]",
    }
    assert sorted(attached) == sorted((expected[r.path], r.rule) for r in rules.CEL_RULES)


def test_cel_rule_entries_carry_message_reason_and_an_existing_field_path(
    ds_root: JsonObject,
) -> None:
    for rule in rules.CEL_RULES:
        node = crdgen.schema_node(ds_root, rule.path)
        [entry] = [e for e in node["x-kubernetes-validations"] if e["rule"] == rule.rule]
        assert entry["message"] == rule.message
        assert entry["reason"] == rule.reason.value
        assert rule.field_path is not None and rule.field_path.startswith(".")
        target = node
        for part in rule.field_path[1:].split("."):
            target = target["properties"][part]
        assert entry["fieldPath"] == rule.field_path


def test_cel_rule_ids_are_unique_kebab_case() -> None:
    ids = [rule.id for rule in (*rules.CEL_RULES, *rules.RECORD_CEL_RULES)]
    ids.append(rules.ROLE_NAMES_UNIQUE.id)
    assert len(set(ids)) == len(ids)
    for rule_id in ids:
        assert rule_id == rule_id.lower() and " " not in rule_id and "_" not in rule_id


# --- compatibility with objects upstream stored ----------------------------------------------


_STORED = load_golden_or_empty("revision_vectors.json")


@pytest.mark.parametrize("vector", golden_params("revision_vectors.json", by_name))
def test_objects_stored_by_upstream_are_fixed_points(vector: JsonObject) -> None:
    """Upstream's API server stored these (pruned and defaulted by upstream's CRD): our CRD
    must neither prune a field from them nor add a default, or the revision hash would move."""
    harness = cel_eval.ds_harness()
    stored = vector["stored"]
    assert harness.pruned_paths(stored) == []
    assert harness.default(stored) == stored
    assert harness.schema_errors(stored) == []


def test_stored_vectors_are_available() -> None:
    if not _STORED:
        pytest.skip("../shared/golden/revision_vectors.json is not available in this checkout")
    assert len(_STORED) > 10
