"""The container image's recipe, read as text (no Docker needed): the Dockerfile is multi-stage
and its final stage runs `python -m hooks serve` on python:3.11-slim as a numeric non-root user,
the same user the hook Deployment runs as; and .dockerignore keeps tests, history, benchmarks and
examples out of the build context.
"""

from __future__ import annotations

import json
from fnmatch import fnmatch

import pytest
import yaml

from tests.deploy.kit import DEPLOYMENT_FILE, _container
from tests.shared import REPO_ROOT

RUN_AS_USER = 65532


def _dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined and comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for raw in (REPO_ROOT / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        keyword, _, arguments = (pending + line).strip().partition(" ")
        instructions.append((keyword.upper(), arguments.strip()))
        pending = ""
    return instructions


def _final_stage(instructions: list[tuple[str, str]]) -> list[tuple[str, str]]:
    starts = [i for i, (keyword, _) in enumerate(instructions) if keyword == "FROM"]
    assert len(starts) >= 2, "the Dockerfile must be multi-stage"
    return instructions[starts[-1] :]


def test_dockerfile_runs_python_m_hooks_as_a_numeric_non_root_user() -> None:
    instructions = _dockerfile_instructions()
    final = _final_stage(instructions)
    by_keyword: dict[str, list[str]] = {}
    for keyword, arguments in final:
        by_keyword.setdefault(keyword, []).append(arguments)

    [user] = by_keyword["USER"]
    uid = user.split(":")[0]
    assert uid.isdigit(), "USER must be numeric so runAsNonRoot can verify it"
    assert int(uid) != 0
    assert int(uid) == RUN_AS_USER

    [entrypoint] = by_keyword["ENTRYPOINT"]
    assert json.loads(entrypoint) == ["python", "-m", "hooks"]
    [cmd] = by_keyword["CMD"]
    assert json.loads(cmd) == ["serve", "--bind", "0.0.0.0:8080"]
    assert by_keyword["EXPOSE"] == ["8080"]

    env_text = " ".join(by_keyword["ENV"])
    for variable in ("PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1"):
        assert variable in env_text

    args = " ".join(arguments for keyword, arguments in instructions if keyword == "ARG")
    froms = " ".join(arguments for keyword, arguments in instructions if keyword == "FROM")
    assert "python:3.11-slim" in args + froms


def test_deployment_runs_as_the_dockerfile_user() -> None:
    deployment = yaml.safe_load(DEPLOYMENT_FILE.read_text())
    container = _container(deployment)
    assert container["securityContext"]["runAsUser"] == RUN_AS_USER
    assert "command" not in container, "the image's ENTRYPOINT (python -m hooks) must be kept"


def _dockerignored(path: str, patterns: list[str]) -> bool:
    """Whether Docker leaves `path` out of the build context: the last matching pattern wins."""
    ignored = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        glob = pattern.lstrip("!").rstrip("/")
        if fnmatch(path, glob) or fnmatch(path, f"**/{glob}"):
            ignored = not negated
    return ignored


@pytest.mark.parametrize(
    ("path", "ignored"),
    [
        ("tests", True),
        (".git", True),
        ("bench", True),
        ("examples", True),
        (".venv", True),
        ("pyproject.toml", False),
        ("README.md", False),
        ("hooks", False),
    ],
)
def test_dockerignore_keeps_the_build_context_small(path: str, ignored: bool) -> None:
    lines = (REPO_ROOT / ".dockerignore").read_text().splitlines()
    patterns = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    assert _dockerignored(path, patterns) is ignored
