"""What every reader of Metacontroller's JSON shares: the error that refuses a request, and the
checks of one JSON value (an object, a string, a count, a label map) that raise it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from hooks import api
from hooks.api.documents import list_of

JsonObject = api.JsonObject


class RequestError(Exception):
    """The request cannot be used; nothing may change."""


def require_object(value: object, where: str) -> JsonObject:
    if not isinstance(value, dict):
        raise RequestError(f"{where} must be a JSON object")
    return value


def require_str(value: object, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise RequestError(f"{where} must be a non-empty string")
    return value


def optional_str(value: object) -> str:
    return value if isinstance(value, str) else ""


def optional_int(value: object, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(f"{where} must be an integer")
    return value


def string_map(value: object, where: str) -> Mapping[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise RequestError(f"{where} must map strings to strings")
    return value


def controller_ref(metadata: JsonObject) -> JsonObject | None:
    """The controller's entry of an object's ownerReferences, or None."""
    for ref in list_of(metadata.get("ownerReferences")):
        if isinstance(ref, dict) and ref.get("controller") is True:
            return ref
    return None


def field_path(parts: Iterable[object], *, root: str = "") -> str:
    """A field path as the API server writes it: `root.a.b[2].c` (list indexes in brackets)."""
    path = root
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path.lstrip(".")


def key_of(child: JsonObject) -> tuple[str, str]:
    """(kind, name): what identifies a child within an answer."""
    return child["kind"], child["metadata"]["name"]
