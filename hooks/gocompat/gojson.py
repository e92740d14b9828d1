"""Go `encoding/json` of the typed values of the committed type table (`typetable.json`).

This module owns the table-driven encoder. It compiles the committed table (regenerate it with
`tools.typetable_gen`, never by hand) once per process into one codec per Go type, with a field
plan per struct, and writes a JSON value byte for byte as upstream (sigs.k8s.io/lws at 060ab4d,
k8s.io/api and k8s.io/apimachinery v0.36.3, Go 1.26) writes it after decoding it into its typed
structs. The text of scalars (strings, numbers, times, generic JSON) comes from
`hooks.gocompat.gotext`, quantities from `hooks.gocompat.quantity`; role names and hashing belong
to `hooks.gocompat.revision`. The module is pure: no I/O beyond reading that packaged table once,
no clock, no logging, no state but the compiled table; it never mutates its input.

Decoding rules (a typed Go decode, as the upstream controller's client performs it):

- Keys are matched case-sensitively (the Kubernetes decoder, not plain `encoding/json`); keys the
  Go types do not declare are dropped.
- JSON `null` and an absent key mean the same: a nil pointer, slice or map, or the zero value of
  anything else. A `null` element of a slice or map becomes the element's zero value (`""`, `0`,
  an empty struct, `"0"` for a quantity); `null` in a quantity or int-or-string field gives the zero
  quantity / the integer 0, because their own decoders see the literal `null`.
- A value of the wrong JSON type (a number for a string, a string for a list, `true` for a number,
  a fraction or an out-of-range number for an integer field) makes the whole decode fail: this
  module raises `gotext.EncodingError`, with the path of the value, and never guesses a default.
- `resource.Quantity` fields are decoded from their JSON text without unescaping, then written
  canonically (see `hooks.gocompat.quantity`, which documents upstream's kept spellings and the
  `"1000000E"` → `"1"` quirk). `IntOrString` is a JSON string or an int32. `metav1.Time` is read
  as `hooks.gocompat.gotext` describes. `FieldsV1` keeps its raw JSON, rebuilt as Go writes
  generic JSON (sorted keys).

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
- Int-or-strings are a bare int32 or a string; other scalars as `hooks.gocompat.gotext` and
  `hooks.gocompat.quantity` write them.

Known gap, failing loudly rather than guessing: quantities whose exponents would make upstream
build powers of ten with billions of digits raise `gotext.EncodingError`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Final

from hooks import api
from hooks.gocompat import gotext, quantity

TABLE_RESOURCE: Final = "typetable.json"


class TableError(Exception):
    """The committed type table names something this encoder cannot handle."""


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
            raise gotext.EncodingError.mismatch(value, self.name)
        slots = self.defaults.copy()
        index = self.index
        for key, item in value.items():
            field = index.get(key)
            if field is None or item is None:
                continue
            try:
                text = field.encode(item)
            except gotext.EncodingError as error:
                raise error.at(key) from None
            omit = field.omit  # empty for most fields: skip hashing a long text
            slots[field.position] = None if omit and text in omit else field.prefix + text
        return "{" + ",".join(filter(None, slots)) + "}"


def _string_codec() -> _Codec:
    def encode(value: Any) -> str:
        if not isinstance(value, str):
            raise gotext.EncodingError.mismatch(value, "string")
        return gotext.go_quote(value)

    empty = frozenset({'""'})
    return _Codec(encode, '""', empty, empty)


def _bool_codec() -> _Codec:
    def encode(value: Any) -> str:
        if value is True:
            return "true"
        if value is False:
            return "false"
        raise gotext.EncodingError.mismatch(value, "bool")

    empty = frozenset({"false"})
    return _Codec(encode, "false", empty, empty)


def _int_codec(go_type: str) -> _Codec:
    def encode(value: Any) -> str:
        if type(value) is int and low <= value <= high:
            return str(value)
        return str(gotext.decode_integer(value, go_type))

    low, high = gotext.INT_RANGES[go_type]
    empty = frozenset({"0"})
    return _Codec(encode, "0", empty, empty)


def _quantity_text(value: Any) -> str:
    """The JSON text upstream's Quantity decoder would have received for `value`."""
    if isinstance(value, str):
        return gotext.go_quote(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    number = gotext.go_number_text(value)
    if number is not None:
        return number
    return gotext.go_generic_text(value)


def _quantity_codec() -> _Codec:
    def encode(value: Any) -> str:
        # The CRD bounds quantity strings: refuse longer ones before parsing them (a stored
        # set can still hold one when validation was bypassed).
        if isinstance(value, str) and len(value) > api.QUANTITY_MAX_LENGTH:
            raise gotext.EncodingError(
                f"a quantity of {len(value)} characters; at most {api.QUANTITY_MAX_LENGTH}"
                " are allowed"
            )
        try:
            return quantity.marshal_json(quantity.unmarshal_json(_quantity_text(value)))
        except quantity.QuantityError as error:
            raise gotext.EncodingError(str(error)) from None

    return _Codec(encode, '"0"', frozenset(), frozenset({'"0"'}), has_is_zero=True)


def _int_or_string_codec() -> _Codec:
    def encode(value: Any) -> str:
        if isinstance(value, str):
            return gotext.go_quote(value)
        return str(gotext.decode_integer(value, "int32"))

    return _Codec(encode, "0", frozenset(), frozenset({"0"}))


def _time_codec() -> _Codec:
    return _Codec(gotext.go_time_text, "null", frozenset(), frozenset({"null"}), has_is_zero=True)


def _fields_v1_codec() -> _Codec:
    return _Codec(gotext.go_generic_text, "null", frozenset(), frozenset({"null"}))


def _pointer_codec(elem: _Codec) -> _Codec:
    pointee_is_zero = elem.zero_texts if elem.has_is_zero else frozenset()
    return _Codec(elem.encode, "null", frozenset(), pointee_is_zero, pointer=True)


def _slice_codec(elem: _Codec, go_type: str) -> _Codec:
    def encode(value: Any) -> str:
        if not isinstance(value, list):
            raise gotext.EncodingError.mismatch(value, go_type)
        parts: list[str] = []
        for index, item in enumerate(value):
            if item is None:
                parts.append(elem.null_text)
                continue
            try:
                parts.append(elem_encode(item))
            except gotext.EncodingError as error:
                raise error.at(f"[{index}]") from None
        return "[" + ",".join(parts) + "]"

    elem_encode = elem.encode
    return _Codec(encode, "null", frozenset({"[]", "null"}), frozenset({"null"}))


def _map_codec(elem: _Codec, go_type: str) -> _Codec:
    def encode(value: Any) -> str:
        if not isinstance(value, dict):
            raise gotext.EncodingError.mismatch(value, go_type)
        parts: list[str] = []
        for key, item in gotext.go_map_entries(value):
            if item is None:
                parts.append(gotext.go_quote(key) + ":" + elem.null_text)
                continue
            try:
                parts.append(gotext.go_quote(key) + ":" + elem_encode(item))
            except gotext.EncodingError as error:
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
class Table:
    """A compiled type table: the codec of its root type, which reaches every other type."""

    root: _Codec

    def encode(self, value: Any) -> str:
        """Go's text of `value` decoded into the root type; None (JSON null) is the zero value.

        Raises `gotext.EncodingError` when a typed Go decode of `value` would fail.
        """
        if value is None:
            return self.root.null_text
        return self.root.encode(value)


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
        elif expression in gotext.INT_RANGES:
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
        prefix = gotext.go_quote(json_name) + ":"
        absent = None if dropped else prefix + codec.null_text
        return _Field(json_name, prefix, codec.encode, omit, absent, position)


def _compile(table: dict[str, Any]) -> Table:
    types: dict[str, list[list[str]]] = table["types"]
    root_name: str = table["root"]
    compiler = _Compiler(types)
    root = compiler.codec(root_name)
    compiler.finish()
    return Table(root)


@functools.cache
def committed_table() -> Table:
    """The committed type table, compiled once per process (read from the installed package)."""
    text = resources.files("hooks.gocompat").joinpath(TABLE_RESOURCE).read_text(encoding="utf-8")
    return _compile(json.loads(text))
