"""Loader of public measured runs (autotune.fitting.reference_runs): every row mapped or skipped with a reason, one
hand-checked row per source, and the fitted presets' accuracy on them (benchmarks/model_accuracy.py)."""

from __future__ import annotations

import numpy as np
import pytest

from autotune.fitting.reference_runs import (
    DATA,
    h200_layout_key,
    load_h200_bench,
    load_h200_bench_1125,
    load_h200_bench_1129,
    load_llmfoundry,
    load_megatron,
    load_nemo,
    load_public_moe,
    load_reference_runs,
    load_torchtitan,
)


def _rows(name: str) -> int:
    return sum(1 for _ in open(DATA / name)) - 1


def test_llmfoundry_mpt():
    runs, skipped = load_llmfoundry()
    assert (len(runs), len(skipped)) == (216, 0) and len(runs) + len(skipped) == _rows("llmfoundry_mpt_benchmarks.csv")
    assert sum(r.plan.fp8 == "tensorwise" for r in runs) == 7  # amp_fp8 (Transformer Engine FP8 linears)
    # composer/core/precision.py @ 02c872e: Precision.AMP_FP8 runs te.fp8_autocast (DelayedScaling): TE's casts
    assert {r.train.fp8_casts for r in runs if r.plan.fp8 == "tensorwise"} == {"te"}
    assert {r.train.fp8_casts for r in runs if r.plan.fp8 == "none"} == {None}
    # attention kernel per table: submit_benchmarks.py @ b2a43a147 defaults to --attn_impl triton (every table but the
    # large-scale one); the large-scale table's sweep.py @ 5e85bd62d runs flash for 1b / 3b / 7b / 70b (3 rows each)
    fa2 = [r for r in runs if r.train.attention_kernel == "fa2"]
    assert len(fa2) == 12 and {r.model.name for r in fa2} == {"MPT-1b", "MPT-3b", "MPT-7b", "MPT-70b"}
    assert all(r.plan.world_size >= 128 for r in fa2)
    assert {r.train.attention_kernel for r in runs if r not in fa2} == {"triton"}
    r = next(x for x in runs if x.row == 0)  # H100 large-scale table, first row: MPT-70b on 512 GPUs
    assert (r.model.num_layers, r.model.hidden_size, r.model.num_heads, r.model.vocab_size) == (80, 8192, 64, 50368)
    assert r.cluster == "h100-sxm-80gb" and r.train.seq_len == 2048
    assert (r.plan.dp, r.plan.zero_stage, r.plan.micro_batch_size, r.plan.grad_accum_steps, r.plan.recompute) == (
        512,
        3,
        8,
        1,
        "full",
    )
    assert r.measured_tokens_per_s_per_gpu == 1007
    # shape check against the table's exact parameter count 64,862,437,376 (which includes the 2048 x 8192 learned
    # positional embedding of the benchmark config): within 0.1% (MPT has no biases, our GPT block has)
    assert r.model.num_params() + 2048 * 8192 == pytest.approx(64_862_437_376, rel=1e-3)


def test_megatron_narayanan():
    runs, skipped = load_megatron()
    assert (len(runs), len(skipped)) == (31, 2) and len(runs) + len(skipped) == _rows("megatron_lm_narayanan2021.csv")
    assert all("strong-scaling" in s.reason for s in skipped)
    # README 2024 H100 table (--tp-comm-overlap): plan.tp_overlap with SP wherever tp > 1; at TP=1 Megatron's
    # validate_args turns SP off, so that run cannot have overlapped TP
    new = {x.row: x for x in runs if x.model.name.endswith("-2024")}
    assert sorted(new) == list(range(22, 31)) and not new[22].plan.tp_overlap
    assert all(x.plan.tp_overlap and x.plan.sequence_parallel for x in new.values() if x.plan.tp > 1)
    g = new[25]  # GPT 32B: 48 layers, h 7168, TP 8 on 384 GPUs, batch 192, 459.6 TFLOP/s per GPU
    assert (g.plan.dp, g.plan.tp, g.plan.pp, g.plan.zero_stage, g.plan.grad_accum_steps) == (48, 8, 1, 1, 4)
    # Megatron-LM 2024 num_floating_point_operations (MHA, 4h GeLU MLP): 72 l h^2 (1 + s/6h + V/12lh) per token
    # = 72 * 48 * 7168^2 * (1 + 0.095238 + 0.031746) = 2.00119e11 -> 459.6e12 / 2.00119e11 = 2296.6 tok/s/GPU
    assert g.measured_tokens_per_s_per_gpu == pytest.approx(2296.6, rel=1e-3)
    r = next(x for x in runs if x.row == 0)  # Table 1, 1.7B: 137 TFLOP/s per GPU on 32 A100s
    assert (r.plan.dp, r.plan.tp, r.plan.pp, r.plan.grad_accum_steps) == (32, 1, 1, 16)
    # Narayanan 2021 Eq. 3 per token: 96 l h^2 (1 + s/6h + V/16lh), l=24, h=2304, s=2048, V=51200
    # = 12,230,590,464 * (1 + 0.148148 + 0.057870) = 1.47503e10 FLOPs -> 137e12 / 1.47503e10 = 9288 tok/s/GPU
    assert r.measured_tokens_per_s_per_gpu == pytest.approx(9288, rel=1e-3)
    t1 = next(x for x in runs if x.row == 8)  # 530B: TP 8 x PP 35 on 2520 GPUs (Table 1)
    assert (t1.plan.tp, t1.plan.pp, t1.plan.dp, t1.model.num_layers) == (8, 35, 9, 105)
    # Table 2's ZeRO-3 rows ran DeepSpeed's ZeRO-3 (Narayanan et al. 2021 Sec 5.2): the deepspeed profile prices them
    z3 = [x for x in runs if x.plan.zero_stage == 3]
    assert sorted(x.row for x in z3) == list(range(10, 16))  # CSV lines 12-17
    assert all(x.train.framework == "deepspeed" and (x.plan.tp, x.plan.pp) == (1, 1) for x in z3)
    assert {x.train.framework for x in runs if x.plan.zero_stage != 3} == {"megatron"}


def test_nemo_rows_are_all_mapped_or_listed_with_reasons():
    runs, skipped = load_nemo()
    # 2 of the skips: NeMo 26.06.01's GPT-OSS MXFP8 rows, footnoted as a kernel regression (nemo_recipes.KNOWN_REGRESSION);
    # the DeepSeek-V3 "(w/ MTP)" row runs (train.mtp_num_layers, tests/unit/test_pp_layout.py), and Nemotron-340B
    # (grouped K/V in the "gpt" block, tests/unit/test_nemo1_optim.py)
    assert (len(runs), len(skipped)) == (223, 107) and len(runs) + len(skipped) == _rows(
        "nemo_megatron_bridge_performance_summary.csv"
    )
    by_row = {s.row: s.reason for s in skipped}
    assert "Nemotron_3" in by_row[60] and sum("Nemotron_3" in r for r in by_row.values()) == 53  # hybrid Mamba
    assert sum("fine-tuning" in r for r in by_row.values()) == 16  # SFT / LoRA stay out
    run = {r.row: r for r in runs}
    # GPT-OSS 120B on 64 H100, BF16 (Megatron-Bridge 26.04.01): TP1 PP4 EP8, mbs 1, gbs 1280 -> dp 16, accumulation 80
    g = run[129]
    assert g.model.name == "gpt-oss-120b" and g.model.num_experts == 128 and g.model.moe_router_topk == 4
    assert (g.plan.dp, g.plan.pp, g.plan.ep, g.plan.grad_accum_steps, g.plan.fp8) == (16, 4, 8, 80, "none")
    assert g.model.active_matmul_params() == pytest.approx(5.1e9, rel=0.02)  # model card: 5.1B active parameters
    # 25.09 GB200 Llama3 70B, "not stated" precision, cells "1 (2)": the first value is the row's layout -> FP8-CS
    n = run[296]
    assert (n.plan.tp, n.plan.pp, n.plan.zero_stage, n.plan.fp8) == (1, 1, 3, "tensorwise")
    # token-dropping Qwen3 30B: the dropless preset with capacity factor 1
    assert run[299].model.moe_capacity_factor == 1.0 and run[299].model.name == "qwen3-30b-a3b"
    assert all(r.plan.compile for r in runs)  # Megatron-Core's fused kernels (nemo_runs module doc)
    # the dispatcher each row's Megatron-Bridge perf recipe names (nemo_runs.DISPATCHER @ 067f987d): DeepSeek-V3 MXFP8
    # on 256 B200 at the EP32 layout of deepseek_v3_pretrain_256gpu_b200_fp8mx_config (moe_flex_dispatcher_backend
    # "deepep"); at PP16 EP8 (the _large_scale config, no backend) alltoall; HybridEP on GB300 (the full-iteration
    # MXFP8 helper); Qwen3-235B BF16 on B200 (backend None, "alltoall"); GPT-OSS on H100 (silent: alltoall)
    assert (run[124].plan.ep, run[124].plan.moe_dispatcher) == (32, "deepep")
    # row 170 (NeMo 26.04) at PP16 EP8 ran its release's DEEPSEEK_V3_PRETRAIN_CONFIG_B200_FP8_MX_V1 @ v0.4.2 (HybridEP;
    # nemo_releases.RELEASE_DISPATCHER), not 067f987d's backend-less _large_scale config
    assert (run[170].plan.ep, run[170].plan.moe_dispatcher) == (8, "hybridep")
    assert run[52].cluster == "gb300-nvl72" and run[52].plan.moe_dispatcher == "hybridep"
    assert run[129].plan.moe_dispatcher == "alltoall"
    # NeMo 25.09 DeepSeek-V3 on 1024 H100 (TP2 PP8 VP4 EP64): its release's runner enabled DeepEP and the EP overlap
    assert (run[309].plan.moe_dispatcher, run[309].plan.ep_overlap, run[309].plan.vpp) == ("deepep", True, 4)
    # 91 before the two 26.06.01 regression rows left and the 26.02 B300 row took its release's alltoall
    # (88), then each release's backend (nemo_releases.RELEASE_DISPATCHER): 3 DeepSeek-V3 B200 PP16 rows HybridEP (v0.3.0 -
    # v0.4.2), 6 Qwen3 B200 / B300 rows of releases naming no flex backend alltoall (rows 260, 287, 227, 264, 138, 265),
    # the 26.02 H100 Qwen3-30B row DeepEP (row 261)
    assert [r.plan.moe_dispatcher for r in runs].count("hybridep") == 88 + 3 - 6 - 1


def test_h200_bench_2026_11_29():
    # gpu_validation ran mbs x 2 (--grad-accum) per step: the layout column's global batch
    runs, skipped = load_h200_bench_1129()
    assert (len(runs), skipped) == (11, []) and len(runs) == _rows("h200_bench_model_2026-11-29.csv")
    q = next(x for x in runs if x.row == 5)  # qwen3moe_4l_mbs2_c: 4 layers, mbs 2, compiled, 68,953 tok/s
    assert (q.model.num_layers, q.plan.micro_batch_size, q.plan.grad_accum_steps, q.plan.compile) == (4, 2, 2, True)
    assert q.train.global_batch_size == 4 and round(q.measured_tokens_per_s_per_gpu) == 68953
    assert [x.plan.fp8 for x in runs if x.row in (2, 9, 10)] == ["tensorwise", "tensorwise", "rowwise"]
    key = h200_layout_key  # the same layout spelled by both leases' scripts
    assert (
        key("model=a train.seq_len=8 plan.micro_batch_size=2", True)
        == key("train.seq_len=8 model=a train.global_batch_size=4 plan.micro_batch_size=2 plan.recompute=none", True)
        != key("model=a train.seq_len=8 plan.micro_batch_size=2", False)
    )


def test_h200_bench_model():
    runs, skipped = load_h200_bench()
    assert (len(runs), len(skipped)) == (9, 11)  # the 2 compiled bench_model rows map onto plan.compile
    r = next(x for x in runs if x.row == 0)  # 1b_mbs1: llama-3.2-1b seq 4096 gbs 2 mbs 1, 37,395 tok/s
    assert r.model.name == "llama-3.2-1b" and r.model.num_layers == 16 and r.cluster == "h200-141gb"
    assert (r.plan.micro_batch_size, r.plan.grad_accum_steps, r.plan.recompute) == (1, 2, "none")
    assert r.measured_tokens_per_s_per_gpu == 37395
    c = next(x for x in runs if x.row == 3)  # 1b_mbs2_compile: mbs 2, compile True, 50,954 tok/s
    assert c.plan.compile and c.plan.micro_batch_size == 2 and c.measured_tokens_per_s_per_gpu == 50954
    assert not r.plan.compile and any("oom" in s.reason for s in skipped)


def test_h200_bench_2026_11_25():
    runs, skipped = load_h200_bench_1125()
    # 24 rows: 2 OOM, 2 of the older trainer (commit 46ae7e1), 1 HF transformers reference listed with reasons,
    # the 12 whose layouts the 2026-11-29 lease measured again (11 cases; the 2026-11-25 file holds 1b_mbs4_none_c
    # twice), and 3b_mbs4_sel_c, the compiled selective that graph-broke before 1fb4933
    assert (len(runs), len(skipped)) == (6, 18) and len(runs) + len(skipped) == _rows("h200_bench_model_2026-11-25.csv")
    again = [s.row for s in skipped if "later H200 lease" in s.reason]
    assert again == [0, 1, 6, 8, 9, 10, 12, 13, 14, 15, 16, 21]
    assert [s.row for s in skipped if "before 1fb4933" in s.reason] == [7]
    q = next(x for x in runs if x.row == 11)  # qwen3moe_4L_mbs2_bal_e: Qwen3-30B-A3B cut to 4 layers, balanced, 52,980
    assert (q.model.name, q.model.num_layers, q.model.num_experts, q.train.moe_routing) == (
        "qwen3-30b-a3b",
        4,
        128,
        "balanced",
    )
    assert (q.plan.micro_batch_size, q.plan.grad_accum_steps, q.plan.compile) == (2, 2, False)
    assert q.measured_tokens_per_s_per_gpu == 52980
    e = next(x for x in runs if x.row == 3)  # 3b_mbs1_none_e: not measured again, it stays
    assert (e.plan.micro_batch_size, e.plan.recompute, e.plan.compile) == (1, "none", False)


def test_public_moe_blackwell_rows():
    runs, skipped = load_public_moe()
    assert (len(runs), len(skipped)) == (30, 5) and len(runs) + len(skipped) == _rows(
        "moe_blackwell_public_2026-11.csv"
    )
    # MXFP8 on a subset of GEMMs (2), fp8-blockwise (1), Qwen3-Next (Gated DeltaNet), the transcriber's duplicate r047
    reasons = sorted(s.reason.split(":")[0].split("=")[0] for s in skipped)
    assert reasons == ["model", "notes", "precision", "precision", "precision"]
    run = {r.row: r for r in runs}
    # r015: torchao's Llama-4-Scout cut to 2 layers on 4 B200, FSDP 4 x EP 4, local batch 8, no AC, 49,381 tok/s/GPU;
    # HF config.json: every layer MoE, 16 experts of 8192 top-1 + a shared expert of 8192 (search_spaces/model)
    s = run[5]
    assert (s.model.num_layers, s.model.num_moe_layers, s.model.num_experts, s.model.moe_router_topk) == (2, 2, 16, 1)
    assert s.model.moe_shared_expert_ffn_hidden_size == 8192 and s.model.hidden_size == 5120
    assert (s.plan.dp, s.plan.ep, s.plan.micro_batch_size, s.plan.grad_accum_steps, s.plan.recompute) == (
        4, 4, 8, 1, "none"
    )  # fmt: skip
    # r052: Mixtral-8x22B token drop (capacity 1.0) on 128 H100, TP2 PP8 VPP7 EP8, the yaml's --tp-comm-overlap
    m = run[32]
    assert (m.model.num_layers, m.model.moe_capacity_factor, m.plan.vpp, m.plan.tp_overlap) == (56, 1.0, 7, True)
    assert run[29].model.moe_capacity_factor is None and 140e9 < m.model.num_params() < 141e9  # 141B (model card)
    # r043: Qwen3-235B on 256 GB200, TP1 PP8 EP8 DP32, mbs 1, gbs 8192 -> 256 micro-batches, 5,066.4 tok/s/GPU
    g = run[23]
    assert (g.cluster, g.plan.dp, g.plan.pp, g.plan.ep, g.plan.grad_accum_steps) == ("gb200-nvl72", 32, 8, 8, 256)
    assert g.train.framework == "megatron" and g.train.moe_routing == "balanced" and g.plan.zero_stage == 1
    assert g.measured_tokens_per_s_per_gpu == pytest.approx(5066.4)
    # the table's dispatcher column: HybridEP on GB200 (r043), DeepEP on H100 (r029), A2A (r032), Mixtral alltoall
    assert (g.plan.moe_dispatcher, run[9].plan.moe_dispatcher, run[12].plan.moe_dispatcher) == (
        "hybridep", "deepep", "alltoall"
    )  # fmt: skip
    # the CUDA graph scopes of the cited commands (Megatron-MoE-ModelZoo @ e8650517d run_gb300_235b.sh / run_gb200_235b.sh
    # `--cuda-graph-scope attn moe_router moe_preprocess`, run_h100_235b.sh `moe_router moe_preprocess`); r045 none
    assert [run[i].train.cuda_graphs for i in (23, 24, 25, 26, 28)] == [
        "attn_moe",
        "attn_moe",
        "none",
        "attn_moe",
        "moe",
    ]
    # r014: torchao's Llama-3-8B rowwise on 8 power-limited B200 (torchtitan FSDP2), 8,640.5 tok/s/GPU
    r = run[4]
    assert (r.plan.fp8, r.plan.zero_stage, r.plan.dp, r.train.framework) == ("rowwise", 3, 8, "torchtitan")


def test_torchtitan_benchmark_rows():
    """pytorch/torchtitan benchmarks/*.md: 18 cells of llama3_h100_202412, 12 of asyncTP_llama3_h100_2025-06, 2 of
    llama3-8b_h200_202506 (benchmarks/data/measured/torchtitan_benchmarks.csv), all mapped."""
    runs, skipped = load_torchtitan()
    assert (len(runs), len(skipped)) == (32, 0) == (_rows("torchtitan_benchmarks.csv"), 0)
    run = {r.row: r for r in runs}
    # Table 5 'Interleaved 1F1B': 405B on 512 H100, FSDP 8 TP 8 PP 8, local batch 32 (global 256), compile, Float8,
    # async TP, full AC, 128 tok/s/GPU; micro-batches = the pp degree (8, torchtitan's default) -> 4 sequences each,
    # 2 stages per rank (generate_split_points' default for a multi-stage schedule)
    t = run[13]
    assert (t.plan.dp, t.plan.tp, t.plan.pp, t.plan.vpp, t.plan.cp) == (8, 8, 8, 2, 1)
    assert (t.plan.micro_batch_size, t.plan.grad_accum_steps, t.train.global_batch_size) == (4, 8, 256)
    assert (t.plan.pp_schedule, t.plan.fp8, t.plan.tp_overlap, t.plan.recompute, t.plan.zero_stage) == (
        "interleaved_1f1b", "tensorwise", True, "full", 3
    )  # fmt: skip
    assert (t.cluster, t.train.framework, t.measured_tokens_per_s_per_gpu) == ("h100-hbm2e-96gb", "torchtitan", 128.0)
    # Table 2 'FSDP 1, CP 8': 8B at seq 262144 on 8 GPUs, local batch 1, 548 tok/s/GPU
    c = run[6]
    assert (c.plan.dp, c.plan.cp, c.train.seq_len, c.train.global_batch_size, c.plan.compile) == (1, 8, 262144, 1, True)
    # Table 1 'FSDP': no compile, no Float8, selective (op) AC, local batch 2; the H200 rows on the H200 preset
    f = run[0]
    assert (f.plan.compile, f.plan.fp8, f.plan.recompute, f.plan.micro_batch_size) == (False, "none", "selective", 2)
    assert {r.cluster for r in runs if r.row >= 30} == {"h200-141gb"} and run[31].plan.dp == 64


def test_torchtitan_memory_rows_for_published_fit():
    """The same rows as benchmarks/published_fit.py's `torchtitan` source: memory where the page prints it (Tables 1-6
    of llama3_h100_202412 and the H200 page, max_memory_reserved GiB; the asyncTP page prints none)."""
    from autotune.fitting.published_runs import LOADERS

    lays, skipped = LOADERS["torchtitan"]()
    assert (len(lays), skipped) == (32, []) and sum(x.measured_gib is not None for x in lays) == 20
    lay = {x.row: x for x in lays}
    assert (lay["13"].measured_gib, lay["13"].framework, lay["20"].measured_gib) == (72.7, "torchtitan", None)


def test_h200_compiled_selective_rows_ran_the_old_selective():
    """The first two H200 leases ran the compiled selective of the trainer before 1fb4933 (RecomputeInBackward
    regions), which saved nothing under compile: in the csv its allocated peak equals compiled none's, so published_fit
    prices those rows as none and names the difference (autotune/fitting/published_runs.py `_h200_layout`). The
    2026-11-29 lease ran today's (one checkpoint around SwiGLU): it saves, and is priced as selective."""
    import pandas as pd

    from autotune.fitting.published_runs import LOADERS, OLD_COMPILED_SELECTIVE
    from autotune.fitting.run_types import DATA

    df = pd.read_csv(DATA / "h200_bench_model_2026-11-25.csv").set_index("case")
    assert df.peak_alloc_gib["1b_mbs4_sel_c"] == df.peak_alloc_gib["1b_mbs4_none_c"] == 41.6
    assert df.peak_alloc_gib["3b_mbs2_sel_c"] == df.peak_alloc_gib["3b_mbs2_none_c"] == 75.69
    lay = {x.row: x for x in LOADERS["h200"]()[0]}
    sel = lay["3b_mbs4_sel_c"]  # 2026-11-25; its 1b / 3b mbs 2 pairs above were measured again on 2026-11-29
    assert (sel.plan.recompute, sel.plan.compile, sel.recipe) == ("none", True, OLD_COMPILED_SELECTIVE)
    assert "1b_mbs4_sel_c" not in lay and "3b_mbs2_sel_c" not in lay
    new = pd.read_csv(DATA / "h200_bench_model_2026-11-29.csv").set_index("case")
    assert new.peak_alloc_gib["1b_mbs4_sel_c"] < new.peak_alloc_gib["1b_mbs4_none_c"] - 3.5  # 36.9 vs 40.6 GiB
    sel = lay["1b_mbs4_sel_c@2026-11-29"]
    assert (sel.plan.recompute, sel.plan.compile, sel.recipe) == ("selective", True, "")
    assert (lay["3b_mbs1_full_e"].plan.recompute, lay["3b_mbs1_full_e"].recipe) == ("full", "")


def test_fitted_presets_reproduce_benchmark_accuracy():
    # benchmarks/model_accuracy.py in-sample figures with the fitted presets (see the presets' comments); a change to
    # the model or presets that loses accuracy fails here
    from autotune.fitting.fit_reference import load_preset, predict

    runs, _ = load_reference_runs()
    clusters = {r.cluster: load_preset(r.cluster) for r in runs}
    meas = np.array([r.measured_tokens_per_s_per_gpu for r in runs])
    err = np.abs(predict(runs, clusters) - meas) / meas
    assert np.median(err) <= IN_SAMPLE_MEDIAN + 0.01
    assert np.percentile(err, 90) <= IN_SAMPLE_P90 + 0.03


# benchmarks/model_accuracy.py after `benchmarks/refit.py`, 2026-11-29 session 12 (558 rows: + the 2026-11-29 H200
# lease, its 2026-11-25 layouts out; the loss kernels and bench_model's compiled selective priced as they run)
IN_SAMPLE_MEDIAN, IN_SAMPLE_P90 = 0.0599, 0.1896


def test_model_accuracy_before_figures_still_compute():
    """benchmarks/model_accuracy.py's `before` runs the model and presets of its BEFORE_COMMIT on today's loader; a
    plan field added later (compile) once made it print `before: null`. The old model's median error is the 21.2%
    reported when the fitted model landed."""
    import importlib.util
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("model_accuracy", root / "benchmarks" / "model_accuracy.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    have = subprocess.run(["git", "-C", str(root), "cat-file", "-e", mod.BEFORE_COMMIT], capture_output=True)
    if have.returncode != 0:
        pytest.skip(f"commit {mod.BEFORE_COMMIT} is not in this clone's history (shallow clone)")
    runs, _ = load_reference_runs()
    runs = [runs[i] for i in mod.before_rows(runs)]  # the rows the old model expresses (no NeMo, no FP8): 240
    old = mod.before_predictions([(r.source, r.row) for r in runs])
    assert old is not None and len(old) == len(runs) == 240 and (old > 0).all()
    meas = np.array([r.measured_tokens_per_s_per_gpu for r in runs])
    assert np.median(np.abs(old - meas) / meas) == pytest.approx(0.2117, abs=0.002)


def test_power_limited_rows_are_scored_not_fitted():
    """torchao's Llama-3-8B table ran on "*power limited* B200" with neither cap nor clocks stated (pytorch/ao
    docs/source/workflows/training.md @ 36027d82): exactly those 5 rows (r010-r014) carry a fit_excluded reason, every
    other row none; fit_all gives the same coefficients with them appended as without them."""
    import dataclasses

    from autotune.fitting.fit_reference import FAMILIES, fit_all, load_preset

    runs, _ = load_reference_runs()
    excluded = [r for r in runs if r.fit_excluded]
    assert [(r.source, r.row, r.cluster, r.model.name) for r in excluded] == [
        ("moe_public", i, "b200", "llama-3.1-8b") for i in range(5)
    ]
    assert all("power limited" in r.fit_excluded for r in excluded)
    clusters = {p: load_preset(p) for presets in FAMILIES.values() for p in presets}
    base = load_h200_bench()[0]
    # the same H200 rows again, marked excluded and with a tenfold speed: the fit must not see them
    marked = [
        dataclasses.replace(r, fit_excluded="test", measured_tokens_per_s_per_gpu=10 * r.measured_tokens_per_s_per_gpu)
        for r in base
    ]
    assert fit_all(base + marked, clusters) == fit_all(base, clusters)
