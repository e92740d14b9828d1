"""The revision of a DisaggregatedSet: the bytes upstream marshals for
`[{"name": <role name>, "template": <LeaderWorkerTemplate>}, ...]` in `spec.roles` order, hashed.

Each template is written by `hooks.gocompat.gojson` (its rules), a `null` template as the zero
LeaderWorkerTemplate, as in Go; there is no default hash. Pure and stateless (the hook server
remembers revisions: `hooks.server.revisions`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from hooks import api
from hooks.api import naming
from hooks.gocompat import gojson, gotext


def encode_templates(roles: Sequence[tuple[str, api.JsonObject]]) -> bytes:
    """The exact bytes upstream hashes for (role name, raw `spec.leaderWorkerTemplate`) pairs, in
    order; raises `gotext.EncodingError` when a typed Go decode of a template would fail."""
    table = gojson.committed_table()
    parts: list[str] = []
    for index, (name, template) in enumerate(roles):
        if not isinstance(name, str):
            raise gotext.EncodingError.mismatch(name, "string").at(f"[{index}].name")
        try:
            body = table.encode(template)
        except gotext.EncodingError as error:
            raise error.at(f"[{index}].spec.leaderWorkerTemplate") from None
        parts.append('{"name":' + gotext.go_quote(name) + ',"template":' + body + "}")
    return ("[" + ",".join(parts) + "]").encode("utf-8")


def compute_revision(roles: Sequence[tuple[str, api.JsonObject]]) -> str:
    """The 8-hex revision of the roles: a SHA-256 prefix of `encode_templates(roles)`."""
    return hashlib.sha256(encode_templates(roles)).hexdigest()[: naming.REVISION_LENGTH]


def of_spec(spec: api.DisaggregatedSetSpec) -> str:
    """The revision of a spec: of its roles' names and `leaderWorkerTemplate`s, in order."""
    return compute_revision([(role.name, role.leader_worker_template) for role in spec.roles])
