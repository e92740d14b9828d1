"""A fake Metacontroller v4.17 CompositeController for DisaggregatedSets (default dynamic apply).

Per sync it does what the real one does (see ../shared/reference/metacontroller-requests):

1. Calls the customize hook and collects `related` from the store as its answer asks (label
   selectors and names), foreign objects included; every rule's type gets a key, `{}` when empty.
2. Claims children: objects of the declared child types in the parent's namespace carrying the
   `controller-uid=<parent uid>` label whose controller ownerReference (if any) is the parent.
3. Builds the request: `controller`, `parent` (with the status as last written), `children`
   grouped by `<Kind>.<apiVersion>` (every declared type present) and keyed by `name` (hook
   version v1) or `namespace/name` (v2), `related`, `finalizing: false`. The body goes through
   JSON both ways, as on the wire.
4. Applies the answer (`tests.sim.apply`): creates missing children, updates existing ones with
   a three-way merge (no update when the merge changes nothing), deletes every observed child the
   answer omits, writes the returned status plus `observedGeneration`, and schedules a resync
   after `resyncAfterSeconds`.

A child whose name an object the set does not own already holds is not created and not
reported: Metacontroller's create fails with AlreadyExists, which it logs and goes on (the hook
finds such a child from its own status). Anything else the real controller would refuse (a
duplicate), and a child of a type it does not declare (which the real one would create once and
then never observe, update or delete), is reported through `SimulationError`. The declared types
are the kit's, or fewer (`child_types`: components/no-services leaves out Services).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from hooks import api
from hooks.core import sync
from hooks.server import app
from hooks.wire import answers, envelope
from tests.sim import apply
from tests.sim.store import (
    FakeClock,
    ImmutableFieldError,
    ObjectKey,
    Store,
    clone,
    object_key,
    type_key,
)

JsonObject = dict[str, Any]

DS_TYPE = f"{api.DS_KIND}.{api.API_VERSION}"
LWS_TYPE = f"{api.LWS_KIND}.{api.LWS_API_VERSION}"
SERVICE_TYPE = f"{api.SERVICE_KIND}.{api.SERVICE_API_VERSION}"
SCALER_TYPE = f"{api.SCALER_KIND}.{api.API_VERSION}"
REVISION_TYPE = f"{api.REVISION_KIND}.{api.API_VERSION}"
DS_CHILD_TYPES = (SCALER_TYPE, LWS_TYPE, SERVICE_TYPE, REVISION_TYPE)

RESOURCE_KINDS = {
    "leaderworkersets": api.LWS_KIND,
    "services": api.SERVICE_KIND,
    api.REVISION_PLURAL: api.REVISION_KIND,
    api.SCALER_PLURAL: api.SCALER_KIND,
    api.DS_PLURAL: api.DS_KIND,
}


class SimulationError(Exception):
    """Something the real Metacontroller or API server would have refused, or a hook crash."""


HOOKS_URL = "http://disaggregatedset-hooks.disaggregatedset-system.svc"


def controller_object(
    *,
    name: str,
    version: str,
    parent_resource: str = api.DS_PLURAL,
    child_types: Sequence[str] = (),
    hooks_path: str = "",
) -> JsonObject:
    """The `controller` field of a request: the CompositeController as Metacontroller has it
    cached (as metacontroller/compositecontrollers.yaml declares it, with the API server's
    defaults; metadata shortened). The hooks read none of it."""
    plurals = {kind: resource for resource, kind in RESOURCE_KINDS.items()}
    spec: JsonObject = {
        "parentResource": {"apiVersion": api.API_VERSION, "resource": parent_resource},
        "generateSelector": True,
        "resyncPeriodSeconds": 300,
        "hooks": {
            hook: {
                "version": version,
                "webhook": {"url": f"{HOOKS_URL}{hooks_path}/{hook}", "timeout": "10s"},
            }
            for hook in ("sync", "customize")
        },
    }
    if child_types:
        spec["childResources"] = [
            {
                "apiVersion": child_type.split(".", 1)[1],
                "resource": plurals[child_type.split(".", 1)[0]],
                "updateStrategy": {"method": "InPlace", "statusChecks": {}},
            }
            for child_type in child_types
        ]
    return {
        "apiVersion": "metacontroller.k8s.io/v1alpha1",
        "kind": "CompositeController",
        "metadata": {"name": name, "generation": 1},
        "spec": spec,
        "status": {},
    }


def ds_controller(*, version: str, child_types: Sequence[str] = DS_CHILD_TYPES) -> JsonObject:
    """The DisaggregatedSet CompositeController (with all the kit's child types by default)."""
    return controller_object(
        name="disaggregatedset-controller", version=version, child_types=child_types
    )


def inner_key(obj: Mapping[str, Any], *, version: str) -> str:
    metadata = obj["metadata"]
    if version == "v1":
        return str(metadata["name"])
    return f"{metadata.get('namespace', '')}/{metadata['name']}"


def wire(value: Any) -> Any:
    """A JSON round trip, as the HTTP transport does it."""
    return orjson.loads(orjson.dumps(value))


def collect_related(store: Store, rules: list[JsonObject], *, version: str) -> JsonObject:
    """`related` for a customize answer's relatedResources (the stored objects: read-only)."""
    related: JsonObject = {}
    for rule in rules:
        kind = RESOURCE_KINDS.get(rule["resource"])
        if kind is None:
            raise SimulationError(f"customize asked for an unknown resource {rule['resource']!r}")
        key = f"{kind}.{rule['apiVersion']}"
        group = related.setdefault(key, {})
        selector = rule.get("labelSelector")
        labels = selector.get("matchLabels", {}) if isinstance(selector, dict) else None
        names = tuple(rule["names"]) if "names" in rule else None
        for obj in store.find(key, namespace=rule.get("namespace"), labels=labels, names=names):
            group[inner_key(obj, version=version)] = obj
    return related


@dataclass(frozen=True, slots=True)
class PassRecord:
    """One DisaggregatedSet sync: what was sent, answered and changed.

    `request`, `before` and `after` hold the stored objects themselves (`request` as
    `FakeMetacontroller.assemble_request` built it, the others as store snapshots): read only.
    """

    tick: int
    now: str
    parent: str
    request: JsonObject
    response: JsonObject
    summary: Mapping[str, Any]
    before: Mapping[ObjectKey, JsonObject]
    after: Mapping[ObjectKey, JsonObject]
    created: tuple[ObjectKey, ...]
    updated: tuple[ObjectKey, ...]
    deleted: tuple[ObjectKey, ...]
    status_written: bool


@dataclass
class FakeMetacontroller:
    """The DisaggregatedSet CompositeController."""

    store: Store
    clock: FakeClock
    version: str = "v1"
    child_types: tuple[str, ...] = DS_CHILD_TYPES
    """The child types it declares (the kit's; components/no-services leaves out Services)."""
    dirty: set[str] = field(default_factory=set)
    resync_at: dict[str, int] = field(default_factory=dict)
    """parent name -> clock second of its requested resync."""
    observers: list[Callable[[PassRecord], None]] = field(default_factory=list)

    def due(self, name: str) -> bool:
        return name in self.dirty or self.resync_at.get(name, math.inf) <= self.clock.seconds

    def pending(self) -> bool:
        return bool(self.dirty or self.resync_at)

    def run(self, tick: int) -> list[PassRecord]:
        records = []
        for parent in self.store.select(DS_TYPE):
            name = parent["metadata"]["name"]
            if self.due(name):
                self.dirty.discard(name)
                self.resync_at.pop(name, None)
                records.append(self.sync_once(parent, tick=tick))
        return records

    def build_request(self, parent: JsonObject) -> JsonObject:
        """The sync request Metacontroller would send for `parent` right now (its own copy of
        every object, as decoded from the wire)."""
        request: JsonObject = wire(self.assemble_request(parent))
        return request

    def assemble_request(self, parent: JsonObject) -> JsonObject:
        """The request of `build_request` holding the stored objects themselves (read-only: the
        store never changes them, so it stays as it was sent)."""
        controller = ds_controller(version=self.version, child_types=self.child_types)
        customize_body = wire({"controller": controller, "parent": parent})
        customized = sync.customize(envelope.parse_customize_request(customize_body))
        rules = wire(answers.render_answer(customized.answer))["relatedResources"]
        children: JsonObject = {key: {} for key in self.child_types}
        for obj in self.claimed_children(parent).values():
            children[type_key(obj)][inner_key(obj, version=self.version)] = obj
        return {
            "controller": controller,
            "parent": parent,
            "children": children,
            "related": collect_related(self.store, rules, version=self.version),
            "finalizing": False,
        }

    def claimed_children(self, parent: JsonObject) -> dict[ObjectKey, JsonObject]:
        """The children Metacontroller claims for `parent` (the stored objects: read-only)."""
        metadata = parent["metadata"]
        uid = metadata["uid"]
        found = {}
        for child_type in self.child_types:
            selector = {api.CONTROLLER_UID_LABEL: uid}
            for obj in self.store.find(
                child_type, namespace=metadata["namespace"], labels=selector
            ):
                owner = controller_owner(obj)
                if owner is None or owner.get("uid") == uid:
                    found[object_key(obj)] = obj
        return found

    def call_sync(self, request: JsonObject) -> tuple[Mapping[str, Any], JsonObject]:
        """The server's `/sync` hook as its view runs it (parse, sync, render): the summary with
        its `writes`, and the answer as JSON."""
        summary, answer = app.work(app.default_hooks()["/sync"], self.clock.iso())(wire(request))
        return summary, orjson.loads(answer)

    def sync_once(self, parent: JsonObject, *, tick: int) -> PassRecord:
        # call_sync sends a copy through JSON: the record keeps the request as assembled.
        request = self.assemble_request(parent)
        try:
            summary, response = self.call_sync(request)
        except Exception as error:
            raise SimulationError(
                f"sync of {parent['metadata']['name']} raised {type(error).__name__}: {error}"
            ) from error
        observed = self.claimed_children(parent)
        before = self.store.snapshot()
        created, updated, deleted = self._apply_children(parent, observed, response["children"])
        status = {**response["status"], "observedGeneration": parent["metadata"]["generation"]}
        status_written = self.store.write_status(object_key(parent), status, actor="metacontroller")
        name = parent["metadata"]["name"]
        if "resyncAfterSeconds" in response:
            delay = max(1, math.ceil(response["resyncAfterSeconds"]))
            self.resync_at[name] = self.clock.seconds + delay
        record = PassRecord(
            tick=tick,
            now=self.clock.iso(),
            parent=name,
            request=request,
            response=response,
            summary=summary,
            before=before,
            after=self.store.snapshot(),
            created=tuple(created),
            updated=tuple(updated),
            deleted=tuple(deleted),
            status_written=status_written,
        )
        for observer in self.observers:
            observer(record)
        return record

    def _apply_children(
        self,
        parent: JsonObject,
        observed: Mapping[ObjectKey, JsonObject],
        desired: list[JsonObject],
    ) -> tuple[list[ObjectKey], list[ObjectKey], list[ObjectKey]]:
        metadata = parent["metadata"]
        created, updated = [], []
        wanted: set[ObjectKey] = set()
        for child in desired:
            if type_key(child) not in self.child_types:
                raise SimulationError(f"sync returned a child of undeclared type {type_key(child)}")
            full = apply.with_metacontroller_fields(
                child, namespace=metadata["namespace"], parent_uid=metadata["uid"]
            )
            key = object_key(full)
            if key in wanted:
                raise SimulationError(f"sync returned {key} twice")
            wanted.add(key)
            if key in observed:
                live = self.store.peek(key)
                if live is None:
                    raise SimulationError(f"observed child {key} vanished")
                merged = apply.three_way_merge(live, apply.read_last_applied(live), full)
                apply.annotate(merged, full)
                if merged == live:
                    continue  # nothing to write: Metacontroller sends no update either
                try:
                    changed = self.store.update(merged, actor="metacontroller")
                except ImmutableFieldError as error:
                    raise SimulationError(f"the API server refuses the update: {error}") from error
                if changed:
                    updated.append(key)
                continue
            if self.store.peek(key) is not None:
                continue  # the create fails AlreadyExists, which Metacontroller only logs
            new = clone(full)
            apply.annotate(new, full)
            new["metadata"]["ownerReferences"] = [
                apply.owner_reference(
                    api_version=api.API_VERSION,
                    kind=api.DS_KIND,
                    name=metadata["name"],
                    uid=metadata["uid"],
                )
            ]
            add_server_defaults(new)
            self.store.create(new, actor="metacontroller")
            created.append(key)
        deleted = []
        for key in sorted(set(observed) - wanted):
            self.store.delete(key, actor="metacontroller")
            deleted.append(key)
        return created, updated, deleted


def controller_owner(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller") is True:
            owner: Mapping[str, Any] = ref
            return owner
    return None


def add_server_defaults(obj: JsonObject) -> None:
    """Fields the API server adds that the hook never sent (kept by the three-way merge)."""
    if obj["kind"] == api.SERVICE_KIND:
        spec = obj.setdefault("spec", {})
        spec.setdefault("clusterIPs", [spec.get("clusterIP", "None")])
        spec.setdefault("internalTrafficPolicy", "Cluster")
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
        spec.setdefault("sessionAffinity", "None")
        spec.setdefault("type", "ClusterIP")
        obj["status"] = {"loadBalancer": {}}
