"""devbench: the fit's arithmetic by hand, and a real run on CPU (one rank through the local launcher, the same code
path as on CUDA with the shapes capped) that writes a preset `plan` then loads and uses."""

from __future__ import annotations

import json
import shutil

import pytest

from autotune.cli.main import main
from autotune.fitting.devbench import apply_to_cluster, devbench_shapes, fit_devbench
from autotune.spec.config import SEARCH_SPACES, load_config


def test_fit_divides_by_the_models_shape_factor_and_the_peaks():
    cluster = load_config(["cluster=h200-141gb"]).cluster  # 989.4 TFLOP/s bf16, 1978.9 fp8, 4.8 TB/s
    peak = 989.4e12
    # m = 4096 tokens, hidden 4096: the model's factor 4096/(4096+256) * 4096/(4096+128) = 0.91176...
    factor = 4096 / 4352 * 4096 / 4224
    flops = 3 * 2.0 * 4096 * 4096 * 4096
    samples = [
        dict(kind="gemm", m=4096, k=4096, n=4096, flops=flops, time_s=flops / (0.6 * peak)),  # 60% of peak
        dict(
            kind="gemm_fp8", m=4096, k=4096, n=4096, flops=flops, time_s=flops / (0.45 * 1978.9e12)
        ),  # 45% of the fp8 peak
        dict(kind="attention", m=8192, k=128, n=32, flops=1e12, time_s=1e12 / (0.5 * peak)),
        dict(kind="hbm", m=0, k=0, n=0, bytes=2e9, time_s=2e9 / 4.0e12),  # 4.0 of 4.8 TB/s
        dict(kind="grouped_gemm", m=256, k=2048, n=768, groups=128, flops=1e12, time_s=1e12 / (0.3 * peak)),
    ]
    fit = fit_devbench(samples, cluster, "bf16")
    assert fit.matmul_efficiency == pytest.approx(0.6 / factor)
    assert fit.lowp_gemm_efficiency == pytest.approx(0.45 / 0.6)  # fp8's fraction of its peak over bf16's
    assert fit.attention_efficiency == pytest.approx(0.5)
    assert fit.stream_efficiency == pytest.approx(4.0 / 4.8)
    # modelled grouped fraction: matmul_eff * 256/(256+256) * 768/(768+128)
    assert fit.grouped_vs_model == pytest.approx(0.3 / (0.6 / factor * 0.5 * 768 / 896))
    written = apply_to_cluster(cluster, fit)
    assert written.matmul_efficiency == round(0.6 / factor, 4) and written.lowp_gemm_efficiency == 0.75


def test_fractions_above_one_are_kept_at_one_and_said():
    cluster = load_config(["cluster=cpu"]).cluster  # nominal 50 GFLOP/s
    samples = [
        dict(kind="gemm", m=4096, k=4096, n=4096, flops=1e12, time_s=1.0),  # 1 TFLOP/s: 20x the stated peak
        dict(kind="attention", m=1, k=1, n=1, flops=1e9, time_s=1.0),
        dict(kind="hbm", m=0, k=0, n=0, bytes=1e9, time_s=1.0),
    ]
    fit = fit_devbench(samples, cluster, "fp32")
    assert fit.matmul_efficiency == 1.0 and any("matmul_efficiency: measured" in n for n in fit.notes)
    assert fit.lowp_gemm_efficiency is None and fit.grouped_vs_model is None


def test_shapes_follow_the_model():
    model = load_config(["model=qwen3-30b-a3b"]).model  # h 2048, 32 heads x 128, 4 kv heads, 128 experts top-8 F 768
    s = devbench_shapes(model, 4096)
    assert {g.name: (g.m, g.k, g.n) for g in s.gemms}["qkv"] == (4096, 2048, 32 * 128 + 2 * 4 * 128)
    assert "mlp_up" not in {g.name for g in s.gemms}  # every layer is MoE: no dense MLP to time
    assert (s.expert_groups, s.expert_rows, s.expert_k, s.expert_n) == (128, 4096 * 8 // 128, 2048, 768)
    assert (s.attn_heads, s.attn_seq, s.attn_head_dim) == (32, 4096, 128)


def test_devbench_on_cpu_writes_a_preset_plan_uses(tmp_path, capsys, monkeypatch):
    tree = tmp_path / "search_spaces"
    shutil.copytree(SEARCH_SPACES, tree)
    out = tree / "cluster" / "cpu-dev.yaml"
    argv = ["devbench", "-o", str(out), "--cap", "64", "--iters", "2", "--json", "cluster=cpu", "model=tiny-moe"]
    assert main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    kinds = {s["kind"] for s in printed["samples"]}
    assert {"gemm", "grouped_gemm", "attention", "hbm"} <= kinds and "gemm_fp8" not in kinds  # no FP8 on CPU
    assert all(s["time_s"] > 0 for s in printed["samples"])
    cluster = load_config(["cluster=cpu-dev"], config_dir=tree).cluster
    for f in ("matmul_efficiency", "attention_efficiency", "stream_efficiency"):
        assert 0.0 < getattr(cluster, f) <= 1.0
        assert getattr(cluster, f) == round(printed["fit"][f], 4)
    assert out.read_text().startswith("# Measured by `autotune devbench --backend local --gpus 1`")
    monkeypatch.setattr("autotune.spec.config.SEARCH_SPACES", tree)
    speeds = {}
    for preset in ("cpu", "cpu-dev"):
        assert main(["plan", "--gpus", "2", f"cluster={preset}", "model=tiny", "--json", "--top", "1"]) == 0
        plan = json.loads(capsys.readouterr().out)
        assert plan["cluster"] == preset
        speeds[preset] = plan["top"][0]["pred_step_s"]
    assert speeds["cpu-dev"] > 0 and speeds["cpu-dev"] != speeds["cpu"]  # the measured efficiencies are used
