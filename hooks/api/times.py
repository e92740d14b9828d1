"""Timestamps of the API: RFC 3339 read strictly, written in UTC to the second.

The one parser for every time the hooks read, as Go's RFC 3339 parser reads them:
`YYYY-MM-DDTHH:MM:SS[.fraction](Z|+hh:mm|-hh:mm)` in ASCII digits, years 0000 to 9999; impossible
dates (`2026-02-31`), leap seconds (`:60`) and offsets past 23:59 are refused. Years outside
`datetime`'s range are computed 400 years (one Gregorian cycle) away. Nothing here reads the clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

_SHAPE: Final = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})"
    r"(?:\.([0-9]+))?(Z|[+-][0-9]{2}:[0-9]{2})"
)
# Longer texts are not times a person or a controller writes (a fraction of thousands of digits).
MAX_LENGTH: Final = 64
_EPOCH: Final = datetime(1970, 1, 1)
_ERA_YEARS: Final = 400
_ERA_SECONDS: Final = 146097 * 86400  # the days of 400 Gregorian years
_SECOND: Final = timedelta(seconds=1)
_FIRST: Final = (datetime(1, 1, 1) - _EPOCH) // _SECOND
_LAST: Final = (datetime(9999, 12, 31, 23, 59, 59) - _EPOCH) // _SECOND


@dataclass(frozen=True, slots=True, order=True)
class Instant:
    """A point in time: whole seconds since 1970-01-01T00:00:00Z and the nanoseconds after."""

    seconds: int
    nanos: int = 0


def parse(text: str) -> Instant | None:
    """The instant an RFC 3339 text names, or None when it is not one (see the module)."""
    match = _SHAPE.fullmatch(text) if len(text) <= MAX_LENGTH else None
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    eras = 1 if year < 1 else 0  # year 0 is computed 400 years later
    try:
        local = datetime(year + eras * _ERA_YEARS, month, day, hour, minute, second)
    except ValueError:
        return None
    zone = match.group(8)
    offset = 0
    if zone != "Z":
        zone_hour, zone_minute = int(zone[1:3]), int(zone[4:6])
        if zone_hour > 23 or zone_minute > 59:
            return None
        offset = (zone_hour * 60 + zone_minute) * 60 * (-1 if zone[0] == "-" else 1)
    seconds = (local - _EPOCH) // _SECOND - eras * _ERA_SECONDS - offset
    nanos = int(((match.group(7) or "") + "000000000")[:9])
    return Instant(seconds, nanos)


def format_utc(seconds: int) -> str:
    """RFC 3339 in UTC to the second, as Go writes it (`-0001`, `10000` outside 0..9999)."""
    eras = 0
    while seconds < _FIRST:
        seconds += _ERA_SECONDS
        eras -= 1
    while seconds > _LAST:
        seconds -= _ERA_SECONDS
        eras += 1
    moment = _EPOCH + timedelta(seconds=seconds)
    year = moment.year + eras * _ERA_YEARS
    year_text = f"-{-year:04d}" if year < 0 else f"{year:04d}"
    return f"{year_text}-{moment:%m-%dT%H:%M:%S}Z"


def seconds_between(earlier: str, later: str) -> int | None:
    """Whole seconds from one RFC 3339 time to another (fractions dropped); None if either isn't."""
    start, end = parse(earlier), parse(later)
    return None if start is None or end is None else end.seconds - start.seconds
