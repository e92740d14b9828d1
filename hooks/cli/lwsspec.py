"""The LeaderWorkerSet `spec` schema the DisaggregatedSet CRD embeds in each role
(`hooks.cli.crdgen`), and the walk over OpenAPI schema nodes both use.

The schema ships in the package as `lws_spec_schema.json`, which `python -m hooks crds
--import-lws PATH` regenerates from an LWS CRD (descriptions dropped, every other keyword kept).
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any, Final

import yaml

from hooks import api

JsonObject = dict[str, Any]

LWS_SPEC_SCHEMA_FILE: Final = "lws_spec_schema.json"

# Keywords that hold sub-schemas. Everything else in a schema node is data (default, enum, ...)
# and is never walked, so a default object with a "description" key stays intact.
SCHEMA_MAPS: Final = ("properties",)
SCHEMA_VALUES: Final = ("items", "additionalProperties", "not")
SCHEMA_LISTS: Final = ("anyOf", "allOf", "oneOf")


class CrdGenError(Exception):
    """The models or the LWS CRD cannot be turned into a structural schema."""


def without_keyword(schema: JsonObject, keyword: str) -> JsonObject:
    """A copy of an OpenAPI schema without `keyword` in any of its nodes (data values untouched)."""
    result: JsonObject = {}
    for key, value in schema.items():
        if key == keyword:
            continue
        if key in SCHEMA_MAPS:
            result[key] = {name: without_keyword(node, keyword) for name, node in value.items()}
        elif key in SCHEMA_VALUES and isinstance(value, dict):
            result[key] = without_keyword(value, keyword)
        elif key in SCHEMA_LISTS:
            result[key] = [without_keyword(node, keyword) for node in value]
        else:
            result[key] = value
    return result


def extract_lws_spec_schema(lws_crd: JsonObject) -> JsonObject:
    """The storage version's `spec` schema of a LeaderWorkerSet CRD, descriptions stripped."""
    if lws_crd.get("kind") != "CustomResourceDefinition":
        raise CrdGenError("not a CustomResourceDefinition")
    versions = [v for v in lws_crd["spec"]["versions"] if v.get("storage")]
    if len(versions) != 1:
        raise CrdGenError("the CRD has no single storage version")
    schema: JsonObject = versions[0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return without_keyword(schema, "description")


# Bounds the LWS CRD lacks, where the API server's CEL cost budget or the hook's cost per sync
# needs them (values upstream accepts in practice all fit). By property path from the role's spec:
_LWS_SPEC_BOUNDS: Final[dict[tuple[str, ...], JsonObject]] = {
    ("rolloutStrategy", "rollingUpdateConfiguration", field): {
        "maxLength": api.INT_OR_PERCENT_MAX_LENGTH
    }
    for field in ("maxSurge", "maxUnavailable")
}
# ... and on every resource.Quantity node, recognised by the pattern Kubernetes gives them.
_QUANTITY_PATTERN_START: Final = "^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))"
_QUANTITY_BOUND: Final[JsonObject] = {"maxLength": api.QUANTITY_MAX_LENGTH}


def bounded_lws_spec_schema(schema: JsonObject) -> JsonObject:
    """A copy of the embedded LWS spec schema with the added bounds merged in."""
    result: JsonObject = json.loads(json.dumps(schema))
    for path, keywords in _LWS_SPEC_BOUNDS.items():
        node = result
        for name in path:
            if name not in node.get("properties", {}):
                raise CrdGenError(f"the LWS spec schema has no {'.'.join(path)}")
            node = node["properties"][name]
        node.update(keywords)
    quantities = [node for node in schema_nodes(result) if _is_quantity(node)]
    if not quantities:
        raise CrdGenError("the LWS spec schema has no resource.Quantity fields")
    for node in quantities:
        node.update(_QUANTITY_BOUND)
    return result


def _is_quantity(node: JsonObject) -> bool:
    pattern = node.get("pattern")
    return (
        node.get("x-kubernetes-int-or-string") is True
        and isinstance(pattern, str)
        and pattern.startswith(_QUANTITY_PATTERN_START)
    )


def schema_nodes(schema: JsonObject) -> list[JsonObject]:
    """Every sub-schema of `schema`, itself included."""
    nodes = [schema]
    for key in SCHEMA_MAPS:
        for child in schema.get(key, {}).values():
            nodes.extend(schema_nodes(child))
    for key in SCHEMA_VALUES:
        if isinstance(schema.get(key), dict):
            nodes.extend(schema_nodes(schema[key]))
    for key in SCHEMA_LISTS:
        for child in schema.get(key, []):
            nodes.extend(schema_nodes(child))
    return nodes


def render_lws_spec_schema(schema: JsonObject) -> str:
    """The committed JSON text of the stripped LWS spec schema (sorted keys, one key a line)."""
    return json.dumps(schema, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def load_lws_spec_schema() -> JsonObject:
    """The committed stripped LWS spec schema shipped inside the package."""
    text = resources.files("hooks").joinpath(LWS_SPEC_SCHEMA_FILE).read_text(encoding="utf-8")
    schema: JsonObject = json.loads(text)
    return schema


def load_yaml(text: str) -> Any:
    """Parse YAML with libyaml when available (the LWS CRD is 1.3 MB)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(text, Loader=loader)


def import_lws(crd_path: Path) -> Path:
    """Regenerate the package's `lws_spec_schema.json` from an LWS CRD file; returns its path."""
    schema = extract_lws_spec_schema(load_yaml(crd_path.read_text(encoding="utf-8")))
    target = Path(__file__).resolve().parents[1] / LWS_SPEC_SCHEMA_FILE
    target.write_text(render_lws_spec_schema(schema), encoding="utf-8")
    return target
