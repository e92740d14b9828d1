"""Where each component goes: said the same way everywhere, and rendered there.

Five components build on this kit and go in its kustomization.yaml or an overlay of it; two patch
other installs, kube-state-metrics' (components/kube-state-metrics) and Metacontroller's
(components/metacontroller-scale). The docs (docs/operations.md's table, the README, each
component's header) must say exactly that. Each is rendered where it goes: the kit's five together
in a copy of examples/overlay/ (the overlay a user makes), the other two in stand-ins for their
installs; and listed in this kit instead, those two fail the build or change nothing.

tests/test_observability.py and tests/deploy/ test what each component adds; this module
tests where it goes. Rendering needs `kubectl` (without it, see tests/kustomize.py).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from tests import kustomize, programs
from tests.shared import REPO_ROOT
from tools import install_yaml

COMPONENTS: Final = REPO_ROOT / "components"
OVERLAY_DIR: Final = REPO_ROOT / "examples" / "overlay"
KIT: Final = "this kit's kustomization.yaml or an overlay of it"
KSM_INSTALL: Final = "the kustomization that installs kube-state-metrics"
METACONTROLLER_INSTALL: Final = "the kustomization that installs Metacontroller"
WHERE: Final = {
    "servicemonitor": KIT,
    "prometheus-rules": KIT,
    "grafana-dashboard": KIT,
    "no-services": KIT,
    "kube-state-metrics": KSM_INSTALL,
    "metacontroller-scale": METACONTROLLER_INSTALL,
}
KIT_COMPONENTS: Final = [name for name, where in WHERE.items() if where == KIT]
# What each of the kit's components adds to it, and whether the object is cluster-scoped.
ADDED: Final[dict[str, set[tuple[str, str]]]] = {
    "servicemonitor": {
        ("Service", "disaggregatedset-hooks-metrics"),
        ("ServiceMonitor", "disaggregatedset-hooks"),
    },
    "prometheus-rules": {("PrometheusRule", "disaggregatedset-hooks")},
    "grafana-dashboard": {("ConfigMap", "disaggregatedset-dashboard")},
    "no-services": set(),
}
# What they change of it (tests/deploy/test_components.py says how).
CHANGED: Final = {("CompositeController", "disaggregatedset-controller")}
CLUSTER_SCOPED: Final = frozenset(
    {
        "Namespace",
        "CustomResourceDefinition",
        "ClusterRole",
        "ClusterRoleBinding",
        "CompositeController",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
)

Manifest = dict[str, Any]


def _flat(text: str) -> str:
    """Prose without comment markers, backticks or line breaks, for comparing wording."""
    text = re.sub(r"^\s*# ?", "", text, flags=re.MULTILINE).replace("`", "")
    return " ".join(text.split())


def _header(name: str) -> str:
    text = (COMPONENTS / name / "kustomization.yaml").read_text()
    return _flat(text.split("\napiVersion:", 1)[0])


def _section(path: Path, heading: str) -> str:
    """The text under `heading` up to the next heading of the same or a higher level."""
    text = path.read_text()
    level = heading.split(" ", 1)[0]
    start = text.index(f"\n{heading}\n")
    following = re.compile(rf"^#{{1,{len(level)}}} ", re.MULTILINE)
    end = following.search(text, start + len(heading) + 2)
    return text[start : end.start() if end else len(text)]


def _table(section: str) -> dict[str, list[str]]:
    """Component name -> the other cells of its row, of the markdown tables in `section`."""
    rows = {}
    for line in section.splitlines():
        match = re.fullmatch(r"\| `components/([\w-]+)` \|(.*)\|", line.strip())
        if match:
            rows[match.group(1)] = [_flat(cell) for cell in match.group(2).split(" | ")]
    return rows


# --- the docs --------------------------------------------------------------------------------


def test_every_component_has_one_place() -> None:
    assert {path.name for path in COMPONENTS.iterdir() if path.is_dir()} == set(WHERE)


def test_the_operations_doc_tables_where_each_component_goes() -> None:
    section = _section(
        REPO_ROOT / "docs" / "operations.md", "## Optional components: where each goes"
    )
    assert {name: cells[0] for name, cells in _table(section).items()} == WHERE
    prose = _flat(section)
    assert "kube-state-metrics fails the build" in prose
    assert "metacontroller-scale silently changes nothing" in prose


def test_the_readme_says_where_each_component_goes() -> None:
    readme = REPO_ROOT / "README.md"
    observability = _section(readme, "### Observability (optional components)")
    table = _table(observability)
    assert {name: cells[0] for name, cells in table.items()} == {
        name: WHERE[name]
        for name in (
            "servicemonitor",
            "prometheus-rules",
            "kube-state-metrics",
            "grafana-dashboard",
        )
    }
    paragraphs = {
        name: [_flat(p) for p in readme.read_text().split("\n\n") if f"`components/{name}`" in p]
        for name in ("no-services", "metacontroller-scale")
    }
    assert any(
        "in this kit's kustomization.yaml or in an overlay of it" in p
        for p in paragraphs["no-services"]
    )
    assert any(
        f"in {METACONTROLLER_INSTALL}, not in this kit's or an overlay of it" in p
        for p in paragraphs["metacontroller-scale"]
    )


@pytest.mark.parametrize("name", sorted(WHERE))
def test_the_component_header_says_where_it_goes(name: str) -> None:
    header = _header(name)
    if WHERE[name] == KIT:
        assert (
            "It goes in this kit: enable it by adding, to the kit's kustomization.yaml (the "
            "repository root) or to an overlay of it" in header
        )
    else:
        install = {KSM_INSTALL: "KSM's", METACONTROLLER_INSTALL: "Metacontroller's"}[WHERE[name]]
        assert f"patches {install} own install, not this kit" in header
        assert f"include it from {WHERE[name]}".lower() in header.lower()
        assert "Not in this kit's kustomization.yaml or an overlay of it" in header
    # A component that mentions one of the other installs' components says where that one goes.
    for other in ("kube-state-metrics", "metacontroller-scale"):
        if other != name and f"components/{other}" in header:
            assert "not in this kit" in header, (name, other)


# --- rendered where they go ------------------------------------------------------------------


def _write(directory: Path, document: Manifest) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    return directory


def _components(directory: Path, names: list[str]) -> list[str]:
    return [os.path.relpath(COMPONENTS / name, directory) for name in names]


def _user_overlay(directory: Path, components: list[str]) -> Path:
    """examples/overlay/ copied out of the clone as its header says, plus `components`."""
    kustomize.require_crds()
    shutil.copytree(OVERLAY_DIR, directory)
    document = yaml.safe_load((OVERLAY_DIR / "kustomization.yaml").read_text())
    document["resources"] = [os.path.relpath(REPO_ROOT, directory)]
    if components:
        document["components"] = _components(directory, components)
    return _write(directory, document)


def _by_key(objects: list[Manifest]) -> dict[tuple[str, str], Manifest]:
    keyed = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    assert len(keyed) == len(objects)
    return keyed


def test_the_kit_components_render_together_in_a_copy_of_the_example_overlay(
    tmp_path: Path,
) -> None:
    plain = _by_key(kustomize.render(_user_overlay(tmp_path / "plain", [])))
    enabled = _by_key(kustomize.render(_user_overlay(tmp_path / "my-install", KIT_COMPONENTS)))
    namespace = yaml.safe_load((OVERLAY_DIR / "kustomization.yaml").read_text())["namespace"]

    added = set().union(*ADDED.values())
    assert enabled.keys() == plain.keys() | added
    assert not plain.keys() & added
    for key, obj in plain.items():
        if key not in CHANGED:
            assert enabled[key] == obj, f"{key} changed by the components"
    for key in CHANGED:
        assert enabled[key] != plain[key], f"{key} not changed by the components"
    for kind, name in added:
        metadata = enabled[kind, name]["metadata"]
        if kind in CLUSTER_SCOPED:
            assert "namespace" not in metadata, (kind, name)
        else:
            assert metadata["namespace"] == namespace, (kind, name)
        assert metadata["labels"]["app.kubernetes.io/part-of"] == "disaggregatedset"


# Metacontroller's manifests/production (v4.17.2), reduced to its kinds and the fields the
# component and this test touch: the namespace, RBAC, and the StatefulSet with its flags.
METACONTROLLER_PRODUCTION: Final[list[Manifest]] = [
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "metacontroller"}},
    {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "metacontroller", "namespace": "metacontroller"},
    },
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "metacontroller"},
        "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}],
    },
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "metacontroller"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "metacontroller",
        },
        "subjects": [
            {"kind": "ServiceAccount", "name": "metacontroller", "namespace": "metacontroller"}
        ],
    },
    {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": "metacontroller",
            "namespace": "metacontroller",
            "labels": {"app.kubernetes.io/name": "metacontroller"},
        },
        "spec": {
            "replicas": 1,
            "serviceName": "",
            "selector": {"matchLabels": {"app.kubernetes.io/name": "metacontroller"}},
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": "metacontroller"}},
                "spec": {
                    "serviceAccountName": "metacontroller",
                    "containers": [
                        {
                            "name": "metacontroller",
                            "image": "ghcr.io/metacontroller/metacontroller:v4.17.2",
                            "command": ["/usr/bin/metacontroller"],
                            "args": [
                                "--zap-log-level=4",
                                "--discovery-interval=20s",
                                "--cache-flush-interval=30m",
                                "--leader-election",
                            ],
                        }
                    ],
                },
            },
        },
    },
]

# kube-state-metrics' examples/standard, reduced likewise (with the `args` the component's
# header asks for).
KSM_STANDARD: Final[list[Manifest]] = [
    {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "kube-state-metrics", "namespace": "kube-system"},
    },
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "kube-state-metrics"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}],
    },
    {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "kube-state-metrics"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "kube-state-metrics",
        },
        "subjects": [
            {"kind": "ServiceAccount", "name": "kube-state-metrics", "namespace": "kube-system"}
        ],
    },
    {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "kube-state-metrics", "namespace": "kube-system"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app.kubernetes.io/name": "kube-state-metrics"}},
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": "kube-state-metrics"}},
                "spec": {
                    "serviceAccountName": "kube-state-metrics",
                    "containers": [
                        {
                            "name": "kube-state-metrics",
                            "image": "registry.k8s.io/kube-state-metrics/kube-state-metrics",
                            "args": ["--port=8080"],
                            "ports": [{"name": "http-metrics", "containerPort": 8080}],
                        }
                    ],
                },
            },
        },
    },
    {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "kube-state-metrics", "namespace": "kube-system"},
        "spec": {
            "clusterIP": "None",
            "selector": {"app.kubernetes.io/name": "kube-state-metrics"},
            "ports": [{"name": "http-metrics", "port": 8080, "targetPort": "http-metrics"}],
        },
    },
]


def _install(tmp_path: Path, name: str, objects: list[Manifest]) -> Path:
    """A local stand-in for another project's install: its own directory and kustomization."""
    directory = tmp_path / name
    directory.mkdir()
    (directory / "manifests.yaml").write_text(yaml.safe_dump_all(objects, sort_keys=False))
    return _write(
        directory,
        {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": ["manifests.yaml"],
        },
    )


def _including(directory: Path, install: Path, component: str) -> Path:
    """The kustomization a user writes: the other install as its resource, plus the component."""
    return _write(
        directory,
        {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": [os.path.relpath(install, directory)],
            "components": _components(directory, [component]),
        },
    )


def test_metacontroller_scale_changes_only_the_container_of_metacontrollers_install(
    tmp_path: Path,
) -> None:
    install = _install(tmp_path, "metacontroller-production", METACONTROLLER_PRODUCTION)
    before = _by_key(kustomize.render(install))
    after = _by_key(
        kustomize.render(_including(tmp_path / "metacontroller", install, "metacontroller-scale"))
    )

    assert after.keys() == before.keys()
    key = ("StatefulSet", "metacontroller")
    for other in before.keys() - {key}:
        assert after[other] == before[other], other
    [old] = before[key]["spec"]["template"]["spec"]["containers"]
    [new] = after[key]["spec"]["template"]["spec"]["containers"]
    assert set(new) - set(old) == {"resources", "env"}
    assert {**new, "args": old["args"], "resources": None, "env": None} == {
        **old,
        "resources": None,
        "env": None,
    }
    assert new["args"][: len(old["args"])] == old["args"]
    assert [arg.split("=")[0] for arg in new["args"][len(old["args"]) :]] == [
        "--workers",
        "--client-go-qps",
        "--client-go-burst",
    ]
    assert after[key]["metadata"]["namespace"] == "metacontroller"


def test_kube_state_metrics_adds_its_objects_to_ksms_install_in_its_namespace(
    tmp_path: Path,
) -> None:
    install = _install(tmp_path, "ksm-standard", KSM_STANDARD)
    before = _by_key(kustomize.render(install))
    after = _by_key(kustomize.render(_including(tmp_path / "ksm", install, "kube-state-metrics")))

    own = "disaggregatedset-kube-state-metrics"
    assert after.keys() == before.keys() | {
        ("ConfigMap", own),
        ("ClusterRole", own),
        ("ClusterRoleBinding", own),
    }
    deployment = ("Deployment", "kube-state-metrics")
    for other in before.keys() - {deployment}:
        assert after[other] == before[other], other
    assert after["ConfigMap", own]["metadata"]["namespace"] == "kube-system"
    assert after["ClusterRoleBinding", own]["subjects"] == [
        {"kind": "ServiceAccount", "name": "kube-state-metrics", "namespace": "kube-system"}
    ]
    pod = after[deployment]["spec"]["template"]["spec"]
    assert {v["name"] for v in pod["volumes"]} == {own}
    assert pod["containers"][0]["args"][0] == "--port=8080"


def _kit_overlay_with(directory: Path, component: str) -> Path:
    """The smallest overlay of the kit, listing `component` (or nothing, when empty)."""
    kustomize.require_crds()
    document: Manifest = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(REPO_ROOT, directory)],
    }
    if component:
        document["components"] = _components(directory, [component])
    return _write(directory, document)


def test_listed_in_the_kit_kube_state_metrics_fails_the_build(tmp_path: Path) -> None:
    overlay = _kit_overlay_with(tmp_path / "wrong", "kube-state-metrics")
    if shutil.which("kubectl") is None:
        programs.missing("kubectl is not on PATH (its built-in kustomize renders the kit)")
    with pytest.raises(install_yaml.GenerationError, match="nothing selected by Deployment"):
        install_yaml.kustomize_build(overlay)


def test_listed_in_the_kit_metacontroller_scale_changes_nothing(tmp_path: Path) -> None:
    plain = kustomize.render(_kit_overlay_with(tmp_path / "plain", ""))
    wrong = kustomize.render(_kit_overlay_with(tmp_path / "wrong", "metacontroller-scale"))
    assert wrong == plain
    assert not [o for o in wrong if o["kind"] == "StatefulSet"]
