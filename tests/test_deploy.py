"""The deploy kit: `kubectl kustomize .`, the external-replicas-warning component, the Dockerfile.

Rendering needs `kubectl` (its built-in kustomize); those tests skip when it is not installed. The
admission policy's CEL is evaluated with cel-python, and the Dockerfile is read as text, so those
tests need neither kubectl nor Docker.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tomllib
from collections.abc import Callable
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import celpy
import pytest
import yaml
from celpy import celtypes

from tests import kustomize
from tools import install_yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
COMPONENT_DIR = REPO_ROOT / "components" / "external-replicas-warning"
DEPLOYMENT_FILE = REPO_ROOT / "metacontroller" / "hooks-deployment.yaml"

NAMESPACE = "disaggregatedset-system"
HOOK_NAME = "disaggregatedset-hooks"
RUN_AS_USER = 65532

# Kinds that must never carry metadata.namespace. kustomize only knows some of them; the root
# kustomization strips the namespace from the others.
CLUSTER_SCOPED_KINDS = frozenset(
    {
        "Namespace",
        "CustomResourceDefinition",
        "ClusterRole",
        "CompositeController",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
)

BASE_OBJECTS = {
    ("Namespace", NAMESPACE),
    ("CustomResourceDefinition", "disaggregatedsets.disaggregatedset.x-k8s.io"),
    ("CustomResourceDefinition", "disaggregatedsetrolescalers.disaggregatedset.x-k8s.io"),
    ("ClusterRole", "disaggregatedset-view"),
    ("ClusterRole", "disaggregatedset-edit"),
    ("Deployment", HOOK_NAME),
    ("Service", HOOK_NAME),
    ("PodDisruptionBudget", HOOK_NAME),
    ("NetworkPolicy", HOOK_NAME),
    ("CompositeController", "disaggregatedset-controller"),
    ("CompositeController", "disaggregatedsetrolescaler-controller"),
}
POLICY_NAME = "disaggregatedset-external-role-replicas"

Manifest = dict[str, Any]


# --- rendering -------------------------------------------------------------------------------


def _copy_install_tree(destination: Path) -> None:
    """Copy kustomization.yaml and everything it names (plus components/) to `destination`."""
    kustomization = yaml.safe_load((REPO_ROOT / "kustomization.yaml").read_text())
    tops = {Path(entry).parts[0] for entry in kustomization["resources"]} | {"components"}
    shutil.copy2(REPO_ROOT / "kustomization.yaml", destination / "kustomization.yaml")
    for top in sorted(tops):
        source = REPO_ROOT / top
        if source.is_dir():
            shutil.copytree(source, destination / top)
        else:
            shutil.copy2(source, destination / top)


@pytest.fixture(scope="module")
def rendered() -> list[Manifest]:
    kustomize.require_crds()
    return kustomize.render(REPO_ROOT)


@pytest.fixture(scope="module")
def rendered_with_component(tmp_path_factory: pytest.TempPathFactory) -> list[Manifest]:
    """The repository root plus the component, built from an overlay outside the repository."""
    kustomize.require_crds()
    overlay = tmp_path_factory.mktemp("overlay")
    # kustomize refuses absolute paths here; relative ones may leave the overlay's directory.
    overlay_doc = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(REPO_ROOT, overlay)],
        "components": [os.path.relpath(COMPONENT_DIR, overlay)],
    }
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(overlay_doc))
    return kustomize.render(overlay)


# --- the base install ------------------------------------------------------------------------


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
            "apiVersion": "apps/v1",
            "resource": "controllerrevisions",
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


def _container(deployment: Manifest) -> Manifest:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    container: Manifest = containers[0]
    return container


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
    from hooks.edge import settings

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


# --- the example overlay -----------------------------------------------------------------------

OVERLAY_DIR = REPO_ROOT / "examples" / "overlay"
OVERLAY_NAMESPACE = "llm-serving-hooks"


@pytest.fixture(scope="module")
def overlay() -> Manifest:
    document: Manifest = yaml.safe_load((OVERLAY_DIR / "kustomization.yaml").read_text())
    return document


@pytest.fixture(scope="module")
def rendered_overlay(tmp_path_factory: pytest.TempPathFactory, overlay: Manifest) -> list[Manifest]:
    """The example overlay copied out of the clone, as its comment says, and built."""
    kustomize.require_crds()
    # The documented layout: the overlay directory next to a clone named disaggregatedset-hooks.
    assert overlay["resources"] == ["../disaggregatedset-hooks"]
    copy = tmp_path_factory.mktemp("user") / "my-install"
    shutil.copytree(OVERLAY_DIR, copy)
    kustomization = {**overlay, "resources": [os.path.relpath(REPO_ROOT, copy)]}
    (copy / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return kustomize.render(copy)


def test_example_overlay_sets_image_namespace_replicas_and_resources(
    overlay: Manifest, rendered_overlay: list[Manifest]
) -> None:
    assert overlay["namespace"] == OVERLAY_NAMESPACE
    assert kustomize.kinds_and_names(rendered_overlay) == (
        BASE_OBJECTS - {("Namespace", NAMESPACE)} | {("Namespace", OVERLAY_NAMESPACE)}
    )
    deployment = kustomize.one(rendered_overlay, "Deployment", HOOK_NAME)
    [image] = overlay["images"]
    assert _container(deployment)["image"] == f"{image['newName']}:{image['newTag']}"
    [replicas] = overlay["replicas"]
    assert deployment["spec"]["replicas"] == replicas["count"] != 2
    [patch] = overlay["patches"]
    [operation] = yaml.safe_load(patch["patch"])
    assert _container(deployment)["resources"] == operation["value"]


def test_example_overlay_moves_the_hook_urls_to_its_namespace(
    rendered_overlay: list[Manifest],
) -> None:
    for obj in rendered_overlay:
        if obj["kind"] == "CompositeController":
            assert "namespace" not in obj["metadata"]
            for hook in obj["spec"]["hooks"].values():
                url = hook["webhook"]["url"]
                assert url.startswith(f"http://{HOOK_NAME}.{OVERLAY_NAMESPACE}.svc/")
        elif obj["kind"] not in CLUSTER_SCOPED_KINDS:
            assert obj["metadata"]["namespace"] == OVERLAY_NAMESPACE


def test_example_overlay_keeps_the_memory_limit_that_holds_the_largest_request(
    rendered: list[Manifest], rendered_overlay: list[Manifest]
) -> None:
    base = _container(kustomize.one(rendered, "Deployment", HOOK_NAME))["resources"]["limits"][
        "memory"
    ]
    deployment = kustomize.one(rendered_overlay, "Deployment", HOOK_NAME)
    assert _container(deployment)["resources"]["limits"]["memory"] == base


# --- install.yaml ------------------------------------------------------------------------------


def test_install_yaml_is_current() -> None:
    kustomize.require_crds()
    try:
        expected = install_yaml.render()
    except install_yaml.KubectlMissing as missing:
        pytest.skip(f"{missing}; install.yaml cannot be rendered")
    assert (REPO_ROOT / "install.yaml").read_text() == expected, (
        "install.yaml is out of date: run `python -m tools.install_yaml` and commit the result"
    )


def test_install_yaml_holds_the_base_objects_and_says_how_to_apply_it() -> None:
    text = (REPO_ROOT / "install.yaml").read_text()
    objects = [doc for doc in yaml.safe_load_all(text) if doc]
    assert kustomize.kinds_and_names(objects) == BASE_OBJECTS
    assert "kubectl apply --server-side -f install.yaml" in text.split("---", 1)[0]


# --- what the README and the kit claim -----------------------------------------------------------


def test_one_kubernetes_version_is_claimed_and_it_is_the_tested_one() -> None:
    from tests.cluster import assets

    tested = assets.KUBERNETES_VERSION
    components = sorted(REPO_ROOT.glob("components/*/kustomization.yaml"))
    for path in [REPO_ROOT / "README.md", REPO_ROOT / "kustomization.yaml", *components]:
        text = path.read_text()
        claims = set(re.findall(r"Kubernetes v?(1\.\d+)", text, flags=re.IGNORECASE))
        assert claims <= {tested}, f"{path.name} claims Kubernetes {claims}, tested {tested}"
        assert not re.search(r"1\.\d+ or later", text), f"{path.name} claims a minimum version"
    assert tested in (REPO_ROOT / "README.md").read_text()


def test_the_license_file_is_the_declared_license() -> None:
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    assert pyproject["project"]["license"] == "Apache-2.0"
    text = (REPO_ROOT / "LICENSE").read_text()
    assert "Apache License" in text.splitlines()[1]
    assert "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text


# --- the external-replicas-warning component ---------------------------------------------------


def test_component_adds_only_the_policy_and_its_binding(
    rendered_with_component: list[Manifest],
) -> None:
    assert kustomize.kinds_and_names(rendered_with_component) == BASE_OBJECTS | {
        ("ValidatingAdmissionPolicy", POLICY_NAME),
        ("ValidatingAdmissionPolicyBinding", POLICY_NAME),
    }


def test_component_policy_warns_and_never_denies(rendered_with_component: list[Manifest]) -> None:
    policy = kustomize.one(rendered_with_component, "ValidatingAdmissionPolicy", POLICY_NAME)
    binding = kustomize.one(
        rendered_with_component, "ValidatingAdmissionPolicyBinding", POLICY_NAME
    )
    for obj in (policy, binding):
        assert obj["apiVersion"] == "admissionregistration.k8s.io/v1"
        assert "namespace" not in obj["metadata"]
    assert binding["spec"]["policyName"] == POLICY_NAME
    assert binding["spec"]["validationActions"] == ["Warn"]
    assert policy["spec"]["failurePolicy"] == "Ignore"
    [rule] = policy["spec"]["matchConstraints"]["resourceRules"]
    assert rule["apiGroups"] == ["disaggregatedset.x-k8s.io"]
    assert rule["apiVersions"] == ["v1"]
    assert rule["resources"] == ["disaggregatedsets"]
    assert set(rule["operations"]) == {"CREATE", "UPDATE"}


def test_component_enabled_in_the_root_kustomization_stays_cluster_scoped(tmp_path: Path) -> None:
    """kustomize takes the policy kinds for namespaced; the root's `namespace:` must not stick."""
    kustomize.require_crds()
    _copy_install_tree(tmp_path)
    kustomization = tmp_path / "kustomization.yaml"
    kustomization.write_text(
        kustomization.read_text() + "\ncomponents:\n  - components/external-replicas-warning\n"
    )

    objects = kustomize.render(tmp_path)

    policy = kustomize.one(objects, "ValidatingAdmissionPolicy", POLICY_NAME)
    binding = kustomize.one(objects, "ValidatingAdmissionPolicyBinding", POLICY_NAME)
    assert "namespace" not in policy["metadata"]
    assert "namespace" not in binding["metadata"]
    assert kustomize.one(objects, "Deployment", HOOK_NAME)["metadata"]["namespace"] == NAMESPACE


def test_component_documents_how_to_enable_it() -> None:
    text = (COMPONENT_DIR / "kustomization.yaml").read_text()
    assert "components/external-replicas-warning" in text
    assert yaml.safe_load(text)["kind"] == "Component"


# --- the policy's CEL, evaluated with cel-python ---------------------------------------------


def _cel_join(items: celtypes.ListType, separator: celtypes.StringType | None = None) -> Any:
    """`list.join(sep)` from the Kubernetes CEL strings library, which cel-python lacks."""
    return celtypes.StringType(str(separator or "").join(str(item) for item in items))


def _policy_evaluator() -> Callable[[Manifest], list[str]]:
    """Evaluate the component's policy like the API server: variables, then each validation.

    Returns the warning messages the object would get (empty when it passes).
    """
    policy = yaml.safe_load((COMPONENT_DIR / "validatingadmissionpolicy.yaml").read_text())
    env = celpy.Environment()
    functions = {"join": _cel_join}

    def program(expression: str) -> Any:
        return env.program(env.compile(expression), functions=functions)

    variables = [(v["name"], program(v["expression"])) for v in policy["spec"]["variables"]]
    validations = [
        (program(v["expression"]), program(v["messageExpression"]))
        for v in policy["spec"]["validations"]
    ]

    def evaluate(obj: Manifest) -> list[str]:
        activation: dict[str, Any] = {"object": celpy.json_to_cel(obj)}
        values: dict[str, Any] = {}
        for name, prog in variables:
            values[name] = prog.evaluate({**activation, "variables": celtypes.MapType(values)})
        activation["variables"] = celtypes.MapType(values)
        messages = []
        for check, message in validations:
            if not bool(check.evaluate(activation)):
                messages.append(str(message.evaluate(activation)))
        return messages

    return evaluate


def _disaggregated_set(*roles: Manifest) -> Manifest:
    """A stored DisaggregatedSet as admission sees it: CRD defaults already applied."""
    return {
        "apiVersion": "disaggregatedset.x-k8s.io/v1",
        "kind": "DisaggregatedSet",
        "metadata": {"name": "llm", "namespace": "default"},
        "spec": {"slices": 1, "roles": list(roles)},
    }


def _role(name: str, *, replicas: int, mode: str | None) -> Manifest:
    role: Manifest = {
        "name": name,
        "spec": {"replicas": replicas, "leaderWorkerTemplate": {"size": 1}},
    }
    if mode is not None:
        role["scaling"] = {"mode": mode}
    return role


@pytest.mark.parametrize(
    ("decode_replicas", "decode_mode", "warns"),
    [
        pytest.param(2, "External", True, id="external-replicas-2-warns"),
        pytest.param(1, "External", False, id="external-replicas-1-silent"),
        pytest.param(5, "Static", False, id="static-replicas-5-silent"),
        pytest.param(5, None, False, id="no-scaling-replicas-5-silent"),
    ],
)
def test_policy_warns_only_for_external_roles_above_one_replica(
    decode_replicas: int, decode_mode: str | None, warns: bool
) -> None:
    evaluate = _policy_evaluator()
    ds = _disaggregated_set(
        _role("prefill", replicas=3, mode="Static"),
        _role("decode", replicas=decode_replicas, mode=decode_mode),
    )

    messages = evaluate(ds)

    assert bool(messages) is warns
    if warns:
        [message] = messages
        assert f'spec.roles[name="decode"].spec.replicas is {decode_replicas}' in message
        assert 'DisaggregatedSetRoleScaler "llm-decode"' in message
        assert "Remove spec.replicas from the role or set it to 1" in message
        assert "prefill" not in message


def test_policy_names_every_offending_role() -> None:
    evaluate = _policy_evaluator()
    ds = _disaggregated_set(
        _role("prefill", replicas=4, mode="External"),
        _role("decode", replicas=8, mode="External"),
        _role("encode", replicas=1, mode="External"),
    )

    [message] = evaluate(ds)

    assert 'spec.roles[name="prefill"].spec.replicas is 4' in message
    assert 'spec.roles[name="decode"].spec.replicas is 8' in message
    assert "encode" not in message


def test_policy_ignores_an_object_without_roles() -> None:
    evaluate = _policy_evaluator()
    assert evaluate({"metadata": {"name": "llm"}, "spec": {}}) == []


# --- Dockerfile and build context ------------------------------------------------------------


def _dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined and comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for raw in (REPO_ROOT / "Dockerfile").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        keyword, _, arguments = (pending + line).strip().partition(" ")
        instructions.append((keyword.upper(), arguments.strip()))
        pending = ""
    return instructions


def _final_stage(instructions: list[tuple[str, str]]) -> list[tuple[str, str]]:
    starts = [i for i, (keyword, _) in enumerate(instructions) if keyword == "FROM"]
    assert len(starts) >= 2, "the Dockerfile must be multi-stage"
    return instructions[starts[-1] :]


def test_dockerfile_runs_python_m_hooks_as_a_numeric_non_root_user() -> None:
    instructions = _dockerfile_instructions()
    final = _final_stage(instructions)
    by_keyword: dict[str, list[str]] = {}
    for keyword, arguments in final:
        by_keyword.setdefault(keyword, []).append(arguments)

    [user] = by_keyword["USER"]
    uid = user.split(":")[0]
    assert uid.isdigit(), "USER must be numeric so runAsNonRoot can verify it"
    assert int(uid) != 0
    assert int(uid) == RUN_AS_USER

    [entrypoint] = by_keyword["ENTRYPOINT"]
    assert json.loads(entrypoint) == ["python", "-m", "hooks"]
    [cmd] = by_keyword["CMD"]
    assert json.loads(cmd) == ["serve", "--bind", "0.0.0.0:8080"]
    assert by_keyword["EXPOSE"] == ["8080"]

    env_text = " ".join(by_keyword["ENV"])
    for variable in ("PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1"):
        assert variable in env_text

    args = " ".join(arguments for keyword, arguments in instructions if keyword == "ARG")
    froms = " ".join(arguments for keyword, arguments in instructions if keyword == "FROM")
    assert "python:3.11-slim" in args + froms


def test_deployment_runs_as_the_dockerfile_user() -> None:
    deployment = yaml.safe_load(DEPLOYMENT_FILE.read_text())
    container = _container(deployment)
    assert container["securityContext"]["runAsUser"] == RUN_AS_USER
    assert "command" not in container, "the image's ENTRYPOINT (python -m hooks) must be kept"


def _dockerignored(path: str, patterns: list[str]) -> bool:
    """Whether Docker leaves `path` out of the build context: the last matching pattern wins."""
    ignored = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        glob = pattern.lstrip("!").rstrip("/")
        if fnmatch(path, glob) or fnmatch(path, f"**/{glob}"):
            ignored = not negated
    return ignored


@pytest.mark.parametrize(
    ("path", "ignored"),
    [
        ("tests", True),
        (".git", True),
        ("bench", True),
        ("examples", True),
        (".venv", True),
        ("pyproject.toml", False),
        ("README.md", False),
        ("hooks", False),
    ],
)
def test_dockerignore_keeps_the_build_context_small(path: str, ignored: bool) -> None:
    lines = (REPO_ROOT / ".dockerignore").read_text().splitlines()
    patterns = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    assert _dockerignored(path, patterns) is ignored


# --- the metacontroller-scale component (for Metacontroller's own install) ---------------------

SCALE_DIR = REPO_ROOT / "components" / "metacontroller-scale"
# Metacontroller v4.17.2's production StatefulSet, reduced to what the patch touches.
METACONTROLLER_STATEFULSET = {
    "apiVersion": "apps/v1",
    "kind": "StatefulSet",
    "metadata": {"name": "metacontroller", "namespace": "metacontroller"},
    "spec": {
        "selector": {"matchLabels": {"app.kubernetes.io/name": "metacontroller"}},
        "serviceName": "",
        "template": {
            "metadata": {"labels": {"app.kubernetes.io/name": "metacontroller"}},
            "spec": {
                "containers": [
                    {
                        "name": "metacontroller",
                        "image": "ghcr.io/metacontroller/metacontroller:v4.17.2",
                        "command": ["/usr/bin/metacontroller"],
                        "args": ["--zap-log-level=4", "--discovery-interval=20s"],
                    }
                ]
            },
        },
    },
}


def test_metacontroller_scale_appends_its_flags_to_metacontrollers_install(
    tmp_path: Path,
) -> None:
    (tmp_path / "metacontroller.yaml").write_text(yaml.safe_dump(METACONTROLLER_STATEFULSET))
    overlay = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": ["metacontroller.yaml"],
        "components": [os.path.relpath(SCALE_DIR, tmp_path)],
    }
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(overlay))

    [statefulset] = kustomize.render(tmp_path)

    [container] = statefulset["spec"]["template"]["spec"]["containers"]
    flags = dict(arg.split("=", 1) for arg in container["args"])
    assert flags["--zap-log-level"] == "4" and flags["--discovery-interval"] == "20s"
    assert {"--workers", "--client-go-qps", "--client-go-burst"} <= flags.keys()
    assert int(flags["--workers"]) > 5  # Metacontroller's defaults: 5 workers,
    assert float(flags["--client-go-qps"]) > 5  # 5 requests/s,
    assert int(flags["--client-go-burst"]) > 10  # burst 10


def test_the_cluster_suite_runs_metacontroller_with_the_scale_flags() -> None:
    from tests.cluster import controlplane

    args = [
        operation["value"]
        for patch in yaml.safe_load((SCALE_DIR / "kustomization.yaml").read_text())["patches"]
        for operation in yaml.safe_load(patch["patch"])
    ]
    assert controlplane.scale_flags() == tuple(args)
    assert len(args) == 3
