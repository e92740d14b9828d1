"""Kubernetes `resource.Quantity` exactly as k8s.io/apimachinery v0.36.3 decodes and encodes it.

This module owns turning the JSON text of a typed Quantity field into the JSON text Go writes back
(`unmarshal_json`, then `marshal_json`). Pure and standard-library only; it knows nothing of pod
templates (`hooks.gocompat.gojson` calls it). Upstream's rules, quirks included:

- Decoding: JSON `null` is the zero quantity. Surrounding double quotes are removed but the text
  is NOT unescaped (`"1\\t"` is the characters `1\\t` and fails); anything else (a bare number,
  `true`, an object) is parsed as its literal text. White space as Go's `unicode.IsSpace` knows
  it is trimmed.
- Grammar: an optional sign, digits with at most one `.`, then a suffix: binary `Ki Mi Gi Ti Pi
  Ei`, decimal SI `n u m "" k M G T P E`, or `e`/`E` and a signed integer. Another shape fails
  with "must match the regular expression"; a well-shaped unknown suffix (`Ki3`, `1e-`, `kM`)
  with "unable to parse quantity's suffix"; the empty text fails. Digits may be absent (`"e3"`,
  `"+"`, `"Ki"` are zero) and leading zeros are allowed. An exponent beyond int64 is a suffix
  error; one that fits is truncated to 32 bits (`1e4294967305` means `1e9`). A number-free text
  on the big-decimal path (`"-.e-10"`) fails with "unable to parse numeric part of quantity".
- Kept spellings: a value of at most 18 significant digits at a scale of at least nano is a small
  integer, and its text is kept when already "reasonable": decimal with a scale that is a
  multiple of 3 and digits that neither end in `000` nor start with `0` (`"12.345k"`, `"+1"`,
  `"5."`, `"0100"`, `"1e-06"` come back unchanged), or binary with digits not a multiple of 8
  (`"1Gi"`, `"+66292Mi"`). The literal `"0"` is kept too.
- Otherwise the value is rounded up (away from zero) to a whole nano unit; binary values above
  2^63-1 in magnitude are capped there, and one strictly between 0 and 1 becomes decimal SI.
- Canonical text: zero is `0`. Decimal values drop trailing zeros, move the exponent down to a
  multiple of 3 and take that exponent's suffix; above 18 there is none and the exponent is
  silently dropped (`"1000000E"` gives `"1"`). The exponent form writes `e<n>` (nothing for 0).
  Binary values between -1024 and 1024, or not whole, are written as decimal SI; others with the
  largest power of 1024 that divides them (`1024Mi` gives `1Gi`, `1.5Gi` gives `1536Mi`).
- Exponents are 32-bit upstream: where the wrap is cheap for upstream (the small-integer path) it
  is reproduced; where upstream would build a power of ten with billions of digits (the
  big-decimal path), `QuantityError` is raised instead of hanging.

Cost: linear in the length of the text. Values are decimal digit strings, never converted whole
between decimal text and a Python int (quadratic in CPython: a valid million-digit quantity once
took 23 s); a binary suffix multiplies the digits in fixed-size chunks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from hooks.api import limits

_SPLIT_PATTERN: Final = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
FORMAT_ERROR: Final = f"quantities must match the regular expression '{_SPLIT_PATTERN}'"
NUMERIC_ERROR: Final = "unable to parse numeric part of quantity"
SUFFIX_ERROR: Final = "unable to parse quantity's suffix"
EXPONENT_RANGE_ERROR: Final = "quantity exponent is outside the range upstream can evaluate"

_INT32_MIN: Final = -(2**31)
_INT32_MAX: Final = 2**31 - 1
_MAX_SMALL_DIGITS: Final = 18  # decimal digits an int64 always holds
_NANO: Final = -9
_CHUNK_DIGITS: Final = 18  # digits multiplied at a time by a binary suffix (fit an int64)

# Go's unicode.IsSpace: Latin-1 spaces plus the Unicode White_Space property.
_GO_SPACE: Final = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000"
)
# Upstream's scanner: possessive, so that a long text is matched in linear time.
_SHAPE: Final = re.compile(r"([+-]?+)([0-9]*+)(?:\.([0-9]*+))?+([eEinumkKMGTP]*+[-+]?+[0-9]*+)")
_INT64_SHAPE: Final = re.compile(r"[+-]?[0-9]+")


class QuantityError(ValueError):
    """The text is not a quantity; the message is upstream's error text."""


class Format(StrEnum):
    """How a quantity is written back (upstream's `Format`)."""

    DECIMAL_EXPONENT = "DecimalExponent"
    BINARY_SI = "BinarySI"
    DECIMAL_SI = "DecimalSI"


_SI_PREFIXES: Final = ("n", "u", "m", "", "k", "M", "G", "T", "P", "E")  # 10**-9 .. 10**18
_DECIMAL_SUFFIXES: Final = {text: 3 * index - 9 for index, text in enumerate(_SI_PREFIXES)}
_BINARY_SUFFIXES: Final[dict[str, int]] = {
    "Ki": 10,
    "Mi": 20,
    "Gi": 30,
    "Ti": 40,
    "Pi": 50,
    "Ei": 60,
}
_DECIMAL_BY_EXPONENT: Final = {exponent: text for text, exponent in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_EXPONENT: Final = {exponent: text for text, exponent in _BINARY_SUFFIXES.items()}


@dataclass(frozen=True, slots=True)
class Quantity:
    """A parsed quantity: `(-1 if negative) * int(digits) * 10**exponent`, its format and any
    cached spelling.

    `digits` are decimal without leading zeros ("0" for zero). `small` marks upstream's int64
    representation (its canonical form wraps 32-bit exponents); otherwise the value stands for
    upstream's arbitrary-precision decimal.
    """

    digits: str
    negative: bool
    exponent: int
    format: Format
    text: str = ""
    small: bool = True


ZERO: Final = Quantity("0", False, 0, Format.DECIMAL_EXPONENT)


def _wrap32(value: int) -> int:
    return (value - _INT32_MIN) % 2**32 + _INT32_MIN


def _go_rem(value: int, divisor: int) -> int:
    """Remainder with the sign of the dividend, as Go's `%`."""
    remainder = abs(value) % divisor
    return -remainder if value < 0 else remainder


def _split(text: str) -> tuple[bool, str, str, str, str]:
    """Sign, numeric text, integer digits (no leading zeros, at least one), fraction digits and
    suffix (upstream's splitting)."""
    match = _SHAPE.fullmatch(text)
    if match is None:
        raise QuantityError(FORMAT_ERROR)
    sign, integer, fraction, suffix = match.groups()
    numeric = text[: match.start(4)]
    return sign != "-", numeric, integer.lstrip("0") or "0", fraction or "", suffix


def _interpret(suffix: str) -> tuple[int, int, Format]:
    """Base, exponent and format of a suffix."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], Format.DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], Format.BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE":
        exponent = _parse_go_int64(suffix[1:])
        if exponent is None:
            raise QuantityError(SUFFIX_ERROR)
        return 10, _wrap32(exponent), Format.DECIMAL_EXPONENT
    raise QuantityError(SUFFIX_ERROR)


def _parse_go_int64(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64), or None when it fails."""
    if _INT64_SHAPE.fullmatch(text) is None:
        return None
    significant = text.lstrip("+-").lstrip("0")
    if len(significant) > 19:
        return None
    value = int(significant or "0") * (-1 if text[0] == "-" else 1)
    return value if limits.INT64_MIN <= value <= limits.INT64_MAX else None


def parse_quantity(text: str) -> Quantity:
    """Parse an already trimmed quantity string (upstream's `ParseQuantity`)."""
    if not text:
        raise QuantityError(FORMAT_ERROR)
    if text == "0":
        return Quantity("0", False, 0, Format.DECIMAL_SI, text="0")
    positive, numeric, integer, fraction, suffix = _split(text)
    base, exponent, fmt = _interpret(suffix)

    precision = 0
    scale = 0
    multiplier = 1
    if fmt is Format.BINARY_SI:
        if exponent >= 0 and not fraction:
            multiplier = 1 << exponent
            precision = 15 - len(integer) - (exponent * 3 // 10) - 1
        else:
            precision = -1
    else:
        scale = exponent
        precision = _MAX_SMALL_DIGITS - (len(integer) + len(fraction))

    if precision >= 0:
        scale = _wrap32(scale - len(fraction))
        if scale >= _NANO:
            shifted = integer + fraction
            value = int(shifted)
            result = value * multiplier
            if result <= limits.INT64_MAX:
                keep = (
                    exponent % 10 == 0 and value & 0x07 != 0
                    if fmt is Format.BINARY_SI
                    else scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"
                )
                negative = result > 0 and not positive
                return Quantity(str(result), negative, scale, fmt, text=text if keep else "")
    return _parse_big(numeric, base, exponent, fmt)


def _parse_big(numeric: str, base: int, exponent: int, fmt: Format) -> Quantity:
    """The arbitrary-precision branch of ParseQuantity, on decimal digit strings."""
    sign_text = numeric[:1] if numeric[:1] in ("+", "-") else ""
    body = numeric[len(sign_text) :]
    whole, dot, frac = body.partition(".")
    if not whole and not frac:
        raise QuantityError(NUMERIC_ERROR)
    digits = (whole + frac).lstrip("0")
    scale = len(frac) if dot else 0  # digits after the point, upstream's inf.Dec scale
    if base == 10:
        scale -= exponent
    elif digits:
        digits = _times(digits, 1 << exponent)
    if not digits:
        return Quantity("0", False, 0, fmt, small=False)
    if not _INT32_MIN <= scale <= _INT32_MAX or not _INT32_MIN <= 9 - scale <= _INT32_MAX:
        raise QuantityError(EXPONENT_RANGE_ERROR)
    digits, scale = _rounded_to_nano(digits, scale)
    if fmt is Format.BINARY_SI:
        if _compare(digits, scale, limits.INT64_MAX) > 0:
            digits, scale = str(limits.INT64_MAX), 0
        if _compare(digits, scale, 1) < 0:
            fmt = Format.DECIMAL_SI
    return Quantity(digits, sign_text == "-", -scale, fmt, small=False)


def _rounded_to_nano(digits: str, scale: int) -> tuple[str, int]:
    """`digits` at `scale` rounded up (away from zero) to a whole nano unit, as upstream rounds."""
    if scale <= -_NANO:
        return digits, scale
    drop = scale + _NANO
    if len(digits) <= drop:
        return "1", -_NANO
    kept, dropped = digits[:-drop], digits[-drop:]
    return (_increment(kept) if dropped.strip("0") else kept), -_NANO


def _times(digits: str, factor: int) -> str:
    """The decimal digits of int(digits) * factor, for a factor below 10**18, in linear time."""
    chunks = []
    carry = 0
    for end in range(len(digits), 0, -_CHUNK_DIGITS):
        carry += int(digits[max(0, end - _CHUNK_DIGITS) : end]) * factor
        carry, low = divmod(carry, 10**_CHUNK_DIGITS)
        chunks.append(str(low).rjust(_CHUNK_DIGITS, "0"))
    chunks.append(str(carry))
    return "".join(reversed(chunks)).lstrip("0") or "0"


def _increment(digits: str) -> str:
    """The decimal digits of int(digits) + 1."""
    body = digits.rstrip("9")
    nines = len(digits) - len(body)
    if not body:
        return "1" + "0" * nines
    return body[:-1] + str(int(body[-1]) + 1) + "0" * nines


def _compare(digits: str, scale: int, integer: int) -> int:
    """Sign of `int(digits) * 10**-scale - integer`, for a non-negative integer."""
    if scale >= 0:
        left, right = digits, str(integer) + "0" * scale
    else:
        width = len(digits) - scale
        if width != len(str(integer)):
            return 1 if width > len(str(integer)) else -1
        left, right = digits + "0" * -scale, str(integer)
    left, right = left.lstrip("0") or "0", right.lstrip("0") or "0"
    if len(left) != len(right):
        return 1 if len(left) > len(right) else -1
    return (left > right) - (left < right)


def _strip_tens(digits: str) -> tuple[str, int]:
    """Non-zero digits without trailing zeros, and how many were removed."""
    stripped = digits.rstrip("0")
    return stripped, len(digits) - len(stripped)


def _canonical_decimal(quantity: Quantity) -> tuple[str, int]:
    """Signed digits and a multiple-of-3 exponent (upstream's AsCanonicalBytes)."""
    sign = "-" if quantity.negative else ""
    digits, times = _strip_tens(quantity.digits)
    exponent = _wrap32(quantity.exponent + times)
    if quantity.small:
        step = {1: 1, -2: 1, 2: 2, -1: 2}.get(_go_rem(exponent, 3), 0)
        scaled = int(digits + "0" * step) * (-1 if quantity.negative else 1)
        if limits.INT64_MIN < scaled <= limits.INT64_MAX:
            return str(scaled), _wrap32(exponent - step)
        # An int64 overflow: upstream redoes the work on the big-decimal path.
    while _go_rem(exponent, 3) != 0:
        digits += "0"
        exponent = _wrap32(exponent - 1)
    return sign + digits, exponent


def canonical_string(quantity: Quantity) -> str:
    """The text upstream's `String()` / `MarshalJSON` writes between the quotes."""
    if quantity.text:
        return quantity.text
    if quantity.digits == "0":
        return "0"
    if quantity.format is Format.BINARY_SI:
        binary = _binary_text(quantity)
        if binary is not None:
            return binary
    digits, exponent = _canonical_decimal(quantity)
    if quantity.format is Format.DECIMAL_EXPONENT:
        return digits if exponent == 0 else f"{digits}e{exponent}"
    return digits + _DECIMAL_BY_EXPONENT.get(exponent, "")


def _binary_text(quantity: Quantity) -> str | None:
    """A non-zero binary-format value in the largest power of 1024 that divides it; None for one
    written as decimal SI (between -1024 and 1024, or not whole)."""
    exponent = quantity.exponent
    if _compare(quantity.digits, -exponent, 1024) < 0:
        return None
    if exponent < 0 and _strip_tens(quantity.digits)[1] < -exponent:
        return None
    # At most 2**63 - 1 here (capped when parsed): short.
    value = int(quantity.digits[:exponent] if exponent < 0 else quantity.digits + "0" * exponent)
    times = 0
    while value % 1024 == 0:
        value //= 1024
        times += 1
    return ("-" if quantity.negative else "") + str(value) + _BINARY_BY_EXPONENT.get(times * 10, "")


def go_trim_space(text: str) -> str:
    """strings.TrimSpace: strip the white space Go's `unicode.IsSpace` knows."""
    return text.strip(_GO_SPACE)


def unmarshal_json(raw: str) -> Quantity:
    """Decode the JSON text of a typed Quantity field (upstream's `UnmarshalJSON`)."""
    if raw == "null":
        return ZERO
    if len(raw) >= 2 and raw[0] == '"' and raw[-1] == '"':
        raw = raw[1:-1]
    return parse_quantity(go_trim_space(raw))


def marshal_json(quantity: Quantity) -> str:
    """The JSON text upstream writes for a quantity: always a quoted string."""
    return '"' + canonical_string(quantity) + '"'
