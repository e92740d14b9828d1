"""The kit's adoption policy (metacontroller/adoption-policy.yaml): who may hand a set an object.

Rendered (`kubectl kustomize`): the policy denies, fails closed, and matches exactly the child
kinds of the DisaggregatedSet CompositeController; the verb adopt is aggregated to admin only and
bound to Metacontroller's service account, the one the sandbox runs it as; the overlay patch the
file documents replaces that subject. Evaluated with cel-python and a stand-in authorizer (as in
tests/deploy/test_components.py): which writes ask for the verb, on which set, and which are
refused without it. tests/cluster/test_adoption.py holds the real API server to the same.
"""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import celpy
import pytest
import yaml
from celpy import celtypes
from celpy.adapter import json_to_cel
from hypothesis import given
from hypothesis import strategies as st

from hooks import api
from hooks.kubectl import adopt
from tests import kustomize
from tests.kustomize import Manifest
from tests.shared import REPO_ROOT
from tools.sandbox import controlplane

POLICY_FILE: Final = REPO_ROOT / "metacontroller" / "adoption-policy.yaml"
POLICY: Final = "disaggregatedset-adoption"
BINDING: Final = "disaggregatedset-metacontroller-adopt"
ROLE: Final = "disaggregatedset-adopt"
SET_UID: Final = "5e7e0000-0000-4000-8000-000000000001"
OTHER_UID: Final = "5e7e0000-0000-4000-8000-000000000002"
NAMESPACE: Final = "ml"


def test_the_policy_denies_fails_closed_and_matches_the_sets_child_kinds(
    rendered: list[Manifest],
) -> None:
    policy = kustomize.one(rendered, "ValidatingAdmissionPolicy", POLICY)
    binding = kustomize.one(rendered, "ValidatingAdmissionPolicyBinding", POLICY)
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert binding["spec"] == {"policyName": POLICY, "validationActions": ["Deny"]}
    controller = kustomize.one(rendered, "CompositeController", "disaggregatedset-controller")
    children = {
        (child["apiVersion"].rpartition("/")[0], child["resource"])
        for child in controller["spec"]["childResources"]
    }
    rules = policy["spec"]["matchConstraints"]["resourceRules"]
    matched = {
        (group, resource)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    assert matched == children
    for rule in rules:
        assert (rule["apiVersions"], sorted(rule["operations"])) == (["*"], ["CREATE", "UPDATE"])


def test_the_verb_goes_to_admins_and_to_metacontrollers_service_account(
    rendered: list[Manifest],
) -> None:
    role = kustomize.one(rendered, "ClusterRole", ROLE)
    aggregated = {k for k in role["metadata"]["labels"] if k.startswith("rbac.authorization")}
    assert aggregated == {"rbac.authorization.k8s.io/aggregate-to-admin"}
    assert {"apiGroups": [api.GROUP], "resources": [api.DS_PLURAL], "verbs": [adopt.VERB]} in (
        role["rules"]
    )
    for other in ("disaggregatedset-view", "disaggregatedset-edit"):
        verbs = {
            v
            for rule in kustomize.one(rendered, "ClusterRole", other)["rules"]
            for v in rule["verbs"]
        }
        assert adopt.VERB not in verbs, other
    binding = kustomize.one(rendered, "ClusterRoleBinding", BINDING)
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": ROLE,
    }
    namespace, name = controlplane.METACONTROLLER_ACCOUNT
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]


def _documented_patch() -> str:
    """The overlay patch the policy file's comment gives for another Metacontroller install."""
    lines = POLICY_FILE.read_text().splitlines()
    start = lines.index("#   patches:")
    block = []
    for line in lines[start:]:
        if line == "#":
            break
        block.append(line.removeprefix("# "))
    return "\n".join(block)


def test_the_documented_overlay_patch_names_another_service_account(tmp_path: Path) -> None:
    kustomize.require_crds()
    patch = _documented_patch().replace("NAMESPACE", "ops").replace("NAME", "mc")
    overlay = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(REPO_ROOT, tmp_path)],
        **yaml.safe_load(patch),
    }
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(overlay))
    binding = kustomize.one(kustomize.render(tmp_path), "ClusterRoleBinding", BINDING)
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "mc", "namespace": "ops"}]


# --- the CEL, with a stand-in authorizer -----------------------------------------------------


@dataclass(frozen=True)
class _Check:
    """An authorizer request as the policy builds it, one call at a time."""

    parts: tuple[tuple[str, str], ...] = ()

    def with_(self, key: str, value: Any) -> _Check:
        return _Check((*self.parts, (key, str(value))))


@dataclass
class Requester:
    """Whoever writes: the sets (by name; "" for every set) of the namespace it may adopt
    for, and every check the policy made."""

    may_adopt: frozenset[str] = frozenset()
    asked: list[dict[str, str]] = field(default_factory=list)

    def allowed(self, check: _Check) -> celtypes.BoolType:
        request = dict(check.parts)
        self.asked.append(request)
        expected = {"group": api.GROUP, "resource": api.DS_PLURAL, "namespace": NAMESPACE}
        assert {key: request[key] for key in expected} == expected
        assert request["verb"] == adopt.VERB
        name = request.get("name", "")
        return celtypes.BoolType("" in self.may_adopt or (name != "" and name in self.may_adopt))


class _Stored(celtypes.MapType):
    """An object as CEL sees it, which may be compared with null (`oldObject != null`), as the
    API server's CEL allows and cel-python's maps do not."""

    def __eq__(self, other: object) -> Any:
        return celtypes.BoolType(False) if other is None else super().__eq__(other)

    def __ne__(self, other: object) -> Any:
        return celtypes.BoolType(True) if other is None else super().__ne__(other)

    __hash__ = None  # type: ignore[assignment]


def _join(items: celtypes.ListType, separator: celtypes.StringType | None = None) -> Any:
    """`list.join(sep)` from the Kubernetes CEL strings library, which cel-python lacks."""
    return celtypes.StringType(str(separator or "").join(str(item) for item in items))


Evaluate = Callable[[Manifest, "Manifest | None", Requester], list[str]]


@functools.cache
def _evaluator() -> Evaluate:
    """The policy as the API server runs it: variables, then each validation; returns the
    messages of the refusals (none: the write is admitted)."""
    policy = next(yaml.safe_load_all(POLICY_FILE.read_text()))
    env = celpy.Environment()
    current: list[Requester] = []
    functions = {
        "join": _join,
        "group": lambda target, value: _Check().with_("group", value),
        "resource": lambda target, value: target.with_("resource", value),
        "namespace": lambda target, value: target.with_("namespace", value),
        "name": lambda target, value: target.with_("name", value),
        "check": lambda target, verb: target.with_("verb", verb),
        "allowed": lambda target: current[-1].allowed(target),
    }

    def program(expression: str) -> Any:
        return env.program(env.compile(expression), functions=functions)

    variables = [(v["name"], program(v["expression"])) for v in policy["spec"]["variables"]]
    validations = [
        (program(v["expression"]), program(v["messageExpression"]))
        for v in policy["spec"]["validations"]
    ]

    def evaluate(obj: Manifest, old: Manifest | None, requester: Requester) -> list[str]:
        current.append(requester)
        activation: dict[str, Any] = {
            "object": json_to_cel(obj),
            "oldObject": None if old is None else _Stored(json_to_cel(old)),
            "request": json_to_cel({"namespace": NAMESPACE}),
            "authorizer": _Check(),
        }
        values: dict[str, Any] = {}
        for name, prog in variables:
            values[name] = prog.evaluate({**activation, "variables": celtypes.MapType(values)})
        activation["variables"] = celtypes.MapType(values)
        return [
            str(message.evaluate(activation))
            for check, message in validations
            if not bool(check.evaluate(activation))
        ]

    return evaluate


def evaluate(new: Manifest, old: Manifest | None, requester: Requester) -> list[str]:
    """The refusals of a write of `new` over `old` (None: a create) by `requester`."""
    return _evaluator()(new, old, requester)


def lws(
    *,
    label: str | None = None,
    set_name: str | None = "llm",
    owners: list[Manifest] | None = None,
) -> Manifest:
    labels = {} if set_name is None else {api.LABEL_NAME: set_name}
    if label is not None:
        labels[api.CONTROLLER_UID_LABEL] = label
    metadata: Manifest = {"name": "llm-0-fe283763-prefill", "namespace": NAMESPACE}
    if labels:
        metadata["labels"] = labels
    if owners is not None:
        metadata["ownerReferences"] = owners
    return {"apiVersion": api.LWS_API_VERSION, "kind": api.LWS_KIND, "metadata": metadata}


def set_ref(uid: str = SET_UID, name: str = "llm", *, controller: bool = True) -> Manifest:
    return {
        "apiVersion": api.API_VERSION,
        "kind": api.DS_KIND,
        "name": name,
        "uid": uid,
        "controller": controller,
        "blockOwnerDeletion": True,
    }


LWS_REF: Final = {
    "apiVersion": api.LWS_API_VERSION,
    "kind": api.LWS_KIND,
    "name": "llm-0",
    "uid": SET_UID,
    "controller": True,
}


@pytest.mark.parametrize(
    ("new", "old", "asked_about"),
    [
        pytest.param(lws(), None, [], id="create-of-an-object-of-no-set"),
        pytest.param(lws(label=SET_UID), None, ["llm"], id="create-with-the-label"),
        pytest.param(lws(label=SET_UID, set_name=None), None, [""], id="label-without-set-name"),
        pytest.param(lws(label=SET_UID), lws(), ["llm"], id="label-added"),
        pytest.param(lws(label=OTHER_UID), lws(label=SET_UID), ["llm"], id="label-changed"),
        pytest.param(lws(label=SET_UID), lws(label=SET_UID), [], id="label-kept"),
        pytest.param(lws(), lws(label=SET_UID), [], id="label-removed"),
        pytest.param(lws(owners=[set_ref()]), None, ["llm"], id="create-with-a-set-reference"),
        pytest.param(lws(owners=[set_ref(name="b")]), lws(), ["b"], id="reference-added"),
        pytest.param(
            lws(owners=[set_ref(name="b")]), lws(owners=[set_ref()]), ["b"], id="reference-renamed"
        ),
        pytest.param(
            lws(owners=[set_ref(OTHER_UID)]), lws(owners=[set_ref()]), ["llm"], id="reference-uid"
        ),
        pytest.param(lws(owners=[set_ref()]), lws(owners=[set_ref()]), [], id="reference-kept"),
        pytest.param(lws(owners=[]), lws(owners=[set_ref()]), [], id="reference-removed"),
        pytest.param(
            lws(owners=[set_ref(controller=False)]), None, [], id="reference-not-controller"
        ),
        pytest.param(lws(owners=[LWS_REF]), None, [], id="reference-to-another-kind"),
        pytest.param(
            lws(label=SET_UID, owners=[set_ref()]),
            lws(label=SET_UID),
            ["llm"],
            id="metacontroller-adopts-a-labelled-orphan",
        ),
        pytest.param(
            lws(label=SET_UID, owners=[set_ref(name="b")]),
            None,
            ["llm", "b"],
            id="label-and-reference-each-asked",
        ),
    ],
)
def test_a_write_asks_for_the_verb_only_when_it_hands_the_object_over(
    new: Manifest, old: Manifest | None, asked_about: list[str]
) -> None:
    """Metacontroller's updates of its children, the garbage collector releasing one, and every
    write that hands nothing over cost no authorizer call and pass; a write that hands the
    object over asks about the set its labels or reference name, and passes only if allowed."""
    nobody, everyone = Requester(), Requester(may_adopt=frozenset({""}))
    refused = evaluate(new, old, nobody)
    assert [request.get("name", "") for request in nobody.asked] == asked_about
    assert len(refused) == len(asked_about)
    assert evaluate(new, old, everyone) == []


def test_refusals_say_what_the_write_does_and_which_verb_it_takes() -> None:
    (label,) = evaluate(lws(label=SET_UID), None, Requester())
    assert label == (
        f"the label controller-uid={SET_UID} hands this object to the DisaggregatedSet of that"
        " uid, which only Metacontroller and whoever may adopt for the set may do: the RBAC verb"
        f' adopt on disaggregatedsets "llm" in namespace {NAMESPACE}, which the admin role has'
    )
    (unnamed,) = evaluate(lws(label=SET_UID, set_name=None), None, Requester())
    assert f"the RBAC verb adopt on every disaggregatedset of namespace {NAMESPACE} (" in unnamed
    (reference,) = evaluate(lws(owners=[set_ref()]), None, Requester())
    assert reference == (
        'a controller ownerReference to the DisaggregatedSet "llm" makes this object its child,'
        " which only Metacontroller and whoever may adopt for the set may do: the RBAC verb"
        f' adopt on disaggregatedsets "llm" in namespace {NAMESPACE}, which the admin role has'
    )


def test_the_verb_on_one_set_hands_over_only_objects_naming_that_set() -> None:
    """A grant limited by resourceNames to one set: a label naming another set, or no set, is
    refused (docs/safety.md says what such a grant still allows)."""
    one = Requester(may_adopt=frozenset({"llm"}))
    assert evaluate(lws(label=SET_UID), None, one) == []
    assert evaluate(lws(label=SET_UID, set_name="other"), None, one) != []
    assert evaluate(lws(label=SET_UID, set_name=None), None, one) != []
    assert evaluate(lws(owners=[set_ref(name="other")]), None, one) != []


labels = st.sampled_from([None, "", SET_UID, OTHER_UID])
references = st.sampled_from(
    [None, set_ref(), set_ref(name="b"), set_ref(OTHER_UID), set_ref(controller=False), LWS_REF]
)


@given(
    old_label=labels,
    new_label=labels,
    old_ref=references,
    new_ref=references,
    created=st.booleans(),
    may=st.sampled_from([frozenset(), frozenset({"llm"}), frozenset({"b"}), frozenset({""})]),
)
def test_a_write_is_refused_exactly_when_it_hands_the_object_to_a_set_without_the_verb(
    old_label: str | None,
    new_label: str | None,
    old_ref: Manifest | None,
    new_ref: Manifest | None,
    created: bool,
    may: frozenset[str],
) -> None:
    """The rule in the words of adoption-policy.yaml, against the CEL: a label set or changed
    needs the verb on the set the name label names, a controller reference to a set added or
    changed needs it on that set; nothing else is refused."""
    new = lws(label=new_label, owners=None if new_ref is None else [copy.deepcopy(new_ref)])
    old = None if created else lws(label=old_label, owners=None if old_ref is None else [old_ref])
    before_label = None if created else old_label
    before_ref = None if created else old_ref

    def is_set_controller(ref: Manifest | None) -> bool:
        return ref is not None and ref["kind"] == api.DS_KIND and ref["controller"] is True

    needs = []
    if new_label and new_label != (before_label or ""):
        needs.append("llm")
    if is_set_controller(new_ref) and not (
        is_set_controller(before_ref)
        and (before_ref or {}).get("uid") == (new_ref or {}).get("uid")
        and (before_ref or {}).get("name") == (new_ref or {}).get("name")
    ):
        needs.append((new_ref or {})["name"])
    refused = [name for name in needs if not ("" in may or name in may)]
    assert len(evaluate(new, old, Requester(may_adopt=may))) == len(refused)
