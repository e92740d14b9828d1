"""Property tests of the revision encoder over random pod templates.

Templates are generated from the committed type table itself, so every field the Go types know can
appear, with nulls, empty collections and awkward strings. Invalid input may only ever produce the
documented `EncodingError`; valid input always encodes, deterministically, to valid compact JSON,
whatever the key order of the input and whatever unknown keys it carries.
"""

from __future__ import annotations

import contextlib
import json
import random
import re
from importlib import resources
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from hooks.gocompat import gojson, gotext, revision

TABLE: dict[str, Any] = json.loads(
    resources.files("hooks.gocompat").joinpath(gojson.TABLE_RESOURCE).read_text(encoding="utf-8")
)
TYPES: dict[str, list[list[str]]] = TABLE["types"]
ROOT: str = TABLE["root"]
MAX_DEPTH = 7
REVISION_RE = re.compile("[0-9a-f]{8}")

_strings = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]) | st.sampled_from("<>&\u2028"),
    max_size=6,
)
_quantities = (
    st.from_regex(
        r"[+-]?[0-9]{1,4}(\.[0-9]{0,3})?(Ki|Mi|Gi|Ei|m|k|M|G|E|e-?[0-9]{1,2}|)", fullmatch=True
    )
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False, min_value=-1e30, max_value=1e30)
)
_times = st.datetimes().map(
    lambda moment: f"{moment.year:04d}-{moment:%m-%dT%H:%M:%S}.{moment.microsecond:06d}Z"
)
_json_scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | _strings
_any_json = st.recursive(
    _json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_strings, inner, max_size=3),
    max_leaves=8,
)
_INT_BOUNDS = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


def _fields(name: str) -> list[tuple[str, str]]:
    fields: list[tuple[str, str]] = []
    for json_name, expression, flags in TYPES[name]:
        if "inline" in flags.split(","):
            fields.extend(_fields(expression))
        else:
            fields.append((json_name, expression))
    return fields


def valid_value(expression: str, depth: int = 0) -> st.SearchStrategy[Any]:
    """Values a typed Go decode accepts for a type expression of the table."""
    if expression.startswith("*"):
        return st.none() | valid_value(expression[1:], depth)
    if expression.startswith("[]"):
        if depth >= MAX_DEPTH:
            return st.none() | st.just([])
        return st.none() | st.lists(valid_value(expression[2:], depth + 1), max_size=2)
    if expression.startswith("map[string]"):
        elem = valid_value(expression[len("map[string]") :], depth + 1)
        return st.none() | st.dictionaries(_strings, elem, max_size=3)
    simple: dict[str, st.SearchStrategy[Any]] = {
        "string": _strings,
        "bool": st.booleans(),
        "quantity": _quantities,
        "intorstring": st.integers(-(2**31), 2**31 - 1) | _strings,
        "time": _times,
        "fieldsv1": _any_json,
    }
    if expression in simple:
        return st.none() | simple[expression]
    if expression in _INT_BOUNDS:
        low, high = _INT_BOUNDS[expression]
        return st.none() | st.integers(low, high)
    if depth >= MAX_DEPTH:
        return st.none() | st.just({})
    optional = {key: valid_value(kind, depth + 1) for key, kind in _fields(expression)}
    return st.fixed_dictionaries({}, optional=optional)


def reorder(value: Any, rng: random.Random) -> Any:
    """The same JSON value with every object's keys in a shuffled order."""
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {key: reorder(value[key], rng) for key in keys}
    if isinstance(value, list):
        return [reorder(item, rng) for item in value]
    return value


def _encode(template: Any) -> bytes:
    return revision.encode_templates([("role", template)])


templates = valid_value(ROOT)


@given(template=templates)
def test_valid_templates_encode_deterministically_to_a_fixed_point(
    template: dict[str, Any],
) -> None:
    first = revision.encode_templates([("role", template)])
    assert first == revision.encode_templates([("role", template)])
    assert REVISION_RE.fullmatch(revision.compute_revision([("role", template)]))
    # The output is itself a valid typed document, already in canonical form.
    decoded = json.loads(first)
    assert [entry["name"] for entry in decoded] == ["role"]
    assert revision.encode_templates([("role", decoded[0]["template"])]) == first


@given(template=templates, seed=st.integers(0, 2**32 - 1))
def test_key_order_of_the_input_does_not_change_the_output(
    template: dict[str, Any], seed: int
) -> None:
    shuffled = reorder(template, random.Random(seed))
    assert _encode(shuffled) == _encode(template)


@given(template=templates, extra=st.dictionaries(st.text(max_size=5), _any_json, max_size=3))
def test_unknown_keys_do_not_change_the_output(
    template: dict[str, Any], extra: dict[str, Any]
) -> None:
    noisy = {f"x-{key}": value for key, value in extra.items()}  # no Go field has a dash
    noisy.update(template)
    assert _encode(noisy) == _encode(template)


@given(template=_any_json)
def test_arbitrary_json_either_encodes_or_raises_encoding_error(template: Any) -> None:
    with contextlib.suppress(gotext.EncodingError):
        revision.encode_templates([("role", template)])


@given(
    template=st.fixed_dictionaries(
        {},
        optional={
            "workerTemplate": st.fixed_dictionaries(
                {},
                optional={
                    "spec": st.dictionaries(
                        st.sampled_from(
                            [
                                "containers",
                                "volumes",
                                "hostNetwork",
                                "priority",
                                "nodeSelector",
                                "affinity",
                                "tolerations",
                                "hostname",
                                "overhead",
                            ]
                        ),
                        _any_json,
                        max_size=4,
                    )
                },
            ),
            "size": _any_json,
            "volumeClaimTemplates": _any_json,
        },
    )
)
def test_near_miss_templates_either_encode_or_raise_encoding_error(template: Any) -> None:
    try:
        result = revision.encode_templates([("role", template)])
    except gotext.EncodingError:
        return
    json.loads(result)


@given(template=templates, wrong=st.sampled_from([[], {}, "true", 1, 1.5]))
def test_wrong_json_type_for_a_bool_raises_encoding_error(
    template: dict[str, Any], wrong: Any
) -> None:
    broken = {**template, "workerTemplate": {"spec": {"hostNetwork": wrong}}}
    try:
        revision.encode_templates([("role", broken)])
    except gotext.EncodingError as error:
        assert error.path.endswith("workerTemplate.spec.hostNetwork")
    else:
        raise AssertionError("a non-bool hostNetwork must not encode")
