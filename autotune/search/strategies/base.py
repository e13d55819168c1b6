"""The strategy interface: ask/tell over the planner's candidate frame (docs/architecture.md "Dispatch").

A strategy sees the candidates the planner found runnable (valid and predicted to fit), hands the controller the next
one to run (`ask`), and learns each outcome (`tell`). Adaptive strategies (topk and random prune what an OOM dominates,
optuna samples with TPE/NSGA-II, halving promotes the measured best to more steps) change what `ask` returns from what
`tell` taught them. The controller owns processes, files and resume; a strategy owns only the choice. Like optuna's
samplers: small base, `ask` the one abstract method, optional hooks with default bodies, implementations in their own
modules. Every registered strategy passes tests/contract/test_strategy_contract.py.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from autotune.core.errors import UsageError
from autotune.layouts.candidate import Candidate

if TYPE_CHECKING:
    from pathlib import Path

    import pandas as pd


@dataclass(frozen=True)
class Ask:
    """One trial to run: a candidate of the planner frame, at a fidelity (`rung`, `timed_steps`; None = the sweep's
    default steps). Multi-fidelity strategies ask the same candidate again at a higher rung."""

    candidate: Candidate
    rung: int = 0
    timed_steps: int | None = None

    @property
    def candidate_id(self) -> str:
        return self.candidate.candidate_id


@dataclass(frozen=True)
class Pruned:
    """A candidate the strategy decided never to run, and why (recorded as a `pruned` row)."""

    candidate: Candidate
    reason: str


class Strategy(abc.ABC):
    name: str = "base"

    def __init__(self, candidates: pd.DataFrame, max_trials: int | None, seed: int = 0) -> None:
        """`candidates`: runnable rows (rank not null) of the planner frame, predicted best first."""
        if max_trials is not None and max_trials < 1:
            raise UsageError(f"--max-trials={max_trials} must be an integer >= 1")
        self.candidates = candidates.reset_index(drop=True)
        self.max_trials = max_trials
        self.seed = seed
        self.num_asked = 0
        self.results: dict[str, dict[str, Any]] = {}
        self.excluded: set[str] = set()  # settled without a trial (pruned): never asked, not counted
        self.pruned: dict[str, str] = {}  # candidate id -> why an OOM rules it out (adaptive strategies)

    def candidate_at(self, i: int) -> Candidate:
        """The typed candidate of row `i` of `self.candidates` (what Ask and Pruned carry)."""
        return Candidate.from_row(self.candidates.iloc[i])

    def _record_pruned(self, found: list[tuple[Any, str]]) -> list[Pruned]:
        """Remember each (frame row, reason) pair of autotune.search.oom_pruning.dominated_candidates as pruned (never
        asked) and hand them to the controller, which records their `pruned` rows."""
        for row, reason in found:
            self.pruned[str(row["candidate_id"])] = reason
        return [Pruned(Candidate.from_row(row), reason) for row, reason in found]

    @classmethod
    def options_from_config(cls, sweep: Any, sweep_root: Path, sweep_id: str) -> dict[str, Any]:
        """Hook: this strategy's own settings from `sweep.*` (autotune.spec.config.SweepSpec), passed to the constructor
        as keywords by the controller; none by default."""
        return {}

    @abc.abstractmethod
    def ask(self) -> Ask | None:
        """The next trial, or None when there is nothing (more) to run right now."""

    def tell(self, ask: Ask, row: dict[str, Any]) -> list[Pruned]:
        """Record a finished trial; return candidates this outcome rules out (the controller records them)."""
        self.results[ask.candidate_id] = row
        return []

    def replay(self, candidate_id: str, row: dict[str, Any]) -> None:
        """A row written before a resume: a trial counts against the budget and teaches the strategy; a pruned
        candidate is only excluded. Neither is asked again."""
        if row.get("status") == "pruned":
            self.excluded.add(candidate_id)
        else:
            self.results[candidate_id] = row

    def update_ranking(self, candidates: pd.DataFrame) -> None:
        """Hook: calibration re-scored the runnable candidates (autotune.search.calibrate.OnlineCalibrator), predicted best
        first. Strategies that follow the models' order re-order what they have not asked yet; by default the
        order chosen at the start stands."""

    def budget_left(self) -> int | None:
        """Trials still allowed (never negative; None = no limit), counting trials in flight."""
        if self.max_trials is None:
            return None
        return max(0, self.max_trials - len(self.results) - self._in_flight())

    def _in_flight(self) -> int:
        """Trials asked and not yet told (they count against the budget)."""
        return 0

    def planned_total(self) -> int:
        """How many trials this sweep will run in all (for `trial i/K` and the ETA)."""
        n = len(self.candidates)
        return n if self.max_trials is None else min(n, self.max_trials)
