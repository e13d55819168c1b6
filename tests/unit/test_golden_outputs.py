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


def _frames_equal(got: pd.DataFrame, want: pd.DataFrame) -> None:
    assert list(got.columns) == list(want.columns)
    assert len(got) == len(want)
    pd.testing.assert_frame_equal(got.reset_index(drop=True), want.reset_index(drop=True), check_exact=True)


@pytest.mark.parametrize("name", sorted(PLANS))
def test_plan_unchanged(name, tmp_path, capsys):
    out = tmp_path / "plan.parquet"
    assert main(["plan", *PLANS[name], "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads((GOLDEN / f"{name}.json").read_text())
    assert main(["plan", *PLANS[name], "-o", str(out)]) == 0
    _frames_equal(pd.read_parquet(out), pd.read_parquet(GOLDEN / f"{name}.parquet"))


@pytest.mark.parametrize("name", sorted(ESTIMATES))
def test_estimate_unchanged(name, capsys):
    assert main(["estimate", *ESTIMATES[name], "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads((GOLDEN / f"{name}.json").read_text())


def test_simulate_sweep_unchanged(tmp_path, capsys):
    args = ["sweep", "--gpus", "4", *DEMO, "--backend", "simulate", "--sweep-id", "gsim"]
    assert main([*args, f"sweep.results_dir={tmp_path}", "sweep.max_trials=200"]) == 0
    capsys.readouterr()
    got = read_results(tmp_path / "gsim").drop(columns=[*VOLATILE, "sweep_id"])
    got = got.sort_values("trial_id").reset_index(drop=True)
    _frames_equal(got, pd.read_parquet(GOLDEN / "demo_simulate_rows.parquet"))
