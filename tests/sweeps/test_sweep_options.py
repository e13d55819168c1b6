"""A real local sweep over the options searched only when asked: HSDP (space.dp_shard) and CPU offload
(space.offload) on 4 gloo ranks of the tiny Llama, grid strategy. Every layout runs to completion, each writes its own
row with the option values and the same loss, and the report labels them (offload on CPU is a copy between two pools of the same RAM:
the run checks the plumbing and numerics, not the PCIe transfer).

Two trials, not the 2 x 2 grid: dp_shard=[0,2] is a list the grid crosses and offload=[optimizer] a value the default
space never holds, so both options still reach the grid, the trials, their rows and the report. The grid's cross
product itself is planner arithmetic (tests/unit/test_hsdp.py, test_offload.py), and the numerics of each option alone
are the distributed suite's (dp4_hsdp2_zero3, the dp2 offload layouts, 1e-4 from one rank); each further 4-rank trial
costs ~20 s of a 2-core box."""

from __future__ import annotations

from sweep_helpers import autotune

SPACE = [
    "model=tiny",
    "cluster=cpu",
    "train.global_batch_size=8",
    "train.seq_len=64",
    "space.tp=[1]",
    "space.pp=[1]",
    "space.cp=[1]",
    "space.zero_stage=[2]",
    "space.micro_batch_size=[2]",
    "space.recompute=[none]",
    "space.dp_shard=[0,2]",
    "space.offload=[optimizer]",
    "sweep.warmup_steps=1",
    "sweep.timeout_s=400",
]


def test_sweep_runs_hsdp_and_offload_layouts(tmp_path):
    from autotune.results.store import read_results

    proc = autotune(
        ["sweep", "--gpus", "4", "--backend", "local", "--strategy", "grid", "--steps", "2", "--sweep-id", "opt",
         *SPACE],
        tmp_path,
        timeout=1200,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    df = read_results(tmp_path / "results" / "opt")
    ran = df[df["status"] != "pruned"]
    pairs = set(zip(ran["dp_shard"].tolist(), ran["offload"].tolist()))
    assert pairs == {(0, "optimizer"), (2, "optimizer")}, pairs
    assert (ran["status"] == "ok").all(), ran[["status", "error_message"]].to_dict("records")
    assert (ran["tokens_per_s"] > 0).all()
    # same model, seed and data: HSDP and plain FSDP, both with the host optimizer, train the same curve (1e-4)
    losses = ran["final_loss"].to_numpy()
    assert abs(losses.max() - losses.min()) <= 1e-4 * abs(losses).max(), losses
    report = autotune(["report", str(tmp_path / "results" / "opt")], tmp_path)
    assert report.returncode == 0 and "hsdp2" in report.stdout and "off-opt" in report.stdout, report.stdout[-2000:]
