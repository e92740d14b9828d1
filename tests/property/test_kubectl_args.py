"""`kubectl ds` never hands kubectl an argument Linux would refuse, and fails in one line (issue
33, item 4).

Every command that writes (`rollout undo`, the annotation commands `pause`, `resume`, `hold`,
`release` and `partition`, and `adopt`) runs on sets drawn up to the API's limits: 2 to 10
roles, templates making the set up to the 1.5 MiB an object can have, a change-cause up to the
256 KiB every annotation of an object shares, and an undo written either way (a JSON patch, or a
server-side apply and a merge patch of the change-cause). The stand-in for kubectl is
`subprocess.run` itself: it answers the reads from the drawn objects (and allows `adopt` the
set it asks about), refuses as `execve` would any argument longer than `MAX_ARG_STRLEN`, and
makes the write succeed, exit 1 with kubectl's several lines, or not run at all (an OSError).
Whatever happens, no argument is that long, the exit status is 0 or 1, and an error is one line.
"""

from __future__ import annotations

import copy
import errno
import io
import json
import re
import subprocess
from collections.abc import Sequence
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hooks import api
from hooks.core import children
from hooks.gocompat import revision
from hooks.kubectl import plugin
from tests import builders

JsonObject = dict[str, Any]

MAX_ARG_STRLEN: Final = 32 * 4096
"""Linux's limit on one argument of `execve`, its terminating NUL included."""
OBJECT_BYTES: Final = 1_572_864
"""etcd's default limit on a request (`--max-request-bytes`), which bounds a stored object."""
ANNOTATION_BYTES: Final = 262_144
"""The API server's limit on all the annotations of an object together (keys and values)."""
V1, V2 = "vllm/vllm-openai:v0.11.0", "vllm/vllm-openai:v0.12.0"
LINE: Final = re.compile(r"kubectl ds [a-z ]+: (error|note): [^\n]*")
COMMANDS: Final = (
    ("rollout", "undo", "llm"),
    ("rollout", "pause", "llm"),
    ("rollout", "resume", "llm"),
    ("rollout", "hold", "llm", "--at", "50%"),
    ("rollout", "release", "llm"),
    ("rollout", "partition", "llm", "1"),
    ("rollout", "partition", "llm", "--clear"),
    ("adopt", "llm", "--orphans"),
)


def padded_roles(count: int, pad: int, image: str) -> list[JsonObject]:
    """`count` roles whose worker templates carry `pad` bytes between them (an env value)."""
    roles = []
    for index in range(count):
        role = builders.make_role(f"role{index}", replicas=1, image=image)
        container = role["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
        container["env"] = [{"name": "PAD", "value": "p" * (pad // count)}]
        roles.append(role)
    return roles


def revision_of(roles: Sequence[JsonObject]) -> str:
    return revision.compute_revision(
        [(role["name"], role["spec"]["leaderWorkerTemplate"]) for role in roles]
    )


def record(roles: list[JsonObject], number: int, cause: str | None) -> JsonObject:
    desired = builders.make_record(
        revision=revision_of(roles),
        number=number,
        roles=[api.Role.model_validate(role) for role in roles],
        change_cause=cause,
    )
    return builders.observe(desired)


def applied_by_kubectl(obj: JsonObject) -> JsonObject:
    """`obj` with the managed fields of a server-side `kubectl apply` that owns every role's
    template but not the change-cause (so an undo applies, then patches the change-cause)."""
    roles = {
        f'k:{{"name":"{role["name"]}"}}': {
            ".": {},
            "f:name": {},
            "f:spec": {"f:leaderWorkerTemplate": {}, "f:replicas": {}},
        }
        for role in obj["spec"]["roles"]
    }
    entry = {
        "manager": "kubectl",
        "operation": "Apply",
        "fieldsV1": {"f:spec": {"f:roles": roles, "f:slices": {}}},
    }
    obj["metadata"]["managedFields"] = [entry]
    return obj


class Drawn:
    """A command, the set and what kubectl lists beside it, and how the write goes (no
    dataclass: hypothesis would print the megabytes of every field of a failing example)."""

    def __init__(
        self,
        command: tuple[str, ...],
        answers: dict[str, JsonObject],
        failure: str | None,
        sizes: str,
    ) -> None:
        self.command = command
        self.answers = answers
        self.failure = failure
        """None: the write succeeds; "exit": kubectl exits 1; "oserror": kubectl cannot run."""
        self.sizes = sizes

    def __repr__(self) -> str:
        return f"Drawn({' '.join(self.command)!r}, {self.sizes}, failure={self.failure!r})"


# What each annotation command finds on the set, so that it has something to write.
BEFORE: Final = {
    "resume": {api.ANNOTATION_PAUSED: "true"},
    "release": {api.ANNOTATION_ROLLOUT_HOLD_AT: "25%"},
    "partition": {api.ANNOTATION_ROLLOUT_PARTITION: "2"},
}


@st.composite
def drawn(draw: st.DrawFn) -> Drawn:
    command = draw(st.sampled_from(COMMANDS))
    count = draw(st.integers(api.MIN_ROLES, api.MAX_ROLES))
    pad = draw(st.integers(0, OBJECT_BYTES - 50_000))
    cause = draw(st.integers(0, ANNOTATION_BYTES - 4_096))
    old, new = padded_roles(count, pad, V1), padded_roles(count, pad, V2)
    ds = builders.make_ds(roles=new, generation=2, status={"revision": revision_of(new)})
    ds["metadata"].update(resourceVersion="4711")
    ds["metadata"]["annotations"] = {api.CHANGE_CAUSE_ANNOTATION: "v2"}
    if "--clear" in command or command[1] in ("resume", "release"):
        ds["metadata"]["annotations"].update(BEFORE[command[1]])
    server_side = draw(st.booleans())
    if server_side:
        ds = applied_by_kubectl(ds)
    orphan = children.render_lws(
        set_name="llm",
        role=api.Role.model_validate(new[0]),
        slice_index=0,
        revision=revision_of(new),
        replicas=1,
        policy=None,
    )
    lost = builders.observe(copy.deepcopy(orphan), owner_uid="uid-of-an-earlier-set")
    del lost["metadata"]["ownerReferences"]
    lost["metadata"]["resourceVersion"] = "9"
    records = [record(old, 1, "c" * cause), record(new, 2, "v2")]
    answers = {
        "get disaggregatedsets": ds,
        "get disaggregatedsetrevisions": {"items": records},
        "get leaderworkersets": {"items": [lost, *records]},
    }
    failure = draw(st.sampled_from([None, "exit", "oserror"]))
    sizes = f"roles={count}, pad={pad}, change-cause={cause}, server_side={server_side}"
    return Drawn(command=command, answers=answers, failure=failure, sizes=sizes)


ALLOWED: Final = {"kind": "SelfSubjectAccessReview", "status": {"allowed": True}}


@dataclass
class StandIn:
    """`subprocess.run` as kubectl would answer the plugin (see the module)."""

    drawn: Drawn
    arguments: list[str] = field(default_factory=list)
    bodies: list[str] = field(default_factory=list)

    def __call__(
        self, argv: list[str], *, input: str | None = None, **_: object
    ) -> subprocess.CompletedProcess[str]:
        self.arguments.extend(argv)
        if any(len(arg.encode()) + 1 > MAX_ARG_STRLEN for arg in argv):
            raise OSError(errno.E2BIG, "Argument list too long")
        words = [arg for arg in argv[1:] if not arg.startswith("-")]
        if words[0] in ("patch", "apply"):
            return self.write(argv, input)
        if words[0] == "create":  # adopt's SelfSubjectAccessReview, on stdin
            return subprocess.CompletedProcess(argv, 0, json.dumps(ALLOWED), "")
        key = f"{words[0]} {words[1].split('.')[0]}"
        return subprocess.CompletedProcess(argv, 0, json.dumps(self.drawn.answers[key]), "")

    def write(self, argv: list[str], stdin: str | None) -> subprocess.CompletedProcess[str]:
        files = [arg.split("=", 1)[1] for arg in argv if arg.startswith("--patch-file=")]
        given = [arg.split("=", 1)[1] for arg in argv if arg.startswith("--patch=")]
        self.bodies.append(Path(files[0]).read_text() if files else (given or [stdin])[0] or "")
        if self.drawn.failure == "oserror":
            raise OSError(errno.ENOMEM, "Cannot allocate memory")
        if self.drawn.failure == "exit":
            stderr = 'The DisaggregatedSet "llm" is invalid:\n* metadata.annotations: Too long\n'
            return subprocess.CompletedProcess(argv, 1, "", stderr)
        return subprocess.CompletedProcess(argv, 0, "patched\n", "")


@given(case=drawn())
def test_issue33_item4_no_argument_is_too_long_and_every_failure_is_one_line(case: Drawn) -> None:
    stand_in = StandIn(case)
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patched, redirect_stdout(out), redirect_stderr(err):
        patched.setattr(subprocess, "run", stand_in)
        code = plugin.main(list(case.command))
    lines = err.getvalue().splitlines()
    assert max(len(arg.encode()) + 1 for arg in stand_in.arguments) <= MAX_ARG_STRLEN
    assert all(LINE.fullmatch(line) for line in lines), lines
    errors = [line for line in lines if ": error: " in line]
    assert stand_in.bodies, "the command wrote nothing"
    for body in stand_in.bodies:
        json.loads(body)  # what kubectl read is whole
    if case.failure is None:
        assert (code, errors) == (0, []), lines
        return
    prog = " ".join(case.command[:2]) if case.command[0] == "rollout" else case.command[0]
    assert code == 1
    assert [line.split(": error: ")[0] for line in errors] == [f"kubectl ds {prog}"]
