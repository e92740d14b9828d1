"""RFC 3339 timestamps of the API (`hooks.api.times`): one strict parser, Go's UTC text."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hooks.api import times


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1970-01-01T00:00:00Z", 0),
        ("2026-11-29T12:00:00Z", 1795953600),
        ("2024-02-29T23:59:59Z", 1709251199),
        ("2026-11-29T12:00:00.123456Z", 1795953600),
        ("2026-11-29T13:30:00+01:30", 1795953600),
        ("2026-11-29T10:00:00-02:00", 1795953600),
        ("0001-01-01T00:00:00Z", -62135596800),
        ("0000-01-01T00:00:00Z", -62167219200),
        ("9999-12-31T23:59:59-23:59", 253402387139),
    ],
)
def test_parse_reads_seconds_since_1970(text: str, seconds: int) -> None:
    instant = times.parse(text)
    assert instant is not None
    assert instant.seconds == seconds


def test_parse_keeps_the_nanoseconds() -> None:
    assert times.parse("2026-01-01T00:00:00.5Z") == times.Instant(1767225600, 500_000_000)
    assert times.parse("2026-01-01T00:00:00.1234567891Z") == times.Instant(1767225600, 123456789)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "yesterday",
        "2026-13-01T00:00:00Z",
        "2026-11-29 12:00:00Z",
        "2026-02-31T00:00:00Z",  # an impossible date (it once read as March 3)
        "2025-02-29T00:00:00Z",  # not a leap year
        "2026-01-01T24:00:00Z",
        "2026-01-01T00:60:00Z",
        "2026-01-01T00:00:60Z",  # a leap second: Go refuses it too
        "2026-01-01T00:00:00+99:99",
        "2026-01-01T00:00:00+24:00",
        "2026-01-01T00:00:00+01:60",
        "\uff12\uff10\uff12\uff16-01-01T00:00:00Z",  # full-width digits
        "2026-01-01t00:00:00z",
        "2026-01-01T00:00:00",
        "2026-01-01T00:00:00." + "1" * 40_000 + "Z",  # longer than any time anyone writes
    ],
)
def test_parse_refuses_what_is_not_a_time(text: str) -> None:
    assert times.parse(text) is None


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "1970-01-01T00:00:00Z"),
        (1795953600, "2026-11-29T12:00:00Z"),
        (-62167219200 - 3600, "-0001-12-31T23:00:00Z"),  # 0000-01-01T00:00:00+01:00
        (253402300800, "10000-01-01T00:00:00Z"),  # 9999-12-31T23:00:00-01:00
    ],
)
def test_format_utc_writes_what_go_writes(seconds: int, text: str) -> None:
    assert times.format_utc(seconds) == text


@given(
    st.datetimes(
        min_value=datetime(1000, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.timezones()
    )
)
def test_parse_agrees_with_the_standard_library(moment: datetime) -> None:
    offset = moment.utcoffset()
    assert offset is not None
    seconds = int(offset.total_seconds())
    if seconds % 60:
        return  # RFC 3339 offsets are whole minutes
    sign, minutes = ("-" if seconds < 0 else "+"), abs(seconds) // 60
    text = moment.strftime("%Y-%m-%dT%H:%M:%S") + f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"
    instant = times.parse(text)
    assert instant is not None
    expected = moment.replace(microsecond=0).astimezone(UTC)
    assert instant.seconds == int(expected.timestamp())
    assert times.format_utc(instant.seconds) == expected.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_seconds_between_drops_fractions_and_refuses_garbage() -> None:
    assert times.seconds_between("2026-01-01T00:00:00Z", "2026-01-01T00:01:00.9Z") == 60
    assert times.seconds_between("2026-02-31T00:00:00Z", "2026-03-03T00:00:00Z") is None
