"""The kubectl plugin, `kubectl ds`: a set's rollouts through the user's own kubectl."""

from typing import Final

PROG: Final = "kubectl ds"
"""The plugin's name, as its usage lines and its advice name it."""
TEMPLATE: Final = "leaderWorkerTemplate"
"""The field of a role's LWS spec that a revision records and an undo restores."""
