"""The memory a body's parse takes, measured for every JSON shape against the bound that holds it.

Regression (issue 17, item 2): the parse budget was an estimate from byte counts, and some
shapes beat it (arrays nested 500 deep by half, a long astral-plane string by 2.5x): a body
estimated under the budget took the worker past the Deployment's memory limit.

Two bounds, both measured here in forked processes against the parser the server uses:

- a body up to `isolate_above_bytes` is parsed in the worker; its parse's peak resident memory
  is at most `settings.INLINE_PEAK_PER_BYTE` times its size (plus a MiB of allocator rounding);
- a larger body is parsed and answered in a child process whose memory is limited by the
  kernel (RLIMIT_DATA): whatever its shape, its call is answered or refused `BodyTooComplex`,
  and the child's peak resident memory (the kernel's count) never exceeds the budget.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from hooks.server import bodies, isolation
from hooks.server.settings import DEFAULT_ISOLATE_ABOVE_BYTES, INLINE_PEAK_PER_BYTE, MIB
from tests.shared import REPO_ROOT

BUDGET = 48 * MIB
ALLOCATOR_SLACK = MIB

# --- shapes --------------------------------------------------------------------------------------


def repeated(unit: bytes, size: int) -> bytes:
    """An array of `unit` repeated to about `size` bytes."""
    return b"[" + b",".join([unit] * max(1, size // (len(unit) + 1))) + b"]"


def nested_arrays(depth: int) -> Callable[[int], bytes]:
    return lambda size: repeated(b"[" * depth + b"]" * depth, size)


def nested_objects(depth: int) -> Callable[[int], bytes]:
    return lambda size: repeated(b'{"k":' * depth + b"0" + b"}" * depth, size)


def long_string(text: str) -> Callable[[int], bytes]:
    piece = json.dumps(text, ensure_ascii=False).encode()[1:-1]
    return lambda size: b'"' + piece * max(1, size // len(piece)) + b'"'


def escaped_string(escape: bytes) -> Callable[[int], bytes]:
    return lambda size: b'"' + escape * max(1, size // len(escape)) + b'"'


def distinct_keys(size: int) -> bytes:
    return b"{" + b",".join(b'"%x":0' % n for n in range(max(1, size // 10))) + b"}"


def from_value(value: object) -> Callable[[int], bytes]:
    return lambda size: repeated(json.dumps(value, ensure_ascii=False).encode(), size)


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=4), children, max_size=4)
    ),
    max_leaves=12,
)

SHAPES = st.one_of(
    st.integers(min_value=1, max_value=1000).map(nested_arrays),
    st.integers(min_value=1, max_value=1000).map(nested_objects),
    st.sampled_from(
        [
            lambda size: repeated(b"[]", size),
            lambda size: repeated(b"{}", size),
            lambda size: repeated(b"[[]]", size),
            lambda size: repeated(b'{"a":0}', size),
            lambda size: repeated(b'{"":""}', size),
            lambda size: repeated(b'""', size),
            lambda size: repeated(b'"a"', size),
            lambda size: repeated(b"0", size),
            lambda size: repeated(b"-7", size),
            lambda size: repeated(b"0.5", size),
            lambda size: repeated(b"1e300", size),
            lambda size: repeated(b"9" * 19, size),
            lambda size: repeated(b"1" * 30, size),
            lambda size: repeated(b"true", size),
            lambda size: repeated(b"null", size),
            distinct_keys,
        ]
    ),
    st.sampled_from(["a", "é", "中", "\U0001f600", "a\U0001f600"]).map(long_string),
    st.sampled_from([b"\\u0041", b"\\ud83d\\ude00", b"\\n", b'\\"', b"\\u00e9"]).map(
        escaped_string
    ),
    JSON_VALUES.map(from_value),
)


# --- measuring -----------------------------------------------------------------------------------


def _status(name: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(f"{name}:"):
                return int(line.split()[1]) * 1024
    raise LookupError(name)


def inline_parse_peak(body: bytes) -> int:
    """The resident memory `bodies.decode(body)` adds at its peak, in a forked process."""
    readable, writable = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            gc.disable()
            before = _status("VmRSS")
            with contextlib.suppress(bodies.InvalidJson):
                bodies.decode(body)
            os.write(writable, str(_status("VmHWM") - before).encode())
        finally:
            os._exit(0)
    os.close(writable)
    with os.fdopen(readable, "rb") as pipe:
        peak = int(pipe.read())
    os.waitpid(pid, 0)
    return peak


# --- the properties ------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=SHAPES, size=st.integers(min_value=16 * 1024, max_value=MIB - 64 * 1024))
def test_a_body_parsed_in_the_worker_takes_at_most_its_bound(
    shape: Callable[[int], bytes], size: int
) -> None:
    body = shape(size)
    assume(len(body) <= DEFAULT_ISOLATE_ABOVE_BYTES)

    peak = inline_parse_peak(body)

    assert peak <= INLINE_PEAK_PER_BYTE * len(body) + ALLOCATOR_SLACK


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=SHAPES, size=st.integers(min_value=MIB, max_value=4 * MIB))
def test_a_body_answered_in_a_child_never_takes_more_than_the_budget(
    shape: Callable[[int], bytes], size: int
) -> None:
    body = shape(size)

    outcome = isolation.run_in_child(
        bytearray(body), lambda value: None, budget=BUDGET, seconds=120, max_message_bytes=MIB
    )

    assert outcome.error is None or isinstance(
        outcome.error, bodies.BodyTooComplex | bodies.InvalidJson
    ), outcome.error
    assert outcome.peak_bytes <= BUDGET


def issue_bodies() -> dict[str, object]:
    """The two shapes the issue names, each answered in a child with `BUDGET`: 500-deep arrays
    and one long astral string (what the test below asserts on, from a fresh interpreter)."""
    nested = bytearray(nested_arrays(500)(4 * MIB))
    astral = bytearray(long_string("\U0001f600")(4 * MIB))
    characters = (len(astral) - 2) // 4  # before the call, which empties the buffer
    refused = isolation.run_in_child(
        nested, lambda value: None, budget=BUDGET, seconds=120, max_message_bytes=MIB
    )
    answered = isolation.run_in_child(
        astral, lambda value: len(str(value)), budget=BUDGET, seconds=120, max_message_bytes=MIB
    )
    return {
        "refused": type(refused.error).__name__,
        "refused_peak": refused.peak_bytes,
        "answered": None if answered.error is None else repr(answered.error),
        "answered_value": answered.value,
        "characters": characters,
        "answered_peak": answered.peak_bytes,
    }


def test_the_budget_binds_the_issues_body_and_admits_a_string_as_large() -> None:
    """500-deep arrays are refused, one long astral string is answered with a fraction of the
    budget. Run in a fresh interpreter, as small as a hook worker: the child counts the mapped
    memory it inherits but does not hold as memory it may touch, and a test process that has run
    thousands of tests holds much of it (thread stacks, freed arenas), which would leave the
    child less than the budget."""
    script = "import json; from tests.property import test_parse_memory as m; "
    script += "print(json.dumps(m.issue_bodies()))"
    run = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    outcome = json.loads(run.stdout)

    assert outcome["refused"] == "BodyTooComplex"
    assert outcome["refused_peak"] <= BUDGET
    assert outcome["answered"] is None
    assert outcome["answered_value"] == outcome["characters"]
    assert outcome["answered_peak"] <= BUDGET


def test_the_data_limit_is_set_in_the_child_only() -> None:
    before = resource.getrlimit(resource.RLIMIT_DATA)

    isolation.run_in_child(
        bytearray(b"[1, 2, 3]"),
        lambda value: None,
        budget=BUDGET,
        seconds=60,
        max_message_bytes=MIB,
    )

    assert resource.getrlimit(resource.RLIMIT_DATA) == before
