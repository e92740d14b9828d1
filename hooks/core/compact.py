"""The compact form of a history record, and what the API server lets a child's annotations hold.

Metacontroller writes every child with a copy of itself, as JSON, in its last-applied annotation,
and the API server refuses an object whose annotations (keys and values) exceed
`limits.ANNOTATIONS_MAX_BYTES` (`annotation_bytes` counts them as the API server will). So a
DisaggregatedSetRevision stores (docs/rollout.md, "Revision history"):

- its roles packed into one string, `packedRoles` (`pack_roles`): the base64 of the
  zlib-compressed UTF-8 JSON of the list of recorded roles, at most
  `limits.PACKED_ROLES_MAX_LENGTH` characters; a revision whose roles pack to more gets no record
  (`fits`). Reading one back (`unpack_roles`) inflates at most `limits.UNPACKED_ROLES_MAX_BYTES`;
  the JSON is parsed where every record is read (`hooks.wire.objects`);
- the set's change-cause cut to `limits.CHANGE_CAUSE_MAX_BYTES` as Go's JSON writes it, with a
  marker saying how long it was (`cut_change_cause`).

With both at their bounds a record's annotations stay below the API server's (the copy holds the
change-cause a second time); tests/unit/test_compact.py builds that record.

Pure: no I/O, clock or state.
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
    """The `packedRoles` of `roles` (as a record stores them, `children.history_role`)."""
    text = json.dumps(list(roles), ensure_ascii=False, separators=(",", ":"))
    return base64.b64encode(zlib.compress(text.encode(), _LEVEL)).decode("ascii")


def fits(packed: str) -> bool:
    """Whether a record can hold roles packed into `packed`."""
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
    """`text`, or as much of it as fits `limits.CHANGE_CAUSE_MAX_BYTES` (as Go's JSON writes it)
    with `CUT_MARKER` after it."""
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
    """The bytes of annotations the API server counts for `desired` once Metacontroller has added
    its last-applied copy (every key and value, the copy being `desired` as Go's JSON)."""
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
