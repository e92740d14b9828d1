"""The revisions one hook server process has computed, remembered.

Every sync of a set hashes the same templates again, and the Go-compatible encoding is most of a
small sync's cost, so each worker keeps the last `MEMO_SIZE` revisions it computed
(`hooks.gocompat.revision`, which keeps no state). The key is a digest of the roles' exact values,
their pickle: unlike a JSON dump it tells apart every value a decoded body can hold (1, 1.0 and
true, say). It changes how fast an answer comes, never what it is: roles too deeply nested to
pickle are hashed without the memo, and a template the encoder refuses is refused every time.

The memo belongs to one app (`hooks.server.app.default_hooks` makes one per app), never to the
module: a worker forks with none, and tests start clean.
A body answered in a child process (`hooks.server.isolation`, bodies above its size) hashes
without teaching the worker's memo: what the child learns ends with it.
"""

from __future__ import annotations

import hashlib
import pickle
from collections import OrderedDict
from collections.abc import Sequence
from typing import Final

from hooks import api
from hooks.gocompat import revision

MEMO_SIZE: Final = 4096
"""Revisions remembered per app (least recently used first out): one per set and revision in
flight (a spec and the history records of a set share theirs), so a rollout of 1,000 sets, two
revisions each, fits; about a hundred bytes each."""


class RevisionMemo:
    """`of_roles` and `of_spec` with the last `size` answers remembered."""

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
