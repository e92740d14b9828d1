"""Regenerate the built request fixtures and every golden hook answer.

    python -m tests.golden.make_fixtures

The captured requests in tests/fixtures/requests/ (from a real Metacontroller v4.17.2) are never
touched. The built ones come from the simulation in tests/sim (a steady set, a set mid-rollout
whose new LWS are ready so that the sync takes a step, the same set with an invalid spec) and
from a captured one (a RoleScaler whose owner's status counts its groups); their answers, and
those of the captured requests, are written to tests/fixtures/responses/. Run it after an
intended change of behaviour and review the diff: the golden test fails until then.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from hooks import api
from hooks.core import records, scalers, sync
from hooks.wire import answers, envelope
from tests import builders
from tests.sim.cluster import Cluster

JsonObject = dict[str, Any]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
REQUESTS = FIXTURES / "requests"
RESPONSES = FIXTURES / "responses"
NOW = "2026-11-29T12:00:00Z"
BUILT = (
    "ds-sync-steady.json",
    "ds-sync-mid-rollout.json",
    "ds-sync-invalid-spec.json",
    "rolescaler-sync-owner-status.json",
)


def hook_for(name: str) -> Callable[[object], records.HookResult]:
    """The hook a fixture file is for, by its name prefix."""
    if name.startswith("ds-sync"):
        return lambda body: sync.sync(envelope.parse_sync_request(body), now=NOW)
    if name.startswith("ds-customize"):
        return lambda body: sync.customize(envelope.parse_customize_request(body))
    if name.startswith("rolescaler-sync"):
        return lambda body: scalers.sync(envelope.parse_scaler_sync_request(body), now=NOW)
    if name.startswith("rolescaler-customize"):
        return lambda body: scalers.customize(envelope.parse_scaler_customize_request(body))
    raise ValueError(f"no hook for fixture {name}")


def path_for(name: str) -> str:
    """The server path that answers a fixture file."""
    for prefix, path in (
        ("ds-sync", "/sync"),
        ("ds-customize", "/customize"),
        ("rolescaler-sync", "/rolescaler/sync"),
        ("rolescaler-customize", "/rolescaler/customize"),
    ):
        if name.startswith(prefix):
            return path
    raise ValueError(f"no path for fixture {name}")


def render_json(value: object) -> bytes:
    """How fixture files are written: indented, keys in their original order, final newline."""
    return orjson.dumps(value, option=orjson.OPT_INDENT_2) + b"\n"


def _set(image: str) -> JsonObject:
    return builders.make_ds(
        roles=[
            builders.make_role("prefill", replicas=4, image=image, max_surge=1, max_unavailable=0),
            builders.make_role("decode", replicas=2, image=image, max_surge=1, max_unavailable=0),
        ]
    )


def _settled(image: str) -> Cluster:
    cluster = Cluster(seed=0)
    cluster.create(_set(image))
    cluster.run()
    return cluster


def _next_request(cluster: Cluster) -> JsonObject:
    metacontroller = cluster.metacontroller
    return metacontroller.build_request(cluster.ds())


def build_requests() -> dict[str, JsonObject]:
    """The built request fixtures, by file name."""
    steady = _settled("vllm/vllm-openai:v0.10.0")
    requests = {"ds-sync-steady.json": _next_request(steady)}

    rolling = _settled("vllm/vllm-openai:v0.10.0")
    rolling.edit("llm", lambda spec: _set_image(spec, "vllm/vllm-openai:v0.11.0"))
    rolling.run(until=lambda c: c.slice_states()[0].new.get("prefill", 0) >= 2)
    rolling.lws.run(rolling.tick)  # the new LWS become ready: the next sync takes a step
    requests["ds-sync-mid-rollout.json"] = _next_request(rolling)

    invalid = copy.deepcopy(requests["ds-sync-mid-rollout.json"])
    strategy = invalid["parent"]["spec"]["roles"][0]["spec"]["rolloutStrategy"]
    strategy["rollingUpdateConfiguration"]["partition"] = 2
    invalid["parent"]["metadata"]["generation"] += 1
    requests["ds-sync-invalid-spec.json"] = invalid

    # The shipped RoleScaler wiring relates only the owner, whose status counts the role's groups
    # (here: its decode LWS report 2).
    scaler = orjson.loads((REQUESTS / "rolescaler-sync.json").read_bytes())
    related = scaler["related"]
    del related[f"{api.LWS_KIND}.{api.LWS_API_VERSION}"]
    (owner,) = related[f"{api.DS_KIND}.{api.API_VERSION}"].values()
    owner["status"]["roleStatuses"] = [
        {"name": "decode", "replicas": 2, "readyReplicas": 2, "updatedReplicas": 2}
    ]
    requests["rolescaler-sync-owner-status.json"] = scaler
    return requests


def _set_image(spec: JsonObject, image: str) -> None:
    for role in spec["roles"]:
        template = role["spec"]["leaderWorkerTemplate"]["workerTemplate"]
        template["spec"]["containers"][0]["image"] = image


def main() -> None:
    RESPONSES.mkdir(parents=True, exist_ok=True)
    for name, request in build_requests().items():
        (REQUESTS / name).write_bytes(render_json(request))
    for request_path in sorted(REQUESTS.glob("*.json")):
        body = orjson.loads(request_path.read_bytes())
        response = answers.render_answer(hook_for(request_path.name)(body).answer)
        (RESPONSES / request_path.name).write_bytes(render_json(response))
        print(f"wrote {RESPONSES / request_path.name}")


if __name__ == "__main__":
    main()
