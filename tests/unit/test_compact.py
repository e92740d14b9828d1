"""The compact form of a history record (`hooks.core.compact`): roles packed and unpacked exactly,
a change-cause cut to its bound with a marker, and the largest record within the API server's
bound on annotations, Metacontroller's last-applied copy included."""

from __future__ import annotations

import base64
import random
import zlib
from typing import Any

import orjson
import pytest

from hooks import api
from hooks.api import limits
from hooks.core import compact
from hooks.gocompat import gotext
from tests import builders

JsonObject = dict[str, Any]


def _roles() -> list[JsonObject]:
    roles = [builders.make_role("prefill", replicas=2), builders.make_role("decode")]
    roles[0]["metadata"] = {"labels": {"team": "<serving> & \u2028"}}
    roles[1]["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["args"] = [
        "--ratio",
        0.5,
        "ünïcode ✓",
    ]
    return roles


def test_packed_roles_unpack_to_exactly_the_roles() -> None:
    roles = _roles()
    assert orjson.loads(compact.unpack_roles(compact.pack_roles(roles))) == roles


def test_packing_is_the_base64_of_zlib_of_the_json_list() -> None:
    packed = compact.pack_roles(_roles())
    assert orjson.loads(zlib.decompress(base64.b64decode(packed, validate=True))) == _roles()


@pytest.mark.parametrize(
    ("packed", "why"),
    [
        pytest.param("not base64!", "not base64", id="not-base64"),
        pytest.param("é", "not base64", id="not-ascii"),
        pytest.param(base64.b64encode(b"plain text").decode(), "not zlib", id="not-zlib"),
        pytest.param(
            base64.b64encode(zlib.compress(b"[]")[:-3]).decode(),
            "not one whole zlib stream",
            id="cut-short",
        ),
        pytest.param(
            base64.b64encode(zlib.compress(b"[]") + b"more").decode(),
            "not one whole zlib stream",
            id="trailing-bytes",
        ),
        pytest.param(
            base64.b64encode(zlib.compress(b" " * (limits.UNPACKED_ROLES_MAX_BYTES + 1))).decode(),
            "more than",
            id="inflates-past-the-bound",
        ),
    ],
)
def test_packed_roles_that_do_not_unpack_say_why(packed: str, why: str) -> None:
    with pytest.raises(compact.PackError, match=why):
        compact.unpack_roles(packed)


def test_a_bomb_is_never_inflated_past_the_bound() -> None:
    """A few kilobytes that would inflate to a gigabyte stop at the bound."""
    bomb = base64.b64encode(zlib.compress(b"\0" * (64 * 1024 * 1024), 9)).decode()
    assert len(bomb) < 100_000
    with pytest.raises(compact.PackError, match="more than"):
        compact.unpack_roles(bomb)


def test_roles_fit_a_record_up_to_the_bound() -> None:
    assert compact.fits("A" * limits.PACKED_ROLES_MAX_LENGTH)
    assert not compact.fits("A" * (limits.PACKED_ROLES_MAX_LENGTH + 1))


def test_random_roles_of_a_quarter_megabyte_do_not_fit_and_settings_of_a_megabyte_do() -> None:
    """What decides is how well the roles compress: random bytes do not, settings do (a set
    holds at most about 1.5 MiB: etcd's bound on one object)."""
    noise = base64.b64encode(random.Random(4).randbytes(200 * 1024)).decode()
    noisy = _roles()
    noisy[0]["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["env"] = [
        {"name": "BLOB", "value": noise}
    ]
    assert not compact.fits(compact.pack_roles(noisy))
    wordy = _roles()
    wordy[0]["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["env"] = [
        {"name": f"SETTING_{index}", "value": f"value-{index % 97}"} for index in range(30_000)
    ]
    assert len(orjson.dumps(wordy)) > 1_200_000
    assert compact.fits(compact.pack_roles(wordy))


# --- the change-cause -----------------------------------------------------------------------------


def _go_bytes(text: str) -> int:
    return len(gotext.go_quote(text).encode()) - 2


def test_a_change_cause_within_the_bound_is_kept_as_it_is() -> None:
    text = "<" * (limits.CHANGE_CAUSE_MAX_BYTES // 6)  # each is \u003c in Go's JSON
    assert compact.cut_change_cause(text) == text


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("kubectl apply -f llm.yaml " * 6000, id="ascii-130k"),
        pytest.param("<&>" * 2000, id="escaped-as-six-bytes-each"),
        pytest.param("ünïcode ✓ " * 1000, id="multi-byte"),
        pytest.param("\U0001f680" * 2000, id="four-byte"),
    ],
)
def test_a_long_change_cause_is_cut_to_the_bound_with_a_marker(text: str) -> None:
    cut = compact.cut_change_cause(text)
    marker = compact.CUT_MARKER.format(total=len(text.encode()))
    assert cut.endswith(marker)
    kept = cut.removesuffix(marker)
    assert text.startswith(kept)
    assert _go_bytes(cut) <= limits.CHANGE_CAUSE_MAX_BYTES
    # As much as fits: one more character would not.
    assert _go_bytes(text[: len(kept) + 1] + marker) > limits.CHANGE_CAUSE_MAX_BYTES


# --- the largest record ---------------------------------------------------------------------------


def test_the_largest_record_fits_the_api_servers_bound_on_annotations() -> None:
    """Every part at its bound: the longest name and labels, a change-cause that escapes to six
    bytes a character, the most packed roles, the highest numbers. Metacontroller adds the
    whole record as its last-applied annotation, which holds the change-cause once more."""
    set_name = "s" * 63  # a label value holds at most 63 characters
    record = builders.make_record(
        set_name=set_name,
        revision="f" * 8,
        number=api.MAX_HISTORY_NUMBER,
        roles=[],
        change_cause="<" * 200_000,
    )
    record["metadata"]["name"] = "n" * 253
    record["packedRoles"] = "A" * limits.PACKED_ROLES_MAX_LENGTH
    record["completedAs"] = api.MAX_HISTORY_NUMBER
    used = compact.annotation_bytes(record)
    assert used <= limits.ANNOTATIONS_MAX_BYTES
    assert limits.ANNOTATIONS_MAX_BYTES - used < 8_192  # and the bound leaves little unused


def test_annotation_bytes_count_the_own_annotations_and_the_copy_as_go_writes_it() -> None:
    desired = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "x", "annotations": {"a": "<é>"}},
    }
    copy = (
        '{"apiVersion":"v1","kind":"ConfigMap",'
        '"metadata":{"annotations":{"a":"\\u003cé\\u003e"},"name":"x"}}'
    )
    expected = (
        len("a") + len("<é>".encode()) + len(api.LAST_APPLIED_ANNOTATION) + len(copy.encode())
    )
    assert compact.annotation_bytes(desired) == expected
