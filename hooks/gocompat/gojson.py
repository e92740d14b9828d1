"""Go `encoding/json` of values decoded into the typed structs of the committed type table.

This module owns the table-driven encoder: `typetable.json` (regenerated with
`tools.typetable_gen`, never by hand) is compiled once per process into one codec per Go type,
which writes a JSON value byte for byte as upstream (sigs.k8s.io/lws at 060ab4d, k8s.io/api and
k8s.io/apimachinery v0.36.3, Go 1.26) writes it after a typed decode. Scalars are
`hooks.gocompat.gotext`'s, quantities `hooks.gocompat.quantity`'s. Pure: it reads the packaged
table once and keeps nothing else; it never mutates its input.

Decoding, as the Kubernetes decoder: keys match case-sensitively, undeclared keys are dropped.
`null` and an absent key are the same (a nil pointer, slice or map, else the zero value); a `null`
element of a slice or map is the element's zero value (`""`, `0`, `{}`, `"0"` for a quantity),
and `null` in a quantity or int-or-string field the zero quantity or 0. A value of the wrong JSON
type (a fraction or an out-of-range number for an integer field included) fails the whole decode
with `gotext.EncodingError` and its path, never a default. A Quantity is decoded from its JSON
text without unescaping; an `IntOrString` is a string or an int32; `FieldsV1` is generic JSON.

Encoding, as `json.Marshal`: struct fields in declaration order, embedded structs promoted in
place; map keys sorted by their bytes; no white space. `omitempty` drops `""`, `0`, `false`, nil
pointers and empty maps and slices, never a struct value (every container writes
`"resources":{}`, every pod template `"metadata":{}`); a field without it is always written:
`null` for a nil pointer, slice or map (`{"workerTemplate":{}}` writes
`"spec":{"containers":null}`), else the zero scalar or struct. `omitzero`
(ObjectMeta.creationTimestamp since apimachinery 0.34) drops a zero time, so a template's
`creationTimestamp: null` disappears; a zero non-pointer time without it (a PVC condition's
`lastProbeTime`) is written `null`, the empty PVC `status` `{}`.

Known gap, failing loudly: a quantity whose exponent would make upstream build a power of ten
with billions of digits raises `gotext.EncodingError`.
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


Encode = Callable[[Any], str]
_NULL: Final = frozenset({"null"})


@dataclass(slots=True)
class _Codec:
    """How one Go type turns a non-null JSON value into Go's output text.

    `null_text` is what Go writes for JSON null or an absent key; `omitempty` drops the
    `empty_texts`, `omitzero` the `zero_texts`. A pointer is omitted only when nil under
    `omitempty`, or when nil or (for a type with an `IsZero` method) zero under `omitzero`.
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


def _scalar_codec(encode: Encode, zero: str) -> _Codec:
    """A scalar type whose zero text both `omitempty` and `omitzero` drop."""
    zeros = frozenset({zero})
    return _Codec(encode, zero, zeros, zeros)


def _encode_string(value: Any) -> str:
    if not isinstance(value, str):
        raise gotext.EncodingError.mismatch(value, "string")
    return gotext.go_quote(value)


def _encode_bool(value: Any) -> str:
    if not isinstance(value, bool):
        raise gotext.EncodingError.mismatch(value, "bool")
    return "true" if value else "false"


def _int_codec(go_type: str) -> _Codec:
    def encode(value: Any) -> str:
        if type(value) is int and low <= value <= high:
            return str(value)
        return str(gotext.decode_integer(value, go_type))

    low, high = gotext.INT_RANGES[go_type]
    return _scalar_codec(encode, "0")


def _encode_quantity(value: Any) -> str:
    # The CRD bounds quantity strings: refuse longer ones before parsing them (a stored set can
    # still hold one when validation was bypassed).
    if isinstance(value, str) and len(value) > api.QUANTITY_MAX_LENGTH:
        raise gotext.EncodingError(
            f"a quantity of {len(value)} characters; at most {api.QUANTITY_MAX_LENGTH} are allowed"
        )
    try:
        # The JSON text upstream's decoder would have received for `value`.
        return quantity.marshal_json(quantity.unmarshal_json(gotext.go_generic_text(value)))
    except quantity.QuantityError as error:
        raise gotext.EncodingError(str(error)) from None


def _encode_int_or_string(value: Any) -> str:
    if isinstance(value, str):
        return gotext.go_quote(value)
    return str(gotext.decode_integer(value, "int32"))


def _element_text(elem: _Codec, item: Any, segment: str) -> str:
    """A slice or map element's text (`null` is the element's zero value), errors located."""
    if item is None:
        return elem.null_text
    try:
        return elem.encode(item)
    except gotext.EncodingError as error:
        raise error.at(segment) from None


def _slice_codec(elem: _Codec, go_type: str) -> _Codec:
    def encode(value: Any) -> str:
        if not isinstance(value, list):
            raise gotext.EncodingError.mismatch(value, go_type)
        return "[" + ",".join(_element_text(elem, v, f"[{i}]") for i, v in enumerate(value)) + "]"

    return _Codec(encode, "null", frozenset({"[]", "null"}), _NULL)


def _map_codec(elem: _Codec, go_type: str) -> _Codec:
    def encode(value: Any) -> str:
        if not isinstance(value, dict):
            raise gotext.EncodingError.mismatch(value, go_type)
        entries = gotext.go_map_entries(value)
        return (
            "{"
            + ",".join(gotext.go_quote(k) + ":" + _element_text(elem, v, k) for k, v in entries)
            + "}"
        )

    return _Codec(encode, "null", frozenset({"{}", "null"}), _NULL)


_SPECIAL_CODECS: Final[dict[str, Callable[[], _Codec]]] = {
    "string": lambda: _scalar_codec(_encode_string, '""'),
    "bool": lambda: _scalar_codec(_encode_bool, "false"),
    "quantity": lambda: _Codec(
        _encode_quantity, '"0"', zero_texts=frozenset({'"0"'}), has_is_zero=True
    ),
    "intorstring": lambda: _Codec(_encode_int_or_string, "0", zero_texts=frozenset({"0"})),
    "time": lambda: _Codec(gotext.go_time_text, "null", zero_texts=_NULL, has_is_zero=True),
    "fieldsv1": lambda: _Codec(gotext.go_generic_text, "null", zero_texts=_NULL),
}


@dataclass(frozen=True, slots=True)
class Table:
    """A compiled type table: the codec of its root type, which reaches every other type."""

    root: _Codec

    def encode(self, value: Any) -> str:
        """Go's text of `value` decoded into the root type (None is the zero value); raises
        `gotext.EncodingError` when a typed Go decode of `value` would fail."""
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
            elem = self.codec(expression[1:])
            zeros = elem.zero_texts if elem.has_is_zero else frozenset()
            made = _Codec(elem.encode, "null", frozenset(), zeros, pointer=True)
        elif expression.startswith("[]"):
            made = _slice_codec(self.codec(expression[2:]), expression)
        elif expression.startswith("map["):
            key, _, elem_type = expression[4:].partition("]")
            if key != "string":
                raise TableError(f"map key type {key} is not supported")
            made = _map_codec(self.codec(elem_type), expression)
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
        plan = self.plans[name] = _StructPlan(name)
        made = self.codecs[name] = _Codec(plan.encode, "", struct_name=name)
        self.struct_fields[name] = [
            (json_name, self.codec(expression), set(filter(None, flags.split(","))))
            for json_name, expression, flags in self.flatten(name)
        ]
        return made

    def flatten(self, name: str) -> list[tuple[str, str, str]]:
        """Fields of a struct with embedded structs promoted in place."""
        result: list[tuple[str, str, str]] = []
        for json_name, expression, flags in self.types[name]:
            if "inline" not in flags.split(","):
                result.append((json_name, expression, flags))
            elif expression in self.types:
                result.extend(self.flatten(expression))
            else:
                raise TableError(f"{name}: inline {expression} is not a struct in the table")
        names = [field[0] for field in result]
        if len(set(names)) != len(names):
            raise TableError(f"{name}: duplicate JSON names after promotion")
        return result

    def finish(self) -> None:
        """Fill every struct's field plan and zero text."""
        done: set[str] = set()
        for name in self.plans:
            self.finish_struct(name, done, ())

    def finish_struct(self, name: str, done: set[str], stack: tuple[str, ...]) -> None:
        """Fill one struct's plan, after those of the structs it holds by value (their zero
        texts are its fields' absent texts); its zero text is its encoding of no keys."""
        if name in done:
            return
        if name in stack:
            raise TableError(f"struct {name} contains itself by value")
        fields = []
        for at, (json_name, field_codec, flags) in enumerate(self.struct_fields[name]):
            if field_codec.struct_name:
                self.finish_struct(field_codec.struct_name, done, (*stack, name))
            fields.append(self.field(json_name, field_codec, flags, position=at))
        plan = self.plans[name]
        plan.set_fields(fields)
        self.codecs[name].null_text = plan.encode({})
        done.add(name)

    @staticmethod
    def field(json_name: str, codec: _Codec, flags: set[str], *, position: int) -> _Field:
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
    compiler = _Compiler(table["types"])
    root = compiler.codec(table["root"])
    compiler.finish()
    return Table(root)


@functools.cache
def committed_table() -> Table:
    """The committed type table, compiled once per process (read from the installed package)."""
    text = resources.files("hooks.gocompat").joinpath(TABLE_RESOURCE).read_text(encoding="utf-8")
    return _compile(json.loads(text))
