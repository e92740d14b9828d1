"""Names and labels are the compatibility contract with upstream clients."""

from __future__ import annotations

from hooks import api
from hooks.api import naming


def test_lws_name_joins_set_slice_revision_and_role() -> None:
    name = naming.lws_name(set_name="llm", slice_index=0, revision="6ad7c921", role="prefill")
    assert name == "llm-0-6ad7c921-prefill"


def test_service_name_appends_prv() -> None:
    assert naming.service_name("llm-3-6ad7c921-decode") == "llm-3-6ad7c921-decode-prv"


def test_scaler_name_is_set_dash_role() -> None:
    assert naming.scaler_name(set_name="llm", role="decode") == "llm-decode"


def test_lws_labels_carry_app_name_role_slice_and_revision() -> None:
    labels = naming.lws_labels(set_name="llm", slice_index=2, revision="abcdef12", role="decode")
    assert labels == {
        "app": "llm-2-decode",
        api.LABEL_NAME: "llm",
        api.LABEL_ROLE: "decode",
        api.LABEL_SLICE: "2",
        api.LABEL_REVISION: "abcdef12",
    }


def test_service_labels_have_no_app_label() -> None:
    labels = naming.service_labels(set_name="llm", slice_index=0, revision="r", role="decode")
    assert set(labels) == {api.LABEL_NAME, api.LABEL_ROLE, api.LABEL_REVISION, api.LABEL_SLICE}


def test_leader_selector_matches_worker_index_zero() -> None:
    assert naming.leader_selector(set_name="llm", role="prefill") == (
        "disaggregatedset.x-k8s.io/name=llm,disaggregatedset.x-k8s.io/role=prefill,"
        "leaderworkerset.sigs.k8s.io/worker-index=0"
    )
