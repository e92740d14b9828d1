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
  `QuantityError` instead of hanging. It never builds such powers itself: rounding a tiny value up
  to one nano unit and stripping zeros are done on the digits.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

_SPLIT_PATTERN: Final = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
FORMAT_ERROR: Final = f"quantities must match the regular expression '{_SPLIT_PATTERN}'"
NUMERIC_ERROR: Final = "unable to parse numeric part of quantity"
SUFFIX_ERROR: Final = "unable to parse quantity's suffix"
EXPONENT_RANGE_ERROR: Final = "quantity exponent is outside the range upstream can evaluate"

INT64_MAX: Final = 2**63 - 1
INT64_MIN: Final = -(2**63)
_INT32_MIN: Final = -(2**31)
_INT32_MAX: Final = 2**31 - 1
_MAX_SMALL_DIGITS: Final = 18  # decimal digits an int64 always holds
_NANO: Final = -9
_CONVERSION_CHUNK: Final = 4000  # below Python's default limit on int <-> str conversions
_CONVERSION_BITS: Final = 13000  # fewer than 4000 decimal digits

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
    """A parsed quantity: `mantissa * 10**exponent`, its format and any cached spelling.

    `small` marks upstream's int64 representation (its canonical form wraps 32-bit exponents);
    otherwise the value stands for upstream's arbitrary-precision decimal.
    """

    mantissa: int
    exponent: int
    format: Format
    text: str = ""
    small: bool = True


ZERO: Final = Quantity(0, 0, Format.DECIMAL_EXPONENT)


def _wrap32(value: int) -> int:
    return (value - _INT32_MIN) % 2**32 + _INT32_MIN


def _go_rem(value: int, divisor: int) -> int:
    """Remainder with the sign of the dividend, as Go's `%`."""
    remainder = abs(value) % divisor
    return -remainder if value < 0 else remainder


def _split(text: str) -> tuple[bool, str, str, str, str]:
    """Sign, numeric text, integer digits, fraction digits, suffix (upstream's splitting)."""
    positive = True
    pos = 0
    end = len(text)
    if pos < end and text[0] in "+-":
        positive = text[0] == "+"
        pos = 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "0", "", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos >= end:
        return positive, text, text[start:], "", ""
    integer = text[start:pos] or "0"
    fraction = ""
    if text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        if pos >= end:
            return positive, text, integer, text[start:], ""
        fraction = text[start:pos]
    numeric = text[:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_LETTERS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise QuantityError(FORMAT_ERROR)
    return positive, numeric, integer, fraction, text[suffix_start:]


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
    if not INT64_MIN <= value <= INT64_MAX:
        return None
    return value


def parse_quantity(text: str) -> Quantity:
    """Parse an already trimmed quantity string (upstream's `ParseQuantity`)."""
    if not text:
        raise QuantityError(FORMAT_ERROR)
    if text == "0":
        return Quantity(0, 0, Format.DECIMAL_SI, text="0")
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
            if result <= INT64_MAX:
                if not positive:
                    result = -result
                keep = (
                    exponent % 10 == 0 and value & 0x07 != 0
                    if fmt is Format.BINARY_SI
                    else scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"
                )
                return Quantity(result, scale, fmt, text=text if keep else "")
    return _parse_big(numeric, base, exponent, fmt)


def _parse_big(numeric: str, base: int, exponent: int, fmt: Format) -> Quantity:
    """The arbitrary-precision branch of ParseQuantity."""
    sign_text = numeric[:1] if numeric[:1] in ("+", "-") else ""
    body = numeric[len(sign_text) :]
    whole, dot, frac = body.partition(".")
    digits = whole + frac
    if not digits:
        raise QuantityError(NUMERIC_ERROR)
    unscaled = _int_from_digits(digits)
    scale = len(frac) if dot else 0  # digits after the point, upstream's inf.Dec scale
    if base == 10:
        scale -= exponent
    else:
        unscaled <<= exponent
    if unscaled == 0:
        return Quantity(0, 0, fmt, small=False)
    if not _INT32_MIN <= scale <= _INT32_MAX or not _INT32_MIN <= 9 - scale <= _INT32_MAX:
        raise QuantityError(EXPONENT_RANGE_ERROR)
    negative = sign_text == "-"
    if scale > -_NANO:
        drop = scale + _NANO
        if len(_digits_of(unscaled)) <= drop:
            unscaled = 1
        else:
            quotient, remainder = divmod(unscaled, _pow10(drop))
            unscaled = quotient + (1 if remainder else 0)
        scale = -_NANO
    if fmt is Format.BINARY_SI:
        if _compare_scaled(unscaled, scale, INT64_MAX) > 0:
            unscaled, scale = INT64_MAX, 0
        if _compare_scaled(unscaled, scale, 1) < 0:
            fmt = Format.DECIMAL_SI
    if negative:
        unscaled = -unscaled
    return Quantity(unscaled, -scale, fmt, small=False)


def _compare_scaled(unscaled: int, scale: int, integer: int) -> int:
    """Sign of `unscaled * 10**-scale - integer`, for a scale of at most 9 (after rounding)."""
    if scale >= 0:
        left, right = unscaled, integer * _pow10(scale)
    else:
        left, right = unscaled * _pow10(-scale), integer
    return (left > right) - (left < right)


def _int_from_digits(digits: str) -> int:
    """int(digits) for any length (Python refuses long conversions; upstream does not)."""
    if len(digits) <= _CONVERSION_CHUNK:
        return int(digits)
    half = len(digits) // 2
    return _int_from_digits(digits[:half]) * _pow10(len(digits) - half) + _int_from_digits(
        digits[half:]
    )


def _digits_of(value: int) -> str:
    """The decimal digits of a non-negative int of any size."""
    if value.bit_length() <= _CONVERSION_BITS:
        return str(value)
    half = value.bit_length() * 3 // 20  # about half of its decimal digits
    high, low = divmod(value, _pow10(half))
    return _digits_of(high) + _digits_of(low).rjust(half, "0")


def _signed_digits(value: int) -> str:
    return "-" + _digits_of(-value) if value < 0 else _digits_of(value)


def _strip_tens(mantissa: int) -> tuple[int, int]:
    """Mantissa without trailing decimal zeros, and how many were removed."""
    if mantissa == 0:
        return 0, 0
    negative = mantissa < 0
    value = -mantissa if negative else mantissa
    digits = _digits_of(value)
    stripped = digits.rstrip("0")
    times = len(digits) - len(stripped)
    value = _int_from_digits(stripped)
    return (-value if negative else value), times


def _canonical_decimal(quantity: Quantity) -> tuple[str, int]:
    """Digits and a multiple-of-3 exponent (upstream's AsCanonicalBytes)."""
    if quantity.small:
        mantissa, times = _strip_tens(quantity.mantissa)
        exponent = _wrap32(quantity.exponent + times)
        step = {1: 1, -2: 1, 2: 2, -1: 2}.get(_go_rem(exponent, 3), 0)
        scaled = mantissa * _pow10(step)
        if INT64_MIN < scaled <= INT64_MAX:
            return _signed_digits(scaled), _wrap32(exponent - step)
        # An int64 overflow: upstream redoes the work on the big-decimal path.
    mantissa, times = _strip_tens(quantity.mantissa)
    exponent = _wrap32(quantity.exponent + times)
    while _go_rem(exponent, 3) != 0:
        mantissa *= 10
        exponent = _wrap32(exponent - 1)
    return _signed_digits(mantissa), exponent


def _pow10(exponent: int) -> int:
    """10**exponent for exponent >= 0, typed as an int."""
    result: int = 10**exponent
    return result


def _is_whole(quantity: Quantity) -> bool:
    if quantity.exponent >= 0:
        return True
    return quantity.mantissa % _pow10(-quantity.exponent) == 0


def canonical_string(quantity: Quantity) -> str:
    """The text upstream's `String()` / `MarshalJSON` writes between the quotes."""
    if quantity.text:
        return quantity.text
    if quantity.mantissa == 0:
        return "0"
    fmt = quantity.format
    if fmt is Format.BINARY_SI:
        if _is_between_1024(quantity) or not _is_whole(quantity):
            fmt = Format.DECIMAL_SI
        else:
            value = _whole_value(quantity)
            negative = value < 0
            value = -value if negative else value
            times = 0
            while value % 1024 == 0:
                value //= 1024
                times += 1
            suffix = _BINARY_BY_EXPONENT.get(times * 10, "")
            return ("-" if negative else "") + _digits_of(value) + suffix
    digits, exponent = _canonical_decimal(quantity)
    if fmt is Format.DECIMAL_SI:
        return digits + _DECIMAL_BY_EXPONENT.get(exponent, "")
    return digits if exponent == 0 else f"{digits}e{exponent}"


def _whole_value(quantity: Quantity) -> int:
    if quantity.exponent >= 0:
        return quantity.mantissa * _pow10(quantity.exponent)
    return quantity.mantissa // _pow10(-quantity.exponent)


def _is_between_1024(quantity: Quantity) -> bool:
    """-1024 < value < 1024, without building huge powers of ten."""
    mantissa, exponent = quantity.mantissa, quantity.exponent
    if exponent >= 4:
        return mantissa == 0
    if exponent >= 0:
        return -1024 < mantissa * _pow10(exponent) < 1024
    bound = 1024 * _pow10(-exponent)
    return -bound < mantissa < bound


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
