"""The reconcile core stays readable: short functions of low complexity (docs/architecture.md).

Measured with radon: no function in `hooks/core/` over 60 lines or cyclomatic complexity 15,
unless its `def` line carries a comment that starts with `# long:` and says why.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from radon.complexity import cc_visit

from tests.shared import REPO_ROOT

CORE = REPO_ROOT / "hooks" / "core"
MAX_LINES = 60
MAX_COMPLEXITY = 15
MODULES = sorted(CORE.glob("*.py"))


def _excused(source: list[str], line: int) -> bool:
    return "# long:" in source[line - 1]


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_core_functions_are_short(path: Path) -> None:
    text = path.read_text()
    source = text.splitlines()
    long = [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.FunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_LINES
        and not _excused(source, node.lineno)
    ]
    assert long == []


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_core_functions_are_simple(path: Path) -> None:
    text = path.read_text()
    source = text.splitlines()
    complex_ = [
        f"{block.name} (complexity {block.complexity})"
        for block in cc_visit(text)
        if block.complexity > MAX_COMPLEXITY and not _excused(source, block.lineno)
    ]
    assert complex_ == []


def test_the_core_has_its_modules() -> None:
    assert len(MODULES) >= 10
