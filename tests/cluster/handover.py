"""One control plane, one DisaggregatedSet controller at a time: ours (Metacontroller and the hook
server, the kit installed) or upstream's Go controller (`tests.cluster.upstream`), handed over in
the order docs/operations.md gives ("Install, upgrade, migrate, uninstall").

- `to_upstream`: delete our CompositeControllers, so Metacontroller stops syncing the sets, and
  the kit's adoption policy, which would refuse upstream's controller (a service account of its
  own, without the verb adopt) the ownerReference of every child it creates; stop Metacontroller
  and the hook server; apply upstream's CRDs over ours; start upstream's controller with its
  webhooks.
- `to_ours`: stop upstream's controller and delete its webhook configurations; apply our CRDs
  over upstream's; adopt the children upstream's controller made (the caller's `adopt`: the
  plugin or the kubectl one-liner); apply the kit (the CompositeControllers); start the hook
  server and Metacontroller.

Each checks before it starts a controller that the other one runs no more. `snapshot` records
every child of a namespace (uid, replicas, generation, labels, owners), for a handover to be
compared before and after.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Final

from hooks import api
from tests.cluster import upstream
from tests.shared import REPO_ROOT
from tools.sandbox import kube, processes
from tools.sandbox.assets import Assets
from tools.sandbox.controlplane import ControlPlane

JsonObject = dict[str, Any]

COMPOSITE_CONTROLLERS: Final = kube.Resource(
    "metacontroller.k8s.io", "v1alpha1", "compositecontrollers", namespaced=False
)
CHILD_RESOURCES: Final = (kube.LWS, kube.SERVICES, kube.SCALERS, kube.REVISIONS)
OUR_CRDS: Final = REPO_ROOT / "crds"
ADOPTION_POLICY: Final = REPO_ROOT / "metacontroller" / "adoption-policy.yaml"
METACONTROLLER: Final = "metacontroller"
HOOKS: Final = "hooks"


class Controller(StrEnum):
    NONE = "none"
    OURS = "ours"
    UPSTREAM = "upstream"


@dataclass(frozen=True, slots=True)
class Child:
    """What a handover must not change about a child, and what it may."""

    uid: str
    replicas: int | None
    generation: int | None
    labels: dict[str, str]
    owners: tuple[str, ...]
    """The uids of its owners."""


Snapshot = dict[tuple[str, str], Child]
"""(resource, name) -> the child."""


def _listed(client: kube.Client, resource: kube.Resource, namespace: str) -> list[JsonObject]:
    """The objects of `resource`; none while the API server does not serve it (upstream's CRDs
    have no DisaggregatedSetRevisions: ours may not be installed yet)."""
    try:
        return client.list(resource, namespace=namespace)
    except kube.ApiError as error:
        if error.code == 404:
            return []
        raise


def snapshot(client: kube.Client, namespace: str) -> Snapshot:
    """Every child of every set of `namespace` (objects with the API's name label)."""
    found: Snapshot = {}
    for resource in CHILD_RESOURCES:
        for obj in _listed(client, resource, namespace):
            metadata = obj["metadata"]
            labels = metadata.get("labels", {})
            if api.LABEL_NAME not in labels:
                continue
            found[(resource.plural, metadata["name"])] = Child(
                uid=metadata["uid"],
                replicas=obj.get("spec", {}).get("replicas"),
                generation=metadata.get("generation"),
                labels=labels,
                owners=tuple(ref["uid"] for ref in metadata.get("ownerReferences", [])),
            )
    return found


@dataclass
class Stack:
    """A bare control plane with upstream's CRDs and Metacontroller's, and whichever controller
    was handed the sets last."""

    plane: ControlPlane
    binary: Path
    running: Controller = Controller.NONE
    started: dict[str, float] = field(default_factory=dict)
    """When each controller was last started (time.monotonic())."""
    kit_applied: list[subprocess.CompletedProcess[str]] = field(default_factory=list)
    """What each `kubectl apply --server-side -k` of the kit printed, in order."""

    @classmethod
    def start(cls, found: Assets, workdir: Path) -> Stack:
        plane = ControlPlane.start_bare(
            found, workdir, crds=upstream.CRDS, kit=REPO_ROOT, metacontroller_crds=True
        )
        try:
            return cls(plane=plane, binary=upstream.find_binary(plane.workdir))
        except BaseException:
            plane.stop()
            raise

    def to_upstream(self) -> None:
        """Hand every set to upstream's controller."""
        if self.running is Controller.OURS:
            self.plane.kubectl("delete", "compositecontrollers", "--all")
            self.plane.kubectl("delete", "--filename", str(ADOPTION_POLICY))
            self.plane.stop_process(METACONTROLLER)
            self.plane.stop_process(HOOKS)
        if self.running is not Controller.UPSTREAM:
            self._apply_crds(*upstream.CRDS)
            self._check_alone(upstream.NAME)
            upstream.start(self.plane, self.binary)
            self.started[upstream.NAME] = time.monotonic()
        self.running = Controller.UPSTREAM

    def to_ours(self, adopt: Callable[[], object]) -> None:
        """Hand every set to Metacontroller and the hooks; `adopt()` runs between our CRDs and
        the kit, while no controller runs."""
        if self.running is Controller.OURS:
            return
        if self.running is Controller.UPSTREAM:
            upstream.stop(self.plane)
        self._apply_crds(*sorted(OUR_CRDS.glob("*.yaml")))
        adopt()
        self._check_alone(METACONTROLLER)
        self.plane.start_hooks()
        # docs/operations.md's step 4, server-side as step 2 (the CRDs) was: one way of applying.
        self.kit_applied.append(self.plane.install_kit(server_side=True))
        self.plane.start_metacontroller()
        self.started[METACONTROLLER] = time.monotonic()
        self.running = Controller.OURS

    def _apply_crds(self, *paths: Path) -> None:
        """Server-side apply, taking the fields over from whoever applied the other CRDs."""
        files = [f"--filename={path}" for path in paths]
        self.plane.kubectl("apply", "--server-side", "--force-conflicts", *files)
        kube.wait_for(
            lambda: all(kube.is_established(crd) for crd in self.plane.client.list(kube.CRDS)),
            timeout=60,
            message="CRDs established",
        )

    def _check_alone(self, starting: str) -> None:
        """Nothing else manages sets: no other controller process, no CompositeController."""
        others = {upstream.NAME, METACONTROLLER} - {starting}
        running = sorted(name for name in others if name in self.plane.running)
        controllers = self.plane.client.list(COMPOSITE_CONTROLLERS)
        if running or (starting == upstream.NAME and controllers):
            raise processes.ProcessError(
                f"{starting} would run beside {running} and {len(controllers)}"
                " CompositeController(s)"
            )
