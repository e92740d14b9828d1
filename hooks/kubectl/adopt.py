"""What `kubectl ds adopt` decides: which children another controller made to hand to
Metacontroller, which to refuse and why, and the patch that hands each over (what it trusts:
docs/safety.md, "What `kubectl ds adopt` trusts"). Pure: `hooks.kubectl.commands` runs kubectl
and prints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from hooks import api
from hooks.core import records
from hooks.kubectl import adoptable

JsonObject = dict[str, Any]

RESOURCES: Final[Mapping[str, str]] = {
    kind: f"{plural}.{api_version.rpartition('/')[0]}".removesuffix(".")
    for kind, plural, api_version in (
        (api.LWS_KIND, api.LWS_PLURAL, api.LWS_API_VERSION),
        (api.SERVICE_KIND, api.SERVICE_PLURAL, api.SERVICE_API_VERSION),
        (api.SCALER_KIND, api.SCALER_PLURAL, api.API_VERSION),
        (api.REVISION_KIND, api.REVISION_PLURAL, api.API_VERSION),
    )
}
"""The set's child kinds (the CompositeController's childResources) and kubectl's name for
each (`plural.group`; the core group has none)."""

VERB: Final = "adopt"
"""The RBAC verb on a DisaggregatedSet that hands it an object (docs/operations.md, "Who may
hand a set a child")."""


class Verdict(StrEnum):
    """ADOPT: label it (controlled by the set, or an orphan with `--orphans`); ADOPTED: it has
    the set's `controller-uid` already; REFUSED: never touched (another owner, or not what the
    set would make); ORPHAN: controlled by nothing, and orphans were not asked for."""

    ADOPT = "adopt"
    ADOPTED = "adopted"
    REFUSED = "refused"
    ORPHAN = "orphan"


@dataclass(frozen=True, slots=True)
class Decision:
    """What adoption does with one candidate, why, and (ADOPT) the merge patch."""

    kind: str
    namespace: str
    name: str
    set_name: str
    verdict: Verdict
    reason: str
    patch: JsonObject | None = None

    @property
    def resource(self) -> str:
        return RESOURCES[self.kind]

    @property
    def line(self) -> str:
        """One line about it: `Kind namespace/name: reason`."""
        return f"{self.kind} {self.namespace}/{self.name}: {self.reason}"


def key_of(parent: records.Parent) -> tuple[str, str]:
    """(namespace, name) of a set."""
    return parent.namespace, parent.name


def set_of(candidate: records.ObservedObject) -> tuple[str, str]:
    """(namespace, set name) a candidate's name label points at."""
    return candidate.namespace, candidate.labels.get(api.LABEL_NAME, "")


def patch_of(candidate: records.ObservedObject, *, uid: str) -> JsonObject:
    """The merge patch that labels `candidate` for the set of `uid`, valid only at the
    resourceVersion it was read at (409 Conflict when the object moved)."""
    return {
        "metadata": {
            "resourceVersion": candidate.resource_version,
            "labels": {api.CONTROLLER_UID_LABEL: uid},
        }
    }


def decide(
    parent: records.Parent,
    candidate: records.ObservedObject,
    *,
    orphans: bool,
    known: adoptable.Known,
) -> Decision:
    """What adoption does with `candidate`, a child kind with `parent`'s name label."""
    set_name, uid = parent.name, parent.uid
    label = candidate.labels.get(api.CONTROLLER_UID_LABEL)
    controller = candidate.controller_uid

    def decision(verdict: Verdict, reason: str) -> Decision:
        patch = patch_of(candidate, uid=uid) if verdict is Verdict.ADOPT else None
        kind, namespace, name = candidate.kind.kind, candidate.namespace, candidate.name
        return Decision(kind, namespace, name, set_name, verdict, reason, patch)

    if controller is not None and controller != uid:
        return decision(
            Verdict.REFUSED,
            f"carries {set_name}'s name label but is controlled by another owner (uid"
            f" {controller}), not by {set_name} (uid {uid}): left alone",
        )
    if label == uid:
        return decision(Verdict.ADOPTED, f"already adopted by {set_name}")
    if controller == uid and candidate.controller_object != f"{api.DS_KIND}.{api.GROUP}/{set_name}":
        return decision(
            Verdict.REFUSED,
            f"carries {set_name}'s uid in a controller reference to"
            f" {candidate.controller_object}, not to the {api.DS_KIND} {set_name}: left alone",
        )
    if controller is None and not orphans:
        return decision(Verdict.ORPHAN, _orphan_reason(set_name, label))
    why = _why_not(candidate, known) if controller is None else None
    if why is not None:
        return decision(Verdict.REFUSED, why)
    return decision(Verdict.ADOPT, f"adopted by {set_name} ({api.CONTROLLER_UID_LABEL}={uid})")


def _why_not(candidate: records.ObservedObject, known: adoptable.Known) -> str | None:
    """Why an orphan is not handed to the set, in words for its line; None when it is."""
    if candidate.owner_uids:
        return (
            f"has an owner that is not its controller (uid {', '.join(candidate.owner_uids)}), so"
            f" it is no orphan that {known.set_name} lost: left alone"
        )
    why = adoptable.difference(candidate, known)
    if why is None:
        return None
    if candidate.kind is records.ChildKind.REVISION:
        return (
            f"a history record that would not count ({why}): left alone (delete it: a record"
            " the set needs is created again)"
        )
    return f"not what {known.set_name} would have made at its name: {why}: left alone"


def _orphan_reason(set_name: str, label: str | None) -> str:
    """Why an orphan is left alone, by what most likely made it one."""
    if label:
        how = (
            f"its {api.CONTROLLER_UID_LABEL} label names {label}, an earlier set of this name,"
            " deleted with `kubectl delete --cascade=orphan`, which leaves its children"
        )
    else:
        how = (
            "Metacontroller released it: it synced the set before the adoption, or someone"
            " made it with the set's label"
        )
    return (
        f"carries {set_name}'s name label but has no controller ({how}): left alone; --orphans"
        f" adopts it into {set_name} if it is exactly what the set would have made there"
    )


def known_of(
    parents: Sequence[records.Parent], candidates: Sequence[records.ObservedObject]
) -> dict[tuple[str, str], adoptable.Known]:
    """What each set can vouch for (`adoptable.known`), by (namespace, name)."""
    by_set: dict[tuple[str, str], list[records.ObservedObject]] = {}
    for item in candidates:
        by_set.setdefault(set_of(item), []).append(item)
    return {key_of(p): adoptable.known(p, by_set.get(key_of(p), [])) for p in parents}


def plan(
    parents: Sequence[records.Parent],
    candidates: Sequence[records.ObservedObject],
    *,
    orphans: bool,
    known: Mapping[tuple[str, str], adoptable.Known],
) -> list[Decision]:
    """A decision for every candidate whose name label names one of `parents` (in its
    namespace), by set, then kind and name; `known`: `known_of(parents, candidates)`."""
    by_set = {key_of(parent): parent for parent in parents}
    decisions = [
        decide(by_set[key], candidate, orphans=orphans, known=known[key])
        for candidate in candidates
        if candidate.kind.kind in RESOURCES and (key := set_of(candidate)) in by_set
    ]
    return sorted(decisions, key=lambda d: (d.namespace, d.set_name, d.kind, d.name))


def summary(decisions: Sequence[Decision], parent: records.Parent) -> str:
    """One line per set: how many children were adopted, already adopted, left alone."""
    namespace, name = key_of(parent)
    mine = [d for d in decisions if (d.namespace, d.set_name) == (namespace, name)]
    counts = {verdict: sum(d.verdict is verdict for d in mine) for verdict in Verdict}
    left = counts[Verdict.REFUSED] + counts[Verdict.ORPHAN]
    return (
        f"{namespace}/{name}: {counts[Verdict.ADOPT]} adopted, {counts[Verdict.ADOPTED]} already"
        f" adopted, {left} left alone"
    )
