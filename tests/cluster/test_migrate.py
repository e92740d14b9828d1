"""Install, upgrade, migrate, uninstall on the real stack (docs/operations.md), with upstream's
Go controller (`../shared/peer`) as the controller the sets move from and to.

One control plane of its own for the module (`tests.cluster.handover.Stack`: never two
controllers at once), the fake LWS controller on it, and in order:

- the handover both ways: sets created and rolled by upstream's controller, handed to ours
  (`kubectl ds adopt --all`), back to upstream's, and to ours again (the kubectl one-liner of
  docs/operations.md, run as written there); at each handover no child is recreated, rescaled
  or changed (same uids, replicas and generations), the sets are Available under the new
  controller, and a rollout and an External scale complete under it;
- `kubectl ds rollout status` under upstream's controller: the status names no revision, and
  it says so;
- children that Metacontroller released because it synced before the adoption: the set says
  so, and `kubectl ds adopt --orphans` hands them back, nothing recreated (each checked to be
  exactly what the set would have made: upstream's LWS with a leader template, role metadata
  and placement terms are);
- an older hook server under a newer version's CompositeController and CRD: a child of a kind it
  does not know and a status field it does not compute survive its syncs;
- the uninstall order: sets first (the garbage collector removes every child), then the kit;
  nothing is left, nothing hangs on a finalizer.

Without upstream's binary the module skips (fails under CI=true, where ../shared has it). The
handover figures are printed (`-s` shows them).
"""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

import pytest

from hooks import api
from hooks.kubectl import rollout
from tests import programs
from tests.cluster import sets, upstream
from tests.cluster.handover import (
    COMPOSITE_CONTROLLERS,
    METACONTROLLER,
    Snapshot,
    Stack,
)
from tests.cluster.handover import snapshot as children_of
from tests.cluster.test_kubectl_ds import kubectl_ds
from tests.shared import REPO_ROOT
from tools.sandbox import assets, kube, lws

JsonObject = dict[str, Any]
Judge = Callable[[JsonObject], bool]

IMAGES: Final = tuple(f"vllm/vllm-openai:v0.{minor}.0" for minor in range(11, 16))
ONE_LINER_MARK: Final = "<!-- tests/cluster/test_migrate.py runs this block -->"
OUR_AVAILABLE: Final = "All roles run revision"
UPSTREAM_STATUS: Final = {"conditions", "observedGeneration", "roleStatuses"}


@pytest.fixture(scope="module")
def stack(control_plane_assets: assets.Assets) -> Iterator[Stack]:
    reason = upstream.missing()
    if reason is not None:
        programs.missing(reason)
    stack = Stack.start(control_plane_assets, Path(tempfile.mkdtemp(prefix="ds-migrate-")))
    controller = lws.FakeLwsController(stack.plane.client, delay=lws.READINESS_DELAY_SECONDS)
    controller.start()
    try:
        yield stack
    finally:
        controller.stop()
        stack.plane.stop()
    assert controller.failures() == [], "the fake LWS controller failed"


def new_namespace(stack: Stack, name: str) -> str:
    stack.plane.client.create(
        kube.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    return name


def two_slices(namespace: str, image: str) -> JsonObject:
    manifest = sets.small_set(namespace, image=image, slices=2)
    manifest["metadata"]["name"] = "two"
    return manifest


def external(namespace: str) -> JsonObject:
    manifest = sets.small_set(namespace, external="decode")
    manifest["metadata"]["name"] = "ext"
    return manifest


def get(stack: Stack, namespace: str, name: str) -> JsonObject:
    return stack.plane.client.get(kube.DISAGGREGATED_SETS, name, namespace=namespace)


def under_ours(ds: JsonObject) -> bool:
    """Available, as our hooks report it (upstream's CRD has no status.revision)."""
    available = sets.condition(ds, "Available")
    return (
        sets.is_available(ds)
        and "revision" in ds["status"]
        and available is not None
        and available["message"].startswith(OUR_AVAILABLE)
    )


def under_upstream(ds: JsonObject) -> bool:
    """Available, as upstream's controller reports it."""
    available = sets.condition(ds, "Available")
    return (
        sets.is_available(ds)
        and available is not None
        and not available["message"].startswith(OUR_AVAILABLE)
    )


def wait_sets(stack: Stack, namespace: str, names: tuple[str, ...], until: Judge) -> float:
    """Seconds until every set named is `until`, from when the running controller started."""
    for name in names:
        kube.wait_for(
            lambda name=name: get(stack, namespace, name),
            until=until,
            timeout=sets.WAIT_SECONDS,
            message=f"{namespace}/{name} {until.__name__}",
        )
    return time.monotonic() - max(stack.started.values())


def roll_and_scale(stack: Stack, namespace: str, image: str, decode: int, until: Judge) -> None:
    """Roll `two` to `image` and scale `ext`'s decode to `decode`; wait for both to finish."""
    plane, client = stack.plane, stack.plane.client
    sets.apply_set(plane, two_slices(namespace, image))
    plane.kubectl("scale", "-n", namespace, "dsrs/ext-decode", f"--replicas={decode}")

    def done(seen: JsonObject) -> bool:
        ds, lws_ = seen["set"], seen["lws"]
        two = {name: item for name, item in lws_.items() if name.startswith("two-")}
        ext = {name: item for name, item in lws_.items() if name.startswith("ext-")}
        return (
            until(ds)
            and until(get(stack, namespace, "ext"))
            and len(two) == 4
            and all(image in json.dumps(item["spec"]) for item in two.values())
            and [item["spec"]["replicas"] for n, item in ext.items() if n.endswith("decode")]
            == [decode]
        )

    kube.wait_for(
        lambda: sets.observe(client, namespace, "two"),
        until=done,
        timeout=sets.WAIT_SECONDS,
        message=f"two rolled to {image}, ext's decode at {decode}",
    )


def assert_untouched(before: Snapshot, after: Snapshot, *, step: str) -> dict[str, int]:
    """The same children, uids, replicas and generations (our hooks may add history records);
    returns the counts kept."""
    history = {key for key in after.keys() - before.keys() if key[0] == kube.REVISIONS.plural}
    assert after.keys() - history == before.keys(), f"{step}: children created or deleted"
    for key, child in before.items():
        now = after[key]
        assert now.uid == child.uid, f"{step}: {key} recreated"
        assert now.replicas == child.replicas, f"{step}: {key} rescaled"
        assert now.generation == child.generation, f"{step}: {key} changed"
        assert now.owners == child.owners, f"{step}: {key} changed owners"
    lws_ = [child for (resource, _), child in before.items() if resource == kube.LWS.plural]
    return {"children": len(before), "lws": len(lws_), "groups": sum(c.replicas or 1 for c in lws_)}


def one_liner() -> str:
    """The kubectl-only adoption block of docs/operations.md."""
    text = (REPO_ROOT / "docs" / "operations.md").read_text()
    found = re.search(re.escape(ONE_LINER_MARK) + r"\n```sh\n(.*?)```", text, re.DOTALL)
    assert found is not None, f"no ```sh block after {ONE_LINER_MARK} in docs/operations.md"
    return found.group(1)


def adopt_without_plugin(stack: Stack, namespace: str, names: tuple[str, ...]) -> None:
    for name in names:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", one_liner()],
            env={
                **os.environ,
                "SET": name,
                "NS": namespace,
                "KUBECONFIG": str(stack.plane.kubeconfig),
            },
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, (name, done.stdout, done.stderr)


def adopt_with_plugin(stack: Stack, namespace: str, *arguments: str) -> str:
    done = kubectl_ds(stack.plane, namespace, "adopt", *arguments)
    assert done.returncode == 0, (done.stdout, done.stderr)
    return done.stdout


def test_sets_go_from_upstream_to_ours_and_back_and_to_ours_again_untouched(
    stack: Stack,
) -> None:
    namespace = new_namespace(stack, "journey")
    names = ("two", "ext")
    # Upstream's controller creates both sets, rolls one and scales the other.
    stack.to_upstream()
    sets.apply_set(stack.plane, two_slices(namespace, IMAGES[0]))
    sets.apply_set(stack.plane, external(namespace))
    wait_sets(stack, namespace, names, under_upstream)
    roll_and_scale(stack, namespace, IMAGES[1], 2, under_upstream)
    handovers = (
        (
            "upstream -> ours (kubectl ds adopt --all)",
            lambda: stack.to_ours(lambda: adopt_with_plugin(stack, namespace, "--all")),
            under_ours,
        ),
        ("ours -> upstream", stack.to_upstream, under_upstream),
        (
            "upstream -> ours (the kubectl one-liner)",
            lambda: stack.to_ours(lambda: adopt_without_plugin(stack, namespace, names)),
            under_ours,
        ),
    )
    figures = []
    for (step, hand_over, until), image, decode in zip(
        handovers, IMAGES[2:], (3, 1, 2), strict=True
    ):
        before = children_of(stack.plane.client, namespace)
        hand_over()
        seconds = wait_sets(stack, namespace, names, until)
        after = children_of(stack.plane.client, namespace)
        kept = assert_untouched(before, after, step=step)
        if until is under_ours:
            uids = {get(stack, namespace, name)["metadata"]["uid"] for name in names}
            assert {child.labels.get(api.CONTROLLER_UID_LABEL) for child in after.values()} <= uids
        else:
            # Upstream's CRD has none of the status fields ours adds: the API server prunes them.
            for name in names:
                assert get(stack, namespace, name)["status"].keys() <= UPSTREAM_STATUS
        figures.append(f"{step}: {kept}, Available {seconds:.1f} s after the controller started")
        roll_and_scale(stack, namespace, image, decode, until)
    print("\n".join(["handover figures:", *figures]))
    # Regression (issue 35 item 9): step 4 applied the kit client-side over the CRDs step 2 had
    # applied server-side, and kubectl warned of each missing last-applied annotation.
    assert stack.kit_applied
    for applied in stack.kit_applied:
        assert "Warning" not in applied.stderr, applied.stderr
        assert "compositecontroller.metacontroller.k8s.io/disaggregatedset-controller" in (
            applied.stdout
        )


def test_issue33_item7_rollout_status_under_upstreams_controller_says_the_status_names_no_revision(
    stack: Stack,
) -> None:
    """Regression: `kubectl ds rollout status` printed "successfully rolled out to revision
    None", every group as old. It says why the status names no revision, and counts the LWS of
    the spec's revision as new."""
    namespace = new_namespace(stack, "status")
    stack.to_upstream()
    sets.apply_set(stack.plane, two_slices(namespace, IMAGES[0]))
    wait_sets(stack, namespace, ("two",), under_upstream)
    revision = rollout.spec_revision(rollout.read_set(get(stack, namespace, "two")))
    done = kubectl_ds(stack.plane, namespace, "rollout", "status", "two", "--timeout", "60s")
    assert (done.returncode, done.stderr) == (0, ""), (done.stdout, done.stderr)
    assert done.stdout.splitlines() == [
        "the status of two names no revision: these hooks, which always write one, do not run it"
        f" (upstream's controller writes none); the LWS of the spec's revision, {revision}, count"
        " as new",
        "slice 0 Steady: prefill old 0/0 new 2/2, decode old 0/0 new 1/1",
        "slice 1 Steady: prefill old 0/0 new 2/2, decode old 0/0 new 1/1",
        f"two is Available, as its status says (it names no revision; the spec's is {revision})",
    ]
    # Gone with its children while they are still the set's: the next handover would release
    # them (Metacontroller would find them unlabelled).
    stack.plane.kubectl("delete", "disaggregatedset", "two", "-n", namespace, "--wait=true")
    kube.wait_for(
        lambda: children_of(stack.plane.client, namespace),
        until=lambda found: not found,
        timeout=sets.WAIT_SECONDS,
        message=f"the children of {namespace}/two collected",
    )


def richer_external(namespace: str) -> JsonObject:
    """`external`, with more of what upstream's controller renders into an LWS than the
    template: the role's labels and annotations, a leader template, placement terms."""
    manifest = external(namespace)
    prefill = manifest["spec"]["roles"][0]
    template = prefill["spec"]["leaderWorkerTemplate"]
    template["leaderTemplate"] = copy.deepcopy(template["workerTemplate"])
    prefill["metadata"] = {"labels": {"team": "serving"}, "annotations": {"owner": "platform"}}
    manifest["spec"]["placementPolicy"] = {
        "type": "ExclusiveSlice",
        "topology": "kubernetes.io/hostname",
    }
    return manifest


def test_children_metacontroller_released_before_the_adoption_come_back_with_orphans(
    stack: Stack,
) -> None:
    """Upstream's controller made them (its Go client's encoding, LWS's defaulting webhook):
    each is exactly what the set would have made, so `adopt --orphans` takes every one."""
    namespace = new_namespace(stack, "late")
    client = stack.plane.client
    stack.to_upstream()
    sets.apply_set(stack.plane, richer_external(namespace))
    wait_sets(stack, namespace, ("ext",), under_upstream)
    before = children_of(client, namespace)
    stack.to_ours(lambda: None)  # The mistake: no adoption before the kit.
    uid = get(stack, namespace, "ext")["metadata"]["uid"]
    kube.wait_for(
        lambda: children_of(client, namespace),
        until=lambda now: all(
            uid not in child.owners
            for child in now.values()
            if child.uid in {c.uid for c in before.values()}
        ),
        timeout=sets.WAIT_SECONDS,
        message="Metacontroller released the children it found unlabelled",
    )
    ds = kube.wait_for(
        lambda: get(stack, namespace, "ext"),
        until=lambda ds: (
            (sets.condition(ds, "Degraded") or {}).get("reason") == api.Reason.SCALER_CONFLICT
        ),
        timeout=sets.WAIT_SECONDS,
        message="Degraded=ScalerConflict for the released scaler",
    )
    assert "kubectl ds adopt ext --orphans" in sets.condition(ds, "Degraded")["message"]  # type: ignore[index]
    refused = kubectl_ds(stack.plane, namespace, "adopt", "ext")
    assert refused.returncode == 1
    assert "--orphans adopts it" in refused.stderr
    adopt_with_plugin(stack, namespace, "ext", "--orphans")
    wait_sets(stack, namespace, ("ext",), under_ours)
    after = kube.wait_for(
        lambda: children_of(client, namespace),
        until=lambda now: all(uid in child.owners for child in now.values()),
        timeout=sets.WAIT_SECONDS,
        message="every child owned by the set again",
    )
    for key, child in before.items():
        assert (after[key].uid, after[key].replicas) == (child.uid, child.replicas), key


def test_an_older_hook_server_keeps_what_a_newer_version_wrote(stack: Stack) -> None:
    """A newer version's CompositeController lists one more child kind (ConfigMaps here) and its
    CRD one more status field; the hooks of this version, answering for the set, keep both.

    The newer version's writes are made while Metacontroller is stopped: Metacontroller
    replaces the whole status with each answer, so a status written beside it can be lost to
    a sync that read the set just before; after its restart every sync reads them."""
    stack.to_ours(lambda: None)
    namespace = new_namespace(stack, "upgrade")
    plane, client = stack.plane, stack.plane.client
    sets.apply_set(plane, sets.small_set(namespace))
    uid = sets.wait_available(client, namespace, "llm")["metadata"]["uid"]
    plane.stop_process(METACONTROLLER)
    crd = f"{api.DS_PLURAL}.{api.GROUP}"
    field = "/spec/versions/0/schema/openAPIV3Schema/properties/status/properties/newer"
    newer_crd = [{"op": "add", "path": field, "value": {"type": "string"}}]
    plane.kubectl("patch", "crd", crd, "--type=json", f"--patch={json.dumps(newer_crd)}")
    controller = client.get(COMPOSITE_CONTROLLERS, "disaggregatedset-controller")
    original = copy.deepcopy(controller)
    child = {"apiVersion": "v1", "resource": "configmaps", "updateStrategy": {"method": "InPlace"}}
    controller["spec"]["childResources"].append(child)
    plane.kubectl("replace", "-f", "-", stdin=json.dumps(controller))
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "llm-newer",
            "namespace": namespace,
            "labels": {api.LABEL_NAME: "llm", api.CONTROLLER_UID_LABEL: uid},
            "ownerReferences": [{
                "apiVersion": api.API_VERSION, "kind": api.DS_KIND, "name": "llm", "uid": uid,
                "controller": True, "blockOwnerDeletion": True,
            }],
        },
        "data": {"written-by": "a newer version"},
    }  # fmt: skip
    configmaps = kube.Resource("", "v1", "configmaps")
    created = client.create(configmaps, config)
    # The API server prunes the field until it serves the patched CRD.
    kube.wait_for(
        lambda: client.patch(
            kube.DISAGGREGATED_SETS, "llm", {"status": {"newer": "kept"}}, namespace=namespace,
            subresource="status",
        )["status"],
        until=lambda status: status.get("newer") == "kept",
        timeout=sets.WAIT_SECONDS,
        message="status.newer stored",
    )  # fmt: skip
    since = len(plane.hook_calls("sync", f"{namespace}/llm"))
    plane.start_metacontroller()
    sets.apply_set(plane, sets.small_set(namespace, image=IMAGES[1]))
    sets.wait_available(client, namespace, "llm")
    calls = plane.hook_calls("sync", f"{namespace}/llm")[since:]
    assert calls, "no sync after Metacontroller's restart"
    assert all(call["kept"] == 2 for call in calls), [call["kept"] for call in calls]
    kept = client.get(configmaps, "llm-newer", namespace=namespace)
    assert kept["metadata"]["uid"] == created["metadata"]["uid"]
    assert get(stack, namespace, "llm")["status"].get("newer") == "kept"
    # This version's CRD and CompositeController again.
    back = [{"op": "remove", "path": field}]
    plane.kubectl("patch", "crd", crd, "--type=json", f"--patch={json.dumps(back)}")
    del original["metadata"]["resourceVersion"]
    plane.kubectl("replace", "-f", "-", stdin=json.dumps(original))


def test_uninstalling_sets_first_then_the_kit_leaves_nothing_behind(stack: Stack) -> None:
    stack.to_ours(lambda: None)
    plane, client = stack.plane, stack.plane.client
    namespace = new_namespace(stack, "uninstall")
    sets.apply_set(plane, external(namespace))
    wait_sets(stack, namespace, ("ext",), under_ours)
    # 1. Every set, while Metacontroller and the hooks still run: the garbage collector removes
    # their children (they carry the set's ownerReference), and no finalizer waits on anyone.
    plane.kubectl("delete", "disaggregatedsets", "--all", "--all-namespaces", "--wait=true")
    kube.wait_for(
        lambda: {
            resource.plural: [
                obj["metadata"]["name"]
                for obj in client.list(resource)
                if api.LABEL_NAME in obj["metadata"].get("labels", {})
            ]
            for resource in (kube.LWS, kube.SERVICES, kube.SCALERS, kube.REVISIONS)
        },
        until=lambda left: not any(left.values()),
        timeout=sets.WAIT_SECONDS,
        message="every child of every set collected",
    )
    # 2. The kit, as `kubectl delete -k .` deletes it.
    rendered = subprocess.run(
        ["kubectl", "kustomize", str(REPO_ROOT)], capture_output=True, text=True, check=True
    ).stdout
    plane.kubectl("delete", "-f", "-", "--wait=true", "--timeout=120s", stdin=rendered)
    crds = [crd["metadata"]["name"] for crd in client.list(kube.CRDS)]
    assert not [name for name in crds if name.endswith(api.GROUP)], crds
    assert client.list(COMPOSITE_CONTROLLERS) == []
    namespaces = [ns["metadata"]["name"] for ns in client.list(kube.NAMESPACES)]
    assert "disaggregatedset-system" not in namespaces
    assert plane.running[METACONTROLLER].running()
