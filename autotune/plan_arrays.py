"""Column arrays of many `ParallelPlan`s: the one representation the vectorised memory, perf and constraint models
take, so the planner scores thousands of layouts without a Python loop and the scalar wrappers reuse the same code."""
from __future__ import annotations

from typing import Iterable

import numpy as np

from autotune.types import RECOMPUTE_MODES, PP_SCHEDULES, ParallelPlan

RECOMPUTE_CODE: dict[str, int] = {name: i for i, name in enumerate(RECOMPUTE_MODES)}
SCHEDULE_CODE: dict[str, int] = {name: i for i, name in enumerate(PP_SCHEDULES)}
INT_FIELDS = ("dp", "tp", "pp", "cp", "vpp", "zero_stage", "micro_batch_size", "grad_accum_steps")


def arrays_from_plans(plans: Iterable[ParallelPlan]) -> dict[str, np.ndarray]:
    plans = list(plans)
    arr = {f: np.array([getattr(p, f) for p in plans], dtype=np.int64) for f in INT_FIELDS}
    arr["recompute"] = np.array([RECOMPUTE_CODE[p.recompute] for p in plans], dtype=np.int64)
    arr["sequence_parallel"] = np.array([p.sequence_parallel for p in plans], dtype=bool)
    arr["pp_schedule"] = np.array([SCHEDULE_CODE[p.pp_schedule] for p in plans], dtype=np.int64)
    return arr


def recompute_names(codes: np.ndarray) -> np.ndarray:
    return np.asarray(RECOMPUTE_MODES, dtype=object)[codes]


def schedule_names(codes: np.ndarray) -> np.ndarray:
    return np.asarray(PP_SCHEDULES, dtype=object)[codes]
