"""Strategy-specific settings from the sweep config (`sweep.*`), so the controller passes one dict to get_strategy.
Each strategy reads its own (`Strategy.options_from_config`); nothing here names one."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def strategy_options(cfg: Any, sweep_root: Any, sweep_id: str) -> dict[str, Any]:
    """Options for `get_strategy(cfg.sweep.strategy, ...)`; {} for strategies without any (grid, topk, random)."""
    from autotune.search.strategies import strategy_class

    return strategy_class(cfg.sweep.strategy).options_from_config(cfg.sweep, Path(sweep_root), sweep_id)
