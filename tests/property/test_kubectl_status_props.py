"""`kubectl ds rollout status` reads a set's status and its LWS, which anyone who can write in
the namespace can forge (docs/safety.md): whatever they hold, it answers an outcome and its lines,
or refuses the set in one error (`RolloutError`), and never ends in a traceback.

The drawn status keeps the shape the hooks write, with every value drawn from text that mixes
ASCII and other Unicode digits, signs, separators and slashes (a regression: a READY of `²/1`
passed `str.isdigit` and crashed `int`), numbers of any size and values of the wrong type.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from hooks.api import LABEL_ROLE, LABEL_SLICE
from hooks.core import records
from hooks.kubectl import rollout, status
from hooks.wire import objects, values
from tests import builders

JsonObject = dict[str, Any]

OTHER_DIGITS = "\u00b2\u00b9\u0663\u0667\u0660\u06f5"
"""Digits `str.isdigit` accepts and a Kubernetes count never holds: superscript, Arabic-Indic."""
_CHARACTERS = st.sampled_from("0123456789/%-+. abAZ:_\u4e00" + OTHER_DIGITS)
TEXTS = st.text(_CHARACTERS, max_size=12)
SCALARS = st.one_of(
    TEXTS,
    st.integers(min_value=-(2**64), max_value=2**64),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXTS, inner, max_size=3),
    max_leaves=6,
)
DIGITS = st.text(st.sampled_from("0123456789" + OTHER_DIGITS), min_size=1, max_size=3)
READY = st.one_of(st.builds("{}/{}".format, DIGITS, DIGITS), TEXTS, VALUES)
"""READY as the hooks write it (`ready/desired`), with digits of any script, or anything."""
NUMBERS = st.one_of(st.integers(min_value=-3, max_value=2**63), VALUES)
CONDITION = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["Available", "Progressing", "Degraded"]) | VALUES,
        "status": st.sampled_from(["True", "False", "Unknown"]) | VALUES,
        "reason": st.sampled_from(["RolloutHeld", "RolloutInProgress", "AsExpected"]) | VALUES,
        "message": TEXTS,
    }
)
SLICE = st.fixed_dictionaries(
    {"index": NUMBERS, "phase": TEXTS | VALUES, "revisions": st.lists(TEXTS, max_size=3)}
)


@st.composite
def stored_sets(draw: st.DrawFn) -> JsonObject:
    """A set as kubectl prints it, its status forged field by field."""
    roles = [builders.make_role("prefill", replicas=2), builders.make_role("decode", replicas=1)]
    ds = builders.make_ds(roles=roles, generation=2, slices=draw(st.integers(1, 3)))
    forged: JsonObject = {
        "observedGeneration": draw(st.sampled_from([2, 1]) | NUMBERS),
        "revision": draw(TEXTS | VALUES),
        "ready": draw(READY),
        "conditions": draw(st.lists(CONDITION, max_size=3) | VALUES),
        "rollout": draw(
            st.fixed_dictionaries({"revision": TEXTS, "slices": st.lists(SLICE, max_size=3)})
            | VALUES
        ),
    }
    ds["status"] = {
        key: value for key, value in forged.items() if draw(st.booleans()) or key == "ready"
    }
    return ds


@st.composite
def lws_lists(draw: st.DrawFn) -> list[JsonObject]:
    """LWS of the set with forged role and slice labels and forged replica counts."""
    found = []
    for _ in range(draw(st.integers(0, 4))):
        lws = builders.make_lws(
            draw(st.sampled_from(["prefill", "decode", "gone"])),
            revision=draw(TEXTS),
            replicas=draw(st.integers(0, 5)),
            ready=draw(st.integers(0, 5)),
        )
        lws["metadata"]["labels"][LABEL_SLICE] = draw(TEXTS)
        lws["metadata"]["labels"][LABEL_ROLE] = draw(st.sampled_from(["prefill", "decode", "x"]))
        lws["status"] = draw(
            st.fixed_dictionaries({"replicas": NUMBERS, "readyReplicas": NUMBERS}) | VALUES
        )
        found.append(lws)
    return found


@settings(max_examples=300, deadline=None)
@given(stored_sets(), lws_lists())
def test_rollout_status_answers_any_forged_status_or_refuses_it(
    stored: JsonObject, listed: list[JsonObject]
) -> None:
    try:
        parent = rollout.read_set(stored)
    except rollout.RolloutError:
        return
    lws = []
    for item in listed:
        try:
            lws.append(objects.parse_object(records.ChildKind.LWS, item, where="items[0]"))
        except values.RequestError:
            continue
    outcome, message = status.judge(parent, lws)
    assert isinstance(outcome, status.Outcome)
    assert message
    lines = status.progress(parent, lws)
    assert all(isinstance(line, str) and "\n" not in line for line in lines.values())
