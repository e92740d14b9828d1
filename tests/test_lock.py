"""requirements.lock pins every runtime dependency with hashes, and the image installs from it."""

from __future__ import annotations

import re
import tomllib
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
