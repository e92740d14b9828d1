"""Building blocks for scenarios: role sets from replica vectors, template edits, whole rollouts.

`run_vector_rollout` drives the real sync through a whole rollout described the way the planner
vectors are (initial old replicas, target replicas and a surge/unavailable config per role) and
returns the per-pass (old, new) states of slice 0, consecutive repeats removed, so they compare
directly with `../shared/golden/planner_sequences.json` and the worked examples of docs/rollout.md.

A role whose initial or target replicas are 0 is made External (its scaler then carries the
count, written by the fake HPA): the all-or-nothing rule of the API forbids a Static role at 0 next
to Static roles above 0. The External no-shrink guard never binds in these runs, because
the planner never takes new replicas past the target.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tests.builders import make_ds, make_role
from tests.sim import views
from tests.sim.cluster import Cluster
from tests.sim.lws_controller import Readiness
from tests.sim.metacontroller import LWS_TYPE, SCALER_TYPE

JsonObject = dict[str, Any]
Vector = tuple[int, ...]
State = tuple[Vector, Vector]


@dataclass(frozen=True, slots=True)
class RoleDraw:
    """A role of a drawn run: its name, starting count, (maxSurge, maxUnavailable) or the
    defaults, and whether an HPA (External) owns its count."""

    name: str
    replicas: int
    budget: tuple[int | str, int | str] | None
    external: bool


@dataclass(frozen=True, slots=True)
class Event:
    """Something done to a drawn run `tick` ticks after it starts."""

    tick: int
    kind: str
    args: tuple[Any, ...] = ()


@dataclass(frozen=True, slots=True)
class Walk:
    """A drawn run of the simulation: the set's shape and what happens to it, in tick order."""

    seed: int
    hook_version: str
    delay: int
    slices: int
    roles: tuple[RoleDraw, ...]
    events: tuple[Event, ...]


@dataclass(frozen=True, slots=True)
class VectorCase:
    """A rollout as planner vectors: initial old, target and (maxSurge, maxUnavailable) per role."""

    initial_old: Vector
    target: Vector
    config: tuple[tuple[int, int], ...]

    @property
    def roles(self) -> list[str]:
        return [f"r{index}" for index in range(len(self.initial_old))]

    def is_external(self, index: int) -> bool:
        return self.initial_old[index] == 0 or self.target[index] == 0


def set_image(spec: JsonObject, image: str, *, roles: Sequence[str] | None = None) -> None:
    """Point every container of the chosen roles (default: all) at `image`."""
    for role in spec["roles"]:
        if roles is not None and role["name"] not in roles:
            continue
        template = role["spec"]["leaderWorkerTemplate"]
        for key in ("leaderTemplate", "workerTemplate"):
            if key in template:
                for container in template[key]["spec"]["containers"]:
                    container["image"] = image


def set_replicas(spec: JsonObject, replicas: dict[str, int]) -> None:
    for role in spec["roles"]:
        if role["name"] in replicas:
            role["spec"]["replicas"] = replicas[role["name"]]


def write_scaler(cluster: Cluster, name: str, replicas: int) -> None:
    """An autoscaler's write, right now (what an HPA does through /scale)."""
    key = (SCALER_TYPE, "default", name)
    scaler = cluster.store.get(key)
    if scaler is None:
        raise KeyError(name)
    scaler["spec"]["replicas"] = replicas
    cluster.store.update(scaler, actor="hpa")
    cluster.hpa.written[name] = replicas
    cluster.note(f"hpa: {name} spec.replicas={replicas} (direct)")


def image(version: int) -> str:
    """The image of version `version` of the sims' server."""
    return f"example/server:v{version}"


def add_fault(cluster: Cluster, mode: str, image: str, *, slow: int) -> None:
    """Groups of `image` never become Ready (`never`), take `slow` ticks (`slow`), or one at most
    is Ready (`one`), beside the rules already in force."""
    rule = {
        "never": Readiness(delay=None, image=image),
        "slow": Readiness(delay=slow, image=image),
        "one": Readiness(delay=0, cap=1, image=image),
    }[mode]
    cluster.set_readiness([*cluster.lws.rules, rule])


def vector_set(case: VectorCase) -> JsonObject:
    """A DisaggregatedSet whose roles start at the case's initial replicas (image v1)."""
    roles = []
    for index, name in enumerate(case.roles):
        surge, unavailable = case.config[index]
        external = case.is_external(index)
        roles.append(
            make_role(
                name,
                replicas=1 if external else case.initial_old[index],
                image="example/server:v1",
                external=external,
                max_surge=surge,
                max_unavailable=unavailable,
            )
        )
    return make_ds(roles=roles)


def slice0_state(cluster: Cluster, roles: Sequence[str]) -> State:
    return cluster.slice_states()[0].vector(roles)


def start_vector_rollout(
    case: VectorCase,
    *,
    seed: int = 0,
    hook_version: str = "v1",
    readiness_delay: int = 0,
    max_ticks: int = 400,
) -> tuple[Cluster, int]:
    """A cluster settled at the case's initial counts, its rollout to the targets (image v2) due
    at the current tick; and how many passes the cluster had run before it."""
    cluster = Cluster(seed=seed, hook_version=hook_version, readiness_delay=readiness_delay)
    cluster.create(vector_set(case))
    for index, name in enumerate(case.roles):
        if case.is_external(index):
            cluster.hpa.scale(tick=0, scaler=f"llm-{name}", replicas=case.initial_old[index])
    cluster.run(max_ticks=max_ticks)
    start = slice0_state(cluster, case.roles)
    zeros = (0,) * len(case.roles)
    if start != (zeros, case.initial_old):
        raise cluster.failure(f"the set did not settle at {case.initial_old}: {start}")

    def roll(cluster: Cluster) -> None:
        def change(spec: JsonObject) -> None:
            set_image(spec, "example/server:v2")
            set_replicas(
                spec,
                {
                    name: case.target[index]
                    for index, name in enumerate(case.roles)
                    if not case.is_external(index)
                },
            )

        cluster.edit("llm", change)
        for index, name in enumerate(case.roles):
            if case.is_external(index):
                write_scaler(cluster, f"llm-{name}", case.target[index])

    cluster.at(cluster.tick, roll, label="new template and targets")
    return cluster, len(cluster.passes)


def run_vector_rollout(
    case: VectorCase,
    *,
    seed: int = 0,
    hook_version: str = "v1",
    readiness_delay: int = 0,
    max_ticks: int = 400,
) -> list[State]:
    """The (old, new) states of slice 0 after each pass of the rollout, repeats removed."""
    cluster, first_pass = start_vector_rollout(
        case,
        seed=seed,
        hook_version=hook_version,
        readiness_delay=readiness_delay,
        max_ticks=max_ticks,
    )
    cluster.run(max_ticks=max_ticks)
    states: list[State] = []
    for record in cluster.passes[first_pass:]:
        lws = [obj for key, obj in record.after.items() if key[0] == LWS_TYPE]
        state = views.slice_states(lws, target=str(record.summary["revision"]))[0]
        vector = state.vector(case.roles)
        if not states or states[-1] != vector:
            states.append(vector)
    # A role whose target is 0 beside busy roles (an External one) leaves the set unable to serve.
    idle = 0 in case.target and any(case.target)
    available = cluster.condition("Available") or {}
    if (available.get("status"), available.get("reason")) != (
        ("False", "RoleScaledToZero") if idle else ("True", "AllRolesReady")
    ):
        raise cluster.failure(f"the rollout ended with {available}")
    cluster.idle_sync()
    return states


def settled_request(ds: JsonObject) -> JsonObject:
    """The sync request of `ds` once the simulated cluster has settled (every LWS ready)."""
    cluster = Cluster(seed=7)
    cluster.create(ds)
    cluster.run(max_ticks=100)
    name = ds["metadata"]["name"]
    if not cluster.is_true("Available", name):
        raise AssertionError(cluster.failure("the set did not become Available"))
    request: JsonObject = cluster.metacontroller.build_request(cluster.ds(name))
    return request
