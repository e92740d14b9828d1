"""What both command lines (`python -m hooks` and `kubectl ds`) share: every message on stderr is
one line, `PROG COMMAND: severity: text`, as argparse writes usage errors; a command that fails
raises `CliError` (never a traceback); exit codes 0 done (also when the reader of the output goes
away), 1 failed, 2 usage error. Standard library only, for a quick start.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn


class CliError(Exception):
    """A command cannot do what was asked; `run` prints each of `lines` as an error line and
    exits with `exit_code`."""

    def __init__(self, *lines: str, exit_code: int = 1) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines
        self.exit_code = exit_code


def report(command: str, severity: str, text: str) -> None:
    """One line on stderr: `COMMAND: SEVERITY: TEXT` (`command`: the subcommand's prog)."""
    print(f"{command}: {severity}: {text}", file=sys.stderr)


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return int(text)


class Version(argparse.Action):
    """`--version`: `PROG VERSION` on stdout, the package's metadata read only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        kwargs.setdefault("help", "show program's version number and exit")
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> NoReturn:
        from hooks import version

        print(f"{parser.prog} {version.package_version()}")
        parser.exit()


def run(args: argparse.Namespace) -> int:
    """Run a parsed command (`args.run`); a `CliError` is reported as `args.report_as: error:
    ...` (the subcommand's prog) and gives its exit code."""
    command: Callable[[argparse.Namespace], int] = args.run
    try:
        return command(args)
    except CliError as error:
        for line in error.lines:
            report(args.report_as, "error", line)
        return error.exit_code
    except BrokenPipeError:
        # The reader went away (`plan ... | head`): what it read is all it wanted. Point stdout
        # at nothing so the interpreter's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
