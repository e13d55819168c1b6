"""The host-time term (autotune/predict/host.py): op counts per layer and CUDA-graph scope, the composition with device
time with and without the MoE dispatcher's device-to-host sync, each framework's sync rule, train.cuda_graphs'
validation and Megatron rules, and the NeMo rows' CUDA graphs (autotune/fitting/nemo_cuda_graphs.py). Every
expected value is computed by hand in the test from the counts benchmarks/host_ops.py measures (its smoke test checks
the counts themselves)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from autotune.core.errors import SpecError
from autotune.core.model import ModelSpec
from autotune.core.types import ParallelPlan, TrainSpec
from autotune.fitting.fit_reference import load_preset
from autotune.fitting.nemo_cuda_graphs import recipe_cuda_graphs
from autotune.layouts.rules import check_plan
from autotune.predict import host
from autotune.predict.frameworks import get_profile
from autotune.predict.perf import estimate_perf


def test_layer_ops_per_cuda_graph_scope() -> None:
    assert host.layer_host_ops(False, "none") == (81, 134)
    assert host.layer_host_ops(True, "none") == (115, 179)
    # "moe" captures moe_router (22 forward ops) + moe_preprocess (2): one launch each instead, backward in proportion
    fwd, bwd = host.layer_host_ops(True, "moe")
    assert fwd == 115 - 24 + 2 and bwd == pytest.approx(179 * (1 - 24 / 115) + 2)
    assert host.layer_host_ops(False, "moe") == (81, 134)  # a dense layer has no router scope
    fwd, bwd = host.layer_host_ops(False, "attn_moe")  # attention: 57 forward ops -> 1 launch
    assert fwd == 81 - 57 + 1 and bwd == pytest.approx(134 * (1 - 57 / 81) + 1)
    assert host.layer_host_ops(True, "full") == (0.0, 0.0)


def test_stage_host_seconds() -> None:
    # 4 layers, 3 of them MoE, 10 us per op; full recompute replays the forward in the backward
    h_f, h_b = host.stage_host_s(4, 3, False, "none", 1e-5)
    assert h_f == pytest.approx((81 + 3 * 115) * 1e-5) and h_b == pytest.approx((134 + 3 * 179) * 1e-5)
    _, h_b_full = host.stage_host_s(4, 3, True, "none", 1e-5)
    assert h_b_full == pytest.approx(h_b + h_f)


def test_torchao_fp8_casts_add_host_ops() -> None:
    from autotune.core.plan_arrays import FP8_CODE

    codes = np.array([FP8_CODE["none"], FP8_CODE["tensorwise"], FP8_CODE["rowwise"], FP8_CODE["mxfp8"]])
    extra = host.fp8_extra_ops(codes, "torchao")
    assert extra[False][0].tolist() == [0, 140, 182, 0] and extra[True][1].tolist() == [0, 164, 212, 0]
    assert not host.fp8_extra_ops(codes, "te")[False][0].any()  # Transformer Engine's casts: not counted
    # 2 dense layers under tensorwise at 10 us per op: (81 + 140) and (134 + 287) ops each
    h_f, h_b = host.stage_host_s(2, 0, False, "none", 1e-5, host.fp8_extra_ops(codes[1:2], "torchao"))
    assert h_f[0] == pytest.approx(2 * 221 * 1e-5) and h_b[0] == pytest.approx(2 * 421 * 1e-5)


def test_host_composition_with_and_without_sync() -> None:
    tail = 10 * host.SYNC_TAIL_OPS * 1e-5  # 10 MoE layers x ops after the sync x 10 us
    # host-bound both passes: the stream cannot help, the host time is the step either way (+ the tail after syncs)
    free = host.host_extra_s(0.1, 0.2, 0.05, 0.1, False, 10, 1e-5)
    synced = host.host_extra_s(0.1, 0.2, 0.05, 0.1, True, 10, 1e-5)
    assert free == pytest.approx(0.3 - 0.15) and synced == pytest.approx(0.1 + tail + 0.2 - 0.15)
    # host-bound forward, device-bound backward: without a sync the host's lead hides its forward behind the
    # backward's device time (0.15 host < 0.22 device); with one per layer it cannot run ahead: 0.1 + 0.2 - 0.22
    assert host.host_extra_s(0.1, 0.05, 0.02, 0.2, False, 10, 1e-5) == pytest.approx(0.0)
    assert host.host_extra_s(0.1, 0.05, 0.02, 0.2, True, 10, 1e-5) == pytest.approx(0.1 + tail + 0.2 - 0.22)
    # device-bound: nothing without the sync, the tail with it
    assert host.host_extra_s(0.01, 0.02, 0.1, 0.2, True, 10, 1e-5) == pytest.approx(tail)


def test_dispatch_sync_per_framework() -> None:
    ep = np.array([1, 8])
    mega, bench, titan = (get_profile(f) for f in ("megatron", "bench_model", "torchtitan"))
    assert mega.moe_host_sync(ep, True, False).tolist() == [True, True]  # dropless: token counts to the host
    assert mega.moe_host_sync(ep, True, True).tolist() == [False, False]  # drop-and-pad: static counts
    assert bench.moe_host_sync(ep, True, False).tolist() == [False, True]  # balanced on one rank knows its counts
    assert bench.moe_host_sync(ep, False, False).tolist() == [True, True]  # learned: bincount().tolist()
    assert titan.moe_host_sync(ep, False, False).tolist() == [False, True]  # EP splits .tolist()


def _small_dense() -> ModelSpec:
    return ModelSpec("host-test", 4, 256, 1024, 4, 4, 1024)


def test_perf_adds_host_time_on_a_host_bound_step() -> None:
    """One GPU, a tiny dense model (no sync), 1 ms per op: host-bound, so the step is m x the host time; the host
    term is m x (H_f + H_b - D) with D = compute_s / m (no communication on one GPU)."""
    model, cluster = _small_dense(), load_preset("h100-sxm-80gb")
    train = TrainSpec(seq_len=128, global_batch_size=4)
    plan = ParallelPlan(dp=1, micro_batch_size=1, grad_accum_steps=4)
    off = estimate_perf(plan, model, train, dataclasses.replace(cluster, host_op_s=None))
    on = estimate_perf(plan, model, train, dataclasses.replace(cluster, host_op_s=1e-3))
    host_mb = 4 * (81 + 134) * 1e-3
    assert on.step_s - off.step_s == pytest.approx(4 * (host_mb - off.compute_s / 4), rel=1e-6)
    assert on.step_s == pytest.approx(off.step_s - off.compute_s + 4 * host_mb, rel=1e-6)


def test_compiled_blocks_issue_their_graphs_launches() -> None:
    """Under torch.compile a block's host work is its Inductor graphs' kernel launches (benchmarks/host_ops.py
    `compiled`: dense 15 / 23 kernels in one graph each way, MoE 25 / 31 kernels in 7 / 5 graphs with 6 breaks) and
    torchao's casts fuse into them; frameworks whose plan.compile is not torch.compile keep the eager count."""
    assert host.layer_host_ops(False, "none", compiled=True) == (15 + 1, 23 + 1)
    assert host.layer_host_ops(True, "none", compiled=True) == (25 + 7 + 6, 31 + 5)
    assert host.layer_host_ops(True, "full", compiled=True) == (0.0, 0.0)
    from autotune.core.plan_arrays import FP8_CODE

    tw = np.array([FP8_CODE["tensorwise"]] * 2)
    extra = host.fp8_extra_ops(tw, "torchao", np.array([False, True]))
    assert extra[False][0].tolist() == [140, 2] and extra[False][1].tolist() == [287, 5]
    # 2 dense layers under tensorwise, eager vs compiled, 10 us per op
    h_f, h_b = host.stage_host_s(2, 0, False, "none", 1e-5, extra, np.array([False, True]))
    assert h_f.tolist() == pytest.approx([2 * (81 + 140) * 1e-5, 2 * (16 + 2) * 1e-5])
    assert h_b.tolist() == pytest.approx([2 * (134 + 287) * 1e-5, 2 * (24 + 5) * 1e-5])
    assert [get_profile(f).compiled_dispatch for f in ("bench_model", "torchtitan", "deepspeed")] == [True] * 3
    assert not get_profile("megatron").compiled_dispatch and not get_profile("nanotron").compiled_dispatch


def test_compiled_counts_are_the_stored_measurement() -> None:
    """host.py's compiled counts against the last full run of benchmarks/host_ops.py (stored; re-run it after a torch
    upgrade: Inductor's fusion decides the counts): kernels + one op per graph entered + one per graph break."""
    import json
    from pathlib import Path

    run = json.loads((Path(__file__).resolve().parents[2] / "benchmarks/data/host_ops_result.json").read_text())
    for key, ops in (("dense_block", host.COMPILED_DENSE_OPS), ("moe_block", host.COMPILED_MOE_OPS)):
        c = run["compiled"]["bf16"][key]
        breaks = c["forward_graphs"] - 1  # each forward graph after the first resumes after a break
        assert (c["forward"] + c["forward_graphs"] + breaks, c["backward"] + c["backward_graphs"]) == ops, key
    for recipe, extra in host.TORCHAO_FP8_EXTRA_OPS_COMPILED.items():
        for moe, key in ((False, "dense_block"), (True, "moe_block")):
            c, base = run["compiled"][recipe][key], run["compiled"]["bf16"][key]
            assert (c["forward"] - base["forward"], c["backward"] - base["backward"]) == extra[moe], (recipe, key)
    # the eager counts of the same run are the ones the smoke test re-counts on every CI run
    assert (run["dense_block"]["forward"], run["dense_block"]["backward"]) == host.DENSE_OPS


def test_compile_takes_the_host_term_off_a_host_bound_fp8_step() -> None:
    """The same tiny host-bound step as above (1 ms per op) under torchao tensorwise FP8: eager it pays
    (81 + 140) + (134 + 287) ops per layer and micro-batch; compiled (16 + 2) + (24 + 5)."""
    model, cluster = _small_dense(), load_preset("h100-sxm-80gb")
    train = TrainSpec(seq_len=128, global_batch_size=4)
    eager = ParallelPlan(dp=1, micro_batch_size=1, grad_accum_steps=4, fp8="tensorwise")
    compiled = dataclasses.replace(eager, compile=True)
    for plan, ops in ((eager, 81 + 140 + 134 + 287), (compiled, 16 + 2 + 24 + 5)):
        off = estimate_perf(plan, model, train, dataclasses.replace(cluster, host_op_s=None))
        on = estimate_perf(plan, model, train, dataclasses.replace(cluster, host_op_s=1e-3))
        host_mb = model.num_layers * ops * 1e-3
        assert on.step_s == pytest.approx(off.step_s - off.compute_s + 4 * host_mb, rel=1e-6)


def test_full_cuda_graph_removes_host_time() -> None:
    model = ModelSpec(
        "host-moe",
        2,
        256,
        1024,
        4,
        4,
        1024,
        num_experts=8,
        moe_router_topk=2,
        moe_ffn_hidden_size=128,
        moe_layer_freq=1,
    )
    cluster = dataclasses.replace(load_preset("h100-sxm-80gb"), host_op_s=1e-3)
    plan = ParallelPlan(dp=1, micro_batch_size=1, grad_accum_steps=2)
    eager = TrainSpec(seq_len=128, global_batch_size=2, framework="megatron")
    graphs = dataclasses.replace(eager, cuda_graphs="full")
    base = estimate_perf(plan, model, eager, dataclasses.replace(cluster, host_op_s=None))
    assert estimate_perf(plan, model, graphs, cluster).step_s == pytest.approx(base.step_s)
    # eager, synced per MoE layer, host-bound both passes: each micro-batch costs H_f + tail + H_b
    per_mb = 2 * (115 + host.SYNC_TAIL_OPS + 179) * 1e-3
    assert estimate_perf(plan, model, eager, cluster).step_s == pytest.approx(
        base.step_s - base.compute_s + 2 * per_mb, rel=1e-6
    )


def test_cuda_graphs_validation_and_rules() -> None:
    with pytest.raises(SpecError, match="train.cuda_graphs='partial' must be one of none, moe, attn_moe, full"):
        TrainSpec(seq_len=128, global_batch_size=2, framework="megatron", cuda_graphs="partial")
    with pytest.raises(SpecError, match="train.cuda_graphs=full with train.framework=bench_model"):
        TrainSpec(seq_len=128, global_batch_size=2, cuda_graphs="full")
    train = TrainSpec(seq_len=128, global_batch_size=8, framework="megatron", cuda_graphs="attn_moe")
    cluster, model = load_preset("h100-sxm-80gb"), _small_dense()
    plan = ParallelPlan(dp=8, micro_batch_size=1, grad_accum_steps=1)
    assert check_plan(plan, model, train, cluster) is None
    reason = check_plan(dataclasses.replace(plan, recompute="full"), model, train, cluster)
    assert reason is not None and "do not support full activation recompute" in reason
    reason = check_plan(dataclasses.replace(plan, act_offload_layers=1), model, train, cluster)
    assert reason is not None and "CUDA graphs are incompatible" in reason


def test_nemo_rows_cuda_graphs_from_their_release() -> None:
    # Megatron-Bridge v0.3.0 (NeMo 26.02): Qwen3-30B-A3B on B200, scopes moe_router + moe_preprocess
    assert recipe_cuda_graphs("Qwen3_30B_a3B", "B200", "NeMo 26.02", "mxfp8") == "moe"
    # v0.3.1 (26.02.01) after "Fix Qwen3 30B A3B B200 perf config" (0ec1df783): attn as well
    assert recipe_cuda_graphs("Qwen3_30B_a3B", "B200", "NeMo 26.02.01", "mxfp8") == "attn_moe"
    # v0.5.1 (26.06): full-iteration graphs for MXFP8 (55443cbfb)
    assert recipe_cuda_graphs("Qwen3_30B_a3B", "GB200", "NeMo 26.06", "mxfp8") == "full"
    assert recipe_cuda_graphs("GPT OSS 120B", "B200", "NeMo 26.04", "none") == "none"  # the recipe sets none
    assert recipe_cuda_graphs("DeepSeekV3", "GB200", "NeMo 26.04", "mxfp8") == "none"  # not mapped


def test_megatron_export_lists_cuda_graphs_as_not_mapped() -> None:
    from autotune.interop.megatron import render

    train = TrainSpec(seq_len=128, global_batch_size=8, framework="megatron", cuda_graphs="attn_moe")
    out = render(_small_dense(), train, load_preset("h100-sxm-80gb"), ParallelPlan(dp=8))
    note = [line for line in out.splitlines() if "train.cuda_graphs=attn_moe" in line]
    assert len(note) == 1 and "--cuda-graph-impl transformer_engine --cuda-graph-modules attn moe_router" in note[0]
    args = " ".join(line for line in out.splitlines() if not line.lstrip().startswith("#"))
    assert "--cuda-graph" not in args  # not emitted for core_r0.12.0
