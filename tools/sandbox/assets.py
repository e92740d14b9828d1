"""Where the sandbox's programs and third-party CRDs come from.

The sandbox (and the cluster suite, which runs on it) starts etcd, kube-apiserver,
kube-controller-manager and Metacontroller as local processes. It finds them the way the
ecosystem does:

- `KUBEBUILDER_ASSETS`: a directory holding `etcd` and `kube-apiserver` (controller-runtime's
  envtest convention; `setup-envtest use -p path` prints one);
- `DS_TESTCLUSTER_ASSETS`: a directory holding `metacontroller` and `kube-controller-manager`, and
  optionally the third-party CRDs (`metacontroller-crds-v1.yaml`, and the LeaderWorkerSet CRD as
  `leaderworkersets-crd.yaml` or LWS's release `manifests.yaml`).

A caller may name more directories to look in after those (the cluster suite passes the team's
shared copy, when it has one). What cannot be found is reported as a sentence that names each
program missing and where its release publishes it (`HOW_TO_INSTALL`). `kubectl`, which installs
the kit and drives the control plane, comes from PATH.

Without CRD files the control plane installs its own (`tools.sandbox.thirdparty`): the four programs
are all a sandbox needs. The LeaderWorkerSet CRD is that of a release (`LWS_RELEASES`): by default
the one of upstream commit 060ab4d, whose LWS schema the API embeds (the sandbox's own, when no
file holds it); another release's is its release CRD, `leaderworkersets-crd-<release>.yaml`
(`v0.8.0`, `v0.7.0`), found the same way and required (the cluster suite's `--lws-release`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

ENVTEST_VARIABLE: Final = "KUBEBUILDER_ASSETS"
EXTRA_VARIABLE: Final = "DS_TESTCLUSTER_ASSETS"
ENVTEST_PROGRAMS: Final = ("etcd", "kube-apiserver")
EXTRA_PROGRAMS: Final = ("metacontroller", "kube-controller-manager")
METACONTROLLER_CRDS: Final = ("metacontroller-crds-v1.yaml",)
LWS_CRDS: Final = ("leaderworkersets-crd.yaml", "manifests.yaml")
REFERENCE_LWS: Final = "060ab4d"
LWS_RELEASES: Final = (REFERENCE_LWS, "v0.8.0", "v0.7.0")
"""The LeaderWorkerSet CRDs the cluster suite runs against: upstream's commit, then the releases
this project serves (docs/operations.md, "What runs with what")."""

# The Kubernetes minor version the suite runs (and the README claims): the cluster suite checks
# the API server's own version against it.
KUBERNETES_VERSION: Final = "1.36"

HOW_TO_INSTALL: Final = (
    f"set {ENVTEST_VARIABLE} to a directory with etcd and kube-apiserver (`setup-envtest use -p"
    f" path {KUBERNETES_VERSION}.x` prints one) and {EXTRA_VARIABLE} to a directory with"
    " metacontroller (/usr/bin/metacontroller of the image"
    " ghcr.io/metacontroller/metacontroller:v4.17.2) and kube-controller-manager"
    " (https://dl.k8s.io/v1.36.2/bin/linux/amd64/kube-controller-manager); see docs/operations.md,"
    " 'The sandbox'"
)
RELEASE_CRD_SOURCE: Final = (
    "config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml of kubernetes-sigs/lws at"
    " the tag {release}, saved as {name}"
)


class AssetsMissing(Exception):
    """Some program or CRD of the control plane cannot be found."""


@dataclass(frozen=True, slots=True)
class Assets:
    """Paths of everything the control plane needs."""

    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    metacontroller: Path
    metacontroller_crds: Path | None
    """None: the control plane installs its own (`tools.sandbox.thirdparty`)."""
    lws_crd: Path | None
    """None: the control plane installs its own, the CRD of 060ab4d (`tools.sandbox.thirdparty`)."""


def find_assets(*, fallbacks: Sequence[Path] = (), lws_release: str = REFERENCE_LWS) -> Assets:
    """The control plane's programs and CRDs, with the LeaderWorkerSet CRD of `lws_release`,
    from the two variables' directories, then from `fallbacks`; raises `AssetsMissing` with
    what to install."""
    if shutil.which("kubectl") is None:
        raise AssetsMissing("kubectl is not on PATH: the kit is installed with it")
    envtest = _directory(ENVTEST_VARIABLE)
    extra = _directory(EXTRA_VARIABLE)
    programs: dict[str, Path] = {}
    missing: list[str] = []
    for name in ENVTEST_PROGRAMS + EXTRA_PROGRAMS:
        primary = envtest if name in ENVTEST_PROGRAMS else extra
        found = _first_file([primary, extra, envtest, *fallbacks], (name,))
        if found is None:
            missing.append(name)
        else:
            programs[name] = found
    if missing:
        raise AssetsMissing(f"no {', '.join(missing)} for the control plane: {HOW_TO_INSTALL}")
    metacontroller_crds = _first_file([extra, *fallbacks], METACONTROLLER_CRDS)
    if lws_release == REFERENCE_LWS:
        lws_crd = _first_file([extra, *fallbacks], LWS_CRDS)
    else:
        name = f"leaderworkersets-crd-{lws_release}.yaml"
        lws_crd = _first_file([extra, *fallbacks], (name,))
        if lws_crd is None:
            source = RELEASE_CRD_SOURCE.format(release=lws_release, name=name)
            raise AssetsMissing(
                f"no LeaderWorkerSet CRD of {lws_release} in {EXTRA_VARIABLE}: {source}"
            )
    return Assets(
        etcd=programs["etcd"],
        kube_apiserver=programs["kube-apiserver"],
        kube_controller_manager=programs["kube-controller-manager"],
        metacontroller=programs["metacontroller"],
        metacontroller_crds=metacontroller_crds,
        lws_crd=lws_crd,
    )


def _directory(variable: str) -> Path | None:
    value = os.environ.get(variable)
    return Path(value) if value else None


def _first_file(directories: list[Path | None], names: tuple[str, ...]) -> Path | None:
    for directory in directories:
        if directory is None:
            continue
        for name in names:
            path = directory / name
            if path.is_file():
                return path
    return None
