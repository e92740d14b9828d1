"""Generator of `hooks/gocompat/typetable.json`: the Go type facts the Go-compatible encoder needs.

It owns reading the public Go sources of the types reachable from lws `LeaderWorkerTemplate`
(sigs.k8s.io/lws `api/leaderworkerset/v1`, k8s.io/api `core/v1` and `apps/v1`,
k8s.io/apimachinery `ObjectMeta` and friends) and writing, per struct type, its JSON fields in
declaration order: JSON name, type expression and the `omitempty` / `omitzero` / `inline` flags.
It records facts only (names, order, flags), never Go code or comments. It finds, reads and
resolves the packages; `tools.goparse` turns each file's text into declarations. It is a
development tool run by hand or by the drift test; the hook never imports it at run time.

Usage: `python -m tools.typetable_gen --src DIR [--check] [--out FILE]`, where DIR holds the three
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
from dataclasses import dataclass, field
from pathlib import Path

from tools import goparse

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


# --- packages and resolution -------------------------------------------------------------------


@dataclass(slots=True)
class Package:
    """One Go package: its type declarations (with the imports of their file) and JSON methods."""

    path: str
    types: dict[str, tuple[goparse.TypeRef, dict[str, str]]] = field(default_factory=dict)
    json_methods: dict[str, set[str]] = field(default_factory=dict)


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
            if goparse.is_ignored(source):
                continue
            parsed = goparse.parse_file(source)
            for name, type_ref, _ in parsed.type_specs:
                package.types[name] = (type_ref, parsed.imports)
            for receiver, method in parsed.methods:
                if method in JSON_METHODS:
                    package.json_methods.setdefault(receiver, set()).add(method)
        self.packages[path] = package
        return package


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

    def declaration(self, path: str, name: str) -> tuple[goparse.TypeRef, dict[str, str]]:
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

    def struct_fields(
        self, struct: goparse.TypeRef, context: _Context, label: str
    ) -> list[list[str]]:
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

    def expression(self, type_ref: goparse.TypeRef, context: _Context) -> str:
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

    def named(self, type_ref: goparse.TypeRef, context: _Context) -> str:
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


def _elem(type_ref: goparse.TypeRef) -> goparse.TypeRef:
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
        f'"generator": {json.dumps(__name__.replace("__main__", "tools.typetable_gen"))},',
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
    return Path(__file__).resolve().parents[1] / "hooks" / "gocompat" / "typetable.json"


def main(argv: list[str] | None = None) -> int:
    """CLI entry point: write or check the committed table."""
    parser = argparse.ArgumentParser(prog="python -m tools.typetable_gen", description=__doc__)
    parser.add_argument(
        "--src", type=Path, required=True, help="directory with api/, apimachinery/, lws/"
    )
    parser.add_argument("--out", type=Path, default=default_output(), help="table file")
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args(argv)
    try:
        text = render_table(args.src)
    except (GenerationError, goparse.SourceError, OSError) as error:
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
