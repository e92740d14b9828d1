"""Fields the API server dropped from an LWS: what the set asked for that the stored LWS lacks.

The role specs of a DisaggregatedSet follow the LeaderWorkerSet schema this API embeds (the one of
upstream commit 060ab4d). A cluster's LeaderWorkerSet CRD may be older and not know some of those
fields, and the API server then prunes them from the LWS without an error: with LWS v0.7.0's CRD,
a role asking for `volumeClaimTemplates` gets an LWS without volumes (docs/operations.md, "What
runs with what"). The hook sees it: an observed LWS carries what the hook asked for (`applied`, from
Metacontroller's last-applied annotation) beside what was stored (`spec`), and a field present
in the one and absent from the other was dropped on the way in (or removed by hand since).

`find` looks at the LWS of the target revision (the ones a rollout moves onto, or a steady set
runs), comparing keys only, never values, and list items pairwise when both lists have the same
length (the API server keeps list items; it prunes fields inside them). A full walk of an LWS
spec with production pod templates costs about 0.2 ms, so a set of 100 slices would pay a large
share of its sync for it; but every LWS of a role at one revision is rendered from the same role
template (slices differ only in labels and placement terms), so the first LWS of each role (by
slice) is walked in full and the others only by the keys of `spec` and of
`spec.leaderWorkerTemplate`, where LWS releases differ in what they know (an LWS made before the
CRD was upgraded, say): a set difference of each, about a microsecond. A finding is then named
by the full walk. An
LWS re-emitted from a cleaned copy of itself (no last-applied annotation: another controller made
it) has nothing to compare and is skipped.

What the set does with a finding (`hooks.core.sync`): Degraded with reason LWSFieldDropped,
naming the LWS, the fields and the LWS release that has them (`RELEASES`), and the LWS's groups
count as not ready, so no rollout drains an old revision onto it and the role is not Available.

Pure: reads the records it is given.
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
"""The first LWS release whose CRD has a field that an older one prunes (the last name of its
path), for the fields of the embedded schema that v0.7.0's or v0.8.0's CRD lacks; a field not
listed here needs "an LWS CRD that has it"."""

TEMPLATE: Final = "leaderWorkerTemplate"

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
    """The LWS of `revision` whose stored spec lacks fields their last-applied spec has: for
    each role the first such LWS (by slice) compared in full, the others by the keys of `spec`
    and `spec.leaderWorkerTemplate`."""
    found = []
    walked: set[str] = set()
    for item in sorted(lws, key=lambda item: (item.slice_index or 0, item.name)):
        applied = item.applied.get("spec")
        if item.labels.get(api.LABEL_REVISION) != revision or not isinstance(applied, dict):
            continue
        if applied is item.spec:
            continue
        role = item.labels.get(api.LABEL_ROLE, "")
        full = role not in walked
        walked.add(role)
        lacking = _lacks(applied, item.spec) if full else _top_lacks(applied, item.spec)
        fields = missing(applied, item.spec, path="spec") if lacking else []
        if fields:
            found.append(Dropped(item.name, role, tuple(fields)))
    return tuple(found)


def _top_lacks(wanted: api.JsonObject, stored: api.JsonObject) -> bool:
    """Whether `stored` lacks a key of `wanted` or of its `leaderWorkerTemplate`."""
    if wanted.keys() - stored.keys():
        return True
    inner, stored_inner = wanted.get(TEMPLATE), stored.get(TEMPLATE)
    return (
        isinstance(inner, dict)
        and isinstance(stored_inner, dict)
        and bool(inner.keys() - stored_inner.keys())
    )


def _lacks(wanted: object, stored: object) -> bool:
    """Whether `missing` may find anything: the same walk, by key sets and without naming
    anything (a key whose value is null counts here; `missing` leaves it out)."""
    if isinstance(wanted, dict) and isinstance(stored, dict):
        if wanted.keys() - stored.keys():
            return True
        return any(
            _lacks(value, stored[key])
            for key, value in wanted.items()
            if isinstance(value, dict | list)
        )
    if isinstance(wanted, list) and isinstance(stored, list) and len(wanted) == len(stored):
        return any(_lacks(one, other) for one, other in zip(wanted, stored, strict=True))
    return False


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
