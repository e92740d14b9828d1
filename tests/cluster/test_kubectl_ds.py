"""`kubectl ds` on the real control plane, run as users run it: `kubectl ds ...` through the real
kubectl, which finds the installed `kubectl-ds` console script on PATH.

What only a cluster decides: the history the hooks record is the one the plugin lists and
restores, an undo's replica trajectory is the planner's, an undo mid-rollout reverts to the LWS
that still run, an undo of a set larger than a command-line argument goes through the real
kubectl, the undo's patch stands after a status write and is refused after a spec change,
`rollout status` reads the conditions the hooks write (done, the progress deadline, a
hold, a partition) the way it says it does, and `adopt --orphans` refuses an LWS planted at a
name the set wants but takes back what a set deleted with `--cascade=orphan` left.
"""

from __future__ import annotations

import json
import os
import subprocess
import sysconfig
from pathlib import Path
from typing import Any

import pytest
import yaml

from hooks import api
from hooks.core import children
from hooks.kubectl import rollout, writes
from tests import builders
from tests.cluster import sets
from tests.cluster.test_lifecycle import ReplicaHistory, _plan_columns
from tools.sandbox import kube
from tools.sandbox.controlplane import ControlPlane
from tools.sandbox.lws import FakeLwsController

JsonObject = dict[str, Any]

pytestmark = pytest.mark.usefixtures("lws_controller")

IMAGE_V3 = "vllm/vllm-openai:v0.12.0"
EVIL = "evil/miner:latest"
MAX_ARG_STRLEN = 32 * 4096  # Linux's limit on one argument of a command, its NUL included
# `rollout status` ends on its own in each test; the timeout only bounds a broken one.
STATUS_TIMEOUT = f"{sets.WAIT_SECONDS}s"


def kubectl_ds(
    plane: ControlPlane, namespace: str, *arguments: str, kubeconfig: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`kubectl ds ARGUMENTS --kubeconfig ... -n NAMESPACE`, the plugin found on PATH; as the
    administrator, or as whoever `kubeconfig` names."""
    scripts = Path(sysconfig.get_path("scripts"))
    if not (scripts / "kubectl-ds").exists():
        pytest.fail(f"no kubectl-ds in {scripts}: install the package (pip install -e .)")
    config = plane.kubeconfig if kubeconfig is None else kubeconfig
    return subprocess.run(
        ["kubectl", "ds", *arguments, f"--kubeconfig={config}", "-n", namespace],
        env={**os.environ, "PATH": f"{scripts}{os.pathsep}{os.environ.get('PATH', '')}"},
        capture_output=True,
        text=True,
        timeout=2 * sets.WAIT_SECONDS + 60,
        check=False,
    )


def succeeds(plane: ControlPlane, namespace: str, *arguments: str) -> str:
    """`kubectl ds ARGUMENTS`, which must exit 0; its standard output."""
    done = kubectl_ds(plane, namespace, *arguments)
    assert done.returncode == 0, (arguments, done.returncode, done.stdout, done.stderr)
    return done.stdout


def annotated(manifest: JsonObject, cause: str) -> JsonObject:
    manifest["metadata"]["annotations"] = {api.CHANGE_CAUSE_ANNOTATION: cause}
    return manifest


def get_set(client: kube.Client, namespace: str) -> JsonObject:
    return client.get(kube.DISAGGREGATED_SETS, "llm", namespace=namespace)


def spec_revision(client: kube.Client, namespace: str) -> str:
    """The revision the stored set's spec hashes to."""
    return rollout.spec_revision(rollout.read_set(get_set(client, namespace)))


def annotations(client: kube.Client, namespace: str) -> dict[str, str]:
    found: dict[str, str] = get_set(client, namespace)["metadata"].get("annotations", {})
    return found


def wait_rolled_out(client: kube.Client, namespace: str, *, revision: str, lws: int) -> None:
    """The set Available at `revision`, with only `lws` LWS left (old revisions deleted)."""
    kube.wait_for(
        lambda: sets.observe(client, namespace),
        until=lambda seen: (
            sets.is_available(seen["set"])
            and seen["set"]["status"]["revision"] == revision
            and len(seen["lws"]) == lws
            and all(revision in name for name in seen["lws"])
        ),
        timeout=sets.WAIT_SECONDS,
        message=f"revision {revision} rolled out, {lws} LWS left",
    )


def test_history_lists_each_revision_and_pause_keeps_status_waiting_until_resume(
    control_plane: ControlPlane, namespace: str
) -> None:
    client = control_plane.client
    revisions = []
    for image, cause in ((sets.IMAGE_V1, "v1"), (sets.IMAGE_V2, "v2"), (IMAGE_V3, "v3")):
        sets.apply_set(control_plane, annotated(sets.small_set(namespace, image=image), cause))
        out = succeeds(
            control_plane, namespace, "rollout", "status", "llm", "--timeout", STATUS_TIMEOUT
        )
        revisions.append(get_set(client, namespace)["status"]["revision"])
        assert out.splitlines()[-1] == f"llm successfully rolled out to revision {revisions[-1]}"
        assert sets.is_available(get_set(client, namespace))
    table = succeeds(control_plane, namespace, "rollout", "history", "llm").splitlines()
    assert [line.split()[:3] for line in table] == [
        ["REVISION", "HASH", "CHANGE-CAUSE"],
        ["1", revisions[0], "v1"],
        ["2", revisions[1], "v2"],
        ["3", revisions[2], "v3"],
    ]
    assert table[-1].endswith("(current)") and "(current)" not in "".join(table[:-1])
    detail = yaml.safe_load(
        succeeds(control_plane, namespace, "rollout", "history", "llm", "--revision", "1")
    )
    assert detail["hash"] == revisions[0]
    assert {
        role["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"]
        for role in detail["roles"]
    } == {sets.IMAGE_V1}

    assert succeeds(control_plane, namespace, "rollout", "pause", "llm").startswith("llm paused")
    assert annotations(client, namespace)[api.ANNOTATION_PAUSED] == "true"
    sets.apply_set(control_plane, sets.small_set(namespace, image=sets.IMAGE_V1))
    kube.wait_for(
        lambda: get_set(client, namespace),
        until=lambda ds: (
            ds["status"].get("observedGeneration") == ds["metadata"]["generation"]
            and (sets.condition(ds, "Progressing") or {}).get("reason") == "RolloutPaused"
        ),
        timeout=sets.WAIT_SECONDS,
        message="the new generation seen, paused",
    )
    waiting = kubectl_ds(control_plane, namespace, "rollout", "status", "llm", "--timeout", "3s")
    assert waiting.returncode == 3, (waiting.stdout, waiting.stderr)
    assert "llm rollout is paused" in waiting.stdout
    assert waiting.stderr.startswith("kubectl ds rollout status: error: timed out after 3s: ")
    assert succeeds(control_plane, namespace, "rollout", "resume", "llm").startswith("llm resumed")
    assert api.ANNOTATION_PAUSED not in annotations(client, namespace)
    out = succeeds(
        control_plane, namespace, "rollout", "status", "llm", "--timeout", STATUS_TIMEOUT
    )
    assert out.splitlines()[-1] == f"llm successfully rolled out to revision {revisions[0]}"


def test_undo_after_a_rollout_goes_back_along_the_planners_trajectory(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """prefill 5, decode 2, maxSurge 2, maxUnavailable 1: the trajectory of docs/rollout.md."""
    client = control_plane.client
    old, new = (
        sets.small_set(namespace, image=image, prefill=5, decode=2, max_surge=2, max_unavailable=1)
        for image in (sets.IMAGE_V1, sets.IMAGE_V2)
    )
    sets.apply_set(control_plane, old)
    old_revision = sets.wait_available(client, namespace, "llm")["status"]["revision"]
    sets.apply_set(control_plane, new)
    new_revision = spec_revision(client, namespace)
    wait_rolled_out(client, namespace, revision=new_revision, lws=2)
    history = ReplicaHistory(client, namespace)
    try:
        out = succeeds(control_plane, namespace, "rollout", "undo", "llm")
        wait_rolled_out(client, namespace, revision=old_revision, lws=2)
    finally:
        history.stop()
    assert (
        out.splitlines()[0] == f"llm rolled back to revision 1 ({old_revision}) from {new_revision}"
    )
    restored = get_set(client, namespace)
    assert rollout.spec_revision(rollout.read_set(restored)) == old_revision
    assert [role["spec"] for role in restored["spec"]["roles"]] == [
        role["spec"] for role in old["spec"]["roles"]
    ]
    plan = _plan_columns(new, old, tmp_path)  # plan --from NEW --to OLD
    for role in ("prefill", "decode"):
        from_name, to_name = f"llm-0-{new_revision}-{role}", f"llm-0-{old_revision}-{role}"
        history.assert_took(from_name, plan[f"old {role}"])
        history.assert_took(to_name, plan[f"new {role}"])
        assert from_name in history.deleted
    table = succeeds(control_plane, namespace, "rollout", "history", "llm").splitlines()
    assert [line.split()[:2] for line in table[1:]] == [["2", new_revision], ["3", old_revision]]


@pytest.mark.parametrize("side", ["client", "server"])
def test_kubectl_apply_works_after_an_undo_client_and_server_side(
    control_plane: ControlPlane, namespace: str, side: str
) -> None:
    """Regression: an undo wrote the whole set back with `kubectl replace`, so every later
    client-side apply failed (`metadata.resourceVersion: Invalid value: 0`) and every
    server-side apply conflicted with `kubectl-replace`. Apply v1, apply v2, undo, apply v2
    again: each apply works and the set rolls each time; a server-side applier still owns
    exactly the fields it applied."""
    client = control_plane.client
    server_side = ["--server-side"] if side == "server" else []

    def apply(image: str, cause: str) -> str:
        manifest = annotated(sets.small_set(namespace, image=image), cause)
        control_plane.kubectl("apply", *server_side, "-f", "-", stdin=json.dumps(manifest))
        revision = spec_revision(client, namespace)
        wait_rolled_out(client, namespace, revision=revision, lws=2)
        return revision

    first = apply(sets.IMAGE_V1, "v1")
    second = apply(sets.IMAGE_V2, "v2")
    applied_fields = _fields_of(get_set(client, namespace), "kubectl")
    out = succeeds(control_plane, namespace, "rollout", "undo", "llm")
    assert out.splitlines()[0] == f"llm rolled back to revision 1 ({first}) from {second}"
    wait_rolled_out(client, namespace, revision=first, lws=2)
    assert annotations(client, namespace)[api.CHANGE_CAUSE_ANNOTATION] == "v1"
    if side == "server":
        assert _fields_of(get_set(client, namespace), "kubectl") == applied_fields
    assert apply(sets.IMAGE_V2, "v2") == second
    assert annotations(client, namespace)[api.CHANGE_CAUSE_ANNOTATION] == "v2"


def _fields_of(obj: JsonObject, manager: str) -> JsonObject | None:
    """The fields Apply manager `manager` owns in `obj`."""
    entries = [
        entry["fieldsV1"]
        for entry in obj["metadata"].get("managedFields", [])
        if entry["manager"] == manager and entry["operation"] == "Apply"
    ]
    return entries[0] if entries else None


def test_undo_mid_rollout_reverts_to_the_lws_that_still_run(
    control_plane: ControlPlane, lws_controller: FakeLwsController, namespace: str
) -> None:
    client = control_plane.client
    sets.apply_set(control_plane, sets.small_set(namespace))
    old_revision = sets.wait_available(client, namespace, "llm")["status"]["revision"]
    old_names = set(sets.lws_by_name(client, namespace))
    with lws_controller.held(namespace):  # the new revision's groups never become ready
        sets.apply_set(control_plane, sets.small_set(namespace, image=sets.IMAGE_V2))
        new_revision = spec_revision(client, namespace)
        new_prefill = f"llm-0-{new_revision}-prefill"
        kube.wait_for(
            lambda: sets.replicas_by_name(client, namespace),
            until=lambda replicas: replicas.get(new_prefill, 0) >= 1,
            timeout=sets.WAIT_SECONDS,
            message=f"the first scale-up of the new revision ({new_prefill})",
        )
        history = ReplicaHistory(client, namespace)
        try:
            out = succeeds(control_plane, namespace, "rollout", "undo", "llm")
            assert out.splitlines()[0] == (
                f"llm rolled back to revision 1 ({old_revision}) from {new_revision}"
            )
            assert f"revision {old_revision}'s LWS still run" in out
            wait_rolled_out(client, namespace, revision=old_revision, lws=2)
        finally:
            history.stop()
    assert set(sets.lws_by_name(client, namespace)) == old_names
    new_names = {f"llm-0-{new_revision}-{role}" for role in ("prefill", "decode")}
    assert set(history.values) == old_names | new_names  # no LWS created by the revert
    assert new_names <= history.deleted  # the new revision drained and went
    # The old revision never moved: the new one had not been ready, so nothing was drained.
    assert {name: history.values[name] for name in old_names} == {
        f"llm-0-{old_revision}-prefill": [2],
        f"llm-0-{old_revision}-decode": [1],
    }


def test_status_fails_with_the_deadlines_message_on_a_stalled_rollout(
    control_plane: ControlPlane, lws_controller: FakeLwsController, namespace: str
) -> None:
    client = control_plane.client
    manifest = sets.small_set(namespace)
    manifest["metadata"]["annotations"] = {api.ANNOTATION_PROGRESS_DEADLINE: "3"}
    sets.apply_set(control_plane, manifest)
    out = succeeds(
        control_plane, namespace, "rollout", "status", "llm", "--timeout", STATUS_TIMEOUT
    )
    assert "successfully rolled out" in out
    with lws_controller.held(namespace):
        manifest = sets.small_set(namespace, image=sets.IMAGE_V2)
        manifest["metadata"]["annotations"] = {api.ANNOTATION_PROGRESS_DEADLINE: "3"}
        sets.apply_set(control_plane, manifest)
        stalled = kubectl_ds(
            control_plane, namespace, "rollout", "status", "llm", "--timeout", STATUS_TIMEOUT
        )
        ds = get_set(client, namespace)
    assert stalled.returncode == 1, (stalled.stdout, stalled.stderr)
    progressing = sets.condition(ds, "Progressing")
    assert progressing is not None and progressing["reason"] == "ProgressDeadlineExceeded"
    assert stalled.stderr == (
        "kubectl ds rollout status: error: llm exceeded its progress deadline: "
        f"{progressing['message']}\n"
    )
    assert f"llm-0-{ds['status']['revision']}-prefill" in stalled.stderr


def test_status_fails_on_a_new_set_that_never_becomes_ready(
    control_plane: ControlPlane, lws_controller: FakeLwsController, namespace: str
) -> None:
    """Regression (issue 35 item 5): a new set whose groups never became ready read
    Progressing=True for ever, and `rollout status` (no --timeout) waited for ever."""
    manifest = sets.small_set(namespace)
    manifest["metadata"]["annotations"] = {api.ANNOTATION_PROGRESS_DEADLINE: "3"}
    with lws_controller.held(namespace):  # no LWS of the set ever reports a ready group
        sets.apply_set(control_plane, manifest)
        # The default --timeout 0 waits for ever: the deadline ends the wait.
        stalled = kubectl_ds(control_plane, namespace, "rollout", "status", "llm")
        ds = get_set(control_plane.client, namespace)
    assert stalled.returncode == 1, (stalled.stdout, stalled.stderr)
    progressing = sets.condition(ds, "Progressing")
    assert progressing is not None and progressing["reason"] == "ProgressDeadlineExceeded"
    assert progressing["observedGeneration"] == ds["metadata"]["generation"]
    assert stalled.stderr == (
        "kubectl ds rollout status: error: llm exceeded its progress deadline: "
        f"{progressing['message']}\n"
    )
    assert f"llm-0-{ds['status']['revision']}-prefill (0/2 ready)" in stalled.stderr


def test_a_hold_at_half_is_reported_as_held_and_release_completes(
    control_plane: ControlPlane, namespace: str
) -> None:
    client = control_plane.client
    sets.apply_set(control_plane, sets.small_set(namespace, prefill=4, decode=2))
    old_revision = sets.wait_available(client, namespace, "llm")["status"]["revision"]
    assert succeeds(control_plane, namespace, "rollout", "hold", "llm", "--at", "50%").startswith(
        "llm holds at 50%"
    )
    assert annotations(client, namespace)[api.ANNOTATION_ROLLOUT_HOLD_AT] == "50%"
    sets.apply_set(
        control_plane, sets.small_set(namespace, prefill=4, decode=2, image=sets.IMAGE_V2)
    )
    new_revision = spec_revision(client, namespace)
    out = succeeds(
        control_plane, namespace, "rollout", "status", "llm", "--timeout", STATUS_TIMEOUT
    )
    assert f"llm rollout to revision {new_revision} is held: " in out
    assert out.splitlines()[-1].startswith("not a failure: the rollout stands on purpose")
    ds = get_set(client, namespace)
    progressing = sets.condition(ds, "Progressing")
    assert progressing is not None
    assert (progressing["status"], progressing["reason"]) == ("Unknown", "RolloutHeld")
    # `plan --old prefill=4,decode=2 --target prefill=4,decode=2`: pass 3 reaches half.
    replicas = sets.replicas_by_name(client, namespace)
    assert {name.split("-", 2)[2]: count for name, count in replicas.items()} == {
        f"{old_revision}-prefill": 3,
        f"{old_revision}-decode": 2,
        f"{new_revision}-prefill": 2,
        f"{new_revision}-decode": 1,
    }

    assert succeeds(control_plane, namespace, "rollout", "release", "llm").startswith(
        "llm released"
    )
    assert api.ANNOTATION_ROLLOUT_HOLD_AT not in annotations(client, namespace)
    out = succeeds(
        control_plane, namespace, "rollout", "status", "llm", "--timeout", STATUS_TIMEOUT
    )
    assert out.splitlines()[-1] == f"llm successfully rolled out to revision {new_revision}"


def test_a_partition_is_reported_as_partitioned_and_clearing_it_completes(
    control_plane: ControlPlane, namespace: str
) -> None:
    client = control_plane.client
    sets.apply_set(control_plane, sets.small_set(namespace, slices=2))
    old_revision = sets.wait_available(client, namespace, "llm")["status"]["revision"]
    assert succeeds(control_plane, namespace, "rollout", "partition", "llm", "1").startswith(
        "llm partitioned at 1"
    )
    assert annotations(client, namespace)[api.ANNOTATION_ROLLOUT_PARTITION] == "1"
    sets.apply_set(control_plane, sets.small_set(namespace, slices=2, image=sets.IMAGE_V2))
    new_revision = spec_revision(client, namespace)
    out = succeeds(
        control_plane, namespace, "rollout", "status", "llm", "--timeout", STATUS_TIMEOUT
    )
    assert f"llm rollout to revision {new_revision} is partitioned: " in out
    assert "slice 1 Partitioned: prefill old 2/2 new 0/0, decode old 1/1 new 0/0" in out
    names = set(sets.lws_by_name(client, namespace))
    assert names == {
        f"llm-{index}-{revision}-{role}"
        for index, revision in ((0, new_revision), (1, old_revision))
        for role in ("prefill", "decode")
    }
    cleared = succeeds(control_plane, namespace, "rollout", "partition", "llm", "--clear")
    assert cleared.startswith("llm partition cleared")
    assert api.ANNOTATION_ROLLOUT_PARTITION not in annotations(client, namespace)
    out = succeeds(
        control_plane, namespace, "rollout", "status", "llm", "--timeout", STATUS_TIMEOUT
    )
    assert out.splitlines()[-1] == f"llm successfully rolled out to revision {new_revision}"
    wait_rolled_out(client, namespace, revision=new_revision, lws=4)


# --- adopt: a planted LWS refused, a lost one taken back (issue 33 item 1) ---------------------


def stored_revision(client: kube.Client, manifest: JsonObject) -> tuple[str, JsonObject]:
    """The revision the API server's copy of `manifest` hashes to, and that copy (a dry run)."""
    stored = client.create(kube.DISAGGREGATED_SETS, manifest, dry_run=True)
    return rollout.spec_revision(rollout.read_set(stored)), stored


def test_issue33_item1_adopt_refuses_an_lws_planted_where_the_set_will_ask_and_leaves_it(
    control_plane: ControlPlane, namespace: str
) -> None:
    """Someone who can create LWS creates one at the name the set will ask for, with the set's
    labels and another image. The set cannot create its own (ChildNotCreated, which says what
    adopt checks); `kubectl ds adopt --orphans` refuses it on one line and writes nothing."""
    client = control_plane.client
    manifest = sets.small_set(namespace)
    revision, stored = stored_revision(client, manifest)
    spec = rollout.read_set(stored).spec
    assert spec is not None
    planted = children.render_lws(
        set_name="llm", role=spec.roles[0], slice_index=0, revision=revision, replicas=2,
        policy=None,
    )  # fmt: skip
    planted = json.loads(json.dumps(planted))
    planted["metadata"]["namespace"] = namespace
    worker = planted["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    worker["spec"]["containers"][0]["image"] = EVIL
    name = planted["metadata"]["name"]
    before = client.create(kube.LWS, planted)
    sets.apply_set(control_plane, manifest)
    refused = kubectl_ds(control_plane, namespace, "adopt", "llm", "--orphans")
    assert refused.returncode == 1, (refused.stdout, refused.stderr)
    (line,) = refused.stderr.splitlines()
    assert line.startswith(
        f"kubectl ds adopt: error: LeaderWorkerSet {namespace}/{name}: not what llm would have"
        " made at its name: spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].image"
        f' is "{EVIL}", not "{sets.IMAGE_V1}"'
    ), line
    assert refused.stdout.splitlines()[-1].endswith(" 1 left alone")
    ds = kube.wait_for(
        lambda: get_set(client, namespace),
        until=lambda ds: (sets.condition(ds, "Degraded") or {}).get("reason") == "ChildNotCreated",
        timeout=sets.WAIT_SECONDS,
        message="Degraded=ChildNotCreated for the planted name",
    )
    message = sets.condition(ds, "Degraded")["message"]  # type: ignore[index]
    assert f"{api.LWS_KIND} '{name}' has not appeared" in message
    assert "only when it has no owner and is exactly what the set would create there" in message
    after = client.get(kube.LWS, name, namespace=namespace)
    # Left alone: the same object, never written but for the status its LWS controller keeps.
    kept = ("uid", "generation", "labels")
    assert [after["metadata"].get(key) for key in kept] == [
        before["metadata"].get(key) for key in kept
    ]
    assert after["spec"] == before["spec"]
    assert "ownerReferences" not in after["metadata"]
    assert api.CONTROLLER_UID_LABEL not in after["metadata"]["labels"]
    assert not sets.is_available(ds)


def owned_children(client: kube.Client, namespace: str) -> dict[tuple[str, str], JsonObject]:
    """Every LWS, Service and history record of the namespace, by (resource, name)."""
    return {
        (resource.plural, obj["metadata"]["name"]): obj
        for resource in (kube.LWS, kube.SERVICES, kube.REVISIONS)
        for obj in client.list(resource, namespace=namespace)
        if api.LABEL_NAME in obj["metadata"].get("labels", {})
    }


def test_issue33_item1_adopt_takes_back_the_children_of_a_set_deleted_with_cascade_orphan(
    control_plane: ControlPlane, namespace: str
) -> None:
    """`kubectl delete --cascade=orphan` and the same manifest again: a new set, whose children
    are orphans that carry the old set's controller-uid. Every one is what the new set would
    make (two slices, placement terms), so `adopt --orphans` hands them all over, nothing is
    recreated, and the set is Available on them."""
    client = control_plane.client
    manifest = sets.small_set(namespace, slices=2)
    manifest["spec"]["placementPolicy"] = {
        "type": "ExclusiveSlice",
        "topology": "kubernetes.io/hostname",
    }
    sets.apply_set(control_plane, manifest)
    old_uid = sets.wait_available(client, namespace, "llm")["metadata"]["uid"]
    kube.wait_for(
        lambda: owned_children(client, namespace),
        until=lambda found: len(found) == 9,  # 4 LWS, 4 Services, 1 record
        timeout=sets.WAIT_SECONDS,
        message="4 LWS, 4 Services and a record",
    )
    control_plane.kubectl(
        "delete", "disaggregatedset", "llm", "-n", namespace, "--cascade=orphan", "--wait=true"
    )
    before = kube.wait_for(
        lambda: owned_children(client, namespace),
        until=lambda found: all("ownerReferences" not in o["metadata"] for o in found.values()),
        timeout=sets.WAIT_SECONDS,
        message="the children orphaned",
    )
    sets.apply_set(control_plane, manifest)
    uid = get_set(client, namespace)["metadata"]["uid"]
    assert uid != old_uid
    out = succeeds(control_plane, namespace, "adopt", "llm", "--orphans")
    assert out.splitlines()[-1] == f"{namespace}/llm: 9 adopted, 0 already adopted, 0 left alone"
    sets.wait_available(client, namespace, "llm")
    after = kube.wait_for(
        lambda: owned_children(client, namespace),
        until=lambda found: all(
            [ref["uid"] for ref in o["metadata"].get("ownerReferences", [])] == [uid]
            for o in found.values()
        ),
        timeout=sets.WAIT_SECONDS,
        message="every child owned by the new set",
    )
    assert {key: o["metadata"]["uid"] for key, o in after.items()} == {
        key: o["metadata"]["uid"] for key, o in before.items()
    }


# --- undo of a set larger than one command-line argument (issue 33 item 4) ---------------------


def large_set(namespace: str, image: str) -> JsonObject:
    """10 roles of about 15 KiB each (an env value), as `kubectl apply` sends it."""
    manifest = sets.manifest(
        namespace,
        roles=[builders.make_role(f"role{index}", image=image) for index in range(10)],
    )
    for role in manifest["spec"]["roles"]:
        container = role["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
        container["env"] = [{"name": "PAD", "value": "p" * 15_000}]
    return manifest


def test_issue33_item4_undo_of_a_large_client_side_applied_set_through_the_real_kubectl(
    control_plane: ControlPlane, namespace: str
) -> None:
    """Regression: 10 roles of ~15 KiB, applied client-side: undo printed a traceback
    (`OSError: [Errno 7] Argument list too long: 'kubectl'`), its JSON patch being one
    argument of kubectl's over Linux's 128 KiB."""
    client = control_plane.client
    revisions = []
    for image in (sets.IMAGE_V1, sets.IMAGE_V2):
        sets.apply_set(control_plane, large_set(namespace, image))
        revisions.append(spec_revision(client, namespace))
        wait_rolled_out(client, namespace, revision=revisions[-1], lws=10)
    stored = get_set(client, namespace)
    templates = json.dumps(
        [role["spec"]["leaderWorkerTemplate"] for role in stored["spec"]["roles"]]
    )
    assert len(templates) > MAX_ARG_STRLEN
    done = kubectl_ds(control_plane, namespace, "rollout", "undo", "llm")
    assert (done.returncode, done.stderr) == (0, ""), (done.stdout, done.stderr)
    assert done.stdout.splitlines()[0] == (
        f"llm rolled back to revision 1 ({revisions[0]}) from {revisions[1]}"
    )
    wait_rolled_out(client, namespace, revision=revisions[0], lws=10)
    print(f"large set: {len(json.dumps(get_set(client, namespace)))} bytes stored")


def images(ds: JsonObject) -> set[str]:
    """The images of the containers of every role's worker template."""
    return {
        container["image"]
        for role in ds["spec"]["roles"]
        for container in role["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"][
            "containers"
        ]
    }


def test_the_undo_patch_lands_after_a_status_write_and_is_refused_after_a_spec_change(
    control_plane: ControlPlane, namespace: str
) -> None:
    """The undo's JSON patch of a client-side applied set tests the uid, generation and
    annotations read (`hooks.kubectl.writes`): the API server runs the tests on the set as stored
    when the patch lands, so a status written after the read (Metacontroller's, for seconds
    after a large set's rollout) leaves it standing, and a spec changed after the read refuses
    it."""
    client = control_plane.client
    sets.apply_set(control_plane, sets.small_set(namespace))
    sets.wait_available(client, namespace, "llm")
    where = ("disaggregatedset", "llm", "-n", namespace)

    def read() -> JsonObject:
        shown = control_plane.kubectl("get", *where, "-o", "json", "--show-managed-fields")
        found: JsonObject = json.loads(shown.stdout)
        return found

    def patch(before: JsonObject, image: str) -> subprocess.CompletedProcess[str]:
        roles = sets.small_set(namespace, image=image)["spec"]["roles"]
        (write,) = writes.undo_writes(before, roles=roles, change_cause=None)
        assert write.method is writes.Method.JSON_PATCH
        body = json.dumps(write.body)
        return control_plane.kubectl("patch", *where, "--type=json", "-p", body, check=False)

    before = read()
    conditions = before["status"]["conditions"]
    conditions[0]["message"] += " (written after the read)"
    moved = client.patch(
        kube.DISAGGREGATED_SETS,
        "llm",
        {"status": {"conditions": conditions}},
        namespace=namespace,
        subresource="status",
    )
    assert moved["metadata"]["resourceVersion"] != before["metadata"]["resourceVersion"]
    landed = patch(before, sets.IMAGE_V2)
    assert landed.returncode == 0, landed.stderr
    assert images(get_set(client, namespace)) == {sets.IMAGE_V2}
    before = read()
    sets.apply_set(control_plane, sets.small_set(namespace, image=IMAGE_V3))
    refused = patch(before, sets.IMAGE_V1)
    assert refused.returncode != 0, refused.stdout
    assert images(get_set(client, namespace)) == {IMAGE_V3}


def test_a_set_recreated_after_an_orphaning_delete_gets_its_children_back_without_a_restart(
    control_plane: ControlPlane, lws_controller: FakeLwsController, namespace: str
) -> None:
    """docs/operations.md, "Replacing a set without a restart": delete with --cascade=orphan,
    apply the same manifest again, `kubectl ds adopt SET --orphans`. Every LWS keeps its uid and
    generation (no group restarts), and adopt says why each child was an orphan (issue 35 item
    8: it said "someone else made it")."""
    client = control_plane.client
    manifest = sets.small_set(namespace)
    sets.apply_set(control_plane, manifest)
    sets.wait_available(client, namespace, "llm")
    before = {
        name: (lws["metadata"]["uid"], lws["metadata"]["generation"])
        for name, lws in sets.lws_by_name(client, namespace).items()
    }
    old_uid = get_set(client, namespace)["metadata"]["uid"]
    control_plane.kubectl(
        "delete", "disaggregatedset", "llm", "-n", namespace, "--cascade=orphan", "--wait"
    )
    kube.wait_for(
        lambda: sets.lws_by_name(client, namespace),
        until=lambda found: all(
            not lws["metadata"].get("ownerReferences") for lws in found.values()
        ),
        timeout=sets.WAIT_SECONDS,
        message="the garbage collector orphaned every LWS",
    )
    sets.apply_set(control_plane, manifest)
    listed = kubectl_ds(control_plane, namespace, "adopt", "llm")
    assert listed.returncode == 1
    assert f"its controller-uid label names {old_uid}, an earlier set of this name" in (
        listed.stdout + listed.stderr
    )
    succeeds(control_plane, namespace, "adopt", "llm", "--orphans")
    ds = sets.wait_available(client, namespace, "llm")
    after = {
        name: (lws["metadata"]["uid"], lws["metadata"]["generation"])
        for name, lws in sets.lws_by_name(client, namespace).items()
    }
    assert after == before
    for lws in sets.lws_by_name(client, namespace).values():
        [owner] = lws["metadata"]["ownerReferences"]
        assert owner["uid"] == ds["metadata"]["uid"] != old_uid
