"""What a set's annotations ask of its rollouts and its history (docs/rollout.md).

The controls beyond upstream are annotations on the DisaggregatedSet, so its spec stays
upstream's and a manifest works with either controller:

- `disaggregatedset.x-k8s.io/paused`: `"true"` freezes rollouts, `"false"` (or none) runs them;
- `disaggregatedset.x-k8s.io/progress-deadline-seconds`: whole seconds, default 1800, `"0"` off;
- `disaggregatedset.x-k8s.io/revision-history-limit`: old revisions kept, default 10;
- `disaggregatedset.x-k8s.io/rollout-partition`: `"K"`, only slices below index K roll;
- `disaggregatedset.x-k8s.io/rollout-hold-at`: `"P%"`, every rolling slice holds once every role
  of the new revision reaches P% of its target (`"100%"`: no hold).

A malformed value is reported (Degraded, reason InvalidAnnotation, naming the annotation) and
never stops the reconcile. What applies instead is chosen to be safe: not paused, the default
deadline and history limit, and for the two canary controls the most cautious reading (a
partition of 0, a hold at 0%: nothing more rolls until the value is fixed), because an operator
who wrote one asked to limit what the new revision reaches.

Pure: reads only the annotations it is given.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from hooks import api
from hooks.core import status

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
    problems: tuple[status.Problem, ...] = ()

    @property
    def is_canary(self) -> bool:
        """Whether a partition or a hold limits how far rollouts go."""
        return self.partition is not None or self.hold_at_percent is not None


def control_of(annotations: Mapping[str, str]) -> Control:
    """The rollout and history controls of a set from its annotations."""
    problems: list[status.Problem] = []

    def read(
        key: str, parse: Callable[[str], int | None], *, fallback: int, advice: str
    ) -> int | None:
        """The annotation's value; None when it is absent; `fallback` (and a problem) when it
        is malformed."""
        text = annotations.get(key)
        if text is None:
            return None
        value = parse(text)
        if value is None:
            message = f"annotation {key} is {text[:64]!r}: {advice}"
            problems.append(status.Problem(api.Reason.INVALID_ANNOTATION, message))
            return fallback
        return value

    paused = read(
        api.ANNOTATION_PAUSED,
        _boolean,
        fallback=0,
        advice='use "true" to pause rollouts and "false" (or no annotation) to run them;'
        " not paused",
    )
    deadline = read(
        api.ANNOTATION_PROGRESS_DEADLINE,
        _whole,
        fallback=api.DEFAULT_PROGRESS_DEADLINE_SECONDS,
        advice='use whole seconds ("0" turns the deadline off); the default'
        f" {api.DEFAULT_PROGRESS_DEADLINE_SECONDS} s applies",
    )
    history = read(
        api.ANNOTATION_HISTORY_LIMIT,
        _whole,
        fallback=api.DEFAULT_REVISION_HISTORY_LIMIT,
        advice="use a whole number of old revisions to keep; the default"
        f" {api.DEFAULT_REVISION_HISTORY_LIMIT} applies",
    )
    partition = read(
        api.ANNOTATION_ROLLOUT_PARTITION,
        _whole,
        fallback=0,
        advice='use a whole number K ("1": only slice 0 rolls); until it is fixed no slice rolls',
    )
    hold = read(
        api.ANNOTATION_ROLLOUT_HOLD_AT,
        _percent,
        fallback=0,
        advice='use a percentage from "0%" to "100%" ("100%" is no hold); until it is fixed'
        " rollouts hold where they are",
    )
    return Control(
        paused=bool(paused),
        deadline_seconds=api.DEFAULT_PROGRESS_DEADLINE_SECONDS if deadline is None else deadline,
        history_limit=api.DEFAULT_REVISION_HISTORY_LIMIT if history is None else history,
        partition=partition,
        hold_at_percent=None if hold == 100 else hold,
        problems=tuple(problems),
    )


def _boolean(text: str) -> int | None:
    return {"true": 1, "false": 0}.get(text)


def _whole(text: str) -> int | None:
    return int(text) if _WHOLE.fullmatch(text) else None


def _percent(text: str) -> int | None:
    match = _PERCENT.fullmatch(text)
    if match is None or int(match.group(1)) > 100:
        return None
    return int(match.group(1))
