"""A real local sweep: the tiny Llama on 4 gloo ranks (experiment=demo), topk, 4 trials of which 2 run cleanly, the
3rd crashes (every rank raises) and the 4th hangs (only the launcher's timeout ends it). Then the report with plots,
`export --best` round-tripped through `autotune bench --config`, and notebooks/pareto.ipynb executed on this sweep.

Two clean trials, not four: two measured rows already give topk a measurement to re-rank by after the first, the
report a ranking and the Pareto front two points, and the plots two bars; each further 4-rank trial costs ~15 s of a
2-core box and checks nothing new (the planner's order over all layouts is checked without running them)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from sweep_helpers import REPO, autotune, planner_frame, processes_mentioning, ranked_trial_ids

DEMO = ["experiment=demo", "sweep.warmup_steps=1", "sweep.timeout_s=400"]
HANG_TIMEOUT_S = 30
PROGRESS = re.compile(r"^trial (\d+)/\d+\s+(\S+)", re.M)


@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("sweep4")
    proc = autotune(
        [
            "sweep",
            "--gpus",
            "4",
            "--backend",
            "local",
            "--strategy",
            "topk",
            "--max-trials",
            "4",
            "--steps",
            "2",
            "--sweep-id",
            "s4",
            "--inject-fault",
            "3:crash",
            "--inject-fault",
            f"4:hang:{HANG_TIMEOUT_S}",
            *DEMO,
        ],
        cwd,
        timeout=1800,
    )
    return cwd, cwd / "results" / "s4", proc


def test_sweep_rows(local_sweep):
    from autotune.results.store import read_results, scan_trials

    cwd, sweep, proc = local_sweep
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert "results/s4" in lines[0] and "results/s4" in lines[-1]
    assert "trial 4/4" in proc.stdout and "ETA" in proc.stdout and "best" in proc.stdout
    df = read_results(sweep)
    assert df["candidate_id"].is_unique and df["trial_id"].is_unique
    files = scan_trials(sweep / "trials")
    # one file per trial that ran; every pruned row in the sweep's one pruned.parquet (issue 28 item 2)
    assert files.corrupt == () and len(files.good) == int((df["status"] != "pruned").sum()) == 4
    assert df.attrs["corrupt_files"] == [] and (sweep / "pruned.parquet").is_file()
    frame = planner_frame(DEMO, 4)
    assert set(df.loc[df["status"] == "pruned", "candidate_id"]) == set(frame.loc[frame["rank"].isna(), "candidate_id"])
    # the order trials ran in, from the progress lines (topk re-ranks as measurements arrive, so only the first
    # trial is fixed by the plan): trials 1-2 clean, 3 crash, 4 hang
    order = [tid for _, tid in sorted(PROGRESS.findall(proc.stdout), key=lambda m: int(m[0]))]
    assert len(order) == 4 and order[0] == ranked_trial_ids(DEMO, 4, 1)[0]
    runnable = set(frame.loc[frame["rank"].notna(), "candidate_id"])
    run = df[df["status"] != "pruned"].set_index("trial_id")
    assert sorted(run.index) == sorted(order) and set(run["candidate_id"]) <= runnable
    ok = run.loc[order[:2]]
    assert (ok["status"] == "ok").all(), ok[["status", "error_type", "error_message"]]
    assert (ok["tokens_per_s"] > 0).all() and (ok["mfu"] > 0).all() and (ok["num_gpus"] == 4).all()
    assert ok["losses"].map(len).eq(1 + 2).all() and ok["pred_tokens_per_s_per_gpu"].notna().all()
    assert (ok["backend"] == "local").all()
    assert all((sweep / "logs") in Path(p).parents and Path(p).is_file() for p in ok["log_path"])
    crash, hang = run.loc[order[2]], run.loc[order[3]]
    assert (crash["status"], crash["error_type"]) == ("crash", "RuntimeError")
    assert (hang["status"], hang["error_type"]) == ("timeout", "Timeout")
    assert HANG_TIMEOUT_S <= hang["wall_s"] < HANG_TIMEOUT_S + 60
    assert processes_mentioning(str(sweep)) == []


def test_report_and_plots(local_sweep):
    cwd, sweep, _ = local_sweep
    proc = autotune(["report", str(sweep), "--plots"], cwd)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "ok 2  oom 0  crash 1  timeout 1" in proc.stdout and "Pareto front" in proc.stdout
    for name in ("throughput", "tp_pp_heatmap", "pred_vs_measured", "pareto"):
        for ext in ("png", "svg"):
            assert (sweep / "plots" / f"{name}.{ext}").stat().st_size > 1000


def test_export_best_runs_in_bench(local_sweep):
    from autotune.analyse.report import best_row
    from autotune.results.store import read_results
    from autotune.results.trialfile import load_trialfile

    cwd, sweep, _ = local_sweep
    out = sweep / "best.yaml"
    proc = autotune(["export", str(sweep), "--best", "-o", str(out)], cwd)
    assert proc.returncode == 0, proc.stderr[-2000:]
    model, train, cluster, plan = load_trialfile(out)
    best = best_row(read_results(sweep))
    assert plan.candidate_id(model, train) == best["candidate_id"]
    proc = autotune(
        [
            "bench",
            "--nproc",
            str(plan.world_size),
            "--config",
            str(out),
            "--steps",
            "1",
            "--json",
            "--workdir",
            str(cwd / "bench"),
        ],
        cwd,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    row = json.loads(proc.stdout[proc.stdout.index("{") :])
    assert row["status"] == "ok" and row["candidate_id"] == best["candidate_id"]


def test_notebook_executes_on_this_sweep(local_sweep):
    """As a user runs it (issue 28 item 6): after `make demo` (the sweep at results/demo of the checkout), from the
    checkout's root, `jupyter execute notebooks/pareto.ipynb` with the notebook unchanged. jupyter runs the kernel in
    notebooks/, so the notebook must find results/demo one level up (it failed on that before)."""
    import os
    import shutil
    import subprocess
    import sys

    import nbformat

    cwd, sweep, _ = local_sweep
    (cwd / "notebooks").mkdir(exist_ok=True)
    shutil.copy(REPO / "notebooks" / "pareto.ipynb", cwd / "notebooks" / "pareto.ipynb")
    if not (cwd / "results" / "demo").exists():
        (cwd / "results" / "demo").symlink_to(sweep)  # where `make demo` puts its sweep
    jupyter = Path(sys.executable).parent / "jupyter"
    proc = subprocess.run(
        [str(jupyter), "execute", "notebooks/pareto.ipynb", "--output=executed"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    nb = nbformat.read(cwd / "notebooks" / "executed.ipynb", as_version=4)
    text = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))
    assert "ok 2  oom 0  crash 1  timeout 1" in text
    images = [o for c in nb.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) == 4  # the four plots, displayed
    defs = [c.source for c in nb.cells if c.cell_type == "code" and ("def " in c.source or "class " in c.source)]
    assert defs == []  # the notebook defines nothing of its own
