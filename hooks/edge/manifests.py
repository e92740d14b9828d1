"""DisaggregatedSet manifests read from files, as the API server would store them.

Used by the command line (`render`, `plan --from/--to`): a manifest is YAML a person wrote, so
before the hooks see it the CRD's defaults are applied (`crdgen.apply_defaults`) and the metadata
the API server adds is filled in. The revision hash depends on the defaulted template, so this is
what makes the names printed here the names a cluster gets.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import yaml

from hooks import api
from hooks.core import records
from hooks.edge import crdgen, envelope

RENDER_UID: Final = "00000000-0000-0000-0000-000000000000"
DEFAULT_NAMESPACE: Final = "default"

JsonObject = api.JsonObject


class ManifestError(Exception):
    """A file holds no usable DisaggregatedSet manifest."""


def load_sets(path: Path) -> list[JsonObject]:
    """Every DisaggregatedSet document of a YAML file (other kinds are skipped), as stored."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ManifestError(f"cannot read {path}: {error.strerror or error}") from None
    try:
        documents: list[Any] = list(yaml.safe_load_all(text))
    except yaml.YAMLError as error:
        raise ManifestError(f"{path} is not valid YAML: {error}") from None
    sets = [
        stored(document)
        for document in documents
        if isinstance(document, dict) and document.get("kind") == api.DS_KIND
    ]
    if not sets:
        raise ManifestError(f"{path} holds no {api.DS_KIND} manifest")
    return sets


def load_set(path: Path) -> records.Parent:
    """The one DisaggregatedSet of a file, parsed; raises when there is not exactly one."""
    sets = load_sets(path)
    if len(sets) != 1:
        raise ManifestError(f"{path} holds {len(sets)} {api.DS_KIND} manifests, expected one")
    try:
        return envelope.parse_parent(sets[0])
    except envelope.RequestError as error:
        raise ManifestError(f"{path}: {error}") from None


def stored(document: JsonObject) -> JsonObject:
    """A manifest with CRD defaults applied and server-set metadata filled in."""
    result = crdgen.apply_defaults(document)
    metadata = result.get("metadata")
    if not isinstance(metadata, dict):
        metadata = result["metadata"] = {}
    metadata.setdefault("namespace", DEFAULT_NAMESPACE)
    metadata.setdefault("uid", RENDER_UID)
    metadata.setdefault("generation", 1)
    return result


def empty_cluster_request(parent: JsonObject) -> JsonObject:
    """The first sync request Metacontroller sends for a new set: no children yet."""
    return {
        "parent": parent,
        "children": {kind.value: {} for kind in sorted(records.DS_CHILD_KINDS)},
        "related": {records.ChildKind.LWS.value: {}},
        "finalizing": False,
    }
