"""The compact form of a history record, and what the API server lets a child's annotations hold.

A record's roles packed (`pack_roles`, `unpack_roles`, `fits`) and its change-cause cut to its
bound (`cut_change_cause`), so that its annotations with Metacontroller's last-applied copy
(`annotation_bytes`) stay below the API server's bound: docs/rollout.md, "Revision history",
"The bounds". Pure.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from collections.abc import Mapping, Sequence
from typing import Final

from hooks import api
from hooks.api import limits
from hooks.gocompat import gotext

JsonObject = api.JsonObject

CUT_MARKER: Final = " [cut: {total} bytes in all]"
"""What ends a change-cause that was cut (`total`: the bytes of the whole text)."""
_LEVEL: Final = 9


class PackError(ValueError):
    """Packed roles that cannot be unpacked; the message says why."""


def pack_roles(roles: Sequence[JsonObject]) -> str:
    """The `packedRoles` of `roles` (as a record stores them, `children.history_roles`): the
    base64 of their zlib-compressed JSON."""
    text = json.dumps(list(roles), ensure_ascii=False, separators=(",", ":"))
    return base64.b64encode(zlib.compress(text.encode(), _LEVEL)).decode("ascii")


def fits(packed: str) -> bool:
    return len(packed) <= limits.PACKED_ROLES_MAX_LENGTH


def unpack_roles(packed: str) -> bytes:
    """The JSON text `packed` holds; PackError when it is no base64 of zlib data, or inflates to
    more than `limits.UNPACKED_ROLES_MAX_BYTES`."""
    try:
        compressed = base64.b64decode(packed.encode("ascii"), validate=True)
    except (UnicodeEncodeError, binascii.Error):
        raise PackError("it is not base64") from None
    inflater = zlib.decompressobj()
    try:
        text = inflater.decompress(compressed, limits.UNPACKED_ROLES_MAX_BYTES)
        if inflater.unconsumed_tail:
            raise PackError(f"it unpacks to more than {limits.UNPACKED_ROLES_MAX_BYTES} bytes")
        text += inflater.flush()
    except zlib.error:
        raise PackError("it is not zlib data") from None
    if not inflater.eof or inflater.unused_data:
        raise PackError("it is not one whole zlib stream")
    return text


def cut_change_cause(text: str) -> str:
    """`text`, or as much of it as fits its bound (as Go's JSON writes it) and `CUT_MARKER`."""
    if _go_bytes(text) <= limits.CHANGE_CAUSE_MAX_BYTES:
        return text
    marker = CUT_MARKER.format(total=len(text.encode()))
    room = limits.CHANGE_CAUSE_MAX_BYTES - _go_bytes(marker)
    low, high = 0, len(text)  # the longest prefix that fits: low fits, high + 1 does not
    while low < high:
        middle = (low + high + 1) // 2
        if _go_bytes(text[:middle]) <= room:
            low = middle
        else:
            high = middle - 1
    return text[:low] + marker


def annotation_bytes(desired: JsonObject) -> int:
    """The bytes of annotations the API server counts for `desired` with Metacontroller's
    last-applied copy (`desired` as Go's JSON)."""
    metadata = desired.get("metadata")
    own = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    pairs = [
        (key, value)
        for key, value in (own.items() if isinstance(own, Mapping) else ())
        if key != api.LAST_APPLIED_ANNOTATION
    ]
    copy = gotext.go_generic_text(desired)
    return (
        sum(len(key.encode()) + len(str(value).encode()) for key, value in pairs)
        + len(api.LAST_APPLIED_ANNOTATION.encode())
        + len(copy.encode())
    )


def _go_bytes(text: str) -> int:
    """The bytes of `text` inside Go's JSON quotes."""
    return len(gotext.go_quote(text).encode()) - 2
