"""The README agrees with itself and with the code, and cannot drift (issue 27, item 4); it stays
a ten-minute read (issue 36).

Every sample the README shows is some test's expected output, read from the README itself:

- its set is `examples/llm.yaml`, and the names in the table under it are what `render` prints
  for that file;
- each `console` block of `python -m hooks` commands runs here, and must print what it shows;
- each `console` block of `kubectl` commands runs on the real control plane, in
  `tests/cluster/test_readme.py`; no console block is left to neither (those of docs/rollout.md,
  where the partition's walk-through went, neither);
- the `rollout status` line it explains is what the plugin prints for that state.
"""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any, Final

import pytest
import yaml

from hooks.core import records
from hooks.kubectl import rollout, status
from hooks.wire import objects
from tests import builders, readme
from tests.shared import REPO_ROOT

EXAMPLE: Final = REPO_ROOT / "examples" / "llm.yaml"
# What a new operator reads in ten minutes, counted as `wc -w` counts (issue 36 item 5).
MAX_WORDS: Final = 2_000


def _section(title: str) -> list[readme.Block]:
    return [block for block in readme.blocks() if block.section == title]


LOCAL_BLOCKS: Final = [block for block in readme.console_blocks() if readme.runs_locally(block)]


def test_the_readmes_set_is_the_example_it_names() -> None:
    """Regression, issue 27 item 4: the README's walk-throughs applied `llm.yaml`,
    `llm-v2.yaml` and `llm-new-image.yaml`, which were not shipped."""
    [block] = [block for block in _section("A first set") if block.language == "yaml"]

    text = EXAMPLE.read_text()

    assert block.text == text[text.index("apiVersion:") :]


def test_the_child_names_in_the_readme_are_what_render_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Regression, issue 27 item 4: "Rolling back" showed the README's `llm` at vLLM 0.11.0
    as fe283763, where it renders as 367faf27."""
    from hooks.cli import main

    assert main.main(["render", str(EXAMPLE)]) == 0
    rendered = yaml.safe_load(capsys.readouterr().out)
    names = {(child["kind"], child["metadata"]["name"]) for child in rendered["children"]}
    text = readme.README.read_text()
    table = text[text.index("| child | name | one per |") :].split("\n\n")[0]
    shown = re.findall(r"^\| ([A-Za-z]+) \| [^|]*: `([^`]+)` \|", table, flags=re.MULTILINE)

    assert len(shown) == 3
    assert set(shown) <= names


def test_the_readme_is_a_ten_minute_read() -> None:
    """Regression, issue 36 item 5: the README had grown to 4,429 words, a reference manual
    rather than a first read; what it does not say has its home in docs/."""
    words = len(readme.README.read_text().split())

    assert words <= MAX_WORDS, f"README.md has {words} words, more than {MAX_WORDS}"


def test_every_console_block_is_run_by_a_test() -> None:
    blocks = readme.console_blocks()

    neither = [
        block.name
        for block in blocks
        if not (readme.runs_locally(block) or readme.runs_on_a_cluster(block))
    ]

    assert len(blocks) >= 4
    assert neither == []


@pytest.mark.parametrize("block", LOCAL_BLOCKS, ids=lambda block: block.name)
def test_the_readmes_commands_print_what_it_shows(block: readme.Block) -> None:
    for step in block.steps():
        done = subprocess.run(
            [sys.executable, "-m", "hooks", *step.argv[3:]],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, (step.command, done.stderr)
        problem = readme.mismatch(step.expected, done.stdout + done.stderr)
        assert problem is None, f"{block.name}: $ {step.command}\n{problem}"


def _set_mid_rollout(old: str, new: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    parent = builders.make_ds(
        status={
            "revision": new,
            "rollout": {"revision": new, "slices": [{"index": 0, "phase": "Rolling"}]},
        }
    )
    lws = [
        builders.make_lws("prefill", revision=old, replicas=3, ready=4),
        builders.make_lws("prefill", revision=new, replicas=2, ready=1),
        builders.make_lws("decode", revision=old, replicas=1, ready=1),
        builders.make_lws("decode", revision=new, replicas=1, ready=1),
    ]
    return parent, lws


def test_the_rollout_status_line_the_readme_explains_is_the_plugins() -> None:
    """Regression, issue 27 item 4: `prefill old 4/3 new 1/2` was never explained."""
    [line] = re.findall(r"such as `(slice 0 [^`]*)`", readme.README.read_text())
    parent, lws = _set_mid_rollout("aaaaaaaa", "bbbbbbbb")
    observed = [objects.parse_object(records.ChildKind.LWS, item, where="lws") for item in lws]

    assert status.progress(rollout.read_set(parent), observed) == {"slice 0": line}


@pytest.mark.parametrize(
    ("expected", "printed", "matches"),
    [
        (("a", "b"), "a\nb\n", True),
        (("a", "b"), "a\nc\n", False),
        (("a", "b"), "a\nb\nc\n", False),
        (("a", "...", "d"), "a\nb\nc\nd\n", True),
        (("a", "...", "d"), "a\nd\n", True),
        (("...", "d"), "a\nb\n", False),
        (("held: slices 0 ...",), "held: slices 0 hold at 25% of e30e6bc9\n", True),
        (("held: slices 0 ...",), "held: slice 0 holds\n", False),
        (("1  367faf27  2026-12-01T11:52:25Z",), "1  367faf27  2027-01-02T03:04:05Z\n", True),
        (
            ("llm  1  5/5  True  AllRolesReady  12s",),
            "llm  1  5/5  True  AllRolesReady  2m3s\n",
            True,
        ),
        (
            ("llm  1  5/5  True  AllRolesReady  12s",),
            "llm  1  7/5  True  AllRolesReady  12s\n",
            False,
        ),
    ],
    ids=[
        "same",
        "other-line",
        "one-more-line",
        "elided-lines",
        "elided-nothing",
        "elided-then-missing",
        "prefix",
        "other-prefix",
        "timestamp",
        "age",
        "age-but-other-ready",
    ],
)
def test_a_console_sample_matches_what_varies_and_only_that(
    expected: tuple[str, ...], printed: str, matches: bool
) -> None:
    assert (readme.mismatch(expected, printed) is None) is matches
