"""`python -m hooks`: the command line, `hooks.edge.cli`."""

import sys

from hooks.edge import cli

sys.exit(cli.main())
