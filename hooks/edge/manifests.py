"""DisaggregatedSet manifests read from files, as the API server would store them.

Used by the command line (`render`, `plan --from/--to`): a manifest is YAML a person wrote, so
before the hooks see it the CRD's defaults are applied (`apply_defaults`) and the metadata
the API server adds is filled in. The revision hash depends on the defaulted template, so this is
what makes the names printed here the names a cluster gets.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import yaml

from hooks import api
from hooks.core import records
from hooks.edge import crdgen, envelope

if TYPE_CHECKING:
    import jsonschema

RENDER_UID: Final = "00000000-0000-0000-0000-000000000000"
DEFAULT_NAMESPACE: Final = "default"

JsonObject = api.JsonObject


class ManifestError(Exception):
    """A file holds no usable DisaggregatedSet manifest."""


STDIN: Final = "-"


def read_documents(source: str) -> list[Any]:
    """The YAML documents of a file, or of standard input for "-" (empty documents dropped)."""
    try:
        text = sys.stdin.read() if source == STDIN else Path(source).read_text(encoding="utf-8")
    except OSError as error:
        raise ManifestError(f"cannot read {source}: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise ManifestError(f"{source} is not UTF-8 text") from None
    try:
        return [document for document in yaml.safe_load_all(text) if document is not None]
    except yaml.YAMLError as error:
        problem = str(error).replace("\n", " ")
        raise ManifestError(f"{source} is not valid YAML: {problem}") from None


def describe(document: object) -> str:
    """How to name a document in a message: its kind and name when it has them."""
    if not isinstance(document, dict):
        return f"a YAML {type(document).__name__}"
    metadata = document.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return f"{document.get('kind', 'an object without kind')} {name or '(no name)'}"


def is_set(document: object) -> bool:
    """Whether a document claims to be a DisaggregatedSet (of any apiVersion)."""
    return isinstance(document, dict) and document.get("kind") == api.DS_KIND


def schema_errors(document: JsonObject) -> list[str]:
    """What the API server's OpenAPI check would refuse in a DisaggregatedSet manifest (after
    its defaults), as `path: message` lines. The CEL rules are `validation`'s."""
    if document.get("apiVersion") != api.API_VERSION:
        return [f"apiVersion: must be {api.API_VERSION}, not {document.get('apiVersion')!r}"]
    defaulted = apply_defaults(document)
    errors = sorted(
        _schema_validator().iter_errors(defaulted), key=lambda error: list(error.absolute_path)
    )
    return [
        f"{envelope.field_path(error.absolute_path) or '(the object)'}: {_message(error)}"
        for error in errors
    ]


@functools.cache
def _schema_validator() -> jsonschema.Draft4Validator:
    # Imported here: only `render` checks schemas, and the hook server, which imports this
    # module through the command line, would otherwise carry jsonschema (about 4 MiB) in every
    # process.
    import jsonschema

    schema = crdgen.build_crds()[crdgen.DS_FILE]["spec"]["versions"][0]["schema"]
    return jsonschema.Draft4Validator(schema["openAPIV3Schema"])


def _message(error: jsonschema.ValidationError) -> str:
    if error.validator in ("minItems", "maxItems") and isinstance(error.instance, list):
        bound = "at least" if error.validator == "minItems" else "at most"
        return f"must have {bound} {error.validator_value} items, has {len(error.instance)}"
    message = error.message
    return message if len(message) <= 200 else message[:200] + "..."


def load_sets(path: Path) -> list[JsonObject]:
    """Every DisaggregatedSet document of a YAML file (other kinds are skipped), as stored."""
    sets = [stored(document) for document in read_documents(str(path)) if is_set(document)]
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
    result = apply_defaults(document)
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


# --- defaulting ------------------------------------------------------------------------------


def apply_defaults(obj: JsonObject) -> JsonObject:
    """A copy of a DisaggregatedSet or scaler manifest with the CRD's defaults applied.

    The API server fills in every schema `default` of an absent field before it stores an object
    (structural defaulting, outermost first); the stored object decides the revision hash, so
    anything that predicts names from a manifest must default it the same way.
    """
    kind = obj.get("kind")
    files = {api.DS_KIND: crdgen.DS_FILE, api.SCALER_KIND: crdgen.SCALER_FILE}
    if kind not in files:
        raise ManifestError(f"no CRD for kind {kind!r}")
    crd = crdgen.build_crds()[files[kind]]
    schema: JsonObject = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    result: JsonObject = json.loads(json.dumps(obj))
    apply_schema_defaults(result, schema)
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
