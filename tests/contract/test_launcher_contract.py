"""The launcher contract (launchers/base.py, docs/trial_protocol.md), run against every entry of LAUNCHER_CASES.

Every backend must: return one schema-complete row per trial (exactly RESULT_COLUMNS, storable with RESULT_SCHEMA),
report `ok` with real measurements for a good trial, `crash` for a raising rank, `timeout` for a hung one (killing
every process of it), `crash`/`Cancelled` after cancel(), `oom` for a genuine MemoryError, and leave no process alive.
Backends that start no processes (simulate) run only the schema/success/cancel tests (fixture `launcher_case`); the
crash / timeout / OOM tests take `process_launcher_case`, which is generated only for backends that start processes.
"""

from __future__ import annotations

import time

import pytest
from proc_scan import processes_mentioning as processes_of

from autotune.results.schema import RESULT_COLUMNS

TINY = ["experiment=demo", "train.global_batch_size=4"]


def make_spec(case, trial_id: str, **extra):
    from autotune.results.trialfile import make_spec as _make
    from autotune.spec.config import load_config

    overrides = TINY + list(extra.pop("overrides", []))
    cfg = load_config(overrides)
    plan = cfg.plan(case.world_size)
    fields = dict(warmup_steps=1, timed_steps=2, timeout_s=300.0)
    fields.update(extra)
    # one trial id per backend: the backends' tests run side by side on two xdist workers, and the leftover-process
    # checks find a trial's ranks by the id in their command lines
    tid = f"{trial_id}-{case.name}"
    return _make(cfg, plan, sweep_id="contract", trial_id=tid, backend=case.name, **fields)


def assert_row_shape(row, case, spec) -> None:
    assert list(row) == RESULT_COLUMNS  # same columns, same order, from every backend
    assert row["backend"] == case.name
    assert (row["trial_id"], row["sweep_id"], row["candidate_id"]) == (spec.trial_id, "contract", spec.candidate_id)
    assert row["num_gpus"] == spec.plan.world_size and row["dp"] == spec.plan.dp
    for k, v in row.items():  # missing numbers are null, never NaN or -1
        if isinstance(v, float):
            assert v == v and v != -1, (k, v)


def assert_row_round_trips(row, tmp_path) -> None:
    """The row goes through the Parquet store unchanged (types included). Checked on the success row (numbers, loss
    list) and the crash row (nulls) of every backend, so no trial of its own is spent on it."""
    import pandas as pd

    from autotune.results.store import read_results, write_row

    write_row(tmp_path / "trials", row)
    back = read_results(tmp_path).iloc[0].to_dict()
    assert list(back) == RESULT_COLUMNS
    for k in ("trial_id", "status", "dp", "tp", "backend", "num_params", "error_type", "tokens_per_s", "final_loss"):
        assert back[k] == row[k] or (pd.isna(back[k]) and row[k] is None), k
    assert (back["losses"] is None and row["losses"] is None) or list(back["losses"]) == row["losses"]


def test_success_row(launcher_case, tmp_path):
    case, launcher = launcher_case
    spec = make_spec(case, "t-ok")
    handle = launcher.submit(spec)
    if case.starts_processes:
        assert handle.status() in ("pending", "running")
        with pytest.raises(TimeoutError):
            handle.result(timeout=0.01)
    row = handle.result(timeout=600)
    assert handle.done() and handle.status() == row["status"]
    assert_row_shape(row, case, spec)
    assert_row_round_trips(row, tmp_path)
    if case.starts_processes:
        assert row["status"] == "ok", row
        assert row["tokens_per_s"] > 0 and row["tokens_per_s_per_gpu"] == pytest.approx(row["tokens_per_s"] / 2)
        # losses: every step's loss, warm-up included (docs/trial_protocol.md "per-step loss list")
        assert row["timed_steps"] == 2 and len(row["losses"]) == 1 + 2 and row["final_loss"] == row["losses"][-1]
        assert row["wall_s"] > 0 and row["gpu_seconds"] == pytest.approx(row["wall_s"] * case.world_size)
        assert row["started_at"] <= row["ended_at"]
        assert processes_of(spec.trial_id) == []
    else:  # a model's output, never a measurement
        assert row["status"] == "simulated"
        assert row["pred_tokens_per_s_per_gpu"] > 0 and row["pred_mem_bytes"] > 0
        for k in (
            "tokens_per_s",
            "tokens_per_s_per_gpu",
            "mfu",
            "step_time_mean_s",
            "peak_mem_allocated_bytes",
            "final_loss",
            "losses",
        ):
            assert row[k] is None, k


def test_crash(process_launcher_case, tmp_path):
    case, launcher = process_launcher_case
    spec = make_spec(case, "t-crash", inject_fault="crash")
    row = launcher.submit(spec).result(timeout=600)
    assert_row_shape(row, case, spec)
    assert_row_round_trips(row, tmp_path)
    assert (row["status"], row["error_type"]) == ("crash", "RuntimeError"), row
    assert "injected fault" in row["error_message"]
    assert row["tokens_per_s"] is None and row["losses"] is None
    assert processes_of(spec.trial_id) == []


def test_timeout_kills_everything(process_launcher_case):
    case, launcher = process_launcher_case
    timeout_s = 20.0
    spec = make_spec(case, "t-hang", inject_fault="hang", timeout_s=timeout_s)
    t0 = time.monotonic()
    row = launcher.submit(spec).result(timeout=timeout_s + 120)
    assert_row_shape(row, case, spec)
    assert (row["status"], row["error_type"]) == ("timeout", "Timeout"), row
    assert timeout_s <= row["wall_s"] < timeout_s + 60 and time.monotonic() - t0 >= timeout_s
    assert processes_of(spec.trial_id) == []


def test_cancel(launcher_case):
    case, launcher = launcher_case
    spec = make_spec(case, "t-cancel", inject_fault="hang" if case.starts_processes else "")
    handle = launcher.submit(spec)
    if not case.starts_processes:  # finished on submit: cancel is a no-op and the row stands
        handle.cancel()
        assert handle.result()["status"] == "simulated"
        return
    time.sleep(3)
    handle.cancel()
    assert handle.done()
    row = handle.result(timeout=0)
    assert_row_shape(row, case, spec)
    assert (row["status"], row["error_type"]) == ("crash", "Cancelled"), row
    assert processes_of(spec.trial_id) == []


def test_oom(process_launcher_case):
    """A genuine MemoryError: the tiny Llama widened to hidden 2048 / ffn 5632 / vocab 32000 holds ~509M fp32
    parameters (2.0 GB per rank at dp=2, ZeRO-0) while each rank may grow only 512 MiB past its start-up size
    (RLIMIT_AS via memory_limit_bytes; tests/reliability/test_faults_local.py derives the same numbers)."""
    case, launcher = process_launcher_case
    spec = make_spec(
        case,
        "t-oom",
        memory_limit_bytes=512 * 2**20,
        timed_steps=1,
        overrides=["model.hidden_size=2048", "model.ffn_hidden_size=5632", "model.vocab_size=32000"],
    )
    row = launcher.submit(spec).result(timeout=600)
    assert_row_shape(row, case, spec)
    assert (row["status"], row["error_type"]) == ("oom", "MemoryError"), row
    assert processes_of(spec.trial_id) == []
