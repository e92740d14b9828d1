"""`python -m hooks`: the command line, `hooks.cli.main`."""

import sys

from hooks.cli import main

sys.exit(main.main())
