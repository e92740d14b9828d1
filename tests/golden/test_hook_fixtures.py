"""Change detectors: golden request/answer pairs replayed through the hooks and the HTTP server.

The requests are Metacontroller's own (captured from v4.17.2) plus a few built with the simulation
(`python -m tests.golden.make_fixtures` rebuilds those and every recorded answer after an intended
change). Each answer must match its file exactly, whether the hook is called directly or over the
Flask app with the same clock. The answers were recorded from these hooks, so a match shows only
that nothing changed; `test_fixture_rules.py` judges each answer against the rules.
"""

from __future__ import annotations

import flask.testing
import orjson
import pytest

from hooks import api
from hooks.server import app
from hooks.wire import answers
from tests.golden import make_fixtures

NAMES = sorted(path.name for path in make_fixtures.REQUESTS.glob("*.json"))


def expected(name: str) -> object:
    return orjson.loads((make_fixtures.RESPONSES / name).read_bytes())


def request(name: str) -> object:
    return orjson.loads((make_fixtures.REQUESTS / name).read_bytes())


def regenerate_hint(name: str) -> str:
    return (
        f"the answer to {name} changed; if that is intended, run "
        "`python -m tests.golden.make_fixtures` and review the diff"
    )


@pytest.fixture(scope="module")
def client() -> flask.testing.FlaskClient:
    return app.create_app(clock=lambda: make_fixtures.NOW).test_client()


def test_every_request_has_an_answer() -> None:
    recorded = sorted(path.name for path in make_fixtures.RESPONSES.glob("*.json"))
    assert recorded == NAMES
    assert len(NAMES) >= 10


@pytest.mark.parametrize("name", NAMES)
def test_answer_unchanged_since_recorded(name: str) -> None:
    answer = answers.render_answer(make_fixtures.hook_for(name)(request(name)).answer)
    assert orjson.loads(orjson.dumps(answer)) == expected(name), regenerate_hint(name)


@pytest.mark.parametrize("name", NAMES)
def test_server_answer_unchanged_since_recorded(
    name: str, client: flask.testing.FlaskClient
) -> None:
    body = (make_fixtures.REQUESTS / name).read_bytes()
    reply = client.post(make_fixtures.path_for(name), data=body, content_type="application/json")
    assert reply.status_code == 200
    assert orjson.loads(reply.data) == expected(name), regenerate_hint(name)


@pytest.mark.parametrize("name", [n for n in NAMES if n.startswith("ds-sync")])
def test_sync_answers_keep_observed_children(name: str) -> None:
    """Nothing observed disappears from these answers (none of them drains or shrinks slices)."""
    body = request(name)
    assert isinstance(body, dict)
    observed = {
        (obj["kind"], obj["metadata"]["name"])
        for group in body["children"].values()
        for obj in (group or {}).values()
    }
    answer = expected(name)
    assert isinstance(answer, dict)
    returned = {(c["kind"], c["metadata"]["name"]) for c in answer["children"]}
    assert observed <= returned


def test_invalid_spec_holds_every_child_unchanged() -> None:
    body = request("ds-sync-invalid-spec.json")
    answer = expected("ds-sync-invalid-spec.json")
    assert isinstance(body, dict) and isinstance(answer, dict)
    replicas = {
        obj["metadata"]["name"]: obj["spec"].get("replicas")
        for group in body["children"].values()
        for obj in group.values()
        if obj["kind"] == api.LWS_KIND
    }
    assert {
        c["metadata"]["name"]: c["spec"]["replicas"]
        for c in answer["children"]
        if c["kind"] == api.LWS_KIND
    } == replicas
    degraded = next(c for c in answer["status"]["conditions"] if c["type"] == "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "InvalidSpec")
    assert "partition" in degraded["message"]


def test_fixture_files_are_written_the_way_the_generator_writes_them() -> None:
    for directory in (make_fixtures.REQUESTS, make_fixtures.RESPONSES):
        for path in directory.glob("*.json"):
            if path.name in make_fixtures.BUILT or directory == make_fixtures.RESPONSES:
                text = path.read_bytes()
                assert text == make_fixtures.render_json(orjson.loads(text)), path
