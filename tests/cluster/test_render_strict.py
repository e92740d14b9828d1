"""`render` refuses what the real API server refuses, with its field paths and in its order.

`kubectl apply` asks for `fieldValidation=Strict`, so a typo such as `replica: 1` fails with
`strict decoding error: unknown field "spec.roles[1].spec.replica"`. Each manifest here is created
with `dryRun=All&fieldValidation=Strict`; the server's unknown-field paths, in its order, must be
exactly the lines `render` prints (issue 17, item 11). The server stops there; asked to ignore
unknown fields it drops them and reports every other problem at once (metadata.name, the schema,
the CEL rules), and `render` reports all of them in one run (issue 27, item 3).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from hooks.cli import main as cli
from hooks.cli import manifests, pruning
from tests.shared import REPO_ROOT
from tools.sandbox import kube

JsonObject = dict[str, Any]

EXAMPLES: Final = sorted((REPO_ROOT / "examples").glob("*.yaml"))
MANY_PROBLEMS: Final = REPO_ROOT / "tests" / "fixtures" / "manifests" / "many-problems.yaml"
STRICT: Final = {"dryRun": "All", "fieldValidation": "Strict"}
IGNORE_UNKNOWN: Final = {"dryRun": "All", "fieldValidation": "Ignore"}
# How the server and render name the object itself (no field).
NO_FIELD: Final = "<nil>"
ROOT: Final = "(the object)"
STRICT_ERROR: Final = "strict decoding error: "
UNKNOWN_FIELD: Final = re.compile(r'unknown field "([^"]*)"')


def _example() -> JsonObject:
    document: JsonObject = next(
        yaml.safe_load_all((REPO_ROOT / "examples/three-roles.yaml").read_text())
    )
    return document


def _typos(document: JsonObject) -> None:
    """The issue's example: `replica` for `replicas`, `slice` for `slices`."""
    role = document["spec"]["roles"][1]["spec"]
    role["replica"] = role.pop("replicas")
    document["spec"]["slice"] = 3


def _metadata(document: JsonObject) -> None:
    document["metadata"]["lables"] = {"team": "ml"}
    document["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "1", "contoller": True}
    ]


def _everywhere(document: JsonObject) -> None:
    _typos(document)
    _metadata(document)
    document["zeta"] = 1
    document["status"] = {"phase": "Ready"}
    template = document["spec"]["roles"][0]["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    template["metadata"] = {"creationTimestamp": None, "labels": {"a": "b"}}
    container = template["spec"]["containers"][0]
    container["Name"] = "server"
    container["image"] = {"repository": "lmsysorg/sglang"}
    container["resources"]["limits"]["cpu"] = {"cores": 1}


def _camel_case(document: JsonObject) -> None:
    rolling = document["spec"]["roles"][1]["spec"]["rolloutStrategy"]
    rolling["rollingUpdateConfiguration"]["MaxSurge"] = 1
    document["spec"]["roles"][0]["scaling"] = {"mode": "Static", "min": 1}


CASES: Final = [
    pytest.param(_typos, id="the-issues-typos"),
    pytest.param(_metadata, id="metadata"),
    pytest.param(_everywhere, id="everywhere"),
    pytest.param(_camel_case, id="case-and-extra-keys"),
]


def _create_strict(
    client: kube.Client, document: JsonObject, namespace: str, params: dict[str, str] = STRICT
) -> JsonObject:
    obj: JsonObject = json.loads(json.dumps(document))
    obj["metadata"]["namespace"] = namespace
    path = kube.DISAGGREGATED_SETS.path(namespace=namespace)
    return client.request("POST", path, body=obj, params=params)


def _render_problems(
    capsys: pytest.CaptureFixture[str], path: Path, name: str
) -> tuple[int, list[str]]:
    code = cli.main(["render", str(path)])
    where = f"python -m hooks render: error: {path}: DisaggregatedSet {name}: "
    lines = capsys.readouterr().err.splitlines()
    assert all(line.startswith(where) for line in lines), lines
    return code, [line.removeprefix(where) for line in lines]


def _fields_refused(client: kube.Client, document: JsonObject, namespace: str) -> set[str]:
    """The fields of the problems the server finds with unknown fields dropped. A set: the order
    of its CEL rules' errors follows Go's map order, and it reports an int-or-string of neither
    type three times (as each type, and as the `anyOf` of the object), where render says it
    once."""
    try:
        _create_strict(client, document, namespace, IGNORE_UNKNOWN)
    except kube.ApiError as error:
        assert error.code == 422, error.status
        causes = error.status["details"]["causes"]
        return {cause["field"] if cause["field"] != NO_FIELD else ROOT for cause in causes}
    return set()


def _fields(problems: list[str]) -> set[str]:
    return {problem.partition(": ")[0] for problem in problems}


@pytest.mark.parametrize("change", CASES)
def test_render_reports_the_unknown_fields_the_api_server_refuses(
    client: kube.Client,
    namespace: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    change: Any,
) -> None:
    document = _example()
    change(document)
    path = tmp_path / "manifest.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))

    with pytest.raises(kube.ApiError) as raised:
        _create_strict(client, document, namespace)
    message: str = raised.value.status["message"]
    code, problems = _render_problems(capsys, path, document["metadata"]["name"])

    assert raised.value.code == 400
    assert STRICT_ERROR in message
    server_paths = UNKNOWN_FIELD.findall(message.partition(STRICT_ERROR)[2])
    assert server_paths == pruning.unknown_fields(document)
    assert code == 1
    # The server's list, item for item, is what render prints first, one line each.
    unknown = problems[: len(server_paths)]
    assert ", ".join(unknown) == message.partition(STRICT_ERROR)[2]
    # Then what the server finds once it drops them.
    assert _fields(problems[len(server_paths) :]) == _fields_refused(client, document, namespace)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.name)
def test_the_examples_pass_strict_field_validation_and_render_agrees(
    client: kube.Client, namespace: str, path: Path
) -> None:
    for document in yaml.safe_load_all(path.read_text()):
        if manifests.is_set(document):
            assert pruning.unknown_fields(document) == []
            _create_strict(client, document, namespace)


def test_render_reports_every_problem_the_api_server_finds_in_one_run(
    client: kube.Client, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    [document] = yaml.safe_load_all(MANY_PROBLEMS.read_text())

    with pytest.raises(kube.ApiError) as strict:
        _create_strict(client, document, namespace)
    with pytest.raises(kube.ApiError) as invalid:
        _create_strict(client, document, namespace, IGNORE_UNKNOWN)
    code, problems = _render_problems(capsys, MANY_PROBLEMS, document["metadata"]["name"])

    assert (strict.value.code, invalid.value.code, code) == (400, 422, 1)
    unknown = UNKNOWN_FIELD.findall(strict.value.status["message"])
    assert problems[: len(unknown)] == [f'unknown field "{path}"' for path in unknown]
    causes = invalid.value.status["details"]["causes"]
    rest = problems[len(unknown) :]
    assert len(rest) == len(causes)
    assert _fields(rest) == {cause["field"] for cause in causes}
    # metadata.name and the rules in the server's words, less the field the rules' messages
    # name again (the schema's are jsonschema's words: "is less than the minimum of 1").
    said = dict(problem.partition(": ")[::2] for problem in rest)
    worded = [cause for cause in causes if f"{cause['field']} in body " not in cause["message"]]
    assert len(worded) == 3  # replicas: -1 is the schema's alone (issue 35 item 8)
    for cause in worded:
        assert cause["message"].endswith(f" {said[cause['field']]}"), cause
        generic = re.sub(r"\[[0-9]+\]", "[]", cause["field"])
        assert not said[cause["field"]].startswith(f"{generic} "), cause
