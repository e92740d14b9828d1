"""The canary and history rules checked after every simulated sync (issue 25, item 9).

Restated from docs/rollout.md ("Canary rollouts", "Revision history") and docs/safety.md
("Hostile records and the canary controls"), from what the simulation sees (the request and the
stored objects before and after the pass), never from the hook's code:

- a slice at or past the partition (a malformed partition reads as 0) never gets a new LWS of a
  revision that every slice of the set had not run (steady on it together, at the end of some
  pass) before the rollout to the current target began, unless the slice runs the target
  already, or the set has never run anything but the target;
- a slice the pass reports held changes none of its LWS, but for writing the record of its
  rollout's targets on one and deleting those of a revision drained to 0 (as every phase does);
- a slice whose LWS all run one revision, ready on each of its roles (every spec role for the
  target), has that revision's Services in the answer;
- a DisaggregatedSetRevision that does not count (`views.record_of`) is never deleted, and an
  update changes nothing of it but Metacontroller's last-applied annotation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hooks import api
from tests.sim.invariants import InvariantViolation, without_mutable
from tests.sim.metacontroller import LWS_TYPE, REVISION_TYPE, PassRecord
from tests.sim.store import SERVER_FIELDS
from tests.sim.views import initial_of, labels_of, ready_of, record_of, replicas_of, slice_of

JsonObject = dict[str, Any]


@dataclass
class CanaryInvariants:
    ran_everywhere: dict[str, set[str]] = field(default_factory=dict)
    """Set name -> revisions that every slice has run together at the end of some pass."""
    seen: dict[str, set[str]] = field(default_factory=dict)
    """Set name -> every revision it has targeted or run."""
    before_rollout: dict[str, tuple[str, frozenset[str]]] = field(default_factory=dict)
    """Set name -> its target, and the revisions every slice had run when the rollout to it
    began."""
    passes_checked: int = 0

    def __call__(self, record: PassRecord) -> None:
        if record.summary.get("outcome") != "synced":
            return
        self.passes_checked += 1
        parent = record.request["parent"]
        target = str(record.summary["revision"])
        observed = [obj for group in record.request["children"].values() for obj in group.values()]
        ran = frozenset(self.ran_everywhere.get(record.parent, set()))
        if self.before_rollout.get(record.parent, ("", ran))[0] != target:
            self.before_rollout[record.parent] = (target, ran)
        seen = self.seen.setdefault(record.parent, set())
        seen.add(target)
        seen.update(
            labels_of(obj).get(api.LABEL_REVISION, "")
            for obj in observed
            if obj["kind"] == api.LWS_KIND
        )
        self._check_partition(record, parent, observed, target)
        self._check_held(record)
        self._check_services(record, parent, observed, target)
        self._check_untrusted_records(record, parent)
        self._note_ran_everywhere(record, parent, target)

    def _check_partition(
        self, record: PassRecord, parent: JsonObject, observed: list[JsonObject], target: str
    ) -> None:
        text = (parent["metadata"].get("annotations") or {}).get(api.ANNOTATION_ROLLOUT_PARTITION)
        if text is None:
            return
        partition = int(text) if text.isascii() and text.isdigit() and len(text) <= 9 else 0
        allowed = self.before_rollout[record.parent][1]
        fresh = self.seen.get(record.parent, set()) <= {target}
        for key in record.created:
            if key[0] != LWS_TYPE:
                continue
            created = record.after[key]
            index = slice_of(created)
            revision = labels_of(created).get(api.LABEL_REVISION, "")
            if index is None or index < partition or revision in allowed:
                continue
            runs_target = any(
                obj["kind"] == api.LWS_KIND
                and slice_of(obj) == index
                and labels_of(obj).get(api.LABEL_REVISION) == target
                for obj in observed
            )
            if revision == target and (runs_target or fresh):
                continue
            fail(
                record,
                f"slice {index} is past the partition ({partition}) and got {key[2]} of revision"
                f" {revision}, which not every slice has run (every slice ran: {sorted(allowed)})",
            )

    def _check_held(self, record: PassRecord) -> None:
        held = {
            int(index)
            for index, phase in (record.summary.get("slices") or {}).items()
            if phase == "held"
        }
        for attribute in ("created", "updated", "deleted"):
            for key in getattr(record, attribute):
                if key[0] != LWS_TYPE:
                    continue
                obj = record.after.get(key) or record.before[key]
                if slice_of(obj) not in held:
                    continue
                if attribute == "updated" and _only_the_record(record.before[key], obj):
                    continue
                if attribute == "deleted" and _drained(record, obj):
                    continue
                fail(record, f"held slice {slice_of(obj)}: {key[2]} was {attribute}")

    def _check_services(
        self, record: PassRecord, parent: JsonObject, observed: list[JsonObject], target: str
    ) -> None:
        controller = record.request.get("controller")
        if controller is not None and all(
            child.get("resource") != "services" for child in controller["spec"]["childResources"]
        ):
            return  # installed without Services (components/no-services): none is asked for
        answered = {child["metadata"]["name"] for child in record.response["children"]}
        spec_roles = [role["name"] for role in parent["spec"]["roles"]]
        for index in range(parent["spec"].get("slices", 1)):
            chosen = _one_revision(observed, record.parent, index)
            if chosen is None:
                continue
            revision, by_role = chosen
            roles = spec_roles if revision == target else sorted(by_role)
            if revision != target and all(replicas_of(obj) == 0 for obj in by_role.values()):
                continue  # a drained revision goes in this pass
            if not all(role in by_role and ready_of(by_role[role]) >= 1 for role in roles):
                continue
            for role in roles:
                service = f"{by_role[role]['metadata']['name']}-prv"
                if service not in answered:
                    fail(
                        record,
                        f"slice {index} stands ready on revision {revision} without {service}",
                    )

    def _check_untrusted_records(self, record: PassRecord, parent: JsonObject) -> None:
        for key in record.deleted:
            if key[0] == REVISION_TYPE and record_of(record.before[key], parent=parent) is None:
                fail(record, f"{key[2]}, a record that does not count, was deleted")
        for key in record.updated:
            before = record.before[key]
            untrusted = key[0] == REVISION_TYPE and record_of(before, parent=parent) is None
            if untrusted and as_stored(before) != as_stored(record.after[key]):
                fail(record, f"{key[2]}, a record that does not count, was changed")

    def _note_ran_everywhere(self, record: PassRecord, parent: JsonObject, target: str) -> None:
        """Every slice steady on the target after the pass: a spec role has an LWS of it in
        each, and no other revision runs a spec role there."""
        spec_roles = {role["name"] for role in parent["spec"]["roles"]}
        lws = [
            obj
            for key, obj in record.after.items()
            if key[0] == LWS_TYPE and labels_of(obj).get(api.LABEL_NAME) == record.parent
        ]
        for index in range(parent["spec"].get("slices", 1)):
            here = [obj for obj in lws if slice_of(obj) == index]
            roles = {
                labels_of(obj).get(api.LABEL_ROLE)
                for obj in here
                if labels_of(obj).get(api.LABEL_REVISION) == target
            }
            others = [
                obj
                for obj in here
                if labels_of(obj).get(api.LABEL_REVISION) != target
                and labels_of(obj).get(api.LABEL_ROLE) in spec_roles
                and replicas_of(obj) > 0
            ]
            if not spec_roles <= roles or others:
                return
        self.ran_everywhere.setdefault(record.parent, set()).add(target)


def as_stored(obj: Mapping[str, Any]) -> JsonObject:
    """An object without Metacontroller's last-applied annotation and the API server's fields."""
    metadata = {k: v for k, v in obj["metadata"].items() if k not in SERVER_FIELDS}
    annotations = {
        k: v
        for k, v in (metadata.get("annotations") or {}).items()
        if k != api.LAST_APPLIED_ANNOTATION
    }
    metadata["annotations"] = annotations
    return {**obj, "metadata": metadata}


def _one_revision(
    observed: list[JsonObject], set_name: str, index: int
) -> tuple[str, Mapping[str, JsonObject]] | None:
    """The one revision a slice's LWS run, with the LWS planned per role (the canonical name, else
    the first by name); None when the slice runs none or several."""
    by_revision: dict[str, dict[str, JsonObject]] = {}
    for obj in sorted(observed, key=lambda item: item["metadata"]["name"]):
        labels = labels_of(obj)
        role, revision = labels.get(api.LABEL_ROLE, ""), labels.get(api.LABEL_REVISION, "")
        if obj["kind"] != api.LWS_KIND or slice_of(obj) != index or not role or not revision:
            continue
        chosen = by_revision.setdefault(revision, {})
        if role not in chosen or obj["metadata"]["name"] == f"{set_name}-{index}-{revision}-{role}":
            chosen[role] = obj
    if len(by_revision) != 1:
        return None
    ((revision, chosen),) = by_revision.items()
    return revision, chosen


def fail(record: PassRecord, message: str) -> None:
    raise InvariantViolation(f"tick {record.tick} ({record.parent}): {message}")


def _only_the_record(before: JsonObject, after: JsonObject) -> bool:
    """Whether an update of an LWS changed nothing but the record of its rollout's targets."""
    return (
        replicas_of(before) == replicas_of(after)
        and initial_of(before) == initial_of(after)
        and without_mutable(before) == without_mutable(after)
    )


def _drained(record: PassRecord, lws: JsonObject) -> bool:
    """Whether every LWS of `lws`'s revision in its slice ran 0 groups before the pass."""
    group = [labels_of(lws).get(key) for key in (api.LABEL_NAME, api.LABEL_REVISION)]
    return all(
        replicas_of(obj) == 0
        for key, obj in record.before.items()
        if key[0] == LWS_TYPE
        and slice_of(obj) == slice_of(lws)
        and [labels_of(obj).get(key) for key in (api.LABEL_NAME, api.LABEL_REVISION)] == group
    )
