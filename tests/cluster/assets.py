"""Where the real control plane's programs and third-party CRDs come from.

The cluster suite runs etcd, kube-apiserver, kube-controller-manager and Metacontroller as local
processes. It finds them the way the ecosystem does:

- `KUBEBUILDER_ASSETS`: a directory holding `etcd` and `kube-apiserver` (controller-runtime's
  envtest convention; `setup-envtest use -p path` prints one);
- `DS_TESTCLUSTER_ASSETS`: a directory holding `metacontroller` and `kube-controller-manager`, and
  optionally the third-party CRDs (`metacontroller-crds-v1.yaml`, and the LeaderWorkerSet CRD as
  `leaderworkersets-crd.yaml` or LWS's release `manifests.yaml`).

Any program or CRD not found there is looked up in the team's `../shared` checkout, whose
`testcluster/testcluster.tar.xz` is unpacked once into a cache directory under the system's
temporary directory. What cannot be found is reported as a sentence that says what to install.

The LeaderWorkerSet CRD is that of a release (`LWS_RELEASES`): by default the one of upstream
commit 060ab4d, whose LWS schema the API embeds; `leaderworkersets-crd-v0.8.0.yaml` and
`leaderworkersets-crd-v0.7.0.yaml` (LWS's release CRDs) are found the same way, in
`DS_TESTCLUSTER_ASSETS` or `../shared/reference/lws-releases/` (conftest.py: `--lws-release`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tests.shared import REFERENCE_DIR, SHARED_DIR

ENVTEST_VARIABLE: Final = "KUBEBUILDER_ASSETS"
EXTRA_VARIABLE: Final = "DS_TESTCLUSTER_ASSETS"
ENVTEST_PROGRAMS: Final = ("etcd", "kube-apiserver")
EXTRA_PROGRAMS: Final = ("metacontroller", "kube-controller-manager")
METACONTROLLER_CRDS: Final = ("metacontroller-crds-v1.yaml",)
LWS_CRDS: Final = ("leaderworkersets-crd.yaml", "manifests.yaml")
REFERENCE_LWS: Final = "060ab4d"
LWS_RELEASES: Final = (REFERENCE_LWS, "v0.8.0", "v0.7.0")
"""The LeaderWorkerSet CRDs the suite runs against: upstream's commit, then the releases this
project serves (docs/operations.md, "What runs with what")."""

TESTCLUSTER_DIR: Final = SHARED_DIR / "testcluster"
TESTCLUSTER_ARCHIVE: Final = TESTCLUSTER_DIR / "testcluster.tar.xz"

# The Kubernetes minor version the suite runs (and the README claims): the cluster suite checks
# the API server's own version against it.
KUBERNETES_VERSION: Final = "1.36"

HOW_TO_INSTALL: Final = (
    f"set {ENVTEST_VARIABLE} to a directory with etcd and kube-apiserver (for example"
    f" `setup-envtest use -p path {KUBERNETES_VERSION}.x`) and "
    f"{EXTRA_VARIABLE} to a directory with metacontroller (v4.17.x), kube-controller-manager"
    f" ({KUBERNETES_VERSION}.x), metacontroller-crds-v1.yaml and the LeaderWorkerSet CRD"
    " (leaderworkersets-crd.yaml or LWS's release manifests.yaml); see the README's 'Run the"
    " cluster tests'"
)


def in_ci() -> bool:
    """Whether the tests run in CI (`CI=true`), where nothing they need may be missing."""
    return os.environ.get("CI", "").lower() in ("true", "1")


class AssetsMissing(Exception):
    """Some program or CRD of the control plane cannot be found."""


@dataclass(frozen=True, slots=True)
class Assets:
    """Paths of everything the control plane needs."""

    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    metacontroller: Path
    metacontroller_crds: Path
    lws_crd: Path
    lws_release: str = REFERENCE_LWS
    """Whose LeaderWorkerSet CRD `lws_crd` is (one of `LWS_RELEASES`)."""


def find_assets(lws_release: str = REFERENCE_LWS) -> Assets:
    """The control plane's programs and CRDs, with the LeaderWorkerSet CRD of `lws_release`;
    raises `AssetsMissing` with what to install."""
    envtest = _directory(ENVTEST_VARIABLE)
    extra = _directory(EXTRA_VARIABLE)
    shared_programs = _unpacked_testcluster() if TESTCLUSTER_ARCHIVE.is_file() else None
    programs: dict[str, Path] = {}
    missing: list[str] = []
    for name in ENVTEST_PROGRAMS + EXTRA_PROGRAMS:
        primary = envtest if name in ENVTEST_PROGRAMS else extra
        found = _first_file([primary, extra, envtest, shared_programs], (name,))
        if found is None:
            missing.append(name)
        else:
            programs[name] = found
    metacontroller_crds = _first_file([extra, TESTCLUSTER_DIR], METACONTROLLER_CRDS)
    if lws_release == REFERENCE_LWS:
        lws_crd = _first_file([extra, REFERENCE_DIR], LWS_CRDS)
    else:
        release_crd = (f"leaderworkersets-crd-{lws_release}.yaml",)
        lws_crd = _first_file([extra, REFERENCE_DIR / "lws-releases"], release_crd)
    if metacontroller_crds is None:
        missing.append(METACONTROLLER_CRDS[0])
    if lws_crd is None:
        missing.append(f"the LeaderWorkerSet CRD of {lws_release}")
    if missing or metacontroller_crds is None or lws_crd is None:
        raise AssetsMissing(f"no {', '.join(missing)} for the cluster tests: {HOW_TO_INSTALL}")
    return Assets(
        etcd=programs["etcd"],
        kube_apiserver=programs["kube-apiserver"],
        kube_controller_manager=programs["kube-controller-manager"],
        metacontroller=programs["metacontroller"],
        metacontroller_crds=metacontroller_crds,
        lws_crd=lws_crd,
        lws_release=lws_release,
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


def _unpacked_testcluster() -> Path:
    """The ../shared archive unpacked into a cache directory (once per archive version)."""
    stat = TESTCLUSTER_ARCHIVE.stat()
    key = hashlib.sha256(f"{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:12]
    target = Path(tempfile.gettempdir()) / f"disaggregatedset-testcluster-{key}"
    if (target / EXTRA_PROGRAMS[0]).is_file():
        return target
    staging = Path(tempfile.mkdtemp(prefix="disaggregatedset-testcluster-"))
    try:
        subprocess.run(["tar", "-xJf", str(TESTCLUSTER_ARCHIVE), "-C", str(staging)], check=True)
        staging.rename(target)
    except OSError:
        # Another session unpacked it first.
        shutil.rmtree(staging, ignore_errors=True)
        if not (target / EXTRA_PROGRAMS[0]).is_file():
            raise
    return target
