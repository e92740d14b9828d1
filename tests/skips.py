"""One line per skip reason at the end of every run: `N skipped: REASON`, most first.

A test that needs something from outside the repository skips saying what is missing
(docs/CONTRIBUTING.md, "What skips"). Hundreds of them skip for a handful of reasons (no
../shared golden vectors, no control plane, no Go sources), so the run ends with those reasons
and how many tests each skipped, not a line per test: the lines come last, just before pytest's
closing counts.
`tests/conftest.py` loads this plugin for every run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Generator

import pytest
from _pytest.terminal import TerminalReporter

HEADING = "skips by reason"


def reason_of(report: pytest.TestReport) -> str:
    """The reason a skipped test gave (pytest keeps it as `(path, line, "Skipped: REASON")`)."""
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return text.removeprefix("Skipped: ")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter: TerminalReporter) -> Generator[None]:
    """After pytest's own summary (this wrapper is the outermost), the skips by reason."""
    yield
    reasons = Counter(reason_of(report) for report in terminalreporter.stats.get("skipped", []))
    if not reasons:
        return
    terminalreporter.section(HEADING, sep="=")
    for reason, count in sorted(reasons.items(), key=lambda item: (-item[1], item[0])):
        terminalreporter.line(f"{count} skipped: {reason}")
