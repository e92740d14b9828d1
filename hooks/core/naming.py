"""Names, labels and selectors of the objects a DisaggregatedSet owns.

These strings are part of the compatibility contract with upstream: clients compute LWS names
themselves (`<set>-<slice>-<revision>-<role>`) and select pods by these labels. The module only
formats; it decides nothing and performs no checks beyond what a name is made of.
"""

from __future__ import annotations

from hooks import api

SERVICE_SUFFIX = "-prv"


def lws_name(*, set_name: str, slice_index: int, revision: str, role: str) -> str:
    """`<set>-<slice>-<revision>-<role>`, for example `llm-0-6ad7c921-prefill`."""
    return f"{set_name}-{slice_index}-{revision}-{role}"


def service_name(lws: str) -> str:
    """The headless Service of an LWS: its name plus `-prv`."""
    return lws + SERVICE_SUFFIX


def scaler_name(*, set_name: str, role: str) -> str:
    """The DisaggregatedSetRoleScaler of an External role: `<set>-<role>`."""
    return f"{set_name}-{role}"


def lws_labels(*, set_name: str, slice_index: int, revision: str, role: str) -> dict[str, str]:
    """The five labels the controller puts on an LWS and on both of its pod templates."""
    return {
        api.LABEL_APP: f"{set_name}-{slice_index}-{role}",
        api.LABEL_NAME: set_name,
        api.LABEL_ROLE: role,
        api.LABEL_SLICE: str(slice_index),
        api.LABEL_REVISION: revision,
    }


def service_labels(*, set_name: str, slice_index: int, revision: str, role: str) -> dict[str, str]:
    """Labels and selector of a revision's headless Service: name, role, revision and slice."""
    return {
        api.LABEL_NAME: set_name,
        api.LABEL_ROLE: role,
        api.LABEL_REVISION: revision,
        api.LABEL_SLICE: str(slice_index),
    }


def scaler_labels(*, set_name: str, role: str) -> dict[str, str]:
    """Labels of a scaler: the set's name and the role."""
    return {api.LABEL_NAME: set_name, api.LABEL_ROLE: role}


def leader_selector(*, set_name: str, role: str) -> str:
    """Selector (string form) matching one pod per LWS group, the leader, across revisions."""
    return f"{api.LABEL_NAME}={set_name},{api.LABEL_ROLE}={role},{api.LWS_WORKER_INDEX_LABEL}=0"
