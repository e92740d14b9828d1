"""Releases: this project's versions and CHANGELOG.md, and the LWS releases a cluster can move to.

CHANGELOG.md says the scheme: its top section is pyproject.toml's version, the versions decrease
downwards, each has its upgrade notes, and every image tag the kit and the docs name is that
version (issue 35 item 9).

The LeaderWorkerSet releases are facts read from kubernetes-sigs/lws: v0.9.0's DisaggregatedSet
has no slices, placement, External scaling or scaler and names its LWS `<set>-<revision>-<role>`;
v0.10.0 is the first release with this API (docs/operations.md, "What runs with what").
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

import pytest
import yaml

from tests.shared import PROJECT_VERSION, REPO_ROOT

CHANGELOG: Final = REPO_ROOT / "CHANGELOG.md"
VERSION_HEADING: Final = re.compile(r"^## (\d+)\.(\d+)\.(\d+)(?: \(unreleased\))?$", re.MULTILINE)
DOCS: Final = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]


def _text(path: Path) -> str:
    return " ".join(path.read_text().split())


@pytest.mark.parametrize("path", DOCS, ids=lambda path: path.name)
def test_no_doc_sends_a_cluster_to_lws_v0_9(path: Path) -> None:
    """Regression (issue 35 item 1): the docs said "v0.9 and newer" run this API."""
    assert not re.search(r"v0\.9(\.x)? (and|or) newer", _text(path))


def test_the_docs_name_v0_10_0_as_the_first_release_with_this_api() -> None:
    readme, operations = _text(REPO_ROOT / "README.md"), _text(REPO_ROOT / "docs/operations.md")
    assert "v0.10.0 is the first release with this API" in readme
    assert "**v0.10.0** is the first release with this API" in operations
    assert "`<set>-<revision>-<role>`" in operations  # what v0.9.x names its LWS
    # What a cluster on LWS v0.8 or older can and cannot move to while the hooks run.
    assert "cannot move to v0.9.x at all" in operations


def _sections() -> list[tuple[tuple[int, int, int], str]]:
    """Each version of CHANGELOG.md, top first, with its text."""
    parts = VERSION_HEADING.split(CHANGELOG.read_text())
    return [
        ((int(major), int(minor), int(patch)), text)
        for major, minor, patch, text in zip(
            parts[1::4], parts[2::4], parts[3::4], parts[4::4], strict=True
        )
    ]


def test_the_changelogs_top_version_is_pyprojects() -> None:
    (top, _), *_ = _sections()
    assert ".".join(map(str, top)) == PROJECT_VERSION


def test_the_changelogs_versions_decrease_and_each_has_upgrade_notes() -> None:
    sections = _sections()
    versions = [version for version, _ in sections]
    assert versions == sorted(set(versions), reverse=True)
    for version, text in sections:
        assert "### Upgrade notes" in text, version


def test_every_image_tag_the_kit_and_the_docs_name_is_the_version() -> None:
    image = f"disaggregatedset-hooks:{PROJECT_VERSION}"
    for kustomization in (
        REPO_ROOT / "kustomization.yaml",
        REPO_ROOT / "examples/overlay/kustomization.yaml",
    ):
        [entry] = yaml.safe_load(kustomization.read_text())["images"]
        assert entry["newTag"] == PROJECT_VERSION, kustomization
    named = {
        path.name: re.findall(r"disaggregatedset-hooks:(\d+\.\d+\.\d+)", path.read_text())
        for path in (REPO_ROOT / "README.md", REPO_ROOT / "Dockerfile", REPO_ROOT / "install.yaml")
    }
    assert all(tags and set(tags) == {PROJECT_VERSION} for tags in named.values()), named
    assert f"image: {image}" in (REPO_ROOT / "install.yaml").read_text()
