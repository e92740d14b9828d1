"""Names, labels and selectors of the objects a DisaggregatedSet owns, upstream's, and the budget
they must fit (docs/rollout.md, "Names and their budget"). It formats and measures, deciding
nothing; the CEL rule and `hooks.core.validation` both read the budget's constants here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from hooks import api

DNS1035_LABEL_MAX: Final = 63  # Service names and label values
DNS1123_SUBDOMAIN_MAX: Final = 253  # most object names (a DisaggregatedSetRoleScaler's)
REVISION_LENGTH: Final = 8  # hex characters of a revision (`hooks.gocompat.revision`)
SEPARATORS: Final = 3  # the dashes between set, slice, revision and role in an LWS name
SERVICE_SUFFIX: Final = "-prv"
# A StatefulSet's `controller-revision-hash` pod label adds to the LWS name the group index, two
# dashes and a hash of this many characters.
POD_REVISION_HASH_LENGTH: Final = 10
POD_REVISION_LABEL_FIXED: Final = 2 + POD_REVISION_HASH_LENGTH


def lws_name(*, set_name: str, slice_index: int, revision: str, role: str) -> str:
    """`<set>-<slice>-<revision>-<role>`, for example `llm-0-6ad7c921-prefill`."""
    return f"{set_name}-{slice_index}-{revision}-{role}"


def service_name(lws: str) -> str:
    """The headless Service of an LWS: its name plus `-prv`."""
    return lws + SERVICE_SUFFIX


def scaler_name(*, set_name: str, role: str) -> str:
    """The DisaggregatedSetRoleScaler of an External role: `<set>-<role>`."""
    return f"{set_name}-{role}"


def history_name(*, set_name: str, revision: str) -> str:
    """The DisaggregatedSetRevision of one revision of a set: `<set>-<revision>`."""
    return f"{set_name}-{revision}"


def digits(value: int) -> int:
    """Decimal digits of a non-negative count (negative values count as 0: one digit)."""
    return len(str(max(value, 0)))


@dataclass(frozen=True, slots=True)
class Budget:
    """How one role's generated names measure against the DNS-1035 limit."""

    length: int
    """The longest generated name: the LWS name of the last slice plus the longest suffix."""
    combined_limit: int
    """The most characters the set name and the role name may have together."""

    @property
    def fits(self) -> bool:
        return self.length <= DNS1035_LABEL_MAX


def budget(*, set_name: str, role: str, slices: int, replicas: int | None) -> Budget:
    """The name budget of one role (docs/rollout.md, "Names and their budget")."""
    # The longest DNS-1035 suffix of an LWS name: `-prv` or its last group's pod label.
    last_group = (api.LWS_DEFAULT_REPLICAS if replicas is None else replicas) - 1
    suffix = max(len(SERVICE_SUFFIX), digits(last_group) + POD_REVISION_LABEL_FIXED)
    overhead = SEPARATORS + digits(slices - 1) + REVISION_LENGTH + suffix
    return Budget(
        length=len(set_name) + len(role) + overhead, combined_limit=DNS1035_LABEL_MAX - overhead
    )


def max_fitting_replicas(*, lws: str) -> int:
    """The most groups an LWS of this name can have while every pod label fits (LWS maximum)."""
    room = DNS1035_LABEL_MAX - len(lws) - POD_REVISION_LABEL_FIXED
    if room < 1:
        return 0
    return min(int(10**room), api.LWS_MAX_REPLICAS)


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


def history_labels(*, set_name: str, revision: str) -> dict[str, str]:
    """Labels of a DisaggregatedSetRevision: the set's name and the revision it records."""
    return {api.LABEL_NAME: set_name, api.LABEL_REVISION: revision}


def leader_selector(*, set_name: str, role: str) -> str:
    """Selector (string form) matching one pod per LWS group, the leader, across revisions."""
    return f"{api.LABEL_NAME}={set_name},{api.LABEL_ROLE}={role},{api.LWS_WORKER_INDEX_LABEL}=0"
