"""The fake LWS controller's watch on the real API server, made to meet an expired
resourceVersion: it lists again and the sets it serves still become Available (issue 17, item 10).

`Watch.watch_next_from("1")` opens the next watch window at resourceVersion 1, which the API
server has long compacted away or never cached: it answers "too old resource version" (410, as an
ERROR event in the stream or as the answer), exactly what a watch meets after a long outage. The
recovery without a control plane (every kind of failure, one by one) is in `test_watch.py`.
"""

from __future__ import annotations

import pytest

from tests.cluster import sets
from tools.sandbox import kube
from tools.sandbox.controlplane import ControlPlane
from tools.sandbox.lws import FakeLwsController

pytestmark = pytest.mark.usefixtures("lws_controller")


def _expire(watch: kube.Watch) -> None:
    """Make `watch` meet an expired resourceVersion, and wait until it listed again."""
    lists = watch.counts().lists
    watch.watch_next_from("1")
    kube.wait_for(
        watch.counts,
        until=lambda counts: counts.lists > lists,
        show=lambda _: watch.summary(),
        timeout=sets.WAIT_SECONDS,
        message="the watch listing again after an expired resourceVersion",
    )


def test_an_expired_watch_lists_again_and_sets_still_become_available(
    control_plane: ControlPlane, lws_controller: FakeLwsController, namespace: str
) -> None:
    client = control_plane.client
    watch = lws_controller.watch
    _expire(watch)
    assert "410" in watch.summary() or "too old" in watch.summary(), watch.summary()

    sets.apply_set(control_plane, sets.small_set(namespace))
    old_revision = sets.wait_available(client, namespace, "llm")["status"]["revision"]

    # Again in the middle of a rollout: the new revision's LWS appear and scale while the watch
    # lists again, and every one of them must still be made ready.
    sets.apply_set(control_plane, sets.small_set(namespace, image=sets.IMAGE_V2))
    _expire(watch)
    kube.wait_for(
        lambda: sets.observe(client, namespace),
        until=lambda seen: (
            sets.is_available(seen["set"])
            and seen["set"]["status"]["revision"] != old_revision
            and len(seen["lws"]) == 2
        ),
        timeout=sets.WAIT_SECONDS,
        message="the rollout completed across the relist",
    )
    assert lws_controller.failures() == []
    assert lws_controller.ignored == []
