"""DisaggregatedSet manifests read from files, judged as the API server on `kubectl apply` and the
hook's re-check (`validation`) would, in the server's order (`check`), and defaulted as the server
stores them (`stored`), for `render` and `plan --from/--to`: every problem at once, one
`field: message` line each.
"""

from __future__ import annotations

import functools
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import yaml

from hooks import api
from hooks.api import naming, rules
from hooks.cli import console, crdgen, pruning
from hooks.core import records, validation
from hooks.wire import parents, values

if TYPE_CHECKING:
    import jsonschema


JsonObject = api.JsonObject


class ManifestError(console.CliError):
    """A file holds no usable DisaggregatedSet manifest; `lines` says why, one problem a line."""


STDIN: Final = "-"
RENDER_UID: Final = "00000000-0000-0000-0000-000000000000"
DEFAULT_NAMESPACE: Final = "default"


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
        raise ManifestError(yaml_error(source, text, error)) from None


def yaml_error(source: str, text: str, error: yaml.YAMLError) -> str:
    """A YAML error as compilers write theirs: `FILE:LINE:COLUMN: problem` (1-based)."""
    if isinstance(error, yaml.MarkedYAMLError):
        mark = error.problem_mark or error.context_mark
        problem = error.problem or error.context or "not valid YAML"
        if error.context and error.problem:
            at = error.context_mark
            where = "" if at is None else f" at {at.line + 1}:{at.column + 1}"
            problem += f" ({error.context}{where})"
        if mark is not None:
            return f"{source}:{mark.line + 1}:{mark.column + 1}: {problem}"
        return f"{source}: {problem}"
    if isinstance(error, yaml.reader.ReaderError) and isinstance(error.character, int):
        # Read from a str, the position counts characters and the character is a code point.
        start = text.rfind("\n", 0, error.position) + 1
        line = text.count("\n", 0, error.position) + 1
        column = error.position - start + 1
        character = f"#x{error.character:04x}"
        return f"{source}:{line}:{column}: unacceptable character {character}: {error.reason}"
    problem = " ".join(str(error).split())
    return f"{source}: not valid YAML: {problem}"


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


@dataclass(frozen=True, slots=True)
class Checked:
    """A manifest judged: what would be refused, one `field: message` line each, and when
    nothing is, the manifest as the API server would store it and the parsed parent."""

    problems: tuple[str, ...]
    stored: JsonObject = field(default_factory=dict)
    parent: records.Parent | None = None


RULES_NOT_CHECKED: Final = (
    "(the object): the validation rules were not checked because of the errors above (a wrong"
    " type, a value not allowed or a required field missing); correct them to check the rules"
)


def check(document: JsonObject) -> Checked:
    """Judge a DisaggregatedSet manifest in the API server's order and report every problem:
    apiVersion (another one is not served: nothing else is judged), unknown fields
    (`hooks.cli.pruning`), then, with those dropped as when the server only warns of them,
    metadata.name, the OpenAPI schema and the rules (`validation`)."""
    if document.get("apiVersion") != api.API_VERSION:
        given = document.get("apiVersion")
        return Checked((f"apiVersion: must be {api.API_VERSION}, not {given!r}",))
    problems = [f'unknown field "{path}"' for path in pruning.unknown_fields(document)]
    known = pruning.without_unknown_fields(document)
    metadata = known.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    problems += [f"metadata.name: {message}" for message in name_errors(name)]
    schema, blocked = _schema_problems(known)
    problems += schema
    result = stored(known)
    try:
        parent = parents.parse_parent(result)
    except values.RequestError as error:
        return Checked((*problems, str(error)))
    problems += _spec_problems(parent, result, schema, blocked=blocked)
    if problems:
        return Checked(tuple(problems))
    return Checked((), stored=result, parent=parent)


def _spec_problems(
    parent: records.Parent, stored_set: JsonObject, schema: list[str], *, blocked: bool
) -> list[str]:
    """What the parser and the rules find beside the schema problems (`blocked`: one leaves the
    rules unchecked): the rules are checked as the API server checks them (on a spec parsed as
    written when only a bound is broken)."""
    problems = []
    if parent.spec is not None or not schema:
        # With a schema error and no spec, the parser only says again what the schema said.
        problems += [_line(v.field, v.message) for v in parent.spec_violations]
    spec = None if blocked else parent.spec
    if spec is None and schema and not blocked:
        spec = parents.parse_spec_ignoring_bounds(stored_set.get("spec"))
    if spec is None and schema:
        problems.append(RULES_NOT_CHECKED)
    if spec is not None:
        problems += _rule_problems(parent.name, spec)
    return problems


def located(source: str, document: object, problem: str) -> str:
    """A problem of one document of a file, as both commands print it: `FILE: Kind name: ...`."""
    return f"{source}: {describe(document)}: {problem}"


# What makes the API server leave the rules unchecked: a wrong type, a value outside an enum (an
# int-or-string that is neither is a wrong type too).
_BLOCKING_VALIDATORS: Final = frozenset({"type", "enum", "anyOf"})


def _schema_problems(document: JsonObject) -> tuple[list[str], bool]:
    """The schema's problems, one line each, and whether one leaves the rules unchecked."""
    defaulted = apply_defaults(document)
    errors = sorted(
        _schema_validator().iter_errors(defaulted), key=lambda error: list(error.absolute_path)
    )
    lines = [
        _line(values.field_path(error.absolute_path) or "(the object)", _message(error))
        for error in errors
    ]
    return lines, any(error.validator in _BLOCKING_VALIDATORS for error in errors)


def _line(field: str, message: str) -> str:
    """`field: message`, without the message's own mention of its field (a rule's message starts
    with it, indexes left out, to read on its own in a Degraded condition)."""
    generic = re.sub(r"\[[0-9]+\]", "[]", field)
    return f"{field}: {message.removeprefix(generic + ' ')}"


# What the API server requires of an object's name (apimachinery's IsDNS1123Subdomain).
_DNS1123_SUBDOMAIN: Final = re.compile(
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
)
_DNS1123_SUBDOMAIN_MESSAGE: Final = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or"
    " '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used"
    f" for validation is '{_DNS1123_SUBDOMAIN.pattern}')"
)


def name_errors(name: object) -> list[str]:
    """What the API server says of a metadata.name that is not a DNS-1123 subdomain, in its words
    (a name that is not a string is the parser's to report)."""
    if not isinstance(name, str):
        return []
    errors = []
    if len(name) > naming.DNS1123_SUBDOMAIN_MAX:
        errors.append(f"must be no more than {naming.DNS1123_SUBDOMAIN_MAX} characters")
    if _DNS1123_SUBDOMAIN.fullmatch(name) is None:
        errors.append(_DNS1123_SUBDOMAIN_MESSAGE)
    return errors


def _rule_problems(name: str, spec: api.DisaggregatedSetSpec) -> list[str]:
    """The hook's re-check as `field: message` lines, a name budget the set name alone breaks
    reported once under metadata.name (`_name_too_long`) instead of under each role."""
    line, fields = _name_too_long(name, spec) or ("", frozenset())
    lines = []
    for violation in validation.check(name=name, spec=spec):
        if violation.rule != rules.GENERATED_NAMES_FIT.id or violation.field not in fields:
            lines.append(_line(violation.field, violation.message))
        elif line not in lines:
            lines.append(line)
    return lines


def _name_too_long(name: str, spec: api.DisaggregatedSetSpec) -> tuple[str, frozenset[str]] | None:
    """A metadata.name line for the roles whose name budget the set name breaks on its own (no
    room left for a one-character role name), and the role name fields it stands for; None when
    there are none."""
    budgets = [
        naming.budget(set_name=name, role=role.name, slices=spec.slices, replicas=role.replicas)
        for role in spec.roles
    ]
    # Room for the set name beside each role's name (none where the role name alone is too long).
    rooms = [
        budget.combined_limit - len(role.name)
        for role, budget in zip(spec.roles, budgets, strict=True)
    ]
    alone = [
        index
        for index, budget in enumerate(budgets)
        if len(name) >= budget.combined_limit and rooms[index] > 0
    ]
    if not alone:
        return None
    worst = max((budgets[index] for index in alone), key=lambda budget: budget.length)
    # One limit, the set name's: the rule's own message gives the set and role names' combined
    # one, which beside it reads as a second limit for the same name.
    line = (
        f"metadata.name: is too long: {counted(len(name), 'character')}, at most "
        f"{min(room for room in rooms if room > 0)} with these roles, slices and replicas (the"
        f" generated names would have {worst.length} characters, over the DNS-1035 limit of"
        f" {naming.DNS1035_LABEL_MAX}): shorten the set's name"
    )
    fields = frozenset(values.field_path(("roles", index, "name"), root="spec") for index in alone)
    return line, fields


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """A count and its noun, singular for 1: `1 pass`, `2 passes`."""
    if count == 1:
        return f"{count} {noun}"
    return f"{count} {plural or noun + 's'}"


@functools.cache
def _schema_validator() -> jsonschema.Draft4Validator:
    # Imported here: jsonschema (about 4 MiB) is for a command that checks a manifest only.
    import jsonschema

    return jsonschema.Draft4Validator(crdgen.openapi_schema(crdgen.DS_FILE))


def _message(error: jsonschema.ValidationError) -> str:
    limit = error.validator_value
    if (
        error.validator in ("minItems", "maxItems")
        and isinstance(error.instance, list)
        and isinstance(limit, int)
    ):
        bound = "at least" if error.validator == "minItems" else "at most"
        return f"must have {bound} {counted(limit, 'item')}, has {len(error.instance)}"
    message = error.message
    return message if len(message) <= 200 else message[:200] + "..."


# --- as the API server stores it ----------------------------------------------------------------


def stored(document: JsonObject) -> JsonObject:
    """A manifest as the API server stores it: the CRD's defaults applied (they decide the
    revision hash) and the metadata the server sets filled in."""
    result = apply_defaults(document)
    metadata = result.get("metadata")
    if not isinstance(metadata, dict):
        metadata = result["metadata"] = {}
    metadata.setdefault("namespace", DEFAULT_NAMESPACE)
    metadata.setdefault("uid", RENDER_UID)
    metadata.setdefault("generation", 1)
    return result


def apply_defaults(obj: JsonObject) -> JsonObject:
    """A copy of a DisaggregatedSet manifest with the CRD's defaults applied."""
    result: JsonObject = json.loads(json.dumps(obj))
    apply_schema_defaults(result, crdgen.openapi_schema(crdgen.DS_FILE))
    return result


def apply_schema_defaults(value: Any, schema: JsonObject) -> None:
    """Fill absent (or null) fields of `value` in place with the schema's defaults, outermost
    first, as the API server's structural defaulting does."""
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


def load_set(path: Path) -> records.Parent:
    """The one DisaggregatedSet of a file, judged by `check`; raises `ManifestError` when there is
    not exactly one, or when it would be refused (one line per problem, as `render` prints them)."""
    source = str(path)
    documents = [document for document in read_documents(source) if is_set(document)]
    if not documents:
        raise ManifestError(f"{path} holds no {api.DS_KIND} manifest")
    if len(documents) != 1:
        raise ManifestError(f"{path} holds {len(documents)} {api.DS_KIND} manifests, expected one")
    checked = check(documents[0])
    if checked.parent is None:
        raise ManifestError(*(located(source, documents[0], p) for p in checked.problems))
    return checked.parent


def empty_cluster_request(parent: JsonObject) -> JsonObject:
    """The first sync request Metacontroller sends for a new set: no children yet."""
    return {
        "parent": parent,
        "children": {kind.value: {} for kind in sorted(records.DS_CHILD_KINDS)},
        "related": {},
        "finalizing": False,
    }
