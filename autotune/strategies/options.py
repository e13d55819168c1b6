"""Strategy-specific settings from the sweep config (`sweep.*`), so the controller passes one dict to get_strategy."""
from __future__ import annotations

from typing import Any


def strategy_options(cfg: Any, sweep_root: Any, sweep_id: str) -> dict[str, Any]:
    """Options for `get_strategy(cfg.sweep.strategy, ...)`; {} for strategies without any (grid, topk, random)."""
    s = cfg.sweep
    if s.strategy == "optuna":
        from pathlib import Path

        storage = getattr(s, "storage", None) or f"sqlite:///{Path(sweep_root).resolve() / 'optuna.db'}"
        return {"objective": getattr(s, "objective", "throughput"), "storage": storage, "study_name": sweep_id}
    if s.strategy == "halving":
        return {"halving_steps": getattr(s, "halving_steps", (1, 3, 9)), "halving_eta": getattr(s, "halving_eta", 3),
                "halving_pool": getattr(s, "halving_pool", None)}
    return {}
