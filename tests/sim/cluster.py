"""The simulation driver: a seeded loop over Metacontroller, LWS, the RoleScaler controller, an HPA.

Each tick: the test's scheduled actions for that tick run (spec edits, planted objects, fault
changes), then the four actors run once each in an order drawn from the seeded random generator,
then the fake clock advances one second. A write by any actor marks every DisaggregatedSet dirty
(Metacontroller watches parents and children, so each write wakes it up); a set is synced when
dirty or when its requested resync is due. `Invariants` and `CanaryInvariants` check every sync.

`run()` stops when the cluster is quiet (a whole tick without writes, nothing dirty, no resync
requested, no readiness or HPA change still to come, no scheduled action left) or when a given
condition holds, and fails after `max_ticks`. Failures raise `SimulationFailure` with the seed
and a per-tick trace: per slice, old/new replicas per role and the phase from the sync summary.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from hooks import api
from tests.builders import NAMESPACE
from tests.sim import views
from tests.sim.canary_invariants import CanaryInvariants
from tests.sim.hpa import FakeHPA
from tests.sim.invariants import Invariants, InvariantViolation
from tests.sim.lws_controller import FakeLWSController, Readiness
from tests.sim.metacontroller import (
    DS_CHILD_TYPES,
    DS_TYPE,
    LWS_TYPE,
    SCALER_TYPE,
    SERVICE_TYPE,
    FakeMetacontroller,
    PassRecord,
    SimulationError,
)
from tests.sim.rolescaler_controller import FakeRoleScalerController
from tests.sim.store import FakeClock, ObjectKey, Store, type_key

JsonObject = dict[str, Any]
Action = Callable[["Cluster"], None]

TRACE_LINES = 400


class SimulationFailure(AssertionError):
    """A simulated run broke an invariant or did not converge; the message has seed and trace."""


@dataclass
class Cluster:
    """One simulated namespace with its controllers."""

    seed: int = 0
    hook_version: str = "v1"
    readiness_delay: int = 0
    namespace: str = NAMESPACE
    child_types: tuple[str, ...] = DS_CHILD_TYPES
    """The child types Metacontroller declares for the set (the kit's by default)."""
    clock: FakeClock = field(default_factory=FakeClock)
    keep_passes: bool = True
    """False: `passes` stays empty (observers still see every pass), so a long run of a large set
    does not hold every request in memory."""
    tick: int = 0
    trace: list[str] = field(default_factory=list)
    passes: list[PassRecord] = field(default_factory=list)
    actions: dict[int, list[tuple[str, Action]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.store = Store(clock=self.clock)
        self.invariants = Invariants()
        self.metacontroller = FakeMetacontroller(
            store=self.store,
            clock=self.clock,
            version=self.hook_version,
            child_types=self.child_types,
        )
        self.metacontroller.observers.append(self.invariants)
        self.canary = CanaryInvariants()
        self.metacontroller.observers.append(self.canary)
        self.lws = FakeLWSController(store=self.store, default_delay=self.readiness_delay)
        self.scalers = FakeRoleScalerController(store=self.store, clock=self.clock)
        self.hpa = FakeHPA(store=self.store, namespace=self.namespace)

    # --- test-facing actions ----------------------------------------------------------------

    def create(self, obj: JsonObject, *, actor: str = "user") -> None:
        """Create an object now (a DisaggregatedSet, or a planted foreign object); `actor` is the
        field manager the API server records (kubectl's, say)."""
        obj = copy.deepcopy(obj)
        obj["metadata"].setdefault("namespace", self.namespace)
        if type_key(obj) == DS_TYPE:
            obj["metadata"].pop("generation", None)
            obj.pop("status", None)
        self.store.create(obj, actor=actor)
        self._note(f"user: create {obj['kind']} {obj['metadata']['name']}")
        self._wake()

    def update(self, obj: JsonObject, *, actor: str = "user") -> None:
        """Write an object's metadata and spec as given now (a `kubectl apply` of a whole
        manifest); `actor` is the field manager."""
        if self.store.update(obj, actor=actor):
            self._note(f"user: update {obj['kind']} {obj['metadata']['name']}")
            self._wake()

    def edit(self, name: str, change: Callable[[JsonObject], None]) -> None:
        """Edit a DisaggregatedSet's spec now (the generation goes up)."""
        ds = self.ds(name)
        change(ds["spec"])
        if self.store.update(ds, actor="user"):
            self._note(f"user: edit {name} -> generation {self.ds(name)['metadata']['generation']}")
            self._wake()

    def annotate(self, name: str, key: str, value: str | None) -> None:
        """Set (or, with None, remove) an annotation of a DisaggregatedSet now."""
        ds = self.ds(name)
        annotations = ds["metadata"].setdefault("annotations", {})
        if value is None:
            annotations.pop(key, None)
        else:
            annotations[key] = value
        if self.store.update(ds, actor="user"):
            self._note(f"user: annotate {name} {key}={value}")
            self._wake()

    def at(self, tick: int, action: Action, *, label: str = "action") -> None:
        """Run `action` at the start of `tick` (before the controllers)."""
        if tick < self.tick:
            raise ValueError(f"tick {tick} is in the past (now {self.tick})")
        self.actions.setdefault(tick, []).append((label, action))

    def note(self, line: str) -> None:
        """Add a line to the trace (for actions a test performs directly)."""
        self._note(line)

    def set_readiness(self, rules: list[Readiness], *, default_delay: int | None = None) -> None:
        self.lws.rules = list(rules)
        self.invariants.void_ready_floor(tick=self.tick)
        if default_delay is not None:
            self.lws.default_delay = default_delay
        self._note(f"user: readiness rules {rules} default {self.lws.default_delay}")

    # --- reading state ------------------------------------------------------------------------

    def ds(self, name: str = "llm") -> JsonObject:
        obj = self.store.get((DS_TYPE, self.namespace, name))
        if obj is None:
            raise KeyError(name)
        return obj

    def objects(self, type_key_: str) -> list[JsonObject]:
        return self.store.select(type_key_, namespace=self.namespace)

    def lws_names(self) -> list[str]:
        return [obj["metadata"]["name"] for obj in self.objects(LWS_TYPE)]

    def service_names(self) -> list[str]:
        return [obj["metadata"]["name"] for obj in self.objects(SERVICE_TYPE)]

    def scaler(self, name: str) -> JsonObject | None:
        return self.store.get((SCALER_TYPE, self.namespace, name))

    def condition(self, condition_type: str, name: str = "llm") -> JsonObject | None:
        for condition in self.ds(name).get("status", {}).get("conditions", []):
            if condition["type"] == condition_type:
                found: JsonObject = condition
                return found
        return None

    def is_true(self, condition_type: str, name: str = "llm") -> bool:
        condition = self.condition(condition_type, name)
        return condition is not None and condition["status"] == "True"

    def revision(self, name: str = "llm") -> str:
        return str(self.ds(name)["status"]["revision"])

    def slice_states(self, name: str = "llm") -> dict[int, views.SliceState]:
        lws = [
            obj
            for obj in self.objects(LWS_TYPE)
            if views.labels_of(obj).get(api.LABEL_NAME) == name
        ]
        return views.slice_states(lws, target=self.revision(name))

    def revisions(self, name: str = "llm") -> set[str]:
        """Revisions that have at least one LWS of the set."""
        return {
            views.labels_of(obj).get(api.LABEL_REVISION, "")
            for obj in self.objects(LWS_TYPE)
            if views.labels_of(obj).get(api.LABEL_NAME) == name
        }

    # --- the loop -----------------------------------------------------------------------------

    def step(self) -> bool:
        """One tick; True when anything was written."""
        wrote = False
        for label, action in self.actions.pop(self.tick, []):
            self._note(f"user: {label}")
            action(self)
            wrote = bool(self.store.writes) or wrote
            self._wake()
        actors: list[tuple[str, Callable[[int], Any]]] = [
            ("metacontroller", self._run_metacontroller),
            ("rolescaler", self.scalers.run),
            ("lws", self.lws.run),
            ("hpa", self._run_hpa),
        ]
        self.rng.shuffle(actors)
        for _, run in actors:
            run(self.tick)
            if self._wake():
                wrote = True
        self.invariants.check_ready(self.store.objects, tick=self.tick)
        self.tick += 1
        self.clock.advance()
        return wrote

    def quiet(self) -> bool:
        return not (
            self.metacontroller.pending()
            or self.lws.pending()
            or self.hpa.pending(self.tick)
            or any(at >= self.tick for at in self.actions)
        )

    def run(self, *, max_ticks: int = 200, until: Callable[[Cluster], bool] | None = None) -> int:
        """Tick until quiet (or `until` holds); the number of ticks taken. Fails after max_ticks."""
        start = self.tick
        while self.tick - start < max_ticks:
            try:
                wrote = self.step()
            except (InvariantViolation, SimulationError) as error:
                raise self.failure(str(error)) from error
            done = until(self) if until is not None else (not wrote and self.quiet())
            if done:
                return self.tick - start
        condition = "the condition" if until is not None else "quiet"
        raise self.failure(f"not {condition} after {max_ticks} ticks")

    def run_for(self, ticks: int) -> None:
        """Exactly `ticks` ticks, whatever happens (for runs that must not converge)."""
        for _ in range(ticks):
            try:
                self.step()
            except (InvariantViolation, SimulationError) as error:
                raise self.failure(str(error)) from error

    def idle_sync(self, name: str = "llm") -> tuple[bytes, bytes]:
        """Sync a settled set twice without applying: the two answers as JSON bytes.

        Also checks that the answer's status is the stored one and that applying it writes
        nothing (a quiet cluster must not be woken up by its own controller).
        """
        parent = self.ds(name)
        _, first = self.metacontroller.call_sync(self.metacontroller.build_request(parent))
        _, second = self.metacontroller.call_sync(self.metacontroller.build_request(parent))
        first_bytes, second_bytes = orjson.dumps(first), orjson.dumps(second)
        stored = dict(parent.get("status") or {})
        answered = {**first["status"], "observedGeneration": parent["metadata"]["generation"]}
        if answered != stored:
            raise self.failure(f"idle sync answered status {answered}, stored {stored}")
        self.store.drain_writes()
        record = self.metacontroller.sync_once(parent, tick=self.tick)
        if record.created or record.updated or record.deleted or record.status_written:
            raise self.failure(
                f"idle sync wrote: created {record.created} updated {record.updated} "
                f"deleted {record.deleted} status {record.status_written}"
            )
        self.store.drain_writes()
        return first_bytes, second_bytes

    def failure(self, message: str) -> SimulationFailure:
        tail = self.trace[-TRACE_LINES:]
        return SimulationFailure(
            f"{message}\nseed={self.seed} hook_version={self.hook_version} tick={self.tick}\n"
            + "\n".join(tail)
        )

    # --- internals ----------------------------------------------------------------------------

    def _run_metacontroller(self, tick: int) -> None:
        for record in self.metacontroller.run(tick):
            if self.keep_passes:
                self.passes.append(record)
            self._note_pass(record)

    def _run_hpa(self, tick: int) -> None:
        done = len(self.hpa.log)
        self.hpa.run(tick)
        for _, name, replicas in self.hpa.log[done:]:
            self._note(f"hpa: {name} spec.replicas={replicas}")

    def _wake(self) -> bool:
        writes = self.store.drain_writes()
        if writes:
            for parent in self.store.iter_type(DS_TYPE):
                self.metacontroller.dirty.add(parent["metadata"]["name"])
        return bool(writes)

    def _note(self, line: str) -> None:
        self.trace.append(f"t={self.tick:3d} {line}")

    def _note_pass(self, record: PassRecord) -> None:
        summary = record.summary
        parent = record.after.get((DS_TYPE, self.namespace, record.parent))
        roles = views.role_names(parent["spec"]) if parent else []
        if summary.get("outcome") != "synced":
            self._note(
                f"sync {record.parent}: {summary.get('outcome')} {summary.get('reason', '')}"
            )
            return
        lws = [obj for key, obj in record.after.items() if key[0] == LWS_TYPE]
        lws = [obj for obj in lws if views.labels_of(obj).get(api.LABEL_NAME) == record.parent]
        states = views.slice_states(lws, target=str(summary["revision"]))
        conditions = {
            c["type"]: c["status"] for c in record.response["status"].get("conditions", [])
        }
        phases: dict[str, str] = dict(summary.get("slices", {}))
        parts = []
        for index, state in states.items():
            extra = sorted(set(state.old) - set(roles))
            parts.append(
                f"s{index}[{views.format_vectors(state, [*roles, *extra])}"
                f" | {phases.get(str(index), '-')}]"
            )
        changes = f"+{len(record.created)} ~{len(record.updated)} -{len(record.deleted)}"
        self._note(
            f"sync {record.parent} rev={summary['revision']} {' '.join(parts)} {changes} "
            f"A={conditions.get('Available', '?')[0]} P={conditions.get('Progressing', '?')[0]} "
            f"D={conditions.get('Degraded', '?')[0]}"
        )


def keys_of(records: list[PassRecord], attribute: str) -> list[ObjectKey]:
    """All keys a list of passes created, updated or deleted (`attribute` names which)."""
    found: list[ObjectKey] = []
    for record in records:
        found.extend(getattr(record, attribute))
    return found
