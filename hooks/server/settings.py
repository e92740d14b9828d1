"""Settings of the hook server shared by the app, the server and `serve`'s options, written once:
what one process accepts (body size, time and memory, connections, headers) and the environment
variable of Prometheus's multiprocess directory. Plain data; no imports from `hooks`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

MULTIPROC_ENV: Final = "PROMETHEUS_MULTIPROC_DIR"
MIB: Final = 1024 * 1024
# The largest set the API allows (10 roles x 100 slices) mid-rollout, with managedFields, is about
# 56 MiB (78 MiB when its target LWS also came as related objects, which the sizing table of
# docs/operations.md was measured with: about 600 MiB of the call budget). Both limits leave at
# least a quarter of headroom, and everything together fits the Deployment's memory limit.
DEFAULT_MAX_BODY_BYTES: Final = 100 * MIB
DEFAULT_MAX_PARSE_BYTES: Final = 768 * MIB
# Bodies up to this size are answered in the worker itself: their parse takes at most
# `INLINE_PEAK_PER_BYTE` times their size (the worst JSON shape, measured); larger ones in a
# child process whose memory is limited to `max_parse_bytes`.
DEFAULT_ISOLATE_ABOVE_BYTES: Final = 1 * MIB
INLINE_PEAK_PER_BYTE: Final = 64
DEFAULT_BODY_DEADLINE_SECONDS: Final = 30.0
# Bodies are read this much at a time; what gunicorn and werkzeug buffer for a body being read,
# besides the body itself, stays below the overhead (both counted in `Limits.buffered_bytes`).
BODY_READ_PIECE_BYTES: Final = 64 * 1024
BODY_READ_OVERHEAD_BYTES: Final = 4 * BODY_READ_PIECE_BYTES
# A socket is read at most this much at a time (the bytes received but not yet counted by the app
# stay below it per connection).
READ_AHEAD_BYTES: Final = BODY_READ_PIECE_BYTES
# A worker busy longer is restarted, and a call on a large request is answered 503: below
# Metacontroller's 10 s webhook timeout, after which the answer is useless (`serve --timeout`).
DEFAULT_TIMEOUT_SECONDS: Final = 9
# Every read from or write to a client socket while a request is handled.
READ_TIMEOUT_SECONDS: Final = 10.0
# Connections (`hooks.server.connections`): a first request's headers within this, later ones
# within the keep-alive time (longer than Go's default idle timeout would waste nothing).
FIRST_REQUEST_SECONDS: Final = READ_TIMEOUT_SECONDS
KEEPALIVE_SECONDS: Final = 75
# Metacontroller keeps a few connections per pod, the probes and Prometheus one each. When a new
# one leaves fewer than SPARE free, that many are shed; one that has sent nothing for
# FRESH_SECONDS may be.
WORKER_CONNECTIONS: Final = 512
SPARE_CONNECTIONS: Final = 32
FRESH_SECONDS: Final = 2.0
# Request headers: at most this many fields of at most this size (gunicorn's own limits, which
# also bound what it buffers), and at most this many bytes together (names, values, line ends).
MAX_HEADER_FIELDS: Final = 32
MAX_HEADER_FIELD_BYTES: Final = 8190
MAX_HEADER_BYTES: Final = 32 * 1024


@dataclass(frozen=True, slots=True)
class Limits:
    """What one process accepts (see the module docstring and `hooks.server.bodies`)."""

    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_parse_bytes: int = DEFAULT_MAX_PARSE_BYTES
    isolate_above_bytes: int = DEFAULT_ISOLATE_ABOVE_BYTES
    body_deadline_seconds: float = DEFAULT_BODY_DEADLINE_SECONDS
    call_deadline_seconds: float = float(DEFAULT_TIMEOUT_SECONDS)

    @property
    def buffered_bytes(self) -> int:
        """Bytes of request bodies held at once by this process, complete or not: room for two
        of the largest, with their buffers (a growing buffer's spare eighth, and what the
        transport holds while a body is read)."""
        return 2 * (self.max_body_bytes + self.max_body_bytes // 8 + BODY_READ_OVERHEAD_BYTES)
