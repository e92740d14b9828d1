"""The example manifests parse, pass validation, and their autoscalers target real scalers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from hooks import api
from hooks.core import naming, validation
from hooks.edge import envelope, manifests

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
PATHS = sorted(EXAMPLES.glob("*.yaml"))


def documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_example_sets_are_valid(path: Path) -> None:
    for document in documents(path):
        if document["kind"] != api.DS_KIND:
            continue
        parent = envelope.parse_parent(manifests.stored(document))
        assert parent.spec is not None, parent.spec_violations
        assert validation.check(name=parent.name, spec=parent.spec) == ()


def scaler_names() -> set[str]:
    """The scalers the External roles of every example set get."""
    names = set()
    for path in PATHS:
        for document in documents(path):
            if document["kind"] != api.DS_KIND:
                continue
            for role in document["spec"]["roles"]:
                if role.get("scaling", {}).get("mode") == "External":
                    names.add(
                        naming.scaler_name(set_name=document["metadata"]["name"], role=role["name"])
                    )
    return names


@pytest.mark.parametrize(
    ("file", "kind"),
    [("external-hpa.yaml", "HorizontalPodAutoscaler"), ("external-keda.yaml", "ScaledObject")],
)
def test_autoscalers_target_the_scaler_of_an_external_role(file: str, kind: str) -> None:
    (autoscaler,) = [d for d in documents(EXAMPLES / file) if d["kind"] == kind]
    target = autoscaler["spec"]["scaleTargetRef"]
    assert target["apiVersion"] == api.API_VERSION
    assert target["kind"] == api.SCALER_KIND
    assert target["name"] in scaler_names()
