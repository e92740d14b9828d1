"""Kubernetes `resource.Quantity` exactly as k8s.io/apimachinery v0.36.3 decodes and encodes it.

This module owns one thing: turning the JSON text of a typed Quantity field into the JSON text Go
writes back (`unmarshal_json` then `marshal_json`). It is pure and standard-library only; it knows
nothing of pod templates (`gojson` calls it) and never logs.

Rules reproduced from upstream, quirks included:

- Decoding (`unmarshal_json`): JSON `null` gives the zero quantity. A value wrapped in double
  quotes loses the quotes but is NOT JSON-unescaped (`"1\\t"` is the characters `1\\t` and fails);
  anything else (a bare number, `true`, an object) is parsed as its literal text. Leading and
  trailing white space as Go's `unicode.IsSpace` defines it is trimmed.
- Grammar: an optional sign, digits with at most one `.`, then a suffix: binary `Ki Mi Gi Ti Pi
  Ei`, decimal SI `n u m "" k M G T P E`, or an exponent `e`/`E` followed by a signed integer. A
  text without that shape fails with the "must match the regular expression" error; a well-shaped
  but unknown suffix (`Ki3`, `1e-`, `kM`) fails with "unable to parse quantity's suffix". The
  empty text fails; the digits may be absent (`"e3"`, `"+"`, `"Ki"` are zero) and leading zeros
  are allowed. An exponent that overflows a signed 64-bit integer is a suffix error; one that fits
  is truncated to 32 bits (`1e4294967305` means `1e9`), as Go's `int32()` conversion does. A
  number-free text that needs the big-decimal branch (`"-.e-10"`) fails with "unable to parse
  numeric part of quantity".
- Kept spellings: a value with at most 18 significant digits and a scale of at least nano is held as
  a small integer, and upstream then caches the original text when it is already "reasonable": a
  decimal value whose scale is a multiple of 3, whose digits do not end in `000` and do not start
  with `0` (so `"12.345k"`, `"+1"`, `"5."`, `"0100"`, `"1e-06"` come back unchanged), or a binary
  value whose digits are not a multiple of 8 (`"1Gi"`, `"+66292Mi"`). The literal `"0"` is kept too.
- Otherwise the value is rounded up (away from zero) to a whole nano unit; binary-suffixed values
  above 2^63-1 in magnitude are capped there; a binary value strictly between 0 and 1 becomes
  decimal SI.
- Canonical text: zero is `0`. Decimal values drop trailing zeros, then move the exponent down to a
  multiple of 3 and pick the suffix of that exponent; an exponent with no SI suffix (above 18) is
  written with no suffix at all, which silently changes the value (`"1000000E"` gives `"1"`). The
  exponent form writes `e<n>` (nothing for 0). Binary values between -1024 and 1024, or that are not
  whole numbers, are written as decimal SI; other binary values as the largest power of 1024 that
  divides them (`1024Mi` gives `1Gi`, `1.5Gi` gives `1536Mi`).
- Exponents are 32-bit in upstream. Where that arithmetic wraps and upstream would still answer
  cheaply (the small-integer path) the wrap is reproduced; where the wrap would make upstream build
  a power of ten with billions of digits (the big-decimal path), this module raises
  `QuantityError` instead of hanging.

Cost: time linear in the length of the text. Values are held as decimal digit strings; a long
value is never converted between decimal text and a Python int (CPython does that in quadratic
time, so a valid million-digit quantity once took 23 s). Rounding to nano units, stripping zeros
and comparing are done on the digits; a binary suffix multiplies the digits by 2**10..2**60 in
fixed-size chunks; only values known to be short (at most int64) become ints.
"""

from __future__ import annotations

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
_SUFFIX_LETTERS: Final = frozenset("eEinumkKMGTP")
_DIGITS: Final = frozenset("0123456789")


class QuantityError(ValueError):
    """The text is not a quantity; the message is upstream's error text."""


class Format(StrEnum):
    """How a quantity is written back (upstream's `Format`)."""

    DECIMAL_EXPONENT = "DecimalExponent"
    BINARY_SI = "BinarySI"
    DECIMAL_SI = "DecimalSI"


_DECIMAL_SUFFIXES: Final[dict[str, int]] = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
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


def _small(value: int, exponent: int, fmt: Format, *, text: str = "") -> Quantity:
    """A quantity from a short signed integer."""
    return Quantity(str(abs(value)), value < 0, exponent, fmt, text=text)


def _wrap32(value: int) -> int:
    return (value - _INT32_MIN) % 2**32 + _INT32_MIN


def _go_rem(value: int, divisor: int) -> int:
    """Remainder with the sign of the dividend, as Go's `%`."""
    remainder = abs(value) % divisor
    return -remainder if value < 0 else remainder


def _split(text: str) -> tuple[bool, str, str, str, str]:
    """Sign, numeric text, integer digits, fraction digits, suffix (upstream's splitting)."""
    positive = not text.startswith("-")
    pos = 1 if text[:1] in ("+", "-") else 0
    while pos < len(text) and text[pos] == "0":
        pos += 1
    if pos >= len(text):
        return positive, "0", "0", "", ""
    start, pos = pos, _digits_end(text, pos)
    if pos >= len(text):
        return positive, text, text[start:], "", ""
    integer = text[start:pos] or "0"
    fraction = ""
    if text[pos] == ".":
        start, pos = pos + 1, _digits_end(text, pos + 1)
        if pos >= len(text):
            return positive, text, integer, text[start:], ""
        fraction = text[start:pos]
    return positive, text[:pos], integer, fraction, _suffix(text, pos)


def _digits_end(text: str, pos: int) -> int:
    """Where the run of decimal digits starting at `pos` ends."""
    while pos < len(text) and text[pos] in _DIGITS:
        pos += 1
    return pos


def _suffix(text: str, start: int) -> str:
    """The suffix starting at `start`: letters, then an optional sign and digits (an exponent);
    anything after it is a format error."""
    pos = start
    while pos < len(text) and text[pos] in _SUFFIX_LETTERS:
        pos += 1
    if pos < len(text) and text[pos] in "+-":
        pos += 1
    if _digits_end(text, pos) < len(text):
        raise QuantityError(FORMAT_ERROR)
    return text[start:]


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
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits or not all(c in _DIGITS for c in digits):
        return None
    significant = digits.lstrip("0")
    if len(significant) > 19:
        return None
    value = int(significant or "0")
    if text[0] == "-":
        value = -value
    if not limits.INT64_MIN <= value <= limits.INT64_MAX:
        return None
    return value


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
                if not positive:
                    result = -result
                keep = (
                    exponent % 10 == 0 and value & 0x07 != 0
                    if fmt is Format.BINARY_SI
                    else scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"
                )
                return _small(result, scale, fmt, text=text if keep else "")
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
    """Digits without trailing zeros, and how many were removed."""
    if digits == "0":
        return digits, 0
    stripped = digits.rstrip("0")
    return stripped, len(digits) - len(stripped)


def _canonical_decimal(quantity: Quantity) -> tuple[str, int]:
    """Signed digits and a multiple-of-3 exponent (upstream's AsCanonicalBytes)."""
    sign = "-" if quantity.negative else ""
    digits, times = _strip_tens(quantity.digits)
    exponent = _wrap32(quantity.exponent + times)
    if quantity.small:
        step = {1: 1, -2: 1, 2: 2, -1: 2}.get(_go_rem(exponent, 3), 0)
        scaled = int(digits) * _pow10(step) * (-1 if quantity.negative else 1)
        if limits.INT64_MIN < scaled <= limits.INT64_MAX:
            return str(scaled), _wrap32(exponent - step)
        # An int64 overflow: upstream redoes the work on the big-decimal path.
    while _go_rem(exponent, 3) != 0:
        digits += "0"
        exponent = _wrap32(exponent - 1)
    return sign + digits, exponent


def _pow10(exponent: int) -> int:
    """10**exponent for exponent >= 0, typed as an int."""
    result: int = 10**exponent
    return result


def _is_whole(quantity: Quantity) -> bool:
    if quantity.exponent >= 0:
        return True
    return _strip_tens(quantity.digits)[1] >= -quantity.exponent or quantity.digits == "0"


def canonical_string(quantity: Quantity) -> str:
    """The text upstream's `String()` / `MarshalJSON` writes between the quotes."""
    if quantity.text:
        return quantity.text
    if quantity.digits == "0":
        return "0"
    fmt = quantity.format
    if fmt is Format.BINARY_SI:
        if _is_between_1024(quantity) or not _is_whole(quantity):
            fmt = Format.DECIMAL_SI
        else:
            # A binary-format value is at most 2**63 - 1 here (capped when parsed): short.
            value = _whole_value(quantity)
            times = 0
            while value % 1024 == 0:
                value //= 1024
                times += 1
            suffix = _BINARY_BY_EXPONENT.get(times * 10, "")
            return ("-" if quantity.negative else "") + str(value) + suffix
    digits, exponent = _canonical_decimal(quantity)
    if fmt is Format.DECIMAL_SI:
        return digits + _DECIMAL_BY_EXPONENT.get(exponent, "")
    return digits if exponent == 0 else f"{digits}e{exponent}"


def _whole_value(quantity: Quantity) -> int:
    """The magnitude of a whole binary-format value (short: at most 2**63 - 1)."""
    if quantity.exponent >= 0:
        return int(quantity.digits) * _pow10(quantity.exponent)
    return int(quantity.digits[: quantity.exponent] or "0")


def _is_between_1024(quantity: Quantity) -> bool:
    """-1024 < value < 1024, on the digits."""
    return _compare(quantity.digits, -quantity.exponent, 1024) < 0


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
