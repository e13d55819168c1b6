"""One candidate layout as a typed value: a row of the planner frame (autotune.layouts.planner.COLUMNS) reduced to what
crosses into dispatch: the plan, its id, its rank and the predictions a trial stores next to its measurement. The
strategies hand it to the controller (`Ask`, `Pruned`), and the controller turns it into a TrialSpec or a `pruned` row
(autotune/run/rows.py). Built from a frame row in one place, `Candidate.from_row`."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from autotune.core.types import PLAN_FIELDS, ParallelPlan, plan_value


def plan_from_row(row: Mapping[str, Any]) -> ParallelPlan:
    """The ParallelPlan of one candidate or result row (a pandas Series or a mapping with every plan field)."""
    return ParallelPlan(**{k: plan_value(k, row[k]) for k in PLAN_FIELDS})


def _num(v: Any) -> float | None:
    """A finite float from a frame cell, else None (pandas NA / NaN are missing, never -1)."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _text(v: Any) -> str | None:
    """A string cell, else None (a rejected row's rule or reason; NaN / None where the planner found none)."""
    return v if isinstance(v, str) else None


@dataclass(frozen=True)
class Candidate:
    """One enumerated layout of `num_gpus` GPUs. `rank` is None for a layout the planner rejected (`reject_rule`,
    `reject_reason` say why); the predictions are the frame's mem_reserved_bytes, pred_tokens_per_s_per_gpu and
    pred_mfu, None where the frame has no finite number."""

    candidate_id: str
    num_gpus: int
    plan: ParallelPlan
    rank: int | None = None
    pred_mem_bytes: float | None = None
    pred_tokens_per_s_per_gpu: float | None = None
    pred_mfu: float | None = None
    pred_mem_allocator_peak_bytes: float | None = None
    reject_rule: str | None = None
    reject_reason: str | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Candidate:
        """The candidate of one planner frame row (a pandas Series or a mapping with the frame's columns)."""
        rank = _num(row.get("rank"))
        return cls(
            candidate_id=str(row["candidate_id"]),
            num_gpus=int(row["num_gpus"]),
            plan=plan_from_row(row),
            rank=None if rank is None else int(rank),
            pred_mem_bytes=_num(row.get("mem_reserved_bytes")),
            pred_tokens_per_s_per_gpu=_num(row.get("pred_tokens_per_s_per_gpu")),
            pred_mfu=_num(row.get("pred_mfu")),
            pred_mem_allocator_peak_bytes=_num(row.get("mem_allocator_peak_bytes")),
            reject_rule=_text(row.get("reject_rule")),
            reject_reason=_text(row.get("reject_reason")),
        )

    def predictions(self) -> dict[str, float | None]:
        """The TrialSpec / result-row prediction fields (`pred_mem_bytes` is the predicted device total,
        `pred_mem_allocator_peak_bytes` the allocator peak: docs/memory_model.md "Two peaks")."""
        return {
            "pred_mem_bytes": self.pred_mem_bytes,
            "pred_mem_allocator_peak_bytes": self.pred_mem_allocator_peak_bytes,
            "pred_tokens_per_s_per_gpu": self.pred_tokens_per_s_per_gpu,
            "pred_mfu": self.pred_mfu,
        }

    def layout_columns(self) -> dict[str, Any]:
        """candidate_id, num_gpus and every plan field: the identity and layout columns of a result row."""
        return {"candidate_id": self.candidate_id, "num_gpus": self.num_gpus, **self.plan.to_dict()}
