"""Ranking, status counts and the best row of a sweep table."""

from __future__ import annotations

import pandas as pd
import pytest

from autotune.analyse.report import best_row, ranked, status_counts


def frame(rows):
    cols = ["trial_id", "status", "tokens_per_s_per_gpu", "pred_tokens_per_s_per_gpu"]
    return pd.DataFrame([dict(zip(cols, r)) for r in rows])


def test_ranking_measured_first_then_failures():
    df = frame(
        [
            ("a", "ok", 50.0, 90.0),
            ("b", "ok", 70.0, 10.0),
            ("c", "oom", None, 999.0),
            ("d", "pruned", None, 999.0),
            ("e", "crash", None, 5.0),
        ]
    )
    r = ranked(df)
    assert r["trial_id"].tolist() == ["b", "a", "c", "e"]  # measured order, not predicted; pruned left out
    assert r["rank"].tolist()[:2] == [1, 2] and r["rank"].isna().tolist()[2:] == [True, True]
    assert best_row(df)["trial_id"] == "b"


def test_simulated_rank_on_predictions():
    df = frame([("a", "simulated", None, 5.0), ("b", "simulated", None, 9.0)])
    assert ranked(df)["trial_id"].tolist() == ["b", "a"]


def test_counts_and_no_success():
    df = frame([("a", "oom", None, 1.0), ("b", "pruned", None, 1.0), ("c", "timeout", None, 1.0)])
    assert status_counts(df) == {"ok": 0, "oom": 1, "crash": 0, "timeout": 1, "pruned": 1, "simulated": 0, "invalid": 0}
    with pytest.raises(ValueError, match="no successful trial.*oom 1"):
        best_row(df)
