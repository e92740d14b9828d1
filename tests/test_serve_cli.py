"""`python -m hooks serve` refusing to start, and `--version`: one line on stderr, the right exit
status, never a traceback (issue 17, items 9 and 14).

Each case runs the command line in a fresh interpreter: `serve` must start in a process that has
not loaded prometheus_client, and the port-in-use case needs a real listening socket.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.shared import PROJECT_VERSION

REPO_ROOT = Path(__file__).resolve().parents[1]


def run(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hooks", *arguments],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_version_prints_the_package_version() -> None:
    finished = run("--version")

    assert finished.returncode == 0
    assert finished.stdout == f"python -m hooks {PROJECT_VERSION}\n"


@pytest.mark.parametrize(
    ("arguments", "flag"),
    [
        (["--bind", "127.0.0.1:99999"], "--bind"),
        (["--bind", "127.0.0.1:0"], "--bind"),
        (["--bind", "nohost"], "--bind"),
        (["--bind", ":8080"], "--bind"),
        (["--metrics-bind", "127.0.0.1:http"], "--metrics-bind"),
    ],
    ids=["port-too-large", "port-zero", "no-port", "no-host", "metrics-port-not-a-number"],
)
def test_a_malformed_address_is_one_usage_error_line(arguments: list[str], flag: str) -> None:
    """Regression (issue 17, item 9): `--bind 127.0.0.1:99999` printed a 30-line traceback and
    `--bind nohost` was accepted, to fail later with gunicorn's default port in the message."""
    finished = run("serve", *arguments)

    assert finished.returncode == 2
    [line] = finished.stderr.splitlines()
    assert line.startswith(f"python -m hooks serve: error: {flag}: ")
    assert "HOST:PORT" in line


def test_a_port_in_use_is_one_line() -> None:
    """Regression (issue 17, item 9): gunicorn retried for five seconds and said "Can't
    connect"."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        finished = run("serve", "--bind", f"127.0.0.1:{port}")

    assert finished.returncode == 1
    assert finished.stderr.splitlines() == [
        f"python -m hooks serve: error: cannot listen on 127.0.0.1:{port}: Address already in use"
    ]


def test_a_host_that_does_not_resolve_is_one_line() -> None:
    finished = run("serve", "--bind", "nohost.invalid:8080")

    assert finished.returncode == 1
    [line] = finished.stderr.splitlines()
    assert line.startswith("python -m hooks serve: error: cannot listen on nohost.invalid:8080: ")
