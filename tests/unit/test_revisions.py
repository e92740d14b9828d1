"""The hook server's revision memo (hooks.server.revisions): the same revision as the encoder,
computed once per roles, bounded, and never shared between values a JSON dump confuses."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from hooks import api
from hooks.gocompat import gotext, revision
from hooks.server import revisions


def spec(**pod_spec: Any) -> api.DisaggregatedSetSpec:
    template = {
        "workerTemplate": {"spec": {"containers": [{"name": "c", "image": "x"}], **pod_spec}}
    }
    return api.DisaggregatedSetSpec.model_validate(
        {
            "roles": [
                {"name": "prefill", "spec": {"leaderWorkerTemplate": template}},
                {"name": "decode", "spec": {"leaderWorkerTemplate": copy.deepcopy(template)}},
            ]
        }
    )


def test_a_repeated_revision_comes_from_the_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    computed: list[object] = []
    plain = revision.compute_revision
    monkeypatch.setattr(
        revision, "compute_revision", lambda roles: computed.append(roles) or plain(roles)
    )
    memo = revisions.RevisionMemo()
    first = memo.of_spec(spec(hostNetwork=True))
    again = memo.of_spec(spec(hostNetwork=True))
    assert len(computed) == 1
    assert first == again == plain(computed[0])


def test_a_spec_and_a_record_of_its_roles_share_one_computation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    computed: list[object] = []
    plain = revision.compute_revision
    monkeypatch.setattr(
        revision, "compute_revision", lambda roles: computed.append(roles) or plain(roles)
    )
    memo = revisions.RevisionMemo()
    wanted = spec(hostNetwork=True)
    from_spec = memo.of_spec(wanted)
    from_roles = memo.of_roles([(role.name, role.leader_worker_template) for role in wanted.roles])
    assert len(computed) == 1
    assert from_spec == from_roles == revision.of_spec(wanted)


@pytest.mark.parametrize(
    ("one", "other"),
    [(1, True), (1, 1.0), (None, 0)],
    ids=["int-bool", "int-float", "null-zero"],
)
def test_values_a_json_dump_confuses_are_never_served_each_others_revision(
    one: object, other: object
) -> None:
    memo = revisions.RevisionMemo()
    for value in (one, other, one):
        wanted = spec(terminationGracePeriodSeconds=value)
        try:
            expected: object = revision.of_spec(wanted)
        except gotext.EncodingError as error:
            expected = type(error)
        try:
            got: object = memo.of_spec(wanted)
        except gotext.EncodingError as error:
            got = type(error)
        assert got == expected


def test_the_memo_is_bounded() -> None:
    memo = revisions.RevisionMemo(size=3)
    for seconds in range(5):
        memo.of_spec(spec(terminationGracePeriodSeconds=seconds))
    assert len(memo) == 3


def test_roles_nested_too_deeply_to_key_are_hashed_without_the_memo(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A body as deep as the server's JSON decoder takes (about 1000 levels) can be too deep to
    pickle under the interpreter's recursion limit: such roles get their revision without the
    memo."""

    def too_deep(*args: object, **kwargs: object) -> bytes:
        raise RecursionError("maximum recursion depth exceeded while pickling an object")

    deep = orjson.loads('{"a":' * 1000 + "1" + "}" * 1000)
    wanted = spec(hostNetwork=True)
    wanted.roles[0].spec["leaderWorkerTemplate"]["workerTemplate"]["metadata"] = deep
    monkeypatch.setattr(revisions.pickle, "dumps", too_deep)
    memo = revisions.RevisionMemo()
    assert memo.of_spec(wanted) == revision.of_spec(wanted)
    assert len(memo) == 0


def test_each_app_has_a_memo_of_its_own() -> None:
    from hooks.server import app

    first, second = app.default_hooks()["/sync"], app.default_hooks()["/sync"]
    assert first.run is not second.run
