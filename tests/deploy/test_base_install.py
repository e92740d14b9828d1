"""The base install, `kubectl kustomize .` of the repository root: exactly the expected objects,
in the right namespaces and with the common labels; the three CRDs; the two CompositeControllers
wired to the hook Service; the hook Deployment (replicas, probes, security context, writable
/tmp, spread across nodes), its Service, PodDisruptionBudget and NetworkPolicy; a memory limit that
holds the worst accepted request; and the image set by one `images:` entry. Rendering needs
`kubectl` (its built-in kustomize; without it, see tests/kustomize.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests import kustomize
from tests.deploy.kit import (
    BASE_OBJECTS,
    CLUSTER_SCOPED_KINDS,
    DEPLOYMENT_FILE,
    HOOK_NAME,
    NAMESPACE,
    _container,
    _copy_install_tree,
)
from tests.kustomize import Manifest
from tests.shared import REPO_ROOT


def test_base_renders_exactly_the_install_objects(rendered: list[Manifest]) -> None:
    assert kustomize.kinds_and_names(rendered) == BASE_OBJECTS
    assert len(rendered) == len(BASE_OBJECTS)


def test_namespaced_objects_are_in_the_install_namespace_and_cluster_scoped_ones_in_none(
    rendered: list[Manifest],
) -> None:
    for obj in rendered:
        where = f"{obj['kind']} {obj['metadata']['name']}"
        if obj["kind"] in CLUSTER_SCOPED_KINDS:
            assert "namespace" not in obj["metadata"], where
        else:
            assert obj["metadata"].get("namespace") == NAMESPACE, where


def test_common_labels_stay_out_of_selectors(rendered: list[Manifest]) -> None:
    for obj in rendered:
        labels = obj["metadata"].get("labels", {})
        assert labels.get("app.kubernetes.io/part-of") == "disaggregatedset", obj["kind"]
    deployment = kustomize.one(rendered, "Deployment", HOOK_NAME)
    assert "app.kubernetes.io/part-of" not in deployment["spec"]["selector"]["matchLabels"]


def test_both_crds_are_installed(rendered: list[Manifest]) -> None:
    for plural, kind in (
        ("disaggregatedsets", "DisaggregatedSet"),
        ("disaggregatedsetrolescalers", "DisaggregatedSetRoleScaler"),
    ):
        crd = kustomize.one(
            rendered, "CustomResourceDefinition", f"{plural}.disaggregatedset.x-k8s.io"
        )
        assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
        assert crd["spec"]["group"] == "disaggregatedset.x-k8s.io"
        assert crd["spec"]["scope"] == "Namespaced"
        assert crd["spec"]["names"]["plural"] == plural
        assert crd["spec"]["names"]["kind"] == kind
        versions = {v["name"]: v for v in crd["spec"]["versions"]}
        assert versions["v1"]["served"] is True
        assert versions["v1"]["storage"] is True


def _hook_base_url(rendered: list[Manifest]) -> str:
    """http://<service>.<namespace>.svc, the Service's in-cluster DNS name on its port 80."""
    service = kustomize.one(rendered, "Service", HOOK_NAME)
    assert [p["port"] for p in service["spec"]["ports"]] == [80]
    return f"http://{service['metadata']['name']}.{service['metadata']['namespace']}.svc"


def _assert_hooks(controller: Manifest, base_url: str, paths: dict[str, str]) -> None:
    hooks = controller["spec"]["hooks"]
    assert set(hooks) == set(paths)
    for hook, path in paths.items():
        assert hooks[hook]["webhook"]["url"] == base_url + path
        assert hooks[hook].get("version", "v1") in {"v1", "v2"}
        timeout = hooks[hook]["webhook"].get("timeout", "10s")
        assert timeout.endswith("s")
        assert 1 <= int(timeout[:-1]) <= 30


def test_disaggregatedset_controller_is_wired_as_spec_section_9(rendered: list[Manifest]) -> None:
    controller = kustomize.one(rendered, "CompositeController", "disaggregatedset-controller")
    assert controller["apiVersion"] == "metacontroller.k8s.io/v1alpha1"
    spec = controller["spec"]
    assert spec["parentResource"] == {
        "apiVersion": "disaggregatedset.x-k8s.io/v1",
        "resource": "disaggregatedsets",
    }
    assert spec["generateSelector"] is True
    # Every child type InPlace: the default, OnDelete, would never update an existing child.
    assert spec["childResources"] == [
        {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "resource": "leaderworkersets",
            "updateStrategy": {"method": "InPlace"},
        },
        {"apiVersion": "v1", "resource": "services", "updateStrategy": {"method": "InPlace"}},
        {
            "apiVersion": "disaggregatedset.x-k8s.io/v1",
            "resource": "disaggregatedsetrolescalers",
            "updateStrategy": {"method": "InPlace"},
        },
        # The revision history: its number and change-cause are updated in place.
        {
            "apiVersion": "disaggregatedset.x-k8s.io/v1",
            "resource": "disaggregatedsetrevisions",
            "updateStrategy": {"method": "InPlace"},
        },
    ]
    _assert_hooks(
        controller, _hook_base_url(rendered), {"sync": "/sync", "customize": "/customize"}
    )
    assert "finalize" not in spec["hooks"]


def test_rolescaler_controller_is_wired_as_spec_section_9(rendered: list[Manifest]) -> None:
    controller = kustomize.one(
        rendered, "CompositeController", "disaggregatedsetrolescaler-controller"
    )
    spec = controller["spec"]
    assert spec["parentResource"] == {
        "apiVersion": "disaggregatedset.x-k8s.io/v1",
        "resource": "disaggregatedsetrolescalers",
    }
    assert spec["generateSelector"] is True
    assert not spec.get("childResources")
    _assert_hooks(
        controller,
        _hook_base_url(rendered),
        {"sync": "/rolescaler/sync", "customize": "/rolescaler/customize"},
    )


def test_changing_the_namespace_moves_the_hook_urls_along(tmp_path: Path) -> None:
    kustomize.require_crds()
    _copy_install_tree(tmp_path)
    kustomization = tmp_path / "kustomization.yaml"
    text = kustomization.read_text()
    assert f"\nnamespace: {NAMESPACE}\n" in text
    kustomization.write_text(text.replace(f"\nnamespace: {NAMESPACE}\n", "\nnamespace: llm-ops\n"))

    objects = kustomize.render(tmp_path)

    assert ("Namespace", "llm-ops") in kustomize.kinds_and_names(objects)
    for obj in objects:
        if obj["kind"] == "CompositeController":
            assert "namespace" not in obj["metadata"]
            for hook in obj["spec"]["hooks"].values():
                assert hook["webhook"]["url"].startswith(f"http://{HOOK_NAME}.llm-ops.svc/")
        elif obj["kind"] not in CLUSTER_SCOPED_KINDS:
            assert obj["metadata"]["namespace"] == "llm-ops"


def test_hook_deployment_runs_two_probed_replicas(rendered: list[Manifest]) -> None:
    deployment = kustomize.one(rendered, "Deployment", HOOK_NAME)
    assert deployment["spec"]["replicas"] >= 2
    container = _container(deployment)
    assert container["args"] == [
        "serve",
        "--bind",
        "0.0.0.0:8080",
        "--metrics-bind",
        "0.0.0.0:9090",
    ]
    assert container["ports"] == [
        {"name": "http", "containerPort": 8080, "protocol": "TCP"},
        {"name": "metrics", "containerPort": 9090, "protocol": "TCP"},
    ]
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "http"}, probe
    for bound in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(container["resources"][bound]), bound
    assert container["image"].startswith(HOOK_NAME)


def test_hook_deployment_is_locked_down(rendered: list[Manifest]) -> None:
    pod = kustomize.one(rendered, "Deployment", HOOK_NAME)["spec"]["template"]["spec"]
    container = _container(kustomize.one(rendered, "Deployment", HOOK_NAME))
    pod_sc, sc = pod.get("securityContext", {}), container["securityContext"]

    def effective(key: str) -> Any:
        return sc.get(key, pod_sc.get(key))

    assert pod["automountServiceAccountToken"] is False
    assert effective("runAsNonRoot") is True
    assert isinstance(effective("runAsUser"), int)
    assert effective("runAsUser") > 0
    assert effective("seccompProfile") == {"type": "RuntimeDefault"}
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert not sc.get("capabilities", {}).get("add")
    assert not sc.get("privileged", False)


def test_hook_deployment_writes_only_to_an_emptydir_at_tmp(rendered: list[Manifest]) -> None:
    pod = kustomize.one(rendered, "Deployment", HOOK_NAME)["spec"]["template"]["spec"]
    container = _container(kustomize.one(rendered, "Deployment", HOOK_NAME))
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert set(mounts) == {"/tmp"}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]
    env = {e["name"]: e.get("value") for e in container.get("env", [])}
    assert env.get("TMPDIR", "/tmp") == "/tmp"


def test_hook_pods_are_spread_across_nodes(rendered: list[Manifest]) -> None:
    deployment = kustomize.one(rendered, "Deployment", HOOK_NAME)
    pod = deployment["spec"]["template"]["spec"]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    spread = [
        c
        for c in pod.get("topologySpreadConstraints", [])
        if c["topologyKey"] == "kubernetes.io/hostname"
    ]
    anti = pod.get("affinity", {}).get("podAntiAffinity")
    assert spread or anti, "no topology spread or anti-affinity across nodes"
    for constraint in spread:
        selector = constraint["labelSelector"]["matchLabels"]
        assert selector.items() <= pod_labels.items()


def test_service_and_pdb_select_the_hook_pods(rendered: list[Manifest]) -> None:
    deployment = kustomize.one(rendered, "Deployment", HOOK_NAME)
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= pod_labels.items()
    container_ports = {p["name"]: p["containerPort"] for p in _container(deployment)["ports"]}

    service = kustomize.one(rendered, "Service", HOOK_NAME)
    assert service["spec"].get("type", "ClusterIP") == "ClusterIP"
    assert service["spec"]["selector"] == selector
    [port] = service["spec"]["ports"]
    assert port["port"] == 80
    assert port["targetPort"] in container_ports or port["targetPort"] in container_ports.values()

    pdb = kustomize.one(rendered, "PodDisruptionBudget", HOOK_NAME)
    assert pdb["apiVersion"] == "policy/v1"
    assert pdb["spec"]["selector"] == {"matchLabels": selector}
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["minAvailable"] < deployment["spec"]["replicas"]


def test_network_policy_admits_metacontroller_to_hooks_and_prometheus_to_metrics(
    rendered: list[Manifest],
) -> None:
    deployment = kustomize.one(rendered, "Deployment", HOOK_NAME)
    policy = kustomize.one(rendered, "NetworkPolicy", HOOK_NAME)["spec"]
    assert policy["podSelector"] == deployment["spec"]["selector"]
    assert policy["policyTypes"] == ["Ingress"]
    admitted = {
        (
            rule["from"][0]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
            rule["from"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/name"],
        ): [port["port"] for port in rule["ports"]]
        for rule in policy["ingress"]
    }
    assert admitted == {
        ("metacontroller", "metacontroller"): ["http"],
        ("monitoring", "prometheus"): ["metrics"],
    }
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    container_ports = {p["name"]: p["containerPort"] for p in _container(deployment)["ports"]}
    assert annotations["prometheus.io/port"] == str(container_ports["metrics"])


def test_memory_limit_covers_the_worst_accepted_request(rendered: list[Manifest]) -> None:
    """The limit holds everything the server may hold at once (docs/operations.md, "Sizing"):
    the child answering a large body (limited to --max-parse-bytes by the kernel), the bodies
    held complete or arriving, a small body's parse in the worker, the child's answer while the
    worker sends it, and the processes (arbiter, worker, the worker's pages the child copies:
    measured under 256 MiB together)."""
    from hooks.server import settings

    container = _container(kustomize.one(rendered, "Deployment", HOOK_NAME))
    limit = container["resources"]["limits"]["memory"]
    assert limit.endswith("Mi")
    limits = settings.Limits()
    worst = (
        limits.max_parse_bytes
        + limits.buffered_bytes
        + settings.INLINE_PEAK_PER_BYTE * limits.isolate_above_bytes
        + limits.max_body_bytes
        + 256 * settings.MIB
    )
    assert int(limit[:-2]) * settings.MIB >= worst
    assert "--workers" not in container["args"]  # one worker, which the sizing assumes


def test_the_image_is_set_by_one_images_entry(rendered: list[Manifest]) -> None:
    """Users change the image in kustomization.yaml's `images:` (no `kustomize edit`)."""
    kustomization = yaml.safe_load((REPO_ROOT / "kustomization.yaml").read_text())
    [image] = [entry for entry in kustomization["images"] if entry["name"] == HOOK_NAME]
    assert set(image) == {"name", "newName", "newTag"}
    deployment = yaml.safe_load(DEPLOYMENT_FILE.read_text())
    assert _container(deployment)["image"] == HOOK_NAME
    rendered_image = _container(kustomize.one(rendered, "Deployment", HOOK_NAME))["image"]
    assert rendered_image == f"{image['newName']}:{image['newTag']}"
