"""The kubectl plugin, `kubectl ds`: a set's rollouts through the user's own kubectl."""

from typing import Final

from hooks.api.documents import JsonObject, object_of

PROG: Final = "kubectl ds"
"""The plugin's name, as its usage lines and its advice name it."""
TEMPLATE: Final = "leaderWorkerTemplate"
"""The field of a role's LWS spec that a revision records and an undo restores."""


def dig(value: object, *keys: str) -> JsonObject:
    """`value[keys[0]][keys[1]]...`, an empty object where a step finds no object."""
    for key in keys:
        value = object_of(value).get(key)
    return object_of(value)
