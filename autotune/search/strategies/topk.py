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
        from autotune.search.oom_pruning import dominated_candidates

        return self._record_pruned(dominated_candidates(self.candidates, oom_row, skip=self._skip))
