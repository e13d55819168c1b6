"""Random: runnable candidates in a seeded random order until the budget is spent — the baseline every adaptive
strategy must beat (Bergstra & Bengio 2012, "Random Search for Hyper-Parameter Optimization"). It ignores the
performance model's ranking but still learns from OOMs: an OOM prunes the candidates it dominates (autotune.search.oom_pruning),
like topk, so the budget is not spent on layouts that cannot fit."""

from __future__ import annotations

from typing import Any

from autotune.search.strategies.topk import TopKStrategy


class RandomStrategy(TopKStrategy):
    name = "random"

    def __init__(self, candidates: Any, max_trials: int | None, seed: int = 0, **_options: Any) -> None:
        super().__init__(candidates.sample(frac=1.0, random_state=seed), max_trials, seed)

    def update_ranking(self, candidates: Any) -> None:
        """Random ignores the models, calibrated or not."""
