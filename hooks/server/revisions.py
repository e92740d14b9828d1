"""The revisions one app has computed (`hooks.gocompat.revision` keeps no state), remembered:
every sync of a set hashes the same templates, and the Go-compatible encoding is most of a small
sync's cost. It changes how fast an answer comes, never what it is. One memo per app, never per
module (a worker forks with none); what a call's child process learns ends with it.
"""

from __future__ import annotations

import hashlib
import pickle
from collections import OrderedDict
from collections.abc import Sequence
from typing import Final

from hooks import api
from hooks.gocompat import revision

# One per set and revision in flight, about a hundred bytes each: a rollout of 1,000 sets fits.
MEMO_SIZE: Final = 4096


class RevisionMemo:
    """`of_roles` and `of_spec` with the last `size` answers remembered (least recently used
    first out)."""

    def __init__(self, size: int = MEMO_SIZE) -> None:
        self._size = size
        self._known: OrderedDict[bytes, str] = OrderedDict()

    def __len__(self) -> int:
        return len(self._known)

    def of_spec(self, spec: api.DisaggregatedSetSpec) -> str:
        """`revision.of_spec(spec)`, from the memo when these roles were hashed before."""
        return self.of_roles([(role.name, role.leader_worker_template) for role in spec.roles])

    def of_roles(self, roles: Sequence[tuple[str, api.JsonObject]]) -> str:
        """`revision.compute_revision(roles)`, from the memo when they were hashed before."""
        # Keyed by the pickle, which tells apart every value a decoded body holds (1, 1.0, true).
        try:
            key = hashlib.sha256(
                pickle.dumps(list(roles), protocol=pickle.HIGHEST_PROTOCOL)
            ).digest()
        except (RecursionError, pickle.PicklingError):  # nested too deeply: no key, no memo
            return revision.compute_revision(roles)
        known = self._known.get(key)
        if known is not None:
            self._known.move_to_end(key)
            return known
        computed = revision.compute_revision(roles)
        self._known[key] = computed
        if len(self._known) > self._size:
            self._known.popitem(last=False)
        return computed
