"""benchmarks/gpu_validation.py (its smoke test; tests/benchmarks/test_benchmark_smoke.py counts it): without CUDA it
refuses in one line (exit 2); `--device cpu --model tiny` runs the same path (a real bench_model trial on one gloo rank
next to autotune's estimate) and prints one JSON object."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu_validation.py"


def _run(*args: str, tmp_path: Path, hide_cuda: bool = False) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if hide_cuda:  # a machine with a GPU checks the refusal too: torch then sees no device
        env["CUDA_VISIBLE_DEVICES"] = ""
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args, "--workdir", str(tmp_path)],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=600,
    )  # fmt: skip


def test_refuses_without_cuda_in_one_line(tmp_path):
    p = _run(tmp_path=tmp_path, hide_cuda=True)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip().count("\n") == 0 and "no CUDA device" in p.stderr
    p = _run("--device", "cpu", "--model", "llama-3.2-1b", tmp_path=tmp_path)
    assert p.returncode == 2 and "only --model tiny" in p.stderr


# the header of /work/shared/reference/measured/h200_bench_model_2026-11-25.csv (the format the fit reads)
REFERENCE_HEADER = (
    "case,kind,layout,compile,status,tokens_per_s_per_gpu,mfu,peak_alloc_gib,peak_reserved_gib,est_alloc_gib,"
    "est_reserved_gib,est_tokens_per_s_per_gpu,est_fits,notes"
)


def test_cpu_all_prints_measured_next_to_predicted_and_writes_reference_rows(tmp_path):
    """`--all` on CPU: the tiny dense layout and the tiny MoE model cut to 2 layers (`model.num_layers=2`), each a real
    trial next to its estimate, and `--csv` rows in the reference CSV format."""
    rows = tmp_path / "rows.csv"
    p = _run(
        "--device", "cpu", "--model", "tiny", "--all", "--csv", str(rows), "--warmup-steps", "1", "--steps", "2",
        tmp_path=tmp_path,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout)
    assert (out["device"], out["model"], out["cluster"], out["seq_len"]) == ("cpu", "tiny", "cpu", 128)
    dense, moe = out["cases"]
    assert [dense["case"], moe["case"]] == ["tiny_mbs1_none_e", "tinymoe_2l_mbs1_e"]
    assert "model.num_layers=2" in moe["overrides"]
    assert dense["layout"] == dict(micro_batch_size=1, recompute="none", compile=False, seq_len=128)
    for case in (dense, moe):
        assert case["status"] == "ok", case
        for side in ("measured", "predicted"):
            for key in ("allocated_gib", "reserved_gib", "tokens_per_s_per_gpu", "mfu"):
                v = case[side][key]
                assert isinstance(v, (int, float)) and math.isfinite(v) and v > 0, (side, key, v)
        assert case["predicted"]["compile_time_s"] == 0.0
    assert out["compile_time_s"] == []
    r = dense["ratio"]["tokens_per_s_per_gpu"]
    assert r == pytest.approx(
        dense["measured"]["tokens_per_s_per_gpu"] / dense["predicted"]["tokens_per_s_per_gpu"], rel=1e-3
    )
    lines = rows.read_text().splitlines()
    assert lines[0] == REFERENCE_HEADER and len(lines) == 3
    import csv

    written = list(csv.DictReader(lines))
    assert [w["case"] for w in written] == ["tiny_mbs1_none_e", "tinymoe_2l_mbs1_e"]
    assert float(written[0]["tokens_per_s_per_gpu"]) == pytest.approx(dense["measured"]["tokens_per_s_per_gpu"])
    # the layout column names the global batch the trial ran (mbs x --grad-accum 2): the fit rebuilds the run from it
    assert moe["global_batch_size"] == 2
    assert written[1]["layout"] == " ".join((*moe["overrides"], "train.global_batch_size=2"))
    assert written[1]["status"] == "ok"


def test_scale_down_mode_composes_8_ranks_from_1(tmp_path):
    # benchmarks/gpu_validation_scale_down.py through gpu_validation.py --scale-down, on one CPU rank (tiny model)
    p = _run("--scale-down", "--device", "cpu", "--warmup-steps", "1", "--steps", "1", tmp_path=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout)
    assert out["status"] == "ok" and out["target"]["num_gpus"] == 8 and out["target"]["dp"] == 8
    assert out["replica"] == {"num_gpus": 1, "dp": 1, "num_layers": 8, "grad_accum_steps": 2}
    # a CPU rank also measures its host dispatch apart (bench_model/host_cost.py) and its embedding / head + loss
    # (bench_model/ends_timing.py); both null on CUDA ranks
    assert out["modelled_parts"] == "dp" and out["measured_parts"] == "compute,optimizer,host,ends"
    assert out["step_time_mean_s"] > out["replica_step_time_s"] > 0 and 0 < out["mfu"] < 1
    assert "published_tok_s_gpu" not in out  # compared with the published row only on CUDA
