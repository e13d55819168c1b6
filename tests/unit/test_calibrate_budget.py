"""GPU-hour budget and the exhaustive-grid cost estimate, by hand; the online calibrator re-orders topk."""

import dataclasses

import pandas as pd
import pytest

from autotune.core.types import PLAN_DEFAULTS
from autotune.layouts.planner import enumerate_candidates
from autotune.search.budget import GpuBudget, cost_summary, exhaustive_gpu_seconds, spent_gpu_seconds
from autotune.search.calibrate import OnlineCalibrator, predict_tokens_per_s_per_gpu
from autotune.search.strategies.topk import TopKStrategy
from autotune.spec.config import load_config


def _rows():
    return pd.DataFrame(
        [
            dict(
                candidate_id="a",
                status="ok",
                num_gpus=4,
                gpu_seconds=100.0,
                wall_s=25.0,
                step_time_mean_s=2.0,
                timed_steps=3,
            ),
            dict(
                candidate_id="b",
                status="oom",
                num_gpus=4,
                gpu_seconds=40.0,
                wall_s=10.0,
                step_time_mean_s=None,
                timed_steps=None,
            ),
            dict(
                candidate_id="c",
                status="pruned",
                num_gpus=4,
                gpu_seconds=None,
                wall_s=None,
                step_time_mean_s=None,
                timed_steps=None,
            ),
            dict(
                candidate_id="d",
                status="ok",
                num_gpus=4,
                gpu_seconds=None,
                wall_s=30.0,
                step_time_mean_s=4.0,
                timed_steps=3,
            ),
        ]
    )


def test_spent_counts_trials_that_ran():
    assert spent_gpu_seconds(_rows()) == 100.0 + 40.0 + 4 * 30.0  # d has no gpu_seconds: num_gpus * wall_s


def test_budget_stops_once_spent():
    b = GpuBudget(0.1, _rows())  # 360 GPU-s; 260 spent already (resume)
    assert not b.exhausted()
    b.add({"status": "ok", "gpu_seconds": 100.0})
    assert b.exhausted() and b.spent_s == 360.0
    assert not GpuBudget(None, _rows()).exhausted()
    with pytest.raises(ValueError, match="--budget-gpu-hours=0 must be a number > 0"):
        GpuBudget(0)


def test_exhaustive_estimate_by_hand():
    # warmup 1 + timed 3 = 4 steps. Overheads: a: 100 - 4*4*2 = 68; d: 120 - 4*4*4 = 56 -> median 62 GPU-s.
    # Measured/predicted step ratios: a 2/1 = 2, d 4/4 = 1 -> median scale 1.5. Candidate e (unmeasured, predicted
    # 2 s) -> 3 s. Total = 3 * 62 + 4*4*(2 + 4 + 3) = 186 + 144 = 330 GPU-s.
    cands = pd.DataFrame(dict(candidate_id=["a", "d", "e"], num_gpus=4, pred_step_s=[1.0, 4.0, 2.0]))
    assert exhaustive_gpu_seconds(cands, _rows(), 1, 3) == pytest.approx(330.0)
    s = cost_summary(cands, _rows(), 1, 3)
    assert s.spent_gpu_hours == pytest.approx(260 / 3600) and s.exhaustive_gpu_hours == pytest.approx(330 / 3600)
    assert s.lines()[1].endswith("this sweep spent 79% of that")  # 260 / 330


def test_online_calibration_reorders_what_topk_has_not_asked():
    cfg = load_config(["experiment=demo"])
    frame = enumerate_candidates(cfg, 4)
    runnable = frame[frame["rank"].notna()].sort_values("rank").reset_index(drop=True)
    strategy = TopKStrategy(runnable, None)
    cal = OnlineCalibrator(cfg, strategy.candidates)
    # the machine's collectives reach 1% of the preset's bandwidth and its GEMMs 30%: measurements from that truth
    truth = dataclasses.replace(cfg.cluster, comm_efficiency=0.01, matmul_efficiency=0.3)
    logs = []
    for _ in range(6):
        ask = strategy.ask()
        layout = ask.candidate.layout_columns()
        tps = float(predict_tokens_per_s_per_gpu(pd.DataFrame([layout]), cfg.model, cfg.train, truth)[0])
        row = {**layout, "status": "ok", "tokens_per_s_per_gpu": tps}
        strategy.tell(ask, row)
        cal.after_row(row, strategy, logs.append)
    assert logs and logs[-1].startswith("calibrated: ")
    rest = strategy.candidates.iloc[6:]
    pred_truth = predict_tokens_per_s_per_gpu(rest, cfg.model, cfg.train, truth)
    pred_preset = predict_tokens_per_s_per_gpu(rest, cfg.model, cfg.train, cfg.cluster)
    from autotune.search.calibrate import spearman

    position = list(range(len(rest), 0, -1))  # the strategy's remaining order, best first
    assert spearman(pred_preset, pred_truth) < 0.9  # the preset's order is wrong on this machine
    assert spearman(position, pred_truth) > 0.99  # the calibrated order is right


def test_online_calibration_takes_rows_written_before_a_plan_field_existed():
    """A row from a results file (or benchmarks/data/landscape_tiny_w8.parquet) written before compile / offload /
    dp_shard / fp8 existed lacks those keys, or holds None for them once read next to newer rows: the calibrator
    must read them as the fields' defaults (the layouts ran without them), not hand None to the int arrays
    (benchmarks/search_efficiency.py crashed on that with a TypeError). Same rows with the fields spelled out at
    their defaults must give the same fit, to the bit."""
    cfg = load_config(["experiment=demo"])
    frame = enumerate_candidates(cfg, 4)
    runnable = frame[frame["rank"].notna()].sort_values("rank").reset_index(drop=True)
    truth = dataclasses.replace(cfg.cluster, comm_efficiency=0.05, matmul_efficiency=0.3)
    later = ("compile", "offload", "dp_shard", "fp8")
    new, old = OnlineCalibrator(cfg, runnable), OnlineCalibrator(cfg, runnable)
    got_new, got_old = [], []
    for i in range(5):
        cand = runnable.iloc[i]
        assert all(cand[k] == PLAN_DEFAULTS[k] for k in later)  # the default space holds them at their defaults
        tps = float(predict_tokens_per_s_per_gpu(pd.DataFrame([cand]), cfg.model, cfg.train, truth)[0])
        row = {**cand.to_dict(), "status": "ok", "tokens_per_s_per_gpu": tps}
        stale = {k: v for k, v in row.items() if k not in later}
        if i % 2:  # read next to newer rows: the column exists but this row's value is null
            stale.update(dp_shard=float("nan"), fp8=None)
        got_new.append(new.observe(row))
        got_old.append(old.observe(stale))
    assert old.rows[list(later)].to_dict("list") == {k: [PLAN_DEFAULTS[k]] * 5 for k in later}
    assert [c is None for c in got_old] == [c is None for c in got_new]
    assert old.last is not None and old.last.cluster == new.last.cluster
