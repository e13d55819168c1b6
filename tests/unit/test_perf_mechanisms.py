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

from autotune.core.model import ModelSpec
from autotune.core.plan_arrays import FP8_CODE, arrays_from_plans
from autotune.core.types import ClusterSpec, ParallelPlan, TrainSpec
from autotune.fitting.coefficients import COEFFICIENTS, at_bound
from autotune.fitting.fit_reference import load_preset
from autotune.predict.collectives import _link, dp_all_reduce_s, ring_s
from autotune.predict.frameworks import PROFILES
from autotune.predict.perf import perf_arrays
from autotune.predict.perf_terms import attention_shape_factor, linear_efficiency_factor

ROOT = Path(__file__).resolve().parents[2]


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
