"""The CRDs the sandbox installs when no file holds them (`tools.sandbox.thirdparty`).

tests/cluster/test_sandbox.py runs the sandbox on them (the API server accepts them and
Metacontroller runs a set on them); here, what they are.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from hooks.cli import lwsspec
from tools.sandbox import assets, thirdparty


def _found(**crds: Path | None) -> assets.Assets:
    program = Path("/programs")
    return assets.Assets(
        etcd=program,
        kube_apiserver=program,
        kube_controller_manager=program,
        metacontroller=program,
        metacontroller_crds=crds.get("metacontroller"),
        lws_crd=crds.get("lws"),
    )


def test_metacontroller_gets_its_three_kinds_under_their_names() -> None:
    found = {
        crd["metadata"]["name"]: (crd["spec"]["scope"], crd["spec"]["versions"][0]["name"])
        for crd in thirdparty.metacontroller_crds()
    }
    assert found == {
        "compositecontrollers.metacontroller.k8s.io": ("Cluster", "v1alpha1"),
        "decoratorcontrollers.metacontroller.k8s.io": ("Cluster", "v1alpha1"),
        "controllerrevisions.metacontroller.k8s.io": ("Namespaced", "v1alpha1"),
    }
    for crd in thirdparty.metacontroller_crds():  # a *.k8s.io group needs the annotation
        assert crd["metadata"]["annotations"]["api-approved.kubernetes.io"].startswith("unapproved")


def test_the_lws_crd_has_the_spec_schema_the_api_embeds_and_its_subresources() -> None:
    crd = thirdparty.lws_crd()
    [version] = crd["spec"]["versions"]
    assert crd["metadata"]["name"] == "leaderworkersets.leaderworkerset.x-k8s.io"
    assert version["name"] == "v1"
    schema = version["schema"]["openAPIV3Schema"]["properties"]
    assert schema["spec"] == lwsspec.load_lws_spec_schema()
    assert set(schema["status"]["properties"]) >= {"replicas", "readyReplicas", "updatedReplicas"}
    assert version["subresources"]["scale"]["specReplicasPath"] == ".spec.replicas"
    assert "status" in version["subresources"]


def test_files_found_are_used_and_the_others_written(tmp_path: Path) -> None:
    mine = tmp_path / "metacontroller-crds-v1.yaml"
    metacontroller, lws = thirdparty.files(_found(metacontroller=mine), tmp_path)
    assert metacontroller == mine
    assert lws == tmp_path / thirdparty.LWS_FILE
    [written] = [doc for doc in yaml.safe_load_all(lws.read_text()) if doc]
    assert written == thirdparty.lws_crd()
    _, none_written = thirdparty.files(_found(metacontroller=mine, lws=mine), tmp_path / "x")
    assert none_written == mine
