"""A small Kubernetes REST client for the cluster suite, over `requests`.

Only what the tests use: get, list, create, merge-patch (of the object or of a subresource),
delete, and a watch that runs a callback on every event in a background thread. `kubectl` itself
is used where the test is about kubectl (apply, get, scale).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

import requests

JsonObject = dict[str, Any]

REQUEST_TIMEOUT_SECONDS: Final = 30
WATCH_WINDOW_SECONDS: Final = 2


class ApiError(Exception):
    """The API server answered with an error status; `status` is its Status object."""

    def __init__(self, code: int, status: JsonObject) -> None:
        super().__init__(f"{code}: {status.get('message', status)}")
        self.code = code
        self.status = status


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
CRDS: Final = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", namespaced=False)


class Client:
    """Bearer-token client of one API server."""

    def __init__(self, *, server: str, token: str, ca_file: str) -> None:
        self.server = server
        self._session = requests.Session()
        self._session.headers["Authorization"] = f"Bearer {token}"
        self._session.verify = ca_file
        # Loopback only: no proxy, and no CA bundle from the environment in place of `ca_file`.
        self._session.trust_env = False

    def is_ready(self) -> bool:
        """Whether the API server's /readyz answers 200."""
        return self._session.get(self.server + "/readyz", timeout=2).status_code == 200

    def close(self) -> None:
        self._session.close()

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
        data = None if body is None else json.dumps(body)
        response = self._session.request(
            method,
            self.server + path,
            data=data,
            params=params,
            headers={"Content-Type": content_type},
            timeout=REQUEST_TIMEOUT_SECONDS,
        )
        payload: JsonObject = response.json() if response.content else {}
        if response.status_code >= 300:
            raise ApiError(response.status_code, payload)
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

    def stream(
        self, path: str, *, resource_version: str, stop: threading.Event
    ) -> Iterator[JsonObject]:
        """Watch events from `resource_version` on, in short windows, until `stop` is set.

        Each window is one watch request that the server ends after a few seconds, so a stopped
        watch ends within one window; the next window resumes from the last resource version.
        """
        while not stop.is_set():
            params = {
                "watch": "1",
                "resourceVersion": resource_version,
                "allowWatchBookmarks": "true",
                "timeoutSeconds": str(WATCH_WINDOW_SECONDS),
            }
            try:
                with self._session.get(
                    self.server + path, params=params, stream=True, timeout=REQUEST_TIMEOUT_SECONDS
                ) as response:
                    if response.status_code == 410:  # Expired: relist from now.
                        resource_version = self.request("GET", path)["metadata"]["resourceVersion"]
                        continue
                    for line in response.iter_lines():
                        if stop.is_set():
                            return
                        if not line:
                            continue
                        event: JsonObject = json.loads(line)
                        metadata = event.get("object", {}).get("metadata", {})
                        resource_version = metadata.get("resourceVersion", resource_version)
                        if event.get("type") != "BOOKMARK":
                            yield event
            except requests.RequestException:
                if stop.is_set():
                    return
                time.sleep(0.1)


class Watch:
    """Runs `on_event(event)` for every event of a collection, in a daemon thread."""

    def __init__(
        self,
        client: Client,
        resource: Resource,
        on_event: Callable[[JsonObject], None],
        *,
        namespace: str | None = None,
    ) -> None:
        self._client = client
        self._path = resource.path(namespace=namespace)
        self._on_event = on_event
        self._stop = threading.Event()
        listing = client.request("GET", self._path)
        self.initial: list[JsonObject] = listing["items"]
        self._thread = threading.Thread(
            target=self._run,
            args=(listing["metadata"]["resourceVersion"],),
            name=f"watch {self._path}",
            daemon=True,
        )
        self._thread.start()

    def _run(self, resource_version: str) -> None:
        for event in self._client.stream(
            self._path, resource_version=resource_version, stop=self._stop
        ):
            self._on_event(event)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=WATCH_WINDOW_SECONDS + REQUEST_TIMEOUT_SECONDS)


def is_established(crd: JsonObject) -> bool:
    """Whether a CustomResourceDefinition is served (its Established condition is True)."""
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def wait_for(
    condition: Callable[[], Any], *, timeout: float, message: str, interval: float = 0.05
) -> Any:
    """Poll until `condition()` returns something truthy, and return it; fail after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {message}")
        time.sleep(interval)
