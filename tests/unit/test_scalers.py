"""Scaler children of External roles, and the RoleScaler controller's hooks (docs/rollout.md)."""

from __future__ import annotations

from hooks import api
from hooks.core import children, records, scalers
from hooks.wire import answers, envelope
from tests import builders

NEW = "cccccccc"
OLD = "aaaaaaaa"


def spec(*roles: builders.JsonObject) -> api.DisaggregatedSetSpec:
    return api.DisaggregatedSetSpec.model_validate({"roles": list(roles)})


def owned_scaler(role: str, replicas: int, *, seed: int = 1) -> builders.JsonObject:
    scaler = children.render_scaler(set_name="llm", role=role, replicas=seed)
    return builders.observe(scaler, spec_overrides={"replicas": replicas})


def plan(
    set_spec: api.DisaggregatedSetSpec,
    *,
    observed: tuple[builders.JsonObject, ...] = (),
    lws: tuple[builders.JsonObject, ...] = (),
    foreign: frozenset[str] = frozenset(),
) -> scalers.ScalerPlan:
    return scalers.plan(
        set_name="llm",
        spec=set_spec,
        observed=builders.parse_children(*observed),
        lws=builders.parse_children(*lws),
        foreign_names=foreign,
    )


def test_new_external_role_gets_a_scaler_seeded_with_one() -> None:
    result = plan(spec(builders.make_role("prefill"), builders.make_role("decode", external=True)))
    (scaler,) = result.children
    assert scaler["metadata"]["name"] == "llm-decode"
    assert scaler["spec"] == {"replicas": 1}
    assert result.targets == {"decode": 1}
    assert result.created == ("llm-decode",)


def test_static_to_external_switch_seeds_with_the_running_total() -> None:
    result = plan(
        spec(builders.make_role("prefill"), builders.make_role("decode", external=True)),
        lws=(
            builders.make_lws("decode", revision=OLD, replicas=3),
            builders.make_lws("decode", revision=NEW, replicas=2, slice_index=1),
            builders.make_lws("decode", revision=NEW, replicas=None, slice_index=2),
            builders.make_lws("prefill", revision=NEW, replicas=9),
        ),
    )
    assert result.targets == {"decode": 6}
    assert result.children[0]["spec"] == {"replicas": 6}


def test_existing_scaler_is_echoed_with_its_observed_replicas() -> None:
    result = plan(
        spec(builders.make_role("prefill"), builders.make_role("decode", external=True)),
        observed=(owned_scaler("decode", 7),),
        lws=(builders.make_lws("decode", revision=NEW, replicas=3),),
    )
    assert result.targets == {"decode": 7}
    assert result.children[0]["spec"] == {"replicas": 7}
    assert result.created == ()


def test_scaler_of_a_role_that_is_static_again_is_dropped() -> None:
    result = plan(
        spec(builders.make_role("prefill"), builders.make_role("decode")),
        observed=(owned_scaler("decode", 2),),
    )
    assert result.children == ()
    assert result.dropped == ("llm-decode",)


def test_scaler_of_a_removed_role_is_dropped() -> None:
    result = plan(
        spec(builders.make_role("prefill"), builders.make_role("decode", external=True)),
        observed=(owned_scaler("decode", 2), owned_scaler("encode", 1)),
    )
    assert result.dropped == ("llm-encode",)
    assert [c["metadata"]["name"] for c in result.children] == ["llm-decode"]


def test_foreign_object_at_the_scaler_name_is_a_conflict_not_adopted() -> None:
    result = plan(
        spec(builders.make_role("prefill"), builders.make_role("decode", external=True)),
        foreign=frozenset({"llm-decode"}),
    )
    assert result.children == ()
    assert result.conflicts == {"decode": "llm-decode"}
    assert "decode" not in result.targets


def rolescaler_request(
    *,
    owners: list[builders.JsonObject],
    labels: bool = True,
    status: builders.JsonObject | None = None,
) -> records.ScalerSyncRequest:
    scaler = owned_scaler("decode", 3)
    if not labels:
        del scaler["metadata"]["labels"]
    if status is not None:
        scaler["status"] = status
    body = {
        "parent": scaler,
        "children": {},
        "related": {
            f"{api.DS_KIND}.{api.API_VERSION}": {o["metadata"]["name"]: o for o in owners},
        },
    }
    return envelope.parse_scaler_sync_request(body)


def external_set() -> builders.JsonObject:
    return builders.make_ds(
        roles=[builders.make_role("prefill"), builders.make_role("decode", external=True)]
    )


def test_rolescaler_sync_reports_groups_selector_and_bound() -> None:
    owner = external_set()
    owner["status"] = {"roleStatuses": [{"name": "decode", "replicas": 3}]}
    result = scalers.sync(rolescaler_request(owners=[owner]), now=builders.NOW)
    state = answers.render_answer(result.answer)["status"]
    assert answers.render_answer(result.answer)["children"] == []
    assert state["replicas"] == 3
    assert state["selector"] == (
        "disaggregatedset.x-k8s.io/name=llm,disaggregatedset.x-k8s.io/role=decode,"
        "leaderworkerset.sigs.k8s.io/worker-index=0"
    )
    (ready,) = state["conditions"]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "True", "Bound")


def test_rolescaler_sync_keeps_status_fields_it_does_not_compute() -> None:
    observed = {"replicas": 7, "selector": "old", "lastScaleTime": "2026-11-29T10:00:00Z"}
    request = rolescaler_request(owners=[external_set()], status=observed)
    state = answers.render_answer(scalers.sync(request, now=builders.NOW).answer)["status"]
    assert state["lastScaleTime"] == "2026-11-29T10:00:00Z"
    assert (state["replicas"], state["selector"].startswith(api.LABEL_NAME)) == (0, True)


def test_rolescaler_without_owner_is_not_ready() -> None:
    state = answers.render_answer(
        scalers.sync(rolescaler_request(owners=[]), now=builders.NOW).answer
    )["status"]
    assert state["replicas"] == 0
    assert state["conditions"][0]["reason"] == api.Reason.OWNER_NOT_FOUND


def test_rolescaler_of_a_static_role_is_not_ready() -> None:
    static = builders.make_ds()
    result = scalers.sync(rolescaler_request(owners=[static]), now=builders.NOW)
    state = answers.render_answer(result.answer)["status"]
    assert state["conditions"][0]["status"] == "False"
    assert state["conditions"][0]["reason"] == api.Reason.ROLE_NOT_EXTERNAL


def test_rolescaler_sync_counts_the_owners_groups_of_the_role_from_its_status() -> None:
    """The shipped wiring asks only for the owner: its last status counted the role's LWS."""
    owner = external_set()
    owner["status"] = {
        "roleStatuses": [
            {"name": "prefill", "replicas": 4, "readyReplicas": 4, "updatedReplicas": 4},
            {"name": "decode", "replicas": 3, "readyReplicas": 1, "updatedReplicas": 1},
        ]
    }
    state = answers.render_answer(
        scalers.sync(rolescaler_request(owners=[owner]), now=builders.NOW).answer
    )["status"]
    assert state["replicas"] == 3
    assert state["conditions"][0]["reason"] == api.Reason.BOUND


def test_rolescaler_sync_reads_a_count_that_is_no_count_as_none() -> None:
    owner = external_set()
    owner["status"] = {"roleStatuses": [{"name": "decode", "replicas": -2}, "decode"]}
    state = answers.render_answer(
        scalers.sync(rolescaler_request(owners=[owner]), now=builders.NOW).answer
    )["status"]
    assert state["replicas"] == 0


def test_rolescaler_customize_asks_for_the_owner_only() -> None:
    """No LWS by label selector: Metacontroller would match every LWS event in the cluster
    against every scaler's selector."""
    request = envelope.parse_scaler_customize_request({"parent": owned_scaler("decode", 1)})
    rules = answers.render_answer(scalers.customize(request).answer)["relatedResources"]
    assert rules == [
        {
            "apiVersion": api.API_VERSION,
            "resource": api.DS_PLURAL,
            "namespace": builders.NAMESPACE,
            "names": ["llm"],
        },
    ]
