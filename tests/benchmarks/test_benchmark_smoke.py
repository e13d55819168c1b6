"""Every script in benchmarks/ runs in CI in a small mode: each is started as its own process (as a user runs it) with
tiny inputs or its smoke flag, must exit 0 and print one JSON document whose keys and values are checked here
(positive times and throughputs, errors in [0, 1], counts > 0, ratios that equal their parts).

The list of scripts comes from the directory: a new benchmarks/*.py without an entry in SMOKE (or a test file of its
own, OWN_TEST) fails `test_smoke[<script>]`. benchmarks/data/measure_landscape.py is not a benchmark: it produces the
fixture search_efficiency.py replays (40 trials of 8 ranks; its README says how), and is not run here.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks"
SCRIPTS = sorted(p.name for p in BENCH.glob("*.py"))
# scripts whose smoke test is a file of its own (it checks more than the JSON shape)
OWN_TEST = {
    "gpu_validation.py": "tests/benchmarks/test_gpu_validation.py",
    "gpu_validation_scale_down.py": "tests/benchmarks/test_gpu_validation.py",
    "refit.py": "tests/benchmarks/test_benchmark_smoke.py",  # test_refit_smoke: needs a copy of the presets
    # no entry point: scale_down_accuracy.py's full run calls it (check_scale_down_accuracy: not in smoke mode)
    "scale_down_moe.py": "tests/benchmarks/test_benchmark_smoke.py",
    # no entry point: benchmarks/scale_down_calibration.py is scale_down_accuracy.py's calibration step, which its
    # smoke run calls (test_smoke[scale_down_accuracy.py])
    "scale_down_calibration.py": "tests/benchmarks/test_benchmark_smoke.py",
}


def run_script(name: str, *args: str, cwd: Path) -> Any:
    # one intra-op thread: a smoke run measures nothing, and on a loaded 2-core box idle OpenMP threads spin
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    p = subprocess.run(
        [sys.executable, str(BENCH / name), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    assert p.returncode == 0, f"{name} {' '.join(args)} exit {p.returncode}:\n{p.stderr[-3000:]}"
    return json.loads(p.stdout)


def positive(*values: Any) -> bool:
    return all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in values)


def fraction(*values: Any) -> bool:
    return all(isinstance(v, (int, float)) and 0.0 <= v <= 1.0 for v in values)


def check_cpu_adam(out: dict) -> None:
    assert out["params"] == 200_000 and out["threads"] >= 1
    rates = [out[k] for k in ("foreach_params_per_s", "fused_params_per_s") if k in out]
    assert rates and positive(*rates) and out["cpu_adam_params_per_s"] == max(rates)
    assert out["foreach_params_per_s"] * out["foreach_step_s"] == pytest.approx(200_000)


def check_engine_overhead(out: dict) -> None:
    assert (
        len(out["local_trial_s"]) == 1
        and positive(*out["local_trial_s"])
        and (out["repeats"], out["world_size"]) == (1, 1)
    )
    assert not any(k.startswith(("slurm", "ray")) for k in out)  # --backends '': local alone, nothing to compare


def check_fp8_memory(out: dict) -> None:
    # eager only: torchao's Float8Linear keeps the bf16 input, so every recipe saves exactly what bf16 saves
    v = out["variants"]
    assert [(x["recipe"], x["compiled"]) for x in v] == [("none", False), ("tensorwise", False), ("rowwise", False)]
    assert positive(*(x["saved_bytes"] for x in v)) and len({x["saved_bytes"] for x in v}) == 1
    assert all(x["saving_bytes_per_token"] == 0 == x["predicted_saving_bytes_per_token"] for x in v)


def check_h200_bench_model(out: dict) -> None:
    # the 4 MoE rows of the 2026-11-29 H200 lease (Qwen3-30B-A3B 4 layers x 3, Mixtral-8x7B 2 layers x 1)
    rows = out["rows"]
    assert (
        out["source"] == "h200_bench_model_2026-11-29.csv"
        and len(rows) == 4
        and all(r["moe"] and positive(r["measured"], r["predicted"]) for r in rows)
    )
    assert all(r["error"] == pytest.approx(r["predicted"] / r["measured"] - 1) for r in rows)
    assert fraction(out["moe_median_abs_err"], out["moe_max_abs_err"]) and "dense_median_abs_err" not in out


def check_torchtitan_loss_peak(out: dict) -> None:
    # eager only (--no-compile): torchtitan's loss holds 12 bytes per logit beyond the logits (the profile's term);
    # --chunks 4: ChunkedLossWrapper's loop peaks where TorchtitanProfile.chunked_loss says
    row, chunked = out["rows"]
    assert (row["mode"], row["tokens"], row["vocab"]) == ("eager", 256, 512) and positive(row["peak_bytes"])
    assert (chunked["mode"], chunked["chunks"], chunked["hidden"]) == ("chunked_eager", 4, 64)
    assert abs(row["rel_err"]) <= 0.01 and abs(chunked["rel_err"]) <= 0.01
    assert out["max_abs_rel_err"] == max(abs(row["rel_err"]), abs(chunked["rel_err"]))


def check_torchtitan_sac_saved(out: dict) -> None:
    # eager only (--no-compile): torchtitan 0.2.2's op-level SAC keeps what the profile's selective account says
    # (3,744 bytes per token and layer at h 256, f 768, 8 / 2 heads), to within 1%
    (row,) = out["rows"]
    assert row["mode"] == "eager" and row["profile_bytes_per_token_layer"] == 3744.0
    assert abs(row["rel_err"]) <= 0.01 and out["compiled_minus_eager_per_h"] is None


def check_fp8_ratio(out: dict) -> None:
    pairs, llama = out["llmfoundry_h100_fp8_vs_bf16"], out["llama_h100_prediction"]
    assert pairs and all(positive(p["measured_ratio"], p["predicted_ratio"]) for p in pairs)
    assert [(r["model"], r["seq_len"]) for r in llama] == [
        (m, s) for m in ("llama-3.2-1b", "llama-3.2-3b", "llama-3.1-8b") for s in (4096, 8192)
    ]
    # FP8 doubles only the linears' peak (H100 SXM datasheet: 1979 vs 989 dense TFLOP/s), so speedup < 2; its casts
    # cost memory traffic, so a small model may gain nothing (llm-foundry measured MPT-3b FP8/BF16 = 0.997, the
    # `pairs` above): > 0.9, and the gain grows with the model at each sequence length (larger GEMMs per cast byte)
    assert all(0.9 < r["speedup"] < 2.0 and r["fp8_tok_s_gpu"] > 0 and r["bf16_tok_s_gpu"] > 0 for r in llama)
    for seq in (4096, 8192):
        gains = [r["speedup"] for r in llama if r["seq_len"] == seq]  # 1B, 3B, 8B
        assert gains == sorted(gains) and gains[-1] > 1.0, (seq, gains)


def check_memory_vs_torchtitan(out: dict) -> None:
    assert (out["num_layers"], out["seq_len"], out["compared"], out["not_compared"]) == (1, 256, 1, [])
    (row,) = out["layouts"]
    assert row["layout"] == "fsdp8_none" and row["plan"]["dp"] == 8
    assert positive(row["bench_model_peak_bytes"], row["torchtitan_peak_bytes"], row["torchtitan_profile_peak_bytes"])
    assert row["ratio"] == pytest.approx(row["bench_model_peak_bytes"] / row["torchtitan_peak_bytes"])
    assert sum(row["bench_model_by_category"].values()) > 0 and row["torchtitan_by_category"]


def check_model_accuracy(out: dict) -> None:
    assert out["quick"] and out["rows_used"] > 0 and out["rows_skipped"] > 0
    assert fraction(out["in_sample_median_abs_err"], out["in_sample_p90_abs_err"])
    assert out["in_sample_median_abs_err"] <= out["in_sample_p90_abs_err"]
    assert -1.0 <= out["median_group_spearman"] <= 1.0 and "out_of_sample_median_abs_err" not in out
    assert out["per_source"] and sum(s["rows"] for s in out["per_source"].values()) == out["rows_used"]
    have = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", "46ae7e1"], capture_output=True).returncode == 0
    if have:  # the replay of the old model must compute (it printed `before: null` when it broke)
        assert out["before"]["commit"] == "46ae7e1" and fraction(out["before"]["in_sample_median_abs_err"])


def check_published_fit(out: dict) -> None:
    # the H200 source alone: the 2026-11-29 lease's 11 runs, the 2026-11-25 rows it did not measure again (8 runs,
    # 2 OOM) and the 2026-11-23 probes and OOM; 4 OOM cases (the CSVs' status column)
    assert (out["layouts"], out["oom_layouts"], out["skipped"]) == (23, 4, {"h200": 28})
    assert out["fit_rate"] == round(out["predicted_to_fit"] / out["layouts"], 4)
    # without the 5% headroom at least as many fit; the OOM cases stay refused either way
    assert out["predicted_to_fit_no_headroom"] >= out["predicted_to_fit"]
    assert out["oom_predicted_not_to_fit_no_headroom"] == out["oom_predicted_not_to_fit"] == 4
    assert out["memory_rows"] == len(out["memory"]) > 0 and fraction(out["memory_median_abs_err"])
    assert (
        len(out["misses"])
        == out["layouts"] - out["predicted_to_fit"] + out["oom_layouts"] - out["oom_predicted_not_to_fit"]
    )


def check_mlperf_speed(out: dict) -> None:
    # the 20 MLPerf Llama 3.1 405B submissions (mlperf_llama31_405b_configs.csv), each with a logged step time
    assert out["rows"] == len(out["per_row"]) == 20 == sum(c["n"] for c in out["by_cluster"].values())
    for r in out["per_row"]:
        assert r["measured_tokens_per_s_per_gpu"] > 0 and r["predicted_tokens_per_s_per_gpu"] > 0
        assert r["err"] == pytest.approx(
            r["predicted_tokens_per_s_per_gpu"] / r["measured_tokens_per_s_per_gpu"] - 1, abs=2e-3
        )
    # the five clusters the submissions ran, and the summary is the rows' own median
    assert set(out["by_cluster"]) == {"h100-sxm-80gb", "h200-141gb", "b200", "gb200-nvl72", "gb300-nvl72"}
    errs = sorted(r["err"] for r in out["per_row"])
    assert out["median_signed_err"] == pytest.approx((errs[9] + errs[10]) / 2, abs=1e-4)


def check_refit(out: dict) -> None:
    # fitted on the 9 h200_bench rows into a copy of the presets (see SMOKE): every family's coefficients written, in
    # 9 presets (h100-hbm2e-96gb: the torchtitan pages' GPUs)
    assert out["rows"] == 9 and out["accuracy"] is None and len(out["presets_written"]) == 9
    for fam in ("hopper", "ampere", "blackwell"):
        assert all(0.0 < v <= 1.0 for v in out["fitted"][fam].values())


def check_residual_groups(out: dict) -> None:
    # the 9 h200_bench rows: every group covers them all, each worst row's term shares are fractions of its step
    assert out["rows"] == 9 and sum(g["n"] for g in out["groups"]["source"].values()) == 9
    assert len(out["worst"]) == 3 and all(fraction(w["compute_s"], w["attention_s"]) for w in out["worst"])
    assert all(w["attention_s"] <= w["compute_s"] for w in out["worst"])


def check_coefficient_pull(out: dict) -> None:
    # the 9 h200_bench rows are single-GPU (dp 1): dp_overlap moves none of them, so nothing pulls it
    assert out["rows"] == 9 and out["coefficient"] == "dp_overlap" and out["total_pull"] == 0.0
    assert sum(g["n"] for g in out["groups"]["source"].values()) == 9 and len(out["top"]) == 3
    assert all(t["sensitivity"] == 0.0 for t in out["top"])


def check_planner_speed(out: dict) -> None:
    assert (out["model"], out["num_gpus"]) == ("llama-3.1-8b", 64)
    assert 0 < out["fitting"] <= out["candidates"] and positive(out["seconds"], out["config_load_seconds"])


def check_recompute_cost(out: dict) -> None:
    modes = out["modes"]
    assert set(modes) == {"none", "selective", "full"} and out["shape"]["layers"] == 1  # --no-compile
    assert all(positive(m["fwd_s"], m["bwd_s"], m["step_s"], m["step_rel"], m["peak_bytes"]) for m in modes.values())
    assert modes["none"]["step_rel"] == modes["none"]["peak_rel"] == 1.0
    for m in modes.values():  # at this size the logits dominate the peak: only the ratios are checked
        assert m["peak_rel"] == pytest.approx(m["peak_bytes"] / modes["none"]["peak_bytes"])
    assert set(out["target"]) == {"selective"} and isinstance(out["target"]["selective"]["met"], bool)


def check_moe_block_profile(out: dict) -> None:
    ops = out["ops"]
    assert list(ops) == ["router", "topk", "counts", "permute", "grouped_gemm", "unpermute", "combine", "aux_loss"]
    assert all(positive(o["fwd_bwd_s"]) for o in ops.values()) and positive(out["block_s"], *out["before"].values())
    assert sum(o["share"] for o in ops.values()) == pytest.approx(1.0)
    assert out["stages_sum_s"] == pytest.approx(sum(o["fwd_bwd_s"] for o in ops.values()))
    assert out["dominant"] in ops and out["shape"]["grouped_gemm_path"] == "grouped_mm"


def check_host_ops(out: dict) -> None:
    """The op counts autotune/predict/host.py prices are the ones the script counts on this torch (a torch upgrade
    that changes bench_model's op sequence fails here: re-count and update host.py)."""
    from autotune.predict import host

    d, m = out["dense_block"], out["moe_block"]
    assert (d["forward"], d["backward"]) == host.DENSE_OPS and (m["forward"], m["backward"]) == host.MOE_OPS
    assert m["forward_scopes"] == host.SCOPE_FWD_OPS and d["forward_scopes"]["attn"] == host.SCOPE_FWD_OPS["attn"]
    assert 0 < d["forward_views"] < d["forward"] and out["moe_minus_dense"]["forward"] == m["forward"] - d["forward"]
    assert m["forward_ops"]["_grouped_mm"] == 3 and m["forward_ops"]["bincount"] == 1  # learned routing: one count
    for recipe, extra in host.TORCHAO_FP8_EXTRA_OPS.items():  # torchao Float8Linear casts per block
        assert out["fp8"][recipe] == {"dense_extra": list(extra[False]), "moe_extra": list(extra[True])}
    # --no-compile: the torch.compile counts cost ~90 s of cold Inductor builds on the CI box; their stored full run
    # (benchmarks/data/host_ops_result.json) is checked against host.py in tests/unit/test_host.py
    assert out["compiled"] == {}


def check_vs_torchtitan_step(out: dict) -> None:
    assert out["shape"]["experts"] == 4
    for variant in ("dense", "moe"):  # Llama 3 and Qwen3 MoE
        tt, bm = out[variant]["torchtitan"], out[variant]["bench_model"]
        for side in (tt, bm):
            assert positive(side["step_s"], side["tokens_per_s"], side["peak_bytes"], side["first_loss"])
            assert side["tokens_per_s"] == pytest.approx(2 * 32 / side["step_s"])  # mbs 2 x seq 32
            # both start near ln(V) = ln(512) = 6.24 (random init, near-uniform logits), far from a broken loss
            assert 5.0 < side["first_loss"] < 8.0
        assert out[variant]["speed_ratio"] == pytest.approx(bm["tokens_per_s"] / tt["tokens_per_s"])
        assert out[variant]["memory_ratio"] == pytest.approx(bm["peak_bytes"] / tt["peak_bytes"])


def check_loss_options(out: dict) -> None:
    opts = out["options"]
    assert out["chosen"] == "fused_compiled" and out["shape"]["vocab"] == 512
    assert {"unchunked_eager", "unchunked_compiled", "chunked_ckpt", "fused", "fused_compiled_c32"} <= set(opts)
    assert all(positive(o["step_s"], o["peak_bytes"]) for o in opts.values())
    # every option computes the same loss (the same fp32 logits, summed in another order)
    assert all(o["loss"] == pytest.approx(opts["unchunked_eager"]["loss"], rel=1e-5) for o in opts.values())
    # 64 tokens in chunks of 16: the chunked losses never hold the whole (64, 512) fp32 logits' 131,072 bytes x 2
    assert opts["fused"]["peak_bytes"] < opts["unchunked_eager"]["peak_bytes"]
    assert opts["unchunked_compiled"]["time_vs_unchunked_compiled"] == 1.0
    assert isinstance(out["target"]["met"], bool)


def check_reliability(out: dict) -> None:
    assert [s["name"] for s in out["scenarios"]] == ["torn_trial_files"]
    assert out["faults_injected"] == 5  # five damaged trial files, each detected and re-run
    assert (out["results_lost"], out["duplicates"], out["misclassified"], out["bad_inputs_tried"]) == (0, 0, 0, 0)


def check_reserved_accuracy(out: dict) -> None:
    assert out["n_rows"] == {"2026-11-23": 14, "2026-11-25": 19, "2026-11-29": 11} and len(out["rows"]) == 44
    assert len(out["expandable_segments"]) == 3
    assert fraction(out["after_err_rms"], out["after_err_max_abs"], out["before_err_rms"])
    assert out["after_err_rms"] <= out["after_err_max_abs"]
    assert all(positive(r["measured_reserved_gib"], r["pred_reserved_gib"]) for r in out["rows"])
    folds = out["leave_one_lease_out"]  # each lease predicted by the fit on the other two
    assert set(folds) == set(out["n_rows"]) and all(fraction(f["median_abs"], f["max_abs"]) for f in folds.values())
    held = out["end_to_end_2026_11_25"]  # allocator-visible peak vs max_memory_reserved, end to end
    assert held["n_rows"] == len(held["rows"]) > 0 and fraction(
        held["reserved_err_median_abs"], held["alloc_err_max_abs"]
    )
    assert held["reserved_err_median_abs"] <= held["reserved_err_max_abs"]
    new = out["end_to_end_2026_11_29"]  # the 2026-11-29 lease, today's trainer
    assert new["n_rows"] == len(new["rows"]) == 11 and new["source"].endswith("h200_bench_model_2026-11-29.csv")
    tt = out["torchtitan_published"]["rows"]  # torchtitan's own published max reserved (8B FSDP 8 / 128)
    assert [r["measured_reserved_gib"] for r in tt] == [82.4, 67.0]
    assert all(
        positive(r["pred_allocated_gib"]) and r["pred_allocator_peak_gib"] >= r["pred_allocated_gib"] for r in tt
    )


def check_scale_down_accuracy(out: dict) -> None:
    # three dp4 tp2 mbs1 layouts (ZeRO 0/2/3) of the landscape composed from ONE 2-rank tp2 replica (dp 1, ZeRO 0)
    assert (out["n_layouts"], out["n_composed"], out["n_replicas_run"], out["available_gpus"]) == (3, 3, 1, 2)
    assert (out["replica_repeats"], out["n_replica_runs"]) == (1, 1)  # smoke: one run of the one replica
    # ... alone (the full run's default is 4 copies at once, as many ranks as the landscape), its load recorded
    load = out["replica_phase_load_1m"]
    assert out["replica_concurrency"] == 1 and load["waves"] == 1 and load["start"] >= 0.0 and load["end"] >= 0.0
    # the target: each layout's median over the three world-8 CPU landscapes (benchmarks/data/README.md), and each
    # landscape alone as the target next to it
    names = ["landscape_tiny_w8_cpu.parquet", "landscape_tiny_w8_cpu_rerun.parquet", "landscape_tiny_w8_cpu_r3.parquet"]
    assert out["landscape"] == names and sorted(out["per_landscape"]) == sorted(names)
    assert out["landscape_noise"]["runs"] == 3 and fraction(out["landscape_noise"]["pairwise_median_abs_diff"])
    assert fraction(out["best_ratio"]) and -1.0 <= out["spearman"] <= 1.0 and positive(out["median_abs_err"])
    assert out["median_abs_err"] == pytest.approx(sorted(abs(x["rel_err"]) for x in out["layouts"])[1])
    calib = out["cpu_comm_calibration"]  # the CPU-time alpha-beta measured by a 2-rank netbench in smoke mode
    assert calib["world"] == 2 and calib["alpha_cpu_s"] >= 0.0 and positive(calib["beta_cpu_bytes_per_s"])
    # the same netbench timed FSDP2's own all-gathers / reduce-scatters (g = 2, 2 sizes) and fitted them apart
    assert (
        (calib["fsdp_samples"], calib["fsdp_tp2_samples"]) == (4, 0)
        and calib["fsdp_alpha_cpu_s"] >= 0.0
        and positive(calib["fsdp_beta_cpu_bytes_per_s"])
    )
    for x in out["layouts"]:
        assert x["replica"] == {"num_gpus": 2, "tp": 2, "num_layers": 8, "grad_accum_steps": 4}
        assert x["rel_err"] == pytest.approx(x["composed_tok_s_gpu"] / x["measured_tok_s_gpu"] - 1.0)
        runs = sorted(x["measured_cpu_step_runs_s"])
        assert len(runs) == 3 and x["measured_cpu_step_s"] == pytest.approx(runs[1])
        # tok/s/GPU in CPU seconds: 16 sequences x 128 tokens per step over 8 ranks
        assert x["measured_tok_s_gpu"] == pytest.approx(16 * 128 / x["measured_cpu_step_s"] / 8)
        assert x["composed_host_tok_s_gpu"] <= x["composed_preset_comm_tok_s_gpu"]  # 8 ranks on 2 cores are slower
        assert x["composed_priced_comm_s"] > 0.0  # dp4: the data-parallel traffic is priced, never measured
        # the tp-2 replica counted its warm-up step's operations: its host dispatch is measured, its tp collectives
        # counted (bench_model/host_cost.py); dp 1 runs no FSDP2 collective to time
        assert 0 < x["replica_host_cpu_s"] < x["measured_cpu_step_s"] and x["replica_tp_comm_ops"] > 0
        assert "host" in x["measured_parts"] and x["replica_dp_comm_cpu_s"] is None
        # no dp rank in the replica: a ZeRO-2/3 target's FSDP2 traffic is priced at the FSDP2-issued links, a ZeRO-0
        # target's all-reduce at the bare ones (the two compositions then agree exactly)
        same = x["composed_tok_s_gpu"] == x["composed_bare_dp_tok_s_gpu"]
        assert same == (x["layout"]["zero_stage"] == 0) and x["composed_dp_comm_s"] > 0.0
        # the replica (pp 1) timed its embedding and head + loss apart (bench_model/ends_timing.py); a pp-1 target
        # holds both, so they are part of its measured stage
        ends = x["replica_ends_cpu_s"]
        assert (
            0 < ends["embed_s"] and 0 < ends["head_s"] and ends["embed_s"] + ends["head_s"] < x["measured_cpu_step_s"]
        )
        assert "ends" in x["measured_parts"]
    # the tiny-moe check (benchmarks/scale_down_moe.py) runs in the full mode only
    assert positive(out["replica_gpu_seconds"]) and out["moe_ep_check"] is None
    assert out["confirmed_best"] is None  # the robust pick re-runs finalists: not in smoke mode


def check_search_efficiency(out: list) -> None:
    assert [s["strategy"] for s in out] == ["grid", "random", "topk", "optuna", "halving", "topk_uncalibrated"]
    for s in out:
        curve = [v for _, v in s["curve"]]
        assert len(curve) == 20 and fraction(*curve) and curve == sorted(curve), s["strategy"]  # best-so-far
        assert s["num_layouts"] == 40 and s["seeds"] == 1 and positive(s["exhaustive_gpu_s"])
        assert s["best_ratio_at_20pct"] == s["min_ratio_at_20pct"] == curve[3]  # one seed: mean = min = 20% point
    assert curve[-1] == 1.0  # every layout tried: the best was found


def check_trainer_overhead(out: dict) -> None:
    assert (out["steps"], out["global_batch_size"], out["micro_batch_size"]) == (1, 2, 1)
    assert positive(out["bench_step_s"], out["plain_step_s"])
    assert out["ratio"] == pytest.approx(out["bench_step_s"] / out["plain_step_s"])


TINY_LLAMA = ["--hidden", "64", "--ffn", "160", "--heads", "4", "--kv-heads", "2", "--layers", "1"]


def check_sweep_store(out: dict) -> None:
    # 2 simulated trials; every other row is a pruned one, and they all live in ONE pruned.parquet (issue 28 item 2)
    assert out["rows"] == out["pruned_rows"] + 2 and out["pruned_rows"] > 0
    assert out["files"] == 2 + 2  # sweep.yaml, pruned.parquet and one file per simulated trial
    assert positive(out["megabytes"], out["sweep_s"], out["report_s"], out["export_s"])


def check_nanotron_layer_probe(out: dict) -> None:
    """nanotron's decoder layer (replica of branch bench_cluster @ a27e8fe8) at tp 2, REDUCE_SCATTER, mbs 2: what
    autograd saves per token against the profile's term, hand-computed (h 64, f 128, 4 heads MHA, c = 2): norms
    2(2*64 + 4)/2 = 132, gathered column inputs 2*2*64 = 256, attention 2(3*64 + 2*64 + 64 + 64)/2 + 4*4/2 = 456 (MHA
    qkv copy, k+v, out, o_proj's folded copy at mbs 2; fp32 lse), MLP 4*2*128/2 = 512: 1356 bytes. The measurement
    adds only cu_seqlens (3 int32) and the RNG state (2 int64): 28 bytes over 512 tokens. The loss's forward
    (resident bytes, fp32 tensors of 67 MB each): the caller's fp32 logits + the max-shifted fp32 copy, 8 bytes per
    logit (the profile before issue 26 item 5 said 4 + c = 6), plus per-token scraps."""
    assert out["layer"] == "replica" and out["tp_mode"] == "REDUCE_SCATTER"
    assert out["predicted_bytes_per_token"] == 132 + 256 + 456 + 512 == 1356
    assert out["measured_bytes_per_token"] == [1356 + 28 / 512] * 2
    assert out["predicted_loss_bytes_per_logit"] == 8.0
    assert all(7.9 < m < 8.5 for m in out["loss_peak_bytes_per_logit"]), out["loss_peak_bytes_per_logit"]


def check_pp_grad_release(out: dict) -> None:
    """pp 2 x dp 2, 4 blocks per pp rank, n_microbatches = pp: 1F1B's peak holds every fp32 accumulator of its rank;
    the one-round Interleaved1F1B peak (the backward of the rank's chunk with the embedding / the norm + output) holds
    that chunk's alone: (ends + 2 blocks) / (ends + 4 blocks) of the rank's, 0.623 at the script's shape."""
    assert (out["pp"], out["dp"], out["layers_per_pp_rank"], out["smoke"]) == (2, 2, 4, True)
    assert [(c["schedule"], c["n_microbatches"]) for c in out["cases"]] == [("1F1B", 2), ("Interleaved1F1B", 2)]
    d, f, v = out["shape"]["dim"], out["shape"]["ffn"], out["shape"]["vocab"]
    block = 4 * (4 * d * d + 3 * d * f + 2 * d)  # fp32 bytes: wq wk wv wo, w1 w2 w3, two RMSNorm weights
    ends = {0: 4 * v * d, 1: 4 * (v * d + d)}  # embedding; norm + output
    onef1b, inter = (c["ranks"] for c in out["cases"])
    assert [r["pp_rank"] for r in onef1b] == [r["pp_rank"] for r in inter] == [0, 0, 1, 1]
    for r in onef1b:
        assert r["stages"] == [r["pp_rank"]] and r["all_accumulator_bytes"] == ends[r["pp_rank"]] + 4 * block
        assert abs(r["accumulator_share"] - 1.0) < 1e-6 and positive(r["peak_bytes"])
    for r in inter:
        pp = r["pp_rank"]
        end_stage, mid_stage = (0, 2) if pp == 0 else (3, 1)
        chunk = {str(end_stage): ends[pp] + 2 * block, str(mid_stage): 2 * block}
        assert r["stages"] == [pp, pp + 2] and r["stage_accumulator_bytes"] == chunk and positive(r["peak_bytes"])
        assert r["peak_phase"].startswith(f"B s{end_stage} ")
        assert r["accumulated_grad_bytes_at_peak_by_stage"] == {**chunk, str(mid_stage): 0}  # the end chunk's alone
        expected = (ends[pp] + 2 * block) / (ends[pp] + 4 * block)
        assert r["accumulator_share"] == pytest.approx(expected, rel=1e-12) and r["accumulator_share"] < 0.75
    assert out["onef1b_accumulator_share"] == max(r["accumulator_share"] for r in onef1b)
    assert out["interleaved_one_round_accumulator_share"] == max(r["accumulator_share"] for r in inter) < 0.75
    ratios = [i["peak_bytes"] / o["peak_bytes"] for i, o in zip(inter, onef1b)]
    assert out["one_round_peak_ratio_by_rank"] == pytest.approx(ratios, abs=1e-4) and positive(out["wall_s"])


SMOKE: dict[str, tuple[list[str], Callable[[Any], None]]] = {
    "nanotron_layer_probe.py": (
        [
            "--hidden",
            "64",
            "--ffn",
            "128",
            "--heads",
            "4",
            "--kv-heads",
            "4",
            "--seq",
            "256",
            "--mbs",
            "2",
            "--vocab",
            "65536",
        ],
        check_nanotron_layer_probe,
    ),
    "cpu_adam.py": (["--params", "200000", "--chunks", "4", "--rounds", "1"], check_cpu_adam),
    "engine_overhead.py": (["--backends", "", "--repeats", "1", "--world-size", "1"], check_engine_overhead),
    "fp8_memory.py": (["--no-compile", "--hidden", "64", "--ffn", "256", "--seq", "32"], check_fp8_memory),
    "fp8_ratio.py": ([], check_fp8_ratio),
    "h200_bench_model.py": (["--moe-only"], check_h200_bench_model),
    "published_fit.py": (["--sources", "h200"], check_published_fit),
    "mlperf_speed.py": ([], check_mlperf_speed),
    "torchtitan_loss_peak.py": (
        ["--no-compile", "--tokens", "256", "--vocab", "512", "--chunks", "4", "--hidden", "64"],
        check_torchtitan_loss_peak,
    ),
    "torchtitan_sac_saved.py": (["--no-compile"], check_torchtitan_sac_saved),
    "sweep_store.py": (
        ["--gpus", "8", "--model", "llama-3.2-1b", "--cluster", "h100-sxm-80gb", "--max-trials", "2"],
        check_sweep_store,
    ),
    "memory_vs_torchtitan.py": (["--layouts", "fsdp8_none", "--small"], check_memory_vs_torchtitan),
    "model_accuracy.py": (["--quick"], check_model_accuracy),
    "residual_groups.py": (["--sources", "h200_bench", "--worst", "3"], check_residual_groups),
    "coefficient_pull.py": (["--sources", "h200_bench", "--top", "3"], check_coefficient_pull),
    "planner_speed.py": (["--gpus", "64", "--model", "llama-3.1-8b", "--repeat", "1"], check_planner_speed),
    "recompute_cost.py": (
        [*TINY_LLAMA, "--seq", "32", "--vocab", "128", "--rounds", "1", "--no-compile"],
        check_recompute_cost,
    ),
    "host_ops.py": (["--no-compile"], check_host_ops),
    "moe_block_profile.py": (
        [
            "--tokens",
            "64",
            "--seq",
            "32",
            "--hidden",
            "32",
            "--ffn",
            "16",
            "--experts",
            "8",
            "--topk",
            "2",
            "--rounds",
            "1",
        ],
        check_moe_block_profile,
    ),
    "vs_torchtitan_step.py": (
        [
            "--hidden",
            "32",
            "--ffn",
            "64",
            "--heads",
            "2",
            "--kv-heads",
            "1",
            "--vocab",
            "512",
            "--seq",
            "32",
            "--steps",
            "1",
            "--experts",
            "4",
            "--moe-ffn",
            "16",
        ],
        check_vs_torchtitan_step,
    ),
    "loss_options.py": (
        [
            "--tokens",
            "64",
            "--hidden",
            "16",
            "--vocab",
            "512",
            "--chunk",
            "16",
            "--chunk-choices",
            "32",
            "--rounds",
            "1",
        ],
        check_loss_options,
    ),
    "reliability.py": (["--scenarios", "torn_files"], check_reliability),
    "reserved_accuracy.py": ([], check_reserved_accuracy),
    "scale_down_accuracy.py": (["--smoke", "--workdir", "sd"], check_scale_down_accuracy),
    "search_efficiency.py": (["--seeds", "1"], check_search_efficiency),
    "trainer_overhead.py": (["--steps", "1", "--batch", "2", "--micro-batch", "1"], check_trainer_overhead),
    "pp_grad_release.py": (["--smoke"], check_pp_grad_release),
}


@pytest.mark.parametrize("script", [s for s in SCRIPTS if s not in OWN_TEST])
def test_smoke(script, tmp_path):
    assert script in SMOKE, f"benchmarks/{script} has no smoke case: add one to SMOKE in {Path(__file__).name}"
    args, check = SMOKE[script]
    check(run_script(script, *args, cwd=tmp_path))


def test_every_smoke_case_is_a_script_and_own_tests_exist():
    assert set(SMOKE) | set(OWN_TEST) <= set(SCRIPTS)
    for script, test_file in OWN_TEST.items():
        assert f"benchmarks/{script}" in (ROOT / test_file).read_text() and script not in SMOKE


def test_search_efficiency_calibration_figures(tmp_path):
    """The script's second mode: Spearman before/after calibration on the 40 measured layouts."""
    out = run_script("search_efficiency.py", "--calibration", "--seeds", "1", cwd=tmp_path)
    assert out["num_layouts"] == 40 and out["preset"] == "cpu"
    rhos = [out[k] for k in ("spearman_before", "spearman_after", "spearman_after_out_of_sample")]
    assert all(-1.0 <= r <= 1.0 for r in rhos)
    assert out["rms_log_error_after"] <= out["rms_log_error_before"]  # a least-squares fit never worsens its own fit
    assert fraction(out["fitted"]["matmul_efficiency"], out["fitted"]["comm_efficiency"])


def test_refit_smoke(tmp_path):
    """benchmarks/refit.py on the 9 h200_bench rows, writing into a copy of the presets (the repository's stay put)."""
    import shutil

    shutil.copytree(ROOT / "search_spaces" / "cluster", tmp_path / "cluster")
    before = (ROOT / "search_spaces" / "cluster" / "h200-141gb.yaml").read_text()
    out = run_script("refit.py", "--presets", str(tmp_path / "cluster"), "--sources", "h200_bench", cwd=tmp_path)
    check_refit(out)
    written = (tmp_path / "cluster" / "h200-141gb.yaml").read_text()
    assert "benchmarks/refit.py" in written and "9 public rows" in written and written != before
    assert (ROOT / "search_spaces" / "cluster" / "h200-141gb.yaml").read_text() == before


@pytest.mark.parametrize("flag, rc", [("--help", 0), ("--no-such-flag", 2)])
def test_refit_help_and_bad_flag_write_nothing(tmp_path, flag, rc):
    """`refit.py --help` once ran a whole refit and rewrote every preset: --help must print the usage and an unknown
    flag exit 2, both before anything is read or written."""
    presets = {p: p.read_text() for p in (ROOT / "search_spaces" / "cluster").glob("*.yaml")}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run(
        [sys.executable, str(BENCH / "refit.py"), flag], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert p.returncode == rc and "--no-accuracy" in (p.stdout + p.stderr)
    assert {q: q.read_text() for q in presets} == presets
