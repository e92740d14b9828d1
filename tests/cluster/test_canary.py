"""Canary rollouts on the real control plane: a 2-slice partition, a 1-slice hold and release.

The replica history of every LWS is seen through a watch and compared with `python -m hooks
plan`: a held rollout takes the planner's steps up to the pass `plan --hold-at` marks, stands
there with both revisions serving, and released finishes the same table; a partitioned slice's
LWS never change while slice 0 rolls.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hooks import api
from tests.cluster import sets
from tests.cluster.test_lifecycle import ReplicaHistory, _plan_columns, _without_repeats
from tools.sandbox import kube
from tools.sandbox.controlplane import ControlPlane

JsonObject = dict[str, Any]


def _progressing(ds: JsonObject) -> tuple[str, str]:
    condition = sets.condition(ds, "Progressing") or {}
    return condition.get("status", ""), condition.get("reason", "")


def _wait_reason(client: kube.Client, namespace: str, reason: str) -> JsonObject:
    return kube.wait_for(
        lambda: client.get(kube.DISAGGREGATED_SETS, "llm", namespace=namespace),
        until=lambda ds: (
            ds["status"].get("observedGeneration") == ds["metadata"]["generation"]
            and _progressing(ds) == ("Unknown", reason)
        ),
        timeout=sets.WAIT_SECONDS,
        message=f"Progressing Unknown, {reason}",
    )


def _annotate(plane: ControlPlane, namespace: str, key: str, value: str | None) -> None:
    patch = {"metadata": {"annotations": {key: value}}}
    plane.kubectl("patch", "dset", "llm", "-n", namespace, "--type=merge", "-p", json.dumps(patch))


def _hold_pass(old: JsonObject, new: JsonObject, tmp_path: Path) -> int:
    """The pass `plan --from OLD --to NEW` marks as where the held rollout stands still."""
    files = []
    for label, manifest in (("old", old), ("new", new)):
        path = tmp_path / f"{label}-hold.yaml"
        path.write_text(json.dumps(manifest))
        files.append(str(path))
    output = subprocess.run(
        [sys.executable, "-m", "hooks", "plan", "--from", files[0], "--to", files[1]],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    [row] = [line for line in output if line.endswith("<- holds here")]
    return int(row.split()[0])


@pytest.mark.usefixtures("lws_controller")
def test_a_held_rollout_stands_at_the_planners_pass_and_released_finishes_the_table(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    client = control_plane.client
    old = sets.small_set(namespace, prefill=5, decode=2, max_surge=2, max_unavailable=1)
    sets.apply_set(control_plane, old)
    old_revision = sets.wait_available(client, namespace, "llm")["status"]["revision"]
    new = sets.small_set(
        namespace, prefill=5, decode=2, max_surge=2, max_unavailable=1, image=sets.IMAGE_V2
    )
    new["metadata"]["annotations"] = {api.ANNOTATION_ROLLOUT_HOLD_AT: "50%"}
    hold = _hold_pass(old, new, tmp_path)
    plan = _plan_columns(old, new, tmp_path)
    history = ReplicaHistory(client, namespace)
    try:
        sets.apply_set(control_plane, new)
        held = _wait_reason(client, namespace, "RolloutHeld")
        new_revision = held["status"]["revision"]
        assert [s["phase"] for s in held["status"]["rollout"]["slices"]] == ["Held"]
        progressing = sets.condition(held, "Progressing") or {}
        assert "holds at 50%" in progressing["message"]
        at_hold = {name: list(values) for name, values in history.values.items()}
        _annotate(control_plane, namespace, api.ANNOTATION_ROLLOUT_HOLD_AT, None)
        kube.wait_for(
            lambda: sets.observe(client, namespace),
            until=lambda seen: sets.is_available(seen["set"]) and len(seen["lws"]) == 2,
            timeout=sets.WAIT_SECONDS,
            message="released: the new revision Available and the old one deleted",
        )
    finally:
        history.stop()
    for role in ("prefill", "decode"):
        old_name, new_name = f"llm-0-{old_revision}-{role}", f"llm-0-{new_revision}-{role}"
        # Standing at the hold: the planner's columns up to the marked pass.
        assert at_hold[old_name] == _without_repeats(plan[f"old {role}"][: hold + 1]), role
        assert at_hold[new_name] == _without_repeats(plan[f"new {role}"][: hold + 1]), role
        # Released: the whole table.
        history.assert_took(old_name, plan[f"old {role}"])
        history.assert_took(new_name, plan[f"new {role}"])


@pytest.mark.usefixtures("lws_controller")
def test_a_partition_rolls_slice_zero_and_leaves_slice_one_untouched_until_raised(
    control_plane: ControlPlane, namespace: str
) -> None:
    client = control_plane.client
    manifest = sets.small_set(namespace, prefill=2, decode=1, slices=2)
    manifest["metadata"]["annotations"] = {api.ANNOTATION_ROLLOUT_PARTITION: "1"}
    sets.apply_set(control_plane, manifest)
    first = sets.wait_available(client, namespace, "llm")["status"]["revision"]
    before = {
        name: lws["spec"]["replicas"]
        for name, lws in sets.lws_by_name(client, namespace).items()
        if lws["metadata"]["labels"][api.LABEL_SLICE] == "1"
    }
    history = ReplicaHistory(client, namespace)
    try:
        rolled = sets.small_set(namespace, prefill=2, decode=1, slices=2, image=sets.IMAGE_V2)
        sets.apply_set(control_plane, {**rolled, "metadata": manifest["metadata"]})
        parted = _wait_reason(client, namespace, "RolloutPartitioned")
        second = parted["status"]["revision"]
        assert [
            (s["index"], s["phase"], s["revisions"]) for s in parted["status"]["rollout"]["slices"]
        ] == [(1, "Partitioned", [first])]
        names = set(sets.lws_by_name(client, namespace))
        assert names == {
            *(f"llm-0-{second}-{role}" for role in ("prefill", "decode")),
            *before,
        }
        for name in before:  # slice 1 never moved
            assert history.values.get(name, [before[name]]) == [before[name]], name
        _annotate(control_plane, namespace, api.ANNOTATION_ROLLOUT_PARTITION, "2")
        kube.wait_for(
            lambda: sets.observe(client, namespace),
            until=lambda seen: (
                sets.is_available(seen["set"]) and all(second in name for name in seen["lws"])
            ),
            timeout=sets.WAIT_SECONDS,
            message="raised: every slice on the new revision",
        )
    finally:
        history.stop()
    for name in before:
        assert name in history.deleted


def _slice(seen: JsonObject, index: int) -> dict[str, JsonObject]:
    return {
        name: lws
        for name, lws in seen["lws"].items()
        if lws["metadata"]["labels"][api.LABEL_SLICE] == str(index)
    }


def _services(client: kube.Client, namespace: str, index: int) -> set[str]:
    return {
        service["metadata"]["name"]
        for service in client.list(kube.SERVICES, namespace=namespace)
        if service["metadata"]["labels"].get(api.LABEL_SLICE) == str(index)
    }


@pytest.mark.usefixtures("lws_controller")
def test_issue25_items1_and_2_a_slice_added_mid_rollout_past_the_partition_runs_the_stable_revision(
    control_plane: ControlPlane, namespace: str
) -> None:
    """A 1-slice set with partition 1, its rollout held mid-way (slice 0 runs both revisions),
    then spec.slices: 2: slice 1 is created at the revision every slice ran, not the new one, at
    its full size, and once ready has that revision's Services; a Service deleted there comes
    back. Released, every slice rolls on."""
    client = control_plane.client
    manifest = sets.small_set(namespace, prefill=2, decode=1)
    manifest["metadata"]["annotations"] = {
        api.ANNOTATION_ROLLOUT_PARTITION: "1",
        api.ANNOTATION_ROLLOUT_HOLD_AT: "50%",
    }
    sets.apply_set(control_plane, manifest)
    first = sets.wait_available(client, namespace, "llm")["status"]["revision"]
    rolled = sets.small_set(namespace, prefill=2, decode=1, image=sets.IMAGE_V2)
    sets.apply_set(control_plane, {**rolled, "metadata": manifest["metadata"]})
    second = _wait_reason(client, namespace, "RolloutHeld")["status"]["revision"]
    assert {
        lws["metadata"]["labels"][api.LABEL_REVISION]
        for lws in sets.lws_by_name(client, namespace).values()
    } == {first, second}

    grown = sets.small_set(namespace, prefill=2, decode=1, image=sets.IMAGE_V2, slices=2)
    sets.apply_set(control_plane, {**grown, "metadata": manifest["metadata"]})
    wanted = {f"llm-1-{first}-{role}-prv" for role in ("prefill", "decode")}
    seen = kube.wait_for(
        lambda: {**sets.observe(client, namespace), "services": _services(client, namespace, 1)},
        until=lambda seen: seen["services"] == wanted,
        timeout=sets.WAIT_SECONDS,
        message="slice 1 at the stable revision, ready, with its Services",
    )
    created = _slice(seen, 1)
    assert {name: lws["spec"]["replicas"] for name, lws in created.items()} == {
        f"llm-1-{first}-prefill": 2,
        f"llm-1-{first}-decode": 1,
    }
    client.delete(kube.SERVICES, f"llm-1-{first}-decode-prv", namespace=namespace)
    kube.wait_for(
        lambda: _services(client, namespace, 1),
        until=lambda found: found == wanted,
        timeout=sets.WAIT_SECONDS,
        message="the deleted Service of the partitioned slice created again",
    )

    for key in (api.ANNOTATION_ROLLOUT_PARTITION, api.ANNOTATION_ROLLOUT_HOLD_AT):
        _annotate(control_plane, namespace, key, None)
    kube.wait_for(
        lambda: sets.observe(client, namespace),
        until=lambda seen: (
            sets.is_available(seen["set"]) and all(second in name for name in seen["lws"])
        ),
        timeout=sets.WAIT_SECONDS,
        message="released: both slices on the new revision",
    )
