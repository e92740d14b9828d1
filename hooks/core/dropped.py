"""Fields the API server dropped from an LWS (an LWS CRD older than the embedded schema): keys
of what the set asked for (`applied`, Metacontroller's last-applied copy) that the stored `spec`
lacks, reported as LWSFieldDropped (docs/operations.md, "What runs with what"), the LWS's groups
counted as not ready. Pure: reads the records it is given.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from hooks import api
from hooks.core import problems, records

RELEASES: Final[Mapping[str, str]] = {
    "volumeClaimTemplates": "v0.8.0",
    "persistentVolumeClaimRetentionPolicy": "v0.8.0",
    "hostnameOverride": "v0.8.0",
    "restartPolicyRules": "v0.8.0",
    "fileKeyRef": "v0.8.0",
    "podCertificate": "v0.8.0",
    "schedulingGroup": "newer than v0.8.0",
    "userAnnotations": "newer than v0.8.0",
}
"""The first LWS release whose CRD has a field (the last name of its path) that v0.7.0's or
v0.8.0's CRD prunes."""

SHOWN_FIELDS: Final = 3
"""Fields named per LWS in the message; the rest are counted."""


@dataclass(frozen=True, slots=True)
class Dropped:
    """An LWS of the target revision that lacks fields the set asked for."""

    name: str
    role: str
    fields: tuple[str, ...]
    """Field paths, `spec.leaderWorkerTemplate.volumeClaimTemplates` style, in the order the
    set wrote them; a dropped object is named once, not each field inside it."""


def find(lws: Iterable[records.ObservedObject], *, revision: str) -> tuple[Dropped, ...]:
    """The LWS of `revision` whose stored spec lacks keys (never values) their last-applied spec
    has. A role's LWS render from one template, so only its first (by slice) is walked in full
    (about 0.2 ms); the others by the keys of `spec` and `leaderWorkerTemplate`."""
    found = []
    walked: set[str] = set()
    for item in sorted(lws, key=lambda item: (item.slice_index or 0, item.name)):
        applied = item.applied.get("spec")
        if item.labels.get(api.LABEL_REVISION) != revision or not isinstance(applied, dict):
            continue
        if applied is item.spec:  # Re-emitted from a cleaned copy: nothing to compare.
            continue
        role = item.labels.get(api.LABEL_ROLE, "")
        if role in walked and not _top_lacks(applied, item.spec):
            continue
        walked.add(role)
        fields = missing(applied, item.spec, path="spec")
        if fields:
            found.append(Dropped(item.name, role, tuple(fields)))
    return tuple(found)


def _top_lacks(wanted: api.JsonObject, stored: api.JsonObject) -> bool:
    """Whether `stored` lacks a key of `wanted` or of its `leaderWorkerTemplate`."""
    if wanted.keys() - stored.keys():
        return True
    inner, stored_inner = wanted.get("leaderWorkerTemplate"), stored.get("leaderWorkerTemplate")
    return (
        isinstance(inner, dict)
        and isinstance(stored_inner, dict)
        and bool(inner.keys() - stored_inner.keys())
    )


def missing(wanted: Mapping[str, object], stored: Mapping[str, object], *, path: str) -> list[str]:
    """The paths of keys of `wanted` (with a value other than null) that `stored` lacks."""
    found: list[str] = []
    for key, value in wanted.items():
        if value is None:
            continue
        here = f"{path}.{key}"
        if key not in stored:
            found.append(here)
        else:
            found.extend(_inside(value, stored[key], path=here))
    return found


def _inside(wanted: object, stored: object, *, path: str) -> list[str]:
    if isinstance(wanted, dict) and isinstance(stored, dict):
        return missing(wanted, stored, path=path)
    if isinstance(wanted, list) and isinstance(stored, list) and len(wanted) == len(stored):
        found: list[str] = []
        for index, (one, other) in enumerate(zip(wanted, stored, strict=True)):
            found.extend(_inside(one, other, path=f"{path}[{index}]"))
        return found
    return []


def not_ready(item: records.ObservedObject) -> records.ObservedObject:
    """`item` with its groups counted as not ready (its replicas kept)."""
    return dataclasses.replace(item, status=records.ReplicaStatus(replicas=item.status.replicas))


def reported(found: Sequence[Dropped]) -> list[problems.Problem]:
    """One problem per LWS, naming its fields and the release that has them."""
    return [problems.Problem(api.Reason.LWS_FIELD_DROPPED, _message(item)) for item in found]


def _message(item: Dropped) -> str:
    shown = ", ".join(item.fields[:SHOWN_FIELDS])
    more = len(item.fields) - SHOWN_FIELDS
    if more > 0:
        shown += f" and {more} more"
    releases = sorted({_release(field) for field in item.fields[:SHOWN_FIELDS]})
    return (
        f"{api.LWS_KIND} {item.name!r} lacks {shown}, which role {item.role!r} asks for: the"
        f" cluster's {api.LWS_KIND} CRD does not know the field, so the API server dropped it"
        f" (needs {' / '.join(releases)}); its groups count as not ready, so no rollout moves"
        " onto it. Upgrade the LeaderWorkerSet CRD, then delete this LWS so the set creates it"
        " again"
    )


def _release(field: str) -> str:
    name = field.rsplit(".", 1)[-1].split("[", 1)[0]
    release = RELEASES.get(name)
    return f"LWS {release}" if release else "an LWS CRD that has it"
