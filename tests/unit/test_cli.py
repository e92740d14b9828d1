"""The command line (`python -m hooks`): plan tables, manifests, crds exit codes, help."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from hooks import api
from hooks.api import rules
from hooks.cli import crdgen, lwsspec, manifests
from hooks.cli import main as cli
from hooks.server import settings

State = tuple[tuple[int, ...], tuple[int, ...]]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def table_states(out: str, roles: int) -> list[State]:
    """(old, new) per row of the printed table, old and new each in role order."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:1] == ["pass"])
    states = []
    for line in lines[start + 1 :]:
        cells = line.split()
        if not cells or not cells[0].isdigit():
            break
        numbers = [int(cell) for cell in cells[1 : 1 + 2 * roles]]
        states.append((tuple(numbers[:roles]), tuple(numbers[roles:])))
    return states


def table_rules(out: str) -> list[str]:
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:1] == ["pass"])
    rules = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        rules.append(line.split()[-1])
    return rules


# --- plan from vectors ---------------------------------------------------------------------------


def test_plan_prints_the_spec_worked_example(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        "plan",
        "--old",
        "prefill=5,decode=2",
        "--target",
        "prefill=5,decode=2",
        "--max-surge",
        "2",
        "--max-unavailable",
        "1",
    )

    assert code == 0
    # docs/rollout.md as (new P, new D, old P, old D).
    expected = [(0, 0, 5, 2), (2, 1, 5, 2), (2, 1, 4, 2), (4, 2, 3, 2), (4, 2, 2, 1), (5, 2, 2, 1)]
    expected.append((5, 2, 0, 0))
    assert [(*new, *old) for old, new in table_states(out, 2)] == expected
    assert table_rules(out) == [
        "start",
        "scale-up",
        "drain",
        "force-drain",
        "drain",
        "scale-up",
        "new-at-target",
    ]
    assert "role prefill: old 5 -> target 5 (maxSurge 2, maxUnavailable 1)" in out
    assert "complete after 6 passes" in out


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        pytest.param(
            ["--old", "a=10,b=2", "--target", "a=6,b=8", "--max-surge", "2"],
            "(10,2/0,0) (8,2/0,0) (6,2/0,0) (6,2/2,2) (4,1/2,2) (4,1/3,4) (4,1/4,5) (2,1/4,5) "
            "(2,1/5,7) (2,1/6,8) (0,0/6,8)",
            id="reshape-10-2-to-6-8",
        ),
        pytest.param(
            [
                *("--old", "a=4,b=4", "--target", "a=4,b=4"),
                *("--max-surge", "0", "--max-unavailable", "2"),
            ],
            "(4,4/0,0) (2,2/0,0) (2,2/2,2) (0,0/2,2) (0,0/4,4)",
            id="unavailable-only",
        ),
    ],
)
def test_plan_matches_the_other_spec_examples(
    capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    code, out, _ = run(capsys, "plan", *argv)

    assert code == 0
    rendered = " ".join(
        f"({','.join(map(str, old))}/{','.join(map(str, new))})"
        for old, new in table_states(out, 2)
    )
    assert rendered == expected


def test_plan_resolves_percentages_against_the_target(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        "plan",
        "--old",
        "prefill=5,decode=3",
        "--target",
        "prefill=5,decode=3",
        "--max-surge",
        "30%",
        "--max-unavailable",
        "decode=50%",
    )

    assert code == 0
    # Surge rounds up (30% of 5 -> 2, of 3 -> 1); unavailable rounds down (50% of 3 -> 1).
    assert "role prefill: old 5 -> target 5 (maxSurge 2, maxUnavailable 0)" in out
    assert "role decode: old 3 -> target 3 (maxSurge 1, maxUnavailable 1)" in out


def test_plan_per_role_values_override_the_common_one(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        "plan",
        "--old",
        "prefill=4,decode=4",
        "--target",
        "prefill=4,decode=4",
        "--max-surge",
        "1",
        "--max-surge",
        "decode=50%,prefill=3",
    )

    assert code == 0
    assert "role prefill: old 4 -> target 4 (maxSurge 3, maxUnavailable 0)" in out
    assert "role decode: old 4 -> target 4 (maxSurge 2, maxUnavailable 0)" in out


def test_plan_without_budgets_uses_the_default_surge_1(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "plan", "--old", "a=2,b=1", "--target", "a=2,b=1")

    assert code == 0
    assert "role a: old 2 -> target 2 (maxSurge 1, maxUnavailable 0)" in out


def test_plan_role_only_in_old_is_removed_and_drains_to_zero(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(
        capsys, "plan", "--old", "prefill=2,encode=1,decode=2", "--target", "prefill=2,decode=2"
    )

    assert code == 0
    assert "role encode: old 1 -> target 0" in out
    header = next(line for line in out.splitlines() if line.startswith("pass"))
    assert header.split() == [
        "pass",
        *("old", "prefill", "old", "decode", "old", "encode"),
        *("new", "prefill", "new", "decode", "new", "encode"),
        "rule",
    ]
    old, new = table_states(out, 3)[-1]
    assert old == (0, 0, 0)
    assert new == (2, 2, 0)


def test_plan_stops_at_max_passes_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "plan", "--old", "a=5,b=2", "--target", "a=5,b=2", "--max-passes", "2"
    )

    assert code == 1
    assert len(table_states(out, 2)) == 3
    assert "not complete after 2 passes" in out


@pytest.mark.parametrize(
    "argv",
    [
        ["--old", "prefill=x", "--target", "prefill=1"],
        ["--old", "Prefill=1", "--target", "prefill=1"],
        ["--old", "a=1,a=2", "--target", "a=1"],
        ["--old", "a=1", "--target", "a=1", "--max-surge", "-1"],
        ["--old", "a=1", "--target", "a=1", "--max-surge", "1.5%"],
        ["--old", "a=\u00b2", "--target", "a=1"],
        ["--old", "a=1", "--target", "a=1", "--max-passes", "\u00b2"],
        ["--old", "a=1", "--target", "a=1", "--rescale", "\u00b2:a=2"],
        ["--old", "a=1", "--target", "a=1", "--ready-after", "\u0663"],
    ],
    ids=[
        "not-a-number",
        "bad-role-name",
        "duplicate-role",
        "negative",
        "fractional",
        "superscript-replicas",
        "superscript-max-passes",
        "superscript-rescale-pass",
        "arabic-indic-ready-after",
    ],
)
def test_plan_rejects_malformed_values_as_usage_errors(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """Regression (the last four): a superscript digit passed `str.isdigit`, then failed `int`,
    so argparse printed its own "invalid positive_int value" line; Arabic-Indic digits were taken
    as a number. A number is ASCII digits, and the error line says what the value should be."""
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["plan", *argv])

    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "error" in err
    assert "invalid" not in err


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["--old", "a=1"],
        ["--old", "a=1", "--target", "a=1", "--from", "x.yaml", "--to", "y.yaml"],
        ["--old", "a=1", "--target", "a=1", "--max-surge", "b=1"],
        ["--from", "x.yaml"],
    ],
    ids=["nothing", "old-alone", "both-forms", "unknown-role", "from-alone"],
)
def test_plan_incomplete_or_mixed_arguments_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    code, _, err = run(capsys, "plan", *argv)

    assert code == 2
    assert err.startswith("python -m hooks plan: error:")


@pytest.mark.parametrize(
    ("argv", "rule"),
    [
        (["--max-surge", "150%"], "maxSurge must be a non-negative integer or a percentage"),
        (["--max-unavailable", "b=101%"], "maxUnavailable must be a non-negative integer"),
        (["--max-surge", "0", "--max-unavailable", "0"], "must not be 0 when maxSurge is 0"),
        (["--max-surge", "0"], "must not be 0 when maxSurge is 0"),
        (["--max-surge", "0%", "--max-unavailable", "40%"], "must not be 0 when maxSurge is 0"),
    ],
    ids=["surge-over-100", "unavailable-over-100", "both-zero", "surge-zero-alone", "both-round-0"],
)
def test_plan_refuses_what_the_api_refuses_with_its_message(
    capsys: pytest.CaptureFixture[str], argv: list[str], rule: str
) -> None:
    # Both roles have 2 replicas: 40% of 2 rounds down to 0 for maxUnavailable.
    code, out, err = run(capsys, "plan", "--old", "a=2,b=2", "--target", "a=2,b=2", *argv)

    assert code == 2
    assert out == ""
    assert err.startswith("python -m hooks plan: error: role ")
    assert rule in err


@pytest.mark.parametrize(
    ("argv", "code", "summary"),
    [
        (["--old", "a=0,b=0", "--target", "a=1,b=1"], 0, "complete after 1 pass"),
        (
            ["--old", "a=2,b=2", "--target", "a=2,b=2", "--max-passes", "1"],
            1,
            "not complete after 1 pass (raise --max-passes to see more)",
        ),
    ],
    ids=["complete", "not-complete"],
)
def test_plan_counts_one_pass_in_the_singular(
    capsys: pytest.CaptureFixture[str], argv: list[str], code: int, summary: str
) -> None:
    """Regression, issue 17 item 13: "complete after 1 passes"."""
    exit_code, out, _ = run(capsys, "plan", *argv)

    assert exit_code == code
    assert out.splitlines()[-1] == summary


def test_plan_exempts_a_role_with_target_0_from_the_budget_rule_as_the_api_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The API checks maxSurge and maxUnavailable only on roles with replicas > 0.
    code, out, err = run(
        capsys, "plan", "--old", "a=2,b=2", "--target", "a=2,b=0", "--max-surge", "b=150%"
    )

    assert (code, err) == (0, "")
    assert "role b: old 2 -> target 0" in out


def test_plan_reports_every_budget_problem_one_line_each(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run(
        capsys,
        "plan",
        *("--old", "a=2,b=2", "--target", "a=2,b=2"),
        *("--max-surge", "150%", "--max-unavailable", "b=0"),
    )

    assert code == 2
    assert err.splitlines() == [
        f"python -m hooks plan: error: role a: {rules.MAX_SURGE_INT_OR_PERCENT.message}",
        f"python -m hooks plan: error: role b: {rules.MAX_SURGE_INT_OR_PERCENT.message}",
    ]


# --- plan from manifests -------------------------------------------------------------------------


def manifest(
    *,
    image: str,
    replicas: dict[str, int],
    rolling: dict[str, Any] | None = None,
    slices: int = 1,
) -> dict[str, Any]:
    roles = []
    for name, count in replicas.items():
        spec: dict[str, Any] = {
            "replicas": count,
            "leaderWorkerTemplate": {
                "size": 1,
                "workerTemplate": {
                    "spec": {"containers": [{"name": "server", "image": f"{image}-{name}"}]}
                },
            },
        }
        if rolling is not None:
            spec["rolloutStrategy"] = {
                "type": "RollingUpdate",
                "rollingUpdateConfiguration": rolling,
            }
        roles.append({"name": name, "spec": spec})
    return {
        "apiVersion": "disaggregatedset.x-k8s.io/v1",
        "kind": "DisaggregatedSet",
        "metadata": {"name": "llm", "namespace": "default"},
        "spec": {"slices": slices, "roles": roles},
    }


def write(path: Path, document: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def test_plan_from_two_manifests_gives_the_worked_example(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    old = write(
        tmp_path / "old.yaml", manifest(image="vllm:1", replicas={"prefill": 5, "decode": 2})
    )
    new = write(
        tmp_path / "new.yaml",
        manifest(
            image="vllm:2",
            replicas={"prefill": 5, "decode": 2},
            rolling={"maxSurge": 2, "maxUnavailable": 1},
        ),
    )

    code, out, _ = run(capsys, "plan", "--from", str(old), "--to", str(new))

    assert code == 0
    assert out.startswith("revision ")
    states = [(*new_, *old_) for old_, new_ in table_states(out, 2)]
    assert states == [
        (0, 0, 5, 2),
        (2, 1, 5, 2),
        (2, 1, 4, 2),
        (4, 2, 3, 2),
        (4, 2, 2, 1),
        (5, 2, 2, 1),
        (5, 2, 0, 0),
    ]


def test_plan_from_manifests_treats_a_role_only_in_the_old_one_as_removed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    old = write(
        tmp_path / "old.yaml",
        manifest(image="vllm:1", replicas={"prefill": 2, "decode": 2, "encode": 1}),
    )
    new = write(
        tmp_path / "new.yaml",
        manifest(image="vllm:1", replicas={"prefill": 3, "decode": 2}, rolling={"maxSurge": "50%"}),
    )

    code, out, _ = run(capsys, "plan", "--from", str(old), "--to", str(new))

    assert code == 0
    # The API server defaults maxUnavailable to 1 when only maxSurge is given.
    assert "role prefill: old 2 -> target 3 (maxSurge 2, maxUnavailable 1)" in out
    assert "role encode: old 1 -> target 0 (maxSurge 1, maxUnavailable 0)" in out
    old_final, new_final = table_states(out, 3)[-1]
    assert old_final == (0, 0, 0)
    assert new_final == (3, 2, 0)


def test_plan_from_manifests_with_the_same_revision_has_no_rollout(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    old = write(
        tmp_path / "old.yaml", manifest(image="vllm:1", replicas={"prefill": 5, "decode": 2})
    )
    new = write(
        tmp_path / "new.yaml",
        manifest(image="vllm:1", replicas={"prefill": 7, "decode": 3}, slices=2),
    )

    code, out, _ = run(capsys, "plan", "--from", str(old), "--to", str(new))

    assert code == 0
    assert out.startswith("no rollout: both manifests have revision ")
    assert "pass" not in out


def test_plan_from_manifests_notes_that_slices_roll_independently(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    old = write(tmp_path / "old.yaml", manifest(image="a", replicas={"prefill": 1, "decode": 1}))
    document = manifest(image="b", replicas={"prefill": 1, "decode": 1}, slices=3)
    new = write(tmp_path / "new.yaml", document)

    code, out, _ = run(capsys, "plan", "--from", str(old), "--to", str(new))

    assert code == 0
    assert "each of the 3 slices follows this table on its own" in out


def test_plan_from_manifests_notes_that_an_external_role_target_is_a_stand_in(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    old = write(tmp_path / "old.yaml", manifest(image="a", replicas={"prefill": 2, "decode": 4}))
    document = manifest(image="b", replicas={"prefill": 2, "decode": 4})
    document["spec"]["roles"][1]["scaling"] = {"mode": "External"}
    new = write(tmp_path / "new.yaml", document)

    code, out, _ = run(capsys, "plan", "--from", str(old), "--to", str(new))

    assert code == 0
    assert "role decode is External" in out
    assert table_states(out, 2)[-1] == ((0, 0), (2, 4))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("kind: [unclosed", "bad.yaml:1:16: expected ',' or ']', but got '<stream end>'"),
        ("- just\n- a list\n", "holds no DisaggregatedSet manifest"),
        ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", "DisaggregatedSet"),
        ("a: 1\n---\nb: 2\n", "holds no DisaggregatedSet manifest"),
    ],
    ids=["bad-yaml", "not-a-mapping", "wrong-kind", "no-set-among-documents"],
)
def test_plan_from_unusable_manifest_exits_1_with_a_message(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str, message: str
) -> None:
    good = write(tmp_path / "good.yaml", manifest(image="a", replicas={"p": 1, "d": 1}))
    bad = tmp_path / "bad.yaml"
    bad.write_text(content)

    code, _, err = run(capsys, "plan", "--from", str(bad), "--to", str(good))

    assert code == 1
    assert message in err


def test_plan_from_a_missing_file_exits_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    good = write(tmp_path / "good.yaml", manifest(image="a", replicas={"p": 1, "d": 1}))

    code, _, err = run(capsys, "plan", "--from", str(tmp_path / "nope.yaml"), "--to", str(good))

    assert code == 1
    assert "cannot read" in err


def test_plan_from_manifests_refuses_budget_options(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    good = write(tmp_path / "good.yaml", manifest(image="a", replicas={"p": 1, "d": 1}))

    code, _, err = run(capsys, "plan", "--from", str(good), "--to", str(good), "--max-surge", "2")

    assert code == 2
    assert "rollingUpdateConfiguration" in err


def _problems(err: str, command: str) -> list[str]:
    """The error lines of a command, without their prefix."""
    prefix = f"python -m hooks {command}: error: "
    assert all(line.startswith(prefix) for line in err.splitlines()), err
    return [line.removeprefix(prefix) for line in err.splitlines()]


def test_plan_refuses_a_manifest_render_refuses_with_the_same_lines(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Regression, issue 17 item 13: `plan --from/--to` planned with budgets the API refuses
    (and worded spec problems its own way), where `render` reports each rule's message."""
    old = write(tmp_path / "old.yaml", manifest(image="a", replicas={"p": 2, "d": 2}))
    document = manifest(
        image="b", replicas={"p": 2, "d": 2}, rolling={"maxSurge": "150%", "maxUnavailable": 0}
    )
    document["spec"]["roles"][1]["name"] = "p"  # role names must be unique, too
    new = write(tmp_path / "new.yaml", document)

    plan_code, plan_out, plan_err = run(capsys, "plan", "--from", str(old), "--to", str(new))
    render_code, _, render_err = run(capsys, "render", str(new))

    assert (plan_code, plan_out, render_code) == (1, "", 1)
    assert _problems(plan_err, "plan") == _problems(render_err, "render")
    surge_path = "spec.roles[0].spec.rolloutStrategy.rollingUpdateConfiguration.maxSurge"
    surge_message = rules.MAX_SURGE_INT_OR_PERCENT.message.removeprefix(
        surge_path.replace("[0]", "[]") + " "
    )
    assert _problems(plan_err, "plan") == [
        f"{new}: DisaggregatedSet llm: spec.roles[1].name: "
        + rules.ROLE_NAMES_UNIQUE.message.removeprefix("spec.roles[].name "),
        f"{new}: DisaggregatedSet llm: {surge_path}: {surge_message}",
        f"{new}: DisaggregatedSet llm: " + surge_path.replace("[0]", "[1]") + f": {surge_message}",
    ]


def test_plan_words_a_budget_rule_as_render_does(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    document = manifest(image="a", replicas={"p": 2, "d": 2})
    document["spec"]["roles"][0]["spec"]["rolloutStrategy"] = {
        "rollingUpdateConfiguration": {"maxSurge": 0, "maxUnavailable": 0}
    }
    path = write(tmp_path / "set.yaml", document)

    _, _, render_err = run(capsys, "render", str(path))
    _, _, plan_err = run(
        capsys, "plan", "--old", "p=2,d=2", "--target", "p=2,d=2", "--max-surge", "p=0"
    )

    [render_line] = _problems(render_err, "render")
    [plan_line] = _problems(plan_err, "plan")
    field = "spec.roles[].spec.rolloutStrategy.rollingUpdateConfiguration.maxUnavailable"
    assert plan_line == f"role p: {rules.SURGE_OR_UNAVAILABLE_NONZERO.message}"
    # Beside its field, render leaves out the message's own mention of it.
    message = rules.SURGE_OR_UNAVAILABLE_NONZERO.message.removeprefix(f"{field} ")
    assert render_line.endswith(f".maxUnavailable: {message}")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"name": "chat"},
            "--from is DisaggregatedSet default/llm but --to is default/chat: applying --to "
            "creates a second set beside the first instead of rolling it; the plan treats them "
            "as one set",
        ),
        ({"namespace": "prod"}, "--from is DisaggregatedSet default/llm but --to is prod/llm: "),
        ({}, None),
        ({"namespace": None}, None),  # no namespace is the default namespace
    ],
    ids=["other-name", "other-namespace", "same-set", "namespace-omitted"],
)
def test_plan_from_different_sets_warns_without_changing_the_exit_status(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    change: dict[str, str | None],
    expected: str | None,
) -> None:
    """Regression, issue 17 item 13: `plan --from A --to B` said nothing when A and B were
    different sets, so applying B would create a second set rather than roll A."""
    old = write(tmp_path / "old.yaml", manifest(image="a", replicas={"p": 1, "d": 1}))
    document = manifest(image="b", replicas={"p": 1, "d": 1})
    document["metadata"].update(change)
    document["metadata"] = {k: v for k, v in document["metadata"].items() if v is not None}
    new = write(tmp_path / "new.yaml", document)

    code, out, err = run(capsys, "plan", "--from", str(old), "--to", str(new))

    assert code == 0
    assert out.splitlines()[-1] == "complete after 2 passes"
    if expected is None:
        assert err == ""
    else:
        [line] = err.splitlines()
        assert line.startswith(f"python -m hooks plan: warning: {expected}")


# --- crds ----------------------------------------------------------------------------------------


def test_crds_check_passes_when_nothing_is_stale(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[Path] = []

    def check(directory: Path) -> list[str]:
        seen.append(directory)
        return []

    monkeypatch.setattr(crdgen, "check_crds", check)

    code, out, _ = run(capsys, "crds", "--check")

    assert code == 0
    assert seen == [Path("crds")]
    assert "up to date" in out


def test_crds_check_fails_and_names_the_fix_when_stale(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(crdgen, "check_crds", lambda directory: ["disaggregatedsets.yaml"])

    code, _, err = run(capsys, "crds", "--check", "--dir", str(tmp_path))

    assert code == 1
    assert "disaggregatedsets.yaml" in err
    assert f"python -m hooks crds --dir {tmp_path}" in err


def test_crds_check_default_dir_suggests_the_plain_command(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(crdgen, "check_crds", lambda directory: ["a.yaml", "b.yaml"])

    code, _, err = run(capsys, "crds", "--check")

    assert code == 1
    assert "`python -m hooks crds`" in err


def test_crds_check_outside_the_repository_says_where_to_run_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)

    code, out, err = run(capsys, "crds", "--check")

    assert code == 1
    assert out == ""
    assert err == (
        "python -m hooks crds: error: crds is not a directory: run from the repository root, "
        "or pass --dir\n"
    )
    assert "regenerate" not in err


def test_crds_check_with_a_missing_dir_says_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing = tmp_path / "nothing"

    code, _, err = run(capsys, "crds", "--check", "--dir", str(missing))

    assert code == 1
    assert err == f"python -m hooks crds: error: {missing} is not a directory\n"
    assert not missing.exists()


def test_crds_does_not_create_crds_outside_the_repository(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)

    code, _, err = run(capsys, "crds")

    assert code == 1
    assert "run from the repository root, or pass --dir" in err
    assert list(tmp_path.iterdir()) == []


def test_crds_writes_into_the_given_directory(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: list[Path] = []

    def write_crds(directory: Path) -> list[str]:
        seen.append(directory)
        return ["disaggregatedsets.yaml"]

    monkeypatch.setattr(crdgen, "write_crds", write_crds)

    code, out, _ = run(capsys, "crds", "--dir", str(tmp_path))

    assert code == 0
    assert seen == [tmp_path]
    assert str(tmp_path / "disaggregatedsets.yaml") in out


def test_crds_check_says_missing_or_out_of_date_per_file(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Regression, issue 17 item 13: a missing CRD file was reported as "out of date"."""
    (tmp_path / "disaggregatedsets.yaml").write_text("old\n")
    monkeypatch.setattr(
        crdgen,
        "check_crds",
        lambda directory: ["disaggregatedsets.yaml", "disaggregatedsetrolescalers.yaml"],
    )

    code, out, err = run(capsys, "crds", "--check", "--dir", str(tmp_path))

    assert (code, out) == (1, "")
    assert err.splitlines() == [
        f"python -m hooks crds: error: {tmp_path}/disaggregatedsets.yaml is out of date",
        f"python -m hooks crds: error: {tmp_path}/disaggregatedsetrolescalers.yaml is missing",
        f"python -m hooks crds: note: regenerate the CRDs with `python -m hooks crds --dir "
        f"{tmp_path}` and commit the result",
    ]


def test_crds_check_of_the_real_generator_reports_a_missing_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, _ = run(capsys, "crds", "--dir", str(tmp_path))
    assert code == 0
    (tmp_path / "disaggregatedsetrolescalers.yaml").unlink()

    code, _, err = run(capsys, "crds", "--check", "--dir", str(tmp_path))

    assert code == 1
    assert err.splitlines()[0] == (
        f"python -m hooks crds: error: {tmp_path}/disaggregatedsetrolescalers.yaml is missing"
    )


# --- render --------------------------------------------------------------------------------------

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_render_prints_children_and_status_of_every_example(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for example in sorted(EXAMPLES.glob("*.yaml")):
        code, out, err = run(capsys, "render", str(example))
        assert code == 0, example.name
        assert all(": note: " in line for line in err.splitlines()), err
        for rendered in yaml.safe_load_all(out):
            kinds = {child["kind"] for child in rendered["children"]}
            assert "LeaderWorkerSet" in kinds
            assert {c["type"] for c in rendered["status"]["conditions"]} == {
                "Available",
                "Progressing",
                "Degraded",
            }


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("*.yaml")), ids=lambda path: path.name)
def test_render_writes_no_yaml_anchors_or_aliases(
    capsys: pytest.CaptureFixture[str], example: Path
) -> None:
    """Regression, issue 27 item 3: an object that appears twice in the output (a template in
    the ControllerRevision and in the LWS) was written once as `&id001` and then as `*id001`."""
    code, out, _ = run(capsys, "render", str(example))

    assert code == 0
    assert re.search(r"[&*]id[0-9]{3}", out) is None
    assert [event for event in yaml.parse(out) if getattr(event, "anchor", None)] == []


def test_render_warns_of_an_external_roles_replicas_and_still_renders(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Regression (issue 35 item 6): `replicas: 5` on an External role was ignored silently."""
    manifest = yaml.safe_load((EXAMPLES / "llm.yaml").read_text())
    manifest["spec"]["roles"][1]["spec"]["replicas"] = 5
    path = tmp_path / "llm.yaml"
    path.write_text(yaml.safe_dump(manifest))

    code, out, err = run(capsys, "render", str(path))

    assert code == 0
    [rendered] = yaml.safe_load_all(out)
    [sentence] = rendered["status"]["warnings"]
    assert sentence.startswith('spec.roles[name="decode"].spec.replicas is 5 but the role has')
    assert 'DisaggregatedSetRoleScaler "llm-decode"' in sentence
    assert err.splitlines() == [
        f"python -m hooks render: warning: {path}: DisaggregatedSet llm: {sentence}"
    ]
    scaler = next(c for c in rendered["children"] if c["kind"] == "DisaggregatedSetRoleScaler")
    assert scaler["spec"]["replicas"] == 1  # its first value, not 5


def test_render_reports_every_problem_in_one_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = Path(__file__).resolve().parents[1] / "fixtures/manifests/many-problems.yaml"

    code, out, err = run(capsys, "render", str(path))

    assert (code, out) == (1, "")
    prefix = f"python -m hooks render: error: {path}: DisaggregatedSet LLM: "
    [document] = yaml.safe_load_all(path.read_text())
    assert err.splitlines() == [prefix + problem for problem in manifests.check(document).problems]
    assert len(err.splitlines()) == 8


def test_render_names_children_with_the_revision_of_the_defaulted_manifest(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from hooks.cli import manifests
    from hooks.gocompat import revision

    path = EXAMPLES / "slices-placement.yaml"
    (stored,) = [
        manifests.stored(document)
        for document in manifests.read_documents(str(path))
        if manifests.is_set(document)
    ]
    expected = revision.compute_revision(
        [(r["name"], r["spec"]["leaderWorkerTemplate"]) for r in stored["spec"]["roles"]]
    )

    code, out, _ = run(capsys, "render", str(path))

    assert code == 0
    rendered = yaml.safe_load(out)
    names = sorted(c["metadata"]["name"] for c in rendered["children"])
    assert names == sorted(
        [
            *(
                f"deepseek-{index}-{expected}-{role}"
                for index in range(3)
                for role in ("prefill", "decode")
            ),
            f"deepseek-{expected}",  # the DisaggregatedSetRevision of the revision
        ]
    )
    assert rendered["status"]["revision"] == expected
    lws = next(c for c in rendered["children"] if c["kind"] == "LeaderWorkerSet")
    worker = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    assert "podAntiAffinity" in worker["spec"]["affinity"]
    assert worker["spec"]["containers"][0].get("resources") is not None


def test_render_rejects_an_invalid_manifest_with_the_broken_rule(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    manifest = next(yaml.safe_load_all((EXAMPLES / "external-hpa.yaml").read_text()))
    manifest["spec"]["slices"] = 2
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(manifest))

    code, out, err = run(capsys, "render", str(path))

    assert code == 1
    assert out == ""
    assert "spec.slices" in err
    assert "External" in err


def test_render_without_a_disaggregatedset_fails(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "other.yaml"
    path.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")

    code, _, err = run(capsys, "render", str(path))

    assert code == 1
    assert "no DisaggregatedSet" in err


def _example_set() -> dict[str, Any]:
    return next(yaml.safe_load_all((EXAMPLES / "three-roles.yaml").read_text()))


def test_render_refuses_a_schema_type_error_with_its_field_path(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    document = _example_set()
    container = document["spec"]["roles"][0]["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    container["spec"]["containers"][0]["image"] = 123
    path = write(tmp_path / "bad.yaml", document)

    code, out, err = run(capsys, "render", str(path))

    assert code == 1
    assert out == ""
    prefix = f"python -m hooks render: error: {path}: DisaggregatedSet qwen-vl: "
    # After a wrong type the API server leaves its rules unchecked, and says so.
    assert err.splitlines() == [
        f"{prefix}spec.roles[0].spec.leaderWorkerTemplate.workerTemplate.spec.containers[0]."
        "image: 123 is not of type 'string'",
        prefix + manifests.RULES_NOT_CHECKED,
    ]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"apiVersion": "disaggregatedset.x-k8s.io/v2"}, "apiVersion: must be"),
        ({"apiVersion": None}, "apiVersion: must be"),
        ({"metadata": None}, "metadata"),
        ({"metadata": {"name": 5}}, "name"),
        ({"spec": {"roles": []}}, "spec.roles: must have at least 2 items, has 0"),
        ({"spec": "text"}, "spec"),
    ],
    ids=["wrong-version", "no-version", "no-metadata", "number-name", "no-roles", "spec-text"],
)
def test_render_reports_malformed_sets_without_a_traceback(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, change: dict[str, Any], problem: str
) -> None:
    document = {**_example_set(), **change}
    document = {key: value for key, value in document.items() if value is not None}
    path = write(tmp_path / "bad.yaml", document)

    code, out, err = run(capsys, "render", str(path))

    assert code == 1
    assert out == ""
    assert "Traceback" not in err
    line, *rest = err.splitlines()
    assert line.startswith(f"python -m hooks render: error: {path}: DisaggregatedSet ")
    assert problem in line
    # A spec of the wrong type leaves the rules unchecked, as it does on the API server.
    assert [r.endswith(f": {manifests.RULES_NOT_CHECKED}") for r in rest] == [True] * len(rest)


def test_render_reports_a_degraded_first_sync_and_fails(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    document = _example_set()
    document["metadata"]["annotations"] = {
        "disaggregatedset.x-k8s.io/progress-deadline-seconds": "x"
    }
    path = write(tmp_path / "held.yaml", document)

    code, out, err = run(capsys, "render", str(path))

    assert code == 1
    assert yaml.safe_load(out)["children"] != []  # the default deadline applies: it renders
    assert err.startswith(f"python -m hooks render: error: {path}: DisaggregatedSet qwen-vl: ")
    assert "InvalidAnnotation" in err and "progress-deadline-seconds" in err


def test_issue33_item6_render_refuses_a_size_of_0_in_the_crds_words(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    document = _example_set()
    document["spec"]["roles"][1]["spec"]["leaderWorkerTemplate"]["size"] = 0
    path = write(tmp_path / "bad.yaml", document)

    code, out, err = run(capsys, "render", str(path))

    assert (code, out) == (1, "")
    said = rules.LWS_SIZE_AT_LEAST_ONE.message.removeprefix(
        "spec.roles[].spec.leaderWorkerTemplate.size "
    )  # the field, with its index, goes first
    assert err == (
        f"python -m hooks render: error: {path}: DisaggregatedSet qwen-vl:"
        f" spec.roles[1].spec.leaderWorkerTemplate.size: {said}\n"
    )


def test_issue33_item6_render_reports_an_lws_leaderworkerset_would_refuse(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Valid for the CRD (a role at 0 replicas is exempt, as upstream's rule has it), refused
    by LeaderWorkerSet as the role's LWS: the first sync says so, and render fails."""
    document = _example_set()
    for role in document["spec"]["roles"]:
        role["spec"]["replicas"] = 0
    document["spec"]["roles"][0]["spec"]["rolloutStrategy"] = {
        "rollingUpdateConfiguration": {"maxSurge": "200%"}
    }
    path = write(tmp_path / "refused.yaml", document)

    code, out, err = run(capsys, "render", str(path))

    assert code == 1 and yaml.safe_load(out)["children"] != []
    assert err.startswith(
        f"python -m hooks render: error: {path}: DisaggregatedSet qwen-vl: LWSRefused:"
        " LeaderWorkerSet 'qwen-vl-0-"
    )
    assert "maxSurge: '200%' is no count or percentage up to 100%" in err


def test_render_takes_several_files_and_standard_input(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO((EXAMPLES / "external-hpa.yaml").read_text()))
    files = [str(EXAMPLES / "three-roles.yaml"), "-", str(EXAMPLES / "slices-placement.yaml")]

    code, out, err = run(capsys, "render", *files)

    assert code == 0
    rendered = list(yaml.safe_load_all(out))
    owners = [r["children"][0]["metadata"]["labels"][api.LABEL_NAME] for r in rendered]
    assert owners == ["qwen-vl", "llama-8b", "deepseek"]
    assert (
        err
        == "python -m hooks render: note: -: skipping HorizontalPodAutoscaler llama-8b-prefill\n"
    )


def test_render_goes_on_after_a_bad_file_and_fails_at_the_end(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: [unclosed\n")
    files = [str(tmp_path / "missing.yaml"), str(broken), str(EXAMPLES / "three-roles.yaml")]

    code, out, err = run(capsys, "render", *files)

    assert code == 1
    assert [r["status"]["revision"] for r in yaml.safe_load_all(out)] != []
    lines = err.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(
        f"python -m hooks render: error: cannot read {tmp_path}/missing.yaml"
    )
    assert lines[1].startswith(f"python -m hooks render: error: {broken}:2:1: expected ")


def test_render_refuses_unknown_fields_as_the_api_server_does(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Regression, issue 17 item 11: typos (`replica: 1`, `slice: 3`) rendered with exit 0, while
    `kubectl apply` fails with `strict decoding error: unknown field "spec.roles[1].spec.replica"`.
    """
    document = _example_set()
    document["spec"]["slice"] = 3
    role = document["spec"]["roles"][1]["spec"]
    role["replica"] = role.pop("replicas")
    document["metadata"]["lables"] = {"team": "ml"}
    path = write(tmp_path / "typos.yaml", document)

    code, out, err = run(capsys, "render", str(path))

    assert (code, out) == (1, "")
    prefix = f"python -m hooks render: error: {path}: DisaggregatedSet qwen-vl: "
    assert err.splitlines() == [
        prefix + 'unknown field "metadata.lables"',
        prefix + 'unknown field "spec.roles[1].spec.replica"',
        prefix + 'unknown field "spec.slice"',
    ]


def test_render_names_a_too_long_set_name_as_metadata_name(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Regression, issue 17 item 13: a set name too long for the name budget was reported under
    each role's name (`spec.roles[0].name: the generated names (...) would exceed ...`)."""
    document = _example_set()
    document["metadata"]["name"] = "qwen-vl-" + "x" * 40
    path = write(tmp_path / "long.yaml", document)

    code, out, err = run(capsys, "render", str(path))

    assert (code, out) == (1, "")
    [line] = err.splitlines()
    problem = line.partition(f"{path}: DisaggregatedSet qwen-vl-{'x' * 40}: ")[2]
    assert problem.startswith(
        "metadata.name: is too long: 48 characters, at most 31 with these roles, slices and "
        "replicas (the generated names would have "
    )
    assert "spec.roles" not in line


@pytest.mark.parametrize("now", ["garbage", "2026-13-01T00:00:00Z", ""])
def test_render_refuses_a_now_that_is_not_rfc3339(
    capsys: pytest.CaptureFixture[str], now: str
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["render", "--now", now, str(EXAMPLES / "three-roles.yaml")])

    assert exit_info.value.code == 2
    assert "is not an RFC 3339 time" in capsys.readouterr().err


def test_render_stamps_a_given_now_on_new_conditions(capsys: pytest.CaptureFixture[str]) -> None:
    now = "2030-05-06T07:08:09Z"

    code, out, _ = run(capsys, "render", "--now", now, str(EXAMPLES / "three-roles.yaml"))

    assert code == 0
    conditions = yaml.safe_load(out)["status"]["conditions"]
    assert {c["lastTransitionTime"] for c in conditions} == {now}


def test_output_cut_short_by_the_reader_is_not_an_error() -> None:
    # `plan ... | head -1`: the reader closes the pipe after one line, while more than a pipe
    # buffer (64 KiB) of the table is still to be written.
    argv = [
        sys.executable,
        "-m",
        "hooks",
        "plan",
        "--old",
        "a=400,b=400",
        "--target",
        "a=400,b=400",
    ]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as process:
        assert process.stdout is not None and process.stderr is not None
        process.stdout.readline()
        process.stdout.close()
        err = process.stderr.read()
        code = process.wait(timeout=60)

    assert code == 0
    assert err == b""


_MESSAGE_LINE: Final = re.compile(
    r"python -m hooks (?P<command>[a-z]+): (?P<severity>error|warning|note): \S"
)


def _failing_invocations(tmp_path: Path) -> dict[str, list[str]]:
    good = write(tmp_path / "good.yaml", manifest(image="a", replicas={"p": 1, "d": 1}))
    other = manifest(image="b", replicas={"p": 1, "d": 1})
    other["metadata"]["name"] = "other"
    typo = manifest(image="b", replicas={"p": 1, "d": 1})
    typo["spec"]["slice"] = 2
    (tmp_path / "bad.yaml").write_text("kind: [unclosed\n")
    (tmp_path / "map.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    files = {
        "good": str(good),
        "other": str(write(tmp_path / "other.yaml", other)),
        "typo": str(write(tmp_path / "typo.yaml", typo)),
        "bad": str(tmp_path / "bad.yaml"),
        "map": str(tmp_path / "map.yaml"),
        "missing": str(tmp_path / "missing.yaml"),
    }
    return {
        "render-missing-file": ["render", files["missing"]],
        "render-bad-yaml": ["render", files["bad"]],
        "render-unknown-field": ["render", files["typo"]],
        "render-no-set": ["render", files["map"]],
        "plan-usage": ["plan"],
        "plan-budget": ["plan", "--old", "a=1,b=1", "--target", "a=1,b=1", "--max-surge", "101%"],
        "plan-bad-yaml": ["plan", "--from", files["bad"], "--to", files["good"]],
        "plan-unknown-field": ["plan", "--from", files["good"], "--to", files["typo"]],
        "plan-other-set": ["plan", "--from", files["good"], "--to", files["other"]],
        "crds-missing-dir": ["crds", "--check", "--dir", str(tmp_path / "none")],
        "crds-stale": ["crds", "--check", "--dir", str(tmp_path)],
    }


@pytest.mark.parametrize(
    "case",
    [
        "render-missing-file",
        "render-bad-yaml",
        "render-unknown-field",
        "render-no-set",
        "plan-usage",
        "plan-budget",
        "plan-bad-yaml",
        "plan-unknown-field",
        "plan-other-set",
        "crds-missing-dir",
        "crds-stale",
    ],
)
def test_every_command_writes_its_messages_in_one_style(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, case: str
) -> None:
    """Regression, issue 17 item 13: `render` wrote `python -m hooks render: FILE: ...`, `plan`
    and `crds` wrote `python -m hooks plan: error: ...`, `crds --check` wrote bare lines and a
    skipped document was a bare `FILE: skipping ...`. Every line on stderr now has argparse's
    form for usage errors: `python -m hooks COMMAND: error|warning|note: ...`."""
    argv = _failing_invocations(tmp_path)[case]

    code, _, err = run(capsys, *argv)

    assert code != 0 or case == "plan-other-set"
    assert err.splitlines()
    for line in err.splitlines():
        match = _MESSAGE_LINE.match(line)
        assert match is not None, line
        assert match["command"] == argv[0]


@pytest.mark.parametrize(
    "argv",
    [
        ["render", "--now", "garbage", "x.yaml"],
        ["plan", "--old", "a=x", "--target", "a=1"],
        ["crds", "--nope"],
        ["serve", "--workers", "0"],
        ["plan", "--old", "a=1", "--target", "a=1", "extra"],
    ],
    ids=["render", "plan", "crds-unrecognized", "serve", "plan-unrecognized"],
)
def test_usage_errors_from_argparse_have_the_same_style(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)

    assert exit_info.value.code == 2
    last = capsys.readouterr().err.splitlines()[-1]
    match = _MESSAGE_LINE.match(last)
    assert match is not None and match["command"] == argv[0] and match["severity"] == "error"


# --- help and serve ------------------------------------------------------------------------------


def test_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--help"])

    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for command in ("serve", "render", "plan", "crds"):
        assert f"    {command} " in out


def test_a_command_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main([])

    assert exit_info.value.code == 2


def test_serve_refuses_to_start_after_prometheus_client_was_imported(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Metric storage is chosen at import: serving from this process would lose worker metrics.
    __import__("prometheus_client")
    assert "prometheus_client" in sys.modules

    code, _, err = run(capsys, "serve")

    assert code == 1
    assert "fresh process" in err


@pytest.mark.parametrize(
    "argv",
    [["--workers", "0"], ["--max-body-bytes", "-5"], ["--log-level", "loud"]],
    ids=["no-workers", "negative-limit", "unknown-level"],
)
def test_serve_rejects_bad_options(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["serve", *argv])

    assert exit_info.value.code == 2


def test_crds_import_lws_refreshes_the_schema_before_writing(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    calls: list[str] = []
    monkeypatch.setattr(lwsspec, "import_lws", lambda path: calls.append(f"import {path}") or path)
    monkeypatch.setattr(
        crdgen, "write_crds", lambda directory: calls.append(f"write {directory}") or []
    )

    code, out, _ = run(capsys, "crds", "--import-lws", "lws.yaml", "--dir", str(tmp_path))

    assert code == 0
    assert calls == ["import lws.yaml", f"write {tmp_path}"]
    assert "wrote lws.yaml" in out


def test_plan_default_pass_limit_covers_rollouts_longer_than_upstreams_helper_limit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Upstream's test helper stops at 2 * max + 10 = 50 passes; this rollout needs 51 with
    # upstream's step, 52 with role c's floor kept (docs/rollout.md, "Scaling while a rollout
    # runs").
    code, out, _ = run(
        capsys,
        "plan",
        "--old",
        "a=18,b=9,c=4,d=20,e=16",
        "--target",
        "a=4,b=1,c=4,d=20,e=17",
        "--max-surge",
        "a=1,b=0,c=2,d=4,e=5",
        "--max-unavailable",
        "a=4,b=4,c=4,d=1,e=0",
    )
    assert code == 0
    assert "complete after 52 passes" in out


def test_serve_timeout_is_below_metacontrollers_webhook_timeout() -> None:
    assert settings.DEFAULT_TIMEOUT_SECONDS < 10


# --- plan --hold-at ---------------------------------------------------------------------------


def test_plan_marks_the_pass_where_a_held_rollout_stands_still(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(
        capsys,
        "plan",
        "--old",
        "prefill=5,decode=2",
        "--target",
        "prefill=5,decode=2",
        "--max-surge",
        "2",
        "--max-unavailable",
        "1",
        "--hold-at",
        "50%",
    )
    assert code == 0
    rows = [line for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert [row.endswith("<- holds here") for row in rows] == [i == 3 for i in range(7)]
    assert "held at 50%: stands still after pass 3" in out
    assert "complete after 6 passes" in out


@pytest.mark.parametrize(("share", "marked"), [("0%", 0), ("25%", 1), ("100%", None)])
def test_plan_hold_shares_at_the_ends(
    capsys: pytest.CaptureFixture[str], share: str, marked: int | None
) -> None:
    _, out, _ = run(
        capsys,
        "plan",
        "--old",
        "prefill=5,decode=2",
        "--target",
        "prefill=5,decode=2",
        "--max-surge",
        "2",
        "--max-unavailable",
        "1",
        "--hold-at",
        share,
    )
    rows = [line for line in out.splitlines() if line.strip()[:1].isdigit()]
    held = [index for index, row in enumerate(rows) if row.endswith("<- holds here")]
    assert held == ([] if marked is None else [marked])


def test_plan_from_manifests_takes_the_hold_of_the_new_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    old = manifest(
        image="a", replicas={"p": 4, "d": 2}, rolling={"maxSurge": 1, "maxUnavailable": 0}
    )
    new = manifest(
        image="b", replicas={"p": 4, "d": 2}, rolling={"maxSurge": 1, "maxUnavailable": 0}
    )
    new["metadata"]["annotations"] = {api.ANNOTATION_ROLLOUT_HOLD_AT: "50%"}
    code, out, _ = run(
        capsys,
        "plan",
        "--from",
        str(write(tmp_path / "old.yaml", old)),
        "--to",
        str(write(tmp_path / "new.yaml", new)),
    )
    assert code == 0
    assert "held at 50%: stands still after pass" in out


def test_plan_refuses_a_share_that_is_not_a_percentage(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["plan", "--old", "p=1,d=1", "--target", "p=1,d=1", "--hold-at", "150%"])
    assert exit_info.value.code == 2
    assert "'150%' is not a percentage from 0% to 100%" in capsys.readouterr().err
