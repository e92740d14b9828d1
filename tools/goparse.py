"""A tokenizer and declaration parser for the Go sources behind `hooks/gocompat/typetable.json`.

It owns reading one Go source file's text into the facts `tools.typetable_gen` needs: the package
name, its imports (alias → path), its type declarations as `TypeRef` trees (struct fields with
their tags, in declaration order) and the receiver and name of each method. It understands just
enough Go for that: tokens with automatic semicolon insertion, type expressions, struct bodies,
grouped `import` / `type` declarations and function headers; every other declaration, and every
function body, is skipped by balancing brackets. It never resolves names across packages or
decides what goes into the table (`tools.typetable_gen` does), and it reads no files: it is pure,
with no I/O, clock, logging or state. Input it does not understand raises `SourceError`. It is a
development tool; the hook never imports it at run time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass


class SourceError(Exception):
    """The Go source holds something this parser does not understand."""


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
            raise SourceError(
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
            raise SourceError(f"expected {text!r}, found {token.text!r}")

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
                raise SourceError("unbalanced brackets")
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
        raise SourceError(f"unexpected token in type: {token.text!r}")

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


@dataclass(frozen=True, slots=True)
class GoFile:
    """The declarations of one Go source file, in source order."""

    package: str
    imports: dict[str, str]  # alias → import path
    type_specs: list[tuple[str, TypeRef, bool]]  # name, type, whether `type Name = T`
    methods: list[tuple[str, str]]  # receiver type name, method name


def parse_file(source: str) -> GoFile:
    """The package name, imports, type declarations and methods of one Go source file."""
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
    return GoFile(package_name, imports, type_specs, methods)


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


def is_ignored(source: str) -> bool:
    """Whether a file opts out of every build (`//go:build ignore`, e.g. code generators)."""
    head = source.split("\npackage ", 1)[0]
    return "//go:build ignore" in head or "// +build ignore" in head
