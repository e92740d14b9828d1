"""The example manifests: each is complete on its own (a set, and its autoscaler when it has
one), says which CRDs it needs, passes validation, and its autoscaler targets its own scaler."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from hooks import api
from hooks.api import naming
from hooks.cli import manifests
from hooks.core import validation
from hooks.gocompat import revision
from hooks.wire import parents

EXAMPLES: Final = Path(__file__).resolve().parents[1] / "examples"
PATHS: Final = sorted(EXAMPLES.glob("*.yaml"))
# API groups every cluster has: the core group and the built-in autoscaling group.
BUILT_IN_GROUPS: Final = {"", "autoscaling"}
AUTOSCALER_KINDS: Final = {"HorizontalPodAutoscaler", "ScaledObject"}
# The README's set, whose External role its walk-through scales with `kubectl scale`.
SCALED_BY_HAND: Final = {"llm.yaml", "llm-v2.yaml"}
# Next versions of another example's set, which the README's walk-throughs apply over it.
NEXT_VERSIONS: Final = sorted(EXAMPLES.glob("*-v2.yaml"))


def documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def needs_comment(path: Path) -> str:
    """The "# Needs: ..." paragraph at the top of an example, as one line."""
    lines = path.read_text().splitlines()
    assert lines[0].startswith("# Needs: "), f"{path.name} does not start with '# Needs:'"
    paragraph = []
    for line in lines:
        if line.strip() == "#" or not line.startswith("#"):
            break
        paragraph.append(line.lstrip("# "))
    return " ".join(paragraph)


def test_there_are_examples() -> None:
    assert len(PATHS) >= 5


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_each_example_holds_one_valid_set(path: Path) -> None:
    sets = [document for document in documents(path) if document["kind"] == api.DS_KIND]
    assert len(sets) == 1
    parent = parents.parse_parent(manifests.stored(sets[0]))
    assert parent.spec is not None, parent.spec_violations
    assert validation.check(name=parent.name, spec=parent.spec) == ()
    assert manifests.check(sets[0]).problems == ()


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_each_example_names_the_crds_it_needs(path: Path) -> None:
    needs = needs_comment(path)
    assert "kubectl apply -k ." in needs
    assert "Metacontroller" in needs and "LeaderWorkerSet" in needs
    for document in documents(path):
        group = document["apiVersion"].rpartition("/")[0]
        if group not in BUILT_IN_GROUPS and group != api.GROUP:
            assert group in needs, f"{path.name} needs {group} but does not say so"


def _set_of(path: Path) -> dict[str, Any]:
    [found] = [document for document in documents(path) if document["kind"] == api.DS_KIND]
    return found


def test_set_names_differ_so_examples_apply_together() -> None:
    names = [_set_of(path)["metadata"]["name"] for path in PATHS if path not in NEXT_VERSIONS]
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("path", NEXT_VERSIONS, ids=lambda p: p.name)
def test_a_next_version_is_a_new_revision_of_the_same_set(path: Path) -> None:
    """`X-v2.yaml`, applied over `X.yaml` (the README's walk-throughs), changes its set's
    templates, so it starts a rollout of the same set."""
    base = EXAMPLES / path.name.replace("-v2.yaml", ".yaml")
    before, after = (manifests.stored(_set_of(file)) for file in (base, path))
    old, new = (parents.parse_parent(stored).spec for stored in (before, after))

    assert before["metadata"]["name"] == after["metadata"]["name"]
    assert old is not None and new is not None
    assert revision.of_spec(old) != revision.of_spec(new)


@pytest.mark.parametrize("path", PATHS, ids=lambda p: p.name)
def test_autoscalers_target_the_scaler_of_an_external_role_of_the_same_file(path: Path) -> None:
    docs = documents(path)
    scalers = {
        naming.scaler_name(set_name=document["metadata"]["name"], role=role["name"])
        for document in docs
        if document["kind"] == api.DS_KIND
        for role in document["spec"]["roles"]
        if role.get("scaling", {}).get("mode") == "External"
    }
    autoscalers = [document for document in docs if document["kind"] in AUTOSCALER_KINDS]
    assert len(autoscalers) == (0 if path.name in SCALED_BY_HAND else len(scalers))
    for autoscaler in autoscalers:
        target = autoscaler["spec"]["scaleTargetRef"]
        assert target["apiVersion"] == api.API_VERSION
        assert target["kind"] == api.SCALER_KIND
        assert target["name"] in scalers
