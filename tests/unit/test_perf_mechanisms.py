"""Issue 25's dense-speed mechanisms by hand: attention's sequence-length roofline (FlashAttention-3 figures),
hierarchical collectives across NVLink domains with NCCL's ring/tree latency, the per-framework data-parallel
overlaps, rowwise FP8, and the coefficient table / preset writer of the refit (benchmarks/refit.py)."""

from __future__ import annotations

import dataclasses
import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

from autotune.core.errors import SpecError
from autotune.core.model import ModelSpec
from autotune.core.plan_arrays import FP8_CODE, arrays_from_plans
from autotune.core.types import ClusterSpec, ParallelPlan, TrainSpec
from autotune.fitting.coefficients import COEFFICIENTS, at_bound
from autotune.fitting.fit_reference import FAMILIES, load_preset
from autotune.predict.collectives import _link, dp_all_reduce_s, dp_ring_s, ring_latency_s, ring_s
from autotune.predict.frameworks import PROFILES
from autotune.predict.perf import perf_arrays
from autotune.predict.perf_terms import (
    attention_passes,
    attention_s,
    attention_shape_factor,
    fp8_cast_bytes,
    fsdp_exposed_s,
    linear_efficiency_factor,
    softmax_exp_s,
    softmax_exps,
    te_fp8_cast_bytes,
    triton_attention_factor,
)

ROOT = Path(__file__).resolve().parents[2]


def job():
    from autotune.spec.config import load_config

    cfg = load_config(["model=llama-3.1-8b", "cluster=h100-sxm-80gb"])
    return cfg.model, cfg.train, cfg.cluster


def test_attention_sequence_factor_reproduces_flashattention3_curve():
    # FA3 on H100, head dim 128, BF16 forward (Shah et al. 2024 Fig. 4): 467 TFLOP/s at 512, 648 at 16k, 625 at 2k.
    # The sequence part s/(s+207) must give the published 512/16k ratio; the causal diagonal block adds s/(s+128).
    seq = lambda s: s / (s + 207.0)  # noqa: E731
    assert seq(512) / seq(16384) == pytest.approx(467 / 648, rel=0.005)
    assert seq(2048) / seq(16384) == pytest.approx(625 / 648, rel=0.07)  # the form's error at 2k: 6%
    f = attention_shape_factor(np.array([512, 16384]))
    assert f == pytest.approx([512 / 719 * 512 / 640, 16384 / 16591 * 16384 / 16512])


def test_nvl72_data_parallel_group_is_hierarchical_across_racks():
    gb200 = load_preset("gb200-nvl72")
    # 512 ranks, stride 1 (tp = 1): 72 ranks per NVLink domain each send 1/72 of the data over their own NIC:
    # min(72 * 50 GB/s, 900 GB/s NVLink) = 900 GB/s bus bandwidth (before: 4 GPUs per tray -> 200 GB/s)
    bw, lat = _link(gb200, np.array(512), 1)
    assert float(bw) == pytest.approx(900e9 * gb200.comm_efficiency)
    assert float(lat) == gb200.inter_node_latency_s
    # tp = 8: 9 ranks of the group per rack -> 9 NICs' worth, 450 GB/s
    bw8, _ = _link(gb200, np.array(512 * 8), 8)
    assert float(bw8) == pytest.approx(9 * 50e9 * gb200.comm_efficiency)


def test_all_reduce_latency_is_the_faster_of_ring_and_tree():
    gb200 = load_preset("gb200-nvl72")
    a_nv, a_ib = gb200.intra_node_latency_s, gb200.inter_node_latency_s
    t = float(dp_all_reduce_s(gb200, 512, 0.0, 512, 1))  # latency only (0 bytes)
    # tree: chain of 72 ranks in each rack both ways + 2 log2(512/72) hops across racks; ring: 2*511 hops
    tree = 2 * 71 * a_nv + 2 * math.log2(512 / 72) * a_ib
    assert t == pytest.approx(min(tree, 2 * 511 * a_ib)) and t == pytest.approx(tree)
    # two ranks in one domain: the ring's 2 NVLink hops are the faster
    assert float(dp_all_reduce_s(gb200, 2, 0.0, 2, 1)) == pytest.approx(2 * a_nv)


def test_ring_latency_follows_nccl_tuning_model():
    # NVIDIA/nccl src/graph/tuning.cc (ring): nsteps - nInterSteps hops at the intra-node latency, nInterSteps at the
    # net latency; all-gather n-1 steps, nNodes-1 inter; all-reduce twice both. 1,536 ranks in 192 8-GPU nodes at
    # 5 us / 10 us: 1,344 * 5 + 191 * 10 = 8,630 us
    assert float(ring_latency_s("all_gather", 1536, 8, 5e-6, 1e-5)) == pytest.approx(8.63e-3)
    assert float(ring_latency_s("reduce_scatter", 1536, 8, 5e-6, 1e-5)) == pytest.approx(8.63e-3)
    assert float(ring_latency_s("all_reduce", 1536, 8, 5e-6, 1e-5)) == pytest.approx(2 * 8.63e-3)
    assert float(ring_latency_s("all_gather", 8, 8, 5e-6, 1e-5)) == pytest.approx(7 * 5e-6)  # one node: NVLink hops
    assert float(ring_latency_s("all_gather", 1, 8, 5e-6, 1e-5)) == 0.0
    a100 = load_preset("a100-80gb")
    a_nv, a_ib = a100.intra_node_latency_s, a100.inter_node_latency_s
    # `count` collectives of the same total bytes: the bandwidth term once, the latency `count` times
    one, four = (float(dp_ring_s(a100, "all_gather", 1536, 1e9, 1536, 1, k)) for k in (1, 4))
    assert four - one == pytest.approx(3 * (1344 * a_nv + 191 * a_ib))
    bw, _ = _link(a100, np.array(1536), 1)
    assert one == pytest.approx(1535 / 1536 * 1e9 / float(bw) + 1344 * a_nv + 191 * a_ib)


def test_zero3_collective_counts_per_framework():
    # GPT-3 175B block (12 h^2 + 13 h = 1.812e9 elements): DeepSpeed ZeRO-3 gathers per linear submodule (qkv, proj,
    # fc1, fc2: 4; each above the 5e7 prefetch bucket) and reduce-scatters 5e8-element buckets: 1.812e9 / 5e8 = 3.62
    gpt = ModelSpec("gpt-175b", 96, 12288, 49152, 96, 96, 51200, block="gpt")
    layer = 12 * 12288**2 + 13 * 12288
    ag, rs = PROFILES["deepspeed"].fsdp_collectives_per_block(gpt, layer)
    assert float(ag) == 4.0 and float(rs) == pytest.approx(layer / 5e8)
    # a small Llama block (7 linears) of 1.2e8 elements: the prefetch bucket coalesces it into ceil(1.2e8/5e7) = 3
    ag_small, _ = PROFILES["deepspeed"].fsdp_collectives_per_block(MODEL, 1.2e8)
    assert float(ag_small) == 3.0
    # FSDP2 (torchtitan, bench_model): one unit per block, one all-gather and one reduce-scatter
    for name in ("torchtitan", "bench_model"):
        assert tuple(map(float, PROFILES[name].fsdp_collectives_per_block(gpt, layer))) == (1.0, 1.0)
        assert not PROFILES[name].recompute_regathers()
    # DeepSpeed ZeRO-3 under full recompute: the recomputed forward gathers and releases, the backward gathers again.
    # 4 blocks, gather 1 s, reduce-scatter 2 s, forward 3 s, backward 2 s per block, nothing hidden (overlap 0):
    # forward 1 + 3 * 1 = 4 s; backward 4 * (2 * 1 + 2) = 16 s (one gather per backward: 4 * 3 = 12 s)
    assert PROFILES["deepspeed"].recompute_regathers()
    assert float(fsdp_exposed_s(4, 1.0, 2.0, 3.0, 2.0, 3, 0.0, 2.0)) == 20.0
    assert float(fsdp_exposed_s(4, 1.0, 2.0, 3.0, 2.0, 3, 0.0)) == 16.0


MODEL = ModelSpec("m", 8, 1024, 4096, 16, 4, 32000)
CLUSTER = ClusterSpec(
    name="c",
    device_memory_bytes=80 * 2**30,
    peak_flops_bf16=1e15,
    peak_flops_fp32=1e14,
    gpus_per_node=8,
    intra_node_bw_bytes_per_s=4e11,
    intra_node_latency_s=1e-5,
    inter_node_bw_bytes_per_s=5e10,
    inter_node_latency_s=2e-5,
    matmul_efficiency=0.5,
    comm_efficiency=1.0,
    dp_overlap=1.0,
    hbm_bw_bytes_per_s=2e12,
    memory_efficiency=0.5,
    attention_efficiency=0.25,
    pp_microbatch_overhead_s=1e-4,
)


def test_framework_overlaps_price_zero1_communication():
    """ZeRO-1 on 8 ranks of one node (tp 1): DeepSpeed (overlap_comm off for stage 1) exposes its gradient
    reduce-scatter and the parameter all-gather in full; Megatron (--overlap-grad-reduce, --overlap-param-gather)
    hides both behind the backward and the next forward (dp_overlap = 1: nothing left at this size)."""
    plan = ParallelPlan(dp=8, zero_stage=1, micro_batch_size=1, grad_accum_steps=1)
    arr = arrays_from_plans([plan])
    psi = MODEL.num_params()

    def dp_s(framework: str) -> float:
        train = TrainSpec(seq_len=2048, global_batch_size=8, framework=framework)
        return float(perf_arrays(arr, MODEL, train, CLUSTER)["dp_comm_s"][0])

    rs = float(ring_s("reduce_scatter", 8, psi * 4, 4e11, 1e-5))  # fp32 grads
    ag = float(ring_s("all_gather", 8, psi * 4, 4e11, 1e-5))  # fp32 params
    assert dp_s("deepspeed") == pytest.approx(rs + ag)
    assert dp_s("megatron") == pytest.approx(0.0, abs=1e-12)
    assert dp_s("bench_model") == pytest.approx(ag)  # bench_model hides its all-reduce, gathers after the step
    assert all(isinstance(p.overlaps().grad_reduce, bool) for p in PROFILES.values())


def test_rowwise_fp8_pays_its_own_gemm_factor():
    c = dataclasses.replace(CLUSTER, lowp_gemm_efficiency=0.8, rowwise_gemm_efficiency=0.75)
    codes = np.array([FP8_CODE[r] for r in ("none", "tensorwise", "rowwise", "mxfp8")])
    assert linear_efficiency_factor(codes, c) == pytest.approx([1.0, 0.8, 0.6, 0.8])


def test_coefficient_table_priors_inside_their_ranges():
    for c in COEFFICIENTS:
        assert c.low < c.prior < c.high and c.scope in ("family", "shared") and c.source, c.name
        assert hasattr(CLUSTER, c.name), c.name  # the preset field the fit writes exists
    assert at_bound("dp_overlap", 0.5) == "low" and at_bound("dp_overlap", 1.0) == "high"
    assert at_bound("dp_overlap", 0.8) is None


def test_refit_writes_preset_lines(tmp_path):
    spec = importlib.util.spec_from_file_location("refit", ROOT / "benchmarks" / "refit.py")
    refit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(refit)
    p = tmp_path / "x.yaml"
    p.write_text("name: x\nmatmul_efficiency: 0.7   # old comment\nhbm: 1\n")
    refit.write_preset(p, {"matmul_efficiency": 0.61234, "dp_overlap": 0.9}, "test")
    lines = p.read_text().splitlines()
    assert lines[0] == "name: x" and lines[2] == "hbm: 1"
    assert lines[1].startswith("matmul_efficiency: 0.6123 ") and "fitted, family (test)" in lines[1]
    assert lines[3].startswith("dp_overlap: 0.9000 ") and "fitted, shared (test)" in lines[3]


def test_attention_backward_counts_two_and_a_half_forwards():
    # FlashAttention's backward recomputes QK^T and runs dV, dP, dQ, dK: 5 matmuls vs the forward's 2, so fwd + bwd
    # = 3.5 forwards (Dao 2023 Sec 4.1; flash-attention benchmarks/benchmark_flash_attention.py), 4.5 with a
    # full-recompute forward
    assert attention_passes(np.array([3.0, 4.0])) == pytest.approx([3.5, 4.5])


def test_fa2_runs_at_its_published_fraction_of_fa3_on_hopper():
    # llama-3.1-8b (32 heads x 128), 8192 local tokens, seq 8192, tp 1, fwd + bwd (3 -> 3.5 forward-equivalents):
    # 8192 * 2 * 8192 * 4096 * 3.5 = 1.9241e12 FLOPs. FA3 / cuDNN: peak * attention_efficiency * s/(s+207) s/(s+128);
    # FA2 on H100: x 370/648 = 0.571 (Shah et al. 2024 Fig. 4) and its own half-point s/(s+105)
    model = job()[0]
    h100 = dataclasses.replace(load_preset("h100-sxm-80gb"), attention_efficiency=0.5)
    flops = 8192 * 2 * 8192 * 4096 * 3.5
    fa3 = flops / (989.4e12 * 0.5 * 8192 / 8399 * 8192 / 8320)
    fa2 = flops / (989.4e12 * 0.5 * 0.571 * 8192 / 8297 * 8192 / 8320)
    assert float(attention_s(8192, 8192, model, 1, 3.0, h100, 989.4e12, kernel="fa3")) == pytest.approx(fa3)
    assert float(attention_s(8192, 8192, model, 1, 3.0, h100, 989.4e12, kernel="fa2")) == pytest.approx(fa2)
    # every Hopper preset (same sm90 SMs) carries the ratio: torchtitan's H100 96 GB pages run FA2 too
    assert {p: load_preset(p).fa2_attention_ratio for p in FAMILIES["hopper"]} == dict.fromkeys(
        FAMILIES["hopper"], 0.571
    )
    # Ampere / Blackwell presets state no ratio: FA2 is priced as the family's kernel
    a100 = load_preset("a100-80gb")
    assert a100.fa2_attention_ratio is None
    assert float(attention_s(8192, 8192, model, 1, 3.0, a100, 312e12, kernel="fa2")) == pytest.approx(
        float(attention_s(8192, 8192, model, 1, 3.0, a100, 312e12, kernel="fa3"))
    )
    # which kernel each framework runs: cuDNN attention under TE (NeMo docs) and today's torch SDPA on sm90
    # (sdp_utils.cpp check_prefer_cudnn_attention), FlashAttention-2 under torchtitan's published stack, nanotron's
    # and DeepSpeed's flash-attn 2; train.attention_kernel overrides it (llm-foundry's rows: fa2)
    kernels = {name: p.attention_kernel() for name, p in PROFILES.items()}
    assert kernels == {n: ("fa3" if n in ("megatron", "bench_model") else "fa2") for n in PROFILES}
    with pytest.raises(SpecError, match=r"train.attention_kernel='fa4' must be one of fa2, fa3"):
        TrainSpec(seq_len=8, global_batch_size=1, attention_kernel="fa4")


def test_triton_flash_attention_runs_at_its_published_fraction_of_fa2():
    # FlashAttention in Triton (llm-foundry's attn_impl=triton): FA2 is 1.3-1.5x (1.4 taken) faster in the forward and
    # ~2x in the backward (Dao 2023 "FlashAttention-2" Sec 4.1, A100), FA2 reaching 73% / 63% of peak forward /
    # backward (Sec 1). fwd + bwd (1 forward, 2.5 backward forward-equivalents):
    # (1.4 / 0.73 + 2 * 2.5 / 0.63) / (1 / 0.73 + 2.5 / 0.63) = 9.8543 / 5.3381 = 1.8460; with a full-recompute
    # forward (2 forwards): 11.7721 / 6.7080 = 1.7549
    assert triton_attention_factor(np.array([3.0, 4.0])) == pytest.approx([1.8460, 1.7549], rel=1e-4)
    model = job()[0]
    for preset in ("a100-80gb", "h100-sxm-80gb"):  # Ampere: FA2 is the family's kernel; Hopper: FA2 at 0.571 of FA3
        spec = load_preset(preset)
        for passes, factor in ((3.0, 1.8460), (4.0, 1.7549)):
            fa2 = float(attention_s(8192, 8192, model, 1, passes, spec, 312e12, kernel="fa2"))
            tri = float(attention_s(8192, 8192, model, 1, passes, spec, 312e12, kernel="triton"))
            assert tri == pytest.approx(fa2 * factor, rel=1e-4)
    TrainSpec(seq_len=8, global_batch_size=1, attention_kernel="triton")  # accepted as a job's kernel


def test_transformer_engine_casts_by_hand():
    # llama-3.1-8b, tp 1, bf16 (c = 2), tensorwise (1 byte per FP8 element), 8192 tokens, 1 micro-batch, Hopper (2
    # layouts): every cast reads 2 bytes and writes 2 x 1: norm-fused qkv / fc1 inputs 2h = 8,192 elements (the norm
    # writes bf16, a quantize reads it: TE normalization.cpp FUSED_NORM_AMAX_FP8) + row inputs (h + f) = 18,432:
    # 26,624 * 4 = 106,496; grad_outputs 43,008 * 4 = 172,032: 278,528 bytes per token; weights 218,103,808 * 4
    model = job()[0]
    per_token, weights = 278_528, 218_103_808 * 4
    assert float(te_fp8_cast_bytes(model, 2, 1, 8192, False, 1, 1)) == 8192 * per_token + weights
    # 16 micro-batches share one weight cast (TE is_first_microbatch); full recompute casts the inputs once more
    assert float(te_fp8_cast_bytes(model, 2, 1, 8192, False, 1, 16)) == 8192 * per_token + weights / 16
    assert float(te_fp8_cast_bytes(model, 2, 1, 8192, True, 1, 1)) == 8192 * (per_token + 106_496) + weights
    # Blackwell, tensorwise: one FP8 copy per cast (TE quantizer.cpp, is_non_tn_fp8_gemm_supported): 3 bytes/element
    assert (
        float(te_fp8_cast_bytes(model, 2, 1, 8192, False, 1, 1, 1.0)) == 8192 * (26_624 + 43_008) * 3 + 218_103_808 * 3
    )
    # tp 2 with sequence parallelism: the norm + quantize run on the local half of the tokens (4,096 elements), row
    # inputs 9,216; grad_outputs (h + 2k + 2f)/2 + 2h = 17,408 + 8,192 = 25,600; weights / 2
    sp = 8192 * (4_096 + 9_216 + 25_600) * 4 + 218_103_808 / 2 * 4
    assert float(te_fp8_cast_bytes(model, 2, 2, 8192, False, 1, 1, 2.0, True)) == sp
    # against torchao's fused casts (2 casts each of 38,912 inputs, 43,008 grad_outputs and the weights, 3 bytes):
    torchao = 3 * (2 * 8192 * (38_912 + 43_008) + 2 * 218_103_808)
    assert float(fp8_cast_bytes(model, 2, 1, 8192, False, 1, True)) == torchao
    assert float(te_fp8_cast_bytes(model, 2, 1, 8192, False, 0, 1)) == 0.0  # no recipe, no casts
    assert {n: p.fp8_casts() for n, p in PROFILES.items()} == {
        n: ("te" if n in ("megatron", "deepspeed") else "torchao") for n in PROFILES
    }


def test_job_fp8_casts_override_the_framework():
    # train.fp8_casts="te" on a bench_model job (llm-foundry's amp_fp8 rows): the memory-bound term takes TE's casts
    # (te_fp8_cast_bytes, one read + 2 FP8 copies on Hopper) instead of torchao's eager ones (2 casts x (amax read +
    # read + write)), and the host no longer dispatches torchao's cast ops (host.TORCHAO_FP8_EXTRA_OPS)
    model, train, h100 = job()
    plan = ParallelPlan(dp=1, micro_batch_size=1, grad_accum_steps=1, fp8="tensorwise")
    arr = arrays_from_plans([plan])
    ao, te = (perf_arrays(arr, model, dataclasses.replace(train, fp8_casts=k), h100) for k in ("torchao", "te"))
    default = perf_arrays(arr, model, train, h100)
    assert default["memory_bound_s"][0] == ao["memory_bound_s"][0]  # bench_model's own path is torchao's
    tokens = train.seq_len
    delta = float(fp8_cast_bytes(model, 2, 1, tokens, False, 1) - te_fp8_cast_bytes(model, 2, 1, tokens, False, 1, 1))
    assert delta > 0  # 10 bytes per cast element (torchao eager) vs 4 (TE, Hopper)
    want = model.num_layers * delta / (h100.hbm_bw_bytes_per_s * h100.stream_efficiency)  # casts stream (perf.py)
    assert ao["memory_bound_s"][0] - te["memory_bound_s"][0] == pytest.approx(want, rel=1e-9)
    assert te["host_s"][0] <= ao["host_s"][0]
    with pytest.raises(SpecError):
        dataclasses.replace(train, fp8_casts="cublas")


def test_transformer_engine_fp8_layouts_and_sequence_parallel_gathers():
    from autotune.predict.te_fp8 import te_cast_layouts, te_tp_gather_bytes

    codes = np.array([FP8_CODE[r] for r in ("none", "tensorwise", "mxfp8", "nvfp4")])
    # Blackwell presets state fp8_non_tn_gemm (TE utils.py is_non_tn_fp8_gemm_supported: sm 10.x); Hopper's do not
    assert load_preset("gb300-nvl72").fp8_non_tn_gemm and not load_preset("h100-sxm-80gb").fp8_non_tn_gemm
    assert list(te_cast_layouts(codes, load_preset("b200"))) == [2, 1, 2, 2]  # block scales run along K: 2 copies
    assert list(te_cast_layouts(codes, load_preset("h100-sxm-80gb"))) == [2, 2, 2, 2]
    # all-gather bytes per element (TE distributed.py _all_gather_fp8 / _mxfp8 / _nvfp4): 1, 1 + 1/32, 1/2 + 1/16
    assert list(te_tp_gather_bytes(codes, 2, True)) == [2.0, 1.0, 1.03125, 0.5625]
    assert list(te_tp_gather_bytes(codes, 2, False)) == [2.0] * 4  # no SP: all-reduce in the compute dtype
    # Megatron, tp 4 + SP, H100: per layer and micro-batch each all-reduce-equivalent becomes an FP8 all-gather +
    # a bf16 reduce-scatter of b*s*h: 4 of them, by hand from the ring formulas
    model, train, h100 = job()
    train = dataclasses.replace(train, framework="megatron")
    plan = ParallelPlan(dp=2, tp=4, micro_batch_size=1, grad_accum_steps=1, sequence_parallel=True)
    none, fp8 = (
        perf_arrays(arrays_from_plans([dataclasses.replace(plan, fp8=r)]), model, train, h100)["tp_comm_s"][0]
        for r in ("none", "tensorwise")
    )
    bw, lat = _link(h100, np.array(4))
    act = train.seq_len * model.hidden_size
    assert none == pytest.approx(model.num_layers * 4 * float(ring_s("all_reduce", 4, act * 2, bw, lat)))
    pair = float(ring_s("all_gather", 4, act * 1, bw, lat) + ring_s("reduce_scatter", 4, act * 2, bw, lat))
    assert fp8 == pytest.approx(model.num_layers * 4 * pair)
    assert 0.75 < fp8 / none < 0.85  # 3 of 4 bytes, the same ring latency


def test_blackwell_softmax_exponentials_by_hand():
    # llama-3.1-8b (32 heads), 8192 local tokens, seq 8192, tp 1, fwd + bwd: one exponential per score, s/2 keys per
    # query plus half the 128-wide diagonal tile (Dao 2023 Sec 3.1.1), once forward and once in the backward's
    # recomputation of P (Dao 2023 Alg. 2): 8192 * 32 * (4096 + 64) * 2 = 2,181,038,080 exponentials; at B200's
    # 5 TeraExponentials/s 436.2 us, at Blackwell Ultra's 10.7 T/s 203.8 us (verda.com GB300 NVL72 per-GPU table;
    # NVIDIA blog "Making Softmax More Efficient with NVIDIA Blackwell Ultra": MUFU.EX2 throughput doubled)
    model = job()[0]
    assert float(softmax_exps(8192, 8192, model, 1, 3.0)) == 2_181_038_080
    assert float(softmax_exps(8192, 8192, model, 2, 4.0)) == 2_181_038_080 * 3 / 2 / 2  # tp 2, full recompute
    rates = {p: load_preset(p).softmax_exp_per_s for p in ("b200", "gb200-nvl72", "b300", "gb300-nvl72")}
    assert rates == {"b200": 5.0e12, "gb200-nvl72": 5.0e12, "b300": 10.7e12, "gb300-nvl72": 10.7e12}
    b200, gb300 = load_preset("b200"), load_preset("gb300-nvl72")
    assert float(softmax_exp_s(8192, 8192, model, 1, 3.0, b200)) == pytest.approx(436.2e-6, rel=1e-4)
    assert float(softmax_exp_s(8192, 8192, model, 1, 3.0, gb300)) == pytest.approx(203.8e-6, rel=1e-3)
    # serial with the matmuls: attention_s = the MMA roofline + the exponentials
    no_sfu = dataclasses.replace(b200, softmax_exp_per_s=None)
    mma = float(attention_s(8192, 8192, model, 1, 3.0, no_sfu, 2.25e15))
    assert float(attention_s(8192, 8192, model, 1, 3.0, b200, 2.25e15)) == pytest.approx(mma + 436.2e-6, rel=1e-4)
    # Hopper and Ampere: FlashAttention-3 hides the softmax behind the other warpgroup's GEMMs (Shah et al. 2024
    # Sec 3.1), no rate stated, no term
    for name in ("h100-sxm-80gb", "h200-141gb", "a100-80gb"):
        assert load_preset(name).softmax_exp_per_s is None
        assert softmax_exp_s(8192, 8192, model, 1, 3.0, load_preset(name)) == 0.0
    with pytest.raises(SpecError, match=r"cluster.softmax_exp_per_s=0.0 must be null or > 0"):
        dataclasses.replace(b200, softmax_exp_per_s=0.0)
