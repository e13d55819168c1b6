"""The strategy contract: what the sweep controller relies on, checked for EVERY strategy in the registry
(autotune.search.strategies.STRATEGIES), like optuna's `optuna/testing/pytest_samplers.py` does for its samplers. A strategy
added to the registry is covered without touching this file.

The strategies run on the planner's real candidate frame (model=tiny, 4 GPUs) and are told rows made from those
candidates; the outcomes are chosen here (no trainer runs in this suite: tests/search runs real sweeps), and include
OOMs at every rung so the pruning paths run. The controller's side is mimicked: ask until None or `parallel` in
flight, tell in ask order, record `Pruned` as settled, replay finished rows in trial-id order on resume
(autotune/run/controller.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from autotune.layouts.candidate import Candidate
from autotune.layouts.planner import enumerate_candidates
from autotune.results.store import trial_id_for
from autotune.search.strategies import STRATEGIES, Ask, Strategy, get_strategy
from autotune.search.strategies.options import strategy_options
from autotune.spec.config import load_config

CFG = load_config(["model=tiny"])
FRAME = enumerate_candidates(CFG, 4)
RUNNABLE = FRAME[FRAME["rank"].notna()].sort_values("rank", kind="stable").reset_index(drop=True)
# the largest tenth of layouts by predicted memory runs out of it too (the planner predicted they fit)
OOM_ABOVE_BYTES = float(RUNNABLE["mem_reserved_bytes"].quantile(0.9))


@pytest.fixture(params=sorted(STRATEGIES))
def name(request) -> str:
    return request.param


@pytest.fixture
def make(name, tmp_path) -> Callable[..., Strategy]:
    """`make(max_trials, sweep="a")`: the strategy as the controller builds it for sweep folder `sweep`, with the
    controller's options (optuna: a SQLite study in that folder, which a resume of the same folder opens again)."""
    cfg = load_config(["model=tiny", f"sweep.strategy={name}"])

    def build(max_trials: int | None, sweep: str = "a") -> Strategy:
        options = strategy_options(cfg, tmp_path / sweep, sweep)
        return get_strategy(name, RUNNABLE, max_trials, seed=7, **options)

    return build


def outcome(ask: Ask) -> dict[str, Any]:
    """The row a trial of `ask` ends with: an OOM for the largest layouts, for about a third of the others (picked by
    id, so spread over the predicted order) and for every trial above rung 0 (a higher fidelity can fail where a lower one did not);
    otherwise a throughput that differs from the prediction."""
    c = ask.candidate
    row = c.layout_columns()
    row.update(trial_id=trial_id_for(ask.candidate_id, ask.rung), mem_reserved_bytes=c.pred_mem_bytes)
    if ask.rung > 0 or c.pred_mem_bytes > OOM_ABOVE_BYTES or int(ask.candidate_id[-3:], 16) % 3 == 0:
        row.update(status="oom", error_type="MemoryError", tokens_per_s_per_gpu=None, peak_mem_reserved_bytes=None)
    else:
        wobble = 1.0 + (int(ask.candidate_id[:4], 16) % 13) / 10.0
        row.update(
            status="ok",
            tokens_per_s_per_gpu=c.pred_tokens_per_s_per_gpu * wobble,
            peak_mem_reserved_bytes=c.pred_mem_bytes,
        )
    return row


def pruned_row(cand: Candidate, reason: str) -> dict[str, Any]:
    return {
        "candidate_id": cand.candidate_id,
        "trial_id": trial_id_for(cand.candidate_id),
        "status": "pruned",
        "reject_reason": reason,
    }


class Driver:
    """The controller's loop over one strategy, recording what the contract is about."""

    def __init__(self, strategy: Strategy, parallel: int = 1) -> None:
        self.s, self.parallel = strategy, parallel
        self.asked: list[tuple[str, int]] = []  # (candidate id, rung) in ask order
        self.rows: list[dict[str, Any]] = []  # every row the controller would write, in write order
        self.budgets: list[int | None] = [strategy.budget_left()]

    def run(self, max_asks: int | None = None) -> Driver:
        in_flight: list[Ask] = []
        while True:
            while len(in_flight) < self.parallel and (max_asks is None or len(self.asked) < max_asks):
                ask = self.s.ask()
                self.budgets.append(self.s.budget_left())
                if ask is None:
                    break
                self.check_not_settled(ask)
                self.asked.append((ask.candidate_id, ask.rung))
                in_flight.append(ask)
            if not in_flight:
                return self
            ask = in_flight.pop(0)
            row = outcome(ask)
            self.rows.append(row)
            for p in self.s.tell(ask, row):
                cid = p.candidate.candidate_id
                assert cid not in {c for c, _ in self.asked}, (
                    f"{self.s.name}: pruned {cid}, which was already asked (its row would be replaced)"
                )
                self.rows.append(pruned_row(p.candidate, p.reason))
            self.budgets.append(self.s.budget_left())

    def check_not_settled(self, ask: Ask) -> None:
        assert isinstance(ask.candidate, Candidate), f"{self.s.name}: asks carry a typed Candidate"
        settled = {r["candidate_id"] for r in self.rows if r["status"] == "pruned"}
        assert ask.candidate_id not in settled, f"{self.s.name}: asked {ask.candidate_id} after pruning it"
        assert (ask.candidate_id, ask.rung) not in self.asked, f"{self.s.name}: asked {ask} twice"


def replay(strategy: Strategy, rows: list[dict[str, Any]]) -> None:
    for row in sorted(rows, key=lambda r: r["trial_id"]):  # the store's order, not the run's
        strategy.replay(row["candidate_id"], row)


def nonnegative(budgets: list[int | None]) -> bool:
    return all(b is None or b >= 0 for b in budgets)


@pytest.mark.parametrize("max_trials", [1, 5])
def test_ask_returns_none_once_max_trials_are_asked(make, max_trials):
    d = Driver(make(max_trials), parallel=2).run()
    assert 1 <= len(d.asked) <= max_trials
    assert nonnegative(d.budgets)
    assert d.s.ask() is None and d.s.ask() is None  # asking again after the end changes nothing
    if len(d.asked) == max_trials:
        assert d.s.budget_left() == 0
    assert d.s.planned_total() <= max_trials


def test_asked_not_told_trials_count_against_the_budget(make):
    s = make(3)
    asks = []
    while (ask := s.ask()) is not None:
        asks.append(ask)
        assert s.budget_left() == 3 - len(asks)
    assert 1 <= len(asks) <= 3


def test_budget_left_is_never_negative_even_when_resumed_past_it(make):
    d = Driver(make(6)).run()
    assert nonnegative(d.budgets)
    fewer = make(2)  # resumed with a smaller --max-trials than the rows already written
    replay(fewer, d.rows)
    assert fewer.budget_left() == 0 and fewer.ask() is None and fewer.budget_left() == 0


def test_pruned_only_for_candidates_not_yet_asked(make):
    d = Driver(make(12), parallel=3).run()  # the Driver asserts it at every tell
    assert any(r["status"] == "oom" for r in d.rows), "the outcomes must exercise the OOM paths"
    pruned = [r["candidate_id"] for r in d.rows if r["status"] == "pruned"]
    assert len(pruned) == len(set(pruned))


def test_replay_is_idempotent(make):
    whole = Driver(make(8, "whole")).run()
    first = Driver(make(8, "first")).run(max_asks=len(whole.asked) // 2)
    once, twice = make(8, "once"), make(8, "twice")  # fresh folders: every row is new to them
    replay(once, first.rows)
    replay(twice, first.rows)
    replay(twice, first.rows)
    assert once.budget_left() == twice.budget_left()
    a, b = Driver(once).run(), Driver(twice).run()
    assert a.asked == b.asked and a.rows == b.rows
    assert a.asked, "the resumed strategy must have trials left to run"


def test_resume_continues_the_same_order(make):
    whole = Driver(make(10, "whole")).run()
    for k in (1, len(whole.asked) - 2):  # optuna: in its seed phase, then past it (TPE sampling)
        head = Driver(make(10, f"head{k}")).run(max_asks=k)
        assert head.asked == whole.asked[:k]
        resumed = make(10, f"head{k}")  # the same sweep folder, as `--resume` opens it
        replay(resumed, head.rows)
        tail = Driver(resumed).run()
        assert head.asked + tail.asked == whole.asked, f"{resumed.name}: resumed after {k} trials in another order"
