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


def pp_schedule_codes(pp, vpp, grad_accum_steps) -> np.ndarray:
    """The pipeline schedule a layout runs unless plan.pp_schedule says otherwise (the one place it is derived):
    interleaved 1F1B exactly when vpp > 1; GPipe when there are fewer micro-batches than pipeline stages (torch's
    Schedule1F1B raises for n_microbatches < num_stages, torch/distributed/pipelining/schedules.py; GPipe runs any m,
    at a bubble of (pp-1)/m, Narayanan et al. 2021 Eq. 1); 1F1B otherwise (same bubble, fewer activations in flight)."""
    pp, vpp, m = np.asarray(pp), np.asarray(vpp), np.asarray(grad_accum_steps)
    return np.where(vpp > 1, SCHEDULE_CODE["interleaved_1f1b"],
                    np.where((pp > 1) & (m < pp), SCHEDULE_CODE["gpipe"], SCHEDULE_CODE["1f1b"]))


def default_pp_schedule(pp: int, vpp: int, grad_accum_steps: int) -> str:
    return PP_SCHEDULES[int(pp_schedule_codes(pp, vpp, grad_accum_steps))]


def recompute_names(codes: np.ndarray) -> np.ndarray:
    return np.asarray(RECOMPUTE_MODES, dtype=object)[codes]


def schedule_names(codes: np.ndarray) -> np.ndarray:
    return np.asarray(PP_SCHEDULES, dtype=object)[codes]
