"""What LeaderWorkerSet's admission would refuse of an LWS a sync writes (`Degraded=LWSRefused`;
why: docs/safety.md, "Bad input"). The answer is not changed: the cluster decides.

The checks restate LeaderWorkerSet's webhook (`generalValidate` at 060ab4d, which refuses all
that v0.8.0's does) and the API server's checks of the metadata, against the LWS as written: its
own replicas (unlike the set's rule 4, which resolves against the role's target). Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Final

from hooks import api
from hooks.api import limits, naming
from hooks.core import compact, problems, records, validation

JsonObject = api.JsonObject

_NAME_PART: Final = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME: Final = re.compile(
    rf"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?{_NAME_PART}"
)
_LABEL_VALUE: Final = re.compile(f"({_NAME_PART})?")
_DNS1035: Final = re.compile("[a-z]([-a-z0-9]*[a-z0-9])?")
_PREFIX_MAX: Final = 253
_NAME_MAX: Final = 63


def refusals(lws: JsonObject) -> list[str]:
    """Why LeaderWorkerSet's admission would refuse `lws`, one "field: why" each."""
    return [*_metadata(lws), *_spec(lws.get("spec") or {}, lws)]


def refused(
    observed: Iterable[records.ObservedObject], answered: Iterable[JsonObject]
) -> list[problems.Problem]:
    """What LeaderWorkerSet's admission would refuse of each LWS this answer creates or
    rescales."""
    replicas = {
        item.name: item.spec_replicas for item in observed if item.kind is records.ChildKind.LWS
    }
    found = []
    for child in answered:
        name = child["metadata"]["name"]
        if child["kind"] != api.LWS_KIND or (
            name in replicas and replicas[name] == child["spec"].get("replicas")
        ):
            continue
        why = refusals(child)
        if why:
            found.append(
                problems.Problem(
                    api.Reason.LWS_REFUSED,
                    f"LeaderWorkerSet {name!r} would be refused by LeaderWorkerSet's admission"
                    f" ({problems.summarise(why)}): the set keeps asking for it; fix the role's"
                    " spec (or the set's name)",
                )
            )
    return found


def _metadata(lws: JsonObject) -> Iterator[str]:
    metadata = lws["metadata"]
    name = str(metadata.get("name", ""))
    if len(name) > naming.DNS1035_LABEL_MAX or not _DNS1035.fullmatch(name):
        yield (
            f"metadata.name: {name!r} is not a DNS-1035 label (at most 63 lowercase letters,"
            " digits and '-', starting with a letter)"
        )
    labels: Mapping[str, object] = metadata.get("labels") or {}
    for key, value in sorted(labels.items()):
        if not _is_qualified_name(key):
            yield f"metadata.labels: {key!r} is not a qualified name"
        elif (
            not isinstance(value, str)
            or len(value) > _NAME_MAX
            or not _LABEL_VALUE.fullmatch(value)
        ):
            yield f"metadata.labels[{key}]: {value!r} is not a valid label value"
    annotations: Mapping[str, object] = metadata.get("annotations") or {}
    for key in sorted(annotations):
        if not _is_qualified_name(key.lower()):
            yield f"metadata.annotations: {key!r} is not a qualified name"
    used = compact.annotation_bytes(lws)
    if used > limits.ANNOTATIONS_MAX_BYTES:
        yield (
            f"metadata.annotations: {used} bytes with Metacontroller's last-applied copy, more"
            f" than the {limits.ANNOTATIONS_MAX_BYTES} the API server allows (its templates are too"
            " large)"
        )


def _spec(spec: JsonObject, lws: JsonObject) -> Iterator[str]:
    replicas = _whole(spec.get("replicas", api.LWS_DEFAULT_REPLICAS))
    template = spec.get("leaderWorkerTemplate")
    template = template if isinstance(template, dict) else {}
    size = _whole(template.get("size", limits.LWS_DEFAULT_SIZE))
    if replicas is None or size is None:
        yield "spec: replicas and leaderWorkerTemplate.size must be whole numbers"
        return
    if not 0 <= replicas <= api.LWS_MAX_REPLICAS:
        yield f"spec.replicas: {replicas} is not from 0 to {api.LWS_MAX_REPLICAS}"
    if size < 1:
        yield f"spec.leaderWorkerTemplate.size: {size} is below 1"
    if replicas * size > api.INT32_MAX:
        yield (
            f"spec.replicas: {replicas} groups of {size} pods are more than {api.INT32_MAX} pods"
        )
    yield from _rolling_update(spec, replicas=replicas)
    policy = template.get("subGroupPolicy")
    if policy is not None and not (
        isinstance(policy, dict) and validation.subgroups_fit(policy, size=size)
    ):
        yield (
            f"spec.leaderWorkerTemplate.subGroupPolicy: {policy!r} does not fit groups of"
            f" {size} pods"
        )
    annotations = lws["metadata"].get("annotations") or {}
    if policy is None and api.SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION in annotations:
        yield (
            f"metadata.annotations[{api.SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION}]: set without"
            " spec.leaderWorkerTemplate.subGroupPolicy"
        )


def _rolling_update(spec: JsonObject, *, replicas: int) -> Iterator[str]:
    strategy = spec.get("rolloutStrategy")
    config = strategy.get("rollingUpdateConfiguration") if isinstance(strategy, dict) else None
    if not isinstance(config, dict):
        return  # LeaderWorkerSet defaults one that it admits
    path = "spec.rolloutStrategy.rollingUpdateConfiguration"
    surge = validation.int_or_percent(config.get("maxSurge", limits.LWS_DEFAULT_MAX_SURGE))
    unavailable = validation.int_or_percent(
        config.get("maxUnavailable", limits.LWS_DEFAULT_MAX_UNAVAILABLE)
    )
    if surge is None:
        yield f"{path}.maxSurge: {config.get('maxSurge')!r} is no count or percentage up to 100%"
    if unavailable is None:
        yield (
            f"{path}.maxUnavailable: {config.get('maxUnavailable')!r} is no count or"
            " percentage up to 100%"
        )
    partition = _whole(config.get("partition", 0))
    if partition is None or partition < 0:
        yield f"{path}.partition: {config.get('partition')!r} is not a whole number from 0"
    if (
        surge is not None
        and unavailable is not None
        and replicas > 0
        and validation.both_zero(surge, unavailable, replicas)
    ):
        yield (
            f"{path}.maxUnavailable: maxSurge {surge} and maxUnavailable {unavailable} both"
            f" come to 0 at {replicas} replicas"
        )


def _whole(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _is_qualified_name(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    return (
        len(name) <= _NAME_MAX
        and len(prefix) <= _PREFIX_MAX
        and _QUALIFIED_NAME.fullmatch(key) is not None
    )
