"""The LeaderWorkerSet controller, played by the test: status follows spec through `/status`.

No kubelet runs, so no pod ever becomes ready. `FakeLwsController` watches every LeaderWorkerSet
and writes what a healthy LWS controller would report once every group is up: `replicas`,
`readyReplicas` and `updatedReplicas` equal to `spec.replicas` (1 when unset), and
`observedGeneration`. It writes through the `/status` subresource, as `kubectl patch
--subresource=status` does, after an optional delay. A namespace can be held: its LWS keep
their status until it is released, which is how a test makes a rollout wait on readiness.
"""

from __future__ import annotations

import contextlib
import heapq
import threading
import time
from collections.abc import Iterator
from typing import Any

import requests

from tests.cluster import kube

JsonObject = dict[str, Any]


def ready_status(lws: JsonObject) -> JsonObject:
    """The status of `lws` with every group up."""
    replicas = lws.get("spec", {}).get("replicas", 1)
    return {
        "replicas": replicas,
        "readyReplicas": replicas,
        "updatedReplicas": replicas,
        "observedGeneration": lws["metadata"]["generation"],
    }


def has_status(lws: JsonObject, status: JsonObject) -> bool:
    current = lws.get("status") or {}
    return all(current.get(key) == value for key, value in status.items())


class FakeLwsController:
    """Makes every LeaderWorkerSet ready at its spec replicas, `delay` seconds after a change."""

    def __init__(self, client: kube.Client, *, delay: float = 0.0) -> None:
        self._client = client
        self.delay = delay
        self._held: set[str] = set()
        self._latest: dict[tuple[str, str], JsonObject] = {}
        self._due: list[tuple[float, str, str]] = []
        self._wake = threading.Condition()
        self._stopped = False
        self._worker = threading.Thread(target=self._write_loop, name="fake lws", daemon=True)
        self._watch: kube.Watch | None = None
        self.errors: list[str] = []

    def start(self) -> None:
        self._worker.start()
        self._watch = kube.Watch(self._client, kube.LWS, self._on_event)
        for lws in self._watch.initial:
            self._on_event({"type": "ADDED", "object": lws})

    def stop(self) -> None:
        if self._watch is not None:
            self._watch.stop()
        with self._wake:
            self._stopped = True
            self._wake.notify_all()
        self._worker.join(timeout=5)

    @contextlib.contextmanager
    def held(self, namespace: str) -> Iterator[None]:
        """While inside, LWS of `namespace` keep their status; on exit they catch up."""
        with self._wake:
            self._held.add(namespace)
        try:
            yield
        finally:
            with self._wake:
                self._held.discard(namespace)
                now = time.monotonic()
                for namespace_, name in self._latest:
                    if namespace_ == namespace:
                        heapq.heappush(self._due, (now, namespace_, name))
                self._wake.notify_all()

    def _on_event(self, event: JsonObject) -> None:
        lws = event["object"]
        key = (lws["metadata"]["namespace"], lws["metadata"]["name"])
        with self._wake:
            if event["type"] == "DELETED":
                self._latest.pop(key, None)
                return
            self._latest[key] = lws
            if not has_status(lws, ready_status(lws)):
                heapq.heappush(self._due, (time.monotonic() + self.delay, *key))
                self._wake.notify_all()

    def _write_loop(self) -> None:
        while True:
            with self._wake:
                while not self._stopped and (not self._due or self._due[0][0] > time.monotonic()):
                    timeout = self._due[0][0] - time.monotonic() if self._due else None
                    self._wake.wait(timeout)
                if self._stopped:
                    return
                _, namespace, name = heapq.heappop(self._due)
                lws = self._latest.get((namespace, name))
                if lws is None or namespace in self._held:
                    continue
                status = ready_status(lws)
                if has_status(lws, status):
                    continue
            self._write(namespace, name, status)

    def _write(self, namespace: str, name: str, status: JsonObject) -> None:
        try:
            self._client.patch(
                kube.LWS, name, {"status": status}, namespace=namespace, subresource="status"
            )
        except kube.ApiError as error:
            if error.code != 404:  # Deleted since: nothing to report.
                self.errors.append(f"{namespace}/{name}: {error}")
        except requests.RequestException as error:
            self.errors.append(f"{namespace}/{name}: {error}")
