"""A Kubernetes object, or any part of one, as JSON decodes it (where no model of ours applies),
and how a part of one is read whatever its shape. Data only: no imports from `hooks`."""

from __future__ import annotations

from typing import Any, TypeAlias

JsonObject: TypeAlias = dict[str, Any]


def object_of(value: object) -> JsonObject:
    """`value` when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def list_of(value: object) -> list[Any]:
    """`value` when it is a JSON list, else an empty one."""
    return value if isinstance(value, list) else []
