"""Search strategies (ask/tell). `get_strategy(name, candidates, max_trials, seed)`; grid and topk here, more are
registered in STRATEGIES by the modules that add them."""
from __future__ import annotations

import importlib
from typing import Any

from autotune.errors import UsageError
from autotune.strategies.base import Ask, Pruned, Strategy

__all__ = ["Ask", "Pruned", "Strategy", "STRATEGIES", "get_strategy"]

# name -> "module:Class" (imported on use, so optional dependencies such as optuna load only when chosen)
STRATEGIES: dict[str, str] = {
    "grid": "autotune.strategies.grid:GridStrategy",
    "topk": "autotune.strategies.topk:TopKStrategy",
    "optuna": "autotune.strategies.optuna_strategy:OptunaStrategy",
    "halving": "autotune.strategies.halving:HalvingStrategy",
    "random": "autotune.strategies.random_search:RandomStrategy",
}


def get_strategy(name: str, candidates: Any, max_trials: int | None, seed: int = 0, **options: Any) -> Strategy:
    """`options`: strategy-specific settings (autotune.strategies.options.strategy_options); grid/topk take none."""
    if name not in STRATEGIES:
        raise UsageError(f"--strategy={name!r} must be one of {', '.join(STRATEGIES)}")
    module, _, cls = STRATEGIES[name].partition(":")
    factory = getattr(importlib.import_module(module), cls)
    return factory(candidates, max_trials, seed, **options) if options else factory(candidates, max_trials, seed)
