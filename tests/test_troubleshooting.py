"""docs/troubleshooting.md has an entry for every condition reason the hooks write (issue 27,
item 5), and its `kubectl get` columns are the CRD's.

An entry is a `### Reason` heading with text under it. A reason added to
`hooks/api/conditions.py` without one fails here, naming it; an entry for a reason that no longer
exists fails too.
"""

from __future__ import annotations

import re
from typing import Final

from hooks import api
from hooks.cli import crdgen
from tests.shared import REPO_ROOT

DOC: Final = REPO_ROOT / "docs" / "troubleshooting.md"
REASONS: Final = {reason.value for reason in api.Reason}
# The doc's column table: each column and the status field it says the column shows.
COLUMNS: Final = {
    "READY": ("`status.ready`", ".status.ready"),
    "REVISION": ("`status.revision`", ".status.revision"),
    "AVAILABLE": ("Available's status", '.status.conditions[?(@.type=="Available")].status'),
    "ROLLOUT": ("Progressing's reason", '.status.conditions[?(@.type=="Progressing")].reason'),
    "DEGRADED": ("`status.degraded`", ".status.degraded"),
    "GENERATION": ("`metadata.generation`", ".metadata.generation"),
    "OBSERVED": ("`status.observedGeneration`", ".status.observedGeneration"),
}


def _entries() -> dict[str, str]:
    """Each `### ` heading of the doc and the text under it."""
    parts = re.split(r"^### (.+)$", DOC.read_text(), flags=re.MULTILINE)
    return {
        heading: body.split("\n## ")[0].strip()
        for heading, body in zip(parts[1::2], parts[2::2], strict=True)
    }


def test_every_reason_the_hooks_write_has_an_entry() -> None:
    missing = sorted(REASONS - _entries().keys())

    assert missing == [], f"docs/troubleshooting.md has no entry for: {', '.join(missing)}"


def test_every_entry_is_a_reason_and_says_something() -> None:
    entries = _entries()

    assert sorted(entries.keys() - REASONS) == []
    assert [heading for heading, text in entries.items() if len(text) < 40] == []


def test_the_columns_are_read_from_where_the_doc_says() -> None:
    crd = crdgen.build_crds()[crdgen.DS_FILE]
    printed = {
        column["name"].upper(): column["jsonPath"]
        for column in crd["spec"]["versions"][0]["additionalPrinterColumns"]
    }
    rows = dict(re.findall(r"^\| ([A-Z]+) \| ([^|]+) \|", DOC.read_text(), flags=re.MULTILINE))

    for column, (said, path) in COLUMNS.items():
        assert rows[column].strip() == said
        assert printed[column] == path


def test_the_states_table_names_only_reasons() -> None:
    table = DOC.read_text().split("| state | READY |")[1].split("\n\n")[0]
    named = set(re.findall(r"`([A-Z][A-Za-z]+)`", table))

    statuses = {status.value for status in api.ConditionStatus}

    assert named
    assert sorted(named - REASONS - statuses) == []
