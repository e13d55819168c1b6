"""Pareto front of throughput (max) vs peak memory (min), checked on hand-made points."""

from __future__ import annotations

import math

import pandas as pd

from autotune.analyse.pareto import pareto_front, pareto_mask


def test_mask_by_hand():
    # (memory, throughput): A(1,10) B(2,30) C(2,20) D(3,25) E(4,40) F(5,40) G(nan,99)
    mem = [1, 2, 2, 3, 4, 5, math.nan]
    thr = [10, 30, 20, 25, 40, 40, 99]
    # A: least memory. B: beats A. C: B has the same memory and more speed. D: B uses less and is faster.
    # E: fastest. F: E is as fast with less memory. G: no memory value -> never on the front.
    assert pareto_mask(thr, mem) == [True, True, False, False, True, False, False]


def test_equal_points_keep_one():
    assert pareto_mask([5, 5], [1, 1]) == [True, False]


def test_front_uses_measured_for_ok_and_predictions_for_simulated():
    df = pd.DataFrame(
        {
            "trial_id": ["a", "b", "c", "d"],
            "status": ["ok", "ok", "oom", "simulated"],
            "tokens_per_s_per_gpu": [100.0, 80.0, None, None],
            "peak_mem_reserved_bytes": [4e9, 2e9, None, None],
            "peak_mem_allocated_bytes": [3e9, 1e9, None, None],
            "pred_tokens_per_s_per_gpu": [1.0, 1.0, 500.0, 90.0],
            "pred_mem_bytes": [1.0, 1.0, 1.0, 3e9],
        }
    )
    front = pareto_front(df)
    # b (2 GB, 80) and a (4 GB, 100) are measured; d is predicted 3 GB at 90 -> between them; c (oom) never counts
    assert front["trial_id"].tolist() == ["b", "d", "a"]
    assert front["memory_bytes"].tolist() == [2e9, 3e9, 4e9]
