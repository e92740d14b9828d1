"""LeaderWorkerSets the set writes, and changes that LeaderWorkerSet's admission refuses, shared
by the hooks' prediction (`tests/unit/test_admission.py`) and the control plane's stand-in for
LeaderWorkerSet's webhook (`tests/cluster/test_validation.py`)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from hooks import api
from hooks.core import children
from tests import builders

JsonObject = dict[str, Any]


def rendered_lws(**spec: Any) -> JsonObject:
    """The LWS of a one-container role as the set renders it (2 replicas), with `spec` over its
    spec."""
    role = api.Role.model_validate(builders.make_role("prefill"))
    rendered = copy.deepcopy(
        children.render_lws(
            set_name="llm", role=role, slice_index=0, revision="0123abcd", replicas=2, policy=None
        )
    )
    rendered["spec"].update(spec)
    return rendered


def rolling(surge: Any, unavailable: Any, **more: Any) -> JsonObject:
    """A rolloutStrategy with a rollingUpdateConfiguration of these values."""
    config = {"maxSurge": surge, "maxUnavailable": unavailable, **more}
    return {"type": "RollingUpdate", "rollingUpdateConfiguration": config}


def _set(path: tuple[str, ...], value: Any) -> Callable[[JsonObject], None]:
    """A change of an LWS: `value` at `path`."""

    def change(lws: JsonObject) -> None:
        target = lws
        for key in path[:-1]:
            target = target.setdefault(key, {})
        target[path[-1]] = value

    return change


REFUSED = [  # (change, a field its refusal names)
    pytest.param(
        _set(("metadata", "name"), "1llm-0-0123abcd-prefill"), "metadata.name", id="name-digit"
    ),
    pytest.param(_set(("metadata", "name"), "llm.a-0-0123abcd-p"), "metadata.name", id="name-dot"),
    pytest.param(_set(("metadata", "labels", "bad key!"), "x"), "metadata.labels", id="label-key"),
    pytest.param(
        _set(("metadata", "labels", "team"), "x" * 64), "metadata.labels[team]", id="label-value"
    ),
    pytest.param(
        _set(("metadata", "annotations", "/bad"), "x"), "metadata.annotations", id="annotation-key"
    ),
    pytest.param(
        _set(("metadata", "annotations", "big"), "x" * 140_000),
        "metadata.annotations: 2",
        id="annotations-with-the-copy",
    ),
    pytest.param(_set(("spec", "replicas"), 1_000_001), "spec.replicas", id="replicas-past-1e6"),
    pytest.param(
        _set(("spec", "leaderWorkerTemplate", "size"), 0),
        "spec.leaderWorkerTemplate.size",
        id="size-0",
    ),
    pytest.param(
        _set(("spec", "leaderWorkerTemplate", "size"), 1_200_000_000),
        "spec.replicas: 2 groups",
        id="pods",
    ),
    pytest.param(
        _set(("spec", "rolloutStrategy"), rolling("150%", 0)), "maxSurge", id="surge-over-100"
    ),
    pytest.param(
        _set(("spec", "rolloutStrategy"), rolling(-1, 1)), "maxSurge", id="surge-negative"
    ),
    pytest.param(
        _set(("spec", "rolloutStrategy"), rolling(1, "5")),
        "maxUnavailable",
        id="unavailable-no-percent",
    ),
    pytest.param(
        _set(("spec", "rolloutStrategy"), rolling(1, 0, partition=-1)), "partition", id="partition"
    ),
    pytest.param(
        _set(("spec", "rolloutStrategy"), rolling(0, "25%")), "both come to 0 at 2", id="both-zero"
    ),
    pytest.param(
        _set(("spec", "leaderWorkerTemplate", "subGroupPolicy"), {"subGroupSize": 2}),
        "subGroupPolicy",
        id="subgroup-past-size",
    ),
    pytest.param(
        _set(("metadata", "annotations", api.SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION), "rack"),
        "subgroup-exclusive-topology",
        id="subgroup-exclusive-alone",
    ),
    pytest.param(
        _set(("spec", "leaderWorkerTemplate", "size"), "4"), "whole numbers", id="size-a-string"
    ),
]
