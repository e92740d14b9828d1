"""The type of a Kubernetes object, or of any part of one, as JSON decodes it: what the hooks
read from a request and write into an answer where no model of ours applies (a role's
LeaderWorkerSet spec, a child). Data only: no imports from `hooks`."""

from __future__ import annotations

from typing import Any, TypeAlias

JsonObject: TypeAlias = dict[str, Any]
