"""Fixtures of the cluster suite: one real control plane for the whole session, a namespace per
test.

Without the programs (see `tests.cluster.assets`) the suite skips with a reason that says what to
install; under `CI=true` a missing program fails instead, so CI can never pass by skipping.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster import assets, kube
from tests.cluster.controlplane import ControlPlane
from tests.cluster.lws import FakeLwsController


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1")


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    """etcd, kube-apiserver, the garbage collector, Metacontroller and the hook server."""
    try:
        found = assets.find_assets()
    except assets.AssetsMissing as missing:
        if _in_ci():
            pytest.fail(f"CI=true and {missing}")
        pytest.skip(str(missing))
    plane = ControlPlane.start(found, Path(tempfile.mkdtemp(prefix="ds-controlplane-")))
    try:
        yield plane
    finally:
        plane.stop()


# How long an LWS takes to become ready after a change. Real groups take seconds to minutes;
# with instant readiness a sync can start before Metacontroller's informer cache holds the last
# write of the previous pass, and the hook then plans from a mix of two passes.
READINESS_DELAY_SECONDS = 0.25


@pytest.fixture(scope="session")
def lws_controller(control_plane: ControlPlane) -> Iterator[FakeLwsController]:
    """The test's stand-in for the LeaderWorkerSet controller (every LWS becomes ready)."""
    controller = FakeLwsController(control_plane.client, delay=READINESS_DELAY_SECONDS)
    controller.start()
    try:
        yield controller
    finally:
        controller.stop()
    assert controller.errors == [], "status writes failed"


@pytest.fixture
def client(control_plane: ControlPlane) -> kube.Client:
    return control_plane.client


@pytest.fixture
def namespace(control_plane: ControlPlane) -> Iterator[str]:
    """A fresh namespace for one test, deleted afterwards (the namespace controller empties it)."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    control_plane.client.create(
        kube.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    yield name
    control_plane.client.delete(kube.NAMESPACES, name)
