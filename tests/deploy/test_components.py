"""The kit's admission policy and its optional kustomize components. The kit's
ValidatingAdmissionPolicy and its binding (issue 35 item 6: part of the kit, no longer a
component) warn and never deny, stay cluster-scoped, and their CEL (evaluated here with
cel-python, as the API server would) warns exactly for External roles above one replica, in the
words the hooks write into `status.warnings`. metacontroller-scale appends its worker and
client-rate flags to Metacontroller's own install, the same flags the cluster suite runs
Metacontroller with. no-services leaves exactly the `services` child type out of the
DisaggregatedSet CompositeController and changes nothing else, and refuses to build over a kit
whose child types moved. Rendering needs `kubectl` (tests/kustomize.py); the CEL tests do not.
"""

from __future__ import annotations

import copy
import math
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import celpy
import pytest
import yaml
from celpy import celtypes
from celpy.adapter import json_to_cel

from hooks import api
from hooks.core import validation
from tests import builders, kustomize
from tests.deploy.kit import BASE_OBJECTS, _copy_install_tree
from tests.kustomize import Manifest
from tests.shared import REPO_ROOT
from tools import install_yaml

POLICY_FILE = REPO_ROOT / "metacontroller" / "validatingadmissionpolicy.yaml"
POLICY_NAME = "disaggregatedset-external-role-replicas"


# --- the kit's external-replicas warning --------------------------------------------------------


def test_the_kit_warns_on_external_replicas_and_never_denies(
    rendered: list[Manifest],
) -> None:
    policy = kustomize.one(rendered, "ValidatingAdmissionPolicy", POLICY_NAME)
    binding = kustomize.one(rendered, "ValidatingAdmissionPolicyBinding", POLICY_NAME)
    for obj in (policy, binding):
        assert obj["apiVersion"] == "admissionregistration.k8s.io/v1"
        assert "namespace" not in obj["metadata"]  # cluster-scoped, despite `namespace:`
    assert binding["spec"]["policyName"] == POLICY_NAME
    assert binding["spec"]["validationActions"] == ["Warn"]
    assert policy["spec"]["failurePolicy"] == "Ignore"
    [rule] = policy["spec"]["matchConstraints"]["resourceRules"]
    assert rule["apiGroups"] == ["disaggregatedset.x-k8s.io"]
    assert rule["apiVersions"] == ["v1"]
    assert rule["resources"] == ["disaggregatedsets"]
    assert set(rule["operations"]) == {"CREATE", "UPDATE"}


# --- the policy's CEL, evaluated with cel-python ---------------------------------------------


def _cel_join(items: celtypes.ListType, separator: celtypes.StringType | None = None) -> Any:
    """`list.join(sep)` from the Kubernetes CEL strings library, which cel-python lacks."""
    return celtypes.StringType(str(separator or "").join(str(item) for item in items))


def _policy_evaluator() -> Callable[[Manifest], list[str]]:
    """Evaluate the kit's policy like the API server: variables, then each validation.

    Returns the warning messages the object would get (empty when it passes).
    """
    policy = yaml.safe_load(POLICY_FILE.read_text())
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
        activation: dict[str, Any] = {"object": json_to_cel(obj)}
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


@pytest.mark.parametrize("replicas", [(4, 8, 1), (2, 1, 3)], ids=["two-roles", "last-role"])
def test_policy_and_hooks_say_the_same_sentences(replicas: tuple[int, int, int]) -> None:
    """One warning, two implementations: the policy's message is the hooks' `status.warnings`
    joined as the policy joins them."""
    roles = [
        builders.make_role(name, replicas=count, external=True)
        for name, count in zip(("prefill", "decode", "encode"), replicas, strict=True)
    ]
    ds = builders.make_ds(roles=roles)
    spec = api.DisaggregatedSetSpec.model_validate(ds["spec"])

    [message] = _policy_evaluator()(ds)

    assert message == " ".join(validation.warnings(name="llm", spec=spec))


def test_policy_ignores_an_object_without_roles() -> None:
    evaluate = _policy_evaluator()
    assert evaluate({"metadata": {"name": "llm"}, "spec": {}}) == []


# --- the no-services component ----------------------------------------------------------------

NO_SERVICES_DIR = REPO_ROOT / "components" / "no-services"
DS_CONTROLLER = ("CompositeController", "disaggregatedset-controller")


def _kit_with(directory: Path, *components: Path) -> list[Manifest]:
    """The repository root rendered through an overlay outside it that lists `components`."""
    kustomize.require_crds()
    directory.mkdir()
    overlay = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(REPO_ROOT, directory)],
        "components": [os.path.relpath(component, directory) for component in components],
    }
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(overlay))
    return kustomize.render(directory)


def _by_key(objects: list[Manifest]) -> dict[tuple[str, str], Manifest]:
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}


def test_no_services_leaves_only_services_out_of_the_set_controller(tmp_path: Path) -> None:
    plain = _by_key(_kit_with(tmp_path / "plain"))
    lean = _by_key(_kit_with(tmp_path / "lean", NO_SERVICES_DIR))

    assert lean.keys() == plain.keys() == BASE_OBJECTS
    for key in plain.keys() - {DS_CONTROLLER}:
        assert lean[key] == plain[key], key
    before, after = plain[DS_CONTROLLER], lean[DS_CONTROLLER]
    children = before["spec"]["childResources"]
    assert [child["resource"] for child in children] == [
        "leaderworkersets",
        "services",
        "disaggregatedsetrolescalers",
        "disaggregatedsetrevisions",
    ]
    assert after["spec"]["childResources"] == [c for c in children if c["resource"] != "services"]
    assert {**after, "spec": {**after["spec"], "childResources": children}} == before


def test_no_services_refuses_a_kit_whose_child_types_moved(tmp_path: Path) -> None:
    """Its patch removes an entry by position; it first tests that entry is the Services one."""
    kustomize.require_crds()
    _copy_install_tree(tmp_path)
    controllers = tmp_path / "metacontroller" / "compositecontrollers.yaml"
    documents = list(yaml.safe_load_all(controllers.read_text()))
    children = documents[0]["spec"]["childResources"]
    children[0], children[1] = children[1], children[0]
    controllers.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    kustomization = tmp_path / "kustomization.yaml"
    kustomization.write_text(
        kustomization.read_text() + "\ncomponents:\n  - components/no-services\n"
    )
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not on PATH (its built-in kustomize renders the kit)")
    with pytest.raises(install_yaml.GenerationError, match="test failed"):
        install_yaml.kustomize_build(tmp_path)


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


def _with_scale(statefulset: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """Metacontroller's StatefulSet as an overlay including components/metacontroller-scale
    renders it."""
    (tmp_path / "metacontroller.yaml").write_text(yaml.safe_dump(statefulset))
    overlay = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": ["metacontroller.yaml"],
        "components": [os.path.relpath(SCALE_DIR, tmp_path)],
    }
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(overlay))
    [rendered] = kustomize.render(tmp_path)
    return rendered


def test_metacontroller_scale_appends_its_flags_to_metacontrollers_install(
    tmp_path: Path,
) -> None:
    statefulset = _with_scale(METACONTROLLER_STATEFULSET, tmp_path)

    [container] = statefulset["spec"]["template"]["spec"]["containers"]
    flags = dict(arg.split("=", 1) for arg in container["args"])
    assert flags["--zap-log-level"] == "4" and flags["--discovery-interval"] == "20s"
    assert {"--workers", "--client-go-qps", "--client-go-burst"} <= flags.keys()
    assert int(flags["--workers"]) > 5  # Metacontroller's defaults: 5 workers,
    assert float(flags["--client-go-qps"]) > 5  # 5 requests/s,
    assert int(flags["--client-go-burst"]) > 10  # burst 10


def test_the_cluster_suite_runs_metacontroller_with_the_scale_flags() -> None:
    from tools.sandbox import controlplane

    args = [
        operation["value"]
        for patch in yaml.safe_load((SCALE_DIR / "kustomization.yaml").read_text())["patches"]
        if isinstance(operations := yaml.safe_load(patch["patch"]), list)
        for operation in operations
        if operation["path"].endswith("/args/-")
    ]
    assert controlplane.scale_flags(REPO_ROOT) == tuple(args)
    assert len(args) == 3


def _sizing_model() -> tuple[float, list[str]]:
    """docs/operations.md's model at its design point (MB), and the rows it summed."""
    text = (REPO_ROOT / "docs" / "operations.md").read_text()
    section = text.split("\n## Sizing Metacontroller\n", 1)[1].split("\n## ", 1)[0]
    total, rows = 0.0, []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[1].replace(".", "", 1).isdigit():
            total += float(cells[1]) * int(cells[3].replace(",", ""))
            rows.append(cells[0])
    return total, rows


def _mebibytes(quantity: str) -> int:
    assert quantity.endswith(("Mi", "MiB")), quantity
    return int(quantity.removesuffix("B").removesuffix("Mi"))


def test_metacontroller_scale_resources_follow_the_sizing_model(tmp_path: Path) -> None:
    """Request: the model at its design point, rounded up to 128 MiB; limit half again above;
    GOMEMLIMIT 90% of the limit; half a core, no CPU limit (docs/operations.md)."""
    model_mb, rows = _sizing_model()
    assert len(rows) == 3, rows
    statefulset = copy.deepcopy(METACONTROLLER_STATEFULSET)
    [original] = statefulset["spec"]["template"]["spec"]["containers"]
    original["env"] = [{"name": "EXISTING", "value": "kept"}]
    rendered = _with_scale(statefulset, tmp_path)

    [container] = rendered["spec"]["template"]["spec"]["containers"]
    resources = container["resources"]
    request = _mebibytes(resources["requests"]["memory"])
    assert request == math.ceil(model_mb * 1e6 / 2**20 / 128) * 128
    limit = _mebibytes(resources["limits"]["memory"])
    assert limit == request * 3 // 2
    env = {entry["name"]: entry["value"] for entry in container["env"]}
    assert env == {"EXISTING": "kept", "GOMEMLIMIT": f"{limit * 9 // 10}MiB"}
    assert resources["requests"]["cpu"] == "500m"
    assert "cpu" not in resources["limits"]
