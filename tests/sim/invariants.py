"""Checks run after every simulated DisaggregatedSet sync (a `FakeMetacontroller` observer).

Each check restates a rule of docs/rollout.md or docs/safety.md over the objects before and after
the pass:

- deletions: every deleted child is one docs/safety.md allows (`tests.sim.deletions`);
- rendering happens once (§3): an updated LWS differs only in spec.replicas and the
  initial-replicas annotation; a Service is never updated; a scaler's spec.replicas (the
  autoscaler's) is never changed by the set's sync; a new LWS is always of the target revision
  (or, in a new slice past the partition, of the revision the partitioned slices serve);
- old LWS are never scaled up (§5a step 5), except in a slice past the partition that is steady
  on its revision (it scales as a steady slice does);
- surge (§5a; the bound tests/property/test_planner_props.py proves for the planner): per slice
  and role during a rollout, old + new spec replicas <= max(initial, target) + maxSurge, and
  <= max(initial, target + 1) for a role whose maxSurge is 0 (upstream's orphan prevention may keep
  1 old replica of a role whose new replicas already reached the target); target and maxSurge are
  the largest seen since the rollout began, because new replicas never shrink mid-rollout, and
  the target counts at least the new replicas the rollout started with (a revert to a revision
  whose LWS still run starts with new replicas that may exceed a lowered target);
- capacity (upstream's TestNRole_UnavailableConstraint: "old[i] + new[i] >= target[i] -
  unavail[i], only enforced when initialOld[i] >= target[i]", and the planner property test's
  "while the step is under way, except a force drain"): while a slice rolls with one old
  revision, unchanged targets, configs and target revision, and no role starting from 0 old
  replicas (a role whose old LWS sits at 0 triggers the coordinated drain of its whole revision,
  as upstream's executor does), the spec replicas stay at or above target - maxUnavailable after
  every pass; and, when the old revision was fully ready at the start, after every tick the ready
  replicas do too, unless the slice's last step was a force drain (whose floor counts new
  replicas it creates in the same pass, before they are ready) or readiness faults were injected
  while it ran (ready groups may turn unready then, whatever the controller does);
- history: the target revision has a record that counts (`views.record_of`) after every pass,
  with the highest number of the records that count, unless the set is Degraded over its history
  (a foreign object or a record that does not count holds the name, two records share a number,
  the numbers ran out); an updated DisaggregatedSetRevision changes only its number (never
  downwards), its change-cause annotation and its `completedAs` (never unset, never lowered);
- status: exactly one of Available and Progressing is True (unless a rollout is paused,
  Progressing Unknown; held or partitioned, Progressing Unknown and not Available; past its
  progress deadline, or settled with a role at 0 beside busy ones, both False), every condition
  a pass computes
  carries the generation (the hold path keeps Available and Progressing), lastTransitionTime
  changes exactly when the status flips, roleStatuses list the spec roles in order, and Available
  is True only when no spec role has old replicas left and every spec role has replicas ==
  ready == updated == target x slices.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hooks import api
from tests.sim import scaling_invariants
from tests.sim.deletions import allowed_deletions, child_id
from tests.sim.metacontroller import (
    LWS_TYPE,
    REVISION_TYPE,
    SCALER_TYPE,
    SERVICE_TYPE,
    PassRecord,
)
from tests.sim.store import ObjectKey
from tests.sim.views import (
    SliceState,
    is_external,
    labels_of,
    ready_of,
    record_of,
    replicas_of,
    resolved_config,
    slice_of,
    slice_states,
    static_target,
)

JsonObject = dict[str, Any]


class InvariantViolation(AssertionError):
    """A documented rule broken during a simulated pass."""


@dataclass
class RolloutWindow:
    """What a slice's current rollout has seen so far."""

    revision: str
    targets: dict[str, int]
    configs: dict[str, tuple[int, int]]
    initial: dict[str, int]
    new_at_start: dict[str, int]
    max_target: dict[str, int]
    max_surge: dict[str, int]
    old_ready_at_start: bool
    last_step: str = "start"
    fixed: bool = True


@dataclass
class Invariants:
    windows: dict[tuple[str, int], RolloutWindow] = field(default_factory=dict)
    fault_tick: int = -1
    """The last tick readiness rules changed (statuses observed that tick may be stale)."""
    passes_checked: int = 0
    ticks_checked: int = 0

    def __call__(self, record: PassRecord) -> None:
        self.passes_checked += 1
        parent = record.request["parent"]
        observed = [obj for group in record.request["children"].values() for obj in group.values()]
        held = record.summary.get("outcome") == "held"
        target = None if held else str(record.summary["revision"])
        self._check_deletions(record, parent, observed, target)
        self._check_status(record, parent, held)
        if held:
            return
        assert target is not None
        self._check_updates(record, target)
        self._check_history(record, parent, target)
        after_lws = owned(record.after, LWS_TYPE, parent)
        after_scalers = owned(record.after, SCALER_TYPE, parent)
        self._check_rollout(record, parent, after_lws, after_scalers, target)
        for problem in scaling_invariants.violations(record, parent, target=target):
            fail(record, problem)
        self._check_available(record, parent, observed, after_scalers, target)

    def void_ready_floor(self, *, tick: int) -> None:
        """Readiness changed under running rollouts: ready groups may have become unready, which
        no controller can prevent, so the ready floor no longer applies to them (nor to rollouts
        starting in the same tick, which may have seen the statuses from before the change)."""
        self.fault_tick = tick
        for window in self.windows.values():
            window.old_ready_at_start = False

    def check_ready(self, objects: Mapping[ObjectKey, JsonObject], *, tick: int) -> None:
        """The ready-capacity floor after a tick (see the module docstring)."""
        self.ticks_checked += 1
        states: dict[tuple[str, str], dict[int, SliceState]] = {}
        for (name, index), window in sorted(self.windows.items()):
            if not (window.fixed and window.old_ready_at_start):
                continue
            if window.last_step.startswith("stepping:force-drain"):
                continue
            if (name, window.revision) not in states:
                lws = [
                    obj
                    for key, obj in objects.items()
                    if key[0] == LWS_TYPE and labels_of(obj).get(api.LABEL_NAME) == name
                ]
                states[(name, window.revision)] = slice_states(lws, target=window.revision)
            state = states[(name, window.revision)].get(index)
            if state is None:
                continue
            for role, value in window.targets.items():
                if window.initial.get(role, 0) < value:
                    continue
                ready = state.old_ready.get(role, 0) + state.new_ready.get(role, 0)
                floor = value - window.configs[role][1]
                if ready < floor:
                    raise InvariantViolation(
                        f"tick {tick} ({name}): slice {index} role {role} has {ready} ready "
                        f"replicas, below target - maxUnavailable = {floor} "
                        f"(last step {window.last_step})"
                    )

    def _check_deletions(
        self,
        record: PassRecord,
        parent: JsonObject,
        observed: list[JsonObject],
        target: str | None,
    ) -> None:
        allowed = allowed_deletions(parent=parent, children=observed, target=target)
        for key in record.deleted:
            deleted = record.before[key]
            if child_id(deleted) not in allowed:
                fail(record, f"deleted {key} although docs/safety.md gives no reason to")

    def _check_updates(self, record: PassRecord, target: str) -> None:
        partitioned = {
            int(index)
            for index, phase in (record.summary.get("slices") or {}).items()
            if phase == "partitioned"
        }
        for key in record.created:
            obj = record.after[key]
            if key[0] != LWS_TYPE or labels_of(obj).get(api.LABEL_REVISION) == target:
                continue
            # A new slice past the partition starts at the revision the others serve.
            if slice_of(obj) not in partitioned:
                fail(record, f"created {key} of a revision other than the target {target}")
        for key in record.updated:
            before, after = record.before[key], record.after[key]
            if key[0] == SERVICE_TYPE:
                fail(record, f"updated Service {key}; Services are never updated")
            if key[0] == LWS_TYPE:
                if without_mutable(before) != without_mutable(after):
                    fail(record, f"re-rendered {key}: more than replicas and annotations changed")
                grew = replicas_of(after) > replicas_of(before)
                old = labels_of(after).get(api.LABEL_REVISION) != target
                # A slice past the partition, steady on its revision, scales like a steady one;
                # one that stands still follows its targets (tests.sim.scaling_invariants).
                if (
                    old
                    and grew
                    and not self._steady_past_partition(record, after, partitioned)
                    and not _standing(record, after)
                ):
                    fail(record, f"scaled old LWS {key} up")
        for key, before in record.before.items():
            if key[0] == SCALER_TYPE and key in record.after:
                was = before.get("spec", {}).get("replicas")
                now = record.after[key].get("spec", {}).get("replicas")
                if was != now:
                    fail(record, f"the sync changed {key} spec.replicas from {was} to {now}")

    @staticmethod
    def _steady_past_partition(record: PassRecord, lws: JsonObject, partitioned: set[int]) -> bool:
        index = slice_of(lws)
        if index not in partitioned:
            return False
        revisions = {
            labels_of(obj).get(api.LABEL_REVISION)
            for key, obj in record.before.items()
            if key[0] == LWS_TYPE and slice_of(obj) == index and replicas_of(obj) > 0
        }
        return revisions == {labels_of(lws).get(api.LABEL_REVISION)}

    def _check_history(self, record: PassRecord, parent: JsonObject, target: str) -> None:
        if REVISION_TYPE not in record.request["children"]:
            return  # records are not a declared child type: the set keeps no history
        history = {
            revision: obj
            for obj in owned(record.after, REVISION_TYPE, parent)
            if (revision := record_of(obj, parent=parent)) is not None
        }
        held = any(
            c["type"] == "Degraded"
            and c["status"] == "True"
            and c["reason"] == api.Reason.INVALID_HISTORY
            for c in record.response["status"].get("conditions", [])
        )
        if target not in history and not held:
            fail(record, f"the target revision {target} has no record that counts")
        if target in history and not held:
            top = history[target]["revision"]
            if any(obj["revision"] >= top for rev, obj in history.items() if rev != target):
                fail(record, f"the target revision {target} has not the highest history number")
        for key in record.updated:
            if key[0] != REVISION_TYPE:
                continue
            before, after = record.before[key], record.after[key]
            if after["revision"] < before["revision"]:
                fail(record, f"{key} was renumbered downwards")
            if after.get("completedAs", 0) < before.get("completedAs", 0):
                fail(record, f"{key} lost or lowered its completedAs")
            if without_history_mutable(before) != without_history_mutable(after):
                fail(record, f"{key} changed more than its number, change-cause and mark")

    def _check_rollout(
        self,
        record: PassRecord,
        parent: JsonObject,
        lws: list[JsonObject],
        scalers: list[JsonObject],
        target: str,
    ) -> None:
        spec = parent["spec"]
        roles = {role["name"]: role for role in spec["roles"]}
        scaler_replicas = {
            labels_of(item).get(api.LABEL_ROLE, ""): item.get("spec", {}).get("replicas", 0)
            for item in scalers
        }
        observed_lws = list(record.request["children"].get(LWS_TYPE, {}).values())
        observed_states = slice_states(observed_lws, target=target)
        states = slice_states(lws, target=target)
        name = parent["metadata"]["name"]
        for index in sorted(set(self.windows_of(name)) - set(states)):
            del self.windows[(name, index)]
        for index, state in states.items():
            key = (name, index)
            if not state.old_revisions or index >= spec.get("slices", 1):
                self.windows.pop(key, None)
                continue
            targets: dict[str, int] = {}
            configs: dict[str, tuple[int, int]] = {}
            for role_name in sorted({*roles, *state.old, *state.new}):
                role = roles.get(role_name)
                if role is None:
                    targets[role_name], configs[role_name] = 0, (1, 0)
                    continue
                if is_external(role):
                    # The scaler's value is the target, even below what the new revision runs
                    # (a lower mid-rollout: docs/rollout.md, "Scaling while a rollout runs").
                    value = scaler_replicas.get(role_name, state.new.get(role_name, 0))
                else:
                    value = static_target(role)
                targets[role_name] = value
                configs[role_name] = resolved_config(role, value)
            window = self.windows.get(key)
            if window is None:
                before = observed_states.get(index)
                window = RolloutWindow(
                    revision=target,
                    targets=dict(targets),
                    configs=dict(configs),
                    initial=dict(state.initial),
                    new_at_start=dict(state.new),
                    max_target=dict(targets),
                    max_surge={role: config[0] for role, config in configs.items()},
                    # Ready at the start: every old group the window starts with (a slice that
                    # stands still may scale its old revision up in the same pass).
                    old_ready_at_start=before is not None
                    and record.tick > self.fault_tick
                    and all(
                        before.old_ready.get(role, 0) >= old for role, old in state.old.items()
                    ),
                )
                self.windows[key] = window
            phase = str(record.summary.get("slices", {}).get(str(index), ""))
            if phase.startswith("stepping:"):
                window.last_step = phase
            for role_name, value in targets.items():
                window.max_target[role_name] = max(window.max_target.get(role_name, 0), value)
                window.max_surge[role_name] = max(
                    window.max_surge.get(role_name, 0), configs[role_name][0]
                )
            if (
                target != window.revision
                or targets != window.targets
                or configs != window.configs
                or len(state.old_revisions) > 1
                or any(state.initial.get(role, 0) == 0 for role in state.old)
            ):
                window.fixed = False
            for role_name in targets:
                old = state.old.get(role_name, 0)
                new = state.new.get(role_name, 0)
                initial = state.initial.get(role_name, 0)
                surge = window.max_surge[role_name]
                most = max(window.max_target[role_name], window.new_at_start.get(role_name, 0))
                bound = max(initial, most) + surge if surge > 0 else max(initial, most + 1)
                if old + new > bound:
                    fail(
                        record,
                        f"slice {index} role {role_name}: old {old} + new {new} exceeds the "
                        f"surge bound {bound} (initial {initial}, target {most}, maxSurge {surge})",
                    )
                floor = targets[role_name] - configs[role_name][1]
                if window.fixed and initial >= targets[role_name] and old + new < floor:
                    fail(
                        record,
                        f"slice {index} role {role_name}: old {old} + new {new} below "
                        f"target - maxUnavailable = {floor}",
                    )

    def windows_of(self, name: str) -> list[int]:
        return [index for (parent, index) in self.windows if parent == name]

    def _check_status(self, record: PassRecord, parent: JsonObject, held: bool) -> None:
        generation = parent["metadata"]["generation"]
        before = {
            condition["type"]: condition
            for condition in (parent.get("status") or {}).get("conditions") or []
            if isinstance(condition, dict)
        }
        conditions = record.response["status"].get("conditions") or []
        by_type = {condition["type"]: condition for condition in conditions}
        if len(by_type) != len(conditions):
            fail(record, "two conditions share a type")
        for condition in conditions:
            # The hold path keeps Available and Progressing as they were (docs/safety.md: the status
            # is kept), so only the conditions a pass computes must carry its generation.
            computed = not held or condition["type"] == api.ConditionType.DEGRADED
            if computed and condition.get("observedGeneration") != generation:
                fail(
                    record, f"condition {condition['type']} does not carry generation {generation}"
                )
            previous = before.get(condition["type"])
            if previous is None or not previous.get("lastTransitionTime"):
                continue
            flipped = previous.get("status") != condition["status"]
            if flipped and condition["lastTransitionTime"] != record.now:
                fail(record, f"{condition['type']} flipped without a new lastTransitionTime")
            if not flipped and condition["lastTransitionTime"] != previous["lastTransitionTime"]:
                fail(record, f"{condition['type']} lastTransitionTime changed without a flip")
        if held:
            return
        available = by_type.get(api.ConditionType.AVAILABLE, {}).get("status")
        progressing = by_type.get(api.ConditionType.PROGRESSING, {})
        reason = progressing.get("reason")
        if reason == "RolloutPaused":
            if progressing.get("status") != "Unknown":
                fail(record, "a paused rollout's Progressing is not Unknown")
        elif reason in ("RolloutHeld", "RolloutPartitioned"):
            if (available, progressing.get("status")) != ("False", "Unknown"):
                fail(record, f"a canary standing still ({reason}) is not Unknown and unavailable")
        elif reason in ("ProgressDeadlineExceeded", "RoleScaledToZero"):
            if (available, progressing.get("status")) != ("False", "False"):
                fail(record, f"{reason}: the set is neither Available nor Progressing")
        elif sorted([available, progressing.get("status")]) != ["False", "True"]:
            fail(
                record,
                f"Available={available} Progressing={progressing.get('status')}: exactly one is"
                " True",
            )
        names = [entry["name"] for entry in record.response["status"].get("roleStatuses", [])]
        if names != [role["name"] for role in parent["spec"]["roles"]]:
            fail(record, f"roleStatuses {names} are not the spec roles in order")

    def _check_available(
        self,
        record: PassRecord,
        parent: JsonObject,
        observed: list[JsonObject],
        scalers: list[JsonObject],
        target: str,
    ) -> None:
        conditions = record.response["status"].get("conditions") or []
        available = any(
            c["type"] == api.ConditionType.AVAILABLE and c["status"] == "True" for c in conditions
        )
        if not available:
            return
        spec = parent["spec"]
        after_lws = owned(record.after, LWS_TYPE, parent)
        for index, state in slice_states(after_lws, target=target).items():
            rolling = [role["name"] for role in spec["roles"] if state.old.get(role["name"], 0)]
            if rolling and index < spec.get("slices", 1):
                fail(record, f"Available while slice {index} still runs old replicas of {rolling}")
        deleted = {child_id(record.before[key]) for key in record.deleted}
        kept = [
            obj for obj in observed if obj["kind"] == api.LWS_KIND and child_id(obj) not in deleted
        ]
        scaler_replicas = {
            labels_of(item).get(api.LABEL_ROLE, ""): item.get("spec", {}).get("replicas", 0)
            for item in scalers
        }
        for role in spec["roles"]:
            if is_external(role):
                if role["name"] not in scaler_replicas:
                    fail(record, f"Available although External role {role['name']} has no scaler")
                per_slice = scaler_replicas[role["name"]]
            else:
                per_slice = static_target(role)
            own = [obj for obj in kept if labels_of(obj).get(api.LABEL_ROLE) == role["name"]]
            replicas = sum((obj.get("status") or {}).get("replicas", 0) for obj in own)
            ready = sum(ready_of(obj) for obj in own)
            updated = sum(
                (obj.get("status") or {}).get("updatedReplicas", 0)
                for obj in own
                if labels_of(obj).get(api.LABEL_REVISION) == target
            )
            wanted = per_slice * spec.get("slices", 1)
            if not replicas == ready == updated == wanted:
                fail(
                    record,
                    f"Available although role {role['name']} has replicas {replicas}, ready "
                    f"{ready}, updated {updated}, target {wanted}",
                )


def _standing(record: PassRecord, lws: JsonObject) -> bool:
    """Whether the LWS's slice stood still on purpose in the pass (paused, held, partitioned)."""
    phase = str((record.summary.get("slices") or {}).get(str(slice_of(lws)), ""))
    return phase.split(":")[0] in scaling_invariants.STANDING


def owned(
    objects: Mapping[ObjectKey, JsonObject], type_key_: str, parent: JsonObject
) -> list[JsonObject]:
    """Objects of one type controlled by `parent`."""
    uid = parent["metadata"]["uid"]
    found = []
    for key, obj in sorted(objects.items()):
        if key[0] != type_key_:
            continue
        refs = obj["metadata"].get("ownerReferences") or []
        if any(ref.get("controller") is True and ref.get("uid") == uid for ref in refs):
            found.append(obj)
    return found


SERVER_FIELDS = ("resourceVersion", "generation", "managedFields")


def without_mutable(lws: JsonObject) -> JsonObject:
    """An LWS without the parts a sync may change, nor server-managed fields (a new object that
    shares the rest with `lws`: compare it, never change it)."""
    copied = {key: value for key, value in lws.items() if key != "status"}
    if "spec" in copied:
        copied["spec"] = {key: value for key, value in copied["spec"].items() if key != "replicas"}
    copied["metadata"] = _without_server_fields(
        lws["metadata"],
        (
            api.ANNOTATION_INITIAL_REPLICAS,
            api.ANNOTATION_ROLLOUT_TARGET,
            api.LAST_APPLIED_ANNOTATION,
        ),
    )
    if not copied["metadata"].get("annotations"):
        copied["metadata"].pop("annotations", None)
    return copied


def without_history_mutable(record: JsonObject) -> JsonObject:
    """A DisaggregatedSetRevision without what a sync may change, nor server-managed fields
    (shares the rest with `record`, as `without_mutable` does)."""
    copied = {k: v for k, v in record.items() if k not in ("revision", "completedAs")}
    metadata = _without_server_fields(
        record["metadata"], (api.CHANGE_CAUSE_ANNOTATION, api.LAST_APPLIED_ANNOTATION)
    )
    if not metadata.get("annotations"):
        metadata.pop("annotations", None)
    copied["metadata"] = metadata
    return copied


def _without_server_fields(metadata: JsonObject, dropped: tuple[str, ...]) -> JsonObject:
    """`metadata` without the server's fields and the `dropped` annotations (a new map)."""
    copied = {key: value for key, value in metadata.items() if key not in SERVER_FIELDS}
    annotations = copied.get("annotations")
    if isinstance(annotations, dict):
        copied["annotations"] = {
            key: value for key, value in annotations.items() if key not in dropped
        }
    return copied


def fail(record: PassRecord, message: str) -> None:
    raise InvariantViolation(f"tick {record.tick} ({record.parent}): {message}")
