"""`Rule`: one validity rule of a parallel layout (the type only; the generic table is autotune/layouts/rules.py, each
framework profile adds its own in autotune/predict/frameworks/).

A rule is written once, as two functions whose parameter names say what they read: a plan field's name is that
field's column (an array over candidates; string fields as their integer codes in `violated`, as their names in
`message`), and `model`, `train`, `cluster`, `space` are the job's specs. `Rule.columns` is derived from the
signature, so no list restates the parameters and the planner formats one message per distinct combination.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from autotune.core.types import PLAN_FIELDS

CONTEXT: tuple[str, ...] = ("model", "train", "cluster", "space")


def _params(fn: Callable[..., Any]) -> tuple[str, ...]:
    return tuple(inspect.signature(fn).parameters)


@dataclass(frozen=True)
class Rule:
    """id: the stable `reject_rule` value; violated(**columns, **context) -> a boolean mask, True where the layout breaks
    the rule; message(**columns, **context) -> the one-line reason naming the values; prefix: prepended to the message
    (a framework profile's "<name>: ")."""

    id: str
    violated: Callable[..., Any]
    message: Callable[..., str]
    prefix: str = ""

    def __post_init__(self) -> None:
        for fn in (self.violated, self.message):
            unknown = [p for p in _params(fn) if p not in PLAN_FIELDS and p not in CONTEXT]
            if unknown:  # a programming error in a rule table, not a user mistake
                raise TypeError(
                    f"rule {self.id}: parameter {unknown[0]!r} is neither a plan field nor one of {CONTEXT}"
                )

    @property
    def columns(self) -> tuple[str, ...]:
        """The plan fields the check reads."""
        return tuple(p for p in _params(self.violated) if p in PLAN_FIELDS)

    @property
    def message_columns(self) -> tuple[str, ...]:
        """The plan fields the message names (one message is formatted per distinct combination)."""
        return tuple(p for p in _params(self.message) if p in PLAN_FIELDS)

    def context(self, fn: Callable[..., Any]) -> tuple[str, ...]:
        return tuple(p for p in _params(fn) if p in CONTEXT)
