"""The simulated API server: a fake clock and an object store with change tracking.

Objects are plain JSON dicts keyed by `(type key, namespace, name)`, where the type key is
Metacontroller's `<Kind>.<apiVersion>`. The store hands out deep copies, assigns uids,
resourceVersions, generations (not to Services, which have none) and creation timestamps, writes
`metadata.managedFields` for the writer of every change as kube-apiserver does
(`tests.sim.managed_fields`; the actor is the field manager; managedFields a write sends are
ignored, as no writer here means to reset them), and records every write so the driver knows
when something changed (a controller's write is what wakes the others up).

A stored object is never changed in place: every write stores a new one. So `snapshot()` (a
shallow copy of `objects`) keeps the state of one moment for as long as it is needed, at the cost
of a dict, whatever the size of the objects.
"""

from __future__ import annotations

import copy
import datetime
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

import orjson

from hooks import api
from tests.sim import managed_fields

JsonObject = dict[str, Any]
ObjectKey = tuple[str, str, str]

EPOCH = datetime.datetime(2026, 11, 29, 12, 0, 0, tzinfo=datetime.UTC)
SERVER_FIELDS: Final = (
    "uid",
    "creationTimestamp",
    "resourceVersion",
    "generation",
    "managedFields",
)
"""Metadata the API server keeps whatever an update sends."""
WITHOUT_GENERATION: Final = frozenset({api.SERVICE_KIND})
"""Kinds whose objects have no metadata.generation (core Services)."""

T = TypeVar("T")


def clone(value: T) -> T:
    """A deep copy of JSON data: an orjson round trip, several times quicker than copy.deepcopy
    (what a large simulated set needs); copy.deepcopy for what JSON cannot hold (tests may plant
    anything)."""
    try:
        copied: T = orjson.loads(orjson.dumps(value))
    except orjson.JSONEncodeError:
        return copy.deepcopy(value)
    return copied


class ConflictError(Exception):
    """A create for a name that is taken, or an update/delete of a missing object."""


class ImmutableFieldError(Exception):
    """An update that changes a field the API server keeps immutable."""


def type_key(obj: Mapping[str, Any]) -> str:
    """`<Kind>.<apiVersion>`, the outer key Metacontroller uses in `children` and `related`."""
    return f"{obj['kind']}.{obj['apiVersion']}"


def object_key(obj: Mapping[str, Any]) -> ObjectKey:
    metadata = obj["metadata"]
    return (type_key(obj), metadata.get("namespace", ""), metadata["name"])


@dataclass
class FakeClock:
    """Whole seconds since EPOCH; the driver advances it by one second per tick."""

    seconds: int = 0

    def advance(self, seconds: int = 1) -> None:
        self.seconds += seconds

    def iso(self, seconds: int | None = None) -> str:
        """RFC 3339 text of `seconds` (default: now), as Kubernetes writes timestamps."""
        at = EPOCH + datetime.timedelta(seconds=self.seconds if seconds is None else seconds)
        return at.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class Write:
    """One change to the store."""

    verb: str
    key: ObjectKey
    actor: str


@dataclass
class Store:
    """Objects by key, with a log of writes since the driver last drained it."""

    clock: FakeClock
    objects: dict[ObjectKey, JsonObject] = field(default_factory=dict)
    writes: list[Write] = field(default_factory=list)
    _version: int = 0
    _uids: int = 0

    def _next_version(self) -> str:
        self._version += 1
        return str(self._version)

    def new_uid(self, hint: str) -> str:
        self._uids += 1
        return f"uid-{self._uids:04d}-{hint}"

    def get(self, key: ObjectKey) -> JsonObject | None:
        obj = self.objects.get(key)
        return clone(obj) if obj is not None else None

    def peek(self, key: ObjectKey) -> JsonObject | None:
        """The stored object itself (read-only use: the driver's checks)."""
        return self.objects.get(key)

    def select(
        self,
        type_key_: str,
        *,
        namespace: str | None = None,
        labels: Mapping[str, str] | None = None,
        names: tuple[str, ...] | None = None,
    ) -> list[JsonObject]:
        """Deep copies of the objects of one type that match, sorted by namespace and name."""
        return clone(self.find(type_key_, namespace=namespace, labels=labels, names=names))

    def find(
        self,
        type_key_: str,
        *,
        namespace: str | None = None,
        labels: Mapping[str, str] | None = None,
        names: tuple[str, ...] | None = None,
    ) -> list[JsonObject]:
        """The stored objects that `select` copies (read-only use)."""
        found = []
        for (kind, ns, name), obj in sorted(self.objects.items()):
            if kind != type_key_ or (namespace is not None and ns != namespace):
                continue
            if names is not None and name not in names:
                continue
            own = obj["metadata"].get("labels") or {}
            if labels is not None and any(own.get(k) != v for k, v in labels.items()):
                continue
            found.append(obj)
        return found

    def snapshot(self) -> dict[ObjectKey, JsonObject]:
        """Every object as it is now (read-only: the objects are the stored ones)."""
        return dict(self.objects)

    def iter_type(self, type_key_: str) -> Iterator[JsonObject]:
        for (kind, _, _), obj in sorted(self.objects.items()):
            if kind == type_key_:
                yield obj

    def create(self, obj: JsonObject, *, actor: str) -> JsonObject:
        key = object_key(obj)
        if key in self.objects:
            raise ConflictError(f"{key[0]} {key[1]}/{key[2]} already exists")
        stored = clone(obj)
        metadata = stored["metadata"]
        metadata.setdefault("uid", self.new_uid(metadata["name"]))
        metadata.setdefault("creationTimestamp", self.clock.iso())
        metadata["resourceVersion"] = self._next_version()
        if stored["kind"] not in WITHOUT_GENERATION:
            metadata["generation"] = 1
        self._manage(None, stored, actor=actor)
        self.objects[key] = stored
        self.writes.append(Write("create", key, actor))
        return clone(stored)

    def update(self, obj: JsonObject, *, actor: str) -> bool:
        """Replace an object's metadata and spec (not status); False when nothing changed.

        The generation goes up when the spec changes, as the API server does for objects with a
        status subresource.
        """
        key = object_key(obj)
        current = self.objects.get(key)
        if current is None:
            raise ConflictError(f"{key[0]} {key[1]}/{key[2]} does not exist")
        candidate = clone(obj)
        if "status" in current:
            candidate["status"] = current["status"]
        else:
            candidate.pop("status", None)
        for server_field in SERVER_FIELDS:
            if server_field in current["metadata"]:
                candidate["metadata"][server_field] = current["metadata"][server_field]
            else:
                candidate["metadata"].pop(server_field, None)
        if candidate == current:
            return False
        if current["kind"] == api.REVISION_KIND and any(
            candidate.get(field) != current.get(field) for field in ("roles", "packedRoles")
        ):
            # The CRD's CEL rules keep a DisaggregatedSetRevision's roles immutable.
            raise ImmutableFieldError(f"{key[0]} {key[1]}/{key[2]}: roles are immutable")
        if "generation" in current["metadata"] and candidate.get("spec") != current.get("spec"):
            candidate["metadata"]["generation"] = current["metadata"]["generation"] + 1
        candidate["metadata"]["resourceVersion"] = self._next_version()
        self._manage(current, candidate, actor=actor)
        self.objects[key] = candidate
        self.writes.append(Write("update", key, actor))
        return True

    def write_status(self, key: ObjectKey, status: JsonObject, *, actor: str) -> bool:
        """The status subresource: replace the whole status; False when nothing changed."""
        current = self.objects.get(key)
        if current is None:
            raise ConflictError(f"{key[0]} {key[1]}/{key[2]} does not exist")
        if current.get("status") == status:
            return False
        written = {**current, "status": clone(status)}
        written["metadata"] = {**current["metadata"], "resourceVersion": self._next_version()}
        self._manage(current, written, actor=actor, subresource="status")
        self.objects[key] = written
        self.writes.append(Write("status", key, actor))
        return True

    def delete(self, key: ObjectKey, *, actor: str) -> None:
        if key not in self.objects:
            raise ConflictError(f"{key[0]} {key[1]}/{key[2]} does not exist")
        del self.objects[key]
        self.writes.append(Write("delete", key, actor))

    def _manage(
        self,
        previous: JsonObject | None,
        current: JsonObject,
        *,
        actor: str,
        subresource: str | None = None,
    ) -> None:
        """Set `current`'s managedFields for `actor`'s write over `previous` (None: a create)."""
        entries = managed_fields.written(
            previous, current, manager=actor, time=self.clock.iso(), subresource=subresource
        )
        if entries:
            current["metadata"]["managedFields"] = entries
        else:
            current["metadata"].pop("managedFields", None)

    def drain_writes(self) -> list[Write]:
        writes, self.writes = self.writes, []
        return writes
