"""What the README and the kit claim: the README, the root kustomization and the components name
one Kubernetes version, the one the cluster suite tests against, and no minimum; and the LICENSE
file is the Apache-2.0 license that pyproject.toml declares.
"""

from __future__ import annotations

import re
import tomllib

from tests.shared import REPO_ROOT


def test_one_kubernetes_version_is_claimed_and_it_is_the_tested_one() -> None:
    from tools.sandbox import assets

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
