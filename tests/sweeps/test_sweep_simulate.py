"""`autotune sweep --backend simulate`: a 1024-GPU sweep on this laptop-sized box, rows with predictions only,
planner rejects recorded as `pruned`, resume adds trials without duplicating any; CLI errors are one line."""

from __future__ import annotations

import pytest
from sweep_helpers import autotune, planner_frame, ranked_trial_ids

LLAMA = ["experiment=llama8b-64xh100"]


@pytest.fixture(scope="module")
def sim_sweep(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("sim")
    proc = autotune(
        ["sweep", "--gpus", "1024", "--backend", "simulate", "--max-trials", "4", "--sweep-id", "sim", *LLAMA], cwd
    )
    return cwd, cwd / "results" / "sim", proc


def test_simulate_sweep_rows(sim_sweep):
    from autotune.results.store import read_results

    cwd, sweep, proc = sim_sweep
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    assert "results/sim" in lines[0] and "results/sim" in lines[-1]
    df = read_results(sweep)
    frame = planner_frame(LLAMA, 1024)
    rejected = frame[frame["rank"].isna()]
    assert df["candidate_id"].is_unique
    pruned = df[df["status"] == "pruned"]
    assert set(pruned["candidate_id"]) == set(rejected["candidate_id"])
    assert pruned["reject_reason"].notna().all()
    sim = df[df["status"] == "simulated"]
    assert sorted(sim["trial_id"]) == sorted(ranked_trial_ids(LLAMA, 1024, 4))  # predicted best first
    assert (sim["pred_tokens_per_s_per_gpu"] > 0).all() and (sim["pred_mem_bytes"] > 0).all()
    for col in ("tokens_per_s", "tokens_per_s_per_gpu", "mfu", "peak_mem_reserved_bytes", "final_loss"):
        assert sim[col].isna().all(), col  # no invented measurement
    assert (sim["num_gpus"] == 1024).all() and (sim["backend"] == "simulate").all()


def test_simulate_resume_adds_without_duplicates(sim_sweep):
    from autotune.results.store import read_results

    cwd, sweep, _ = sim_sweep
    before = {p.name: p.stat().st_mtime_ns for p in (sweep / "trials").glob("*.parquet")}
    proc = autotune(["sweep", "--resume", str(sweep), "sweep.max_trials=7"], cwd)
    assert proc.returncode == 0, proc.stderr[-2000:]
    df = read_results(sweep)
    assert df["candidate_id"].is_unique
    sim = df[df["status"] == "simulated"]
    assert sorted(sim["trial_id"]) == sorted(ranked_trial_ids(LLAMA, 1024, 7))
    after = {p.name: p.stat().st_mtime_ns for p in (sweep / "trials").glob("*.parquet")}
    assert all(after[name] == t for name, t in before.items())  # nothing finished was written again


def test_report_plots_and_export(sim_sweep, tmp_path):
    from autotune.results.store import read_results
    from autotune.results.trialfile import load_trialfile

    cwd, sweep, _ = sim_sweep
    proc = autotune(["report", str(sweep), "--plots", "--top", "3"], cwd)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "pruned" in proc.stdout and "Pareto front" in proc.stdout
    names = sorted(p.name for p in (sweep / "plots").iterdir())
    # no pred_vs_measured: a simulate sweep measures nothing (issue 28 item 8: it was drawn as two empty panels)
    assert names == sorted(f"{n}.{e}" for n in ("throughput", "tp_pp_heatmap", "pareto") for e in ("png", "svg"))
    assert "pred_vs_measured: not drawn (no measured trial in this sweep)" in proc.stdout
    out = tmp_path / "best.yaml"
    proc = autotune(["export", str(sweep), "--best", "-o", str(out)], cwd)
    assert proc.returncode == 0, proc.stderr[-2000:]
    model, train, cluster, plan = load_trialfile(out)
    df = read_results(sweep)
    best = df[df["status"] == "simulated"].sort_values("pred_tokens_per_s_per_gpu", ascending=False).iloc[0]
    assert plan.candidate_id(model, train) == best["candidate_id"] and plan.world_size == 1024
    assert model.name == "llama-3.1-8b" and cluster.name == "h100-sxm-80gb"


@pytest.mark.parametrize(
    "args, message",
    [
        (["sweep", "--gpus", "64", "--backend", "local", *LLAMA], "--backend slurm|ray|simulate"),
        (["sweep", "--gpus", "8", "--backend", "simulate", "--strategy", "nope", *LLAMA], "--strategy='nope'"),
        (["report", "no/such/dir"], "not a sweep folder"),
        (["export", "no/such/dir", "--best"], "not a sweep folder"),
    ],
)
def test_user_errors_are_one_line(tmp_path, args, message):
    proc = autotune(args, tmp_path, timeout=300)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_existing_sweep_id_needs_resume(sim_sweep):
    cwd, sweep, _ = sim_sweep
    proc = autotune(["sweep", "--gpus", "1024", "--backend", "simulate", "--sweep-id", "sim", *LLAMA], cwd)
    assert proc.returncode == 2 and "already exists" in proc.stderr and "--resume" in proc.stderr
