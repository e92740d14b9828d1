"""resource.Quantity decoding and canonical text, checked against upstream's own outputs."""

from __future__ import annotations

from typing import Any

import pytest

from hooks.gocompat import quantity
from tests.shared import golden_params


def _roundtrip(json_text: str) -> str:
    return quantity.marshal_json(quantity.unmarshal_json(json_text))


@pytest.mark.parametrize(
    "vector", golden_params("quantity_vectors.json", lambda _, vector: repr(vector["json_input"]))
)
def test_golden_vector_matches_upstream(vector: dict[str, Any]) -> None:
    if vector["error"] is not None:
        with pytest.raises(quantity.QuantityError) as caught:
            _roundtrip(vector["json_input"])
        assert str(caught.value) == vector["error"]
    else:
        assert _roundtrip(vector["json_input"]) == vector["output"]


# Our own table: (JSON text, JSON text Go writes). Derived by hand from upstream's rules.
OWN_CASES = [
    ('"1"', '"1"'),
    ('"0"', '"0"'),
    ("null", '"0"'),
    ('"100Mi"', '"100Mi"'),  # 100 & 7 != 0: kept
    ('"96Mi"', '"96Mi"'),  # 96 is a multiple of 8: canonical, same text
    ('"2048Mi"', '"2Gi"'),
    ('"1536Mi"', '"1536Mi"'),
    ('"0.25"', '"250m"'),
    ('"1500m"', '"1500m"'),
    ('"2000m"', '"2"'),
    ('"123e3"', '"123e3"'),
    ('"1200e3"', '"1200e3"'),  # digits end in 00, not 000: kept
    ('"12000e3"', '"12e6"'),
    ('"1Ei"', '"1Ei"'),  # the big-decimal path: 2^60 is a whole power of 1024
    ('"8Ei"', '"9223372036854775807"'),  # capped at 2^63-1
    ('"-8Ei"', '"-9223372036854775807"'),
    ('"0.5Ei"', '"512Pi"'),
    ('"1000000000000000000000"', '"1"'),  # 22 digits: big path; 10^21 has no SI suffix (quirk)
    ('"1000E"', '"1"'),  # exponent 21 has no SI suffix: dropped (upstream quirk)
    ('"1e22"', '"10e21"'),
    ('"1e18"', '"1e18"'),  # kept: scale 18 is a multiple of 3
    ('"1.0e18"', '"1e18"'),
    ('"1.0E"', '"1E"'),
    ('" 1Gi\\u3000"', None),  # escapes are not decoded: the backslash fails
    ("1.5", '"1500m"'),
    ("-0", '"0"'),
    ("true", None),
    ("{}", None),
    ("[1]", None),
    ('"-.e-10"', None),
    ('"1e9223372036854775808"', None),  # exponent overflows int64: suffix error
    ('"1.5e-2147483648"', '"150e2147483646"'),  # 32-bit scale wraps on the small path
    ('"1000e2147483647"', '"1e-2147483646"'),  # 32-bit exponent wraps while canonicalising
    ('"1e-1000000000"', '"1e-9"'),  # rounded up without building 10**1000000000
    ('"123456789012345678901234567890e-1000000000"', '"1e-9"'),
    ('"123456789012345678901234567890n"', '"123456789012345678901234567890n"'),
    ('"1234567890123456789012345678901n"', '"1234567890123456789012345678901n"'),
    ('"12345678901234567890.5n"', '"12345678901234567891n"'),
]


@pytest.mark.parametrize(("json_text", "expected"), OWN_CASES, ids=[c[0] for c in OWN_CASES])
def test_own_cases(json_text: str, expected: str | None) -> None:
    if expected is None:
        with pytest.raises(quantity.QuantityError):
            _roundtrip(json_text)
    else:
        assert _roundtrip(json_text) == expected


def test_error_messages_are_upstreams() -> None:
    with pytest.raises(quantity.QuantityError, match=r"must match the regular expression"):
        quantity.parse_quantity("1Mb")
    with pytest.raises(quantity.QuantityError, match=r"^unable to parse quantity's suffix$"):
        quantity.parse_quantity("1Ki3")
    with pytest.raises(quantity.QuantityError, match=r"^unable to parse numeric part"):
        quantity.parse_quantity("+.e-10")
    with pytest.raises(quantity.QuantityError, match=r"must match"):
        quantity.parse_quantity("")


def test_trim_space_follows_go_not_python() -> None:
    # U+001C is white space to Python's str.isspace but not to Go's unicode.IsSpace.
    assert quantity.go_trim_space("\x1c1\x1c") == "\x1c1\x1c"
    assert quantity.go_trim_space("\xa0\u30001Gi\x85 ") == "1Gi"
    with pytest.raises(quantity.QuantityError):
        quantity.unmarshal_json('"\x1c1"')
    assert _roundtrip('"\u00a01Gi"') == '"1Gi"'


def test_kept_spelling_is_the_trimmed_text() -> None:
    parsed = quantity.unmarshal_json('"  +5.Gi "')
    assert parsed.text == "+5.Gi"
    assert quantity.canonical_string(parsed) == "+5.Gi"


def test_huge_exponent_on_the_big_path_is_refused_not_hung() -> None:
    # 20 digits force the big-decimal path; upstream's 32-bit scale would wrap here.
    with pytest.raises(quantity.QuantityError, match="outside the range"):
        quantity.parse_quantity("12345678901234567890e2147483647")


def test_zero_quantity_from_null_writes_zero() -> None:
    assert quantity.unmarshal_json("null") == quantity.ZERO
    assert quantity.marshal_json(quantity.ZERO) == '"0"'


def test_quantities_longer_than_pythons_int_conversion_limit_work() -> None:
    # Python refuses int<->str conversions past 4300 digits by default; upstream has no limit.
    assert _roundtrip('"1' + "0" * 5000 + '"') == '"100"'  # 10^5000: no SI suffix (quirk)
    long_digits = "7" * 5000
    assert _roundtrip(f'"{long_digits}"') == f'"{long_digits}"'
    assert _roundtrip('"0.' + "0" * 5000 + '1"') == '"1n"'
    assert _roundtrip('"1e' + "0" * 5000 + '3"') == '"1e' + "0" * 5000 + '3"'  # kept spelling


MILLION = 1_000_000

# Valid million-digit quantities (the CRD's pattern admits any length; upstream has no bound):
# the value is exact, and the work is linear (`bench/server_limits.py --cases quantity` times it;
# once 23 s).
LONG_CASES = [
    ('"' + "1" * MILLION + '"', '"' + "1" * MILLION + '"'),
    ('"1' + "0" * (MILLION - 1) + '"', '"1"'),  # 10^999999: exponent without an SI suffix
    ('"1.5' + "0" * MILLION + 'Gi"', '"1536Mi"'),
    ('"0.' + "0" * MILLION + '1"', '"1n"'),
    ('"0.' + "9" * MILLION + 'Ki"', '"1Ki"'),  # rounded up at the nano unit: 1024 exactly
    ('"' + "1" * MILLION + 'Ki"', '"9223372036854775807"'),  # capped at 2^63 - 1
    ('"-' + "9" * MILLION + '.5n"', '"-10"'),  # rounded away from zero: -10^999991
    ('"12345' + "0" * MILLION + 'm"', '"123450"'),  # 12345e999997 = 123450e999996, no suffix
]


@pytest.mark.parametrize(
    ("json_text", "expected"), LONG_CASES, ids=[f"case{i}" for i in range(len(LONG_CASES))]
)
def test_million_digit_quantities_are_exact(json_text: str, expected: str) -> None:
    assert _roundtrip(json_text) == expected
