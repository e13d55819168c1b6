"""Faults inside real trials on the local backend (torchrun, gloo, world 2), each ending in an exact results folder.

- one real `autotune sweep` with three injected faults (docs/trial_protocol.md "Fault injection"): rank 1 SIGKILLs
  itself mid-step (`kill_rank1`), rank 0 sleeps before a collective so rank 1 hangs inside it (`hang`, only the
  launcher's timeout ends it), rank 1 alone raises (`crash_rank1`);
- a genuine out-of-memory: a layout too large for a real RLIMIT_AS (`memory_limit_bytes`) -> MemoryError -> `oom`.
After each: exactly the expected trial files, the expected status and error per trial, no temp file, and no process of
the trial left alive.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from harness import AUTOTUNE, TINY, processes_mentioning, ranked_trial_ids

HANG_TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def fault_sweep(tmp_path_factory):
    cwd = tmp_path_factory.mktemp("faults")
    argv = [
        AUTOTUNE,
        "sweep",
        "--gpus",
        "2",
        "--backend",
        "local",
        "--strategy",
        "topk",
        "--max-trials",
        "3",
        "--steps",
        "2",
        "--parallel",
        "2",
        "--sweep-id",
        "faults",
        "--inject-fault",
        "1:kill_rank1",
        "--inject-fault",
        f"2:hang:{HANG_TIMEOUT_S:g}",
        "--inject-fault",
        "3:crash_rank1",
        *TINY,
    ]
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600)
    return cwd / "results" / "faults", proc


def test_fault_sweep_final_folder(fault_sweep):
    from autotune.results.store import read_results, scan_trials

    sweep, proc = fault_sweep
    killed, hung, crashed = ranked_trial_ids(TINY, 2, 3)
    df = read_results(sweep)
    run = df[df["status"] != "pruned"].set_index("trial_id")
    assert sorted(run.index) == sorted([killed, hung, crashed])  # exactly the three trials, once each
    assert df["trial_id"].is_unique and df["candidate_id"].is_unique
    files = scan_trials(sweep / "trials")
    # one file per trial that ran; pruned rows live in the sweep's one pruned.parquet
    assert files.corrupt == () and len(files.good) == len(run) and df.attrs["corrupt_files"] == []
    assert [p.name for p in (sweep / "trials").iterdir() if p.name.startswith(".")] == []

    k = run.loc[killed]  # rank 1 SIGKILLed: nobody wrote a result; torchrun tore rank 0 down
    assert (k["status"], k["error_type"]) == ("crash", "Killed"), dict(k)
    h = run.loc[hung]
    assert (h["status"], h["error_type"]) == ("timeout", "Timeout"), dict(h)
    assert HANG_TIMEOUT_S <= h["wall_s"] < HANG_TIMEOUT_S + 30  # the timeout fired, then the kill took < 30 s
    c = run.loc[crashed]  # the failing rank is named, not the peer that saw "Connection closed by peer"
    assert (c["status"], c["error_type"]) == ("crash", "RuntimeError"), dict(c)
    assert c["error_message"].startswith("rank 1:") and "crash_rank1" in c["error_message"], c["error_message"]
    for row in (k, h, c):
        assert row["tokens_per_s"] != row["tokens_per_s"] or row["tokens_per_s"] is None  # no numbers for a failure
    assert processes_mentioning(str(sweep)) == []  # nothing of any trial is left running
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stdout[-2000:] + proc.stderr[-3000:]


def test_genuine_oom_is_status_oom(tmp_path):
    """The tiny Llama widened to hidden 2048 / ffn 5632 / vocab 32000 has 8·47.2M + 2·65.5M = 509M parameters, 2.0 GB
    in fp32 on every rank of a dp=2, ZeRO-0 layout; each rank may grow by 512 MiB beyond its start-up size (RLIMIT_AS),
    so materialising the model raises a real MemoryError. (512 MiB, not less: creating the mesh's gloo groups after the
    limit is set needs thread stacks, and a tighter cap fails there with EAGAIN instead.)"""
    from autotune.results.store import SweepStore, read_results
    from autotune.results.trialfile import make_spec
    from autotune.spec.config import load_config
    from launchers.local import LocalLauncher

    cfg = load_config([*TINY, "model.hidden_size=2048", "model.ffn_hidden_size=5632", "model.vocab_size=32000"])
    store = SweepStore(tmp_path / "oom").create(cfg.resolved_yaml, {"gpus": 2, "overrides": []})
    spec = make_spec(
        cfg,
        cfg.plan(2),
        sweep_id="oom",
        trial_id="t-oom",
        warmup_steps=1,
        timed_steps=1,
        timeout_s=300.0,
        memory_limit_bytes=512 * 2**20,
    )
    handle = LocalLauncher(workdir=store.work_dir, log_dir=store.logs_dir).submit(spec)
    row = handle.result(timeout=400)
    store.write_row(row)

    assert (row["status"], row["error_type"]) == ("oom", "MemoryError"), row
    df = read_results(store.root)
    assert list(df["trial_id"]) == ["t-oom"] and list(df["status"]) == ["oom"]
    assert sorted(p.name for p in store.trials_dir.iterdir()) == ["t-oom.parquet"]
    assert processes_mentioning(str(store.root)) == []
    assert Path(row["log_path"]).is_file()
