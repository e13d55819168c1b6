"""Rows the controller writes itself (planner- and strategy-pruned candidates) and the TrialSpec of a candidate."""

from __future__ import annotations

import datetime as _dt
import math
from typing import Any

from autotune.core.types import PLAN_FIELDS, ParallelPlan, TrialSpec, plan_value
from autotune.results.schema import normalize_row, row_from_spec
from autotune.results.store import trial_id_for


def _num(v: Any) -> float | None:
    """A finite float from a frame cell, else None (pandas NA / NaN are missing, never -1)."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def predictions(cand: Any) -> dict[str, float | None]:
    return {
        "pred_mem_bytes": _num(cand.get("mem_reserved_bytes")),
        "pred_tokens_per_s_per_gpu": _num(cand.get("pred_tokens_per_s_per_gpu")),
        "pred_mfu": _num(cand.get("pred_mfu")),
    }


def candidate_spec(cfg: Any, cand: Any, *, sweep_id: str, backend: str, rung: int = 0, **extra: Any) -> TrialSpec:
    from autotune.layouts.planner import plan_from_row
    from autotune.results.trialfile import make_spec

    plan = plan_from_row(cand)
    return make_spec(
        cfg,
        plan,
        sweep_id=sweep_id,
        trial_id=trial_id_for(str(cand["candidate_id"]), rung),
        backend=backend,
        **predictions(cand),
        **extra,
    )


def pruned_row(
    cfg: Any, cand: Any, reason: str, *, sweep_id: str, backend: str, rule: str | None = None
) -> dict[str, Any]:
    """A `pruned` row: identity, layout and predictions of a candidate that is never run, and why: `reason` (text) and
    `rule` (the stable id, autotune.layouts.rules / autotune.search.oom_pruning; default: the candidate's `reject_rule`)."""
    cid = str(cand["candidate_id"])
    try:
        row = row_from_spec(candidate_spec(cfg, cand, sweep_id=sweep_id, backend=backend))
    except ValueError:  # a layout ParallelPlan itself refuses: fill the columns from the frame
        spec = candidate_spec(cfg, {**dict(cand), **ParallelPlan().to_dict()}, sweep_id=sweep_id, backend=backend)
        row = row_from_spec(spec)
        row.update({k: plan_value(k, cand[k]) for k in PLAN_FIELDS}, num_gpus=int(cand["num_gpus"]))
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    if rule is None:
        rule = cand.get("reject_rule")
    row.update(
        candidate_id=cid,
        trial_id=trial_id_for(cid),
        status="pruned",
        reject_reason=reason,
        reject_rule=rule if isinstance(rule, str) else None,
        started_at=now,
        ended_at=now,
    )
    return normalize_row(row)
