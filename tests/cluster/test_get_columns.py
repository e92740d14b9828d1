"""`kubectl get disaggregatedsets` tells the truth at a glance, on the real API server.

Every printer column is read from the table kube-apiserver builds (what `kubectl get` prints,
also under the short name `dset`), for a set that is steady, rolling, paused, stalled past its
progress deadline, Degraded, behind its generation (no sync runs) and unable to serve (a role at
0 beside a busy one); `-o wide` adds each role's ready and desired groups.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from hooks import api
from tests.cluster import sets
from tools.sandbox import kube
from tools.sandbox.controlplane import ControlPlane
from tools.sandbox.lws import FakeLwsController

JsonObject = dict[str, Any]
COLUMNS = [
    "NAME",
    "SLICES",
    "READY",
    "REVISION",
    "AVAILABLE",
    "ROLLOUT",
    "DEGRADED",
    "GENERATION",
    "OBSERVED",
    "AGE",
]
WIDE = [*COLUMNS, "ROLES"]


def table(plane: ControlPlane, namespace: str, *, wide: bool = False) -> dict[str, str]:
    """The set's row of `kubectl get dset`, by column header (cells cut at the headers)."""
    arguments = ["get", "dset", "-n", namespace] + (["-o", "wide"] if wide else [])
    header, row = plane.kubectl(*arguments).stdout.splitlines()
    names = WIDE if wide else COLUMNS
    starts = [header.index(name) for name in names]
    assert header.split() == " ".join(names).split(), header
    ends = [*starts[1:], None]
    return {
        name: row[start:end].strip() for name, start, end in zip(names, starts, ends, strict=True)
    }


def wait_row(
    plane: ControlPlane, namespace: str, expected: dict[str, str], *, wide: bool = False
) -> dict[str, str]:
    """Poll the table until the given cells read as expected; a timeout shows the last row."""
    return kube.wait_for(
        lambda: table(plane, namespace, wide=wide),
        until=lambda row: all(row[key] == value for key, value in expected.items()),
        show=str,
        timeout=sets.WAIT_SECONDS,
        message=f"kubectl get dset: {expected}",
    )


def _edit(plane: ControlPlane, namespace: str, change: dict[str, Any]) -> None:
    plane.kubectl("patch", "dset", "llm", "-n", namespace, "--type=merge", "-p", json.dumps(change))


def _annotate(plane: ControlPlane, namespace: str, key: str, value: str | None) -> None:
    _edit(plane, namespace, {"metadata": {"annotations": {key: value}}})


def _new_image(plane: ControlPlane, namespace: str, image: str) -> None:
    ds = plane.client.get(kube.DISAGGREGATED_SETS, "llm", namespace=namespace)
    for role in ds["spec"]["roles"]:
        worker = role["spec"]["leaderWorkerTemplate"]["workerTemplate"]
        worker["spec"]["containers"][0]["image"] = image
    _edit(plane, namespace, {"spec": {"roles": ds["spec"]["roles"]}})


def test_every_column_for_a_steady_rolling_paused_stalled_and_degraded_set(
    control_plane: ControlPlane, namespace: str, lws_controller: FakeLwsController
) -> None:
    sets.apply_set(control_plane, sets.small_set(namespace, prefill=2, decode=1))
    ready = sets.wait_available(control_plane.client, namespace, "llm")
    steady = wait_row(control_plane, namespace, {"AVAILABLE": "True"})
    assert steady == {
        **steady,
        "NAME": "llm",
        "SLICES": "1",
        "READY": "3/3",
        "REVISION": ready["status"]["revision"],
        "ROLLOUT": "AllRolesReady",
        "DEGRADED": "",
        "GENERATION": "1",
        "OBSERVED": "1",
    }
    wide = table(control_plane, namespace, wide=True)
    assert wide["ROLES"] == "prefill 2/2, decode 1/1"

    with lws_controller.held(namespace):  # the new revision's groups never become ready
        _annotate(control_plane, namespace, api.ANNOTATION_PROGRESS_DEADLINE, "2")
        _new_image(control_plane, namespace, sets.IMAGE_V2)
        rolling = wait_row(control_plane, namespace, {"AVAILABLE": "False"})
        assert rolling["REVISION"] != steady["REVISION"]
        assert rolling["ROLLOUT"] in ("RolloutInProgress", "ProgressDeadlineExceeded")
        stalled = wait_row(control_plane, namespace, {"ROLLOUT": "ProgressDeadlineExceeded"})
        assert stalled["READY"] == "3/3"  # the old revision still serves every group
        _edit(
            control_plane, namespace, {"metadata": {"annotations": {api.ANNOTATION_PAUSED: "true"}}}
        )
        wait_row(control_plane, namespace, {"ROLLOUT": "RolloutPaused", "AVAILABLE": "False"})
        _edit(
            control_plane,
            namespace,
            {"metadata": {"annotations": {api.ANNOTATION_PAUSED: "maybe"}}},
        )
        degraded = wait_row(control_plane, namespace, {"DEGRADED": "InvalidAnnotation"})
        assert degraded["ROLLOUT"] == "RolloutPaused"  # a malformed paused pauses

    _annotate(control_plane, namespace, api.ANNOTATION_PAUSED, None)
    done = wait_row(control_plane, namespace, {"AVAILABLE": "True", "DEGRADED": ""})
    assert (done["READY"], done["ROLLOUT"]) == ("3/3", "AllRolesReady")


def test_a_set_whose_controller_has_not_seen_its_generation_reads_as_behind(
    control_plane: ControlPlane, namespace: str, lws_controller: FakeLwsController
) -> None:
    """Regression (issue 35 item 2): with every sync failing (the hook server unreachable, as
    after the sandbox took the kit's in-cluster hook URLs), an edited set still read `True
    AllRolesReady` of the old revision, and nothing said that this was an older generation."""
    sets.apply_set(control_plane, sets.small_set(namespace))
    sets.wait_available(control_plane.client, namespace, "llm")
    control_plane.kill_hooks()
    try:
        _new_image(control_plane, namespace, sets.IMAGE_V2)
        behind = wait_row(control_plane, namespace, {"GENERATION": "2"})
        assert (behind["OBSERVED"], behind["AVAILABLE"]) == ("1", "True")  # the old spec's
    finally:
        control_plane.start_hooks()
    caught_up = wait_row(control_plane, namespace, {"OBSERVED": "2", "AVAILABLE": "True"})
    assert caught_up["REVISION"] != behind["REVISION"]


def test_an_external_role_at_zero_beside_a_busy_role_is_not_available(
    control_plane: ControlPlane, namespace: str, lws_controller: FakeLwsController
) -> None:
    """Regression (issue 35 item 7): prefill 2 beside decode scaled to 0 read True AllRolesReady."""
    sets.apply_set(control_plane, sets.small_set(namespace, prefill=2, external="decode"))
    sets.wait_available(control_plane.client, namespace, "llm")
    control_plane.kubectl("scale", "-n", namespace, "dsrs/llm-decode", "--replicas=0")
    idle = wait_row(control_plane, namespace, {"ROLLOUT": "RoleScaledToZero"})
    assert (idle["AVAILABLE"], idle["READY"], idle["DEGRADED"]) == ("False", "2/2", "")
    ds = control_plane.client.get(kube.DISAGGREGATED_SETS, "llm", namespace=namespace)
    available = sets.condition(ds, "Available")
    assert available is not None and available["message"].startswith(
        "decode is at 0 groups while prefill 2 run:"
    )
    control_plane.kubectl("scale", "-n", namespace, "dsrs/llm-decode", "--replicas=1")
    wait_row(control_plane, namespace, {"AVAILABLE": "True", "ROLLOUT": "AllRolesReady"})


@pytest.mark.usefixtures("lws_controller")
def test_the_short_name_is_not_daemonsets(control_plane: ControlPlane) -> None:
    resources = control_plane.kubectl("api-resources", "--api-group", api.GROUP).stdout
    (line,) = [row for row in resources.splitlines() if row.startswith(api.DS_PLURAL)]
    assert line.split()[1] == api.DS_SHORT_NAME
    daemonsets = control_plane.kubectl("api-resources", "--api-group", "apps").stdout
    assert any(row.split()[:2] == ["daemonsets", "ds"] for row in daemonsets.splitlines())
