"""`plan`, `estimate` and `sweep --backend simulate` give the same numbers, to the last bit, as the files captured
before the package restructuring (tests/unit/data/golden/, written at commit 90283d3 by the commands below).

A change that means to move a prediction regenerates these files in the same commit and says why in its message;
a refactoring never touches them."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from autotune.cli.main import main
from autotune.core.types import PLAN_DEFAULTS
from autotune.results.store import read_results

GOLDEN = Path(__file__).parent / "data" / "golden"
DEMO = ["experiment=demo"]
HSDP_OFFLOAD_70B = [
    "model=llama-3.1-70b",
    "cluster=h100-sxm-80gb",
    "space.dp_shard=[0,8,16]",
    "space.offload=[none,optimizer,params]",
]
PLANS = {
    "demo_plan": ["--gpus", "4", *DEMO],
    "llama70b_hsdp_offload_plan": ["--gpus", "64", *HSDP_OFFLOAD_70B],
}
ESTIMATES = {
    "demo_estimate": ["--gpus", "4", *DEMO, "plan.tp=2", "plan.pp=2"],
    "llama70b_estimate": [
        "--gpus",
        "64",
        "model=llama-3.1-70b",
        "cluster=h100-sxm-80gb",
        "plan.tp=8",
        "plan.pp=4",
        "plan.dp=2",
        "plan.zero_stage=3",
        "plan.dp_shard=2",
        "plan.offload=optimizer",
    ],  # fmt: skip
}
# columns that say when and where a row was written, not what was predicted
VOLATILE = ["started_at", "ended_at", "wall_s", "gpu_seconds", "code_version", "torch_version", "hostname", "log_path"]


# terms the models gained with a later dimension, zero for every layout that does not use it (these are dense)
NEW_ZERO_TERMS = {"pred_ep_comm_s", "ep_comm_s"}  # expert-parallel all-to-alls (autotune/predict/perf.py)


def _new_field_default(name: str):
    """A layout field added after the golden files were written appears as a new column (or JSON key) holding its
    default on every old layout, and a new model term as 0; anything else new is a change of output."""
    if name in NEW_ZERO_TERMS:
        return 0.0
    assert name in PLAN_DEFAULTS, f"column {name!r} is new and is not a plan field"
    return PLAN_DEFAULTS[name]


def _frames_equal(got: pd.DataFrame, want: pd.DataFrame) -> None:
    for extra in [c for c in got.columns if c not in want.columns]:
        assert (got[extra] == _new_field_default(extra)).all(), f"new column {extra} is off its default"
    assert [c for c in got.columns if c in want.columns] == list(want.columns)
    assert len(got) == len(want)
    got = got[list(want.columns)].reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want.reset_index(drop=True), check_exact=True)


def _json_equal(got, want) -> None:
    if isinstance(want, dict):
        assert isinstance(got, dict)
        for k in got.keys() - want.keys():
            assert got[k] == _new_field_default(k), f"new key {k} is off its default"
        for k in want:
            _json_equal(got.get(k), want[k])
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want)
        for g, w in zip(got, want):
            _json_equal(g, w)
    else:
        assert got == want


@pytest.mark.parametrize("name", sorted(PLANS))
def test_plan_unchanged(name, tmp_path, capsys):
    out = tmp_path / "plan.parquet"
    assert main(["plan", *PLANS[name], "--json"]) == 0
    _json_equal(json.loads(capsys.readouterr().out), json.loads((GOLDEN / f"{name}.json").read_text()))
    assert main(["plan", *PLANS[name], "-o", str(out)]) == 0
    _frames_equal(pd.read_parquet(out), pd.read_parquet(GOLDEN / f"{name}.parquet"))


@pytest.mark.parametrize("name", sorted(ESTIMATES))
def test_estimate_unchanged(name, capsys):
    assert main(["estimate", *ESTIMATES[name], "--json"]) == 0
    _json_equal(json.loads(capsys.readouterr().out), json.loads((GOLDEN / f"{name}.json").read_text()))


def test_simulate_sweep_unchanged(tmp_path, capsys):
    args = ["sweep", "--gpus", "4", *DEMO, "--backend", "simulate", "--sweep-id", "gsim"]
    assert main([*args, f"sweep.results_dir={tmp_path}", "sweep.max_trials=200"]) == 0
    capsys.readouterr()
    got = read_results(tmp_path / "gsim").drop(columns=[*VOLATILE, "sweep_id"])
    got = got.sort_values("trial_id").reset_index(drop=True)
    _frames_equal(got, pd.read_parquet(GOLDEN / "demo_simulate_rows.parquet"))
