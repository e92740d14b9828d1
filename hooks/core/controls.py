"""What a set's annotations ask of its rollouts and its history, read cautiously (`control_of`):
each one's syntax, default, and the cautious value that replaces a malformed one, reported as a
problem (docs/rollout.md, "A malformed control annotation"). Pure: reads only the annotations.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from hooks import api
from hooks.core import problems

_WHOLE: Final = re.compile(r"[0-9]{1,9}")
_PERCENT: Final = re.compile(r"([0-9]{1,3})%")


@dataclass(frozen=True, slots=True)
class Control:
    """What the annotations ask for, and what was wrong with them."""

    paused: bool = False
    deadline_seconds: int = api.DEFAULT_PROGRESS_DEADLINE_SECONDS
    """0: no deadline."""
    history_limit: int = api.DEFAULT_REVISION_HISTORY_LIMIT
    partition: int | None = None
    """Slices below this index roll to a new revision; None: every slice."""
    hold_at_percent: int | None = None
    """Rolling slices hold once every role of the new revision reaches this share of its
    target; None: no hold."""
    problems: tuple[problems.Problem, ...] = ()
    malformed: frozenset[str] = frozenset()
    """The annotations whose value was malformed and read cautiously instead."""


@dataclass(frozen=True, slots=True)
class _Annotation:
    """How one annotation is read: the field it sets, its parser, its fallback, and advice."""

    key: str
    field: str
    parse: Callable[[str], int | None]
    fallback: int
    advice: str


def _whole(text: str) -> int | None:
    return int(text) if _WHOLE.fullmatch(text) else None


def percent(text: str) -> int | None:
    """A hold's share, `"0%"` to `"100%"`; None when it is not one."""
    match = _PERCENT.fullmatch(text)
    if match is None or int(match.group(1)) > 100:
        return None
    return int(match.group(1))


_ANNOTATIONS: Final = (
    _Annotation(
        api.ANNOTATION_PAUSED,
        "paused",
        {"true": 1, "false": 0}.get,
        1,
        'use "true" to pause rollouts and "false" (or no annotation) to run them; until it'
        " is fixed rollouts are paused",
    ),
    _Annotation(
        api.ANNOTATION_PROGRESS_DEADLINE,
        "deadline_seconds",
        _whole,
        api.DEFAULT_PROGRESS_DEADLINE_SECONDS,
        'use whole seconds ("0" turns the deadline off); the default'
        f" {api.DEFAULT_PROGRESS_DEADLINE_SECONDS} s applies",
    ),
    _Annotation(
        api.ANNOTATION_HISTORY_LIMIT,
        "history_limit",
        _whole,
        api.DEFAULT_REVISION_HISTORY_LIMIT,
        "use a whole number of old revisions to keep; the default"
        f" {api.DEFAULT_REVISION_HISTORY_LIMIT} applies",
    ),
    _Annotation(
        api.ANNOTATION_ROLLOUT_PARTITION,
        "partition",
        _whole,
        0,
        'use a whole number K ("1": only slice 0 rolls); until it is fixed no slice rolls',
    ),
    _Annotation(
        api.ANNOTATION_ROLLOUT_HOLD_AT,
        "hold_at_percent",
        percent,
        0,
        'use a percentage from "0%" to "100%" ("100%" is no hold); until it is fixed'
        " rollouts hold where they are",
    ),
)


def control_of(annotations: Mapping[str, str]) -> Control:
    """The rollout and history controls of a set from its annotations."""
    values: dict[str, int] = {}
    found: list[problems.Problem] = []
    malformed: set[str] = set()
    for annotation in _ANNOTATIONS:
        text = annotations.get(annotation.key)
        if text is None:
            continue
        value = annotation.parse(text)
        if value is None:
            message = f"annotation {annotation.key} is {text[:64]!r}: {annotation.advice}"
            found.append(problems.Problem(api.Reason.INVALID_ANNOTATION, message))
            malformed.add(annotation.key)
            value = annotation.fallback
        values[annotation.field] = value
    hold = values.pop("hold_at_percent", None)
    return Control(
        paused=bool(values.pop("paused", 0)),
        hold_at_percent=None if hold == 100 else hold,
        problems=tuple(found),
        malformed=frozenset(malformed),
        **values,
    )
