"""Search strategies (ask/tell). `get_strategy(name, candidates, max_trials, seed)` builds one by name from
STRATEGIES, the one list of strategies (the CLI's choices and tests/contract/test_strategy_contract.py derive from it):
a new strategy is a module with a `Strategy` subclass plus its line here."""

from __future__ import annotations

import importlib
from typing import Any

from autotune.core.errors import UsageError
from autotune.search.strategies.base import Ask, Pruned, Strategy

__all__ = ["Ask", "Pruned", "Strategy", "STRATEGIES", "get_strategy", "strategy_class"]

# name -> "module:Class" (imported on use, so optional dependencies such as optuna load only when chosen)
STRATEGIES: dict[str, str] = {
    "grid": "autotune.search.strategies.grid:GridStrategy",
    "topk": "autotune.search.strategies.topk:TopKStrategy",
    "optuna": "autotune.search.strategies.optuna_strategy:OptunaStrategy",
    "halving": "autotune.search.strategies.halving:HalvingStrategy",
    "random": "autotune.search.strategies.random_search:RandomStrategy",
}


def strategy_class(name: str) -> type[Strategy]:
    if name not in STRATEGIES:
        raise UsageError(f"--strategy={name!r} must be one of {', '.join(STRATEGIES)}")
    module, _, cls = STRATEGIES[name].partition(":")
    return getattr(importlib.import_module(module), cls)


def get_strategy(name: str, candidates: Any, max_trials: int | None, seed: int = 0, **options: Any) -> Strategy:
    """`options`: strategy-specific settings (`Strategy.options_from_config`); grid/topk/random take none."""
    factory = strategy_class(name)
    return factory(candidates, max_trials, seed, **options) if options else factory(candidates, max_trials, seed)
