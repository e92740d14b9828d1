"""The kit on a real API server: the CRDs install with both kinds of apply, the kit's objects are
accepted, and `kubectl get` prints the printer columns."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from hooks import api
from hooks.api import rules
from hooks.cli import crdgen
from tests.cluster import sets
from tests.shared import REPO_ROOT
from tools.sandbox import assets, controlplane, kube
from tools.sandbox.controlplane import ControlPlane

JsonObject = dict[str, Any]

CRD_FILES = sorted((REPO_ROOT / "crds").glob("*.yaml"))


def _renamed_group(crd: JsonObject, group: str) -> JsonObject:
    """The CRD served under another API group, so it installs beside the kit's own copy."""
    copy: JsonObject = json.loads(json.dumps(crd))
    copy["spec"]["group"] = group
    copy["metadata"]["name"] = f"{copy['spec']['names']['plural']}.{group}"
    return copy


@pytest.mark.parametrize("server_side", [False, True], ids=["client-side", "server-side"])
def test_crds_install_fresh_with_kubectl_apply(
    control_plane: ControlPlane, tmp_path: Path, server_side: bool
) -> None:
    """`kubectl apply [--server-side] -f crds/` creates every CRD: every CEL rule compiles and
    fits the API server's cost budget."""
    group = f"{'ssa' if server_side else 'csa'}.{api.GROUP}"
    renamed = [_renamed_group(yaml.safe_load(path.read_text()), group) for path in CRD_FILES]
    directory = tmp_path / "crds"
    directory.mkdir()
    for path, crd in zip(CRD_FILES, renamed, strict=True):
        (directory / path.name).write_text(yaml.safe_dump(crd))
    arguments = ["apply", "-f", str(directory)] + (["--server-side"] if server_side else [])
    result = control_plane.kubectl(*arguments, check=False)
    assert result.returncode == 0, result.stderr
    names = [crd["metadata"]["name"] for crd in renamed]
    try:
        for name in names:
            kube.wait_for(
                lambda name=name: control_plane.client.get(kube.CRDS, name),
                until=kube.is_established,
                timeout=sets.WAIT_SECONDS,
                message=f"{name} Established",
            )
    finally:
        control_plane.kubectl("delete", "-f", str(directory), "--wait=false")


@pytest.mark.parametrize("server_side", [False, True], ids=["client-side", "server-side"])
def test_installed_crds_accept_a_reapply(control_plane: ControlPlane, server_side: bool) -> None:
    """Upgrading in place: `kubectl apply [--server-side] -f crds/` over the installed kit."""
    arguments = ["apply", "-f", str(REPO_ROOT / "crds")] + (
        ["--server-side"] if server_side else []
    )
    result = control_plane.kubectl(*arguments, check=False)
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == len(CRD_FILES)


def test_installed_crds_are_the_generated_ones(client: kube.Client) -> None:
    for name, generated in crdgen.build_crds().items():
        crd = client.get(kube.CRDS, generated["metadata"]["name"])
        assert kube.is_established(crd), name
        (served,) = crd["spec"]["versions"]
        (version,) = generated["spec"]["versions"]
        assert served["additionalPrinterColumns"] == version["additionalPrinterColumns"]
        assert served.get("subresources") == version.get("subresources")
        served_rules = _rules(served["schema"]["openAPIV3Schema"])
        assert served_rules == _rules(version["schema"]["openAPIV3Schema"])
        expected = {crdgen.DS_FILE: rules.CEL_RULES, crdgen.REVISION_FILE: rules.RECORD_CEL_RULES}
        assert len(served_rules) == len(expected.get(name, ()))


def _rules(schema: JsonObject) -> list[JsonObject]:
    """Every x-kubernetes-validations entry of a schema, sorted by rule text."""
    found = list(schema.get("x-kubernetes-validations", []))
    for child in schema.get("properties", {}).values():
        found += _rules(child)
    if isinstance(schema.get("items"), dict):
        found += _rules(schema["items"])
    return sorted(found, key=lambda entry: str(entry["rule"]))


def test_kit_objects_exist_with_hooks_pointed_at_the_server(control_plane: ControlPlane) -> None:
    client = control_plane.client
    controllers = client.request("GET", "/apis/metacontroller.k8s.io/v1alpha1/compositecontrollers")
    urls = {
        item["metadata"]["name"]: {
            hook: item["spec"]["hooks"][hook]["webhook"]["url"] for hook in ("sync", "customize")
        }
        for item in controllers["items"]
    }
    hook = control_plane.hook_url
    assert urls == {
        "disaggregatedset-controller": {"sync": f"{hook}/sync", "customize": f"{hook}/customize"},
        "disaggregatedsetrolescaler-controller": {
            "sync": f"{hook}/rolescaler/sync",
            "customize": f"{hook}/rolescaler/customize",
        },
    }
    namespace = "disaggregatedset-system"
    for path in (
        f"/apis/apps/v1/namespaces/{namespace}/deployments/disaggregatedset-hooks",
        f"/api/v1/namespaces/{namespace}/services/disaggregatedset-hooks",
        f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/disaggregatedset-hooks",
    ):
        assert client.request("GET", path)["metadata"]["name"] == "disaggregatedset-hooks"


@pytest.mark.usefixtures("lws_controller")
def test_printer_columns(control_plane: ControlPlane, namespace: str) -> None:
    sets.apply_set(control_plane, sets.small_set(namespace, external="prefill"))
    ds = sets.wait_available(control_plane.client, namespace, "llm")
    table = control_plane.kubectl("get", "disaggregatedsets", "-n", namespace).stdout
    header, row = table.splitlines()
    # Every column in every state: tests/cluster/test_get_columns.py.
    assert header.split() == [
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
    # Not Degraded: its cell is empty, so the generations come next.
    revision = ds["status"]["revision"]
    assert row.split()[:8] == ["llm", "1", "2/2", revision, "True", "AllRolesReady", "1", "1"]
    table = control_plane.kubectl("get", "dsrs", "-n", namespace).stdout
    header, row = table.splitlines()
    assert header.split() == ["NAME", "DESIRED", "CURRENT", "AGE"]
    assert row.split()[:3] == ["llm-prefill", "1", "1"]


def test_install_yaml_is_accepted_with_server_side_apply(control_plane: ControlPlane) -> None:
    """The single-file install (`kubectl apply --server-side -f install.yaml`), over the kit the
    session installed from `kubectl kustomize .`: every object is accepted. A server-side dry
    run, as the session's hook URLs point at the local server and must stay so."""
    result = control_plane.kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "--dry-run=server",
        "-f",
        str(REPO_ROOT / "install.yaml"),
        check=False,
    )
    assert result.returncode == 0, result.stderr
    documents = [doc for doc in yaml.safe_load_all((REPO_ROOT / "install.yaml").read_text()) if doc]
    applied = [line for line in result.stdout.splitlines() if "serverside-applied" in line]
    assert len(applied) == len(documents), result.stdout


def test_the_server_runs_the_kubernetes_version_the_readme_claims(
    control_plane: ControlPlane,
) -> None:
    version = json.loads(control_plane.kubectl("version", "-o", "json").stdout)["serverVersion"]
    assert f"{version['major']}.{version['minor']}" == assets.KUBERNETES_VERSION


def test_metacontroller_runs_with_the_scale_components_flags(control_plane: ControlPlane) -> None:
    """Metacontroller v4.17.2 accepts the flags of components/metacontroller-scale: the session
    runs it with them, and every other cluster test depends on it."""
    metacontroller = control_plane.running["metacontroller"]
    arguments = Path(f"/proc/{metacontroller.pid}/cmdline").read_bytes().decode().split("\0")
    assert set(controlplane.scale_flags(REPO_ROOT)) <= set(arguments)
    assert metacontroller.running()
