"""The revision hash must equal upstream's byte for byte: Go's typed decode and encoding/json."""

from __future__ import annotations

import copy
import hashlib
import json
from importlib import resources
from typing import Any, Final

import pytest

from hooks import api
from hooks.gocompat import gojson, gotext, revision
from tests.shared import by_name, golden_params

VECTORS: Final = golden_params("revision_vectors.json", by_name)


def _roles(stored: dict[str, Any]) -> list[tuple[str, api.JsonObject]]:
    return [(r["name"], r["spec"]["leaderWorkerTemplate"]) for r in stored["spec"]["roles"]]


def _first_difference(got: bytes, want: bytes) -> str:
    """Where two byte strings part, with some context either side."""
    offset = next(
        (i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b),
        min(len(got), len(want)),
    )
    start = max(0, offset - 80)
    return (
        f"first difference at byte {offset} (got {len(got)} bytes, want {len(want)})\n"
        f"  got:  ...{got[start : offset + 80]!r}\n"
        f"  want: ...{want[start : offset + 80]!r}"
    )


def _template(**spec: Any) -> dict[str, Any]:
    """A leaderWorkerTemplate with one container and the given pod spec additions."""
    pod_spec: dict[str, Any] = {"containers": [{"name": "c", "image": "nginx"}], **spec}
    return {"workerTemplate": {"spec": pod_spec}}


def _encode(template: Any, name: str = "r") -> str:
    return revision.encode_templates([(name, template)]).decode("utf-8")


def _container_json(template: dict[str, Any]) -> str:
    """The encoded first container of the worker template."""
    text = _encode(template)
    start = text.index('"containers":[') + len('"containers":[')
    depth = 0
    for index in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[index], 0)
        if depth == 0:
            return text[start : index + 1]
    raise AssertionError("unbalanced output")


# --- golden vectors --------------------------------------------------------------------------


@pytest.mark.parametrize("vector", VECTORS)
def test_golden_vector_bytes_and_revision(vector: dict[str, Any]) -> None:
    roles = _roles(vector["stored"])
    got = revision.encode_templates(roles)
    want = vector["hashed_json"].encode("utf-8")
    assert got == want, _first_difference(got, want)
    assert revision.compute_revision(roles) == vector["revision"]


@pytest.mark.parametrize("vector", VECTORS)
def test_golden_vector_input_is_not_mutated(vector: dict[str, Any]) -> None:
    stored = vector["stored"]
    before = copy.deepcopy(stored)
    revision.compute_revision(_roles(stored))
    assert stored == before


# --- the wrapper and the hash ----------------------------------------------------------------


def test_revision_is_first_eight_hex_of_sha256_of_the_bytes() -> None:
    roles = [("prefill", _template()), ("decode", _template())]
    digest = hashlib.sha256(revision.encode_templates(roles)).hexdigest()
    assert revision.compute_revision(roles) == digest[:8]


def test_no_roles_encode_as_an_empty_array() -> None:
    assert revision.encode_templates([]) == b"[]"


def test_role_order_changes_the_revision() -> None:
    a, b = ("a", _template()), ("b", _template(hostNetwork=True))
    assert revision.compute_revision([a, b]) != revision.compute_revision([b, a])


def test_minimal_template_writes_required_and_struct_fields() -> None:
    assert _encode({"workerTemplate": {}}) == (
        '[{"name":"r","template":{"workerTemplate":{"metadata":{},"spec":{"containers":null}}}}]'
    )


def test_absent_template_is_the_zero_template() -> None:
    assert revision.encode_templates([("r", None)]) == revision.encode_templates([("r", {})])  # type: ignore[list-item]


# --- decode semantics ------------------------------------------------------------------------


def test_unknown_fields_are_dropped() -> None:
    plain = _template()
    noisy = copy.deepcopy(plain)
    noisy["extra"] = {"x": 1}
    noisy["workerTemplate"]["spec"]["containers"][0]["bogus"] = [1, 2]
    assert _encode(noisy) == _encode(plain)


def test_keys_match_case_sensitively() -> None:
    shouting = _template()
    shouting["workerTemplate"]["spec"]["HostNetwork"] = True
    assert _encode(shouting) == _encode(_template())


def test_null_equals_absent() -> None:
    with_nulls = _template(volumes=None, nodeSelector=None, hostNetwork=None)
    with_nulls["workerTemplate"]["metadata"] = None
    assert _encode(with_nulls) == _encode(_template())


def test_null_elements_become_zero_values() -> None:
    template = _template()
    template["workerTemplate"]["metadata"] = {"labels": {"a": None}, "finalizers": [None]}
    template["workerTemplate"]["spec"]["containers"].append(None)
    text = _encode(template)
    assert '"metadata":{"labels":{"a":""},"finalizers":[""]}' in text
    assert ',{"name":"","resources":{}}]' in text


def test_null_quantity_in_a_resource_list_is_zero() -> None:
    container = {"name": "c", "resources": {"limits": {"cpu": None}}}
    template = {"workerTemplate": {"spec": {"containers": [container]}}}
    assert '"resources":{"limits":{"cpu":"0"}}' in _encode(template)


def test_omitempty_drops_empty_collections_but_keeps_struct_values() -> None:
    container = {"name": "c", "command": [], "env": [], "resources": {"limits": {}}}
    template = {"workerTemplate": {"spec": {"containers": [container], "nodeSelector": {}}}}
    assert _container_json(template) == '{"name":"c","resources":{}}'
    assert '"nodeSelector"' not in _encode(template)


def test_field_without_omitempty_writes_null_or_empty() -> None:
    cephfs = {"name": "v", "cephfs": {}}
    text = _encode(_template(volumes=[cephfs]))
    assert '"cephfs":{"monitors":null}' in text
    cephfs_empty = {"name": "v", "cephfs": {"monitors": []}}
    assert '"cephfs":{"monitors":[]}' in _encode(_template(volumes=[cephfs_empty]))


def test_non_nil_pointer_to_zero_is_written() -> None:
    template = _template(terminationGracePeriodSeconds=0, hostNetwork=False)
    text = _encode(template)
    assert '"terminationGracePeriodSeconds":0' in text
    assert "hostNetwork" not in text


def test_fields_follow_go_declaration_order_not_input_order() -> None:
    container = {"resources": {}, "image": "i", "name": "c", "args": ["x"], "command": ["y"]}
    template = {"workerTemplate": {"spec": {"containers": [container]}}}
    expected = '{"name":"c","image":"i","command":["y"],"args":["x"],"resources":{}}'
    assert _container_json(template) == expected


def test_embedded_structs_are_promoted_in_place() -> None:
    env_from = {"configMapRef": {"name": "cm", "optional": True}, "prefix": "P_"}
    container = {"name": "c", "envFrom": [env_from]}
    text = _container_json({"workerTemplate": {"spec": {"containers": [container]}}})
    assert '"envFrom":[{"prefix":"P_","configMapRef":{"name":"cm","optional":true}}]' in text


def test_persistent_volume_claim_writes_type_meta_and_empty_status() -> None:
    claim = {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "metadata": {"name": "d"}}
    text = _encode({"workerTemplate": {}, "volumeClaimTemplates": [claim]})
    assert (
        '"volumeClaimTemplates":[{"kind":"PersistentVolumeClaim","apiVersion":"v1",'
        '"metadata":{"name":"d"},"spec":{"resources":{}},"status":{}}]'
    ) in text


def test_map_keys_are_sorted_by_bytes() -> None:
    template = {"workerTemplate": {"metadata": {"labels": {"b": "1", "B": "2", "a": "3", "é": ""}}}}
    assert '"labels":{"B":"2","a":"3","b":"1","é":""}' in _encode(template)


# --- scalar encoding -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("<a&b>", r'"\u003ca\u0026b\u003e"'),
        ("\u2028\u2029", r'"\u2028\u2029"'),
        ('q"\\', r'"q\"\\"'),
        ("\b\f\n\r\t", r'"\b\f\n\r\t"'),
        ("\x00\x01\x1f", r'"\u0000\u0001\u001f"'),
        ("\x7f", '"\x7f"'),
        ("日本 🚀 \xa0", '"日本 🚀 \xa0"'),
        ("\ud800x", '"\ufffdx"'),
    ],
    ids=[
        "html",
        "line-separators",
        "quote-backslash",
        "short-escapes",
        "controls",
        "del",
        "utf8",
        "lone-surrogate",
    ],
)
def test_strings_are_escaped_like_go(value: str, expected: str) -> None:
    assert gotext.go_quote(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0.5, "0.5"),
        (1000.0, "1000"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (1.5e-7, "1.5e-7"),
        (1e-6, "0.000001"),
        (1e-100, "1e-100"),
        (-2.5e30, "-2.5e+30"),
        (123456789.125, "123456789.125"),
        (-0.0, "-0"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (5e-324, "5e-324"),
    ],
)
def test_floats_are_written_like_go(value: float, expected: str) -> None:
    assert gotext.go_float_text(value) == expected


def test_numeric_quantity_is_read_as_go_would_have_written_it() -> None:
    container = {"name": "c", "resources": {"limits": {"cpu": 0.5, "memory": 1e30, "x": 2}}}
    text = _container_json({"workerTemplate": {"spec": {"containers": [container]}}})
    assert '"limits":{"cpu":"500m","memory":"1e+30","x":"2"}' in text


def test_quantities_are_canonicalised() -> None:
    resources = {"limits": {"cpu": "1000m", "memory": "1024Mi"}, "requests": {"cpu": "0.5"}}
    container = {"name": "c", "resources": resources}
    text = _container_json({"workerTemplate": {"spec": {"containers": [container]}}})
    assert '"resources":{"limits":{"cpu":"1","memory":"1Gi"},"requests":{"cpu":"500m"}}' in text


def test_int_or_string_keeps_its_json_type() -> None:
    probe = {"httpGet": {"port": 8080}, "tcpSocket": {"port": "http"}}
    container = {"name": "c", "readinessProbe": probe, "livenessProbe": {"httpGet": {}}}
    text = _container_json({"workerTemplate": {"spec": {"containers": [container]}}})
    assert '"livenessProbe":{"httpGet":{"port":0}}' in text
    assert '"readinessProbe":{"httpGet":{"port":8080},"tcpSocket":{"port":"http"}}' in text


def test_integral_float_decodes_into_an_integer_field() -> None:
    assert _encode(_template(priority=5.0)) == _encode(_template(priority=5))


# --- metav1.Time -----------------------------------------------------------------------------


def test_zero_creation_timestamp_is_omitted() -> None:
    for stamp in (None, "0001-01-01T00:00:00Z", "0001-01-01T01:00:00+01:00"):
        template = {"workerTemplate": {"metadata": {"creationTimestamp": stamp}}}
        assert '"metadata":{}' in _encode(template)


def test_times_are_written_in_utc_to_the_second() -> None:
    meta = {"creationTimestamp": "2024-02-29T23:30:00.999+05:30", "name": "x"}
    text = _encode({"workerTemplate": {"metadata": meta}})
    assert '"metadata":{"name":"x","creationTimestamp":"2024-02-29T18:00:00Z"}' in text


def test_zero_time_without_omitzero_is_null() -> None:
    claim = {"status": {"conditions": [{"type": "Resizing", "status": "True"}]}}
    text = _encode({"workerTemplate": {}, "volumeClaimTemplates": [claim]})
    assert (
        '"conditions":[{"type":"Resizing","status":"True",'
        '"lastProbeTime":null,"lastTransitionTime":null}]'
    ) in text


@pytest.mark.parametrize(
    "stamp", ["2024-02-30T00:00:00Z", "2024-01-01 00:00:00Z", "2024-01-01T24:00:00Z", "yesterday"]
)
def test_bad_times_are_rejected(stamp: str) -> None:
    with pytest.raises(gotext.EncodingError, match="RFC 3339"):
        _encode({"workerTemplate": {"metadata": {"creationTimestamp": stamp}}})


# --- type errors -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "path"),
    [
        ({"workerTemplate": []}, "[0].spec.leaderWorkerTemplate.workerTemplate"),
        ({"size": "3"}, "[0].spec.leaderWorkerTemplate.size"),
        ({"size": 2**31}, "[0].spec.leaderWorkerTemplate.size"),
        ({"size": 1.5}, "[0].spec.leaderWorkerTemplate.size"),
        ({"size": True}, "[0].spec.leaderWorkerTemplate.size"),
        (
            {"workerTemplate": {"spec": {"containers": [{"name": 3}]}}},
            "[0].spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].name",
        ),
        (
            {
                "workerTemplate": {
                    "spec": {"containers": [{"resources": {"limits": {"cpu": "1x"}}}]}
                }
            },
            "[0].spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].resources.limits.cpu",
        ),
        (
            {"workerTemplate": {"metadata": {"labels": {"a": 1}}}},
            "[0].spec.leaderWorkerTemplate.workerTemplate.metadata.labels.a",
        ),
        (
            {"workerTemplate": {"spec": {"hostNetwork": "true"}}},
            "[0].spec.leaderWorkerTemplate.workerTemplate.spec.hostNetwork",
        ),
        (
            {"workerTemplate": {"spec": {"containers": {}}}},
            "[0].spec.leaderWorkerTemplate.workerTemplate.spec.containers",
        ),
    ],
    ids=[
        "struct-as-array",
        "string-for-int",
        "int32-overflow",
        "fraction",
        "bool-for-int",
        "int-for-string",
        "bad-quantity",
        "int-label",
        "string-for-bool",
        "object-for-list",
    ],
)
def test_type_errors_raise_with_a_path(template: dict[str, Any], path: str) -> None:
    with pytest.raises(gotext.EncodingError) as caught:
        revision.compute_revision([("r", template)])
    assert caught.value.path == path
    assert str(caught.value).startswith(path + ": ")


def test_non_string_role_name_is_rejected() -> None:
    with pytest.raises(gotext.EncodingError, match=r"^\[0\]\.name: "):
        revision.encode_templates([(7, {})])  # type: ignore[list-item]


def test_errors_on_omitted_empty_values_are_still_raised() -> None:
    with pytest.raises(gotext.EncodingError):
        _encode(_template(priorityClassName=0))


# --- the committed table ---------------------------------------------------------------------


def test_table_ships_with_the_package_and_names_its_root() -> None:
    text = (
        resources.files("hooks.gocompat")
        .joinpath(gojson.TABLE_RESOURCE)
        .read_text(encoding="utf-8")
    )
    table = json.loads(text)
    assert table["root"] == "leaderworkerset/v1.LeaderWorkerTemplate"
    assert table["pins"] == {"k8s.io/api": "v0.36.3", "k8s.io/apimachinery": "v0.36.3"}
    meta = dict((name, (kind, flags)) for name, kind, flags in table["types"]["meta/v1.ObjectMeta"])
    assert meta["creationTimestamp"] == ("time", "omitempty,omitzero")


def test_table_problems_are_reported_not_guessed() -> None:
    with pytest.raises(gojson.TableError, match="not supported"):
        gojson._compile({"root": "x/v1.T", "types": {"x/v1.T": [["a", "complex128", ""]]}})
    with pytest.raises(gojson.TableError, match="missing"):
        gojson._compile({"root": "x/v1.T", "types": {"x/v1.T": [["a", "x/v1.U", ""]]}})
    with pytest.raises(gojson.TableError, match="by value"):
        gojson._compile({"root": "x/v1.T", "types": {"x/v1.T": [["a", "x/v1.T", ""]]}})
