"""DisaggregatedSet manifests and waits shared by the cluster tests."""

from __future__ import annotations

import json
from typing import Any, Final

from hooks import api
from tests import builders
from tools.sandbox import kube
from tools.sandbox.controlplane import ControlPlane

JsonObject = dict[str, Any]

# How long a test waits for the stack to converge. A set is Available within seconds on an idle
# machine; the margin is for a loaded one (CI runners, a busy laptop), where Metacontroller's
# retries back off and every process gets a fraction of a core.
WAIT_SECONDS: Final = 120
IMAGE_V1: Final = "vllm/vllm-openai:v0.11.0"
IMAGE_V2: Final = "vllm/vllm-openai:v0.11.1"


def manifest(
    namespace: str,
    *,
    name: str = "llm",
    roles: list[JsonObject] | None = None,
    slices: int = 1,
) -> JsonObject:
    """A DisaggregatedSet manifest as a user writes it (no server-set fields)."""
    stored = builders.make_ds(name=name, roles=roles, slices=slices)
    return {
        "apiVersion": api.API_VERSION,
        "kind": api.DS_KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": stored["spec"],
    }


def small_set(
    namespace: str,
    *,
    image: str = IMAGE_V1,
    prefill: int = 2,
    decode: int = 1,
    external: str | None = None,
    slices: int = 1,
    max_surge: int | str | None = None,
    max_unavailable: int | str | None = None,
) -> JsonObject:
    """prefill/decode, one container each; `external` names a role scaled by its RoleScaler."""
    roles = [
        builders.make_role(
            role,
            replicas=replicas,
            image=image,
            external=role == external,
            max_surge=max_surge,
            max_unavailable=max_unavailable,
        )
        for role, replicas in (("prefill", prefill), ("decode", decode))
    ]
    return manifest(namespace, roles=roles, slices=slices)


def apply_set(plane: ControlPlane, obj: JsonObject) -> None:
    """`kubectl apply` a manifest, as a user would."""
    plane.kubectl("apply", "-f", "-", stdin=json.dumps(obj))


def condition(obj: JsonObject, kind: str) -> JsonObject | None:
    conditions = obj.get("status", {}).get("conditions", [])
    return next((c for c in conditions if c["type"] == kind), None)


def is_available(ds: JsonObject) -> bool:
    """Available=True for the current generation."""
    available = condition(ds, "Available")
    generation = ds["metadata"]["generation"]
    return (
        available is not None
        and available["status"] == "True"
        and available.get("observedGeneration") == generation
        and ds["status"].get("observedGeneration") == generation
    )


def wait_available(client: kube.Client, namespace: str, name: str) -> JsonObject:
    """The set once it is Available for its current generation; on timeout the message shows
    the set's last status and its namespace's LWS."""
    seen: JsonObject = kube.wait_for(
        lambda: observe(client, namespace, name),
        until=lambda seen: is_available(seen["set"]),
        timeout=WAIT_SECONDS,
        message=f"{namespace}/{name} Available",
    )
    ds: JsonObject = seen["set"]
    return ds


def observe(client: kube.Client, namespace: str, name: str = "llm") -> JsonObject:
    """What a wait on a set looks at: `{"set": the set, "lws": {name: LWS} of its namespace}`.

    `kube.describe` of it (a timeout's message) is the set's status and each LWS's replicas and
    status."""
    return {
        "set": client.get(kube.DISAGGREGATED_SETS, name, namespace=namespace),
        "lws": lws_by_name(client, namespace),
    }


def lws_by_name(client: kube.Client, namespace: str) -> dict[str, JsonObject]:
    return {lws["metadata"]["name"]: lws for lws in client.list(kube.LWS, namespace=namespace)}


def replicas_by_name(client: kube.Client, namespace: str) -> dict[str, int]:
    return {
        name: lws["spec"].get("replicas", 1) for name, lws in lws_by_name(client, namespace).items()
    }
