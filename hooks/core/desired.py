"""The children of one sync answer, and the deletion guard (docs/safety.md, "What may go").

`DesiredChildren` collects the answer by (kind, name), one apiVersion per kind, with the observed
children the spec allows to go; its children come only through `checked_children`, which refuses
an answer that drops any other (`UnsafeDeletionError`, a bug). Two objects under one name are a
state of the cluster (`conflicts`, ChildConflict): the name is held as observed, the rest goes on.
"""

from __future__ import annotations

from collections.abc import Iterable

from hooks import api
from hooks.core import children, records

ChildKey = tuple[str, str]
"""(kind, name)."""


class UnsafeDeletionError(Exception):
    """A pass would delete an observed child that the spec does not allow to go."""


def key_of(item: records.ObservedObject) -> ChildKey:
    return (item.kind.kind, item.name)


class DesiredChildren:
    """The answer's children by (kind, name), and the observed ones allowed to go."""

    def __init__(self, observed: Iterable[records.ObservedObject]) -> None:
        self._observed = {key_of(item): item for item in observed}
        self._kept: set[ChildKey] = set()
        self._children: dict[ChildKey, api.JsonObject] = {}
        self._allowed: set[ChildKey] = set()
        self.conflicts: set[ChildKey] = set()

    def add(self, child: api.JsonObject) -> None:
        key = (child["kind"], child["metadata"]["name"])
        if key in self.conflicts:
            return
        existing = self._children.get(key)
        if existing is None or existing == child:
            self._children[key] = child
            return
        self.conflicts.add(key)
        observed = self._observed.get(key)
        if observed is not None:
            self._children[key] = children.unchanged(observed)

    def keep(self, child: api.JsonObject) -> None:
        """An observed child of a kind this version does not know, answered as it is."""
        key = (child["kind"], child["metadata"]["name"])
        self._kept.add(key)
        self._children[key] = child

    def allow_deletion(self, key: ChildKey) -> None:
        self._allowed.add(key)

    def checked_children(self) -> tuple[api.JsonObject, ...]:
        """The answer's children by kind, then name; `UnsafeDeletionError` if an observed child
        would go without a reason."""
        unexpected = sorted(self._existing() - set(self._children) - self._allowed)
        if unexpected:
            listed = ", ".join(f"{kind} {name}" for kind, name in unexpected)
            raise UnsafeDeletionError(f"this pass would delete children it must keep: {listed}")
        return tuple(self._children[key] for key in sorted(self._children))

    def deleted(self) -> int:
        """How many observed children this answer deletes."""
        return len(self._existing() - set(self._children))

    def requested(self) -> frozenset[ChildKey]:
        """The answer's children that are not observed: Metacontroller creates them."""
        return frozenset(set(self._children) - self._existing())

    def _existing(self) -> set[ChildKey]:
        return set(self._observed) | self._kept
