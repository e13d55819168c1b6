"""Top-k: the k candidates the models rank best, refilled as the sweep learns.

Starts from the predicted order like grid, but an OOM prunes every not-yet-run candidate that needs at least as much
memory for the same reason (autotune.search.oom_pruning's partial order), so the budget goes to layouts that can still run:
the next-ranked unpruned candidate takes the freed slot.
"""

from __future__ import annotations

from typing import Any

from autotune.search.strategies.base import Pruned
from autotune.search.strategies.grid import GridStrategy


class TopKStrategy(GridStrategy):
    name = "topk"

    def __init__(self, candidates: Any, max_trials: int | None, seed: int = 0) -> None:
        super().__init__(candidates, max_trials, seed)
        self.pruned: dict[str, str] = {}

    def _skip(self, cid: str) -> bool:
        return super()._skip(cid) or cid in self.pruned

    def tell(self, ask, row: dict[str, Any]) -> list[Pruned]:
        super().tell(ask, row)
        return self._learn(row) if row.get("status") == "oom" else []

    def replay(self, candidate_id: str, row: dict[str, Any]) -> None:
        super().replay(candidate_id, row)
        if row.get("status") == "oom":
            self._learn(row)

    def update_ranking(self, candidates: Any) -> None:
        """Calibration re-scored the candidates (autotune.search.calibrate.OnlineCalibrator): what is not asked yet follows
        the new predicted order; candidates no longer runnable drop out."""
        import pandas as pd

        asked = self.candidates.iloc[: self._next]
        rest = candidates[
            ~candidates["candidate_id"].isin(asked["candidate_id"])
            & candidates["candidate_id"].isin(self.candidates["candidate_id"])
        ]
        self.candidates = pd.concat([asked, rest]).reset_index(drop=True)

    def _learn(self, oom_row: dict[str, Any]) -> list[Pruned]:
        from autotune.search.oom_pruning import dominance_reason, dominated_mask

        mask = dominated_mask(self.candidates, oom_row)
        out = []
        for idx in mask.nonzero()[0]:
            cand = self.candidates.iloc[int(idx)]
            cid = str(cand["candidate_id"])
            if self._skip(cid):
                continue
            reason = f"dominated by OOM trial {oom_row.get('trial_id')} ({dominance_reason(oom_row, cand)})"
            self.pruned[cid] = reason
            out.append(Pruned(cand, reason))
        return out
