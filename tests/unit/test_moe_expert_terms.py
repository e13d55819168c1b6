"""The MoE step-time terms of issue 25's MoE part by hand: the routed experts' gradient reduction and parameter gather
on the expert-data-parallel group (autotune/predict/perf_dp.py `expert_ddp_s`) and the experts' gated activations
priced at the routed width (autotune/predict/moe.py `expert_activation_extra_bytes`)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from autotune.core.plan_arrays import arrays_from_plans
from autotune.core.types import ParallelPlan
from autotune.predict import moe
from autotune.predict.perf import perf_arrays
from autotune.predict.perf_dp import expert_ddp_s
from autotune.spec.config import load_config


def _job(model: str, cluster: str, framework: str = "megatron"):
    # bf16 parameters and gradients, as the NeMo GPT-OSS rows train (grad_reduce_in_fp32 False: gpt_oss_llm_pretrain.py)
    cfg = load_config([f"model={model}", f"cluster={cluster}"])
    train = dataclasses.replace(
        cfg.train, framework=framework, seq_len=4096, global_batch_size=1280, param_dtype="bf16", grad_dtype="bf16"
    )
    return cfg.model, train, cfg.cluster


def _plan(ep: int, zero: int = 1) -> ParallelPlan:
    # the GPT-OSS-120B layout of Megatron-Bridge's B200 BF16 perf config (64 GPUs, TP1 PP1, mbs 4, GBS 1280)
    return ParallelPlan(dp=64, tp=1, pp=1, ep=ep, micro_batch_size=4, grad_accum_steps=5, zero_stage=zero)


def test_gpt_oss_expert_activation_bytes_by_hand():
    """GPT-OSS-120B (HF config: hidden 2880, intermediate_size 2880 = the expert width, top-4): one micro-batch of
    4 x 4096 tokens on a TP1 rank routes 65536 copies; the fused activation reads fc1's 2F and writes F per copy:
    65536 x 3 x 2 x 2880 bytes; the dense term already counted 16384 x 3 x 2 x 2880 (a SwiGLU of ffn_hidden_size),
    no shared expert: the difference is 3/4 of the routed bytes."""
    model = load_config(["model=gpt-oss-120b"]).model
    routed, dense = moe.expert_activation_extra_bytes(model, 16384, 65536, 1.0, 1, 2)
    assert float(routed) == 65536 * 6 * 2880 and float(dense) == -16384 * 6 * 2880
    assert float(routed + dense) == pytest.approx(0.75 * 65536 * 6 * 2880)
    busy, _ = moe.expert_activation_extra_bytes(model, 16384, 65536, 1.5, 1, 2)
    assert float(busy) == 1.5 * float(routed)  # the busiest rank's load


@pytest.mark.parametrize("name", ["qwen3-30b-a3b", "deepseek-v3", "kimi-k2", "llama-4-scout"])
def test_expert_activation_adds_nothing_where_ffn_width_is_k_times_expert_width(name):
    """Qwen3-30B-A3B: intermediate 6144 = 8 x 768; DeepSeek-V3 / Kimi-K2: 18432 = 8 x 2048 + 2048 shared; Llama 4
    Scout: 16384 = 1 x 8192 + 8192 shared. Balanced routing on TP1: the dense term's SwiGLU was already the right
    width."""
    model = load_config([f"model={name}"]).model
    copies = 16384 * model.moe_router_topk
    routed, dense = moe.expert_activation_extra_bytes(model, 16384, copies, 1.0, 1, 2)
    assert float(routed + dense) == pytest.approx(0.0, abs=1e-6)


def test_expert_grads_reduce_scatter_over_the_expert_data_parallel_group_by_hand():
    """64 GPUs, ep 8: edp = 64 / 8 = 8 ranks, 8 apart, so one per 8-GPU node: the ring crosses the NICs. Megatron's
    distributed optimizer reduce-scatters the rank's expert gradient (36 layers x 128/8 experts x 3 x 2880^2 bf16
    = 14.3 B parameters) over them: 7/8 x 2 bytes x 14.3e9 / (NIC x comm_efficiency), and all-gathers the bf16
    parameters the same way; ep 64: edp = 1, nothing."""
    model, train, cluster = _job("gpt-oss-120b", "b200")
    psi = 36 * 128 // 8 * 3 * 2880 * 2880
    arr = arrays_from_plans([_plan(8), _plan(64)])
    stage = {"moe_layers": np.array([36.0, 36.0])}
    grad, gather, exposed = expert_ddp_s(arr, train, cluster, np.array([psi, psi / 8]), stage)
    want = 7 / 8 * 2 * psi / (cluster.inter_node_bw_bytes_per_s * cluster.comm_efficiency)
    assert float(grad[0]) == pytest.approx(want, rel=1e-3)  # + NCCL's ring latency, microseconds
    assert float(gather[0]) == pytest.approx(want, rel=1e-3)
    assert float(grad[1]) == float(gather[1]) == float(exposed[0]) == 0.0


def test_expert_grads_slow_the_ep8_layout_not_the_ep64_one():
    """The step difference the term makes on the GPT-OSS B200 layouts: ep 8 gains the expert reduction (hidden at
    most behind the last micro-batch's backward, 1/5 of the step's compute), ep 64 (edp 1) nothing."""
    model, train, cluster = _job("gpt-oss-120b", "b200")
    out = perf_arrays(arrays_from_plans([_plan(8), _plan(64)]), model, train, cluster)
    compute = float(out["compute_s"][0])
    assert float(out["dp_comm_s"][0]) > 0.1 * compute
    assert float(out["dp_comm_s"][1]) < 0.01 * compute


def test_bench_model_expert_allreduce_is_exposed():
    """bench_model at ZeRO 0/1 all-reduces each expert tensor over edp after the last backward
    (bench_model/parallel/expert_parallel.py finalize_expert_grads): nothing to hide behind, 3 tensors per layer."""
    model, train, cluster = _job("gpt-oss-120b", "b200", framework="bench_model")
    arr = arrays_from_plans([_plan(8, zero=0)])
    psi = np.array([36 * 16 * 3 * 2880 * 2880.0])
    grad, gather, exposed = expert_ddp_s(arr, train, cluster, psi, {"moe_layers": np.array([36.0])})
    assert float(grad[0]) == float(gather[0]) == 0.0
    assert float(exposed[0]) > 2 * 7 / 8 * 2 * psi[0] / (cluster.inter_node_bw_bytes_per_s * cluster.comm_efficiency)
