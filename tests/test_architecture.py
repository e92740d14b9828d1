"""The code keeps its shape: readable functions, and no clock below the front ends
(docs/architecture.md).

No module in the package (`hooks/`, every folder) over 500 lines; measured with radon, no
function over 60 lines or cyclomatic complexity 15, unless its `def` line carries a comment that
starts with `# long:` and says why. Commands other than `serve` load no server stack, and
`kubectl ds --help` loads only its parser.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from radon.complexity import cc_visit

from tests.shared import REPO_ROOT

PACKAGE = REPO_ROOT / "hooks"
MAX_LINES = 60
MAX_MODULE_LINES = 500
MAX_COMPLEXITY = 15
MODULES = sorted(PACKAGE.rglob("*.py"))


def _excused(source: list[str], line: int) -> bool:
    return "# long:" in source[line - 1]


def _id(path: Path) -> str:
    return str(path.relative_to(PACKAGE))


@pytest.mark.parametrize("path", MODULES, ids=_id)
def test_modules_are_short(path: Path) -> None:
    assert len(path.read_text().splitlines()) <= MAX_MODULE_LINES


@pytest.mark.parametrize("path", MODULES, ids=_id)
def test_functions_are_short(path: Path) -> None:
    text = path.read_text()
    source = text.splitlines()
    long = [
        f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_LINES
        and not _excused(source, node.lineno)
    ]
    assert long == []


@pytest.mark.parametrize("path", MODULES, ids=_id)
def test_functions_are_simple(path: Path) -> None:
    text = path.read_text()
    source = text.splitlines()
    complex_ = [
        f"{block.name} (complexity {block.complexity})"
        for block in cc_visit(text)
        if block.complexity > MAX_COMPLEXITY and not _excused(source, block.lineno)
    ]
    assert complex_ == []


def test_every_folder_of_the_package_is_measured() -> None:
    folders = {path.parent.name for path in MODULES}
    assert folders >= {"hooks", "api", "core", "gocompat", "wire", "server", "cli", "kubectl"}


# --- commands other than serve load no server stack -----------------------------------------------

SERVER_STACK = ("flask", "gunicorn", "gevent", "prometheus_client", "hooks.server.serving")


@pytest.mark.parametrize(
    "command",
    [
        "from hooks.cli import main; main.build_parser()",
        "from hooks.kubectl import plugin; plugin.build_parser()",
    ],
    ids=["python -m hooks", "kubectl ds"],
)
def test_a_command_line_loads_no_server_stack(command: str) -> None:
    """Only `serve` imports the server (`hooks.cli.main` imports it when `serve` runs)."""
    listing = "import sys; print(*sorted(sys.modules))"
    loaded = subprocess.run(
        [sys.executable, "-c", f"{command}; {listing}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split()
    assert [name for name in loaded if name.startswith(SERVER_STACK)] == []


# What `kubectl ds --help` must not load: the deterministic stand-in for its start-up time
# (bench/plugin_startup.py measures that). A command's module, what decides and what reads objects,
# the API's models, YAML and the package's metadata are imported when a command runs.
NOT_FOR_HELP = (
    "hooks.kubectl.commands",
    "hooks.kubectl.client",
    "hooks.core",
    "hooks.wire",
    "hooks.gocompat",
    "hooks.api.models",
    "hooks.api.times",
    "pydantic",
    "yaml",
    "importlib.metadata",
    "subprocess",
    *SERVER_STACK,
)


def test_kubectl_ds_help_loads_only_its_parser() -> None:
    listing = (
        "import atexit, sys; atexit.register(lambda: print(*sorted(sys.modules), file=sys.stderr))"
    )
    help_ = "from hooks.kubectl import plugin; plugin.main(['--help'])"
    loaded = subprocess.run(
        [sys.executable, "-c", f"{listing}; {help_}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stderr.split()
    assert "hooks.kubectl.plugin" in loaded
    assert [name for name in loaded if name.startswith(NOT_FOR_HELP)] == []


# --- no clock below the front ends ----------------------------------------------------------------

BELOW_THE_FRONT_ENDS = sorted(
    path
    for folder in ("api", "core", "gocompat", "wire")
    for path in (REPO_ROOT / "hooks" / folder).glob("*.py")
)
# Ways to read the clock: `datetime.now()`, `date.today()`, `time.time()` and the rest of the
# `time` module (import-linter keeps `time` out of these folders too; this also catches
# `from datetime import datetime` followed by `datetime.now()`).
CLOCK_CALLS = frozenset({"now", "utcnow", "today"})
CLOCK_MODULES = frozenset({"time"})


def _clock_reads(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in CLOCK_CALLS:
                found.append(f"line {node.lineno}: .{node.func.attr}()")
        elif isinstance(node, ast.Import):
            found += [
                f"line {node.lineno}: import {a.name}"
                for a in node.names
                if a.name in CLOCK_MODULES
            ]
        elif isinstance(node, ast.ImportFrom) and node.module in CLOCK_MODULES:
            found.append(f"line {node.lineno}: from {node.module} import ...")
    return found


@pytest.mark.parametrize("path", BELOW_THE_FRONT_ENDS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_nothing_below_the_front_ends_reads_the_clock(path: Path) -> None:
    """The time of a call is read once, by the server, and passed in as `now`."""
    assert _clock_reads(ast.parse(path.read_text())) == []


def test_the_clock_lint_catches_what_it_is_for() -> None:
    source = (
        "from datetime import datetime, date\nimport time\nx = datetime.now()\ny = date.today()\n"
    )
    assert len(_clock_reads(ast.parse(source))) == 3
