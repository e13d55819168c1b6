"""Column arrays of many `ParallelPlan`s: the one representation the vectorised memory, perf and constraint models
take, so the planner scores thousands of layouts without a Python loop and the scalar wrappers reuse the same code.

Integer fields are int64 arrays, booleans bool arrays, string fields int64 codes into the field's `Dim.choices`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from autotune.core.types import (
    INT_FIELDS,
    PLAN_DEFAULTS,
    PLAN_DIMS,
    PLAN_FIELDS,
    PLAN_KINDS,
    ParallelPlan,
)

CODES: dict[str, dict[str, int]] = {
    n: {c: i for i, c in enumerate(PLAN_DIMS[n].choices)} for n in PLAN_FIELDS if PLAN_KINDS[n] == "str"
}
RECOMPUTE_CODE: dict[str, int] = CODES["recompute"]
SCHEDULE_CODE: dict[str, int] = CODES["pp_schedule"]
FP8_CODE: dict[str, int] = CODES["fp8"]
OFFLOAD_CODE: dict[str, int] = CODES["offload"]
__all__ = [
    "CODES",
    "INT_FIELDS",
    "RECOMPUTE_CODE",
    "SCHEDULE_CODE",
    "FP8_CODE",
    "OFFLOAD_CODE",
    "arrays_from_frame",
    "arrays_from_plans",
    "decoded",
    "filled",
    "plan_array",
    "plan_cells",
    "plan_columns",
    "recompute_names",
    "schedule_names",
]


def plan_array(name: str, values: Iterable[Any]) -> np.ndarray:
    """Python values of plan field `name` in plan-array form (a string field as its codes)."""
    kind = PLAN_KINDS[name]
    if kind == "str":
        return np.array([CODES[name][v] for v in values], dtype=np.int64)
    return np.array(list(values), dtype=bool if kind == "bool" else np.int64)


def arrays_from_plans(plans: Iterable[ParallelPlan]) -> dict[str, np.ndarray]:
    plans = list(plans)
    return {f: plan_array(f, [getattr(p, f) for p in plans]) for f in PLAN_FIELDS}


def filled(name: str, n: int) -> np.ndarray:
    """`n` copies of plan field `name`'s default, in plan-array form."""
    kind, default = PLAN_KINDS[name], PLAN_DEFAULTS[name]
    if kind == "str":
        return np.full(n, CODES[name][default], dtype=np.int64)
    return np.full(n, default, dtype=bool if kind == "bool" else np.int64)


def decoded(name: str, codes: np.ndarray) -> np.ndarray:
    """Object array of a string field's names for its codes."""
    return np.asarray(PLAN_DIMS[name].choices, dtype=object)[codes]


def plan_cells(names: tuple[str, ...], values) -> dict[str, Any]:
    """One candidate's plan-array values of fields `names` as the Python values the fields declare (a string
    field's code as its name)."""
    out: dict[str, Any] = {}
    for name, v in zip(names, values):
        kind = PLAN_KINDS[name]
        out[name] = PLAN_DIMS[name].choices[int(v)] if kind == "str" else bool(v) if kind == "bool" else int(v)
    return out


def plan_columns(arr: dict[str, np.ndarray]) -> dict[str, Any]:
    """The plan fields of `arr` as frame columns: numbers and booleans as they are, string fields decoded."""
    return {f: decoded(f, arr[f]) if PLAN_KINDS[f] == "str" else arr[f] for f in PLAN_FIELDS}


def pp_schedule_codes(pp, vpp, grad_accum_steps) -> np.ndarray:
    """The pipeline schedule a layout runs unless plan.pp_schedule says otherwise (the one place it is derived):
    interleaved 1F1B exactly when vpp > 1; GPipe when there are fewer micro-batches than pipeline stages (torch's
    Schedule1F1B raises for n_microbatches < num_stages, torch/distributed/pipelining/schedules.py; GPipe runs any m,
    at a bubble of (pp-1)/m, Narayanan et al. 2021 Eq. 1); 1F1B otherwise (same bubble, fewer activations in flight)."""
    pp, vpp, m = np.asarray(pp), np.asarray(vpp), np.asarray(grad_accum_steps)
    return np.where(
        vpp > 1,
        SCHEDULE_CODE["interleaved_1f1b"],
        np.where((pp > 1) & (m < pp), SCHEDULE_CODE["gpipe"], SCHEDULE_CODE["1f1b"]),
    )


def default_pp_schedule(pp: int, vpp: int, grad_accum_steps: int) -> str:
    return PLAN_DIMS["pp_schedule"].choices[int(pp_schedule_codes(pp, vpp, grad_accum_steps))]


def recompute_names(codes: np.ndarray) -> np.ndarray:
    return decoded("recompute", codes)


def schedule_names(codes: np.ndarray) -> np.ndarray:
    return decoded("pp_schedule", codes)


def arrays_from_frame(df: Any) -> dict[str, np.ndarray]:
    """Plan arrays straight from the layout columns of a candidate or result frame (a frame from before a field
    existed has no column for it: it holds the field's default)."""
    arr: dict[str, np.ndarray] = {}
    for f in PLAN_FIELDS:
        kind = PLAN_KINDS[f]
        if f not in df.columns:
            arr[f] = filled(f, len(df))
        elif kind == "str":
            arr[f] = df[f].map(CODES[f]).to_numpy(dtype=np.int64)
        else:
            arr[f] = df[f].to_numpy(dtype=bool if kind == "bool" else np.int64)
    return arr
