"""API requests of one client, counted from kube-apiserver's audit log.

The control plane's audit policy (`ControlPlane.start(..., audit=True)`) writes every request at
level Metadata as a JSON line when it arrives (stage RequestReceived) and when its answer is
complete (ResponseComplete). `AuditCounter` follows the file: each `read()` takes the lines
written since the last one. A request is counted once, from its RequestReceived line, which the
API server writes before it handles the request, so a read after a phase counts every request
the phase sent. Answers with an error code are counted from their ResponseComplete line.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson

VERBS: Final = ("get", "list", "watch", "create", "update", "patch", "delete")
WRITE_VERBS: Final = ("create", "update", "patch", "delete")


@dataclass(frozen=True)
class Requests:
    """Requests by (verb, resource) and failed answers by (verb, resource, code), so far."""

    sent: Mapping[tuple[str, str], int]
    failed: Mapping[tuple[str, str, int], int]

    def minus(self, before: Requests) -> Requests:
        sent = Counter(self.sent)
        sent.subtract(before.sent)
        failed = Counter(self.failed)
        failed.subtract(before.failed)
        return Requests(+sent, +failed)

    def by_verb(self) -> dict[str, int]:
        verbs: Counter[str] = Counter()
        for (verb, _), count in self.sent.items():
            verbs[verb] += count
        return dict(verbs)

    @property
    def total(self) -> int:
        return sum(self.sent.values())

    @property
    def writes(self) -> int:
        return sum(count for (verb, _), count in self.sent.items() if verb in WRITE_VERBS)

    @property
    def conflicts(self) -> int:
        return sum(count for (_, _, code), count in self.failed.items() if code == 409)


class AuditCounter:
    """Counts the requests whose userAgent starts with `user_agent` in the audit log at `path`."""

    def __init__(self, path: Path, user_agent: str) -> None:
        self._path = path
        self._user_agent = user_agent
        self._offset = 0
        self._sent: Counter[tuple[str, str]] = Counter()
        self._failed: Counter[tuple[str, str, int]] = Counter()

    def read(self) -> Requests:
        """Every request written so far (a line still being written waits for the next read)."""
        with self._path.open("rb") as log:
            log.seek(self._offset)
            chunk = log.read()
        complete = chunk.rfind(b"\n") + 1
        self._offset += complete
        for line in chunk[:complete].splitlines():
            event = orjson.loads(line)
            if not event.get("userAgent", "").startswith(self._user_agent):
                continue
            key = (event["verb"], _resource(event))
            if event["stage"] == "RequestReceived":
                self._sent[key] += 1
            elif event["stage"] == "ResponseComplete":
                code = event.get("responseStatus", {}).get("code", 0)
                if code >= 400:
                    self._failed[(*key, code)] += 1
        return Requests(dict(self._sent), dict(self._failed))


def _resource(event: dict[str, Any]) -> str:
    """`plural` or `plural/subresource`; the path for requests without an object (discovery)."""
    ref = event.get("objectRef")
    if not ref or "resource" not in ref:
        uri: str = event.get("requestURI", "?")
        return uri.split("?")[0]
    resource: str = ref["resource"]
    return f"{resource}/{ref['subresource']}" if ref.get("subresource") else resource
