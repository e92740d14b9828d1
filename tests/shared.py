"""Access to the team's shared reference data (`../shared`), which a checkout may not have.

Tests that compare against upstream's golden vectors or captured requests call these helpers; when
the directory is missing they skip with a reason instead of failing.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tempfile
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DIR = REPO_ROOT.parent / "shared"
GOLDEN_DIR = SHARED_DIR / "golden"
REFERENCE_DIR = SHARED_DIR / "reference"
TESTCLUSTER_DIR = SHARED_DIR / "testcluster"
TESTCLUSTER_ARCHIVE = TESTCLUSTER_DIR / "testcluster.tar.xz"
PROJECT_VERSION: str = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"][
    "version"
]
"""pyproject.toml's version: the package's, the server's, the kit's image tag (CHANGELOG.md)."""


def testcluster_dirs() -> list[Path]:
    """Where ../shared keeps the control plane's programs and CRDs, for
    `tools.sandbox.assets.find_assets` to look after the variables' directories: its archive
    unpacked (once per archive version, into a cache directory under the system's temporary
    directory), its Metacontroller CRDs, the reference LWS CRD and the LWS releases' CRDs. Empty
    without ../shared."""
    if not TESTCLUSTER_ARCHIVE.is_file():
        return []
    return [_unpacked_testcluster(), TESTCLUSTER_DIR, REFERENCE_DIR, REFERENCE_DIR / "lws-releases"]


def _unpacked_testcluster() -> Path:
    stat = TESTCLUSTER_ARCHIVE.stat()
    key = hashlib.sha256(f"{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:12]
    target = Path(tempfile.gettempdir()) / f"disaggregatedset-testcluster-{key}"
    if (target / "metacontroller").is_file():
        return target
    staging = Path(tempfile.mkdtemp(prefix="disaggregatedset-testcluster-"))
    try:
        subprocess.run(["tar", "-xJf", str(TESTCLUSTER_ARCHIVE), "-C", str(staging)], check=True)
        staging.rename(target)
    except OSError:
        # Another session unpacked it first.
        shutil.rmtree(staging, ignore_errors=True)
        if not (target / "metacontroller").is_file():
            raise
    return target


def shared_path(relative: str) -> Path:
    """Path of a file under ../shared, skipping the calling test when it is absent."""
    path = SHARED_DIR / relative
    if not path.exists():
        pytest.skip(f"../shared/{relative} is not available in this checkout")
    return path


def load_golden(name: str) -> Any:
    """Parsed JSON of ../shared/golden/<name> (skips when absent)."""
    return json.loads(shared_path(f"golden/{name}").read_text())


def load_golden_or_empty(name: str) -> list[Any]:
    """The vectors of ../shared/golden/<name>, or [] when it is absent (for counting; parametrise
    with `golden_params`, whose skip reason names the missing file)."""
    path = GOLDEN_DIR / name
    if not path.exists():
        return []
    data: list[Any] = json.loads(path.read_text())
    return data


def golden_params(name: str, ids: Callable[[int, Any], str]) -> list[Any]:
    """For parametrisation at collection time: one `pytest.param` per vector of
    ../shared/golden/<name>, named by `ids(index, vector)`; when the file is absent, a single
    parameter that skips and says which file is missing."""
    path = GOLDEN_DIR / name
    if not path.exists():
        return [_missing(f"golden/{name}")]
    vectors: list[Any] = json.loads(path.read_text())
    return [pytest.param(vector, id=ids(index, vector)) for index, vector in enumerate(vectors)]


def reference_params(pattern: str) -> list[Any]:
    """For parametrisation: the ../shared/reference files matching `pattern` (named by file
    name), or a single skipping parameter that says the reference data is missing."""
    paths = sorted(REFERENCE_DIR.glob(pattern))
    if not paths:
        return [_missing(f"reference/{pattern}")]
    return [pytest.param(path, id=path.name) for path in paths]


def by_name(_index: int, vector: Any) -> str:
    """Parameter ids for vectors that carry a "name"."""
    return str(vector["name"])


def _missing(relative: str) -> Any:
    reason = f"../shared/{relative} is not available in this checkout (upstream reference data)"
    return pytest.param(None, id="shared-missing", marks=pytest.mark.skip(reason=reason))


def names_over_budget(stored: Any) -> list[str]:
    """The `spec.roles[i].name` fields upstream's later name budget (lws PR #991, after the
    golden vectors' commit) refuses in a stored DisaggregatedSet, written here from the PR's
    rule and independently of the hooks: per role, len(<set>-<slice>-<8 hex>-<role>) +
    max(4, 1 + digits(replicas - 1) + 11) <= 63, replicas 0 or unset counting one digit and the
    slice digits being those of slices - 1."""
    spec = stored["spec"]
    slice_digits = len(str((spec.get("slices") or 1) - 1))
    fields = []
    for index, role in enumerate(spec["roles"]):
        replicas = role["spec"].get("replicas") or 1
        lws = len(stored["metadata"]["name"]) + 1 + slice_digits + 1 + 8 + 1 + len(role["name"])
        if lws + max(4, 1 + len(str(max(replicas - 1, 0))) + 11) > 63:
            fields.append(f"spec.roles[{index}].name")
    return fields


def lws_refused(stored: Any) -> list[str]:
    """The fields of a stored DisaggregatedSet whose roles' LWS LeaderWorkerSet's admission
    refuses whatever the set does (its webhook at 060ab4d, `generalValidate`), written here from
    that code and independently of the hooks, role by role: size below 1; a Static role's
    replicas times size past int32; a subGroupPolicy without subGroupSize, or one below 1, above
    size, dividing neither size nor size - 1, or (LeaderExcluded) not size - 1; the
    subgroup-exclusive-topology annotation without a subGroupPolicy."""
    fields = []
    for index, role in enumerate(stored["spec"]["roles"]):
        template = role["spec"]["leaderWorkerTemplate"]
        size = template.get("size", 1)
        path = f"spec.roles[{index}]"
        if size < 1:
            fields.append(f"{path}.spec.leaderWorkerTemplate.size")
        external = (role.get("scaling") or {}).get("mode") == "External"
        if not external and role["spec"].get("replicas", 1) * size > 2**31 - 1:
            fields.append(f"{path}.spec.replicas")
        policy = template.get("subGroupPolicy")
        if policy is not None:
            group = policy.get("subGroupSize", 0)
            excluded = policy.get("subGroupPolicyType") == "LeaderExcluded"
            if (
                group < 1
                or group > size
                or (size % group != 0 and (size - 1) % group != 0)
                or (excluded and (size - 1) % group != 0)
            ):
                fields.append(f"{path}.spec.leaderWorkerTemplate.subGroupPolicy.subGroupSize")
        annotations = (role.get("metadata") or {}).get("annotations") or {}
        if (
            policy is None
            and "leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology" in annotations
        ):
            fields.append(f"{path}.metadata.annotations")
    return fields
