"""Rows the controller writes itself (planner- and strategy-pruned candidates) and the TrialSpec of a candidate."""

from __future__ import annotations

import datetime as _dt
from typing import Any

from autotune.core.trial import TrialSpec
from autotune.layouts.candidate import Candidate
from autotune.results.schema import normalize_row, row_from_spec
from autotune.results.store import trial_id_for


def candidate_spec(cfg: Any, cand: Candidate, *, sweep_id: str, backend: str, rung: int = 0, **extra: Any) -> TrialSpec:
    """The TrialSpec of `cand` at fidelity `rung` (its trial id carries the rung), with the candidate's predictions."""
    from autotune.results.trialfile import make_spec

    return make_spec(
        cfg,
        cand.plan,
        sweep_id=sweep_id,
        trial_id=trial_id_for(cand.candidate_id, rung),
        backend=backend,
        **cand.predictions(),
        **extra,
    )


def pruned_row(
    cfg: Any, cand: Candidate, reason: str, *, sweep_id: str, backend: str, rule: str | None = None
) -> dict[str, Any]:
    """A `pruned` row: identity, layout and predictions of a candidate that is never run, and why: `reason` (text) and
    `rule` (the stable id, autotune.layouts.rules / autotune.search.oom_pruning; default: the candidate's
    `reject_rule`). Every planner row is a valid ParallelPlan (the planner enumerates canonical layouts only), so a
    rejected layout's row is built from its spec like any other."""
    row = row_from_spec(candidate_spec(cfg, cand, sweep_id=sweep_id, backend=backend))
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    row.update(
        candidate_id=cand.candidate_id,
        trial_id=trial_id_for(cand.candidate_id),
        status="pruned",
        reject_reason=reason,
        reject_rule=cand.reject_rule if rule is None else rule,
        started_at=now,
        ended_at=now,
    )
    return normalize_row(row)
