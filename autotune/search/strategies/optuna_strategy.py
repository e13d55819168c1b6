"""Optuna over the runnable candidates: TPE (Bergstra et al. 2011, "Algorithms for Hyper-Parameter Optimization") on
measured tokens/s/GPU, or NSGA-II (Deb et al. 2002) on (tokens/s/GPU up, peak memory down) with `objective="pareto"`.

Search space: one categorical per layout dimension that varies among the candidates (dp, tp, pp, cp, vpp, zero_stage,
micro_batch_size, recompute, sequence_parallel). A sampled combination that is not a runnable, not-yet-run candidate is
told FAIL (TPE and NSGA-II learn nothing from it; user attr `snapped_to` says where it went) and the nearest runnable
candidate (fewest differing dimensions, then best predicted rank) is enqueued and asked instead, so every COMPLETE trial
of the study is exactly one measured layout. The performance model seeds the study: its `num_seed_trials` best
candidates are enqueued first (`Study.enqueue_trial`), and TPE's random start-up is that many trials.

Storage: any URL Optuna accepts (`sqlite:///results/<sweep>/optuna.db` by default from the controller), study name =
sweep id with `load_if_exists`, so several controllers can share one study and optuna-dashboard can show it.
A failed trial (oom/crash/timeout) is told as throughput 0 to TPE (the region is bad, learn it) and FAIL to NSGA-II;
an OOM also prunes the candidates it dominates (autotune.search.oom_pruning).
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

from autotune.core.errors import UsageError
from autotune.core.types import PLAN_DIMS, PLAN_FIELDS, py_value
from autotune.layouts.candidate import Candidate
from autotune.results.schema import predicted_peak
from autotune.search.strategies.base import Ask, Pruned, Strategy

DIMS: tuple[str, ...] = tuple(f for f in PLAN_FIELDS if PLAN_DIMS[f].optuna)  # one categorical each (Dim.optuna)
OBJECTIVES = ("throughput", "pareto")
MAX_SNAPS = 1000


class OptunaStrategy(Strategy):
    name = "optuna"

    def __init__(
        self,
        candidates: Any,
        max_trials: int | None,
        seed: int = 0,
        *,
        objective: str = "throughput",
        storage: str | None = None,
        study_name: str | None = None,
        num_seed_trials: int | None = None,
        **_options: Any,
    ) -> None:
        super().__init__(candidates, max_trials, seed)
        if objective not in OBJECTIVES:
            raise UsageError(f"--objective={objective!r} must be one of {', '.join(OBJECTIVES)}")
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.objective = objective
        self.dims = [d for d in DIMS if self.candidates[d].nunique() > 1]
        self.distributions = {
            d: optuna.distributions.CategoricalDistribution(sorted({py_value(v) for v in self.candidates[d]}, key=str))
            for d in self.dims
        }
        self._index = {self._key(self.candidates.iloc[i]): i for i in range(len(self.candidates))}
        n = len(self.candidates)
        self.num_seed_trials = num_seed_trials if num_seed_trials is not None else max(1, min(5, math.ceil(0.1 * n)))
        import optuna  # noqa: F401  (fail here, not mid-sweep, when optuna is missing)

        self._storage, self._study_name, self._study = storage, study_name, None
        self._seeded = False
        self._trials: dict[str, Any] = {}
        self._pending: set[str] = set()

    @classmethod
    def options_from_config(cls, sweep: Any, sweep_root: Path, sweep_id: str) -> dict[str, Any]:
        """sweep.objective, sweep.storage (default: a SQLite study in the sweep folder, named after the sweep)."""
        storage = sweep.storage or f"sqlite:///{sweep_root.resolve() / 'optuna.db'}"
        return {"objective": sweep.objective, "storage": storage, "study_name": sweep_id}

    @property
    def study(self) -> Any:
        """Created on first use (the controller makes the sweep folder after building the strategy)."""
        if self._study is None:
            import optuna

            self._study = self._create_study(optuna, self._storage, self._study_name)
        return self._study

    def _seed_study(self) -> None:
        """At the first ask: the perf model's best go first, those not settled already (a resume has replayed its rows
        by now) and not in the study already (a persistent study keeps its queue, and a shared one is seeded once)."""
        self._seeded = True
        # a queued (WAITING) trial has no params yet: optuna keeps what it will be given in its "fixed_params"
        known = {self._key(t.system_attrs.get("fixed_params") or t.params) for t in self.study.trials}
        for i in range(min(self.num_seed_trials, len(self.candidates))):
            row = self.candidates.iloc[i]
            if self._open(str(row["candidate_id"])) and self._key(row) not in known:
                self.study.enqueue_trial(self._params(row))

    def _reseed_sampler(self) -> None:
        """The sampler's random state follows from (seed, trials finished), not from how many asks this process made:
        a resumed sweep then samples what the uninterrupted one would have."""
        import optuna

        finished = sum(t.state == optuna.trial.TrialState.COMPLETE for t in self.study.trials)
        self.study.sampler = self._make_sampler(optuna, self.seed + finished)

    def _create_study(self, optuna: Any, storage: str | None, study_name: str | None) -> Any:
        if storage and storage.startswith("sqlite:///"):
            from pathlib import Path

            Path(storage[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            sampler = self._make_sampler(optuna, self.seed)
            directions = ["maximize", "minimize"] if self.objective == "pareto" else ["maximize"]
            try:
                return optuna.create_study(
                    storage=storage, study_name=study_name, sampler=sampler, directions=directions, load_if_exists=True
                )
            except Exception as e:  # a bad --storage URL: sqlalchemy's NoSuchModuleError / ArgumentError / ...
                if type(e).__module__.startswith("sqlalchemy") or isinstance(e, (ValueError, ImportError)):
                    why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                    raise UsageError(f"--storage={storage!r} cannot be opened as an Optuna storage ({why})") from None
                raise

    def _make_sampler(self, optuna: Any, seed: int) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            if self.objective == "pareto":
                return optuna.samplers.NSGAIISampler(seed=seed, population_size=max(4, self.num_seed_trials))
            return optuna.samplers.TPESampler(seed=seed, n_startup_trials=self.num_seed_trials, multivariate=True)

    def _key(self, row: Any) -> tuple:
        return tuple(py_value(row[d]) for d in self.dims)

    def _params(self, row: Any) -> dict[str, Any]:
        return {d: py_value(row[d]) for d in self.dims}

    def _in_flight(self) -> int:
        return len(self._pending)

    def _open(self, cid: str) -> bool:
        return not (cid in self.results or cid in self._pending or cid in self.excluded or cid in self.pruned)

    def _nearest(self, key: tuple) -> int | None:
        """Index of the open candidate with the fewest dimensions differing from `key` (ties: best predicted)."""
        best, best_d = None, None
        for i in range(len(self.candidates)):
            row = self.candidates.iloc[i]
            if not self._open(str(row["candidate_id"])):
                continue
            d = sum(a != b for a, b in zip(self._key(row), key))
            if best_d is None or d < best_d:
                best, best_d = i, d
        return best

    def ask(self) -> Ask | None:
        left = self.budget_left()
        if left is not None and left <= 0:
            return None
        import optuna

        if not self._seeded:
            self._seed_study()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            waiting = (optuna.trial.TrialState.WAITING,)
            for _ in range(MAX_SNAPS):
                self._reseed_sampler()
                queued = bool(self.study.get_trials(deepcopy=False, states=waiting))  # ask() pops the queue first
                trial = self.study.ask(self.distributions)
                idx = self._index.get(self._key(trial.params))
                if idx is not None and self._open(str(self.candidates.iloc[idx]["candidate_id"])):
                    return self._start(trial, self.candidate_at(idx))
                if queued:  # a seed settled since it was queued (pruned by an OOM): drop it, as a resume would
                    trial.set_user_attr("snapped_to", None)
                    self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
                    continue
                near = self._nearest(self._key(trial.params))
                trial.set_user_attr(
                    "snapped_to", None if near is None else str(self.candidates.iloc[near]["candidate_id"])
                )
                self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
                if near is None:
                    return None  # every candidate is run, in flight or pruned
                self.study.enqueue_trial(self._params(self.candidates.iloc[near]))
        return None

    def _start(self, trial: Any, cand: Candidate) -> Ask:
        cid = cand.candidate_id
        trial.set_user_attr("candidate_id", cid)
        self._trials[cid] = trial
        self._pending.add(cid)
        self.num_asked += 1
        return Ask(cand)

    def _values(self, row: dict[str, Any]) -> Any:
        tps = row.get("tokens_per_s_per_gpu")
        ok = row.get("status") == "ok" and tps is not None
        if self.objective == "throughput":
            return float(tps) if ok else 0.0
        mem = row.get("peak_mem_reserved_bytes") or row.get("peak_mem_allocated_bytes") or predicted_peak(row)
        return (float(tps), float(mem)) if ok and mem is not None else None

    def tell(self, ask: Ask, row: dict[str, Any]) -> list[Pruned]:
        import optuna

        cid = ask.candidate_id
        self._pending.discard(cid)
        super().tell(ask, row)
        trial = self._trials.pop(cid, None)
        if trial is not None:
            trial.set_user_attr("status", str(row.get("status")))
            trial.set_user_attr("trial_id", str(row.get("trial_id")))
            values = self._values(row)
            if values is None:
                self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
            else:
                self.study.tell(trial, values)
        return self._learn(row) if row.get("status") == "oom" else []

    def replay(self, candidate_id: str, row: dict[str, Any]) -> None:
        """Resume: a row already measured. A persistent study holds its trial already; an in-memory one gets it
        added (`Study.add_trial`) so the sampler learns it again."""
        import optuna

        super().replay(candidate_id, row)
        if row.get("status") == "pruned":
            return
        if any(t.user_attrs.get("candidate_id") == candidate_id and t.state.is_finished() for t in self.study.trials):
            return
        match = self.candidates[self.candidates["candidate_id"] == candidate_id]
        values = self._values(row)
        if match.empty or values is None:
            return
        self.study.add_trial(
            optuna.trial.create_trial(
                params=self._params(match.iloc[0]),
                distributions=self.distributions,
                values=list(values) if isinstance(values, tuple) else [values],
                user_attrs={"candidate_id": candidate_id, "status": str(row.get("status"))},
            )
        )
        if row.get("status") == "oom":
            self._learn(row)

    def _learn(self, oom_row: dict[str, Any]) -> list[Pruned]:
        from autotune.search.oom_pruning import dominated_candidates

        return self._record_pruned(dominated_candidates(self.candidates, oom_row, skip=lambda cid: not self._open(cid)))
