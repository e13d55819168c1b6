"""Successive halving (Jamieson & Talwalkar 2016, "Non-stochastic Best Arm Identification and Hyperparameter
Optimization", Alg. 1; the budget split of Li et al. 2018, Hyperband): many candidates for few timed steps, the best
1/eta of each rung for more steps, until the last rung.

- Rung r runs its candidates with `steps[r]` timed steps (default 1, 3, 9: a factor eta=3 per rung, like Hyperband).
- The first rung's pool is the `pool` best candidates by the performance model (default: the most the trial budget
  allows: pool * (1 + 1/eta + 1/eta^2 ...) <= max_trials; every runnable candidate when there is no budget).
- A rung is promoted when all its trials are told (synchronous SH): survivors are its best ceil(n/eta) ok rows by
  measured tokens/s/GPU. Failed trials never survive; an OOM also prunes the not-yet-run pool members it dominates.
- Every trial counts against --max-trials (a candidate run at three rungs costs three trials). Trial ids carry the
  rung (autotune.results.store.trial_id_for), so each rung writes its own row.
"""

from __future__ import annotations

import math
from typing import Any

from autotune.core.errors import SpecError
from autotune.layouts.candidate import Candidate
from autotune.search.strategies.base import Ask, Pruned, Strategy

DEFAULT_STEPS: tuple[int, ...] = (1, 3, 9)
DEFAULT_ETA = 3


def parse_steps(steps: Any) -> tuple[int, ...]:
    """`[1, 3, 9]` or "1,3,9" -> (1, 3, 9); strictly increasing positive integers."""
    text = steps
    if isinstance(steps, str):
        try:
            steps = [int(x) for x in steps.split(",")]
        except ValueError:
            raise SpecError(f"sweep.halving_steps={text!r} must be comma-separated integers, e.g. 1,3,9") from None
    steps = tuple(steps)
    if (
        not steps
        or any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in steps)
        or any(b <= a for a, b in zip(steps, steps[1:]))
    ):
        raise SpecError(f"sweep.halving_steps={list(steps)!r} must be increasing integers >= 1, e.g. [1, 3, 9]")
    return steps


class HalvingStrategy(Strategy):
    name = "halving"

    def __init__(
        self,
        candidates: Any,
        max_trials: int | None,
        seed: int = 0,
        *,
        halving_steps: Any = DEFAULT_STEPS,
        halving_eta: int = DEFAULT_ETA,
        halving_pool: int | None = None,
        **_options: Any,
    ) -> None:
        super().__init__(candidates, max_trials, seed)
        self.steps = parse_steps(halving_steps)
        if isinstance(halving_eta, bool) or not isinstance(halving_eta, int) or halving_eta < 2:
            raise SpecError(f"sweep.halving_eta={halving_eta!r} must be an integer >= 2")
        self.eta = halving_eta
        self.pool_size = self._pool_size(halving_pool)
        self.rung = 0
        self._queue: list[Candidate] = [self.candidate_at(i) for i in range(self.pool_size)]  # this rung, not yet asked
        self._rung_rows: dict[str, dict[str, Any]] = {}  # this rung's told rows by candidate id
        self._rung_members: set[str] = {c.candidate_id for c in self._queue}
        self._pending: set[str] = set()
        self.num_trials = 0
        self._replayed: list[tuple[int, str, dict[str, Any]]] = []
        self._replayed_keys: set[tuple[int, str]] = set()  # (rung, candidate id): a row replayed twice counts once

    @classmethod
    def options_from_config(cls, sweep: Any, sweep_root: Any, sweep_id: str) -> dict[str, Any]:
        return {
            "halving_steps": sweep.halving_steps,
            "halving_eta": sweep.halving_eta,
            "halving_pool": sweep.halving_pool,
        }

    def _pool_size(self, pool: int | None) -> int:
        n = len(self.candidates)
        if pool is not None:
            if isinstance(pool, bool) or not isinstance(pool, int) or pool < 1:
                raise SpecError(f"sweep.halving_pool={pool!r} must be an integer >= 1")
            return min(pool, n)
        if self.max_trials is None:
            return n
        cost = sum(self.eta**-r for r in range(len(self.steps)))  # trials per first-rung candidate
        return max(1, min(n, int(self.max_trials / cost)))

    def rung_sizes(self) -> list[int]:
        sizes = [self.pool_size]
        for _ in self.steps[1:]:
            sizes.append(max(1, math.ceil(sizes[-1] / self.eta)))
        return sizes

    def planned_total(self) -> int:
        total = sum(self.rung_sizes())
        return total if self.max_trials is None else min(total, self.max_trials)

    def budget_left(self) -> int | None:
        if self._replayed:  # replayed rows are trials spent, whether or not ask() has run since the resume
            self._apply_replay()
        if self.max_trials is None:
            return None
        return max(0, self.max_trials - self.num_trials - len(self._pending))

    def ask(self) -> Ask | None:
        if self._replayed:
            self._apply_replay()
        left = self.budget_left()
        if left is not None and left <= 0:
            return None
        while self._queue:
            cand = self._queue.pop(0)
            cid = cand.candidate_id
            if cid in self.pruned or cid in self.excluded:
                continue
            self._pending.add(cid)
            self.num_asked += 1
            return Ask(cand, rung=self.rung, timed_steps=self.steps[self.rung])
        if not self._pending:
            self._promote()
            if self._queue:
                return self.ask()
        return None  # waiting for this rung's trials (or done)

    def _promote(self) -> None:
        """All of this rung is told: queue the best ceil(n/eta) ok rows for the next rung."""
        if self.rung + 1 >= len(self.steps):
            return
        ok = [
            (float(r["tokens_per_s_per_gpu"]), cid)
            for cid, r in self._rung_rows.items()
            if r.get("status") == "ok" and r.get("tokens_per_s_per_gpu") is not None
        ]
        keep = max(1, math.ceil(len(self._rung_members) / self.eta)) if ok else 0
        survivors = [cid for _, cid in sorted(ok, reverse=True)[:keep]]
        by_id = {str(c): i for i, c in enumerate(self.candidates["candidate_id"])}
        self.rung += 1
        self._queue = [self.candidate_at(by_id[c]) for c in survivors]
        self._rung_members = set(survivors)
        self._rung_rows = {}

    def tell(self, ask: Ask, row: dict[str, Any]) -> list[Pruned]:
        self._pending.discard(ask.candidate_id)
        self.num_trials += 1
        self.results[ask.candidate_id] = row  # the highest rung's row stands for the candidate
        if ask.rung == self.rung:
            self._rung_rows[ask.candidate_id] = row
        return self._learn(row) if row.get("status") == "oom" else []

    def replay(self, candidate_id: str, row: dict[str, Any]) -> None:
        """Resume: rows already written are applied at the first `ask`, rung by rung (they arrive in trial-id
        order, which interleaves rungs)."""
        if row.get("status") == "pruned":
            self.excluded.add(candidate_id)
            return
        key = (_rung_of(str(row.get("trial_id") or "")), candidate_id)
        if key not in self._replayed_keys:
            self._replayed_keys.add(key)
            self._replayed.append((*key, row))

    def _apply_replay(self) -> None:
        rows, self._replayed = sorted(self._replayed, key=lambda x: x[0]), []
        by_id = {str(c): i for i, c in enumerate(self.candidates["candidate_id"])}
        for rung, cid, row in rows:
            while self.rung < rung:  # a later rung has rows: the earlier one was complete (synchronous SH)
                before, self._queue = self.rung, []
                self._promote()
                if self.rung == before:
                    break
            if cid not in by_id:
                continue
            self._queue = [c for c in self._queue if c.candidate_id != cid]
            self.tell(Ask(self.candidate_at(by_id[cid]), rung=rung), row)

    def _learn(self, oom_row: dict[str, Any]) -> list[Pruned]:
        from autotune.search.oom_pruning import dominated_candidates

        # queued at a later rung is not "not yet run": a candidate with a row of an earlier rung is never pruned (its
        # pruned row would replace that measured row)
        pool_ids = {c.candidate_id for c in self._queue} - set(self.results) - set(self.pruned)
        return self._record_pruned(dominated_candidates(self.candidates, oom_row, skip=lambda c: c not in pool_ids))


def _rung_of(trial_id: str) -> int:
    head, sep, tail = trial_id.rpartition("-r")
    return int(tail) if sep and tail.isdigit() else 0
