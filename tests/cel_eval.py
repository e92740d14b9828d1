"""The API server's admission of a DisaggregatedSet against our generated CRD, for tests.

kube-apiserver handles a custom resource in this order: it prunes unknown fields and applies the
schema's defaults, validates the object against the OpenAPI schema, and only when that found no
blocking error evaluates the `x-kubernetes-validations` CEL rules, each on every value present at
its schema node. Blocking errors are a wrong type, a value outside an enum, a missing required
field, and a string or list over its maximum (the server then reports "some validation rules were
not checked"); other schema errors (minimum, minItems, pattern, duplicates) leave CEL running.
`CrdHarness.admit` plays that part with jsonschema (Draft 4 is the dialect of OpenAPI 3.0
schemas) and cel-python, reading the rules from the generated CRD itself;
tests/cluster/test_validation.py holds it to the real server's verdicts.

cel-python lacks the Kubernetes CEL extension `substring`, and its `matches` lets `$` match before
a trailing newline (Python `re`), unlike RE2; both are replaced by small functions below.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import celpy
import jsonschema
from celpy import celtypes

from hooks import api
from hooks.api import rules
from hooks.cli import crdgen, manifests

JsonObject = dict[str, Any]


def _substring(text: Any, start: Any, end: Any = None) -> celtypes.StringType:
    """Kubernetes CEL `<string>.substring(start[, end])` (code-point indices, checked)."""
    value = str(text)
    stop = len(value) if end is None else int(end)
    if not 0 <= int(start) <= stop <= len(value):
        raise ValueError(f"substring({start}, {end}) out of range for {value!r}")
    return celtypes.StringType(value[int(start) : stop])


def _matches(text: Any, pattern: Any) -> celtypes.BoolType:
    """CEL `matches` with RE2 semantics for `$` (end of text only)."""
    translated = re.sub(r"(?<!\\)\$", r"\\Z", str(pattern))
    return celtypes.BoolType(re.search(translated, str(text)) is not None)


CEL_FUNCTIONS = {"substring": _substring, "matches": _matches}

# jsonschema validators whose failure keeps kube-apiserver from evaluating CEL rules (its
# TypeInvalid, NotSupported, Required, TooLong and TooMany errors; an int-or-string of the wrong
# type fails `anyOf`).
_BLOCKING_VALIDATORS = frozenset(
    {"type", "anyOf", "enum", "required", "maxLength", "maxItems", "maxProperties"}
)


@dataclass(frozen=True)
class CelFailure:
    """A CEL rule that returned false: its id, the reported field path and message."""

    rule_id: str
    path: str
    message: str


@dataclass
class Admission:
    """What the API server would do with one object."""

    defaulted: JsonObject
    schema_errors: list[str] = field(default_factory=list)
    cel_failures: list[CelFailure] = field(default_factory=list)
    cel_skipped: bool = False

    @property
    def accepted(self) -> bool:
        return not self.schema_errors and not self.cel_failures

    @property
    def failed_rule_ids(self) -> set[str]:
        return {failure.rule_id for failure in self.cel_failures}


class CelRuleError(AssertionError):
    """A rule did not evaluate to a boolean (the API server would report an evaluation error)."""


class CrdHarness:
    """Defaulting, pruning, OpenAPI validation and CEL evaluation for one generated CRD."""

    def __init__(self, crd: JsonObject) -> None:
        self.root: JsonObject = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        self._validator = jsonschema.Draft4Validator(self.root)
        self._environment = celpy.Environment()
        self._rules_by_text = {rule.rule: rule for rule in rules.CEL_RULES}
        self._programs: dict[str, Any] = {}
        self._has_rules: dict[int, bool] = {}

    # -- defaulting and pruning ---------------------------------------------------------------

    def default(self, obj: JsonObject) -> JsonObject:
        """A defaulted copy, as structural defaulting does it (defaults, then recurse)."""
        result = copy.deepcopy(obj)
        manifests.apply_schema_defaults(result, self.root)
        return result

    def pruned_paths(self, obj: JsonObject) -> list[str]:
        """Paths of the fields the API server would prune (unknown to the schema)."""
        return list(_pruned(obj, self.root, "", is_root=True))

    # -- validation ----------------------------------------------------------------------------

    def schema_errors(self, obj: JsonObject) -> list[str]:
        """OpenAPI violations plus duplicate list-map keys / list-set items."""
        errors = [
            f"{'.'.join(str(p) for p in error.absolute_path)}: {error.message}"
            for error in self._validator.iter_errors(obj)
        ]
        errors.extend(_list_type_errors(obj, self.root, ""))
        return sorted(errors)

    def has_blocking_error(self, obj: JsonObject) -> bool:
        """Whether a schema error keeps the API server from evaluating the CEL rules."""
        return any(
            error.validator in _BLOCKING_VALIDATORS for error in self._validator.iter_errors(obj)
        )

    def cel_failures(self, obj: JsonObject) -> list[CelFailure]:
        """Every CEL rule that evaluates to false on the (already defaulted) object."""
        failures: list[CelFailure] = []
        self._walk(self.root, obj, "", failures, is_root=True)
        return failures

    def admit(self, obj: JsonObject) -> Admission:
        """Default, validate, then (without a blocking schema error) evaluate the CEL rules."""
        admission = Admission(defaulted=self.default(obj))
        admission.schema_errors = self.schema_errors(admission.defaulted)
        admission.cel_skipped = self.has_blocking_error(admission.defaulted)
        if not admission.cel_skipped:
            admission.cel_failures = self.cel_failures(admission.defaulted)
        return admission

    def evaluate(self, rule: rules.CelRule, value: Any) -> bool:
        """One rule on one value of its schema node (bypassing the schema, for direct tests)."""
        result = self._program(rule.rule).evaluate({"self": celpy.json_to_cel(value)})
        if not isinstance(result, celtypes.BoolType):
            raise CelRuleError(f"{rule.id} did not return a bool on {value!r}: {result!r}")
        return bool(result)

    def message(self, entry: JsonObject, value: Any) -> str:
        """What the API server reports for a failed rule: its messageExpression's value, when it
        has one, else its message."""
        expression = entry.get("messageExpression")
        if expression is None:
            return str(entry["message"])
        result = self._program(expression).evaluate({"self": celpy.json_to_cel(value)})
        if not isinstance(result, str):
            raise CelRuleError(f"messageExpression did not return a string: {result!r}")
        return str(result)

    def _program(self, text: str) -> Any:
        if text not in self._programs:
            ast = self._environment.compile(text)
            self._programs[text] = self._environment.program(ast, functions=CEL_FUNCTIONS)
        return self._programs[text]

    def _subtree_has_rules(self, schema: JsonObject) -> bool:
        key = id(schema)
        if key not in self._has_rules:
            self._has_rules[key] = "x-kubernetes-validations" in schema or any(
                self._subtree_has_rules(child) for child in _children(schema)
            )
        return self._has_rules[key]

    def _walk(
        self,
        schema: JsonObject,
        value: Any,
        path: str,
        failures: list[CelFailure],
        *,
        is_root: bool = False,
    ) -> None:
        if value is None or not self._subtree_has_rules(schema):
            return
        for entry in schema.get("x-kubernetes-validations", []):
            rule = self._rules_by_text[entry["rule"]]
            self_value = _root_view(value) if is_root else value
            if not self.evaluate(rule, self_value):
                suffix = entry.get("fieldPath", "")
                full = (path + suffix).lstrip(".") if suffix else path
                failures.append(CelFailure(rule.id, full, self.message(entry, self_value)))
        if isinstance(value, dict):
            properties = schema.get("properties")
            additional = schema.get("additionalProperties")
            for key, child in value.items():
                if properties is not None and key in properties:
                    self._walk(properties[key], child, f"{path}.{key}".lstrip("."), failures)
                elif isinstance(additional, dict):
                    self._walk(additional, child, f"{path}[{key}]", failures)
        elif isinstance(value, list) and isinstance(schema.get("items"), dict):
            for index, child in enumerate(value):
                self._walk(schema["items"], child, f"{path}[{index}]", failures)


def _children(schema: JsonObject) -> Iterator[JsonObject]:
    yield from schema.get("properties", {}).values()
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            yield schema[key]
    for key in ("anyOf", "allOf", "oneOf"):
        yield from schema.get(key, [])


def _root_view(obj: JsonObject) -> JsonObject:
    """Root rules see only metadata.name and metadata.generateName of the object's metadata."""
    metadata = obj.get("metadata") or {}
    visible = {key: metadata[key] for key in ("name", "generateName") if key in metadata}
    return {**obj, "metadata": visible}


def _pruned(value: Any, schema: JsonObject, path: str, *, is_root: bool = False) -> Iterator[str]:
    if schema.get("x-kubernetes-preserve-unknown-fields") or schema.get(
        "x-kubernetes-int-or-string"
    ):
        return
    if isinstance(value, dict):
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        for key, child in value.items():
            child_path = f"{path}.{key}".lstrip(".")
            if is_root and key == "metadata":
                continue
            if properties is not None and key in properties:
                yield from _pruned(child, properties[key], child_path)
            elif isinstance(additional, dict):
                yield from _pruned(child, additional, child_path)
            elif additional is not True:
                yield child_path
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, child in enumerate(value):
            yield from _pruned(child, schema["items"], f"{path}[{index}]")


def _list_type_errors(value: Any, schema: JsonObject, path: str) -> Iterator[str]:
    if isinstance(value, list):
        items = schema.get("items") if isinstance(schema.get("items"), dict) else None
        list_type = schema.get("x-kubernetes-list-type")
        if list_type == "map":
            keys = schema["x-kubernetes-list-map-keys"]
            seen: set[tuple[Any, ...]] = set()
            for index, item in enumerate(value):
                if isinstance(item, dict):
                    key = tuple(repr(item.get(k)) for k in keys)
                    if key in seen:
                        yield f"{path}[{index}]: Duplicate value of {keys}"
                    seen.add(key)
        elif list_type == "set":
            reprs = [repr(item) for item in value]
            if len(set(reprs)) != len(reprs):
                yield f"{path}: Duplicate value in a list-set"
        if items is not None:
            for index, item in enumerate(value):
                yield from _list_type_errors(item, items, f"{path}[{index}]")
    elif isinstance(value, dict):
        properties = schema.get("properties", {})
        additional = schema.get("additionalProperties")
        for key, child in value.items():
            if key in properties:
                yield from _list_type_errors(child, properties[key], f"{path}.{key}".lstrip("."))
            elif isinstance(additional, dict):
                yield from _list_type_errors(child, additional, f"{path}[{key}]")


@functools.cache
def ds_harness() -> CrdHarness:
    """The harness for the DisaggregatedSet CRD as crdgen renders it (built once per session)."""
    return CrdHarness(crdgen.build_crds()[crdgen.DS_FILE])


def make_role(
    name: str,
    *,
    replicas: int | None = 1,
    scaling: str | None = None,
    rollout: JsonObject | None = None,
    annotations: dict[str, str] | None = None,
    leader_annotations: dict[str, str] | None = None,
    worker_annotations: dict[str, str] | None = None,
) -> JsonObject:
    """A small role manifest (one container), with the given knobs set."""
    worker: JsonObject = {"spec": {"containers": [{"name": "main", "image": "busybox"}]}}
    if worker_annotations is not None:
        worker["metadata"] = {"annotations": worker_annotations}
    template: JsonObject = {"size": 1, "workerTemplate": worker}
    if leader_annotations is not None:
        template["leaderTemplate"] = {
            "metadata": {"annotations": leader_annotations},
            "spec": {"containers": [{"name": "leader", "image": "busybox"}]},
        }
    spec: JsonObject = {"leaderWorkerTemplate": template}
    if replicas is not None:
        spec["replicas"] = replicas
    if rollout is not None:
        spec["rolloutStrategy"] = rollout
    role: JsonObject = {"name": name, "spec": spec}
    if scaling is not None:
        role["scaling"] = {"mode": scaling}
    if annotations is not None:
        role["metadata"] = {"annotations": annotations}
    return role


def make_ds(
    *roles: JsonObject,
    name: str = "llm",
    slices: int | None = None,
    placement: JsonObject | None = None,
) -> JsonObject:
    """A DisaggregatedSet manifest; two plain roles (prefill, decode) when none are given."""
    spec: JsonObject = {"roles": list(roles) or [make_role("prefill"), make_role("decode")]}
    if slices is not None:
        spec["slices"] = slices
    if placement is not None:
        spec["placementPolicy"] = placement
    return {
        "apiVersion": api.API_VERSION,
        "kind": api.DS_KIND,
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }
