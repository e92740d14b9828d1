"""What upstream's Go DisaggregatedSet controller logged, for the benchmarks' tables and timelines.

`tests.cluster.upstream` starts the peer (`../shared/peer/README.md`) beside a bare control plane.
Its log (zap, JSON, timestamps in RFC 3339 with nanoseconds) has one line "Reconciling
DisaggregatedSet" at the start of every reconcile: `ReconcileCounter` counts them, and
`log_events` gives the lines of a time window for a timeline.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Final

import orjson

RECONCILING: Final = "Reconciling DisaggregatedSet"
RECONCILE_ERROR: Final = "Reconciler error"
# Fields of the peer's log lines worth showing in a timeline, in this order.
SHOWN_FIELDS: Final = ("role", "lws", "service", "from", "to", "revision", "error")


class ReconcileCounter:
    """Reconciles and reconcile errors in the peer's log so far; follows the file."""

    def __init__(self, log: Path) -> None:
        self._log = log
        self._offset = 0
        self.reconciles = 0
        self.errors = 0

    def read(self) -> tuple[int, int]:
        """(reconciles, errors) logged so far."""
        with self._log.open("rb") as log:
            log.seek(self._offset)
            chunk = log.read()
        complete = chunk.rfind(b"\n") + 1
        self._offset += complete
        for line in chunk[:complete].splitlines():
            if RECONCILING.encode() in line:
                self.reconciles += 1
            elif RECONCILE_ERROR.encode() in line:
                self.errors += 1
        return self.reconciles, self.errors


def log_events(log: Path, since: float, until: float) -> list[tuple[float, str, str]]:
    """(time, set name, what) of the peer's reconcile log lines between `since` and `until`."""
    events = []
    for line in log.read_bytes().splitlines():
        if not line.startswith(b"{") or b'"reconcileID"' not in line:
            continue
        entry = orjson.loads(line)
        at = datetime.fromisoformat(entry["ts"].replace("Z", "+00:00")).timestamp()
        if not since <= at <= until:
            continue
        fields = " ".join(f"{key}={str(entry[key])[:80]}" for key in SHOWN_FIELDS if key in entry)
        name = entry.get("DisaggregatedSet", {}).get("name", "")
        events.append((at, name, f"{entry['msg']} {fields}".rstrip()))
    return events
