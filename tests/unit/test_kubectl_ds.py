"""`kubectl ds` (hooks.kubectl.plugin) against a fake `kubectl` on PATH.

The fake is a small script that records its arguments (and standard input, and the patch file
it is given) and answers from JSON files, one answer per call and the last one repeated;
`rollout status` waits on a fake clock, so no test sleeps.
"""

from __future__ import annotations

import copy
import errno
import itertools
import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from hooks import api
from hooks.core import children, history, records
from hooks.gocompat import revision
from hooks.kubectl import client, commands, plugin, rollout, status
from hooks.wire import objects
from tests import builders
from tests.shared import REPO_ROOT

JsonObject = dict[str, Any]
V1, V2, V3 = (f"vllm/vllm-openai:v0.{minor}.0" for minor in (11, 12, 13))
RESOURCE_VERSION = "4711"

FAKE_KUBECTL = """#!{python}
import json, sys
from pathlib import Path

state = Path({state!r})
args = sys.argv[1:]
stdin = sys.stdin.read() if "--filename=-" in args else None
files = [arg.split("=", 1)[1] for arg in args if arg.startswith("--patch-file=")]
patch = Path(files[0]).read_text() if files else None
with (state / "calls.jsonl").open("a") as calls:
    calls.write(json.dumps({{"argv": args, "stdin": stdin, "patch": patch}}) + "\\n")
words = [arg for arg in args if not arg.startswith("-")]
key = " ".join([words[0], *(word.split(".")[0] for word in words[1:2])])
answers = state / (key + ".json")
if not answers.exists():
    sys.exit(print("fake kubectl: no answer for " + key, file=sys.stderr) or 1)
counter = state / (key + ".count")
n = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(n + 1))
queue = json.loads(answers.read_text())
answer = queue[min(n, len(queue) - 1)]
out = answer.get("stdout", "")
sys.stdout.write(out if isinstance(out, str) else json.dumps(out))
sys.stderr.write(answer.get("stderr", ""))
sys.stderr.flush()
sys.stderr.buffer.write(bytes.fromhex(answer.get("stderr_hex", "")))
sys.exit(answer.get("exit", 0))
"""


class FakeKubectl:
    """The fake `kubectl`: `answer("get disaggregatedsets", obj, ...)` queues what the calls
    with that verb and resource print; `calls()` is every call's arguments."""

    def __init__(self, state: Path) -> None:
        self.state = state

    def answer(self, key: str, *answers: JsonObject) -> None:
        keys = {"stdout", "stderr", "stderr_hex", "exit"}
        queue = [a if keys >= a.keys() else {"stdout": a} for a in answers]
        (self.state / f"{key}.json").write_text(json.dumps(queue))
        (self.state / f"{key}.count").unlink(missing_ok=True)

    def fail(self, key: str, stderr: str) -> None:
        self.answer(key, {"stderr": stderr, "exit": 1})

    def calls(self) -> list[JsonObject]:
        path = self.state / "calls.jsonl"
        lines = path.read_text().splitlines() if path.exists() else []
        return [json.loads(line) for line in lines]

    def verbs(self) -> list[str]:
        return [next(a for a in call["argv"] if not a.startswith("-")) for call in self.calls()]

    def written(self, live: JsonObject) -> JsonObject:
        """`live` after the one JSON patch written (`kubectl patch --type=json`), which must
        first test what was read of it."""
        (operations,) = [
            json.loads(call["patch"]) for call in self.calls() if "--type=json" in call["argv"]
        ]
        tests = list(itertools.takewhile(lambda operation: operation["op"] == "test", operations))
        assert tests and all(
            live["metadata"].get(test["path"].removeprefix("/metadata/")) == test["value"]
            for test in tests
        )
        return json_patched(live, operations[len(tests) :])

    def patches(self) -> list[JsonObject]:
        """Every patch written, as kubectl read it from its `--patch-file`."""
        return [json.loads(call["patch"]) for call in self.calls() if call["patch"] is not None]


def json_patched(document: JsonObject, operations: Sequence[JsonObject]) -> JsonObject:
    """`document` after the add, replace and remove operations of a JSON patch (RFC 6902)."""
    result = copy.deepcopy(document)
    for operation in operations:
        *parents, last = [
            part.replace("~1", "/").replace("~0", "~") for part in operation["path"].split("/")[1:]
        ]
        target: Any = result
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        key: Any = int(last) if isinstance(target, list) else last
        if operation["op"] == "remove":
            del target[key]
        elif operation["op"] in ("add", "replace"):
            target[key] = operation["value"]
        else:
            raise AssertionError(f"unexpected operation {operation}")
    return result


@pytest.fixture
def kubectl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeKubectl:
    bin_dir, state = tmp_path / "bin", tmp_path / "state"
    bin_dir.mkdir()
    state.mkdir()
    script = bin_dir / "kubectl"
    script.write_text(FAKE_KUBECTL.format(python=sys.executable, state=str(state)))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    fake = FakeKubectl(state)
    fake.answer("replace", {"stdout": "disaggregatedset.disaggregatedset.x-k8s.io/llm\n"})
    fake.answer("patch disaggregatedsets", {"stdout": "patched\n"})
    fake.answer("create", {"stdout": access_review(allowed=True)})
    return fake


def access_review(*, allowed: bool) -> JsonObject:
    """The API server's answer to a SelfSubjectAccessReview (`kubectl create -o json`)."""
    return {"kind": "SelfSubjectAccessReview", "status": {"allowed": allowed}}


class FakeClock:
    """Time that passes only in `sleep`; a wait that never ends fails the test instead."""

    MAX_SLEEPS = 50

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float, /) -> None:
        self.slept.append(seconds)
        self.now += seconds
        if len(self.slept) > self.MAX_SLEEPS:
            raise AssertionError(f"still waiting after {self.MAX_SLEEPS} polls")


def run(
    capsys: pytest.CaptureFixture[str], *argv: str, clock: FakeClock | None = None
) -> tuple[int, str, str]:
    code = plugin.main(list(argv), clock=clock or FakeClock())
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# --- objects -------------------------------------------------------------------------------------


def roles(image: str, *, prefill: int = 2, decode: int = 1) -> list[JsonObject]:
    return [
        builders.make_role("prefill", replicas=prefill, image=image),
        builders.make_role("decode", replicas=decode, image=image),
    ]


def revision_of(roles_: Sequence[JsonObject]) -> str:
    return revision.compute_revision(
        [(role["name"], role["spec"]["leaderWorkerTemplate"]) for role in roles_]
    )


def a_set(
    roles_: list[JsonObject],
    *,
    generation: int = 2,
    observed: int | None = None,
    conditions: Sequence[tuple[str, str, str, str]] = (),
    rollout: JsonObject | None = None,
    annotations: dict[str, str] | None = None,
    slices: int = 1,
) -> JsonObject:
    """A stored set with `conditions` as (type, status, reason, message)."""
    status: JsonObject = {
        "observedGeneration": generation if observed is None else observed,
        "revision": revision_of(roles_),
        "conditions": [
            {"type": kind, "status": state, "reason": reason, "message": message}
            for kind, state, reason, message in conditions
        ],
    }
    if rollout is not None:
        status["rollout"] = rollout
    ds = builders.make_ds(roles=roles_, generation=generation, status=status, slices=slices)
    ds["metadata"]["resourceVersion"] = RESOURCE_VERSION
    if annotations:
        ds["metadata"]["annotations"] = annotations
    return ds


def record(
    roles_: list[JsonObject], number: int, *, cause: str | None = None, label: str | None = None
) -> JsonObject:
    """A DisaggregatedSetRevision as the hooks write it and the API server returns it."""
    parsed = [api.Role.model_validate(role) for role in roles_]
    name = revision_of(roles_) if label is None else label
    desired = builders.make_record(revision=name, number=number, roles=parsed, change_cause=cause)
    return builders.observe(desired, created=f"2026-11-2{number}T10:00:00Z")


def listing(*items: JsonObject) -> JsonObject:
    return {"apiVersion": "v1", "kind": "List", "items": list(items)}


AVAILABLE = (
    ("Available", "True", "AllRolesReady", "All roles run revision x with every replica ready"),
    ("Progressing", "False", "AllRolesReady", "All roles run revision x with every replica ready"),
    ("Degraded", "False", "AsExpected", "No problems detected"),
)
ROLLING = (
    ("Available", "False", "RolloutInProgress", "Waiting for prefill: 1 updated"),
    ("Progressing", "True", "RolloutInProgress", "Waiting for prefill: 1 updated"),
    ("Degraded", "False", "AsExpected", "No problems detected"),
)


def progressing(state: str, reason: str, message: str) -> tuple[tuple[str, str, str, str], ...]:
    return (
        ("Available", "False", reason, message),
        ("Progressing", state, reason, message),
        ("Degraded", "False", "AsExpected", "No problems detected"),
    )


# --- arguments and kubectl -----------------------------------------------------------------------


def test_connection_flags_go_to_kubectl_before_or_after_the_command(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    kubectl.answer("get disaggregatedsets", a_set(roles(V1)))
    kubectl.answer("get disaggregatedsetrevisions", listing())
    code, _, _ = run(
        capsys, "--kubeconfig", "/tmp/kc", "--context=lab", "rollout", "history", "llm", "-n", "ml"
    )
    assert code == 0
    for call in kubectl.calls():
        assert call["argv"][:3] == ["--kubeconfig=/tmp/kc", "--context=lab", "--namespace=ml"]
    assert kubectl.calls()[0]["argv"][3:] == [
        "get",
        "disaggregatedsets.disaggregatedset.x-k8s.io",
        "llm",
        "--output=json",
    ]
    selector = [a for a in kubectl.calls()[1]["argv"] if a.startswith("--selector=")]
    assert selector == [f"--selector={api.LABEL_NAME}=llm"]


def test_without_connection_flags_kubectl_gets_none(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    kubectl.answer("get disaggregatedsets", a_set(roles(V1)))
    kubectl.answer("get disaggregatedsetrevisions", listing())
    assert run(capsys, "rollout", "history", "llm")[0] == 0
    assert kubectl.calls()[0]["argv"][0] == "get"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["rollout", "status", "llm", "--timeout", "5"], "argument --timeout: '5' is not a"),
        (["rollout", "hold", "llm", "--at", "150%"], "'150%' is not a percentage from 0% to"),
        (["rollout", "hold", "llm", "--at", "50"], "from 0% to 100% (did you mean 50%?)"),
        (["rollout", "partition", "llm", "x"], "argument K: 'x' is not a whole number"),
        (["rollout", "partition", "llm", "1", "--clear"], "give either K or --clear"),
        (["rollout", "partition", "llm"], "give either K or --clear"),
        (["rollout", "undo", "llm", "--to-revision", "-1"], "argument --to-revision:"),
        (["rollout", "history", "llm", "--bogus"], "unrecognized arguments: --bogus"),
        (["rollout", "partition", "llm", "\u00b2"], "argument K: '\u00b2' is not a whole number"),
        (["rollout", "history", "llm", "--revision", "\u0663"], "'\u0663' is not a whole number"),
    ],
    ids=[
        "duration",
        "hold-over-100",
        "hold-no-percent",
        "partition",
        "both",
        "neither",
        "negative-revision",
        "unknown",
        "superscript-digit",
        "arabic-indic-digit",
    ],
)
def test_usage_errors_exit_2_with_one_line_naming_the_command(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as exit_:
        run(capsys, *argv)
    assert exit_.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith(f"kubectl ds rollout {argv[1]}: error: "), last
    assert message in last
    assert kubectl.calls() == []


def test_a_kubectl_failure_is_one_line_in_kubectls_words(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    kubectl.fail(
        "get disaggregatedsets",
        'Error from server (NotFound): disaggregatedsets.disaggregatedset.x-k8s.io "llm" not '
        "found\n",
    )
    code, out, err = run(capsys, "rollout", "status", "llm")
    assert (code, out) == (1, "")
    assert err == (
        "kubectl ds rollout status: error: Error from server (NotFound): "
        'disaggregatedsets.disaggregatedset.x-k8s.io "llm" not found\n'
    )


def test_without_kubectl_on_path_it_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    code, _, err = run(capsys, "rollout", "pause", "llm")
    assert code == 1
    assert err == (
        "kubectl ds rollout pause: error: kubectl is not on PATH, and kubectl ds works through it\n"
    )


def test_issue33_item4_patches_go_to_kubectl_in_a_file_that_is_gone_afterwards(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: patches went on kubectl's command line (`--patch=...`), where Linux takes no
    argument over 128 KiB."""
    kubectl.answer("get disaggregatedsets", a_set(roles(V1)))
    assert run(capsys, "rollout", "pause", "llm")[0] == 0
    (call,) = [call for call in kubectl.calls() if "patch" in call["argv"]]
    assert not [arg for arg in call["argv"] if arg.startswith(("--patch=", "-p"))]
    (path,) = [arg.split("=", 1)[1] for arg in call["argv"] if arg.startswith("--patch-file=")]
    assert json.loads(call["patch"]) == {
        "metadata": {"annotations": {api.ANNOTATION_PAUSED: "true"}}
    }
    assert not Path(path).exists()


@pytest.mark.parametrize(
    "error",
    [
        OSError(errno.E2BIG, "Argument list too long"),
        OSError(errno.ENOMEM, "Cannot allocate memory"),
    ],
    ids=["e2big", "enomem"],
)
def test_issue33_item4_a_kubectl_that_cannot_be_run_is_one_line_and_exit_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], error: OSError
) -> None:
    """Regression: `OSError: [Errno 7] Argument list too long: 'kubectl'` was a traceback."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr(subprocess, "run", refuse)
    code, out, err = run(capsys, "rollout", "undo", "llm")
    assert (code, out) == (1, "")
    assert (
        err == f"kubectl ds rollout undo: error: kubectl get could not be run: {error.strerror}\n"
    )


def test_a_kubectl_that_is_not_executable_is_one_line_and_exit_1(
    kubectl: FakeKubectl, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bin_dir = os.environ["PATH"].split(os.pathsep)[0]
    (Path(bin_dir) / "kubectl").chmod(0o644)
    monkeypatch.setenv("PATH", bin_dir)
    code, out, err = run(capsys, "rollout", "resume", "llm")
    assert (code, out) == (1, "")
    assert err == (
        "kubectl ds rollout resume: error: kubectl get could not be run: Permission denied\n"
    )


def test_kubectl_output_that_is_no_utf8_is_read_not_a_traceback(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    kubectl.answer("get disaggregatedsets", {"stderr_hex": "4572726f723a20ff0a", "exit": 1})
    code, out, err = run(capsys, "rollout", "history", "llm")
    assert (code, out) == (1, "")
    assert err == "kubectl ds rollout history: error: Error: \ufffd\n"


def test_the_console_script_is_kubectl_ds() -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["kubectl-ds"] == "hooks.kubectl.plugin:main"


# --- plan and render -----------------------------------------------------------------------------


def test_plan_and_render_are_the_hooks_own(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = run(
        capsys, "plan", "--old", "prefill=2,decode=1", "--target", "prefill=2,decode=1"
    )
    assert code == 0 and "complete after" in out
    manifest = tmp_path / "llm.yaml"
    manifest.write_text(yaml.safe_dump({**builders.make_ds(), "metadata": {"name": "llm"}}))
    code, out, _ = run(capsys, "render", str(manifest))
    assert code == 0 and "LeaderWorkerSet" in out
    code, _, err = run(capsys, "plan", "--old", "prefill=2")
    assert (code, err) == (2, "kubectl ds plan: error: --old and --target go together\n")
    assert kubectl.calls() == []


def test_plan_help_shows_kubectl_ds_examples(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        run(capsys, "plan", "--help")
    assert "  kubectl ds plan --from old.yaml --to new.yaml" in capsys.readouterr().out


# --- history -------------------------------------------------------------------------------------


def test_history_lists_the_records_by_number_with_the_current_one_marked(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    foreign = record(roles(V3), 9)
    foreign["metadata"]["ownerReferences"][0]["uid"] = "someone-else"
    renamed = record(roles(V3), 8)
    renamed["metadata"]["name"] = "llm-renamed"
    kubectl.answer("get disaggregatedsets", a_set(roles(V1)))
    kubectl.answer(
        "get disaggregatedsetrevisions",
        listing(
            record(roles(V1), 3, cause="back to 0.11"),
            foreign,
            record(roles(V2), 2),
            renamed,
        ),
    )
    code, out, err = run(capsys, "rollout", "history", "llm")
    # Neither the record another object controls nor the renamed one counts; both are named.
    assert (code, err) == (
        0,
        f"kubectl ds rollout history: note: llm-{revision_of(roles(V3))} is not counted: it is"
        " not controlled by this DisaggregatedSet\n"
        "kubectl ds rollout history: note: llm-renamed is not counted: its name is not"
        " <set>-<its label disaggregatedset.x-k8s.io/revision> "
        f"({revision_of(roles(V3))!r})\n",
    )
    first, second = revision_of(roles(V2)), revision_of(roles(V1))
    assert out.splitlines() == [
        "REVISION  HASH      CHANGE-CAUSE  CREATED",
        f"2         {first}  <none>        2026-11-22T10:00:00Z",
        f"3         {second}  back to 0.11  2026-11-23T10:00:00Z  (current)",
    ]


def test_history_notes_a_spec_revision_not_recorded_yet(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    kubectl.answer("get disaggregatedsets", a_set(roles(V2)))
    kubectl.answer("get disaggregatedsetrevisions", listing(record(roles(V1), 1)))
    code, out, err = run(capsys, "rollout", "history", "llm")
    assert code == 0 and "(current)" not in out
    assert err == (
        f"kubectl ds rollout history: note: the spec's revision {revision_of(roles(V2))} is not "
        "recorded yet (its rollout starts)\n"
    )


def test_history_of_one_revision_prints_its_roles_and_templates(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    kubectl.answer("get disaggregatedsets", a_set(roles(V2)))
    kubectl.answer(
        "get disaggregatedsetrevisions",
        listing(record(roles(V1), 1, cause="first"), record(roles(V2), 2)),
    )
    code, out, _ = run(capsys, "rollout", "history", "llm", "--revision", "1")
    assert code == 0
    detail = yaml.safe_load(out)
    assert detail["revision"] == 1 and detail["hash"] == revision_of(roles(V1))
    assert detail["changeCause"] == "first" and "current" not in detail
    assert [role["spec"] for role in detail["roles"]] == [role["spec"] for role in roles(V1)]


def test_history_of_an_unknown_revision_names_the_known_ones(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    kubectl.answer("get disaggregatedsets", a_set(roles(V2)))
    kubectl.answer(
        "get disaggregatedsetrevisions", listing(record(roles(V1), 1), record(roles(V2), 2))
    )
    code, _, err = run(capsys, "rollout", "history", "llm", "--revision", "7")
    assert (code, err) == (
        1,
        "kubectl ds rollout history: error: revision 7 is not in the history (revisions: 1, 2)\n",
    )


def test_a_set_without_history_says_so(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    kubectl.answer("get disaggregatedsets", a_set(roles(V1)))
    kubectl.answer("get disaggregatedsetrevisions", listing())
    assert run(capsys, "rollout", "history", "llm")[:2] == (
        0,
        "No rollout history found for llm.\n",
    )


# --- undo ----------------------------------------------------------------------------------------


def test_undo_restores_the_previous_templates_and_keeps_replicas_and_scaling(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    old = roles(V1, prefill=2, decode=1)
    now = roles(V2, prefill=5, decode=3)
    now[1]["scaling"] = {"mode": "External"}
    now[0]["spec"]["rolloutStrategy"] = {
        "type": "RollingUpdate",
        "rollingUpdateConfiguration": {"maxSurge": 2, "maxUnavailable": 0},
    }
    now[0]["metadata"] = {"labels": {"team": "serving"}}
    live = a_set(now)
    kubectl.answer("get disaggregatedsets", live)
    kubectl.answer("get disaggregatedsetrevisions", listing(record(old, 1), record(now, 2)))
    kubectl.answer("get leaderworkersets", listing())
    code, out, err = run(capsys, "rollout", "undo", "llm")
    assert (code, err) == (0, "")
    assert "--show-managed-fields" in kubectl.calls()[0]["argv"]
    written = kubectl.written(live)
    assert written["status"] == live["status"]
    restored = written["spec"]["roles"]
    assert [role["name"] for role in restored] == ["prefill", "decode"]
    for role, before, after in zip(restored, now, old, strict=True):
        template = role["spec"].pop("leaderWorkerTemplate")
        assert template == after["spec"]["leaderWorkerTemplate"]
        before_spec = dict(before["spec"])
        before_spec.pop("leaderWorkerTemplate")
        assert role["spec"] == before_spec  # replicas, rollout strategy, the rest kept
        assert role.get("scaling") == before.get("scaling")
        assert role.get("metadata") == before.get("metadata")
    assert written["spec"]["slices"] == 1
    old_revision = revision_of(old)
    assert out.splitlines()[0] == (
        f"llm rolled back to revision 1 ({old_revision}) from {revision_of(now)}"
    )
    assert "  role prefill: leaderWorkerTemplate restored" in out


def test_undo_restores_removed_roles_drops_new_ones_and_takes_the_revisions_order(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    encode = builders.make_role("encode", replicas=4, image=V1, labels={"tier": "vision"})
    encode["scaling"] = {"mode": "Static"}
    old = [*roles(V1), encode]
    router = builders.make_role("router", replicas=1, image=V2)
    now = [roles(V2, decode=6)[1], roles(V2, prefill=7)[0], router]  # decode, prefill, router
    live = a_set(now)
    kubectl.answer("get disaggregatedsets", live)
    recorded = record(old, 1)
    kubectl.answer("get disaggregatedsetrevisions", listing(recorded, record(now, 2)))
    kubectl.answer("get leaderworkersets", listing())
    code, out, _ = run(capsys, "rollout", "undo", "llm")
    assert code == 0
    restored = kubectl.written(live)["spec"]["roles"]
    assert [role["name"] for role in restored] == ["prefill", "decode", "encode"]
    assert [role["spec"]["replicas"] for role in restored] == [7, 6, 4]
    assert restored[2] == builders.record_roles(recorded)[2]  # name, metadata, scaling, spec
    assert restored[2]["metadata"]["labels"] == {"tier": "vision"}
    assert revision_of(restored) == revision_of(old)
    assert "  role encode: added back as revision 1 records it" in out
    assert "  role router: removed (not in revision 1)" in out
    assert "  role order: prefill, decode, encode" in out


def test_undo_to_a_given_revision_and_the_change_cause_follows_it(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    now = roles(V3)
    live = a_set(now, annotations={api.CHANGE_CAUSE_ANNOTATION: "v3"})
    kubectl.answer("get disaggregatedsets", live)
    kubectl.answer(
        "get disaggregatedsetrevisions",
        listing(record(roles(V1), 1, cause="v1"), record(roles(V2), 2), record(now, 3, cause="v3")),
    )
    kubectl.answer(
        "get leaderworkersets",
        listing(builders.make_lws("prefill", revision=revision_of(roles(V1)))),
    )
    code, out, _ = run(capsys, "rollout", "undo", "llm", "--to-revision", "1")
    assert code == 0
    written = kubectl.written(live)
    assert revision_of(written["spec"]["roles"]) == revision_of(roles(V1))
    assert written["metadata"]["annotations"][api.CHANGE_CAUSE_ANNOTATION] == "v1"
    assert "the set goes back to them at once" in out
    # Back to revision 2, which has no cause: the set's goes, so the record keeps its own.
    (kubectl.state / "calls.jsonl").unlink()
    assert run(capsys, "rollout", "undo", "llm", "--to-revision", "2")[0] == 0
    assert written["metadata"]["annotations"] == {api.CHANGE_CAUSE_ANNOTATION: "v1"}
    assert kubectl.written(live)["metadata"]["annotations"] == {}


def test_undo_with_the_current_revision_unrecorded_goes_to_the_latest_record(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    live = a_set(roles(V3))
    kubectl.answer("get disaggregatedsets", live)
    kubectl.answer(
        "get disaggregatedsetrevisions", listing(record(roles(V2), 1), record(roles(V1), 2))
    )
    kubectl.answer("get leaderworkersets", listing())
    assert run(capsys, "rollout", "undo", "llm")[0] == 0
    assert revision_of(kubectl.written(live)["spec"]["roles"]) == revision_of(roles(V1))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--to-revision", "7"], "revision 7 is not in the history (revisions: 1, 2)"),
        (["--to-revision", "2"], "revision 2 ({now}) is already the current revision"),
    ],
    ids=["unknown", "current"],
)
def test_undo_refuses_an_unknown_or_current_revision_and_writes_nothing(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    now = roles(V2)
    kubectl.answer("get disaggregatedsets", a_set(now))
    kubectl.answer("get disaggregatedsetrevisions", listing(record(roles(V1), 1), record(now, 2)))
    code, out, err = run(capsys, "rollout", "undo", "llm", *argv)
    assert (code, out) == (1, "")
    assert err == f"kubectl ds rollout undo: error: {message.format(now=revision_of(now))}\n"
    assert "patch" not in kubectl.verbs()


def test_undo_refuses_without_an_earlier_revision(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    now = roles(V1)
    kubectl.answer("get disaggregatedsets", a_set(now))
    kubectl.answer("get disaggregatedsetrevisions", listing(record(now, 1)))
    code, _, err = run(capsys, "rollout", "undo", "llm")
    assert code == 1
    assert err == (
        "kubectl ds rollout undo: error: no revision before the current one "
        f"({revision_of(now)}) in the history\n"
    )


def test_undo_of_a_set_without_history_says_why_it_has_none(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    now = roles(V2)
    live = a_set(now)
    live["status"]["history"] = history.NOT_KEPT
    kubectl.answer("get disaggregatedsets", live)
    kubectl.answer("get disaggregatedsetrevisions", listing())
    code, _, err = run(capsys, "rollout", "undo", "llm")
    assert code == 1
    assert err == (
        "kubectl ds rollout undo: error: no revision before the current one "
        f"({revision_of(now)}) in the history (its status.history: {history.NOT_KEPT})\n"
    )
    assert "patch" not in kubectl.verbs()


def test_issue25_item3_undo_never_restores_a_record_that_does_not_count(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    """A record named and labelled 0badc0de whose roles hash to another revision: the plugin
    reads records with the hooks' predicate, so it is neither listed nor restored."""
    forged = record(roles(V1), 1, label="0badc0de")
    forged["metadata"]["name"] = "llm-0badc0de"
    kubectl.answer("get disaggregatedsets", a_set(roles(V2)))
    kubectl.answer("get disaggregatedsetrevisions", listing(forged, record(roles(V2), 2)))
    code, _, err = run(capsys, "rollout", "undo", "llm")
    assert code == 1
    assert err == (
        "kubectl ds rollout undo: note: llm-0badc0de is not counted: the roles it stores hash to"
        f" revision {revision_of(roles(V1))}, not 0badc0de\n"
        "kubectl ds rollout undo: error: no revision before the current one "
        f"({revision_of(roles(V2))}) in the history\n"
    )
    assert "patch" not in kubectl.verbs()


def test_issue25_item4_undo_refuses_a_history_with_two_records_of_one_number(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    kubectl.answer("get disaggregatedsets", a_set(roles(V3)))
    kubectl.answer(
        "get disaggregatedsetrevisions", listing(record(roles(V1), 2), record(roles(V2), 2))
    )
    code, _, err = run(capsys, "rollout", "undo", "llm")
    assert code == 1
    first, second = sorted(revision_of(roles(image)) for image in (V1, V2))
    assert err.endswith(
        "kubectl ds rollout undo: error: the history cannot tell which revision is newer"
        f" (llm-{first} and llm-{second} both hold number 2): nothing was changed\n"
    )
    assert "patch" not in kubectl.verbs()


def undo_history(kubectl: FakeKubectl) -> None:
    """Revisions V1 (1) and V2 (2) recorded, no LWS: what an undo of `a_set(roles(V2))` reads."""
    kubectl.answer(
        "get disaggregatedsetrevisions", listing(record(roles(V1), 1), record(roles(V2), 2))
    )
    kubectl.answer("get leaderworkersets", listing())


def moved(version: int) -> JsonObject:
    """`a_set(roles(V2))` after a status write: resourceVersion `version`."""
    found = a_set(roles(V2), conditions=AVAILABLE)
    found["metadata"]["resourceVersion"] = str(version)
    return found


REFUSED = "the server rejected our request due to an error in our request\n"


def test_undo_reports_a_set_changed_meanwhile_and_writes_nothing(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    """The set read again right before the write has another generation: nothing is written."""
    changed = a_set(roles(V2))
    changed["metadata"]["resourceVersion"] = "4712"
    changed["metadata"]["generation"] = changed["metadata"].get("generation", 1) + 1
    kubectl.answer("get disaggregatedsets", a_set(roles(V2)), changed)
    undo_history(kubectl)
    code, out, err = run(capsys, "rollout", "undo", "llm")
    assert (code, out) == (1, "")
    assert err == (
        "kubectl ds rollout undo: error: llm changed while undo ran, so nothing was written: "
        "run undo again\n"
    )
    assert "patch" not in kubectl.verbs()


def test_undo_writes_again_while_only_the_status_moves_under_its_writes(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    """Right after a large set rolled out, Metacontroller rewrites its status several times a
    second (docs/safety.md, "What the real stack adds"), and a write that carries the
    resourceVersion read (a server-side apply, the patch of a set without annotations) fails on
    each. Each try reads only the set, right before its write, and tries again while only the
    status moved (it gave up after 3 reads of set, history and LWS)."""
    failures = commands.UNDO_ATTEMPTS - 1
    kubectl.answer(
        "get disaggregatedsets", a_set(roles(V2)), *(moved(4712 + n) for n in range(failures + 1))
    )
    undo_history(kubectl)
    refused = {"stderr": REFUSED, "exit": 1}
    kubectl.answer("patch disaggregatedsets", *[refused] * failures, {"stdout": "patched\n"})
    code, out, err = run(capsys, "rollout", "undo", "llm")
    assert (code, err) == (0, "")
    assert out.startswith("llm rolled back to revision 1")
    tests = [patch[0] for patch in kubectl.patches()]
    assert tests == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": str(4712 + n)}
        for n in range(failures + 1)
    ]
    words = [[arg for arg in call["argv"] if not arg.startswith("-")] for call in kubectl.calls()]
    assert [verb[:2] for verb in words].count(["get", client.REVISIONS]) == 1


def test_undo_gives_up_when_the_status_keeps_moving(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    attempts = commands.UNDO_ATTEMPTS
    kubectl.answer(
        "get disaggregatedsets", a_set(roles(V2)), *(moved(4712 + n) for n in range(attempts))
    )
    undo_history(kubectl)
    kubectl.fail("patch disaggregatedsets", REFUSED)
    code, out, err = run(capsys, "rollout", "undo", "llm")
    assert (code, out) == (1, "")
    assert err == (
        "kubectl ds rollout undo: error: llm's status kept changing while undo ran, so nothing"
        " was written: run undo again\n"
    )
    assert kubectl.verbs().count("patch") == attempts


def test_undo_reports_a_refused_write_of_a_set_that_did_not_move(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    """A write that fails while the set stays as read is not retried: kubectl's error shows."""
    kubectl.answer("get disaggregatedsets", a_set(roles(V2)))
    undo_history(kubectl)
    kubectl.fail("patch disaggregatedsets", "Error from server (Forbidden): no\n")
    code, out, err = run(capsys, "rollout", "undo", "llm")
    assert (code, out) == (1, "")
    assert "Forbidden" in err and "kept changing" not in err
    assert kubectl.verbs().count("patch") == 1


def test_undo_while_paused_says_once_that_the_rollback_starts_on_resume(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: a paused set whose old LWS still ran was told both that it goes back to them
    at once and that the rollback starts on resume."""
    paused = {api.ANNOTATION_PAUSED: "true"}
    kubectl.answer("get disaggregatedsets", a_set(roles(V2), annotations=paused))
    kubectl.answer(
        "get disaggregatedsetrevisions", listing(record(roles(V1), 1), record(roles(V2), 2))
    )
    kubectl.answer(
        "get leaderworkersets",
        listing(builders.make_lws("prefill", revision=revision_of(roles(V1)))),
    )
    code, out, err = run(capsys, "rollout", "undo", "llm")
    assert (code, err) == (0, "")
    assert "  llm is paused: the rollback starts on `kubectl ds rollout resume llm`" in out
    assert "at once" not in out


# --- status --------------------------------------------------------------------------------------


def lws(role: str, rev: str, replicas: int, ready: int, *, slice_index: int = 0) -> JsonObject:
    return builders.make_lws(
        role, revision=rev, replicas=replicas, ready=ready, slice_index=slice_index
    )


def test_status_prints_progress_as_it_changes_and_exits_0_once_available(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new = revision_of(roles(V1)), revision_of(roles(V2))
    rolling = a_set(
        roles(V2),
        conditions=ROLLING,
        rollout={
            "revision": new,
            "slices": [{"index": 0, "phase": "Rolling", "revisions": [old, new]}],
        },
    )
    kubectl.answer(
        "get disaggregatedsets", rolling, rolling, rolling, a_set(roles(V2), conditions=AVAILABLE)
    )
    kubectl.answer(
        "get leaderworkersets",
        listing(
            lws("prefill", old, 2, 2),
            lws("decode", old, 1, 1),
            lws("prefill", new, 1, 0),
            lws("decode", new, 0, 0),
        ),
        listing(
            lws("prefill", old, 2, 2),
            lws("decode", old, 1, 1),
            lws("prefill", new, 1, 0),
            lws("decode", new, 0, 0),
        ),
        listing(
            lws("prefill", old, 1, 1),
            lws("decode", old, 1, 1),
            lws("prefill", new, 1, 1),
            lws("decode", new, 1, 1),
        ),
        listing(lws("prefill", new, 2, 2), lws("decode", new, 1, 1)),
    )
    clock = FakeClock()
    code, out, err = run(capsys, "rollout", "status", "llm", clock=clock)
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        f"waiting for llm to roll out to revision {new}: Waiting for prefill: 1 updated",
        "slice 0 Rolling: prefill old 2/2 new 0/1, decode old 1/1 new 0/0",
        "slice 0 Rolling: prefill old 1/1 new 1/1, decode old 1/1 new 1/1",
        "slice 0 Steady: prefill old 0/0 new 2/2, decode old 0/0 new 1/1",
        f"llm successfully rolled out to revision {new}",
    ]
    assert clock.slept == [1.0, 1.0, 1.0]


def test_issue25_item10_status_says_when_a_hold_does_not_apply_to_a_rollback(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    """The hooks say in Progressing that the target is a rollback, which the hold does not
    hold; `rollout status` prints it while it waits."""
    old, new = revision_of(roles(V2)), revision_of(roles(V1))
    note = (
        f"Waiting for prefill: 1 updated (a rollback to revision {new}, which annotation"
        f" {api.ANNOTATION_ROLLOUT_HOLD_AT} (25%) does not hold)"
    )
    rolling = a_set(
        roles(V1),
        conditions=progressing("True", "RolloutInProgress", note),
        annotations={api.ANNOTATION_ROLLOUT_HOLD_AT: "25%"},
        rollout={
            "revision": new,
            "slices": [{"index": 0, "phase": "Rolling", "revisions": [old, new]}],
        },
    )
    kubectl.answer("get disaggregatedsets", rolling, a_set(roles(V1), conditions=AVAILABLE))
    kubectl.answer(
        "get leaderworkersets",
        listing(lws("prefill", old, 1, 1), lws("prefill", new, 1, 1)),
        listing(lws("prefill", new, 2, 2), lws("decode", new, 1, 1)),
    )
    code, out, _ = run(capsys, "rollout", "status", "llm", clock=FakeClock())
    assert code == 0
    assert out.splitlines()[0] == f"waiting for llm to roll out to revision {new}: {note}"


def test_status_waits_for_the_controller_to_see_the_generation(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = a_set(roles(V2), generation=3, observed=2, conditions=AVAILABLE)
    kubectl.answer(
        "get disaggregatedsets", stale, a_set(roles(V2), generation=3, conditions=AVAILABLE)
    )
    kubectl.answer("get leaderworkersets", listing())
    code, out, _ = run(capsys, "rollout", "status", "llm")
    assert code == 0
    assert out.splitlines()[0] == "waiting for the controller to see generation 3"


def upstreams(roles_: list[JsonObject], *, available: bool) -> JsonObject:
    """The set as upstream's controller keeps its status: conditions, observedGeneration and
    roleStatuses, no revision."""
    state = ("True", "False") if available else ("False", "True")
    reason = "AllRolesReady" if available else "RolloutInProgress"
    ds = a_set(
        roles_,
        conditions=[
            ("Available", state[0], reason, "All roles have reached their desired replica count"),
            ("Progressing", state[1], reason, "Not all roles have reached it"),
        ],
    )
    del ds["status"]["revision"]
    return ds


def test_issue33_item7_status_of_a_set_another_controller_runs_says_its_status_has_no_revision(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: under upstream's controller it printed "successfully rolled out to revision
    None" and every group as old. The spec's revision now tells new LWS from old."""
    old, new = revision_of(roles(V1)), revision_of(roles(V2))
    kubectl.answer(
        "get disaggregatedsets",
        upstreams(roles(V2), available=False),
        upstreams(roles(V2), available=True),
    )
    kubectl.answer(
        "get leaderworkersets",
        listing(lws("prefill", old, 1, 1), lws("prefill", new, 2, 1), lws("decode", new, 1, 1)),
        listing(lws("prefill", new, 2, 2), lws("decode", new, 1, 1)),
    )
    code, out, err = run(capsys, "rollout", "status", "llm")
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        f"waiting for llm to roll out to revision {new}: Not all roles have reached it",
        "the status of llm names no revision: these hooks, which always write one, do not run it"
        f" (upstream's controller writes none); the LWS of the spec's revision, {new}, count as"
        " new",
        "slice 0 Coming up: prefill old 1/1 new 1/2, decode old 0/0 new 1/1",
        "slice 0 Steady: prefill old 0/0 new 2/2, decode old 0/0 new 1/1",
        f"llm is Available, as its status says (it names no revision; the spec's is {new})",
    ]
    assert "None" not in out


def test_status_of_a_set_whose_status_names_no_revision_and_whose_spec_is_not_valid(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    invalid = upstreams(roles(V1), available=True)
    invalid["spec"]["slices"] = True
    kubectl.answer("get disaggregatedsets", invalid)
    kubectl.answer("get leaderworkersets", listing(lws("prefill", revision_of(roles(V1)), 2, 2)))
    code, out, _ = run(capsys, "rollout", "status", "llm")
    assert code == 0
    first, *_, last = out.splitlines()
    assert first.startswith("the status of llm names no revision: these hooks")
    assert first.endswith(": every LWS counts as old")
    assert "and the spec of llm is not valid (spec.slices: " in first
    assert last == (
        "llm is Available, as its status says (it names no revision; the spec's cannot be computed)"
    )


def test_a_paused_rollout_keeps_status_waiting_until_it_completes(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    paused = a_set(
        roles(V2),
        conditions=progressing("Unknown", "RolloutPaused", "Rollout to revision x is paused"),
    )
    kubectl.answer(
        "get disaggregatedsets",
        paused,
        paused,
        paused,
        a_set(roles(V2), conditions=ROLLING),
        a_set(roles(V2), conditions=AVAILABLE),
    )
    kubectl.answer("get leaderworkersets", listing())
    clock = FakeClock()
    code, out, _ = run(capsys, "rollout", "status", "llm", clock=clock)
    assert code == 0
    assert out.splitlines()[0] == "llm rollout is paused: Rollout to revision x is paused"
    assert out.splitlines()[-1].startswith("llm successfully rolled out to revision ")
    assert len(clock.slept) == 4


HELD_MESSAGE = (
    "slice 0 holds at 50% of revision x (prefill 1/2, decode 1/1), both revisions serving"
)


def held_set(hold_at: str, *, roles_: list[JsonObject] | None = None) -> JsonObject:
    """Slice 0 of a set held (its status says so) with annotation rollout-hold-at `hold_at`."""
    old, new = revision_of(roles(V1)), revision_of(roles(V2))
    return a_set(
        roles(V2) if roles_ is None else roles_,
        conditions=progressing("Unknown", "RolloutHeld", HELD_MESSAGE),
        rollout={
            "revision": new,
            "slices": [{"index": 0, "phase": "Held", "revisions": [old, new]}],
        },
        annotations={api.ANNOTATION_ROLLOUT_HOLD_AT: hold_at},
    )


def test_a_held_rollout_is_reported_as_held_with_exit_0_once_the_new_groups_are_ready(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new = revision_of(roles(V1)), revision_of(roles(V2))
    kubectl.answer("get disaggregatedsets", held_set("50%"))
    at_half = [lws("prefill", old, 1, 1), lws("decode", old, 1, 1), lws("decode", new, 1, 1)]
    kubectl.answer(
        "get leaderworkersets",
        listing(*at_half, lws("prefill", new, 1, 0)),  # not ready yet: wait
        listing(*at_half, lws("prefill", new, 1, 1)),
    )
    clock = FakeClock()
    code, out, err = run(capsys, "rollout", "status", "llm", clock=clock)
    assert (code, err, clock.slept) == (0, "", [1.0])
    lines = out.splitlines()
    assert f"llm rollout to revision {new} is held: {HELD_MESSAGE}" in lines
    assert lines[-1].startswith("not a failure: the rollout stands on purpose, where a canary")


@pytest.mark.parametrize("recorded", [True, False], ids=["old-recorded", "old-unrecorded"])
def test_issue33_item5_a_held_rollout_advertises_an_undo_only_when_one_can_be_done(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str], recorded: bool
) -> None:
    """Regression: a held rollout whose old revision had no record still said `undo` goes
    back, and undo then failed."""
    old, new = revision_of(roles(V1)), revision_of(roles(V2))
    kubectl.answer("get disaggregatedsets", held_set("50%"))
    ready = [lws(role, revision, 1, 1) for role in ("prefill", "decode") for revision in (old, new)]
    kubectl.answer("get leaderworkersets", listing(*ready))
    records_ = [record(roles(V1), 1)] if recorded else []
    kubectl.answer("get disaggregatedsetrevisions", listing(*records_, record(roles(V2), 2)))
    code, out, _ = run(capsys, "rollout", "status", "llm")
    assert code == 0
    last = out.splitlines()[-1]
    if recorded:
        assert last.endswith(f"`kubectl ds rollout undo llm` goes back to revision 1 ({old})")
    else:
        assert last.endswith(
            "and `kubectl ds rollout undo llm` has nothing to go back to (no revision before the"
            f" current one ({new}) in the history)"
        )


def test_a_hold_raised_is_not_reported_until_the_new_revision_reaches_it(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    """The status still says held at 25% (prefill 1 of 4) after `hold --at 50%`."""
    wide = roles(V2, prefill=4, decode=2)
    old, new = revision_of(roles(V1)), revision_of(wide)
    kubectl.answer("get disaggregatedsets", held_set("50%", roles_=wide))
    decode = [lws("decode", old, 1, 1), lws("decode", new, 1, 1)]
    kubectl.answer(
        "get leaderworkersets",
        listing(*decode, lws("prefill", old, 4, 4), lws("prefill", new, 1, 1)),
        listing(*decode, lws("prefill", old, 3, 3), lws("prefill", new, 2, 2)),
    )
    clock = FakeClock()
    code, out, _ = run(capsys, "rollout", "status", "llm", clock=clock)
    assert (code, clock.slept) == (0, [1.0])
    assert f"llm rollout to revision {new} is held: " in out


def test_a_hold_just_released_is_not_reported_as_held(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    """An annotation change keeps the generation: until the hooks see the release, the status
    still says RolloutHeld, and status must wait instead of reporting the old hold."""
    stale = held_set("50%")
    stale["metadata"].pop("annotations")
    kubectl.answer("get disaggregatedsets", stale, stale, a_set(roles(V2), conditions=AVAILABLE))
    kubectl.answer("get leaderworkersets", listing())
    clock = FakeClock()
    code, out, _ = run(capsys, "rollout", "status", "llm", clock=clock)
    assert (code, len(clock.slept)) == (0, 2)
    assert "is held" not in out
    assert out.splitlines()[-1].startswith("llm successfully rolled out to revision ")


PARTITIONED_MESSAGE = "slice 1 is past annotation disaggregatedset.x-k8s.io/rollout-partition"


def partitioned_set(partition: str) -> JsonObject:
    """Two slices, slice 1 partitioned (its status says so), annotation rollout-partition."""
    old, new = revision_of(roles(V1)), revision_of(roles(V2))
    return a_set(
        roles(V2),
        slices=2,
        rollout={
            "revision": new,
            "slices": [{"index": 1, "phase": "Partitioned", "revisions": [old]}],
        },
        conditions=progressing("Unknown", "RolloutPartitioned", PARTITIONED_MESSAGE),
        annotations={api.ANNOTATION_ROLLOUT_PARTITION: partition},
    )


def test_a_partitioned_rollout_is_reported_as_partitioned_with_exit_0(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new = revision_of(roles(V1)), revision_of(roles(V2))
    kubectl.answer("get disaggregatedsets", partitioned_set("1"))
    kubectl.answer(
        "get leaderworkersets",
        listing(lws("prefill", new, 2, 2), lws("prefill", old, 2, 2, slice_index=1)),
    )
    code, out, _ = run(capsys, "rollout", "status", "llm")
    assert code == 0
    assert out.splitlines()[:3] == [
        "slice 0 Steady: prefill old 0/0 new 2/2, decode old 0/0 new 0/0",
        "slice 1 Partitioned: prefill old 2/2 new 0/0, decode old 0/0 new 0/0",
        f"llm rollout to revision {new} is partitioned: {PARTITIONED_MESSAGE}",
    ]


@pytest.mark.parametrize("partition", [None, "2"], ids=["cleared", "raised"])
def test_a_partition_changed_is_not_reported_from_the_status_before_it(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str], partition: str | None
) -> None:
    stale = partitioned_set("1")
    if partition is None:
        stale["metadata"].pop("annotations")
    else:
        stale["metadata"]["annotations"][api.ANNOTATION_ROLLOUT_PARTITION] = partition
    kubectl.answer("get disaggregatedsets", stale, a_set(roles(V2), slices=2, conditions=AVAILABLE))
    kubectl.answer("get leaderworkersets", listing())
    clock = FakeClock()
    code, out, _ = run(capsys, "rollout", "status", "llm", clock=clock)
    assert (code, len(clock.slept)) == (0, 1)
    assert "is partitioned" not in out


@pytest.mark.parametrize(
    ("conditions", "message"),
    [
        (
            progressing(
                "False",
                "ProgressDeadlineExceeded",
                "Rollout to revision x made no progress since T",
            ),
            "llm exceeded its progress deadline: Rollout to revision x made no progress since T",
        ),
        (
            (
                *ROLLING[:2],
                ("Degraded", "True", "ChildNotCreated", "LWS llm-0-x-prefill is not ours"),
            ),
            "llm is Degraded (ChildNotCreated): LWS llm-0-x-prefill is not ours",
        ),
        (
            progressing("False", "RoleScaledToZero", "decode is at 0 groups while prefill 4 run"),
            "llm cannot be Available: decode is at 0 groups while prefill 4 run",
        ),
    ],
    ids=["deadline-exceeded", "degraded", "role-scaled-to-zero"],
)
def test_status_fails_with_the_conditions_message(
    kubectl: FakeKubectl,
    capsys: pytest.CaptureFixture[str],
    conditions: tuple[tuple[str, str, str, str], ...],
    message: str,
) -> None:
    kubectl.answer(
        "get disaggregatedsets",
        a_set(roles(V2), conditions=ROLLING),
        a_set(roles(V2), conditions=conditions),
    )
    kubectl.answer("get leaderworkersets", listing())
    code, _, err = run(capsys, "rollout", "status", "llm")
    assert (code, err) == (1, f"kubectl ds rollout status: error: {message}\n")


def test_status_times_out_with_exit_3(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    kubectl.answer("get disaggregatedsets", a_set(roles(V2), conditions=ROLLING))
    kubectl.answer("get leaderworkersets", listing())
    clock = FakeClock()
    code, _, err = run(capsys, "rollout", "status", "llm", "--timeout", "2.5s", clock=clock)
    assert code == 3
    assert err.startswith("kubectl ds rollout status: error: timed out after 2.5s: waiting for llm")
    assert clock.slept == [1.0, 1.0, 0.5]


def test_status_durations_are_kubectls() -> None:
    assert plugin._duration("1h30m") == (5400.0, "1h30m")
    assert plugin._duration("90s") == (90.0, "90s")
    assert plugin._duration("0") == (0.0, "0")


# --- the annotations -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "key", "value", "said"),
    [
        (["pause", "llm"], api.ANNOTATION_PAUSED, "true", "llm paused"),
        (["resume", "llm"], api.ANNOTATION_PAUSED, None, "llm resumed"),
        (["hold", "llm", "--at", "50%"], api.ANNOTATION_ROLLOUT_HOLD_AT, "50%", "llm holds at 50%"),
        (["release", "llm"], api.ANNOTATION_ROLLOUT_HOLD_AT, None, "llm released"),
        (["partition", "llm", "1"], api.ANNOTATION_ROLLOUT_PARTITION, "1", "llm partitioned at 1"),
        (
            ["partition", "llm", "--clear"],
            api.ANNOTATION_ROLLOUT_PARTITION,
            None,
            "llm partition cleared",
        ),
    ],
    ids=["pause", "resume", "hold", "release", "partition", "clear"],
)
def test_rollout_controls_merge_patch_one_annotation(
    kubectl: FakeKubectl,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    key: str,
    value: str | None,
    said: str,
) -> None:
    others = {
        api.ANNOTATION_PAUSED: "true",
        api.ANNOTATION_ROLLOUT_HOLD_AT: "25%",
        api.ANNOTATION_ROLLOUT_PARTITION: "2",
    }
    before = {k: v for k, v in others.items() if value is None or k != key}
    kubectl.answer("get disaggregatedsets", a_set(roles(V1), annotations=before, slices=3))
    code, out, err = run(capsys, "rollout", *argv, "-n", "ml")
    assert (code, err) == (0, "")
    assert kubectl.patches() == [{"metadata": {"annotations": {key: value}}}]
    (patch,) = [call["argv"] for call in kubectl.calls() if "patch" in call["argv"]]
    assert patch[:5] == [
        "--namespace=ml",
        "patch",
        "disaggregatedsets.disaggregatedset.x-k8s.io",
        "llm",
        "--type=merge",
    ]
    assert out.startswith(said + " (")


def test_a_control_already_as_asked_changes_nothing(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    kubectl.answer("get disaggregatedsets", a_set(roles(V1)))
    code, out, _ = run(capsys, "rollout", "resume", "llm")
    assert (code, kubectl.patches()) == (0, [])
    assert out == f"llm already resumed ({api.ANNOTATION_PAUSED} removed): nothing to change\n"


def test_a_partition_at_or_past_the_slice_count_says_that_every_slice_rolls(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: `partition 5` on a 3-slice set was taken without a word."""
    kubectl.answer("get disaggregatedsets", a_set(roles(V1), slices=3))
    code, out, err = run(capsys, "rollout", "partition", "llm", "5")
    assert (code, out) == (0, f"llm partitioned at 5 ({api.ANNOTATION_ROLLOUT_PARTITION}=5)\n")
    assert err == (
        "kubectl ds rollout partition: note: llm has 3 slices (0 to 2): a partition at 5 keeps"
        " none of them back, so every slice rolls to a new revision\n"
    )
    assert run(capsys, "rollout", "partition", "llm", "2")[2] == ""


def test_status_explains_ready_above_the_target_during_a_surge(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: READY read 8/6 during a surge with nothing to say why."""
    old, new = revision_of(roles(V1)), revision_of(roles(V2))
    rolling = a_set(roles(V2), conditions=ROLLING)
    rolling["status"]["ready"] = "4/3"
    kubectl.answer("get disaggregatedsets", rolling, a_set(roles(V2), conditions=AVAILABLE))
    kubectl.answer(
        "get leaderworkersets",
        listing(lws("prefill", old, 2, 2), lws("decode", old, 1, 1), lws("prefill", new, 1, 1)),
    )
    code, out, _ = run(capsys, "rollout", "status", "llm")
    assert code == 0
    assert (
        "ready 4/3: 1 group above the target while the old and the new revision both serve"
        " (maxSurge); READY counts both"
    ) in out.splitlines()


# --- adopt ---------------------------------------------------------------------------------------


def adoptable(kind: str, name: str, *, owner: str = builders.DS_UID) -> JsonObject:
    """A child as upstream's controller leaves it: controlled by the set, no controller-uid."""
    versions = {"LeaderWorkerSet": api.LWS_API_VERSION, "Service": api.SERVICE_API_VERSION}
    child = builders.observe(
        {"apiVersion": versions[kind], "kind": kind, "metadata": {"name": name}, "spec": {}},
        owner_uid=owner,
    )
    del child["metadata"]["labels"][api.CONTROLLER_UID_LABEL]
    child["metadata"]["labels"][api.LABEL_NAME] = "llm"
    child["metadata"]["resourceVersion"] = "77"
    return child


def _answer_an_lws_and_a_service_to_adopt(kubectl: FakeKubectl) -> None:
    """A set, one adoptable LWS and Service of it, and kubectl patching both."""
    kubectl.answer("get disaggregatedsets", a_set(roles(V1)))
    kubectl.answer(
        "get leaderworkersets",
        listing(adoptable("LeaderWorkerSet", "llm-0-x-prefill"), adoptable("Service", "llm-0-x-p")),
    )
    kubectl.answer("patch leaderworkersets", {"stdout": "patched\n"})
    kubectl.answer("patch services", {"stdout": "patched\n"})


def test_adopt_labels_each_child_the_set_controls_with_a_resource_version_bound_patch(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    _answer_an_lws_and_a_service_to_adopt(kubectl)
    code, out, err = run(capsys, "adopt", "llm", "-n", "ml")
    assert (code, err) == (0, "")
    get = kubectl.calls()[1]["argv"]
    assert get[1:3] == [
        "get",
        "leaderworkersets.leaderworkerset.x-k8s.io,services,"
        "disaggregatedsetrolescalers.disaggregatedset.x-k8s.io,"
        f"{api.REVISION_PLURAL}.{api.GROUP}",
    ]
    assert f"--selector={api.LABEL_NAME}=llm" in get
    patches = [call["argv"] for call in kubectl.calls() if "patch" in call["argv"]]
    assert [argv[2:5] for argv in patches] == [
        ["leaderworkersets.leaderworkerset.x-k8s.io", "llm-0-x-prefill", "--namespace=default"],
        ["services", "llm-0-x-p", "--namespace=default"],
    ]
    assert kubectl.patches() == 2 * [
        {"metadata": {"resourceVersion": "77", "labels": {"controller-uid": builders.DS_UID}}}
    ]
    assert out.splitlines()[-1] == "default/llm: 2 adopted, 0 already adopted, 0 left alone"


def test_adopt_refuses_a_child_of_another_owner_with_one_line_and_exit_1(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    kubectl.answer("get disaggregatedsets", a_set(roles(V1)))
    foreign = adoptable("LeaderWorkerSet", "llm-0-x-prefill", owner="someone-else")
    kubectl.answer("get leaderworkersets", listing(foreign))
    code, out, err = run(capsys, "adopt", "llm")
    assert (code, kubectl.patches()) == (1, [])
    (line,) = err.splitlines()
    assert line.startswith("kubectl ds adopt: error: LeaderWorkerSet default/llm-0-x-prefill:")
    assert "(uid someone-else)" in line
    assert out == "default/llm: 0 adopted, 0 already adopted, 1 left alone\n"


def test_adopt_judges_again_a_child_that_changed_meanwhile(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    kubectl.answer("get disaggregatedsets", a_set(roles(V1)))
    child = adoptable("LeaderWorkerSet", "llm-0-x-prefill")
    changed = copy.deepcopy(child)
    changed["metadata"]["resourceVersion"] = "78"
    kubectl.answer("get leaderworkersets", listing(child), changed)
    kubectl.answer(
        "patch leaderworkersets",
        {"stderr": "Error from server (Conflict): the object has been modified", "exit": 1},
        {"stdout": "patched\n"},
    )
    code, _, err = run(capsys, "adopt", "llm")
    assert (code, err) == (0, "")
    assert [patch["metadata"]["resourceVersion"] for patch in kubectl.patches()] == ["77", "78"]


def lost_lws(roles_: list[JsonObject], role: int = 0, *, image: str | None = None) -> JsonObject:
    """The set's LWS of `roles_[role]` at their revision as the hooks made it, once the set
    lost it (deleted with `--cascade=orphan` and created again); with `image`, planted
    instead: the same but for that image, and never applied by Metacontroller."""
    rendered = children.render_lws(
        set_name="llm", role=api.Role.model_validate(roles_[role]), slice_index=0,
        revision=revision_of(roles_), replicas=2, policy=None,
    )  # fmt: skip
    lws_ = builders.observe(copy.deepcopy(rendered), owner_uid="uid-of-the-set-deleted-before")
    del lws_["metadata"]["ownerReferences"]
    lws_["metadata"]["resourceVersion"] = "77"
    if image is not None:
        lws_["metadata"]["labels"].pop(api.CONTROLLER_UID_LABEL)
        del lws_["metadata"]["annotations"]
        template = lws_["spec"]["leaderWorkerTemplate"]["workerTemplate"]
        template["spec"]["containers"][0]["image"] = image
    return lws_


def test_issue33_adopt_without_the_verb_adopt_is_one_line_and_writes_nothing(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    """The kit's admission policy refuses the label to whoever may not adopt for the set: the
    plugin asks the API server first and says so, before any patch (an editor would otherwise
    see the first patch fail on a record it may not write)."""
    kubectl.answer("get disaggregatedsets", a_set(roles(V1)))
    kubectl.answer("get leaderworkersets", listing(adoptable("LeaderWorkerSet", "llm-0-x-prefill")))
    kubectl.answer("create", {"stdout": access_review(allowed=False)})
    code, out, err = run(capsys, "adopt", "llm", "-n", "ml")
    assert (code, out, kubectl.patches()) == (1, "", [])
    assert err == (
        "kubectl ds adopt: error: you may not adopt for default/llm: that takes the RBAC verb"
        " adopt on the set (kubectl auth can-i adopt"
        " disaggregatedsets.disaggregatedset.x-k8s.io/llm -n default), which the admin role has,"
        " and the kit's admission policy refuses the label without it; nothing was written\n"
    )
    (review,) = [call for call in kubectl.calls() if call["argv"][1] == "create"]
    assert {"--filename=-", "--validate=false", "--output=json"} <= set(review["argv"])
    assert json.loads(review["stdin"]) == {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {
            "resourceAttributes": {
                "namespace": "default",
                "verb": "adopt",
                "group": api.GROUP,
                "resource": api.DS_PLURAL,
                "name": "llm",
            }
        },
    }


def test_adopt_asks_about_each_set_it_writes_for_once_and_a_dry_run_about_none(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    _answer_an_lws_and_a_service_to_adopt(kubectl)
    assert run(capsys, "adopt", "llm", "--dry-run")[0] == 0
    assert "create" not in kubectl.verbs()
    assert run(capsys, "adopt", "llm")[0] == 0
    assert kubectl.verbs().count("create") == 1
    assert kubectl.verbs().index("create") < kubectl.verbs().index("patch")


def test_adopt_dry_run_and_orphans(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    kubectl.answer("get disaggregatedsets", listing(a_set(roles(V1))))
    kubectl.answer("get leaderworkersets", listing(lost_lws(roles(V1))))
    code, out, err = run(capsys, "adopt", "--all", "-A", "--orphans", "--dry-run")
    assert (code, err, kubectl.patches()) == (0, "", [])
    name = f"llm-0-{revision_of(roles(V1))}-prefill"
    assert out.startswith(f"(dry run) LeaderWorkerSet default/{name}: adopted by llm")
    assert all("--all-namespaces" in call["argv"] for call in kubectl.calls())
    selector = [a for a in kubectl.calls()[1]["argv"] if a.startswith("--selector=")]
    assert selector == [f"--selector={api.LABEL_NAME}"]


def test_issue33_item1_adopt_orphans_refuses_a_planted_lws_with_one_line_and_exit_1(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: an LWS planted at a name the set wants, with its labels and another image,
    was adopted with exit 0. The set's own orphan is still adopted beside it."""
    kubectl.answer("get disaggregatedsets", a_set(roles(V1)))
    genuine, planted = lost_lws(roles(V1)), lost_lws(roles(V1), 1, image="evil/miner:latest")
    kubectl.answer("get leaderworkersets", listing(genuine, planted))
    kubectl.answer("patch leaderworkersets", {"stdout": "patched\n"})
    code, out, err = run(capsys, "adopt", "llm", "--orphans")
    assert code == 1
    (line,) = err.splitlines()
    assert line.startswith(
        f"kubectl ds adopt: error: LeaderWorkerSet default/{planted['metadata']['name']}: not"
        " what llm would have made at its name: spec.leaderWorkerTemplate.workerTemplate.spec"
        '.containers[0].image is "evil/miner:latest", not "vllm/vllm-openai:v0.11.0"'
    )
    assert line.endswith(": left alone")
    patched = [call["argv"][2] for call in kubectl.calls() if "patch" in call["argv"]]
    assert patched == [genuine["metadata"]["name"]]
    assert out.splitlines()[-1] == "default/llm: 1 adopted, 0 already adopted, 1 left alone"


@pytest.mark.parametrize(
    "argv", [["adopt"], ["adopt", "llm", "--all"], ["adopt", "llm", "-A"]], ids=" ".join
)
def test_adopt_takes_one_set_or_all(
    kubectl: FakeKubectl, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        plugin.main(argv)
    assert exited.value.code == 2
    assert "give either SET or --all" in capsys.readouterr().err


# --- the progress lines' words (issue 35 item 8) ---------------------------------------------


def test_a_set_still_coming_up_reads_coming_up_not_steady() -> None:
    """Regression: a new set whose groups were not ready yet read `slice 0 Steady: ... new 0/4`."""
    new = revision_of(roles(V2))
    parent = rollout.read_set(a_set(roles(V2), conditions=ROLLING))
    coming = [
        objects.parse_object(records.ChildKind.LWS, lws(role, new, count, 0), where="test")
        for role, count in (("prefill", 2), ("decode", 1))
    ]
    assert status.progress(parent, coming)["slice 0"] == (
        "slice 0 Coming up: prefill old 0/0 new 0/2, decode old 0/0 new 0/1"
    )
    assert status.progress(parent, [])["slice 0"].startswith("slice 0 Coming up: ")
    ready = [
        objects.parse_object(records.ChildKind.LWS, lws(role, new, count, count), where="test")
        for role, count in (("prefill", 2), ("decode", 1))
    ]
    assert status.progress(parent, ready)["slice 0"].startswith("slice 0 Steady: ")


@pytest.mark.parametrize(
    ("reason", "why"),
    [
        ("RolloutHeld", "the rollout holds (annotation disaggregatedset.x-k8s.io/rollout-hold-at)"),
        ("RolloutInProgress", "maxSurge"),
    ],
)
def test_the_surplus_of_ready_groups_is_put_down_to_what_causes_it(reason: str, why: str) -> None:
    """Regression: `ready 7/5 ... (maxSurge)` while the surplus came from a hold."""
    stored = a_set(roles(V2), conditions=progressing("Unknown", reason, "m"))
    stored["status"]["ready"] = "7/5"
    line = status.surge_line(rollout.read_set(stored))
    assert line == (
        "ready 7/5: 2 groups above the target while the old and the new revision both serve"
        f" ({why}); READY counts both"
    )


@pytest.mark.parametrize("ready", ["\u00b2/1", "7/\u00b9", "\u0667/5"])
def test_a_forged_ready_count_of_other_digits_gets_no_surge_line(ready: str) -> None:
    """Regression: `rollout status` ended in a traceback on a status whose READY held a
    superscript digit (`str.isdigit` accepts it, `int` does not); it is no count."""
    stored = a_set(roles(V2), conditions=progressing("Unknown", "RolloutInProgress", "m"))
    stored["status"]["ready"] = ready
    assert status.surge_line(rollout.read_set(stored)) is None
