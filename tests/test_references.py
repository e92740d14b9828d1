"""Prose that cannot go stale: every module, file and link the repository mentions exists.

Scanned: the docstrings and comments of every Python file (not its code: a logger's name is not
a reference), every Markdown file, and the comments of the kit's YAML.
Checked:

- dotted names under `hooks.` (`hooks.core.rollout`, `hooks.api.naming.budget`) resolve to a
  module, or to an attribute of one;
- paths with a file extension (`hooks/core/rollout.py`, `docs/safety.md`, `core/sync.py` inside
  the package) name a file of the repository;
- Markdown links name a file that exists and, with `#anchor`, a heading of it.

References outside the repository (`../shared`, URLs) and placeholders (`<set>`, `{name}`) are
not checked.
"""

from __future__ import annotations

import ast
import importlib
import io
import itertools
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


def _broken_references(path: Path) -> list[str]:
    broken = []
    for text in _prose(path):
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
        " [safety](../docs/safety.md#what-may-go) and [gone](#nowhere).\n\n## Here\n"
    )
    assert _broken_references(stale) == [
        "module hooks.envelope",
        "file hooks/rules.py",
        "file docs/api.md",
    ]
    assert github_anchor("What may go") == "what-may-go"
    assert github_anchor("`kubectl ds`: a plugin") == "kubectl-ds-a-plugin"
