"""`initial-replicas` is read exactly as upstream reads it (`hooks.core.stock.initial_of`).

Upstream's `GetInitialReplicas` parses the annotation with Go's `strconv.ParseInt(value, 10, 32)`
and counts the LWS's replicas when that fails. `go_parse_int32` below models that call the way
Go's code walks the text, character by character, and the property compares the two over drawn
strings: ASCII and other Unicode digits, white space, underscores, signs, and numbers on both
sides of the int32 and int64 bounds.
"""

from __future__ import annotations

import dataclasses

from hypothesis import example, given
from hypothesis import strategies as st

from hooks import api
from hooks.core import records, stock
from tests import builders

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def go_parse_int32(text: str) -> int | None:
    """Go's `strconv.ParseInt(text, 10, 32)`: the value, or None for its syntax and range errors."""
    negative = text[:1] == "-"
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits:
        return None
    magnitude = 0
    for char in digits:
        if not "0" <= char <= "9":  # Go compares bytes: only ASCII digits
            return None
        magnitude = magnitude * 10 + ord(char) - ord("0")
    value = -magnitude if negative else magnitude
    return value if INT32_MIN <= value <= INT32_MAX else None


BASE: records.ObservedObject = builders.parse_children(
    builders.make_lws("prefill", revision="aaaaaaaa")
)[0]

BOUNDS = [
    bound + step for bound in (INT32_MIN, INT32_MAX, -(2**63), 2**63 - 1) for step in (-1, 0, 1)
]

numbers = st.builds(
    lambda sign, zeros, magnitude: sign + "0" * zeros + str(magnitude),
    st.sampled_from(["", "+", "-"]),
    st.integers(0, 3),
    st.one_of(st.integers(0, 2**70), st.sampled_from([abs(bound) for bound in BOUNDS])),
)
near_numbers = st.text(
    alphabet=st.sampled_from(
        [*"0123456789", "+", "-", " ", "\t", "\n", "_", ".", "x", "\u0663", "\uff13", "\U0001d7d7"]
    ),
    max_size=12,
)
other_digits = st.text(alphabet=st.characters(categories=["Nd"]), min_size=1, max_size=4)
annotations = st.one_of(numbers, near_numbers, other_digits, st.text(max_size=8))


@given(value=annotations, replicas=st.one_of(st.none(), st.integers(0, 1_000_000)))
@example(value="٣", replicas=4)
@example(value="3_0", replicas=4)
@example(value=" 3", replicas=4)
@example(value="+3", replicas=4)
@example(value="-1", replicas=4)
@example(value="9223372036854775808", replicas=4)
def test_initial_replicas_are_read_as_go_parses_them(value: str, replicas: int | None) -> None:
    lws = dataclasses.replace(
        BASE, annotations={api.ANNOTATION_INITIAL_REPLICAS: value}, spec_replicas=replicas
    )
    parsed = go_parse_int32(value)
    assert stock.initial_of(lws) == (lws.replicas if parsed is None else parsed)
