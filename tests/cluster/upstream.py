"""Upstream's Go DisaggregatedSet controller beside a control plane, for the handover tests and
the benchmarks.

The peer (`../shared/peer/README.md`) is a build of kubernetes-sigs/lws that runs only upstream's
DisaggregatedSet reconciler and its LeaderWorkerSet and DisaggregatedSet webhooks. It is a peer to
measure and to hand sets over to, never a dependency: `find_binary` unpacks it from `../shared`
into a directory of the caller's (a test's control plane), and callers skip when it is absent.

`start` runs it on a control plane that has upstream's own CRDs (`CRDS`; `ControlPlane.start_bare`
installs them): a throwaway CA and a serving certificate for 127.0.0.1 (openssl), the binary with
a free webhook port, as a service account of its own (`SERVICE_ACCOUNT`, allowed every ordinary
verb: `ControlPlane.controller_kubeconfig`), and the Mutating- and
ValidatingWebhookConfigurations pointing the API server at it. It returns once the API server
calls the webhooks: a dry-run LWS comes back defaulted and a set with `maxSurge: 0,
maxUnavailable: 0` is denied by the webhook. `stop` stops it and deletes those configurations
first (with `failurePolicy: Fail`, a webhook that no longer answers would refuse every LWS and
set write).
"""

from __future__ import annotations

import base64
import lzma
import shutil
import time
from pathlib import Path
from typing import Any, Final

from tests.cluster import sets
from tests.shared import REFERENCE_DIR, SHARED_DIR
from tools.sandbox import identities, kube, processes
from tools.sandbox.controlplane import ControlPlane

JsonObject = dict[str, Any]

NAME: Final = "peer"
USER_AGENT: Final = "ds-only-controller"
ARCHIVE: Final = SHARED_DIR / "peer" / "ds-only-controller.xz"
CRDS: Final = (
    REFERENCE_DIR / "upstream-disaggregatedsets-crd.yaml",
    REFERENCE_DIR / "upstream-disaggregatedsetrolescalers-crd.yaml",
)
READY_TIMEOUT_SECONDS: Final = 60.0
# The service account of the LWS manager that runs upstream's controller (its release's
# manifests), which the peer runs as: every ordinary verb, not the kit's `adopt`.
SERVICE_ACCOUNT: Final = ("lws-system", "lws-controller-manager")

MUTATING: Final = kube.Resource(
    "admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", namespaced=False
)
VALIDATING: Final = kube.Resource(
    "admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", namespaced=False
)
LWS_GROUP: Final = "leaderworkerset.x-k8s.io"
DS_GROUP: Final = "disaggregatedset.x-k8s.io"


def missing() -> str | None:
    """Why the peer cannot run here (its archive or upstream's CRDs are absent), or None."""
    absent = [path for path in (ARCHIVE, *CRDS) if not path.is_file()]
    if not absent:
        return None
    names = ", ".join(f"../shared/{path.relative_to(SHARED_DIR)}" for path in absent)
    return f"upstream's controller cannot run: {names} not in this checkout"


def find_binary(directory: Path) -> Path:
    """The peer's binary, unpacked from `ARCHIVE` into `directory`."""
    binary = directory / "ds-only-controller"
    with lzma.open(ARCHIVE) as packed, binary.open("wb") as unpacked:
        shutil.copyfileobj(packed, unpacked)
    binary.chmod(0o755)
    return binary


def start(
    plane: ControlPlane,
    binary: Path,
    *,
    max_concurrent_reconciles: int = 8,
    qps: int = 500,
    burst: int = 500,
) -> processes.Process:
    """Start the peer under `plane` (its `stop()` stops it) and register its webhooks."""
    cert_dir = plane.workdir / "peer-certs"
    cert_dir.mkdir(exist_ok=True)
    certificates = identities.make_certificates(cert_dir)
    for name, path in (("tls.crt", certificates.server_cert), ("tls.key", certificates.server_key)):
        (cert_dir / name).unlink(missing_ok=True)
        (cert_dir / name).symlink_to(path)
    webhook_port, probe_port = processes.free_port(), processes.free_port()
    kubeconfig = plane.controller_kubeconfig(*SERVICE_ACCOUNT)
    peer = plane.start_process(
        NAME,
        [
            str(binary),
            f"--kubeconfig={kubeconfig}",
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


def stop(plane: ControlPlane) -> None:
    """Delete the peer's webhook configurations, then stop it."""
    for resource, kind in (
        (MUTATING, "MutatingWebhookConfiguration"),
        (VALIDATING, "ValidatingWebhookConfiguration"),
    ):
        plane.client.delete(resource, _configuration_name(kind))
    plane.stop_process(NAME)


def _configuration_name(kind: str) -> str:
    return f"ds-peer-{kind.removesuffix('WebhookConfiguration').lower()}"


def _configuration(kind: str, webhooks: list[JsonObject]) -> JsonObject:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": _configuration_name(kind)},
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
