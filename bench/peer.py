"""Upstream's Go DisaggregatedSet controller beside a bare test control plane, for benchmarks.

The peer (`../shared/peer/README.md`) is a build of kubernetes-sigs/lws that runs only upstream's
DisaggregatedSet reconciler and its LeaderWorkerSet and DisaggregatedSet webhooks. It is a
benchmark peer, never a dependency: the bench takes its path from a flag and skips it when absent.

`start_peer` runs it on a control plane from `ControlPlane.start_bare` with upstream's own CRDs
installed (`UPSTREAM_CRDS`): a throwaway CA and a serving certificate for 127.0.0.1 (openssl), the
binary with a free webhook port, and the Mutating- and ValidatingWebhookConfigurations pointing
the API server at it. It returns once the API server calls the webhooks: a dry-run LWS comes back
defaulted and a set with `maxSurge: 0, maxUnavailable: 0` is denied by the webhook.

Its log (zap, JSON, timestamps in RFC 3339 with nanoseconds) has one line "Reconciling
DisaggregatedSet" at the start of every reconcile: `ReconcileCounter` counts them, and
`log_events` gives the lines of a time window for a timeline.
"""

from __future__ import annotations

import base64
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import orjson

from hooks.sandbox import kube, processes
from hooks.sandbox.controlplane import ControlPlane, make_certificates
from tests.cluster import sets
from tests.shared import REFERENCE_DIR

JsonObject = dict[str, Any]

NAME: Final = "peer"
USER_AGENT: Final = "ds-only-controller"
UPSTREAM_CRDS: Final = (
    REFERENCE_DIR / "upstream-disaggregatedsets-crd.yaml",
    REFERENCE_DIR / "upstream-disaggregatedsetrolescalers-crd.yaml",
)
READY_TIMEOUT_SECONDS: Final = 60.0
RECONCILING: Final = "Reconciling DisaggregatedSet"
RECONCILE_ERROR: Final = "Reconciler error"
# Fields of the peer's log lines worth showing in a timeline, in this order.
SHOWN_FIELDS: Final = ("role", "lws", "service", "from", "to", "revision", "error")

MUTATING: Final = kube.Resource(
    "admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", namespaced=False
)
VALIDATING: Final = kube.Resource(
    "admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", namespaced=False
)
LWS_GROUP: Final = "leaderworkerset.x-k8s.io"
DS_GROUP: Final = "disaggregatedset.x-k8s.io"


def start_peer(
    plane: ControlPlane,
    binary: Path,
    *,
    max_concurrent_reconciles: int = 8,
    qps: int = 500,
    burst: int = 500,
) -> processes.Process:
    """Start the peer under `plane` (its `stop()` stops it) and register its webhooks."""
    cert_dir = plane.workdir / "peer-certs"
    cert_dir.mkdir()
    certificates = make_certificates(cert_dir)
    (cert_dir / "tls.crt").symlink_to(certificates.server_cert)
    (cert_dir / "tls.key").symlink_to(certificates.server_key)
    webhook_port, probe_port = processes.free_port(), processes.free_port()
    peer = plane.start_process(
        NAME,
        [
            str(binary),
            f"--kubeconfig={plane.kubeconfig}",
            f"--cert-dir={cert_dir}",
            "--webhook-host=127.0.0.1",
            f"--webhook-port={webhook_port}",
            f"--health-probe-bind-address=127.0.0.1:{probe_port}",
            f"--max-concurrent-reconciles={max_concurrent_reconciles}",
            f"--kube-api-qps={qps}",
            f"--kube-api-burst={burst}",
            "--zap-time-encoding=rfc3339nano",
        ],
    )
    processes.wait_until_ready(
        peer,
        lambda: processes.local_get(f"http://127.0.0.1:{probe_port}/readyz").ok,
        timeout=READY_TIMEOUT_SECONDS,
    )
    ca_bundle = base64.b64encode(certificates.ca_cert.read_bytes()).decode()
    url = f"https://127.0.0.1:{webhook_port}"
    plane.client.create(
        MUTATING,
        _configuration(
            "MutatingWebhookConfiguration",
            [_webhook("mutate", url, LWS_GROUP, "leaderworkersets", ca_bundle)],
        ),
    )
    plane.client.create(
        VALIDATING,
        _configuration(
            "ValidatingWebhookConfiguration",
            [
                _webhook("validate", url, LWS_GROUP, "leaderworkersets", ca_bundle),
                _webhook("validate", url, DS_GROUP, "disaggregatedsets", ca_bundle),
            ],
        ),
    )
    _wait_for_webhooks(plane, peer)
    return peer


def _configuration(kind: str, webhooks: list[JsonObject]) -> JsonObject:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": f"ds-peer-{kind.lower()}"},
        "webhooks": webhooks,
    }


def _webhook(action: str, url: str, group: str, plural: str, ca_bundle: str) -> JsonObject:
    """One webhook at the path controller-runtime serves it on (`/mutate-<group>-v1-<kind>`)."""
    kind = plural.removesuffix("s")
    path = f"/{action}-{group.replace('.', '-')}-v1-{kind}"
    return {
        "name": f"{action[0]}{kind}.{group}",
        "clientConfig": {"url": url + path, "caBundle": ca_bundle},
        "rules": [
            {
                "apiGroups": [group],
                "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"],
                "resources": [plural],
            }
        ],
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": "Fail",
        "timeoutSeconds": 10,
    }


def _probe_lws(namespace: str) -> JsonObject:
    return {
        "apiVersion": f"{LWS_GROUP}/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "webhook-probe", "namespace": namespace},
        "spec": {
            "leaderWorkerTemplate": {
                "size": 1,
                "workerTemplate": {
                    "spec": {"containers": [{"name": "server", "image": sets.IMAGE_V1}]}
                },
            }
        },
    }


def _wait_for_webhooks(plane: ControlPlane, peer: processes.Process) -> None:
    """Until the API server calls both webhooks (it picks up new configurations a moment later)."""
    namespace = "default"
    denied = sets.small_set(namespace, max_surge=0, max_unavailable=0)
    denied["metadata"]["name"] = "webhook-probe"

    def defaulted() -> bool:
        stored = plane.client.create(kube.LWS, _probe_lws(namespace), dry_run=True)
        return "subdomainPolicy" in stored["spec"].get("networkConfig", {})

    def rejected() -> bool:
        try:
            plane.client.create(kube.DISAGGREGATED_SETS, denied, dry_run=True)
        except kube.ApiError as error:
            return "admission webhook" in str(error)
        return False

    deadline = time.monotonic() + READY_TIMEOUT_SECONDS
    while not (defaulted() and rejected()):
        if not peer.running() or time.monotonic() > deadline:
            raise processes.ProcessError(
                f"the peer's webhooks are not called after {READY_TIMEOUT_SECONDS:.0f} s:\n"
                f"{peer.log_tail()}"
            )
        time.sleep(0.2)


class ReconcileCounter:
    """Reconciles and reconcile errors in the peer's log so far; follows the file."""

    def __init__(self, log: Path) -> None:
        self._log = log
        self._offset = 0
        self.reconciles = 0
        self.errors = 0

    def read(self) -> tuple[int, int]:
        """(reconciles, errors) logged so far."""
        with self._log.open("rb") as log:
            log.seek(self._offset)
            chunk = log.read()
        complete = chunk.rfind(b"\n") + 1
        self._offset += complete
        for line in chunk[:complete].splitlines():
            if RECONCILING.encode() in line:
                self.reconciles += 1
            elif RECONCILE_ERROR.encode() in line:
                self.errors += 1
        return self.reconciles, self.errors


def log_events(log: Path, since: float, until: float) -> list[tuple[float, str, str]]:
    """(time, set name, what) of the peer's reconcile log lines between `since` and `until`."""
    events = []
    for line in log.read_bytes().splitlines():
        if not line.startswith(b"{") or b'"reconcileID"' not in line:
            continue
        entry = orjson.loads(line)
        at = datetime.fromisoformat(entry["ts"].replace("Z", "+00:00")).timestamp()
        if not since <= at <= until:
            continue
        fields = " ".join(f"{key}={str(entry[key])[:80]}" for key in SHOWN_FIELDS if key in entry)
        name = entry.get("DisaggregatedSet", {}).get("name", "")
        events.append((at, name, f"{entry['msg']} {fields}".rstrip()))
    return events
