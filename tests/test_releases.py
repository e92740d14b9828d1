"""What the docs say about releases: the LWS releases a cluster can move to.

The LeaderWorkerSet releases are facts read from kubernetes-sigs/lws: v0.9.0's DisaggregatedSet
has no slices, placement, External scaling or scaler and names its LWS `<set>-<revision>-<role>`;
v0.10.0 is the first release with this API (docs/operations.md, "What runs with what").
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final

import pytest

from tests.shared import REPO_ROOT

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
