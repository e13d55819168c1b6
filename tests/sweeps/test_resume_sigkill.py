"""A controller SIGKILLed mid-sweep (a trial in flight) and resumed: every candidate accounted for exactly once, the
finished trial not rerun, no temp file, no process left behind (the killed trial's orphans are reaped)."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from sweep_helpers import CLI, autotune, planner_frame, processes_mentioning, ranked_trial_ids

OVERRIDES = ["experiment=demo", "sweep.warmup_steps=1", "train.global_batch_size=4", "sweep.timeout_s=400"]


def test_sigkill_then_resume(tmp_path):
    from autotune.results.store import read_results

    argv = CLI + [
        "sweep",
        "--gpus",
        "2",
        "--backend",
        "local",
        "--max-trials",
        "3",
        "--steps",
        "1",
        "--sweep-id",
        "k",
        *OVERRIDES,
    ]
    sweep = tmp_path / "results" / "k"
    order = ranked_trial_ids(OVERRIDES, 2, 1)
    with open(tmp_path / "first.log", "w") as log:
        ctl = subprocess.Popen(argv, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 900

        # wait until trial 1 has its row and trial 2 has started (its TOKEN file exists); topk may re-rank after
        # trial 1, so trial 2 is whichever other trial started
        def second() -> list[str]:
            return [p.parent.name for p in (sweep / "work").glob("*/TOKEN") if p.parent.name != order[0]]

        while time.monotonic() < deadline and not ((sweep / "trials" / f"{order[0]}.parquet").exists() and second()):
            assert ctl.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
            time.sleep(0.2)
        time.sleep(2)
        ctl.send_signal(signal.SIGKILL)
        ctl.wait()
    first_mtime = (sweep / "trials" / f"{order[0]}.parquet").stat().st_mtime_ns
    (in_flight,) = second()
    assert not (sweep / "trials" / f"{in_flight}.parquet").exists()  # lost with the controller: no row

    proc = autotune(["sweep", "--resume", str(sweep)], tmp_path, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    df = read_results(sweep)
    frame = planner_frame(OVERRIDES, 2)
    rejected = set(frame.loc[frame["rank"].isna(), "candidate_id"])
    assert df["candidate_id"].is_unique and df["trial_id"].is_unique
    assert set(df.loc[df["status"] == "pruned", "candidate_id"]) == rejected
    run = df[df["status"] != "pruned"]
    assert len(run) == 3 and order[0] in set(run["trial_id"]), run[["trial_id", "status"]]
    assert (run["status"] == "ok").all(), run[["trial_id", "status", "error_message"]]
    assert set(run["candidate_id"]) <= set(frame.loc[frame["rank"].notna(), "candidate_id"])
    assert len(df) == len(rejected) + 3  # every candidate of the plan exactly once (the rest never asked)
    assert (sweep / "trials" / f"{order[0]}.parquet").stat().st_mtime_ns == first_mtime  # not rerun
    assert [p.name for p in (sweep / "trials").iterdir() if p.name.startswith(".")] == []
    assert processes_mentioning(str(sweep)) == []
    assert "trial 3/3" in proc.stdout and "1 trial(s) already done" in proc.stdout
    assert os.path.exists(sweep / "sweep.yaml")
