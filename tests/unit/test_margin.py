"""autotune/predict/margin.py and the planner's margin columns and ranking, hand-computed."""

from __future__ import annotations

import math

import numpy as np
import pytest

from autotune.predict.margin import fit_probability, memory_margin, rank_order
from autotune.predict.reserved import RESERVED_SIGMA_REL

GIB = 2**30


def test_memory_margin_hand_computed():
    # 100 GiB device, 10% headroom -> 90 GiB usable; reserved 80 GiB -> margin 10 GiB = 10 / (0.05 * 80) = 2.5 sigma
    margin, sigma = memory_margin([80 * GIB, 95 * GIB], 100 * GIB, 0.10, sigma_rel=0.05)
    assert margin.tolist() == [10 * GIB, -5 * GIB]
    assert sigma.tolist() == pytest.approx([2.5, -5 / (0.05 * 95)])
    # the default sigma_rel is the validated one of autotune/predict/reserved.py
    assert memory_margin(80 * GIB, 100 * GIB, 0.10)[1] == pytest.approx(10 / (RESERVED_SIGMA_REL * 80))


def test_fit_probability_is_the_normal_cdf():
    # Phi(0) = 0.5, Phi(1) = 0.841345 (standard normal table), Phi(-2) = 0.022750
    assert fit_probability([0.0, 1.0, -2.0]).tolist() == pytest.approx([0.5, 0.841345, 0.022750], abs=1e-6)


def test_rank_prefers_expected_throughput():
    # A: 1000 tok/s at 0 sigma -> expected 500; B: 900 tok/s at 3 sigma -> 900 * 0.99865 = 898.8; C: invalid
    tok = np.array([1000.0, 900.0, 2000.0])
    order = rank_order(tok, [1.0, 2.0, 1.0], [0.0, 3.0, 5.0], [True, True, False], 0.0)
    assert order.tolist() == [1, 0]
    # far from the limit the faster layout wins: 1000 * Phi(4) = 999.97 > 990 * Phi(6)
    assert rank_order([1000.0, 990.0], [1.0, 1.0], [4.0, 6.0], [True, True], 0.0).tolist() == [0, 1]


def test_min_margin_sigma_ranks_thin_margins_last():
    # both far enough for Phi ~ 1; the faster one has 2.5 sigma, under the 3-sigma minimum -> ranked after
    order = rank_order([1000.0, 900.0], [1.0, 1.0], [2.5, 8.0], [True, True], 3.0)
    assert order.tolist() == [1, 0]
    assert rank_order([1000.0, 900.0], [1.0, 1.0], [2.5, 8.0], [True, True], 0.0).tolist() == [0, 1]
    # ties in expected throughput: least reserved memory first
    assert rank_order([1.0, 1.0], [5.0, 3.0], [9.0, 9.0], [True, True], 0.0).tolist() == [1, 0]


def test_planner_margin_columns_and_ranking():
    from autotune.layouts.planner import enumerate_candidates
    from autotune.spec.config import load_config

    cfg = load_config(["model=llama-3.1-8b", "cluster=h200-141gb", "train.seq_len=8192", "train.global_batch_size=32"])
    df = enumerate_candidates(cfg, 8)
    usable = cfg.cluster.device_memory_bytes * (1 - cfg.space.memory_headroom)
    assert np.allclose(df["mem_margin_bytes"], usable - df["mem_reserved_bytes"])
    assert np.allclose(df["mem_margin_sigma"], df["mem_margin_bytes"] / (RESERVED_SIGMA_REL * df["mem_reserved_bytes"]))
    ranked = df[df["rank"].notna()].sort_values("rank")
    expected = ranked["pred_tokens_per_s"] * ranked["mem_margin_sigma"].map(lambda s: 0.5 * (1 + math.erf(s / 2**0.5)))
    assert (np.diff(expected.to_numpy()) <= 1e-6).all()  # non-increasing expected throughput
    # a 6-sigma minimum puts every thinner-margin layout after the ones that clear it
    strict = enumerate_candidates(
        load_config(
            [
                "model=llama-3.1-8b",
                "cluster=h200-141gb",
                "train.seq_len=8192",
                "train.global_batch_size=32",
                "space.min_margin_sigma=6",
            ]
        ),
        8,
    )
    top = strict[strict["rank"].notna()].sort_values("rank")["mem_margin_sigma"].to_numpy()
    first_thin = np.argmax(top < 6)
    assert first_thin > 0 and (top[first_thin:] < 6).all()
