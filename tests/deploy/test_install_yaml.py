"""install.yaml, the single-file install: it matches what `python -m tools.install_yaml` renders
now (this needs `kubectl`; without it, see tests/kustomize.py), holds exactly the base install's
objects, and its header says how to apply it.
"""

from __future__ import annotations

import yaml

from tests import kustomize, programs
from tests.deploy.kit import BASE_OBJECTS
from tests.shared import REPO_ROOT
from tools import install_yaml


def test_install_yaml_is_current() -> None:
    kustomize.require_crds()
    try:
        expected = install_yaml.render()
    except install_yaml.KubectlMissing as missing:
        programs.missing(f"{missing}; install.yaml cannot be rendered")
    assert (REPO_ROOT / "install.yaml").read_text() == expected, (
        "install.yaml is out of date: run `python -m tools.install_yaml` and commit the result"
    )


def test_install_yaml_holds_the_base_objects_and_says_how_to_apply_it() -> None:
    text = (REPO_ROOT / "install.yaml").read_text()
    objects = [doc for doc in yaml.safe_load_all(text) if doc]
    assert kustomize.kinds_and_names(objects) == BASE_OBJECTS
    assert "kubectl apply --server-side -f install.yaml" in text.split("---", 1)[0]
