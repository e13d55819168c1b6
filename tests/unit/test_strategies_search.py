"""random / halving / optuna strategies driven by hand through ask -> tell on the planner's real candidate frame, with
made-up outcomes (no trainer here; tests/search runs real sweeps)."""

import pytest

from autotune.layouts.planner import enumerate_candidates
from autotune.search.strategies.halving import HalvingStrategy, parse_steps
from autotune.search.strategies.optuna_strategy import OptunaStrategy
from autotune.search.strategies.random_search import RandomStrategy
from autotune.spec.config import load_config

CFG = load_config(["experiment=demo"])
FRAME = enumerate_candidates(CFG, 4)
RUNNABLE = FRAME[FRAME["rank"].notna()].sort_values("rank").reset_index(drop=True)


def _row(ask, tps, status="ok", **kw):
    c = ask.candidate
    row = c.layout_columns()
    row.update(
        status=status,
        tokens_per_s_per_gpu=tps if status == "ok" else None,
        trial_id=f"c{ask.candidate_id}" + (f"-r{ask.rung}" if ask.rung else ""),
        peak_mem_reserved_bytes=1e8 * c.plan.micro_batch_size if status == "ok" else None,
        **kw,
    )
    return row


def _drain(strategy, outcome):
    asked = []
    while (ask := strategy.ask()) is not None:
        asked.append(ask)
        strategy.tell(ask, _row(ask, outcome(ask)))
    return asked


def test_random_is_seeded_and_covers_without_repeats():
    a = [x.candidate_id for x in _drain(RandomStrategy(RUNNABLE, None, seed=1), lambda x: 1.0)]
    b = [x.candidate_id for x in _drain(RandomStrategy(RUNNABLE, None, seed=1), lambda x: 1.0)]
    c = [x.candidate_id for x in _drain(RandomStrategy(RUNNABLE, None, seed=2), lambda x: 1.0)]
    assert a == b and a != c and sorted(a) == sorted(RUNNABLE["candidate_id"]) and len(set(a)) == len(a)
    assert a != list(RUNNABLE["candidate_id"])  # not the predicted order
    assert len(_drain(RandomStrategy(RUNNABLE, 5, seed=1), lambda x: 1.0)) == 5


def test_halving_promotes_the_measured_best_with_more_steps():
    s = HalvingStrategy(RUNNABLE, None, halving_steps=[1, 3], halving_eta=3, halving_pool=9)
    assert s.rung_sizes() == [9, 3] and s.planned_total() == 12
    first = [s.ask() for _ in range(9)]
    assert all(a.rung == 0 and a.timed_steps == 1 for a in first)
    assert s.ask() is None  # rung 0 not told yet: wait
    speed = {a.candidate_id: float(i) for i, a in enumerate(first)}  # the 9th asked is measured fastest
    for a in first:
        s.tell(a, _row(a, speed[a.candidate_id]))
    second = [s.ask() for _ in range(3)]
    assert {a.candidate_id for a in second} == {a.candidate_id for a in first[-3:]}  # top ceil(9/3) by measurement
    assert all(a.rung == 1 and a.timed_steps == 3 for a in second)
    for a in second:
        s.tell(a, _row(a, 1.0))
    assert s.ask() is None and s.num_trials == 12


def test_halving_pool_follows_the_trial_budget():
    s = HalvingStrategy(RUNNABLE, 8, halving_steps="1,3")  # pool * (1 + 1/3) <= 8 -> 6
    assert s.pool_size == 6
    assert len(_drain(s, lambda a: float(hash(a.candidate_id) % 97))) == 8


def test_halving_resume_replays_rungs():
    s = HalvingStrategy(RUNNABLE, None, halving_steps=[1, 3], halving_pool=6)
    rows = []
    first = [s.ask() for _ in range(6)]
    for i, a in enumerate(first):
        rows.append(_row(a, float(i)))
        s.tell(a, rows[-1])
    a = s.ask()  # rung 1, the fastest
    rows.append(_row(a, 9.0))
    resumed = HalvingStrategy(RUNNABLE, None, halving_steps=[1, 3], halving_pool=6)
    for r in sorted(rows, key=lambda r: r["trial_id"]):  # the store's order interleaves rungs
        resumed.replay(r["candidate_id"], r)
    nxt = resumed.ask()
    assert nxt.rung == 1 and nxt.candidate_id == first[-2].candidate_id  # the second survivor is what is left


def test_halving_oom_prunes_dominated_pool_members():
    s = HalvingStrategy(RUNNABLE, None, halving_steps=[1, 3])
    a = s.ask()
    pruned = s.tell(a, _row(a, None, status="oom"))
    assert pruned and all(p.reason.startswith(f"dominated by OOM trial c{a.candidate_id}") for p in pruned)
    assert all(p.candidate.candidate_id not in {x.candidate_id for x in _drain(s, lambda x: 1.0)} for p in pruned)


def test_bad_halving_options_are_one_line_errors():
    with pytest.raises(ValueError, match=r"sweep.halving_steps=\[3, 1\] must be increasing"):
        parse_steps([3, 1])
    with pytest.raises(ValueError, match="sweep.halving_steps='1,x'"):
        parse_steps("1,x")
    with pytest.raises(ValueError, match="sweep.halving_eta=1 must be an integer >= 2"):
        HalvingStrategy(RUNNABLE, None, halving_eta=1)


def test_optuna_seeds_with_the_model_ranking_then_learns(tmp_path):
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    s = OptunaStrategy(RUNNABLE, 12, seed=0, storage=storage, study_name="t", num_seed_trials=3)
    best_ids = list(RUNNABLE["candidate_id"])
    truth = {cid: 100.0 - i for i, cid in enumerate(best_ids)}  # the model's order is right here
    asked = _drain(s, lambda a: truth[a.candidate_id])
    ids = [a.candidate_id for a in asked]
    assert ids[:3] == best_ids[:3]  # enqueued seeds first
    assert len(ids) == 12 and len(set(ids)) == 12 and set(ids) <= set(best_ids)
    import optuna

    study = optuna.load_study(study_name="t", storage=storage)
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(done) == 12 and {t.user_attrs["candidate_id"] for t in done} == set(ids)
    assert max(t.value for t in done) == 100.0
    resumed = OptunaStrategy(RUNNABLE, 14, seed=0, storage=storage, study_name="t")
    for a in asked:
        resumed.replay(a.candidate_id, _row(a, truth[a.candidate_id]))
    more = _drain(resumed, lambda a: truth[a.candidate_id])
    assert len(more) == 2 and not {a.candidate_id for a in more} & set(ids)


def test_optuna_pareto_and_oom_pruning():
    s = OptunaStrategy(RUNNABLE, 6, seed=0, objective="pareto", num_seed_trials=2)
    a = s.ask()
    pruned = s.tell(a, _row(a, None, status="oom"))
    assert pruned and all("dominated by OOM trial" in p.reason for p in pruned)
    rest = _drain(s, lambda x: 10.0 + x.candidate.plan.micro_batch_size)
    # the 6-trial budget counts the OOM; the rest get (throughput, memory) pairs
    assert len(rest) == 5 and not {x.candidate_id for x in rest} & {p.candidate.candidate_id for p in pruned}
    assert len(s.study.directions) == 2
    complete = [t for t in s.study.trials if t.state.name == "COMPLETE"]
    assert len(complete) == 5 and all(len(t.values) == 2 for t in complete)
    assert all(t.values[1] == 1e8 * t.params.get("micro_batch_size", 1) for t in complete)
    with pytest.raises(ValueError, match="--objective='speed' must be one of throughput, pareto"):
        OptunaStrategy(RUNNABLE, 4, objective="speed")
