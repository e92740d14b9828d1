"""How a slice's LWS are counted (`hooks.core.stock`): the `initial-replicas` annotation read as
upstream reads it (docs/rollout.md, Words)."""

from __future__ import annotations

import pytest

from hooks.core import stock
from tests import builders

REPLICAS = 4
"""The LWS's `spec.replicas`: what an annotation upstream refuses counts as."""


def initial(value: str) -> int:
    (lws,) = builders.parse_children(
        builders.make_lws("prefill", revision="aaaaaaaa", replicas=REPLICAS, initial=value)
    )
    return stock.initial_of(lws)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("5", 5),
        ("0", 0),
        ("007", 7),
        ("+3", 3),  # Go's ParseInt takes a leading plus
        ("-1", -1),  # and a minus: upstream sums a negative snapshot as it is
        ("-0", 0),
        ("2147483647", 2**31 - 1),
        ("-2147483648", -(2**31)),
        ("0" * 5000 + "9", 9),  # leading zeros, however many
    ],
)
def test_an_annotation_upstream_parses_is_the_initial_count(value: str, expected: int) -> None:
    assert initial(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("", id="empty"),
        pytest.param(" 3", id="leading-space"),
        pytest.param("3 ", id="trailing-space"),
        pytest.param("3\n", id="trailing-newline"),
        pytest.param("3_0", id="underscore"),
        pytest.param("\u0663", id="arabic-indic-digit"),
        pytest.param("\uff13", id="fullwidth-digit"),
        pytest.param("+", id="sign-alone"),
        pytest.param("+-3", id="two-signs"),
        pytest.param("0x10", id="hex"),
        pytest.param("3.0", id="fraction"),
        pytest.param("1e3", id="exponent"),
        pytest.param("many", id="word"),
        pytest.param("2147483648", id="above-int32"),
        pytest.param("-2147483649", id="below-int32"),
        pytest.param("9223372036854775808", id="above-int64"),
        pytest.param("9" * 5000, id="over-int-digit-limit"),
    ],
)
def test_an_annotation_upstream_refuses_counts_the_current_replicas(value: str) -> None:
    assert initial(value) == REPLICAS


def test_without_the_annotation_the_current_replicas_count() -> None:
    (lws,) = builders.parse_children(
        builders.make_lws("decode", revision="aaaaaaaa", replicas=None)
    )
    assert stock.initial_of(lws) == 1  # the LWS default for an unset spec.replicas
