"""A small Kubernetes REST client for the sandbox and the cluster suite, over the standard
library's `http.client`.

Only what they use: get, list, create, merge-patch (of the object or of a subresource), delete,
an informer-like `Watch` that runs a callback on every change in a background thread, and
`wait_for`, the one polling wait. `kubectl` itself is used where the work is about kubectl
(apply, get, scale). One client serves any number of threads: each thread's requests share one
kept-alive connection (a TLS handshake per request would slow a thread that writes often, such
as the fake LWS controller, enough to change what the controller under test sees); a watch has a
connection of its own.
"""

from __future__ import annotations

import collections
import contextlib
import http.client
import json
import select
import ssl
import threading
import time
import traceback
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from tools.sandbox import processes

JsonObject = dict[str, Any]
T = TypeVar("T")

REQUEST_TIMEOUT_SECONDS: Final = 30
CONNECT_TIMEOUT_SECONDS: Final = 10
WATCH_WINDOW_SECONDS: Final = 2
# A watch window that has said nothing for this long is taken as dead (the server sends a
# bookmark or ends the window well before).
WATCH_READ_TIMEOUT_SECONDS: Final = 30
# Between failed attempts (a refused connection, a 5xx, a second relist in a row): doubling from
# the first value up to the second.
RETRY_BACKOFF_SECONDS: Final = (0.05, 2.0)
POLL_INTERVAL_SECONDS: Final = 0.1
# How much of what a wait last saw goes into its timeout message.
LAST_SEEN_CHARS: Final = 4000


class ApiError(Exception):
    """The API server answered with an error status; `status` is its Status object."""

    def __init__(self, code: int, status: JsonObject) -> None:
        super().__init__(f"{code}: {status.get('message', status)}")
        self.code = code
        self.status = status


def _error_body(content: bytes) -> JsonObject:
    """An error answer's Status object, or its text as the message (an unknown path answers
    `404 page not found`, no JSON)."""
    try:
        found = json.loads(content)
    except ValueError:
        found = None
    if isinstance(found, dict):
        return found
    return {"message": content.decode("utf-8", errors="replace").strip()}


def is_transient(error: Exception) -> bool:
    """Whether a request may succeed when tried again: a connection or read failure, a 5xx,
    or 429 Too Many Requests (an API server under load answers both)."""
    if isinstance(error, ApiError):
        return error.code >= 500 or error.code == 429
    return isinstance(error, processes.TRANSPORT_ERRORS)


@dataclass(frozen=True, slots=True)
class Resource:
    """Where a kind lives in the REST API."""

    group: str
    version: str
    plural: str
    namespaced: bool = True

    def path(self, *, namespace: str | None = None, name: str | None = None) -> str:
        base = f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"
        if self.namespaced and namespace is not None:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{name}"
        return base


LWS: Final = Resource("leaderworkerset.x-k8s.io", "v1", "leaderworkersets")
SERVICES: Final = Resource("", "v1", "services")
NAMESPACES: Final = Resource("", "v1", "namespaces", namespaced=False)
DISAGGREGATED_SETS: Final = Resource("disaggregatedset.x-k8s.io", "v1", "disaggregatedsets")
SCALERS: Final = Resource("disaggregatedset.x-k8s.io", "v1", "disaggregatedsetrolescalers")
REVISIONS: Final = Resource("disaggregatedset.x-k8s.io", "v1", "disaggregatedsetrevisions")
CRDS: Final = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", namespaced=False)


class Client:
    """Bearer-token client of one API server (`server` may be plain http, for a test server).

    Loopback only: no proxy, and no CA bundle from the environment in place of `ca_file`."""

    def __init__(self, *, server: str, token: str, ca_file: str) -> None:
        self.server = server
        url = urllib.parse.urlsplit(server)
        self._host = url.hostname or "127.0.0.1"
        self._port = url.port
        self._tls = ssl.create_default_context(cafile=ca_file) if url.scheme == "https" else None
        self._token = token
        self._kept = threading.local()
        self._lock = threading.Lock()
        self._open: set[http.client.HTTPConnection] = set()

    def close(self) -> None:
        """Close the connections kept alive for the threads (a later request opens a new one)."""
        with self._lock:
            connections, self._open = self._open, set()
        for connection in connections:
            connection.close()

    def is_ready(self) -> bool:
        """Whether the API server's /readyz answers 200."""
        with self._exchange("/readyz", timeout=2) as response:
            response.read()
            return response.status == 200

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = "application/json",
        params: dict[str, str] | None = None,
    ) -> JsonObject:
        """One API call; raises `ApiError` for a non-2xx answer."""
        data = None if body is None else json.dumps(body).encode()
        status, content = self._on_kept_connection(
            method, _with_query(path, params), body=data, content_type=content_type
        )
        if status >= 300:
            raise ApiError(status, _error_body(content))
        payload: JsonObject = json.loads(content) if content else {}
        return payload

    def get(self, resource: Resource, name: str, *, namespace: str | None = None) -> JsonObject:
        return self.request("GET", resource.path(namespace=namespace, name=name))

    def list(self, resource: Resource, *, namespace: str | None = None) -> list[JsonObject]:
        items: list[JsonObject] = self.request("GET", resource.path(namespace=namespace))["items"]
        return items

    def create(self, resource: Resource, obj: JsonObject, *, dry_run: bool = False) -> JsonObject:
        namespace = obj.get("metadata", {}).get("namespace")
        params = {"dryRun": "All"} if dry_run else None
        return self.request("POST", resource.path(namespace=namespace), body=obj, params=params)

    def patch(
        self,
        resource: Resource,
        name: str,
        patch: JsonObject,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> JsonObject:
        """A JSON merge patch of the object, or of its `status`/`scale` subresource."""
        path = resource.path(namespace=namespace, name=name)
        if subresource is not None:
            path += f"/{subresource}"
        return self.request("PATCH", path, body=patch, content_type="application/merge-patch+json")

    def delete(self, resource: Resource, name: str, *, namespace: str | None = None) -> None:
        self.request("DELETE", resource.path(namespace=namespace, name=name))

    def open_watch(
        self, path: str, params: dict[str, str], *, read_timeout: float
    ) -> contextlib.AbstractContextManager[http.client.HTTPResponse]:
        """A streamed watch request: the answer, its body not read yet, and the connection
        closed when the context ends. A read that waits `read_timeout` seconds fails."""
        return self._exchange(_with_query(path, params), timeout=read_timeout)

    def _on_kept_connection(
        self, method: str, path: str, *, body: bytes | None, content_type: str
    ) -> tuple[int, bytes]:
        """One request on this thread's kept-alive connection: its status and body. A new
        connection is opened when the thread has none or the server closed it while it idled; a
        connection whose request failed, or that the server will close, is not kept."""
        connection: http.client.HTTPConnection | None = getattr(self._kept, "connection", None)
        if connection is None or _closed_by_peer(connection):
            self._forget(connection)
            connection = self._connect(REQUEST_TIMEOUT_SECONDS)
            self._kept.connection = connection
            with self._lock:
                self._open.add(connection)
        try:
            connection.request(method, path, body=body, headers=self._headers(content_type))
            response = connection.getresponse()
            content = response.read()
        except BaseException:
            self._forget(connection)
            raise
        if response.will_close:
            self._forget(connection)
        return response.status, content

    def _forget(self, connection: http.client.HTTPConnection | None) -> None:
        if connection is None:
            return
        self._kept.connection = None
        with self._lock:
            self._open.discard(connection)
        connection.close()

    def _headers(self, content_type: str | None = None) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {self._token}"}
        if content_type is not None:
            headers["Content-Type"] = content_type
        return headers

    def _connect(self, timeout: float) -> http.client.HTTPConnection:
        """A connection made within `CONNECT_TIMEOUT_SECONDS`, every later read and write
        within `timeout`."""
        connection: http.client.HTTPConnection
        if self._tls is None:
            connection = http.client.HTTPConnection(
                self._host, self._port, timeout=CONNECT_TIMEOUT_SECONDS
            )
        else:
            connection = http.client.HTTPSConnection(
                self._host, self._port, timeout=CONNECT_TIMEOUT_SECONDS, context=self._tls
            )
        try:
            connection.connect()
        except BaseException:
            connection.close()
            raise
        if connection.sock is not None:
            connection.sock.settimeout(timeout)
        return connection

    @contextlib.contextmanager
    def _exchange(self, path: str, *, timeout: float) -> Iterator[http.client.HTTPResponse]:
        """One GET on a connection of its own, closed when the context ends."""
        connection = self._connect(timeout)
        try:
            connection.request("GET", path, headers=self._headers())
            yield connection.getresponse()
        finally:
            connection.close()


def _closed_by_peer(connection: http.client.HTTPConnection) -> bool:
    """Whether an idle kept-alive connection can no longer carry a request: it has no socket,
    or its socket is readable while no answer is awaited (the server closed it, or sent what
    no request asked for)."""
    if connection.sock is None:
        return True
    readable, _, _ = select.select([connection.sock], [], [], 0)
    return bool(readable)


def _with_query(path: str, params: dict[str, str] | None) -> str:
    return f"{path}?{urllib.parse.urlencode(params)}" if params else path


# --- the watch -----------------------------------------------------------------------------

ObjectKey = tuple[str, str]
OBJECT_EVENTS: Final = frozenset({"ADDED", "MODIFIED", "DELETED"})


def object_key(obj: JsonObject) -> ObjectKey:
    """(namespace, name) of an object ("" for a cluster-scoped one)."""
    metadata = obj["metadata"]
    return (metadata.get("namespace", ""), metadata["name"])


class _Relist(Exception):
    """What the watch knew may be stale (410 Gone, an ERROR event, a stream it cannot read):
    list again."""


@dataclass(frozen=True, slots=True)
class WatchCounts:
    """How often a watch listed and opened a watch request since it started."""

    lists: int
    windows: int


class Watch:
    """An informer of one collection: `on_event(event)` for every change, in a daemon thread.

    It works as client-go's reflector does:

    - It lists, and (with `initial_events`) calls `on_event` with ADDED for every listed object
      before the constructor returns. `initial` is that first list.
    - It then watches from the list's resourceVersion in windows the server ends after
      `WATCH_WINDOW_SECONDS` (so `stop()` takes effect within one window), each window from the
      last resourceVersion seen, bookmarks included (they are asked for and not passed on).
    - A window that ends, a stream closed early, a read timeout, a connection error or an error
      answer other than 410 only starts another window from that resourceVersion, after a
      backoff when something failed.
    - A 410 Gone answer, an ERROR event (its object is a Status: "too old resource version" and
      the like), an unknown event type or a line it cannot parse makes it list again. The new
      list is compared with what it knew, and the difference reaches `on_event` as events, as an
      informer's replace does: first DELETED (with the last object it knew) for objects gone,
      then, in the list's order, ADDED for new objects, MODIFIED for objects with another
      resourceVersion, and DELETED then ADDED for an object replaced under the same name
      (another uid). So a caller may miss intermediate states, never an object's latest state.

    `on_event` sees only ADDED, MODIFIED and DELETED events of objects with metadata, one at a
    time. When it raises, the traceback goes to `failures` and the watch goes on with the next
    event (so does an unexpected exception of the watch itself, which then lists again);
    `check()` raises if anything failed, so a test can fail with it.
    """

    def __init__(
        self,
        client: Client,
        resource: Resource,
        on_event: Callable[[JsonObject], None],
        *,
        namespace: str | None = None,
        initial_events: bool = True,
        window_seconds: int = WATCH_WINDOW_SECONDS,
        read_timeout: float = WATCH_READ_TIMEOUT_SECONDS,
        backoff: tuple[float, float] = RETRY_BACKOFF_SECONDS,
    ) -> None:
        self._client = client
        self._path = resource.path(namespace=namespace)
        self._on_event = on_event
        self._window_seconds = window_seconds
        self._read_timeout = read_timeout
        self._backoff = backoff
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._known: dict[ObjectKey, JsonObject] = {}
        self._resource_version: str | None = None
        self._next_resource_version: str | None = None
        self._lists = 0
        self._windows = 0
        self.failures: list[str] = []
        # Recoveries (re-lists, re-watches and why), newest last: for a failing test to print.
        self.incidents: collections.deque[str] = collections.deque(maxlen=50)
        listing = client.request("GET", self._path)
        self.initial: list[JsonObject] = listing["items"]
        self._replace(listing, deliver=initial_events)
        self._thread = threading.Thread(target=self._run, name=f"watch {self._path}", daemon=True)
        self._thread.start()

    # --- for callers -------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop watching; returns once the thread ended (within about one window)."""
        self._stop.set()
        self._thread.join(timeout=self._window_seconds + self._read_timeout + 5)

    def is_alive(self) -> bool:
        """Whether the thread still runs (until `stop()`, always)."""
        return self._thread.is_alive()

    def check(self) -> None:
        """Raise `AssertionError` with every recorded traceback, if there is one."""
        if self.failures:
            raise AssertionError(
                f"the watch of {self._path} failed {len(self.failures)} time(s):\n"
                + "\n".join(self.failures)
            )

    def counts(self) -> WatchCounts:
        with self._lock:
            return WatchCounts(lists=self._lists, windows=self._windows)

    def watch_next_from(self, resource_version: str) -> None:
        """Open the next window at `resource_version` instead of the last one seen: a test's
        way to make the watch meet an expired resourceVersion ("1", on a server that has run
        a while)."""
        with self._lock:
            self._next_resource_version = resource_version

    def summary(self) -> str:
        """The watch's state and latest incidents, for an error message."""
        counts = self.counts()
        with self._lock:
            incidents = "; ".join(self.incidents) or "none"
        return (
            f"watch {self._path}: {counts.lists} list(s), {counts.windows} window(s), "
            f"resourceVersion {self._resource_version}, incidents: {incidents}"
        )

    # --- the thread --------------------------------------------------------------------------

    def _run(self) -> None:
        failed_attempts = 0
        while not self._stop.is_set():
            try:
                if self._resource_version is None:
                    self._replace(self._client.request("GET", self._path), deliver=True)
                started = time.monotonic()
                self._watch_window()
                # A server that ends windows at once would make this loop spin: back off then.
                early = time.monotonic() - started < self._window_seconds / 2
                failed_attempts = failed_attempts + 1 if early else 0
            except _Relist as reason:
                # The first relist is immediate; a server that keeps asking for one is slowed.
                self._note(f"relist: {reason}")
                self._resource_version = None
                failed_attempts += 1
                if failed_attempts == 1:
                    continue
            except (*processes.TRANSPORT_ERRORS, ApiError, ValueError) as error:
                # A dropped connection, a read timeout, an error answer, a body that is not JSON:
                # try again from the same resourceVersion (or list again, if that was the list).
                self._note(f"retry after {type(error).__name__}: {error}")
                failed_attempts += 1
            except Exception:  # A bug here must not end the watch unseen: record, list again.
                self.failures.append(traceback.format_exc())
                self._resource_version = None
                failed_attempts += 1
            if failed_attempts:
                self._back_off(failed_attempts)

    def _back_off(self, failed_attempts: int) -> None:
        first, most = self._backoff
        self._stop.wait(min(most, first * 2 ** (failed_attempts - 1)))

    def _note(self, incident: str) -> None:
        with self._lock:
            self.incidents.append(f"{time.strftime('%H:%M:%S')} {incident}")

    def _watch_window(self) -> None:
        """One watch request, its events delivered, until the server ends it or `stop`."""
        with self._lock:
            if self._next_resource_version is not None:
                self._resource_version = self._next_resource_version
                self._next_resource_version = None
            self._windows += 1
        params = {
            "watch": "1",
            "resourceVersion": str(self._resource_version),
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(self._window_seconds),
        }
        with self._client.open_watch(
            self._path, params, read_timeout=self._read_timeout
        ) as response:
            if response.status == 410:
                raise _Relist(f"410 Gone from {params['resourceVersion']}")
            if response.status != 200:
                content = response.read()
                raise ApiError(response.status, _error_body(content))
            for line in iter(response.readline, b""):
                if self._stop.is_set():
                    return
                if line.strip():
                    self._handle(line.strip())

    def _handle(self, line: bytes) -> None:
        try:
            event = json.loads(line)
        except ValueError as error:
            raise _Relist(f"unreadable event {line[:200]!r}: {error}") from error
        kind = event.get("type") if isinstance(event, dict) else None
        obj = event.get("object") if isinstance(event, dict) else None
        if kind == "ERROR":
            status = obj if isinstance(obj, dict) else {}
            raise _Relist(f"ERROR event {status.get('code')}: {status.get('message', obj)}")
        if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
            raise _Relist(f"{kind} event without an object: {line[:200]!r}")
        version = obj["metadata"].get("resourceVersion")
        if kind == "BOOKMARK":
            self._resource_version = version or self._resource_version
            return
        if kind not in OBJECT_EVENTS:
            raise _Relist(f"unknown event type {kind!r}")
        key = object_key(obj)
        if kind == "DELETED":
            self._known.pop(key, None)
        else:
            self._known[key] = obj
        self._resource_version = version or self._resource_version
        self._deliver(kind, obj)

    def _replace(self, listing: JsonObject, *, deliver: bool) -> None:
        """Take a fresh list as the truth: what changed since the last one reaches `on_event`."""
        items: list[JsonObject] = listing["items"]
        listed = {object_key(obj): obj for obj in items}
        events: list[tuple[str, JsonObject]] = []
        events += [("DELETED", gone) for key, gone in self._known.items() if key not in listed]
        for key, obj in listed.items():
            known = self._known.get(key)
            if known is None:
                events.append(("ADDED", obj))
            elif known["metadata"].get("uid") != obj["metadata"].get("uid"):
                events += [("DELETED", known), ("ADDED", obj)]
            elif known["metadata"].get("resourceVersion") != obj["metadata"]["resourceVersion"]:
                events.append(("MODIFIED", obj))
        self._known = listed
        self._resource_version = listing["metadata"]["resourceVersion"]
        with self._lock:
            self._lists += 1
        if deliver:
            for kind, obj in events:
                self._deliver(kind, obj)

    def _deliver(self, kind: str, obj: JsonObject) -> None:
        try:
            self._on_event({"type": kind, "object": obj})
        except Exception:  # The caller's bug: recorded for `check()`, and the watch goes on.
            self.failures.append(traceback.format_exc())


# --- waiting -------------------------------------------------------------------------------


def is_established(crd: JsonObject) -> bool:
    """Whether a CustomResourceDefinition is served (its Established condition is True)."""
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def brief(value: Any) -> Any:
    """`value` with every Kubernetes object in it cut to what a wait is about: kind, name,
    generation, spec.replicas and status (no templates)."""
    if isinstance(value, dict):
        metadata = value.get("metadata")
        if isinstance(metadata, dict) and "name" in metadata:
            short: JsonObject = {
                "kind": value.get("kind"),
                "name": "/".join(filter(None, (metadata.get("namespace"), metadata["name"]))),
                "generation": metadata.get("generation"),
            }
            spec = value.get("spec")
            if isinstance(spec, dict) and "replicas" in spec:
                short["spec.replicas"] = spec["replicas"]
            short["status"] = value.get("status")
            return short
        return {key: brief(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [brief(item) for item in value]
    return value


def describe(value: Any) -> str:
    """What a wait last saw, as text of at most `LAST_SEEN_CHARS` characters."""
    try:
        text = json.dumps(brief(value), default=repr, sort_keys=True)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > LAST_SEEN_CHARS:
        text = text[:LAST_SEEN_CHARS] + f"... ({len(text)} characters)"
    return text


def wait_for(
    poll: Callable[[], T],
    *,
    timeout: float,
    message: str,
    until: Callable[[T], object] | None = None,
    show: Callable[[T], str] = describe,
    interval: float = POLL_INTERVAL_SECONDS,
) -> T:
    """Call `poll()` until `until(value)` holds (by default: until the value is truthy), and
    return that value.

    A transient failure of `poll` (see `is_transient`) counts as "not yet". After `timeout`
    seconds it raises `AssertionError` with `message` and what it last saw (`show(value)`, by
    default the value with every object cut to its status), or the last failure.
    """
    deadline = time.monotonic() + timeout
    last_seen = "nothing (no poll finished)"
    while True:
        try:
            value = poll()
        except (*processes.TRANSPORT_ERRORS, ApiError) as error:
            if not is_transient(error):
                raise
            last_seen = f"{type(error).__name__}: {error}"
        else:
            if until(value) if until is not None else value:
                return value
            last_seen = show(value)
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout:.0f} s waiting for {message}; last saw: {last_seen}"
            )
        time.sleep(interval)
