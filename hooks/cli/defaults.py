"""A manifest as the API server would store it: the CRD's defaults applied and the metadata the
server adds filled in (`stored`).

The API server fills in every schema `default` of an absent field before it stores an object
(structural defaulting, outermost first); the stored object decides the revision hash, so what
predicts names from a manifest (`render`, `plan --from/--to`) must default it the same way.
"""

from __future__ import annotations

import json
from typing import Any, Final

from hooks import api
from hooks.cli import crdgen

RENDER_UID: Final = "00000000-0000-0000-0000-000000000000"
DEFAULT_NAMESPACE: Final = "default"
_CRD_FILES: Final = {api.DS_KIND: crdgen.DS_FILE, api.SCALER_KIND: crdgen.SCALER_FILE}

JsonObject = api.JsonObject


def stored(document: JsonObject) -> JsonObject:
    """A manifest with CRD defaults applied and server-set metadata filled in."""
    result = apply_defaults(document)
    metadata = result.get("metadata")
    if not isinstance(metadata, dict):
        metadata = result["metadata"] = {}
    metadata.setdefault("namespace", DEFAULT_NAMESPACE)
    metadata.setdefault("uid", RENDER_UID)
    metadata.setdefault("generation", 1)
    return result


def apply_defaults(obj: JsonObject) -> JsonObject:
    """A copy of a DisaggregatedSet or scaler manifest (by its kind) with the CRD's defaults
    applied."""
    result: JsonObject = json.loads(json.dumps(obj))
    apply_schema_defaults(result, crdgen.openapi_schema(_CRD_FILES[obj["kind"]]))
    return result


def apply_schema_defaults(value: Any, schema: JsonObject) -> None:
    """Fill absent (or null) fields of `value` in place with the schema's defaults, recursively."""
    if isinstance(value, dict):
        properties: JsonObject = schema.get("properties", {})
        for key, prop in properties.items():
            if "default" in prop and value.get(key) is None:
                value[key] = json.loads(json.dumps(prop["default"]))
        additional = schema.get("additionalProperties")
        for key, child in value.items():
            if key in properties:
                apply_schema_defaults(child, properties[key])
            elif isinstance(additional, dict):
                apply_schema_defaults(child, additional)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for child in value:
            apply_schema_defaults(child, schema["items"])
