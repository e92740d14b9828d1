"""A DisaggregatedSet's life on the real stack: children and status, a rolling update whose
trajectory is the planner's, External scaling through `/scale`, garbage collection, and a hook
server that dies mid-rollout."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from hooks import api
from hooks.gocompat import revision
from tests.cluster import sets
from tools.sandbox import kube, processes
from tools.sandbox.controlplane import ControlPlane
from tools.sandbox.lws import FakeLwsController

JsonObject = dict[str, Any]

pytestmark = pytest.mark.usefixtures("lws_controller")

PREFIX = "disaggregatedset.x-k8s.io"


def _get_set(client: kube.Client, namespace: str, name: str = "llm") -> JsonObject:
    return client.get(kube.DISAGGREGATED_SETS, name, namespace=namespace)


def _services(client: kube.Client, namespace: str) -> dict[str, JsonObject]:
    return {
        svc["metadata"]["name"]: svc
        for svc in client.list(kube.SERVICES, namespace=namespace)
        if svc["metadata"]["name"].endswith("-prv")
    }


def _revision_of(ds: JsonObject) -> str:
    roles = [(role["name"], role["spec"]["leaderWorkerTemplate"]) for role in ds["spec"]["roles"]]
    return revision.compute_revision(roles)


@pytest.mark.lws_releases
def test_set_gets_its_children_names_labels_services_and_status(
    control_plane: ControlPlane, lws_controller: FakeLwsController, namespace: str
) -> None:
    client = control_plane.client
    with lws_controller.held(namespace):
        sets.apply_set(control_plane, sets.small_set(namespace, slices=2))
        ds = _get_set(client, namespace)
        rev = _revision_of(ds)
        expected = {
            f"llm-{s}-{rev}-{role}": (s, role, replicas)
            for s in (0, 1)
            for role, replicas in (("prefill", 2), ("decode", 1))
        }
        children = kube.wait_for(
            lambda: sets.lws_by_name(client, namespace),
            until=lambda found: found.keys() == expected.keys(),
            timeout=sets.WAIT_SECONDS,
            message=f"one LWS per (slice, role): {sorted(expected)}",
        )
        # Not ready yet: the set reports progress (its status follows the children) and has no
        # Services.
        kube.wait_for(
            lambda: _get_set(client, namespace),
            until=lambda ds: (
                (c := sets.condition(ds, "Progressing")) is not None and c["status"] == "True"
            ),
            timeout=sets.WAIT_SECONDS,
            message="Progressing=True while nothing is ready",
        )
        assert _services(client, namespace) == {}
    uid = ds["metadata"]["uid"]
    for name, (slice_index, role, replicas) in expected.items():
        lws = children[name]
        labels = {
            "app": f"llm-{slice_index}-{role}",
            f"{PREFIX}/name": "llm",
            f"{PREFIX}/role": role,
            f"{PREFIX}/slice": str(slice_index),
            f"{PREFIX}/revision": rev,
        }
        assert lws["metadata"]["labels"] == {**labels, "controller-uid": uid}
        template_labels = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]
        assert template_labels["labels"] == {"role": role, **labels}
        assert lws["spec"]["replicas"] == replicas
        (owner,) = lws["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
            "DisaggregatedSet",
            "llm",
            uid,
            True,
        )
    ds = sets.wait_available(client, namespace, "llm")
    services = _services(client, namespace)
    assert set(services) == {f"{name}-prv" for name in expected}
    for name, (slice_index, role, _) in expected.items():
        service = services[f"{name}-prv"]
        selector = {
            f"{PREFIX}/name": "llm",
            f"{PREFIX}/role": role,
            f"{PREFIX}/revision": rev,
            f"{PREFIX}/slice": str(slice_index),
        }
        assert service["spec"]["clusterIP"] == "None"
        assert service["spec"]["selector"] == selector
        assert "ports" not in service["spec"]
    status = ds["status"]
    assert status["observedGeneration"] == ds["metadata"]["generation"] == 1
    assert status["revision"] == rev
    assert status["roleStatuses"] == [
        {"name": "prefill", "replicas": 4, "readyReplicas": 4, "updatedReplicas": 4},
        {"name": "decode", "replicas": 2, "readyReplicas": 2, "updatedReplicas": 2},
    ]
    summary = {
        c["type"]: (c["status"], c["reason"], c["observedGeneration"]) for c in status["conditions"]
    }
    assert summary == {
        "Available": ("True", "AllRolesReady", 1),
        "Progressing": ("False", "AllRolesReady", 1),
        "Degraded": ("False", "AsExpected", 1),
    }


class ReplicaHistory:
    """Every spec.replicas each LWS of a namespace takes, in order, from a watch."""

    def __init__(self, client: kube.Client, namespace: str) -> None:
        self._lock = threading.Lock()
        self._client = client
        self._namespace = namespace
        self.values: dict[str, list[int]] = {}
        self.deleted: set[str] = set()
        self._alive: set[str] = set()
        self._watch = kube.Watch(client, kube.LWS, self._record, namespace=namespace)

    def _record(self, event: JsonObject) -> None:
        lws = event["object"]
        name = lws["metadata"]["name"]
        with self._lock:
            if event["type"] == "DELETED":
                self.deleted.add(name)
                self._alive.discard(name)
                return
            self._alive.add(name)
            history = self.values.setdefault(name, [])
            replicas = lws["spec"].get("replicas", 1)
            if not history or history[-1] != replicas:
                history.append(replicas)

    def stop(self) -> None:
        """Stop watching once the watch has caught up with the API server (the LWS it holds for
        alive are those the server lists: a test that saw a state by polling may be ahead of the
        watch's events); raises if recording an event ever failed."""
        try:
            kube.wait_for(
                lambda: (self.alive(), set(sets.lws_by_name(self._client, self._namespace))),
                until=lambda seen: seen[0] == seen[1],
                timeout=sets.WAIT_SECONDS,
                message="the LWS watch catching up with the API server (watched, listed)",
            )
        finally:
            self._watch.stop()
            self._watch.check()

    def alive(self) -> set[str]:
        """The LWS whose last event was not a deletion."""
        with self._lock:
            return set(self._alive)

    def assert_took(self, name: str, expected: list[int]) -> None:
        """Assert that LWS `name` took the replicas `expected` (repeats aside), in order: every
        one, unless the watch had to list again (a relist shows an object's latest state only,
        docs of `kube.Watch`), when those it saw must be some of them in order, ending with the
        last. What the watch went through is in the message."""
        wanted = _without_repeats(expected)
        with self._lock:
            seen = list(self.values.get(name, []))
        if self._watch.counts().lists > 1 and seen[-1:] == wanted[-1:]:
            rest = iter(wanted)
            if all(value in rest for value in seen):
                return
        assert seen == wanted, (name, seen, wanted, list(self._watch.incidents))


def _plan_columns(old: JsonObject, new: JsonObject, tmp_path: Path) -> dict[str, list[int]]:
    """`python -m hooks plan --from OLD --to NEW`: each column ("old prefill", ...) of its table."""
    files = []
    for label, manifest in (("old", old), ("new", new)):
        path = tmp_path / f"{label}.yaml"
        path.write_text(json.dumps(manifest))
        files.append(str(path))
    output = subprocess.run(
        [sys.executable, "-m", "hooks", "plan", "--from", files[0], "--to", files[1]],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    header_index = next(i for i, line in enumerate(output) if line.startswith("pass"))
    words = output[header_index].split()[1:-1]  # between "pass" and "rule"
    names = [f"{words[i]} {words[i + 1]}" for i in range(0, len(words), 2)]
    columns: dict[str, list[int]] = {name: [] for name in names}
    for line in output[header_index + 1 :]:
        if not line.strip():
            break
        values = line.split()[1 : 1 + len(names)]
        for name, value in zip(names, values, strict=True):
            columns[name].append(int(value))
    return columns


def _without_repeats(values: list[int]) -> list[int]:
    return [value for i, value in enumerate(values) if i == 0 or values[i - 1] != value]


@pytest.mark.lws_releases
def test_image_change_rolls_out_along_the_planners_trajectory(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """The worked example: prefill 5, decode 2, maxSurge 2, maxUnavailable 1."""
    client = control_plane.client
    old = sets.small_set(namespace, prefill=5, decode=2, max_surge=2, max_unavailable=1)
    sets.apply_set(control_plane, old)
    old_revision = sets.wait_available(client, namespace, "llm")["status"]["revision"]
    new = sets.small_set(
        namespace, prefill=5, decode=2, max_surge=2, max_unavailable=1, image=sets.IMAGE_V2
    )
    history = ReplicaHistory(client, namespace)
    try:
        sets.apply_set(control_plane, new)
        kube.wait_for(
            lambda: sets.observe(client, namespace),
            until=lambda seen: (
                sets.is_available(seen["set"])
                and seen["set"]["status"]["revision"] != old_revision
                and len(seen["lws"]) == 2
            ),
            timeout=sets.WAIT_SECONDS,
            message="the new revision Available and the old one deleted",
        )
    finally:
        history.stop()
    new_revision = _get_set(client, namespace)["status"]["revision"]
    plan = _plan_columns(old, new, tmp_path)
    for role in ("prefill", "decode"):
        old_name, new_name = f"llm-0-{old_revision}-{role}", f"llm-0-{new_revision}-{role}"
        history.assert_took(old_name, plan[f"old {role}"])
        history.assert_took(new_name, plan[f"new {role}"])
        assert old_name in history.deleted
    assert plan["old prefill"] == [5, 5, 4, 3, 2, 2, 0]  # docs/rollout.md's worked example


@pytest.mark.lws_releases
def test_external_role_follows_kubectl_scale_and_scale_reads_back(
    control_plane: ControlPlane, namespace: str
) -> None:
    client = control_plane.client
    sets.apply_set(control_plane, sets.small_set(namespace, external="prefill"))
    ds = sets.wait_available(client, namespace, "llm")
    prefill = f"llm-0-{ds['status']['revision']}-prefill"
    # Seeded with 1 for a new role, whatever the role's own spec.replicas says (2 here).
    assert sets.replicas_by_name(client, namespace)[prefill] == 1
    control_plane.kubectl("scale", "-n", namespace, "dsrs/llm-prefill", "--replicas=3")
    scale_path = kube.SCALERS.path(namespace=namespace, name="llm-prefill") + "/scale"

    seen = kube.wait_for(
        lambda: {
            "scale": client.request("GET", scale_path),
            "lws": sets.lws_by_name(client, namespace)[prefill],
        },
        until=lambda seen: (
            seen["lws"]["spec"]["replicas"] == 3 and seen["scale"]["status"].get("replicas") == 3
        ),
        timeout=sets.WAIT_SECONDS,
        message="the LWS and /scale at 3",
    )
    scale = seen["scale"]
    assert scale["spec"] == {"replicas": 3}
    assert scale["status"]["selector"] == (
        f"{PREFIX}/name=llm,{PREFIX}/role=prefill,leaderworkerset.sigs.k8s.io/worker-index=0"
    )
    ds = sets.wait_available(client, namespace, "llm")
    assert ds["status"]["roleStatuses"][0] == {
        "name": "prefill",
        "replicas": 3,
        "readyReplicas": 3,
        "updatedReplicas": 3,
    }
    scaler = client.get(kube.SCALERS, "llm-prefill", namespace=namespace)
    ready = sets.condition(scaler, "Ready")
    assert ready is not None and (ready["status"], ready["reason"]) == ("True", "Bound")


@pytest.mark.lws_releases
def test_deleting_the_set_garbage_collects_every_child(
    control_plane: ControlPlane, namespace: str
) -> None:
    client = control_plane.client
    sets.apply_set(control_plane, sets.small_set(namespace, external="decode"))
    sets.wait_available(client, namespace, "llm")
    assert len(sets.lws_by_name(client, namespace)) == 2
    assert len(_services(client, namespace)) == 2
    assert len(client.list(kube.SCALERS, namespace=namespace)) == 1
    control_plane.kubectl("delete", "-n", namespace, "disaggregatedset/llm", "--wait=false")
    kube.wait_for(
        lambda: {
            "lws": client.list(kube.LWS, namespace=namespace),
            "services": list(_services(client, namespace).values()),
            "scalers": client.list(kube.SCALERS, namespace=namespace),
        },
        until=lambda left: not any(left.values()),
        timeout=sets.WAIT_SECONDS,
        message="every child garbage-collected",
    )


class ChildEvents:
    """Every watch event of the LWS and Services of a namespace."""

    def __init__(self, client: kube.Client, namespace: str) -> None:
        self.events: list[tuple[str, str, str, int]] = []
        self._watches = [
            kube.Watch(client, resource, self._record, namespace=namespace, initial_events=False)
            for resource in (kube.LWS, kube.SERVICES)
        ]

    def _record(self, event: JsonObject) -> None:
        obj = event["object"]
        metadata = obj["metadata"]
        self.events.append(
            (event["type"], obj["kind"], metadata["name"], metadata.get("generation", 0))
        )

    def stop(self) -> None:
        """Stop watching; raises if recording an event ever failed."""
        for watch in self._watches:
            watch.stop()
        for watch in self._watches:
            watch.check()


def _sync_retries(control_plane: ControlPlane) -> float:
    """How often Metacontroller requeued a DisaggregatedSet after a failed sync."""
    text = processes.local_get(control_plane.metacontroller_metrics).text
    labels = {"name": "CompositeController-disaggregatedset-controller"}
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "workqueue_retries_total" and labels.items() <= sample.labels.items()
    )


def test_killed_hook_server_changes_nothing_and_the_rollout_resumes(
    control_plane: ControlPlane, lws_controller: FakeLwsController, namespace: str
) -> None:
    client = control_plane.client
    sets.apply_set(control_plane, sets.small_set(namespace))
    old_revision = sets.wait_available(client, namespace, "llm")["status"]["revision"]
    with lws_controller.held(namespace):
        sets.apply_set(control_plane, sets.small_set(namespace, image=sets.IMAGE_V2))
        new_revision = _revision_of(_get_set(client, namespace))
        new_prefill = f"llm-0-{new_revision}-prefill"
        kube.wait_for(
            lambda: sets.replicas_by_name(client, namespace),
            until=lambda replicas: replicas.get(new_prefill, 0) >= 1,
            timeout=sets.WAIT_SECONDS,
            message=f"the first scale-up of the new revision ({new_prefill})",
        )
        control_plane.kill_hooks()
        before = sets.lws_by_name(client, namespace)
        services_before = set(_services(client, namespace))
        events = ChildEvents(client, namespace)
        retries_before = _sync_retries(control_plane)
    # Readiness moves on (the held status is written now), so Metacontroller wants a sync.
    try:
        kube.wait_for(
            lambda: _sync_retries(control_plane),
            until=lambda retries: retries >= retries_before + 5,
            timeout=sets.WAIT_SECONDS,
            message=f"Metacontroller retrying syncs that fail (from {retries_before} retries)",
        )
        after = sets.lws_by_name(client, namespace)
    finally:
        events.stop()
    assert after.keys() == before.keys()
    for name, lws in after.items():
        assert lws["metadata"]["generation"] == before[name]["metadata"]["generation"], name
        assert lws["spec"] == before[name]["spec"], name
        assert lws["status"]["readyReplicas"] == lws["spec"]["replicas"], name
    assert set(_services(client, namespace)) == services_before
    changes = [e for e in events.events if e[0] != "MODIFIED" or e[2] not in before]
    assert changes == []

    control_plane.start_hooks()
    kube.wait_for(
        lambda: sets.observe(client, namespace),
        until=lambda seen: (
            sets.is_available(seen["set"])
            and seen["set"]["status"]["revision"] == new_revision
            and set(seen["lws"])
            == {f"llm-0-{new_revision}-prefill", f"llm-0-{new_revision}-decode"}
        ),
        timeout=sets.WAIT_SECONDS,
        message="the rollout completed after the hook server came back",
    )
    assert old_revision != new_revision


def _progressing(ds: JsonObject) -> tuple[str, str]:
    condition = sets.condition(ds, "Progressing")
    return (condition["status"], condition["reason"]) if condition else ("", "")


def test_a_stalled_rollout_reports_its_progress_deadline(
    control_plane: ControlPlane, lws_controller: FakeLwsController, namespace: str
) -> None:
    client = control_plane.client
    sets.apply_set(control_plane, sets.small_set(namespace))
    sets.wait_available(client, namespace, "llm")
    control_plane.kubectl(
        "annotate", "-n", namespace, "disaggregatedset/llm",
        f"{api.ANNOTATION_PROGRESS_DEADLINE}=2",
    )  # fmt: skip
    with lws_controller.held(namespace):  # the new revision's groups never become ready
        sets.apply_set(control_plane, sets.small_set(namespace, image=sets.IMAGE_V2))
        kube.wait_for(
            lambda: _get_set(client, namespace),
            until=lambda ds: _progressing(ds) == ("False", "ProgressDeadlineExceeded"),
            timeout=sets.WAIT_SECONDS,
            message="Progressing=False, ProgressDeadlineExceeded",
        )
        ds = _get_set(client, namespace)
        message = sets.condition(ds, "Progressing")["message"]  # type: ignore[index]
        assert f"llm-0-{ds['status']['revision']}-prefill" in message
        assert ds["status"]["rollout"]["revision"] == ds["status"]["revision"]
        table = control_plane.kubectl("get", "disaggregatedsets", "-n", namespace).stdout
        assert "ProgressDeadlineExceeded" in table
    # Readiness comes back: the rollout moves again and completes.
    ds = sets.wait_available(client, namespace, "llm")
    assert "rollout" not in ds["status"]


def test_pause_freezes_a_rollout_and_resume_completes_it(
    control_plane: ControlPlane, namespace: str
) -> None:
    client = control_plane.client
    sets.apply_set(control_plane, sets.small_set(namespace))
    old = sets.wait_available(client, namespace, "llm")
    before = sets.replicas_by_name(client, namespace)
    control_plane.kubectl(
        "annotate", "-n", namespace, "disaggregatedset/llm", f"{api.ANNOTATION_PAUSED}=true"
    )
    sets.apply_set(control_plane, sets.small_set(namespace, image=sets.IMAGE_V2))
    kube.wait_for(
        lambda: _get_set(client, namespace),
        until=lambda ds: (
            ds["status"].get("observedGeneration") == ds["metadata"]["generation"]
            and _progressing(ds) == ("Unknown", "RolloutPaused")
        ),
        timeout=sets.WAIT_SECONDS,
        message="the new generation seen, paused",
    )
    assert sets.replicas_by_name(client, namespace) == before  # no new revision, nothing drained
    table = control_plane.kubectl("get", "disaggregatedsets", "-n", namespace).stdout
    assert "RolloutPaused" in table
    control_plane.kubectl(
        "annotate", "-n", namespace, "disaggregatedset/llm", f"{api.ANNOTATION_PAUSED}-"
    )
    kube.wait_for(
        lambda: sets.observe(client, namespace),
        until=lambda seen: (
            sets.is_available(seen["set"])
            and seen["set"]["status"]["revision"] != old["status"]["revision"]
            and len(seen["lws"]) == 2
        ),
        timeout=sets.WAIT_SECONDS,
        message="the rollout completed after resume",
    )
