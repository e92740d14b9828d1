"""What the deploy-kit tests share: the install's names, the objects the base install
renders, and two helpers (copying the install tree out of the repository, and the hook
container of a Deployment)."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from tests.kustomize import Manifest
from tests.shared import REPO_ROOT

DEPLOYMENT_FILE = REPO_ROOT / "metacontroller" / "hooks-deployment.yaml"

NAMESPACE = "disaggregatedset-system"
HOOK_NAME = "disaggregatedset-hooks"

# Kinds that must never carry metadata.namespace. kustomize only knows some of them; the root
# kustomization strips the namespace from the others.
CLUSTER_SCOPED_KINDS = frozenset(
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

BASE_OBJECTS = {
    ("Namespace", NAMESPACE),
    ("CustomResourceDefinition", "disaggregatedsets.disaggregatedset.x-k8s.io"),
    ("CustomResourceDefinition", "disaggregatedsetrolescalers.disaggregatedset.x-k8s.io"),
    ("CustomResourceDefinition", "disaggregatedsetrevisions.disaggregatedset.x-k8s.io"),
    ("ClusterRole", "disaggregatedset-view"),
    ("ClusterRole", "disaggregatedset-edit"),
    ("ClusterRole", "disaggregatedset-adopt"),
    ("ClusterRoleBinding", "disaggregatedset-metacontroller-adopt"),
    ("ValidatingAdmissionPolicy", "disaggregatedset-adoption"),
    ("ValidatingAdmissionPolicyBinding", "disaggregatedset-adoption"),
    ("Deployment", HOOK_NAME),
    ("Service", HOOK_NAME),
    ("PodDisruptionBudget", HOOK_NAME),
    ("NetworkPolicy", HOOK_NAME),
    ("CompositeController", "disaggregatedset-controller"),
    ("CompositeController", "disaggregatedsetrolescaler-controller"),
    ("ValidatingAdmissionPolicy", "disaggregatedset-external-role-replicas"),
    ("ValidatingAdmissionPolicyBinding", "disaggregatedset-external-role-replicas"),
}


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


def _container(deployment: Manifest) -> Manifest:
    containers = deployment["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    container: Manifest = containers[0]
    return container
