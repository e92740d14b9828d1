"""A real control plane on 127.0.0.1: etcd, kube-apiserver, the garbage collector, Metacontroller
and this project's hook server, with the kit installed as `kubectl apply -k .` installs it.

`ControlPlane.start(assets, workdir, kit=...)` creates fresh certificates (openssl) and random
ports, starts every process, installs the Metacontroller and LeaderWorkerSet CRDs (files found,
or `tools.sandbox.thirdparty`'s) and the kit of `kit` (a checkout's root, with its
kustomization.yaml) through an overlay in the work directory that points the
CompositeControllers' hook URLs at the local hook server (`kit_overlay`), starts Metacontroller as
the service account of its production manifests (`tools.sandbox.identities`), and returns once it
is ready. `stop()` stops every process it started, by process group, and removes the work
directory. No kubelet runs: the sandbox and the tests play the LeaderWorkerSet controller
(`tools.sandbox.lws`).

`ControlPlane.start_bare(assets, workdir, crds=...)` starts only etcd, kube-apiserver and the
garbage collector, with the LeaderWorkerSet CRD and the given CRDs: no Metacontroller, hook server
or kit, for another controller to run beside it (`start_process` runs it under the plane's
stop). Either can write the API server's audit log (`audit=True`: every request at level
Metadata, one JSON line at RequestReceived and one at ResponseComplete, to `audit_log`).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from tools.sandbox import identities, kube, lws, overlay, processes, thirdparty
from tools.sandbox.assets import Assets

START_TIMEOUT_SECONDS: Final = 60.0
# The large-fleet settings the README recommends, as components/metacontroller-scale adds them to
# Metacontroller's install; the control plane runs Metacontroller with them (its defaults, 5
# requests/s with a burst of 10, would make a rollout wait on client-side throttling).
SCALE_COMPONENT: Final = Path("components", "metacontroller-scale", "kustomization.yaml")
KUSTOMIZATION: Final = "kustomization.yaml"
# Metacontroller's service account in its production manifests, which the kit binds to the verb
# adopt (metacontroller/adoption-policy.yaml): (namespace, name).
METACONTROLLER_ACCOUNT: Final = ("metacontroller", "metacontroller")


def check_kit(kit: Path) -> None:
    """Raise `processes.ProcessError` unless `kit` holds a kit (its kustomization.yaml)."""
    if not (kit / KUSTOMIZATION).is_file():
        raise processes.ProcessError(f"{kit} holds no {KUSTOMIZATION}: no kit to install")


def scale_flags(kit: Path) -> tuple[str, ...]:
    """The flags the kit's components/metacontroller-scale appends to Metacontroller's
    arguments (its JSON patch; the other, a strategic merge, sets resources the local process
    has no use for)."""
    component = yaml.safe_load((kit / SCALE_COMPONENT).read_text())
    return tuple(
        operation["value"]
        for patch in component["patches"]
        if isinstance(operations := yaml.safe_load(patch["patch"]), list)
        for operation in operations
        if operation["path"].endswith("/args/-")
    )


# Every request at level Metadata (verb, resource, user agent; no bodies), written when it arrives
# and when its answer is complete (a watch's ResponseStarted is left out).
AUDIT_POLICY: Final = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["ResponseStarted"],
    "rules": [{"level": "Metadata"}],
}


@dataclass
class ControlPlane:
    """A running control plane; build it with `ControlPlane.start`."""

    assets: Assets
    workdir: Path
    kit: Path = Path()
    """The checkout whose kit is installed (its root, with the kit's kustomization.yaml); a bare
    plane installs none until `install_kit` is called."""
    running: dict[str, processes.Process] = field(default_factory=dict)
    server: str = ""
    token: str = ""
    kubeconfig: Path = Path()
    """The administrator's (group `system:masters`), as the sandbox prints it."""
    ca_file: Path = Path()
    hook_port: int = 0
    metacontroller_metrics: str = ""
    metacontroller_flags: Sequence[str] = ()
    kit_components: Sequence[Path] = ()
    """Components (directories) the kit is rendered with, as an overlay listing them would."""
    metacontroller_pprof: str = ""
    """The base URL of Metacontroller's /debug/pprof when started with `pprof=True`."""
    audit_log: Path | None = None
    """The API server's audit log (JSON lines) when started with `audit=True`."""
    _client: kube.Client | None = None

    # --- lifecycle ------------------------------------------------------------------------

    @classmethod
    def start(
        cls,
        assets: Assets,
        workdir: Path,
        *,
        kit: Path,
        metacontroller_flags: Sequence[str] | None = None,
        pprof: bool = False,
        audit: bool = False,
        kit_components: Sequence[Path] = (),
    ) -> ControlPlane:
        """Start everything; on any failure, stop what was started and re-raise. Metacontroller
        gets `metacontroller_flags`, by default those of the kit's
        components/metacontroller-scale, and serves /debug/pprof on a free port with `pprof`.
        The kit is rendered with `kit_components` (see `install_kit`)."""
        check_kit(kit)
        flags = scale_flags(kit) if metacontroller_flags is None else metacontroller_flags
        plane = cls(
            assets=assets,
            workdir=workdir,
            kit=kit,
            metacontroller_flags=flags,
            kit_components=kit_components,
        )
        plane._started(lambda certificates: plane._start(certificates, pprof=pprof), audit=audit)
        return plane

    @classmethod
    def start_bare(
        cls,
        assets: Assets,
        workdir: Path,
        *,
        crds: Sequence[Path] = (),
        audit: bool = False,
        kit: Path = Path(),
        metacontroller_crds: bool = False,
    ) -> ControlPlane:
        """etcd, kube-apiserver and the garbage collector with the LeaderWorkerSet CRD and `crds`
        installed, and Metacontroller's CRDs with `metacontroller_crds`: no Metacontroller, hook
        server or kit (`kit` is the one `install_kit`, called later, installs). On any failure,
        stop and re-raise."""
        plane = cls(assets=assets, workdir=workdir, kit=kit)
        plane._started(
            lambda certificates: plane._start_bare(
                certificates, crds, metacontroller_crds=metacontroller_crds
            ),
            audit=audit,
        )
        return plane

    def _started(self, start: Callable[[identities.Certificates], None], *, audit: bool) -> None:
        """The common beginning (certificates, etcd, the API server, a kubeconfig), then `start`."""
        try:
            self.workdir.mkdir(parents=True, exist_ok=True)
            certificates = identities.make_certificates(self.workdir)
            self.token = secrets.token_hex(16)
            self._start_etcd()
            self._start_apiserver(certificates, audit=audit)
            self._write_kubeconfig(certificates)
            start(certificates)
        except BaseException:
            self.stop()
            raise

    def _start(self, certificates: identities.Certificates, *, pprof: bool) -> None:
        metacontroller_crds, lws_crd = thirdparty.files(self.assets, self.workdir)
        self.install_crds_from(metacontroller_crds)
        self.install_crds_from(lws_crd)
        self.start_hooks()
        self.install_kit()
        self._wait_for_crds()
        self._install_lws_admission()
        self._start_controller_manager(certificates)
        self.start_metacontroller(pprof=pprof)

    def _start_bare(
        self,
        certificates: identities.Certificates,
        crds: Sequence[Path],
        *,
        metacontroller_crds: bool,
    ) -> None:
        metacontroller, lws = thirdparty.files(self.assets, self.workdir)
        for path in (lws, *crds, *([metacontroller] if metacontroller_crds else [])):
            self.install_crds_from(path)
        self._wait_for_crds()
        self._install_lws_admission()
        self._start_controller_manager(certificates)

    def stop(self) -> None:
        """Stop every process (newest first) and remove the work directory."""
        for process in reversed(list(self.running.values())):
            process.stop()
        if self._client is not None:
            self._client.close()
        shutil.rmtree(self.workdir, ignore_errors=True)

    @property
    def client(self) -> kube.Client:
        if self._client is None:
            raise RuntimeError("the control plane is not started")
        return self._client

    def start_process(
        self, name: str, command: Sequence[str], *, env: Mapping[str, str] | None = None
    ) -> processes.Process:
        """Start a program with its log in the work directory; `stop()` stops it first."""
        process = processes.start(name, command, log_dir=self.workdir, env=env)
        self.running[name] = process
        return process

    def stop_process(self, name: str) -> None:
        """Stop a program started with `start_process` (SIGTERM, then SIGKILL); its log stays."""
        self.running.pop(name).stop()

    # --- etcd and the API server ------------------------------------------------------------

    def _start_etcd(self) -> None:
        client_port, peer_port = processes.free_port(), processes.free_port()
        client_url = f"http://127.0.0.1:{client_port}"
        peer_url = f"http://127.0.0.1:{peer_port}"
        self.etcd_url = client_url
        etcd = self.start_process(
            "etcd",
            [
                str(self.assets.etcd),
                "--name=test",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={client_url}",
                f"--advertise-client-urls={client_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=test={peer_url}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )
        processes.wait_until_ready(
            etcd,
            lambda: processes.local_get(f"{client_url}/health").json().get("health") == "true",
            timeout=START_TIMEOUT_SECONDS,
        )

    def _start_apiserver(self, certificates: identities.Certificates, *, audit: bool) -> None:
        port = processes.free_port()
        self.server = f"https://127.0.0.1:{port}"
        tokens = self.workdir / "tokens.csv"
        tokens.write_text(f"{self.token},admin,admin-uid,system:masters\n")
        audit_flags: list[str] = []
        if audit:
            policy = self.workdir / "audit-policy.json"
            policy.write_text(json.dumps(AUDIT_POLICY))
            self.audit_log = self.workdir / "audit.log"
            audit_flags = [
                f"--audit-policy-file={policy}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
                "--audit-log-maxsize=0",  # no rotation: readers follow one file
            ]
        apiserver = self.start_process(
            "kube-apiserver",
            [
                str(self.assets.kube_apiserver),
                f"--etcd-servers={self.etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={port}",
                f"--tls-cert-file={certificates.server_cert}",
                f"--tls-private-key-file={certificates.server_key}",
                f"--cert-dir={self.workdir / 'apiserver-certs'}",
                f"--client-ca-file={certificates.ca_cert}",
                f"--token-auth-file={tokens}",
                "--authorization-mode=RBAC",
                "--service-account-issuer=https://kubernetes.default.svc",
                f"--service-account-key-file={certificates.service_account_public}",
                f"--service-account-signing-key-file={certificates.service_account_key}",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--endpoint-reconciler-type=none",
                *audit_flags,
            ],
        )
        self._client = kube.Client(
            server=self.server, token=self.token, ca_file=str(certificates.ca_cert)
        )
        processes.wait_until_ready(apiserver, self._client.is_ready, timeout=START_TIMEOUT_SECONDS)

    def _write_kubeconfig(self, certificates: identities.Certificates) -> None:
        self.ca_file = certificates.ca_cert
        self.kubeconfig = identities.write_kubeconfig(
            self.workdir / "kubeconfig",
            server=self.server,
            ca_file=self.ca_file,
            user="admin",
            token=self.token,
        )

    def controller_kubeconfig(self, namespace: str, name: str) -> Path:
        """A kubeconfig for a controller to run as the service account `namespace/name`, with
        every ordinary verb on every resource and nothing more (`identities.controller`)."""
        token = identities.controller(self.client, namespace, name)
        return identities.write_kubeconfig(
            self.workdir / f"{namespace}-{name}.kubeconfig",
            server=self.server,
            ca_file=self.ca_file,
            user=name,
            token=token,
        )

    # --- controllers -------------------------------------------------------------------------

    def _start_controller_manager(self, certificates: identities.Certificates) -> None:
        port = processes.free_port()
        kcm = self.start_process(
            "kube-controller-manager",
            [
                str(self.assets.kube_controller_manager),
                f"--kubeconfig={self.kubeconfig}",
                f"--authentication-kubeconfig={self.kubeconfig}",
                f"--authorization-kubeconfig={self.kubeconfig}",
                "--controllers=garbagecollector,namespace,serviceaccount,serviceaccount-token,"
                "clusterrole-aggregation,validatingadmissionpolicy-status-controller",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--service-account-private-key-file={certificates.service_account_key}",
                f"--root-ca-file={certificates.ca_cert}",
            ],
        )
        processes.wait_until_ready(
            kcm, lambda: processes.is_listening(port), timeout=START_TIMEOUT_SECONDS
        )

    def start_metacontroller(self, *, pprof: bool = False) -> None:
        """Start Metacontroller (its CRDs must exist) as the service account of its production
        manifests (`METACONTROLLER_ACCOUNT`, `identities`), and wait until it is ready."""
        kubeconfig = self.controller_kubeconfig(*METACONTROLLER_ACCOUNT)
        metrics_port, probe_port = processes.free_port(), processes.free_port()
        self.metacontroller_metrics = f"http://127.0.0.1:{metrics_port}/metrics"
        pprof_address = "0"
        if pprof:
            pprof_address = f"127.0.0.1:{processes.free_port()}"
            self.metacontroller_pprof = f"http://{pprof_address}/debug/pprof"
        metacontroller = self.start_process(
            "metacontroller",
            [
                str(self.assets.metacontroller),
                f"--kubeconfig={kubeconfig}",
                f"--metrics-address=127.0.0.1:{metrics_port}",
                f"--health-probe-bind-address=127.0.0.1:{probe_port}",
                f"--pprof-address={pprof_address}",
                "--discovery-interval=2s",
                *self.metacontroller_flags,
            ],
        )
        processes.wait_until_ready(
            metacontroller,
            lambda: processes.local_get(f"http://127.0.0.1:{probe_port}/readyz").ok,
            timeout=START_TIMEOUT_SECONDS,
        )

    # --- the hook server -----------------------------------------------------------------------

    @property
    def hook_url(self) -> str:
        return f"http://127.0.0.1:{self.hook_port}"

    def start_hooks(self) -> None:
        """Start `python -m hooks serve` on the hook port (a free one the first time) and wait for
        /healthz."""
        if not self.hook_port:
            self.hook_port = processes.free_port()
        tmp = self.workdir / "hooks-tmp"
        tmp.mkdir(exist_ok=True)
        hooks = self.start_process(
            "hooks",
            [sys.executable, "-m", "hooks", "serve", "--bind", f"127.0.0.1:{self.hook_port}"],
            env={**os.environ, "TMPDIR": str(tmp)},
        )
        processes.wait_until_ready(
            hooks,
            lambda: processes.local_get(f"{self.hook_url}/healthz").ok,
            timeout=START_TIMEOUT_SECONDS,
        )

    def hook_calls(self, hook: str, obj: str) -> list[dict[str, Any]]:
        """The hook server's log lines of `hook` calls for `obj` ("namespace/name"), in order."""
        calls = []
        for line in self.running["hooks"].log.read_text(errors="replace").splitlines():
            if not line.startswith("{"):
                continue
            entry = json.loads(line)
            if entry.get("hook") == hook and entry.get("object") == obj:
                calls.append(entry)
        return calls

    def kill_hooks(self) -> None:
        """Kill the hook server (arbiter and workers) without a graceful shutdown."""
        self.running.pop("hooks").kill()

    # --- kubectl and the kit -------------------------------------------------------------------

    def kubectl(
        self, *arguments: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this control plane."""
        return subprocess.run(
            ["kubectl", f"--kubeconfig={self.kubeconfig}", *arguments],
            input=stdin,
            capture_output=True,
            text=True,
            check=check,
            timeout=120,
        )

    def install_crds_from(self, path: Path) -> None:
        """Server-side apply every CustomResourceDefinition in a YAML file (a release's whole
        manifests.yaml may be given: its other objects are left out)."""
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: the LWS CRD is 1.3 MB
        documents = yaml.load_all(path.read_text(encoding="utf-8"), Loader=loader)
        crds = [doc for doc in documents if doc and doc.get("kind") == "CustomResourceDefinition"]
        if not crds:
            raise processes.ProcessError(f"{path} holds no CustomResourceDefinition")
        stdin = "\n".join(json.dumps(crd) for crd in crds)
        self._kubectl_retrying(["apply", "--server-side", "-f", "-"], stdin=stdin)

    @property
    def kit_overlay(self) -> Path:
        """The kustomization this control plane installs the kit from (`install_kit`)."""
        return self.workdir / overlay.DIRECTORY

    def install_kit(self, *, server_side: bool = False) -> subprocess.CompletedProcess[str]:
        """Write the kit as this control plane runs it (`tools.sandbox.overlay.write_kit`: the
        `kit_components`, the local hook URLs) and `kubectl apply -k` it, client-side as `kubectl
        apply -k .` applies (`server_side`: `--server-side`, as a migration does); the hook
        Deployment, Service and PDB never run (no kubelet). Returns what kubectl printed."""
        overlay.write_kit(
            self.kit, self.kit_overlay, components=self.kit_components, hook_url=self.hook_url
        )
        mode = ["--server-side"] if server_side else []
        return self._kubectl_retrying(["apply", *mode, "-k", str(self.kit_overlay)])

    def _kubectl_retrying(
        self, arguments: list[str], *, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while True:
            result = self.kubectl(*arguments, stdin=stdin, check=False)
            if result.returncode == 0:
                return result
            transient = "unable to handle the request" in result.stderr
            if not transient or time.monotonic() > deadline:
                raise processes.ProcessError(f"kubectl {' '.join(arguments)}: {result.stderr}")
            time.sleep(0.5)

    def _install_lws_admission(self) -> None:
        """LeaderWorkerSet's validating webhook, played by a ValidatingAdmissionPolicy
        (`lws.ADMISSION`); returns once the API server refuses an LWS of size 0 with it."""
        listing = {"apiVersion": "v1", "kind": "List", "items": lws.ADMISSION}
        self._kubectl_retrying(["apply", "-f", "-"], stdin=json.dumps(listing))
        kube.wait_for(
            self._lws_admission_refuses,
            timeout=START_TIMEOUT_SECONDS,
            message="the LeaderWorkerSet admission policy in force",
        )

    def _lws_admission_refuses(self) -> bool:
        probe = {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "metadata": {"name": "admission-probe", "namespace": "default"},
            "spec": {
                "leaderWorkerTemplate": {
                    "size": 0,
                    "workerTemplate": {"spec": {"containers": [{"name": "c", "image": "c"}]}},
                }
            },
        }
        try:
            self.client.create(kube.LWS, probe, dry_run=True)
        except kube.ApiError as error:
            return error.code == 422 and "size must be equal or greater than 1" in str(error)
        return False

    def _wait_for_crds(self) -> None:
        kube.wait_for(
            lambda: all(kube.is_established(crd) for crd in self.client.list(kube.CRDS)),
            timeout=START_TIMEOUT_SECONDS,
            message="CRDs established",
        )
