"""requirements.lock pins every runtime dependency with hashes, and the image installs from it."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

from tests.shared import REPO_ROOT

LOCK = REPO_ROOT / "requirements.lock"
REGENERATE = (
    "regenerate it: pip-compile --generate-hashes --strip-extras --allow-unsafe "
    "--no-emit-index-url --no-emit-find-links --output-file requirements.lock pyproject.toml"
)


def _pins(path: Path) -> dict[str, tuple[str, int]]:
    """name -> (version, number of hashes)."""
    pins: dict[str, tuple[str, int]] = {}
    current = ""
    for line in path.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.-]+)==([^ \\]+)", line)
        if match:
            current = match.group(1).lower().replace("_", "-")
            pins[current] = (match.group(2), 0)
        elif "--hash=sha256:" in line and current:
            version, hashes = pins[current]
            pins[current] = (version, hashes + 1)
    return pins


def test_every_runtime_dependency_is_pinned_with_hashes_within_its_range() -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    pins = _pins(LOCK)
    assert pins, f"requirements.lock is empty: {REGENERATE}"
    for text in project["dependencies"]:
        requirement = Requirement(text)
        name = requirement.name.lower().replace("_", "-")
        assert name in pins, f"{name} is not in requirements.lock: {REGENERATE}"
        version, hashes = pins[name]
        assert requirement.specifier.contains(version), f"{name}=={version} vs {text}: {REGENERATE}"
    for name, (version, hashes) in pins.items():
        assert hashes >= 1, f"{name}=={version} has no hash"


def test_the_image_installs_the_lock_with_hashes_on_a_pinned_base() -> None:
    dockerfile = (REPO_ROOT / "Dockerfile").read_text()
    assert re.search(r"ARG PYTHON_IMAGE=python:[0-9.]+-slim@sha256:[0-9a-f]{64}\n", dockerfile)
    # Both when building the wheels and when installing them into the image.
    assert "--require-hashes --no-deps -r requirements.lock" in dockerfile
    assert "--require-hashes -r /requirements.lock" in dockerfile
    assert "!requirements.lock" in (REPO_ROOT / ".dockerignore").read_text()


def test_ci_linters_are_pinned_exactly() -> None:
    test_extra = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]["test"]
    pinned = {Requirement(text).name: str(Requirement(text).specifier) for text in test_extra}
    for tool in ("ruff", "mypy", "import-linter", "types-PyYAML"):
        assert pinned[tool].startswith("=="), tool


def _runtime_closure() -> set[str]:
    """The runtime dependencies of pyproject and everything they require, by distribution name."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    pending = [Requirement(text) for text in project["dependencies"]]
    closure: set[str] = set()
    while pending:
        requirement = pending.pop()
        name = _normal(requirement.name)
        if name in closure or (
            requirement.marker is not None and not requirement.marker.evaluate({"extra": ""})
        ):
            continue
        closure.add(name)
        pending.extend(Requirement(text) for text in metadata.requires(name) or ())
    return closure


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_the_server_needs_only_runtime_dependencies() -> None:
    """`pip install .` must be enough to serve: every distribution the server imports while
    starting (the app and gunicorn's gevent worker) is a runtime dependency or one of theirs.
    The test extras must not hide a missing one (gunicorn's gevent worker imports `packaging`
    without declaring it)."""
    listing = "print('\\n'.join(sorted({m.partition('.')[0] for m in sys.modules})))\n"
    start = "from hooks.server import app, serving, worker\n"
    at_startup = set(_run_python("import sys\n" + listing))  # site hooks, e.g. setuptools'
    modules = set(_run_python("import sys\n" + start + listing)) - at_startup
    owners = metadata.packages_distributions()
    imported = {_normal(dist) for module in modules for dist in owners.get(module, ())}
    missing = imported - _runtime_closure() - {"disaggregatedset-hooks"}
    assert not missing, f"imported at start but not a runtime dependency: {sorted(missing)}"


def _run_python(script: str) -> list[str]:
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
