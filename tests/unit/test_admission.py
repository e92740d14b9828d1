"""What LeaderWorkerSet's admission would refuse of an LWS a sync writes (`hooks.core.admission`,
issue 33 item 6), and the set reporting it at once (`Degraded=LWSRefused`)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from hooks import api
from hooks.core import admission, sync
from hooks.wire import answers, envelope
from tests import builders
from tests.lws_cases import REFUSED, rendered_lws, rolling

JsonObject = dict[str, Any]


def test_an_lws_as_the_set_renders_it_is_admitted() -> None:
    assert admission.refusals(rendered_lws()) == []


@pytest.mark.parametrize(("change", "field"), REFUSED)
def test_what_leaderworkerset_refuses_is_named(
    change: Callable[[JsonObject], None], field: str
) -> None:
    lws = rendered_lws()
    change(lws)
    found = admission.refusals(lws)
    assert any(field in why for why in found), found


@pytest.mark.parametrize(
    ("replicas", "refused"), [(0, False), (1, True), (3, True), (4, False)], ids=str
)
def test_maxsurge_zero_with_a_quarter_unavailable_is_refused_below_four_replicas(
    replicas: int, refused: bool
) -> None:
    """LeaderWorkerSet resolves the percentage against the LWS's own replicas, on every write:
    a role of 4 passes the set's rule, but a rollout's steps at 1 to 3 replicas do not."""
    lws = rendered_lws(replicas=replicas, rolloutStrategy=rolling(0, "25%"))
    assert bool(admission.refusals(lws)) is refused


def test_a_configuration_without_surge_or_unavailable_reads_as_the_crd_defaults_them() -> None:
    assert admission.refusals(rendered_lws(rolloutStrategy=rolling(0, 1))) == []
    lws = rendered_lws(rolloutStrategy={"rollingUpdateConfiguration": {"partition": 0}})
    assert admission.refusals(lws) == []  # maxSurge 0, maxUnavailable 1


# --- the set reports it at once -----------------------------------------------------------------


def _answer(request: JsonObject) -> JsonObject:
    result = sync.sync(envelope.parse_sync_request(copy.deepcopy(request)), now=builders.NOW)
    decoded: JsonObject = orjson.loads(orjson.dumps(answers.render_answer(result.answer)))
    return decoded


def _degraded(answer: JsonObject) -> JsonObject:
    return next(c for c in answer["status"]["conditions"] if c["type"] == "Degraded")


def test_an_external_role_at_zero_with_a_surge_past_100_is_reported_on_its_first_sync() -> None:
    """The set's rule exempts a role of replicas 0, as upstream's does; its LWS, at the
    scaler's replicas, is what LeaderWorkerSet judges. Reported at once, still asked for."""
    external = builders.make_role("decode", replicas=0, external=True, max_surge="150%")
    ds = builders.make_ds(roles=[builders.make_role("prefill"), external])
    answer = _answer(builders.make_request(ds))
    degraded = _degraded(answer)
    assert (degraded["status"], degraded["reason"]) == ("True", "LWSRefused")
    assert "maxSurge: '150%'" in degraded["message"]
    names = {c["metadata"]["name"] for c in answer["children"] if c["kind"] == api.LWS_KIND}
    revision = answer["status"]["revision"]
    assert names == {f"llm-0-{revision}-prefill", f"llm-0-{revision}-decode"}


def test_a_set_whose_lws_are_admitted_reports_nothing() -> None:
    answer = _answer(builders.make_request(builders.make_ds()))
    assert _degraded(answer)["status"] == "False"
