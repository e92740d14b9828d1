"""The code blocks of the README, and the walk-throughs of docs/rollout.md, as the tests that keep
them true read them (`tests/test_readme.py` without a cluster, `tests/cluster/test_readme.py` on
one).

A `console` block is a session: each `$ COMMAND` line (a `# comment` after the command is for the
reader) is followed by what the command prints, standard output and error together, as a
terminal shows them. The expected lines are the document's own, so a changed output is one edit
of the document. They compare after `normalised`, which blanks what differs from run to run
(timestamps, kubectl's AGE column). A line `...` stands for any number of lines, and a line that
ends in ` ...` for one line that starts with what comes before.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tests.shared import REPO_ROOT

README: Final = REPO_ROOT / "README.md"
DOCUMENTS: Final = (README, REPO_ROOT / "docs" / "rollout.md")
"""The documents whose console blocks the tests run: the README's walk-throughs, and the
partition's, which moved to docs/rollout.md to keep the README a short read (issue 36)."""
LOCAL: Final = ("python", "-m", "hooks")
"""How a command that runs without a cluster starts."""
ON_A_CLUSTER: Final = "kubectl"
"""How a command that needs a cluster starts."""
ANY_LINES: Final = "..."
PREFIX_MARK: Final = " ..."
PROMPT: Final = "$ "
_FENCE: Final = re.compile(r"^```(\w*)$")
_TIMESTAMP: Final = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
# kubectl get's last column: 7s, 2m3s, 3h10m, 2d.
_AGE: Final = re.compile(r"(?<=\s)(?:\d+[smhd])+$")


@dataclass(frozen=True, slots=True)
class Step:
    """One command of a console block and the lines the document shows it printing."""

    command: str
    expected: tuple[str, ...]

    @property
    def argv(self) -> list[str]:
        """The command's words, its comment left out."""
        return shlex.split(self.command, comments=True)


@dataclass(frozen=True, slots=True)
class Block:
    """A fenced code block of a document: its language, text, section and where it starts."""

    language: str
    text: str
    section: str
    """The title of the `##` section that holds it."""
    line: int
    """The line of its opening fence (1-based)."""
    document: Path = README

    @property
    def name(self) -> str:
        return f"{self.document.relative_to(REPO_ROOT)}:{self.line} ({self.section})"

    def steps(self) -> list[Step]:
        """A console block's commands with their output."""
        steps: list[Step] = []
        for line in self.text.splitlines():
            if line.startswith(PROMPT):
                steps.append(Step(line.removeprefix(PROMPT), ()))
            elif not steps:
                raise ValueError(f"{self.name}: output before the first command: {line!r}")
            else:
                steps[-1] = Step(steps[-1].command, (*steps[-1].expected, line))
        return steps


def blocks(document: Path = README) -> list[Block]:
    """Every fenced code block of a document, in order."""
    found = []
    section = ""
    opened: tuple[str, int] | None = None
    lines: list[str] = []
    for number, line in enumerate(document.read_text().splitlines(), start=1):
        fence = _FENCE.match(line)
        if opened is None and line.startswith("## "):
            section = line.removeprefix("## ")
        elif opened is None and fence:
            opened, lines = (fence.group(1), number), []
        elif opened is not None and line == "```":
            text = "\n".join(lines) + "\n"
            found.append(Block(opened[0], text, section, opened[1], document))
            opened = None
        elif opened is not None:
            lines.append(line)
    return found


def console_blocks() -> list[Block]:
    """The console blocks of every document the tests run."""
    return [
        block for document in DOCUMENTS for block in blocks(document) if block.language == "console"
    ]


def runs_locally(block: Block) -> bool:
    """Whether every command of a console block is `python -m hooks ...`."""
    return all(tuple(step.argv[:3]) == LOCAL for step in block.steps())


def runs_on_a_cluster(block: Block) -> bool:
    """Whether every command of a console block is `kubectl ...`."""
    return all(step.argv[0] == ON_A_CLUSTER for step in block.steps())


def normalised(line: str) -> str:
    """A line with what varies from run to run blanked: timestamps, kubectl's AGE."""
    return _AGE.sub("<age>", _TIMESTAMP.sub("<time>", line.rstrip()))


def mismatch(expected: tuple[str, ...], printed: str) -> str | None:
    """None when `printed` is what `expected` shows, else a message saying both."""
    pattern = ""
    for line in expected:
        if line == ANY_LINES:
            pattern += r"(?:[^\n]*\n)*?"
        elif line.endswith(PREFIX_MARK):
            pattern += re.escape(normalised(line.removesuffix(PREFIX_MARK))) + r"[^\n]*\n"
        else:
            pattern += re.escape(normalised(line)) + r"\n"
    lines = [normalised(line) for line in printed.splitlines()]
    text = "".join(f"{line}\n" for line in lines)
    if re.fullmatch(pattern, text):
        return None
    shown = "\n".join(f"    {line}" for line in expected)
    got = "\n".join(f"    {line}" for line in printed.splitlines())
    return f"the document shows:\n{shown}\nit printed:\n{got}"
