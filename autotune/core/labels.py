"""The one short label of a layout, used by `plan`, `estimate`, the sweep's progress lines, `report`, the plots and
the exports' header: `dp8·tp2·pp4·cp1 z1 mbs2 gas8 sel sp` (vpp shown when > 1, the pipeline schedule when it is
gpipe, CPU offload as off-opt / off-params). Each field's piece is its `Dim.tag` / `Dim.codes` (autotune/core/types.py),
in field order."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from autotune.core.types import PLAN_DEFAULTS, PLAN_DIMS, PLAN_FIELDS, PLAN_KINDS, ParallelPlan


def _getter(row: Mapping[str, Any] | ParallelPlan):
    if isinstance(row, ParallelPlan):
        return lambda k, default=None: getattr(row, k, default)
    return row.get  # a row from before a field existed lacks its key: the label reads the default


def _piece(name: str, v: Any) -> str:
    dim, kind = PLAN_DIMS[name], PLAN_KINDS[name]
    if kind == "str":
        if dim.codes:
            return dim.codes[dim.choices.index(str(v))]
        return dim.tag.format(v) if str(v) != PLAN_DEFAULTS[name] else ""
    if kind == "bool":
        return dim.tag if bool(v) else ""
    return dim.tag.format(int(v)) if dim.tag_always or int(v) != PLAN_DEFAULTS[name] else ""


def layout_label(row: Mapping[str, Any] | ParallelPlan) -> str:
    """`row`: a plan-shaped mapping (a candidate or result row, a pandas Series) or a ParallelPlan. A field the row
    lacks (None or NaN: a row from before the field existed) is not shown."""
    g = _getter(row)
    text = ""
    for name in PLAN_FIELDS:
        v = g(name, None)
        if (
            (PLAN_DIMS[name].tag or PLAN_DIMS[name].codes)
            and v is not None
            and not (isinstance(v, float) and math.isnan(v))
        ):
            text += _piece(name, v)
    return text
