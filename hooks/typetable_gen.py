"""Generator of `hooks/typetable.json`: the Go type facts the revision encoder needs.

It owns reading the public Go sources of the types reachable from lws `LeaderWorkerTemplate`
(sigs.k8s.io/lws `api/leaderworkerset/v1`, k8s.io/api `core/v1` and `apps/v1`,
k8s.io/apimachinery `ObjectMeta` and friends) and writing, per struct type, its JSON fields in
declaration order: JSON name, type expression and the `omitempty` / `omitzero` / `inline` flags.
It records facts only (names, order, flags), never Go code or comments. It is a development tool
run by hand or by the drift test; the hook never imports it at run time.

Usage: `python -m hooks.typetable_gen --src DIR [--check] [--out FILE]`, where DIR holds the three
source trees side by side: `DIR/api` (k8s.io/api), `DIR/apimachinery` (k8s.io/apimachinery) and
`DIR/lws` (sigs.k8s.io/lws). `--check` compares instead of writing and exits 1 on drift.

Type expressions in the table:

- scalars `string`, `bool`, `int`, `int8`..`int64`, `uint`, `uint8`..`uint64`, `float32`, `float64`;
  `bytes` for `[]byte` (base64 in JSON); `any` for an empty interface;
- types with their own JSON methods, by behaviour: `quantity` (resource.Quantity), `intorstring`
  (intstr.IntOrString), `time` (metav1.Time), `microtime` (metav1.MicroTime), `duration`
  (metav1.Duration), `fieldsv1` (metav1.FieldsV1), `rawextension` (runtime.RawExtension);
- `*T` pointer, `[]T` slice, `map[K]T` map (K is the key's scalar kind);
- `pkg/version.Name` for a struct, e.g. `core/v1.PodSpec`. Named non-struct types (`ResourceList`,
  `Protocol`, ...) are replaced by what they stand for.

A field is `[json name, type expression, flags]`; an embedded struct promoted by `encoding/json` (an
anonymous field whose tag gives no name) has the empty JSON name and the flag `inline`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT_PACKAGE = "sigs.k8s.io/lws/api/leaderworkerset/v1"
ROOT_TYPE = "LeaderWorkerTemplate"

MODULE_DIRS: dict[str, str] = {
    "k8s.io/apimachinery": "apimachinery",
    "k8s.io/api": "api",
    "sigs.k8s.io/lws": "lws",
}
LABEL_PREFIXES = (
    "k8s.io/apimachinery/pkg/apis/",
    "k8s.io/apimachinery/pkg/",
    "k8s.io/api/",
    "sigs.k8s.io/lws/api/",
)
PINNED_MODULES = ("k8s.io/api", "k8s.io/apimachinery")

SPECIAL_TYPES: dict[tuple[str, str], str] = {
    ("k8s.io/apimachinery/pkg/api/resource", "Quantity"): "quantity",
    ("k8s.io/apimachinery/pkg/util/intstr", "IntOrString"): "intorstring",
    ("k8s.io/apimachinery/pkg/apis/meta/v1", "Time"): "time",
    ("k8s.io/apimachinery/pkg/apis/meta/v1", "MicroTime"): "microtime",
    ("k8s.io/apimachinery/pkg/apis/meta/v1", "Duration"): "duration",
    ("k8s.io/apimachinery/pkg/apis/meta/v1", "FieldsV1"): "fieldsv1",
    ("k8s.io/apimachinery/pkg/runtime", "RawExtension"): "rawextension",
}
JSON_METHODS = frozenset({"MarshalJSON", "UnmarshalJSON", "MarshalText", "UnmarshalText"})
SCALARS = frozenset(
    {
        "string",
        "bool",
        "int",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "uintptr",
        "float32",
        "float64",
    }
)
BUILTIN_ALIASES = {"byte": "uint8", "rune": "int32"}


class GenerationError(Exception):
    """The Go sources hold something the generator does not understand."""


# --- lexer -------------------------------------------------------------------------------------

_TOKEN_RE = re.compile(
    r"""
    (?P<space>[ \t\r]+)
  | (?P<newline>\n)
  | (?P<linecomment>//[^\n]*)
  | (?P<blockcomment>/\*.*?\*/)
  | (?P<rawstring>`[^`]*`)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<rune>'(?:[^'\\\n]|\\.)+')
  | (?P<number>\.?[0-9][0-9a-zA-Z_.]*(?:[eEpP][+-][0-9_]+)?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>\.\.\.|<<=|>>=|&\^=|&&|\|\||<-|\+\+|--|&\^|<<|>>|[-+*/%&|^<>=!:]=?|[()\[\]{},;.~])
    """,
    re.VERBOSE | re.DOTALL,
)
_KEYWORDS = frozenset(
    {
        *("break", "case", "chan", "const", "continue", "default", "defer", "else"),
        *("fallthrough", "for", "func", "go", "goto", "if", "import", "interface", "map"),
        *("package", "range", "return", "select", "struct", "switch", "type", "var"),
    }
)
_SEMI_AFTER = frozenset({"break", "continue", "fallthrough", "return", "++", "--", ")", "]", "}"})


@dataclass(frozen=True, slots=True)
class Token:
    kind: str
    text: str


def tokenize(source: str) -> list[Token]:
    """Go tokens with automatic semicolon insertion; comments dropped."""
    tokens: list[Token] = []
    pos = 0
    length = len(source)

    def needs_semicolon() -> bool:
        if not tokens:
            return False
        last = tokens[-1]
        if last.kind == "ident":
            return last.text not in _KEYWORDS or last.text in _SEMI_AFTER
        if last.kind in ("number", "string", "rawstring", "rune"):
            return True
        return last.text in _SEMI_AFTER

    while pos < length:
        match = _TOKEN_RE.match(source, pos)
        if match is None:
            raise GenerationError(
                f"cannot tokenize Go source at offset {pos}: {source[pos : pos + 20]!r}"
            )
        kind = match.lastgroup or ""
        text = match.group()
        pos = match.end()
        if kind == "space" or kind == "linecomment":
            continue
        if kind == "newline" or (kind == "blockcomment" and "\n" in text):
            if needs_semicolon():
                tokens.append(Token("op", ";"))
            continue
        if kind == "blockcomment":
            continue
        tokens.append(Token(kind, text))
    if needs_semicolon():
        tokens.append(Token("op", ";"))
    return tokens


# --- parser ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TypeRef:
    """A parsed Go type expression."""

    kind: str  # "name", "pointer", "slice", "array", "map", "struct", "interface", "other"
    name: str = ""  # "name": the identifier
    qualifier: str = ""  # "name": the package alias, "" for the current package
    elem: TypeRef | None = None
    key: TypeRef | None = None
    fields: tuple[FieldDecl, ...] = ()
    empty_interface: bool = False


@dataclass(frozen=True, slots=True)
class FieldDecl:
    """One Go struct field (or one name of a multi-name field declaration)."""

    name: str  # Go field name; for an embedded field the type's name
    type: TypeRef
    tag: str
    embedded: bool


@dataclass(slots=True)
class Package:
    path: str
    types: dict[str, tuple[TypeRef, dict[str, str]]] = field(default_factory=dict)
    json_methods: dict[str, set[str]] = field(default_factory=dict)


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.pos = 0

    def peek(self, offset: int = 0) -> Token:
        index = self.pos + offset
        if index < len(self.tokens):
            return self.tokens[index]
        return Token("eof", "")

    def next(self) -> Token:
        token = self.peek()
        self.pos += 1
        return token

    def expect(self, text: str) -> None:
        token = self.next()
        if token.text != text:
            raise GenerationError(f"expected {text!r}, found {token.text!r}")

    def skip_to_semicolon(self) -> None:
        depth = 0
        while self.peek().kind != "eof":
            token = self.next()
            if token.text in ("(", "[", "{"):
                depth += 1
            elif token.text in (")", "]", "}"):
                depth -= 1
            elif token.text == ";" and depth == 0:
                return

    def skip_balanced(self, opening: str, closing: str) -> None:
        self.expect(opening)
        depth = 1
        while depth:
            token = self.next()
            if token.kind == "eof":
                raise GenerationError("unbalanced brackets")
            if token.text == opening:
                depth += 1
            elif token.text == closing:
                depth -= 1

    def parse_type(self) -> TypeRef:
        token = self.peek()
        if token.text == "*":
            self.next()
            return TypeRef("pointer", elem=self.parse_type())
        if token.text == "(":
            self.next()
            inner = self.parse_type()
            self.expect(")")
            return inner
        if token.text == "[":
            self.next()
            if self.peek().text == "]":
                self.next()
                return TypeRef("slice", elem=self.parse_type())
            while self.peek().text != "]":
                self.next()
            self.next()
            return TypeRef("array", elem=self.parse_type())
        if token.text == "map":
            self.next()
            self.expect("[")
            key = self.parse_type()
            self.expect("]")
            return TypeRef("map", key=key, elem=self.parse_type())
        if token.text == "struct":
            self.next()
            return TypeRef("struct", fields=self.parse_struct_body())
        if token.text == "interface":
            self.next()
            start = self.pos
            self.skip_balanced("{", "}")
            body = [t.text for t in self.tokens[start + 1 : self.pos - 1] if t.text != ";"]
            return TypeRef("interface", empty_interface=not body)
        if token.text in ("func", "chan", "<-"):
            self.skip_type_tokens()
            return TypeRef("other", name=token.text)
        if token.kind == "ident":
            self.next()
            if self.peek().text == ".":
                self.next()
                name = self.next()
                ref = TypeRef("name", name=name.text, qualifier=token.text)
            else:
                ref = TypeRef("name", name=token.text)
            if self.peek().text == "[":
                self.skip_balanced("[", "]")  # type arguments
            return ref
        raise GenerationError(f"unexpected token in type: {token.text!r}")

    def skip_type_tokens(self) -> None:
        depth = 0
        while True:
            token = self.peek()
            if token.kind == "eof":
                return
            at_end = token.text in (";", "}", ")", "]", ",") or token.kind in (
                "string",
                "rawstring",
            )
            if depth == 0 and at_end:
                return
            if token.text in ("(", "[", "{"):
                depth += 1
            elif token.text in (")", "]", "}"):
                depth -= 1
            self.next()

    def parse_struct_body(self) -> tuple[FieldDecl, ...]:
        self.expect("{")
        fields: list[FieldDecl] = []
        while self.peek().text != "}":
            if self.peek().text == ";":
                self.next()
                continue
            fields.extend(self.parse_field_decl())
        self.expect("}")
        return tuple(fields)

    def parse_field_decl(self) -> list[FieldDecl]:
        first = self.peek()
        following = self.peek(1)
        embedded = first.text == "*" or (
            first.kind == "ident"
            and (
                following.text in (";", "}", ".", "[") or following.kind in ("string", "rawstring")
            )
        )
        if first.kind == "ident" and following.text == "[":
            # `Name [4]T` is a named array field; `Generic[T]` would be embedded.
            embedded = False
        if embedded:
            type_ref = self.parse_type()
            base = type_ref.elem if type_ref.kind == "pointer" and type_ref.elem else type_ref
            names = [base.name]
        else:
            names = [self.next().text]
            while self.peek().text == ",":
                self.next()
                names.append(self.next().text)
            type_ref = self.parse_type()
        tag = ""
        if self.peek().kind in ("string", "rawstring"):
            tag = _unquote(self.next().text)
        if self.peek().text == ";":
            self.next()
        return [FieldDecl(name, type_ref, tag, embedded) for name in names]


def _unquote(literal: str) -> str:
    if literal.startswith("`"):
        return literal[1:-1]
    decoded: str = json.loads(literal)
    return decoded


_ParsedFile = tuple[str, dict[str, str], list[tuple[str, TypeRef, bool]], list[tuple[str, str]]]


def _parse_file(source: str) -> _ParsedFile:
    """Package name, imports (alias → path), type specs (name, type, is_alias), methods."""
    parser = _Parser(tokenize(source))
    parser.expect("package")
    package_name = parser.next().text
    imports: dict[str, str] = {}
    type_specs: list[tuple[str, TypeRef, bool]] = []
    methods: list[tuple[str, str]] = []
    while parser.peek().kind != "eof":
        token = parser.next()
        if token.text == ";":
            continue
        if token.text == "import":
            for alias, path in _parse_import_specs(parser):
                imports[alias] = path
        elif token.text == "type":
            type_specs.extend(_parse_type_specs(parser))
        elif token.text == "func":
            method = _parse_func_header(parser)
            if method is not None:
                methods.append(method)
        else:
            parser.skip_to_semicolon()
    return package_name, imports, type_specs, methods


def _parse_import_specs(parser: _Parser) -> Iterator[tuple[str, str]]:
    grouped = parser.peek().text == "("
    if grouped:
        parser.next()
    while True:
        token = parser.peek()
        if grouped and token.text == ")":
            parser.next()
            parser.skip_to_semicolon()
            return
        if token.text == ";":
            parser.next()
            if not grouped:
                return
            continue
        alias = ""
        if token.kind == "ident" or token.text == ".":
            alias = parser.next().text
        path = _unquote(parser.next().text)
        yield alias or path.rsplit("/", 1)[-1], path
        if not grouped:
            parser.skip_to_semicolon()
            return


def _parse_type_specs(parser: _Parser) -> Iterator[tuple[str, TypeRef, bool]]:
    grouped = parser.peek().text == "("
    if grouped:
        parser.next()
    while True:
        if grouped:
            while parser.peek().text == ";":
                parser.next()
            if parser.peek().text == ")":
                parser.next()
                parser.skip_to_semicolon()
                return
        name = parser.next().text
        generic = (
            parser.peek().text == "["
            and parser.peek(1).kind == "ident"
            and parser.peek(2).text != "]"
        )
        if generic:
            parser.skip_balanced("[", "]")
        is_alias = parser.peek().text == "="
        if is_alias:
            parser.next()
        type_ref = parser.parse_type()
        if not generic:
            yield name, type_ref, is_alias
        parser.skip_to_semicolon()
        if not grouped:
            return


def _parse_func_header(parser: _Parser) -> tuple[str, str] | None:
    receiver = ""
    if parser.peek().text == "(":
        start = parser.pos
        parser.skip_balanced("(", ")")
        idents = [t.text for t in parser.tokens[start + 1 : parser.pos - 1] if t.kind == "ident"]
        receiver = idents[-1] if idents else ""
        if len(idents) >= 2 and parser.tokens[parser.pos - 2].text == "]":
            receiver = idents[1]  # a generic receiver `r T[P]`
    name = parser.next().text
    # Skip signature and body: the body is the first `{` at depth 0 that follows the
    # parameter list and is not the body of a `struct{` / `interface{` result type.
    depth = 0
    previous = ""
    while parser.peek().kind != "eof":
        token = parser.next()
        if token.text == "{" and depth == 0 and previous not in ("struct", "interface"):
            parser.pos -= 1
            parser.skip_balanced("{", "}")
            break
        if token.text in ("(", "[", "{"):
            depth += 1
        elif token.text in (")", "]", "}"):
            depth -= 1
        elif token.text == ";" and depth == 0:
            break  # a declaration without a body
        previous = token.text
    if receiver:
        return receiver, name
    return None


# --- packages and resolution -------------------------------------------------------------------


class Universe:
    """Lazily parsed Go packages of the three modules."""

    def __init__(self, src: Path) -> None:
        self.src = src
        self.packages: dict[str, Package] = {}

    def package_dir(self, path: str) -> Path:
        for module, directory in MODULE_DIRS.items():
            if path == module or path.startswith(module + "/"):
                return self.src / directory / path[len(module) :].lstrip("/")
        raise GenerationError(f"package {path} is outside the known modules")

    def package(self, path: str) -> Package:
        cached = self.packages.get(path)
        if cached is not None:
            return cached
        directory = self.package_dir(path)
        files = sorted(p for p in directory.glob("*.go") if not p.name.endswith("_test.go"))
        if not files:
            raise GenerationError(f"no Go files for package {path} in {directory}")
        package = Package(path)
        for go_file in files:
            source = go_file.read_text(encoding="utf-8")
            if _is_ignored(source):
                continue
            _, imports, type_specs, methods = _parse_file(source)
            for name, type_ref, _ in type_specs:
                package.types[name] = (type_ref, imports)
            for receiver, method in methods:
                if method in JSON_METHODS:
                    package.json_methods.setdefault(receiver, set()).add(method)
        self.packages[path] = package
        return package


def _is_ignored(source: str) -> bool:
    """Whether a file opts out of every build (`//go:build ignore`, e.g. code generators)."""
    head = source.split("\npackage ", 1)[0]
    return "//go:build ignore" in head or "// +build ignore" in head


def package_label(path: str) -> str:
    """Short, unique name of a package in the table (`core/v1`, `meta/v1`, ...)."""
    for prefix in LABEL_PREFIXES:
        if path.startswith(prefix):
            return path[len(prefix) :]
    raise GenerationError(f"no label for package {path}")


@dataclass(frozen=True, slots=True)
class _Context:
    package: str
    imports: dict[str, str]


class TableBuilder:
    """Walks the types reachable from the root and records struct field facts."""

    def __init__(self, universe: Universe) -> None:
        self.universe = universe
        self.types: dict[str, list[list[str]]] = {}
        self.pending: list[tuple[str, str]] = []

    def build(self) -> dict[str, list[list[str]]]:
        root = self.struct_ref(ROOT_PACKAGE, ROOT_TYPE)
        while self.pending:
            path, name = self.pending.pop()
            label = f"{package_label(path)}.{name}"
            if label in self.types:
                continue
            type_ref, imports = self.declaration(path, name)
            if type_ref.kind != "struct":
                raise GenerationError(f"{label} is not a struct")
            self.types[label] = []  # placeholder: breaks cycles
            self.types[label] = self.struct_fields(type_ref, _Context(path, imports), label)
        if root not in self.types:
            raise GenerationError("root type missing from the table")
        return self.types

    def declaration(self, path: str, name: str) -> tuple[TypeRef, dict[str, str]]:
        package = self.universe.package(path)
        found = package.types.get(name)
        if found is None:
            raise GenerationError(f"type {name} not found in {path}")
        return found

    def struct_ref(self, path: str, name: str) -> str:
        label = f"{package_label(path)}.{name}"
        if label not in self.types:
            self.pending.append((path, name))
        return label

    def struct_fields(self, struct: TypeRef, context: _Context, label: str) -> list[list[str]]:
        fields: list[list[str]] = []
        for decl in struct.fields:
            json_name, options, ignored = _json_tag(decl.tag)
            if ignored:
                continue
            exported = decl.name[:1].isupper()
            if decl.embedded and not json_name:
                expression = self.expression(decl.type, context)
                base = expression.removeprefix("*")
                if "." not in base:
                    raise GenerationError(f"{label}: embedded non-struct {decl.name}")
                if decl.type.kind == "pointer":
                    raise GenerationError(f"{label}: embedded pointer {decl.name} unsupported")
                fields.append(["", expression, "inline"])
                continue
            if not exported:
                continue
            unsupported = options - {"omitempty", "omitzero", "inline"}
            if unsupported:
                raise GenerationError(f"{label}.{decl.name}: unsupported tag options {unsupported}")
            if "inline" in options:
                raise GenerationError(f"{label}.{decl.name}: `inline` on a non-embedded field")
            flags = ",".join(flag for flag in ("omitempty", "omitzero") if flag in options)
            fields.append([json_name or decl.name, self.expression(decl.type, context), flags])
        return fields

    def expression(self, type_ref: TypeRef, context: _Context) -> str:
        match type_ref.kind:
            case "pointer":
                return "*" + self.expression(_elem(type_ref), context)
            case "slice":
                elem = self.expression(_elem(type_ref), context)
                return "bytes" if elem == "uint8" else "[]" + elem
            case "map":
                if type_ref.key is None:
                    raise GenerationError("map without key")
                key = self.expression(type_ref.key, context)
                if key not in SCALARS or key == "bool":
                    raise GenerationError(f"unsupported map key type {key}")
                return f"map[{key}]" + self.expression(_elem(type_ref), context)
            case "interface":
                if not type_ref.empty_interface:
                    raise GenerationError("non-empty interface field")
                return "any"
            case "name":
                return self.named(type_ref, context)
        raise GenerationError(f"unsupported type kind {type_ref.kind} in {context.package}")

    def named(self, type_ref: TypeRef, context: _Context) -> str:
        if type_ref.qualifier:
            path = context.imports.get(type_ref.qualifier)
            if path is None:
                raise GenerationError(f"unknown import {type_ref.qualifier} in {context.package}")
        else:
            if type_ref.name in SCALARS:
                return type_ref.name
            if type_ref.name in BUILTIN_ALIASES:
                return BUILTIN_ALIASES[type_ref.name]
            if type_ref.name == "any":
                return "any"
            path = context.package
        special = SPECIAL_TYPES.get((path, type_ref.name))
        if special is not None:
            return special
        package = self.universe.package(path)
        if type_ref.name in package.json_methods:
            methods = sorted(package.json_methods[type_ref.name])
            raise GenerationError(
                f"{path}.{type_ref.name} has its own JSON methods {methods}; teach the encoder"
            )
        declared, imports = self.declaration(path, type_ref.name)
        if declared.kind == "struct":
            return self.struct_ref(path, type_ref.name)
        return self.expression(declared, _Context(path, imports))


def _elem(type_ref: TypeRef) -> TypeRef:
    if type_ref.elem is None:
        raise GenerationError(f"{type_ref.kind} without element type")
    return type_ref.elem


def _json_tag(tag: str) -> tuple[str, set[str], bool]:
    """JSON name, options, and whether the field is ignored (`json:"-"`, but not `json:"-,"`)."""
    for match in re.finditer(r'([A-Za-z0-9_]+):"((?:[^"\\]|\\.)*)"', tag):
        if match.group(1) == "json":
            value: str = json.loads(f'"{match.group(2)}"')
            name, _, rest = value.partition(",")
            options = {option for option in rest.split(",") if option}
            return name, options, value == "-"
    return "", set(), False


# --- output ------------------------------------------------------------------------------------


def module_pins(src: Path) -> dict[str, str]:
    """Versions of k8s.io/api and k8s.io/apimachinery that lws's go.mod requires."""
    pins: dict[str, str] = {}
    go_mod = (src / MODULE_DIRS["sigs.k8s.io/lws"] / "go.mod").read_text(encoding="utf-8")
    for line in go_mod.splitlines():
        parts = line.split()
        if parts and parts[0] == "require":
            parts = parts[1:]
        if len(parts) >= 2 and parts[0] in PINNED_MODULES:
            pins[parts[0]] = parts[1]
    return dict(sorted(pins.items()))


def render_table(src: Path) -> str:
    """The table's file text: a JSON object with one struct type per line, sorted by name."""
    types = TableBuilder(Universe(src)).build()
    lines = [
        "{",
        f'"generator": {json.dumps(__name__.replace("__main__", "hooks.typetable_gen"))},',
        f'"root": {json.dumps(package_label(ROOT_PACKAGE) + "." + ROOT_TYPE)},',
        f'"pins": {json.dumps(module_pins(src), separators=(",", ":"))},',
        '"types": {',
    ]
    names = sorted(types)
    for index, name in enumerate(names):
        comma = "," if index < len(names) - 1 else ""
        body = json.dumps(types[name], separators=(",", ":"))
        lines.append(f"{json.dumps(name)}: {body}{comma}")
    lines.append("}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def default_output() -> Path:
    return Path(__file__).resolve().parent / "typetable.json"


def main(argv: list[str] | None = None) -> int:
    """CLI entry point: write or check the committed table."""
    parser = argparse.ArgumentParser(prog="python -m hooks.typetable_gen", description=__doc__)
    parser.add_argument(
        "--src", type=Path, required=True, help="directory with api/, apimachinery/, lws/"
    )
    parser.add_argument("--out", type=Path, default=default_output(), help="table file")
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    try:
        text = render_table(args.src)
    except (GenerationError, OSError) as error:
        print(f"typetable_gen: {error}", file=sys.stderr)
        return 2
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if current != text:
            message = f"typetable_gen: {args.out} is out of date; rerun without --check"
            print(message, file=sys.stderr)
            return 1
        return 0
    args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
