"""plan.recompute_layers: Megatron-Core's block recompute (`--recompute-granularity full --recompute-method block
--recompute-num-layers N`: the first N layers of each model chunk re-run their forward in backward, the chunk's other
layers keep every activation; TransformerBlock._checkpointed_forward, megatron/core/transformer/transformer_block.py
@ core_r0.16.1) in the memory and step-time models, the rules, the Megatron export and bench_model."""

from __future__ import annotations

import pytest

from autotune.core.plan_arrays import arrays_from_plans
from autotune.core.types import ParallelPlan
from autotune.layouts.rules import rejections
from autotune.predict.memory import memory_arrays
from autotune.predict.perf import perf_arrays
from autotune.spec.config import load_config

OVER = ["model=llama-3.1-8b", "cluster=h100-sxm-80gb", "train.framework=megatron", "train.global_batch_size=64"]


def _plans(**kw):
    base = dict(dp=4, tp=2, sequence_parallel=True, micro_batch_size=1, grad_accum_steps=16)
    return [ParallelPlan(**base, **kw)]


def test_activations_are_linear_in_the_recomputed_layers_and_end_at_full():
    """Each recomputed layer trades its whole saved set for its input, so the activation bytes fall by the same amount
    per layer (llama-3.1-8b, 32 layers, pp 1): a(8) - a(16) = a(16) - a(24) > 0, a(32) = full recompute of every layer,
    and every partial count lies between none and full."""
    cfg = load_config(OVER)
    plans = [p for n in (8, 16, 24, 32) for p in _plans(recompute="full", recompute_layers=n)]
    plans += _plans(recompute="full") + _plans(recompute="none")
    act = memory_arrays(arrays_from_plans(plans), cfg.model, cfg.train, cfg.cluster)["activations"]
    a8, a16, a24, a32, full, none = act
    assert a8 - a16 == pytest.approx(a16 - a24, rel=1e-9) and a8 > a16
    assert a32 == pytest.approx(full, rel=1e-9)
    assert full < a24 < a8 < none


def test_step_time_counts_one_more_forward_for_the_recomputed_share_only():
    """Full recompute runs a 4th forward-equivalent (fwd + 2 bwd + re-run) on the layers it recomputes: with half of
    them (N = 16 of 32) the compute seconds lie halfway between recompute none (3 passes) and full (4): every compute
    term (GEMMs, attention, elementwise) is linear in the passes (autotune/predict/perf.py _layer_terms)."""
    cfg = load_config(OVER)
    plans = _plans(recompute="none") + _plans(recompute="full") + _plans(recompute="full", recompute_layers=16)
    comp = perf_arrays(arrays_from_plans(plans), cfg.model, cfg.train, cfg.cluster)["compute_s"]
    assert comp[2] == pytest.approx((comp[0] + comp[1]) / 2, rel=1e-9) and comp[0] < comp[2] < comp[1]


def test_rules_refuse_selective_other_frameworks_and_more_than_a_chunk():
    """Megatron's TransformerConfig: recompute_num_layers must be None for selective; the count is per model chunk
    (32 layers / (pp 2 x vpp 2) = 8); torchtitan's selective_ac_option counts another set of layers."""
    cfg = load_config(OVER)
    plans = [
        ParallelPlan(dp=8, recompute="selective", recompute_layers=2, micro_batch_size=1, grad_accum_steps=8),
        ParallelPlan(
            dp=2,
            pp=2,
            vpp=2,
            recompute="full",
            recompute_layers=9,
            micro_batch_size=1,
            grad_accum_steps=32,
            pp_schedule="interleaved_1f1b",
        ),
        ParallelPlan(
            dp=2,
            pp=2,
            vpp=2,
            recompute="full",
            recompute_layers=8,
            micro_batch_size=1,
            grad_accum_steps=32,
            pp_schedule="interleaved_1f1b",
        ),
    ]
    ids, reasons = rejections(arrays_from_plans(plans), cfg.model, cfg.train, cfg.cluster, cfg.space)
    assert list(ids) == ["recompute_layers_needs_full", "recompute_layers_within_chunk", None]
    assert "plan.recompute_layers=9" in reasons[1] and "at most 8" in reasons[1]
    tt = load_config([*OVER[:2], "train.framework=torchtitan", "train.global_batch_size=64"])
    ids, _ = rejections(arrays_from_plans(plans[2:]), tt.model, tt.train, tt.cluster, tt.space)
    assert ids[0] == "recompute_layers_framework"


def test_megatron_export_writes_the_block_method():
    from autotune.interop.megatron import render

    cfg = load_config(OVER)
    (plan,) = _plans(recompute="full", recompute_layers=6)
    lines = render(cfg.model, cfg.train, cfg.cluster, plan).splitlines()
    assert "--recompute-method block" in lines and "--recompute-num-layers 6" in lines
    (plan,) = _plans(recompute="full")
    assert "--recompute-method uniform" in render(cfg.model, cfg.train, cfg.cluster, plan).splitlines()


def test_bench_model_checkpoints_the_first_n_blocks_of_a_stage_chunk():
    """bench_model's stage chunk holds global layer keys (bench_model/parallel/pipeline.py build_stage_module); the
    first N in forward order are wrapped, the rest run as they are."""
    torch = pytest.importorskip("torch")
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointWrapper

    from autotune.core.model import ModelSpec
    from bench_model.model import Llama
    from bench_model.parallel.pipeline import build_stage_module
    from bench_model.parallel.recompute import apply_recompute

    spec = ModelSpec(name="t", num_layers=8, hidden_size=32, ffn_hidden_size=64, num_heads=2, num_kv_heads=2,
                     vocab_size=64)  # fmt: skip
    with torch.device("meta"):
        full = Llama(spec, 16)
    part = build_stage_module(full, 1, 2, [4, 5, 6, 7])
    apply_recompute(part, "full", layers=3)
    wrapped = [k for k, b in part.layers.items() if isinstance(b, CheckpointWrapper)]
    assert wrapped == ["4", "5", "6"]
