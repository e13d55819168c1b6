"""A real local scale-down sweep (docs/scale_down.md): layouts of 8 GPUs of the tiny Llama, each run as a replica on
at most 2 gloo ranks through the local launcher and composed into a full-size row. Two trials, one timed step each:
the composition math has its hand-computed tests (tests/unit/test_scale_down.py); this checks the real path end to
end (controller -> replica spec -> launcher -> composed row -> store -> report's cost line)."""

from __future__ import annotations

from sweep_helpers import autotune

DEMO = ["experiment=demo", "sweep.warmup_steps=1", "sweep.timeout_s=400"]


def test_sweep_8_gpus_on_2(tmp_path):
    from autotune.results.store import read_results

    args = ["sweep", "--gpus", "8", "--available-gpus", "2", "--backend", "local", "--strategy", "topk"]
    proc = autotune([*args, "--max-trials", "2", "--steps", "1", "--sweep-id", "sd", *DEMO], tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "scale-down trials on 2 GPUs" in proc.stdout
    df = read_results(tmp_path / "results" / "sd")
    ran = df[df["status"] != "pruned"]
    assert len(ran) == 2 and (ran["status"] == "ok").all(), ran[["status", "error_type", "error_message"]]
    # the target layout in the plan columns, the replica in its own
    assert (ran["num_gpus"] == 8).all() and (ran["dp"] * ran["tp"] * ran["pp"] * ran["cp"] == 8).all()
    assert (ran["scaled_from"] == ran["candidate_id"]).all() and (ran["replica_num_gpus"] <= 2).all()
    assert (ran["replica_pp"] == 1).all() and (ran["replica_tp"] == ran["tp"].clip(upper=2)).all()
    assert (ran["tokens_per_s_per_gpu"] > 0).all() and (ran["mfu"] > 0).all() and (ran["replica_step_time_s"] > 0).all()
    assert ran["measured_parts"].str.contains("compute").all() and ran["modelled_parts"].notna().all()
    # the trainer times its optimizer step inside the step's CPU seconds (the composition scales it on its own)
    assert (
        (ran["optimizer_cpu_time_mean_s"] > 0) & (ran["optimizer_cpu_time_mean_s"] < ran["step_cpu_time_mean_s"])
    ).all()
    # the budget charged the replica (its ranks x its wall), the report states the full-size cost next to it
    assert (ran["gpu_seconds"] <= ran["replica_num_gpus"] * ran["wall_s"] * 1.5 + 60).all()
    assert (ran["full_size_gpu_seconds"] > ran["gpu_seconds"]).all()
    assert "scale-down: 2 trials" in proc.stdout and "at full size would have cost" in proc.stdout
    assert (df.loc[df["status"] == "pruned", "scaled_from"].isna()).all()
