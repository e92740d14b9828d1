"""Go's JSON text of scalar values, and `EncodingError`, the error of a typed Go decode.

This module owns how one JSON scalar or generic JSON value reads and writes as Go's
`encoding/json` (Go 1.26) and k8s.io/apimachinery v0.36.3 do: string quoting, numbers, integer
ranges, `interface{}` values and `metav1.Time`; types, structs and `omitempty` are
`hooks.gocompat.gojson`'s. Pure: no I/O, clock, logging or state; it never mutates its input.

Decoding:

- Strings are Go strings, valid UTF-8: a lone UTF-16 surrogate becomes U+FFFD (as Go's decoder
  makes it), and map keys that collapse to the same string keep the last value.
- Numbers arrive parsed; their text is rebuilt as Go wrote it when it stored the object
  (integers as digits, floats in Go's shortest form: `1e+21`, `1.5e-7`, `1000` for 1000.0), so an
  integral float decodes into an integer field; a fraction, an out-of-range number, `true` or a
  string for an integer field raises `EncodingError`.
- `metav1.Time` is RFC 3339 as `hooks.api.times` reads it (Go's fast parser:
  `YYYY-MM-DDTHH:MM:SS[.frac](Z|±hh:mm)`); what only Go's slower fallback parser accepts (a
  one-digit hour, a comma before the fraction) raises `EncodingError` rather than guessing.

Encoding:

- Strings escape `"` and `\\` with a backslash, `\\b \\f \\n \\r \\t` in short form, other control
  characters as `\\u00xx` (lowercase hex), `<`, `>`, `&`, U+2028 and U+2029 as `\\u003c \\u003e
  \\u0026 \\u2028 \\u2029`; everything else, DEL and non-ASCII included, as UTF-8.
- Generic JSON is written as Go writes a decoded `interface{}`: map keys sorted, no white space.
- Times are a quoted UTC RFC 3339 string to the second, or `null` for the zero time.
"""

from __future__ import annotations

import decimal
import math
import re
from json.encoder import encode_basestring
from typing import Any, Final

from hooks.api import limits, times

INT_RANGES: Final[dict[str, tuple[int, int]]] = {
    **{f"int{bits}": (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) for bits in (8, 16, 32, 64)},
    **{f"uint{bits}": (0, 2**bits - 1) for bits in (8, 16, 32, 64)},
    # 64 bits on the platforms upstream builds for
    "int": (limits.INT64_MIN, limits.INT64_MAX),
    "uint": (0, 2**64 - 1),
    "uintptr": (0, 2**64 - 1),
}
_GO_ESCAPES: Final = {char: f"\\u{ord(char):04x}" for char in "<>&\u2028\u2029"}
_JSON_TYPES: Final = {
    bool: "bool",
    int: "number",
    float: "number",
    str: "string",
    list: "array",
    dict: "object",
}
_NEEDS_FIX: Final = re.compile("[<>&\u2028\u2029\ud800-\udfff]")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_INTEGER_TEXT: Final = re.compile(r"-?[0-9]+")
_ZERO_TIME_SECONDS: Final = -62135596800  # 0001-01-01T00:00:00Z, Go's zero time, from 1970


class EncodingError(ValueError):
    """A typed Go decode would reject the input; `path` locates the offending value."""

    def __init__(self, reason: str, path: str = "") -> None:
        super().__init__(reason, path)
        self.reason = reason
        self.path = path

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}" if self.path else self.reason

    @classmethod
    def mismatch(cls, value: Any, go_type: str) -> EncodingError:
        """Go's error for a JSON value of the wrong type for `go_type`."""
        json_type = _JSON_TYPES.get(type(value), type(value).__name__)
        return cls(f"cannot unmarshal {json_type} into Go value of type {go_type}")

    def at(self, segment: str) -> EncodingError:
        """The same error one level further out (`segment` is a key or `[index]`)."""
        separator = "" if not self.path or self.path.startswith("[") else "."
        return EncodingError(self.reason, segment + separator + self.path)


def go_quote(text: str) -> str:
    """A JSON string literal exactly as Go's encoder writes `text` (lone surrogates as U+FFFD)."""
    quoted = encode_basestring(text)
    if _NEEDS_FIX.search(quoted) is None:
        return quoted
    return _NEEDS_FIX.sub(lambda match: _GO_ESCAPES.get(match.group(), "\ufffd"), quoted)


def go_float_text(value: float) -> str:
    """Go's `encoding/json` text of a float64: shortest digits, exponent outside [1e-6, 1e21)."""
    if not math.isfinite(value):
        raise EncodingError(f"unsupported value: {value!r}")
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    # repr's digits are the shortest that round-trip, as Go's; Decimal writes them in Go's forms
    # (`1e+21`, `1.5e-7`: no leading zero in the exponent).
    digits = decimal.Decimal(repr(value)).normalize()
    return format(digits, "f" if 1e-6 <= abs(value) < 1e21 else "e")


def go_number_text(value: Any) -> str | None:
    """The JSON text Go would have written for a number, or None for a non-number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float_text(value)
    return None


def decode_integer(value: Any, go_type: str) -> int:
    """The Go integer of type `go_type` (a key of `INT_RANGES`) that a JSON number decodes to."""
    text = go_number_text(value)
    if text is None:
        raise EncodingError.mismatch(value, go_type)
    low, high = INT_RANGES[go_type]
    if _INTEGER_TEXT.fullmatch(text) is None or not low <= int(text) <= high:
        raise EncodingError(f"cannot unmarshal number {text} into Go value of type {go_type}")
    return int(text)


def go_generic_text(value: Any) -> str:
    """Go's encoding of a decoded `interface{}` value (maps with sorted keys)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return go_quote(value)
    number = go_number_text(value)
    if number is not None:
        return number
    if isinstance(value, list):
        return "[" + ",".join(go_generic_text(item) for item in value) + "]"
    if isinstance(value, dict):
        entries = go_map_entries(value)
        return "{" + ",".join(go_quote(k) + ":" + go_generic_text(v) for k, v in entries) + "}"
    raise EncodingError(f"unsupported JSON value of type {type(value).__name__}")


def go_map_entries(value: dict[Any, Any]) -> list[tuple[str, Any]]:
    """Entries of a decoded Go map with string keys, sorted as Go writes them."""
    if all(isinstance(k, str) and (k.isascii() or _SURROGATE.search(k) is None) for k in value):
        return sorted(value.items())
    merged: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise EncodingError(f"map key {key!r} is not a string")
        merged[_SURROGATE.sub("\ufffd", key)] = item  # the Go string: U+FFFD for surrogates
    return sorted(merged.items())


def go_time_text(value: Any) -> str:
    """metav1.Time: decode RFC 3339, write UTC to the second, or `null` for the zero time."""
    if not isinstance(value, str):
        raise EncodingError.mismatch(value, "string")
    instant = times.parse(value)
    if instant is None:
        raise EncodingError(f"cannot parse {value!r} as an RFC 3339 time")
    if instant == times.Instant(_ZERO_TIME_SECONDS):
        return "null"
    return f'"{times.format_utc(instant.seconds)}"'
