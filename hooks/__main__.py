"""`python -m hooks`: the command line, `hooks.cli.main`, with the sandbox's command, which sits
above it (`hooks.sandbox.command`)."""

import sys

from hooks.cli import main
from hooks.sandbox import command

sys.exit(main.main(more=(command.add_sandbox,)))
