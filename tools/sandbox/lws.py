"""The LeaderWorkerSet controller, played by the sandbox and the cluster tests: status follows
spec through `/status`, and what its admission webhook refuses is refused.

No kubelet runs, so no pod ever becomes ready. `FakeLwsController` watches every LeaderWorkerSet
and writes what a healthy LWS controller would report once every group is up: `replicas`,
`readyReplicas` and `updatedReplicas` equal to `spec.replicas` (1 when unset), and
`observedGeneration` (which the CRD of LWS v0.8.0 and older prunes). It writes through the
`/status` subresource, as `kubectl patch --subresource=status` does, after an optional delay. A
namespace can be held: its LWS keep their status until it is released, which is how a test makes
a rollout wait on readiness.

LeaderWorkerSet's validating webhook is played by a ValidatingAdmissionPolicy (`ADMISSION`,
which the control plane installs with the LWS CRD): the API server refuses, with LeaderWorkerSet's
words, every create or update of an LWS that the webhook at 060ab4d refuses in
`generalValidate` (its update-only rules about a subGroupPolicy changed are left out: nothing
here changes one). So a planted or written LWS behaves as on a real cluster; the hooks predict
the same rules (`hooks.core.admission`).
"""

from __future__ import annotations

import contextlib
import heapq
import threading
import time
import traceback
from collections.abc import Iterator
from typing import Any

from tools.sandbox import kube, processes

JsonObject = dict[str, Any]

# How long an LWS takes to become ready after a change. Real groups take seconds to minutes;
# with instant readiness a sync can start before Metacontroller's informer cache holds the last
# write of the previous pass, and the hook then plans from a mix of two passes.
READINESS_DELAY_SECONDS = 0.25


_LWT = "object.spec.leaderWorkerTemplate"
_RUC = "object.spec.rolloutStrategy.rollingUpdateConfiguration"
_PERCENT = "'^[0-9]+%$'"


def _int_or_percent(field: str) -> str:
    """CEL: the int-or-string `field` is a non-negative int or a percentage up to 100%."""
    value = f"{_RUC}.{field}"
    return (
        f"!has({value}) || (type({value}) == int ? {value} >= 0 : ({value}.matches({_PERCENT})"
        f" && int({value}.substring(0, {value}.size() - 1)) <= 100))"
    )


def _scaled(field: str, default: int, *, round_up: bool) -> str:
    """CEL: `field` resolved against the replicas (a valid value; percentages rounded)."""
    value = f"{_RUC}.{field}"
    percent = f"int({value}.substring(0, {value}.size() - 1)) * variables.replicas"
    scaled = f"({percent} + 99) / 100" if round_up else f"{percent} / 100"
    return f"(!has({value}) ? {default} : (type({value}) == int ? {value} : {scaled}))"


def _validation(expression: str, field: str, message: str) -> JsonObject:
    return {"expression": expression, "message": f"{field}: {message}", "reason": "Invalid"}


_SGS = f"{_LWT}.subGroupPolicy.subGroupSize"
_HAS_RUC = f"has(object.spec.rolloutStrategy) && has({_RUC})"
ADMISSION: list[JsonObject] = [
    {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "leaderworkerset-webhook"},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": ["leaderworkerset.x-k8s.io"],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["leaderworkersets"],
                    }
                ]
            },
            "variables": [
                {
                    "name": "replicas",
                    "expression": "has(object.spec.replicas) ? object.spec.replicas : 1",
                },
                {"name": "size", "expression": f"has({_LWT}.size) ? {_LWT}.size : 1"},
            ],
            "validations": [
                _validation(
                    "object.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')"
                    " && object.metadata.name.size() <= 63",
                    "metadata.name",
                    "a DNS-1035 label must consist of lower case alphanumeric characters or '-',"
                    " start with an alphabetic character, and end with an alphanumeric character",
                ),
                _validation(
                    "variables.replicas >= 0 && variables.replicas <= 1000000",
                    "spec.replicas",
                    "replicas must be equal or greater than 0 and equal or less than 1000000",
                ),
                _validation(
                    "variables.size >= 1",
                    "spec.leaderWorkerTemplate.size",
                    "size must be equal or greater than 1",
                ),
                _validation(
                    "variables.replicas * variables.size <= 2147483647",
                    "spec.replicas",
                    "the product of replicas and worker replicas must not exceed 2147483647",
                ),
                *(
                    _validation(
                        f"!({_HAS_RUC}) || ({_int_or_percent(field)})",
                        f"spec.rolloutStrategy.rollingUpdateConfiguration.{field}",
                        "must be a non-negative integer or a percentage not greater than 100%",
                    )
                    for field in ("maxUnavailable", "maxSurge")
                ),
                _validation(
                    f"!({_HAS_RUC}) || !has({_RUC}.partition) || {_RUC}.partition >= 0",
                    "spec.rolloutStrategy.rollingUpdateConfiguration.partition",
                    "must be greater than or equal to 0",
                ),
                _validation(
                    f"!({_HAS_RUC}) || variables.replicas == 0"
                    f" || !({_int_or_percent('maxUnavailable')})"
                    f" || !({_int_or_percent('maxSurge')})"
                    f" || {_scaled('maxUnavailable', 1, round_up=False)} != 0"
                    f" || {_scaled('maxSurge', 0, round_up=True)} != 0",
                    "spec.rolloutStrategy.rollingUpdateConfiguration.maxUnavailable",
                    "must not be 0 when `maxSurge` is 0",
                ),
                _validation(
                    f"!has({_LWT}.subGroupPolicy) || (has({_SGS}) && {_SGS} >= 1"
                    f" && {_SGS} <= variables.size && (variables.size % {_SGS} == 0"
                    f" || (variables.size - 1) % {_SGS} == 0)"
                    f" && (!has({_LWT}.subGroupPolicy.subGroupPolicyType)"
                    f" || {_LWT}.subGroupPolicy.subGroupPolicyType != 'LeaderExcluded'"
                    f" || (variables.size - 1) % {_SGS} == 0))",
                    "spec.leaderWorkerTemplate.SubGroupPolicy.subGroupSize",
                    "subGroupSize must be at least 1 and at most size, and size or size - 1"
                    " divisible by it (size - 1 when using LeaderExcluded)",
                ),
                _validation(
                    f"has({_LWT}.subGroupPolicy) || !has(object.metadata.annotations)"
                    " || !('leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology' in"
                    " object.metadata.annotations)",
                    "metadata.annotations.leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology",
                    "cannot have subgroup-exclusive-topology without subGroupSize set",
                ),
            ],
        },
    },
    {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "leaderworkerset-webhook"},
        "spec": {"policyName": "leaderworkerset-webhook", "validationActions": ["Deny"]},
    },
]
"""LeaderWorkerSet's validating webhook, as a ValidatingAdmissionPolicy and its binding."""


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
    """Whether `lws` reports `status`; an `observedGeneration` it never carries is not waited
    for (the CRD of LWS v0.8.0 and older has no such field and prunes it from every write)."""
    current = lws.get("status") or {}
    return all(
        current.get(key) == value
        for key, value in status.items()
        if key != "observedGeneration" or key in current
    )


class FakeLwsController:
    """Makes every LeaderWorkerSet ready at its spec replicas, `delay` seconds after a change.

    Its watch (`kube.Watch`) survives what the API server may do to a watch, and re-lists when it
    must, so no change is missed. Neither thread ever dies of an event or a failed write: an
    event that is not about an LWS is ignored (and kept in `ignored`), a write that may succeed
    later (connection error, 5xx, 429) is tried again with a backoff, and anything else goes to
    `errors`. `failures()` is everything a test should fail with (the sandbox reports it).
    """

    def __init__(
        self,
        client: kube.Client,
        *,
        delay: float = 0.0,
        watch_window_seconds: int = kube.WATCH_WINDOW_SECONDS,
    ) -> None:
        self._client = client
        self.delay = delay
        self._watch_window_seconds = watch_window_seconds
        self._held: set[str] = set()
        self._latest: dict[tuple[str, str], JsonObject] = {}
        self._due: list[tuple[float, str, str]] = []
        self._attempts: dict[tuple[str, str], int] = {}
        self._wake = threading.Condition()
        self._stopped = False
        self._worker = threading.Thread(target=self._write_loop, name="fake lws", daemon=True)
        self._watch: kube.Watch | None = None
        self.errors: list[str] = []
        self.ignored: list[str] = []
        self.retried_writes = 0

    @property
    def watch(self) -> kube.Watch:
        if self._watch is None:
            raise RuntimeError("the fake LWS controller is not started")
        return self._watch

    def start(self) -> None:
        self._worker.start()
        # Every LWS already there arrives as ADDED before the constructor returns.
        self._watch = kube.Watch(
            self._client, kube.LWS, self._on_event, window_seconds=self._watch_window_seconds
        )

    def stop(self) -> None:
        if self._watch is not None:
            self._watch.stop()
        with self._wake:
            self._stopped = True
            self._wake.notify_all()
        self._worker.join(timeout=5)

    def failures(self) -> list[str]:
        """Failed writes and exceptions of the writing thread, then the watch's failures."""
        watch_failures = self._watch.failures if self._watch is not None else []
        return [*self.errors, *watch_failures]

    def summary(self) -> str:
        """What the controller has seen and done, for an error message."""
        with self._wake:
            known, due, held = len(self._latest), len(self._due), sorted(self._held)
        watch = self._watch.summary() if self._watch is not None else "not started"
        return (
            f"fake LWS controller: {known} LWS known, {due} write(s) due, held {held}, "
            f"{self.retried_writes} retried write(s), {len(self.ignored)} ignored event(s); {watch}"
        )

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
        kind, lws = event.get("type"), event.get("object")
        metadata = lws.get("metadata") if isinstance(lws, dict) else None
        if (
            kind not in ("ADDED", "MODIFIED", "DELETED")
            or not isinstance(lws, dict)
            or not isinstance(metadata, dict)
            or not isinstance(metadata.get("namespace"), str)
            or not isinstance(metadata.get("name"), str)
        ):
            self.ignored.append(f"{kind}: {str(lws)[:200]}")
            return
        key = (metadata["namespace"], metadata["name"])
        with self._wake:
            if kind == "DELETED":
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
            try:
                self._write_due(namespace, name)
            except Exception:  # This thread must outlive any bug: the test fails with it.
                self.errors.append(f"{namespace}/{name}: {traceback.format_exc()}")

    def _write_due(self, namespace: str, name: str) -> None:
        """Write the ready status of one LWS, unless it is gone, held or ready already."""
        with self._wake:
            lws = self._latest.get((namespace, name))
            if lws is None or namespace in self._held:
                return
            status = ready_status(lws)
            if has_status(lws, status):
                return
        self._write(namespace, name, status)

    def _write(self, namespace: str, name: str, status: JsonObject) -> None:
        key = (namespace, name)
        try:
            self._client.patch(
                kube.LWS, name, {"status": status}, namespace=namespace, subresource="status"
            )
        except (kube.ApiError, *processes.TRANSPORT_ERRORS) as error:
            if isinstance(error, kube.ApiError) and error.code == 404:
                return  # Deleted since: nothing to report.
            if not kube.is_transient(error):
                self.errors.append(f"{namespace}/{name}: {error}")
                return
            with self._wake:
                attempts = self._attempts[key] = self._attempts.get(key, 0) + 1
                self.retried_writes += 1
                first, most = kube.RETRY_BACKOFF_SECONDS
                retry_at = time.monotonic() + min(most, first * 2 ** (attempts - 1))
                heapq.heappush(self._due, (retry_at, *key))
                self._wake.notify_all()
            return
        with self._wake:
            self._attempts.pop(key, None)
