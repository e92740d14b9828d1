"""The revision of a DisaggregatedSet: Go `encoding/json` bytes of its role templates, hashed.

This module owns `compute_revision` and the encoder behind it. It reproduces, byte for byte, what
upstream (sigs.k8s.io/lws at 060ab4d, k8s.io/api and k8s.io/apimachinery v0.36.3, Go 1.26) writes
when it decodes the stored object into its typed structs and marshals
`[{"name": <role name>, "template": <LeaderWorkerTemplate>}, ...]` in `spec.roles` order; the
revision is the first 8 lowercase hex characters of the SHA-256 of those bytes. The field facts
come from the committed `typetable.json` (regenerate it with `hooks.typetable_gen`, never by
hand). The module is pure: no I/O beyond reading that packaged table once, no clock, no logging,
no mutable state; it never mutates its input.

Decoding rules (a typed Go decode, as the upstream controller's client performs it):

- Keys are matched case-sensitively (the Kubernetes decoder, not plain `encoding/json`); keys the
  Go types do not declare are dropped.
- JSON `null` and an absent key mean the same: a nil pointer, slice or map, or the zero value of
  anything else. A `null` element of a slice or map becomes the element's zero value (`""`, `0`,
  an empty struct, `"0"` for a quantity); `null` in a quantity or int-or-string field gives the zero
  quantity / the integer 0, because their own decoders see the literal `null`.
- A value of the wrong JSON type (a number for a string, a string for a list, `true` for a number,
  a fraction or an out-of-range number for an integer field) makes the whole decode fail: this
  module raises `EncodingError` and never returns a default hash.
- Numbers reach this module already parsed, so their spelling is rebuilt as Go would have written
  them when it stored the object: integers as digits, floats in Go's shortest form (`1e+21`,
  `1.5e-7`, `1000` for 1000.0). An integral float therefore decodes into an integer field.
- Strings are Go strings, always valid UTF-8 after decoding: a lone UTF-16 surrogate (which Go's
  decoder turns into U+FFFD) becomes U+FFFD, written as UTF-8, and map keys that collapse to the
  same string keep the last value.
- `resource.Quantity` fields are decoded from their JSON text without unescaping, then written
  canonically (see `hooks.quantity`, which documents upstream's kept spellings and the `"1000000E"`
  → `"1"` quirk). `IntOrString` is a JSON string or an int32. `metav1.Time` accepts RFC 3339
  (Go's fast parser: `YYYY-MM-DDTHH:MM:SS[.frac](Z|±hh:mm)`) and is written in UTC to the second.
  `FieldsV1` keeps its raw JSON, rebuilt here as Go writes generic JSON (sorted keys).

Encoding rules (Go's `encoding/json.Marshal`):

- Struct fields in Go declaration order, embedded structs promoted in place; map keys sorted by
  their bytes; no white space anywhere.
- `omitempty` drops `""`, `0`, `false`, nil pointers and empty or nil maps and slices, but never a
  struct value, so every container writes `"resources":{}` and every pod template `"metadata":{}`.
  A field without it is always written, even when absent: `null` for a nil pointer, slice or map
  (so `{"workerTemplate":{}}` writes `"spec":{"containers":null}`, and an empty CephFS volume
  `"monitors":null`), `""`, `0` or `false` for a scalar, the zero struct for a struct.
- `omitzero` (ObjectMeta.creationTimestamp, `omitempty,omitzero` since apimachinery 0.34) drops a
  zero time, so a template's `creationTimestamp: null` disappears instead of being written as
  `null`; a non-pointer zero time without `omitzero` (a PVC condition's `lastProbeTime`) is still
  written as `null`, and the empty PVC `status` as `{}`.
- Strings are escaped as Go does: `"` and `\\` with a backslash, `\\b \\f \\n \\r \\t` in short
  form, other control characters as `\\u00xx` (lowercase hex), `<`, `>`, `&`, U+2028 and U+2029 as
  `\\u003c \\u003e \\u0026 \\u2028 \\u2029`; everything else, DEL and non-ASCII included, as UTF-8.
- Quantities are always quoted strings, int-or-strings a bare int32 or a string, times a quoted UTC
  RFC 3339 string or `null` for the zero time.

Known gaps, each failing loudly rather than guessing: timestamps that only Go's slower fallback
parser accepts (a one-digit hour, a comma before the fraction) raise `EncodingError`; quantities
whose exponents would make upstream build powers of ten with billions of digits raise too.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from json.encoder import encode_basestring
from typing import Any, Final

from hooks import api, quantity

REVISION_LENGTH: Final = 8
TABLE_RESOURCE: Final = "typetable.json"

_INT_RANGES: Final[dict[str, tuple[int, int]]] = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "int": (-(2**63), 2**63 - 1),
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
    "uint": (0, 2**64 - 1),
    "uintptr": (0, 2**64 - 1),
}
_GO_ESCAPES: Final = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
_NEEDS_FIX: Final = re.compile("[<>&\u2028\u2029\ud800-\udfff]")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_INTEGER_TEXT: Final = re.compile(r"-?[0-9]+")
_RFC3339: Final = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})"
    r"(?:\.([0-9]+))?(Z|[+-][0-9]{2}:[0-9]{2})"
)
_ZERO_TIME_SECONDS: Final = -62135596800  # 0001-01-01T00:00:00Z, Go's zero time, from 1970


class EncodingError(ValueError):
    """A typed Go decode would reject the input; `path` locates the offending value."""

    def __init__(self, reason: str, path: str = "") -> None:
        super().__init__(reason, path)
        self.reason = reason
        self.path = path

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}" if self.path else self.reason

    def at(self, segment: str) -> EncodingError:
        """The same error one level further out (`segment` is a key or `[index]`)."""
        if not self.path:
            path = segment
        elif self.path.startswith("["):
            path = segment + self.path
        else:
            path = f"{segment}.{self.path}"
        return EncodingError(self.reason, path)


class TableError(Exception):
    """The committed type table names something this encoder cannot handle."""


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _mismatch(value: Any, go_type: str) -> EncodingError:
    return EncodingError(f"cannot unmarshal {_json_type(value)} into Go value of type {go_type}")


# --- Go text of JSON scalars -------------------------------------------------------------------


def _fix_char(match: re.Match[str]) -> str:
    return _GO_ESCAPES.get(match.group(), "\ufffd")


def go_quote(text: str) -> str:
    """A JSON string literal exactly as Go's encoder writes `text` (HTML-safe escaping).

    Lone surrogates, which no Go string can hold, are written as U+FFFD, as Go's decoder makes them.
    """
    quoted = encode_basestring(text)
    if _NEEDS_FIX.search(quoted) is None:
        return quoted
    return _NEEDS_FIX.sub(_fix_char, quoted)


def _go_string(text: str) -> str:
    """The Go string a JSON string decodes to: lone surrogates become U+FFFD."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub("\ufffd", text)


def go_float_text(value: float) -> str:
    """Go's `encoding/json` text of a float64: shortest digits, exponent outside [1e-6, 1e21)."""
    if not math.isfinite(value):
        raise EncodingError(f"unsupported value: {value!r}")
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign = "-" if value < 0 else ""
    mantissa, _, exponent_text = repr(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    exponent = int(exponent_text or "0") - len(fraction)
    stripped = digits.rstrip("0")
    exponent += len(digits) - len(stripped)
    digits = stripped
    if abs(value) < 1e-6 or abs(value) >= 1e21:
        scientific = len(digits) - 1 + exponent
        head = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        mark = "-" if scientific < 0 else "+"
        return f"{sign}{head}e{mark}{abs(scientific):02d}".replace("e-0", "e-", 1)
    if exponent >= 0:
        return sign + digits + "0" * exponent
    point = len(digits) + exponent
    if point > 0:
        return f"{sign}{digits[:point]}.{digits[point:]}"
    return f"{sign}0.{'0' * -point}{digits}"


def _number_text(value: Any) -> str | None:
    """The JSON text Go would have written for a number, or None for a non-number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float_text(value)
    return None


def _generic(value: Any) -> str:
    """Go's encoding of a decoded `interface{}` value (maps with sorted keys)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return go_quote(value)
    number = _number_text(value)
    if number is not None:
        return number
    if isinstance(value, list):
        return "[" + ",".join(_generic(item) for item in value) + "]"
    if isinstance(value, dict):
        entries = _go_map_entries(value)
        return "{" + ",".join(go_quote(k) + ":" + _generic(v) for k, v in entries) + "}"
    raise EncodingError(f"unsupported JSON value of type {type(value).__name__}")


def _go_map_entries(value: dict[Any, Any]) -> list[tuple[str, Any]]:
    """Entries of a decoded Go map with string keys, sorted as Go writes them."""
    keys = list(value)
    if all(
        isinstance(key, str) and (key.isascii() or _SURROGATE.search(key) is None) for key in keys
    ):
        return sorted(value.items())
    merged: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise EncodingError(f"map key {key!r} is not a string")
        merged[_go_string(key)] = item
    return sorted(merged.items())


# --- codecs ------------------------------------------------------------------------------------

Encode = Callable[[Any], str]


@dataclass(slots=True)
class _Codec:
    """How one Go type turns a non-null JSON value into Go's output text.

    `null_text` is what Go writes for JSON null or an absent key; `empty_texts` are the outputs
    `omitempty` drops, `zero_texts` those `omitzero` drops. A pointer is omitted only when nil
    under `omitempty`, or when nil or (for a type with an `IsZero` method) zero under `omitzero`.
    Not frozen: a struct's `null_text` is filled in once, when the whole table is compiled.
    """

    encode: Encode
    null_text: str
    empty_texts: frozenset[str] = frozenset()
    zero_texts: frozenset[str] = frozenset()
    pointer: bool = False
    has_is_zero: bool = False  # the Go type has an `IsZero` method that `omitzero` consults
    struct_name: str = ""


@dataclass(frozen=True, slots=True)
class _Field:
    key: str
    prefix: str
    encode: Encode
    omit: frozenset[str]
    absent: str | None
    position: int = 0


class _StructPlan:
    """The compiled fields of one struct type, filled in once when the table is compiled.

    Encoding starts from the texts of an all-absent struct (`defaults`, one slot per field in
    declaration order, None where the field is omitted) and overwrites the slots of the keys
    present in the input, so its cost follows the input's size, not the type's.
    """

    __slots__ = ("defaults", "index", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self.index: dict[str, _Field] = {}
        self.defaults: list[str | None] = []

    def set_fields(self, fields: Sequence[_Field]) -> None:
        self.index = {field.key: field for field in fields}
        self.defaults = [field.absent for field in fields]

    def encode(self, value: Any) -> str:
        if not isinstance(value, dict):
            raise _mismatch(value, self.name)
        slots = self.defaults.copy()
        index = self.index
        for key, item in value.items():
            field = index.get(key)
            if field is None or item is None:
                continue
            try:
                text = field.encode(item)
            except EncodingError as error:
                raise error.at(key) from None
            omit = field.omit  # empty for most fields: skip hashing a long text
            slots[field.position] = None if omit and text in omit else field.prefix + text
        return "{" + ",".join(filter(None, slots)) + "}"


def _string_codec() -> _Codec:
    def encode(value: Any) -> str:
        if not isinstance(value, str):
            raise _mismatch(value, "string")
        return go_quote(value)

    empty = frozenset({'""'})
    return _Codec(encode, '""', empty, empty)


def _bool_codec() -> _Codec:
    def encode(value: Any) -> str:
        if value is True:
            return "true"
        if value is False:
            return "false"
        raise _mismatch(value, "bool")

    empty = frozenset({"false"})
    return _Codec(encode, "false", empty, empty)


def _decode_integer(value: Any, go_type: str) -> int:
    text = _number_text(value)
    if text is None:
        raise _mismatch(value, go_type)
    low, high = _INT_RANGES[go_type]
    if _INTEGER_TEXT.fullmatch(text) is None or not low <= int(text) <= high:
        raise EncodingError(f"cannot unmarshal number {text} into Go value of type {go_type}")
    return int(text)


def _int_codec(go_type: str) -> _Codec:
    def encode(value: Any) -> str:
        if type(value) is int and low <= value <= high:
            return str(value)
        return str(_decode_integer(value, go_type))

    low, high = _INT_RANGES[go_type]
    empty = frozenset({"0"})
    return _Codec(encode, "0", empty, empty)


def _quantity_text(value: Any) -> str:
    """The JSON text upstream's Quantity decoder would have received for `value`."""
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    number = _number_text(value)
    if number is not None:
        return number
    return _generic(value)


def _quantity_codec() -> _Codec:
    def encode(value: Any) -> str:
        try:
            return quantity.marshal_json(quantity.unmarshal_json(_quantity_text(value)))
        except quantity.QuantityError as error:
            raise EncodingError(str(error)) from None

    return _Codec(encode, '"0"', frozenset(), frozenset({'"0"'}), has_is_zero=True)


def _int_or_string_codec() -> _Codec:
    def encode(value: Any) -> str:
        if isinstance(value, str):
            return go_quote(value)
        return str(_decode_integer(value, "int32"))

    return _Codec(encode, "0", frozenset(), frozenset({"0"}))


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 in the proleptic Gregorian calendar, for any year."""
    year -= month <= 2
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146097 + day_of_era - 719468


def _civil_from_days(days: int) -> tuple[int, int, int]:
    days += 719468
    era = days // 146097
    day_of_era = days - era * 146097
    year_of_era = (
        day_of_era - day_of_era // 1460 + day_of_era // 36524 - day_of_era // 146096
    ) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    shifted_month = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * shifted_month + 2) // 5 + 1
    month = shifted_month + (3 if shifted_month < 10 else -9)
    return year_of_era + era * 400 + (month <= 2), month, day


def _days_in_month(year: int, month: int) -> int:
    if month == 2:
        leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
        return 29 if leap else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _time_text(value: Any) -> str:
    """metav1.Time: decode RFC 3339, write UTC to the second, or `null` for the zero time."""
    if not isinstance(value, str):
        raise _mismatch(value, "string")
    match = _RFC3339.fullmatch(value)
    if match is None:
        raise EncodingError(f"cannot parse {value!r} as an RFC 3339 time")
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    fraction, zone = match.group(7) or "", match.group(8)
    in_range = (
        1 <= month <= 12
        and 1 <= day <= _days_in_month(year, month)
        and hour <= 23
        and minute <= 59
        and second <= 59
    )
    offset = 0
    if zone != "Z":
        zone_hour, zone_minute = int(zone[1:3]), int(zone[4:6])
        in_range = in_range and zone_hour <= 23 and zone_minute <= 59
        offset = (zone_hour * 60 + zone_minute) * 60 * (-1 if zone[0] == "-" else 1)
    if not in_range:
        raise EncodingError(f"cannot parse {value!r} as an RFC 3339 time: field out of range")
    nanos = int((fraction + "000000000")[:9])
    seconds = _days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second
    seconds -= offset
    if seconds == _ZERO_TIME_SECONDS and nanos == 0:
        return "null"
    days, rest = divmod(seconds, 86400)
    utc_year, utc_month, utc_day = _civil_from_days(days)
    year_text = f"-{-utc_year:04d}" if utc_year < 0 else f"{utc_year:04d}"
    clock = f"{rest // 3600:02d}:{rest // 60 % 60:02d}:{rest % 60:02d}"
    return f'"{year_text}-{utc_month:02d}-{utc_day:02d}T{clock}Z"'


def _time_codec() -> _Codec:
    return _Codec(_time_text, "null", frozenset(), frozenset({"null"}), has_is_zero=True)


def _fields_v1_codec() -> _Codec:
    return _Codec(_generic, "null", frozenset(), frozenset({"null"}))


def _pointer_codec(elem: _Codec) -> _Codec:
    pointee_is_zero = elem.zero_texts if elem.has_is_zero else frozenset()
    return _Codec(elem.encode, "null", frozenset(), pointee_is_zero, pointer=True)


def _slice_codec(elem: _Codec, go_type: str) -> _Codec:
    def encode(value: Any) -> str:
        if not isinstance(value, list):
            raise _mismatch(value, go_type)
        parts: list[str] = []
        for index, item in enumerate(value):
            if item is None:
                parts.append(elem.null_text)
                continue
            try:
                parts.append(elem_encode(item))
            except EncodingError as error:
                raise error.at(f"[{index}]") from None
        return "[" + ",".join(parts) + "]"

    elem_encode = elem.encode
    return _Codec(encode, "null", frozenset({"[]", "null"}), frozenset({"null"}))


def _map_codec(elem: _Codec, go_type: str) -> _Codec:
    def encode(value: Any) -> str:
        if not isinstance(value, dict):
            raise _mismatch(value, go_type)
        parts: list[str] = []
        for key, item in _go_map_entries(value):
            if item is None:
                parts.append(go_quote(key) + ":" + elem.null_text)
                continue
            try:
                parts.append(go_quote(key) + ":" + elem_encode(item))
            except EncodingError as error:
                raise error.at(key) from None
        return "{" + ",".join(parts) + "}"

    elem_encode = elem.encode
    return _Codec(encode, "null", frozenset({"{}", "null"}), frozenset({"null"}))


_SPECIAL_CODECS: Final[dict[str, Callable[[], _Codec]]] = {
    "string": _string_codec,
    "bool": _bool_codec,
    "quantity": _quantity_codec,
    "intorstring": _int_or_string_codec,
    "time": _time_codec,
    "fieldsv1": _fields_v1_codec,
}


# --- table compilation -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Table:
    root: _Codec


class _Compiler:
    def __init__(self, types: dict[str, list[list[str]]]) -> None:
        self.types = types
        self.codecs: dict[str, _Codec] = {}
        self.plans: dict[str, _StructPlan] = {}
        self.struct_fields: dict[str, list[tuple[str, _Codec, set[str]]]] = {}

    def codec(self, expression: str) -> _Codec:
        cached = self.codecs.get(expression)
        if cached is not None:
            return cached
        if expression.startswith("*"):
            made = _pointer_codec(self.codec(expression[1:]))
        elif expression.startswith("[]"):
            made = _slice_codec(self.codec(expression[2:]), expression)
        elif expression.startswith("map["):
            key, _, elem = expression[4:].partition("]")
            if key != "string":
                raise TableError(f"map key type {key} is not supported")
            made = _map_codec(self.codec(elem), expression)
        elif expression in _SPECIAL_CODECS:
            made = _SPECIAL_CODECS[expression]()
        elif expression in _INT_RANGES:
            made = _int_codec(expression)
        elif "." in expression:
            made = self.struct(expression)
        else:
            raise TableError(f"type expression {expression!r} is not supported")
        self.codecs[expression] = made
        return made

    def struct(self, name: str) -> _Codec:
        if name not in self.types:
            raise TableError(f"struct {name} is missing from the table")
        plan = _StructPlan(name)
        self.plans[name] = plan
        made = _Codec(plan.encode, "", frozenset(), frozenset(), struct_name=name)
        self.codecs[name] = made
        flattened: list[tuple[str, _Codec, set[str]]] = []
        for json_name, expression, flags in self.flatten(name):
            flattened.append(
                (json_name, self.codec(expression), set(filter(None, flags.split(","))))
            )
        self.struct_fields[name] = flattened
        return made

    def flatten(self, name: str) -> list[tuple[str, str, str]]:
        """Fields of a struct with embedded structs promoted in place."""
        result: list[tuple[str, str, str]] = []
        for json_name, expression, flags in self.types[name]:
            if "inline" in flags.split(","):
                if expression not in self.types:
                    raise TableError(f"{name}: inline {expression} is not a struct in the table")
                result.extend(self.flatten(expression))
            else:
                result.append((json_name, expression, flags))
        names = [field[0] for field in result]
        if len(set(names)) != len(names):
            raise TableError(f"{name}: duplicate JSON names after promotion")
        return result

    def finish(self) -> None:
        """Fill every struct's zero text, then its field plan."""
        done: set[str] = set()
        for name in self.plans:
            self.zero_struct_text(name, done, ())
        for name, plan in self.plans.items():
            plan.set_fields(
                [
                    self.field(json_name, codec, flags, position=position)
                    for position, (json_name, codec, flags) in enumerate(self.struct_fields[name])
                ]
            )

    def zero_struct_text(self, name: str, done: set[str], stack: tuple[str, ...]) -> str:
        codec = self.codecs[name]
        if name in done:
            return codec.null_text
        if name in stack:
            raise TableError(f"struct {name} contains itself by value")
        parts: list[str] = []
        for json_name, field_codec, flags in self.struct_fields[name]:
            if field_codec.struct_name:
                self.zero_struct_text(field_codec.struct_name, done, (*stack, name))
            absent = self.field(json_name, field_codec, flags).absent
            if absent is not None:
                parts.append(absent)
        codec.null_text = "{" + ",".join(parts) + "}"
        done.add(name)
        return codec.null_text

    @staticmethod
    def field(json_name: str, codec: _Codec, flags: set[str], *, position: int = 0) -> _Field:
        unknown = flags - {"omitempty", "omitzero"}
        if unknown:
            raise TableError(f"field {json_name}: unknown flags {sorted(unknown)}")
        omit: frozenset[str] = frozenset()
        if "omitempty" in flags:
            omit |= codec.empty_texts
        if "omitzero" in flags:
            if not codec.pointer and not codec.zero_texts:
                raise TableError(f"field {json_name}: omitzero on this type is not supported")
            omit |= codec.zero_texts
        if codec.pointer:
            dropped = bool(flags & {"omitempty", "omitzero"})
        else:
            dropped = codec.null_text in omit
        prefix = go_quote(json_name) + ":"
        absent = None if dropped else prefix + codec.null_text
        return _Field(json_name, prefix, codec.encode, omit, absent, position)


def _compile(table: dict[str, Any]) -> _Table:
    types: dict[str, list[list[str]]] = table["types"]
    root_name: str = table["root"]
    compiler = _Compiler(types)
    root = compiler.codec(root_name)
    compiler.finish()
    return _Table(root)


@functools.cache
def _table() -> _Table:
    """The committed type table, compiled once per process (read from the installed package)."""
    text = resources.files("hooks").joinpath(TABLE_RESOURCE).read_text(encoding="utf-8")
    return _compile(json.loads(text))


# --- public API --------------------------------------------------------------------------------


def encode_templates(roles: Sequence[tuple[str, api.JsonObject]]) -> bytes:
    """The exact bytes upstream hashes: `[{"name":…,"template":…},…]` in the given role order.

    Each tuple is a role's name and its raw `spec.leaderWorkerTemplate` object as stored.
    Raises `EncodingError` when a typed Go decode of a template would fail.
    """
    table = _table()
    parts: list[str] = []
    for index, (name, template) in enumerate(roles):
        if not isinstance(name, str):
            raise _mismatch(name, "string").at(f"[{index}].name")
        if template is None:
            body = table.root.null_text
        else:
            try:
                body = table.root.encode(template)
            except EncodingError as error:
                raise error.at(f"[{index}].spec.leaderWorkerTemplate") from None
        parts.append('{"name":' + go_quote(name) + ',"template":' + body + "}")
    return ("[" + ",".join(parts) + "]").encode("utf-8")


def compute_revision(roles: Sequence[tuple[str, api.JsonObject]]) -> str:
    """The 8-hex revision of the roles: a SHA-256 prefix of `encode_templates(roles)`."""
    digest = hashlib.sha256(encode_templates(roles)).hexdigest()
    return digest[:REVISION_LENGTH]
