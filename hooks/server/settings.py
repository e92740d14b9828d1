"""The hook server's limits and defaults, written once (what each means: docs/operations.md, "The
hook server"), and the environment variable of Prometheus's multiprocess directory. Plain data; no
imports from `hooks`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

MULTIPROC_ENV: Final = "PROMETHEUS_MULTIPROC_DIR"
MIB: Final = 1024 * 1024
# The largest set the API allows, with headroom, within the Deployment's memory limit
# (docs/operations.md, "Sizing").
DEFAULT_MAX_BODY_BYTES: Final = 100 * MIB
DEFAULT_MAX_PARSE_BYTES: Final = 768 * MIB
# Bodies up to this size are answered in the worker, where their parse takes at most
# `INLINE_PEAK_PER_BYTE` times their size (the worst JSON shape measured).
DEFAULT_ISOLATE_ABOVE_BYTES: Final = 1 * MIB
INLINE_PEAK_PER_BYTE: Final = 64
DEFAULT_BODY_DEADLINE_SECONDS: Final = 30.0
# Bodies are read this much at a time, and a socket no further ahead; gunicorn's and werkzeug's
# buffers of a body being read stay below the overhead (`Limits.buffered_bytes` counts both).
BODY_READ_PIECE_BYTES: Final = 64 * 1024
BODY_READ_OVERHEAD_BYTES: Final = 4 * BODY_READ_PIECE_BYTES
# Below Metacontroller's 10 s webhook timeout, after which an answer is useless (`serve --timeout`).
DEFAULT_TIMEOUT_SECONDS: Final = 9
READ_TIMEOUT_SECONDS: Final = 10.0
FIRST_REQUEST_SECONDS: Final = READ_TIMEOUT_SECONDS
# Longer than Go's default idle timeout would waste nothing.
KEEPALIVE_SECONDS: Final = 75
WORKER_CONNECTIONS: Final = 512
SPARE_CONNECTIONS: Final = 32
FRESH_SECONDS: Final = 2.0
# gunicorn's own limits of header fields (which also bound what it buffers), and all together.
MAX_HEADER_FIELDS: Final = 32
MAX_HEADER_FIELD_BYTES: Final = 8190
MAX_HEADER_BYTES: Final = 32 * 1024
# Error messages in answers and logs (a request can hold megabytes in a field an error names).
MAX_ERROR_MESSAGE: Final = 500


@dataclass(frozen=True, slots=True)
class Limits:
    """What one process accepts."""

    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_parse_bytes: int = DEFAULT_MAX_PARSE_BYTES
    isolate_above_bytes: int = DEFAULT_ISOLATE_ABOVE_BYTES
    body_deadline_seconds: float = DEFAULT_BODY_DEADLINE_SECONDS
    call_deadline_seconds: float = float(DEFAULT_TIMEOUT_SECONDS)

    @property
    def buffered_bytes(self) -> int:
        """Bytes of request bodies held at once by this process, complete or not: two of the
        largest, each with a growing buffer's spare eighth and the transport's buffers."""
        return 2 * (self.max_body_bytes + self.max_body_bytes // 8 + BODY_READ_OVERHEAD_BYTES)
