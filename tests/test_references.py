"""Prose that cannot go stale: every module, file and link the repository mentions exists.

Scanned: the docstrings and comments of every Python file (not its code: a logger's name is not
a reference), every Markdown file, and the comments of the kit's YAML.
Checked:

- dotted names under `hooks.` (`hooks.core.rollout`, `hooks.api.naming.budget`) resolve to a
  module, or to an attribute of one;
- paths with a file extension (`hooks/core/rollout.py`, `docs/safety.md`, `core/sync.py` inside
  the package) name a file of the repository;
- Markdown links name a file that exists and, with `#anchor`, a heading of it;
- code spans of the form `module.name` (`records.SyncRequest`, `rollout.plan_slice()`), where a
  module of `hooks` has that last name, name something that module (or a class of it) has;
- in docs/architecture.md, the map of the code, bare code spans are code too: one that only
  code has (`_collect`, `plan_slice()`: an underscore or parentheses) resolves in the modules
  its paragraph mentions or anywhere in `hooks`, and every other bare lowercase word of a
  paragraph that mentions a module resolves in those modules (or is a module, or a command of a
  command line).

References outside the repository (`../shared`, URLs) and placeholders (`<set>`, `{name}`) are
not checked, nor `status.…`, `spec.…`, `metadata.…` and `data.…`, which are field paths.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import io
import itertools
import pkgutil
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

from tests.shared import REPO_ROOT

PYTHON: Final = sorted(
    path
    for folder in ("hooks", "tools", "bench", "tests")
    for path in (REPO_ROOT / folder).rglob("*.py")
)
MARKDOWN: Final = sorted(
    [
        REPO_ROOT / "README.md",
        *(REPO_ROOT / "docs").glob("*.md"),
        *(REPO_ROOT / "bench").glob("*.md"),
    ]
)
YAML: Final = sorted(
    [
        REPO_ROOT / "kustomization.yaml",
        *(REPO_ROOT / "components").rglob("*.yaml"),
        *(REPO_ROOT / "metacontroller").glob("*.yaml"),
        *(REPO_ROOT / "examples").rglob("*.yaml"),
    ]
)
DOTTED: Final = re.compile(r"(?<![\w.])hooks(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
PATH: Final = re.compile(
    r"(?<![\w/.<{-])((?:[A-Za-z0-9_.-]+/)+[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_]+)*\.(?:py|md|yaml|json|toml))"
)
LINK: Final = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
SPAN: Final = re.compile(r"`([^`\n]+)`")
QUALIFIED: Final = re.compile(r"(_?[a-z][a-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)(?:\(\))?")
BARE: Final = re.compile(r"(_?[a-z][a-z0-9_]*)(\(\))?")
# First segments of the JSON field paths the docs name (`status.creating`, `spec.replicas`).
FIELD_ROOTS: Final = frozenset({"status", "spec", "metadata", "data"})
# A paragraph, a list item or a table row of Markdown; a docstring or comment as a whole.
BLOCK: Final = re.compile(r"\n\s*\n|\n(?=\|)|\n(?=\s*- )|\n(?=\d+\. )")
CODE_MAP: Final = REPO_ROOT / "docs" / "architecture.md"
# Where a path that does not start at the repository root may start.
PATH_ROOTS: Final = (REPO_ROOT, REPO_ROOT / "hooks")


def _prose_of_python(path: Path) -> Iterator[str]:
    source = path.read_text()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            docstring = ast.get_docstring(node, clean=False)
            if docstring:
                yield docstring
        # Attribute docstrings (a string right after an assignment), as the API models use.
        body = getattr(node, "body", None)
        if isinstance(body, list):
            for before, after in itertools.pairwise(body):
                if (
                    isinstance(before, ast.Assign | ast.AnnAssign)
                    and isinstance(after, ast.Expr)
                    and isinstance(after.value, ast.Constant)
                    and isinstance(after.value.value, str)
                ):
                    yield after.value.value
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.string


def _prose_of_yaml(path: Path) -> Iterator[str]:
    for line in path.read_text().splitlines():
        if line.lstrip().startswith("#"):
            yield line


def _prose(path: Path) -> Iterator[str]:
    if path.suffix == ".py":
        yield from _prose_of_python(path)
    elif path.suffix == ".yaml":
        yield from _prose_of_yaml(path)
    else:
        yield path.read_text()


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for split in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for attribute in parts[split:]:
            if not hasattr(target, attribute):
                return False
            target = getattr(target, attribute)
        return True
    return False


def _file_exists(reference: str, source: Path) -> bool:
    roots = (source.parent, *PATH_ROOTS)
    return any((root / reference).exists() for root in roots)


def _package_modules() -> dict[str, object]:
    """Every module of `hooks` (but `__main__`, which runs the command line), by dotted name."""
    found: dict[str, object] = {"hooks": importlib.import_module("hooks")}
    for info in pkgutil.walk_packages([str(REPO_ROOT / "hooks")], "hooks."):
        if not info.name.endswith("__main__"):
            found[info.name] = importlib.import_module(info.name)
    return found


MODULES: Final = _package_modules()
BY_LAST_NAME: Final = {
    last: [module for name, module in MODULES.items() if name.rsplit(".", 1)[-1] == last]
    for last in {name.rsplit(".", 1)[-1] for name in MODULES}
}


def _has(module: object, name: str) -> bool:
    """Whether a module, or a class it defines, has `name` (a lazily loaded one included)."""
    return hasattr(module, name) or name in _names_in(module)


def _names_in(module: object) -> set[str]:
    """The names of a module and of the classes it defines."""
    names = set(dir(module))
    for value in vars(module).values():
        if inspect.isclass(value) and value.__module__ == getattr(module, "__name__", ""):
            names |= set(dir(value))
    return names


def _commands() -> frozenset[str]:
    """The subcommands of both command lines, which the code map names as words."""
    from hooks.cli import main
    from hooks.kubectl import plugin

    words: set[str] = set()
    for parser in (main.build_parser(), plugin.build_parser()):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    words.add(name)
                    for inner in sub._actions:
                        if isinstance(inner, argparse._SubParsersAction):
                            words |= set(inner.choices)
    return frozenset(words)


def _modules_of(block: str) -> list[object]:
    """The modules of `hooks` a block of prose mentions, by path, dotted name or `module.name`."""
    found = []
    for reference in PATH.findall(block):
        dotted = reference.removeprefix("hooks/").removesuffix(".py").replace("/", ".")
        found.extend(module for name, module in MODULES.items() if name == f"hooks.{dotted}")
    for dotted in DOTTED.findall(block):
        found.extend(module for name, module in MODULES.items() if dotted.startswith(name))
    for span in SPAN.findall(block):
        qualified = QUALIFIED.fullmatch(span)
        if qualified and qualified.group(1) not in FIELD_ROOTS:
            found.extend(BY_LAST_NAME.get(qualified.group(1), []))
    return found


def _broken_code_names(block: str, *, code_map: bool) -> Iterator[str]:
    """The code spans of a block that name code no module of `hooks` has (see the module);
    bare names only in the code map (elsewhere they are parameters, metrics, fields, ...)."""
    context = _modules_of(block)
    for span in SPAN.findall(block):
        qualified = QUALIFIED.fullmatch(span)
        if qualified is not None:
            owner, name = qualified.groups()
            modules = BY_LAST_NAME.get(owner, [])
            checked = owner not in FIELD_ROOTS | {"hooks"} and name not in _SUFFIXES
            if checked and modules and not any(_has(module, name) for module in modules):
                yield f"name {span}"
            continue
        bare = BARE.fullmatch(span)
        if bare is None or not code_map:
            continue
        name, called = bare.groups()
        in_context = any(_has(module, name) for module in context)
        if in_context:
            continue
        if "_" in name or called is not None:
            if not any(_has(module, name) for module in MODULES.values()):
                yield f"name {span}"
        elif context and name not in _commands() and name not in BY_LAST_NAME:
            yield f"name {span} (in {', '.join(sorted(m.__name__ for m in context))})"


# File extensions, which make `core.py`-like spans file names rather than code names.
_SUFFIXES: Final = frozenset({"py", "md", "yaml", "json", "toml"})


def _broken_references(path: Path) -> list[str]:
    broken = []
    for text in _prose(path):
        for block in BLOCK.split(text):
            broken.extend(_broken_code_names(block, code_map=path == CODE_MAP))
        for dotted in DOTTED.findall(text):
            if not _resolves(dotted.rstrip(".")):
                broken.append(f"module {dotted}")
        for reference in PATH.findall(text):
            if reference.startswith(("../", "http", "www.")) or "shared/" in reference:
                continue
            if not _file_exists(reference, path):
                broken.append(f"file {reference}")
    return broken


@pytest.mark.parametrize(
    "path", [*PYTHON, *MARKDOWN, *YAML], ids=lambda p: str(p.relative_to(REPO_ROOT))
)
def test_every_module_and_file_mentioned_exists(path: Path) -> None:
    assert _broken_references(path) == []


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, punctuation dropped, spaces as
    hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    anchors = set()
    in_code = False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            anchors.add(github_anchor(line.lstrip("#")))
    return anchors


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_markdown_link_and_anchor_resolves(path: Path) -> None:
    broken = []
    for target in LINK.findall(path.read_text()):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists() or (
            anchor and linked.suffix == ".md" and anchor not in _anchors(linked)
        ):
            broken.append(target)
    assert broken == []


def test_the_reference_check_finds_what_it_is_for(tmp_path: Path) -> None:
    stale = tmp_path / "stale.md"
    stale.write_text(
        "See `hooks.envelope`, `hooks.api.naming.lws_name`, hooks/rules.py and docs/api.md,"
        " [safety](../docs/safety.md#what-may-go) and [gone](#nowhere); `records.Parent` and"
        " `records.Gone`, `status.creating` (a field).\n\n## Here\n"
    )
    assert _broken_references(stale) == [
        "name records.Gone",
        "module hooks.envelope",
        "file hooks/rules.py",
        "file docs/api.md",
    ]
    code_map = (
        "`core/desired.py` collects the answer; `checked_children` refuses, `check` too,"
        " `_gather()` gathers, `render` is a command."
    )
    assert list(_broken_code_names(code_map, code_map=True)) == [
        "name check (in hooks.core.desired)",
        "name _gather()",
    ]
    assert list(_broken_code_names(code_map, code_map=False)) == []
    assert github_anchor("What may go") == "what-may-go"
    assert github_anchor("`kubectl ds`: a plugin") == "kubectl-ds-a-plugin"
