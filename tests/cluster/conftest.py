"""Fixtures of the cluster suite: one real control plane for the whole session, a namespace per
test.

Without the programs (see `tools.sandbox.assets`; ../shared's copy serves when there is one,
`tests.shared.testcluster_dirs`) the suite skips with a reason that says what to install; under
`CI=true` a missing program fails instead (`tests.programs`), so CI can never pass by
skipping.

LeaderWorkerSet releases: the control plane installs the LWS CRD of `--lws-release` (default:
upstream's commit 060ab4d). A test marked `lws_releases` runs once more against each other
release of `assets.LWS_RELEASES`, on a control plane of its own: those runs come last, grouped
by release, so the session starts at most one extra control plane per release, one at a time
(`python -m pytest` runs the whole suite against the default and a representative part against
v0.8.0 and v0.7.0; `python -m pytest tests/cluster --lws-release v0.8.0` all of it against one).
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from tests import programs, shared
from tools.sandbox import assets, kube, lws
from tools.sandbox.controlplane import ControlPlane
from tools.sandbox.lws import FakeLwsController


def _others(config: pytest.Config) -> list[str]:
    """The releases a test marked `lws_releases` also runs against, in order."""
    chosen = config.getoption("--lws-release")
    return [release for release in assets.LWS_RELEASES if release != chosen]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests marked `lws_releases` run against the chosen release (param None, the plane every
    other test shares) and against each other one."""
    if "lws_release" not in metafunc.fixturenames:
        return
    if metafunc.definition.get_closest_marker("lws_releases") is None:
        return
    chosen = metafunc.config.getoption("--lws-release")
    metafunc.parametrize(
        "lws_release",
        [None, *_others(metafunc.config)],
        indirect=True,
        scope="session",
        ids=lambda release: release or chosen,
    )


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The runs against other releases last, grouped by release (after pytest's own order)."""
    order = [None, *_others(config)]

    def release_of(item: pytest.Item) -> int:
        callspec = getattr(item, "callspec", None)
        return order.index(callspec.params.get("lws_release")) if callspec else 0

    items.sort(key=release_of)


@pytest.fixture(scope="session")
def lws_release(request: pytest.FixtureRequest) -> str:
    """The release whose LeaderWorkerSet CRD the test's control plane runs."""
    chosen: str = getattr(request, "param", None) or request.config.getoption("--lws-release")
    return chosen


@pytest.fixture(scope="session")
def control_plane_assets(lws_release: str) -> assets.Assets:
    """The programs and CRDs of a control plane: skips, or fails under CI=true, without them."""
    try:
        return assets.find_assets(fallbacks=shared.testcluster_dirs(), lws_release=lws_release)
    except assets.AssetsMissing as missing:
        programs.missing(str(missing))


@pytest.fixture(scope="session")
def control_plane(control_plane_assets: assets.Assets) -> Iterator[ControlPlane]:
    """etcd, kube-apiserver, the garbage collector, Metacontroller and the hook server."""
    workdir = Path(tempfile.mkdtemp(prefix="ds-controlplane-"))
    plane = ControlPlane.start(control_plane_assets, workdir, kit=shared.REPO_ROOT)
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def fake_lws_session(control_plane: ControlPlane) -> Iterator[FakeLwsController]:
    """The test's stand-in for the LeaderWorkerSet controller, one for the session."""
    controller = FakeLwsController(control_plane.client, delay=lws.READINESS_DELAY_SECONDS)
    controller.start()
    try:
        yield controller
    finally:
        controller.stop()
    assert controller.failures() == [], "the fake LWS controller failed"


@pytest.fixture
def lws_controller(fake_lws_session: FakeLwsController) -> Iterator[FakeLwsController]:
    """The fake LeaderWorkerSet controller (every LWS becomes ready); the test fails with any
    failed write or exception of its threads during the test."""
    controller = fake_lws_session
    errors, watch_failures = len(controller.errors), len(controller.watch.failures)
    yield controller
    new = controller.errors[errors:] + controller.watch.failures[watch_failures:]
    assert new == [], "the fake LWS controller failed:\n" + "\n".join(new)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A failed test that used the fake LWS controller shows the controller's state."""
    report: pytest.TestReport = yield
    controller = getattr(item, "funcargs", {}).get("lws_controller")
    if report.failed and isinstance(controller, FakeLwsController):
        report.sections.append(("fake LWS controller", controller.summary()))
    return report


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
