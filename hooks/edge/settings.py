"""Settings of the hook server shared by the app, the server and the command line, written once:
what one process accepts (body size, parse cost, body deadline) and the environment variable of
Prometheus's multiprocess directory. Plain data: no imports from `hooks`, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

MULTIPROC_ENV: Final = "PROMETHEUS_MULTIPROC_DIR"
MIB: Final = 1024 * 1024
# The largest set the API allows (10 roles x 100 slices) mid-rollout, with managedFields and the
# related LWS Metacontroller sends (the target revision's, again), is about 78 MiB, and its parse
# cost estimate about 11x that, 884 MiB: docs/operations.md's sizing table. Both limits leave a
# quarter of headroom, and with two buffered bodies still fit the Deployment's memory limit.
DEFAULT_MAX_BODY_BYTES: Final = 100 * MIB
DEFAULT_MAX_PARSE_BYTES: Final = 1120 * MIB
DEFAULT_BODY_DEADLINE_SECONDS: Final = 30.0


@dataclass(frozen=True, slots=True)
class Limits:
    """What one process accepts (see the module docstring)."""

    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_parse_bytes: int = DEFAULT_MAX_PARSE_BYTES
    body_deadline_seconds: float = DEFAULT_BODY_DEADLINE_SECONDS

    @property
    def buffered_bytes(self) -> int:
        """Request bodies held at once by this process: two of the largest."""
        return 2 * self.max_body_bytes
