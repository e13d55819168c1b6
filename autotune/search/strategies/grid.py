"""Grid: every runnable candidate, predicted best first, until `max_trials` (None = all). No feedback."""

from __future__ import annotations

from typing import Any

from autotune.search.strategies.base import Ask, Strategy


class GridStrategy(Strategy):
    name = "grid"

    def __init__(self, candidates: Any, max_trials: int | None, seed: int = 0) -> None:
        super().__init__(candidates, max_trials, seed)
        self._next = 0
        self._pending: set[str] = set()

    def _in_flight(self) -> int:
        return len(self._pending)

    def _skip(self, cid: str) -> bool:
        return cid in self.results or cid in self._pending or cid in self.excluded

    def ask(self) -> Ask | None:
        left = self.budget_left()
        if left is not None and left <= 0:
            return None
        while self._next < len(self.candidates):
            cid = str(self.candidates["candidate_id"].iat[self._next])
            self._next += 1
            if not self._skip(cid):
                self._pending.add(cid)
                self.num_asked += 1
                return Ask(self.candidate_at(self._next - 1))
        return None

    def tell(self, ask: Ask, row: dict[str, Any]) -> list:
        self._pending.discard(ask.candidate_id)
        return super().tell(ask, row)
