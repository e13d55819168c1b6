"""Each layout rule rejects with a reason naming the values and the rule; valid layouts pass."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.core.types import ParallelPlan
from autotune.layouts.rules import check_plan
from autotune.spec.config import load_config


@pytest.fixture(scope="module")
def cfg():
    return load_config(["model=llama-3.1-8b", "cluster=h100-sxm-80gb"])  # 32 heads, 8 kv heads, 32 layers, seq 4096


def _check(cfg, space=None, **kw):
    plan = ParallelPlan(**kw)
    return check_plan(plan, cfg.model, cfg.train, cfg.cluster, space or cfg.space)


@pytest.mark.parametrize(
    "kw,reason",
    [
        (
            dict(dp=3, micro_batch_size=1, grad_accum_steps=170),
            "train.global_batch_size=512 is not divisible by dp*micro_batch_size=3*1=3",
        ),
        (
            dict(dp=8, micro_batch_size=1, grad_accum_steps=7),
            "dp*micro_batch_size*grad_accum_steps=8*1*7=56 != train.global_batch_size=512",
        ),
        (dict(tp=3, grad_accum_steps=512), "tp=3 does not divide num_heads=32"),
        (dict(tp=16, grad_accum_steps=512), "tp=16 does not divide num_kv_heads=8"),
        (dict(pp=64, grad_accum_steps=512), "pp=64 exceeds num_layers=32"),
        (
            dict(pp=16, vpp=4, grad_accum_steps=512, pp_schedule="interleaved_1f1b"),
            "pp*vpp=16*4=64 exceeds num_layers=32",
        ),
        (dict(cp=3, grad_accum_steps=512), "seq_len=4096 is not divisible by 2*cp=6 (load-balanced causal chunks)"),
        # torch's Schedule1F1B raises for n_microbatches < num_stages (torch/distributed/pipelining/schedules.py);
        # GPipe runs any number of micro-batches (bubble (pp-1)/m, priced by the perf model, not rejected)
        (
            dict(dp=128, pp=4, micro_batch_size=2, grad_accum_steps=2),
            "grad_accum_steps=2 < pp=4: pp_schedule=1f1b needs at least pp micro-batches (gpipe runs it)",
        ),
        (dict(dp=128, pp=4, micro_batch_size=2, grad_accum_steps=2, pp_schedule="gpipe"), None),
        (
            dict(dp=64, pp=4, vpp=2, micro_batch_size=4, grad_accum_steps=2, pp_schedule="interleaved_1f1b"),
            "grad_accum_steps=2 is not a multiple of pp=4 (Interleaved1F1B needs n_microbatches % pp == 0)",
        ),
        (dict(dp=64, pp=4, vpp=2, micro_batch_size=1, grad_accum_steps=8, pp_schedule="interleaved_1f1b"), None),
        (dict(dp=1, zero_stage=2, grad_accum_steps=512), "zero_stage=2 shards nothing at dp*cp=1"),
        (dict(dp=1, cp=2, zero_stage=2, grad_accum_steps=512), None),  # ZeRO shards over dp*cp
        (dict(dp=8, tp=8, micro_batch_size=2, grad_accum_steps=32, sequence_parallel=True), None),
    ],
)
def test_rules(cfg, kw, reason):
    assert _check(cfg, **kw) == reason


def test_interleaved_needs_multiple_of_pp(cfg):
    # 8B with gbs 48: dp=8, mbs=1 -> 6 micro-batches; Interleaved1F1B at pp=4 needs a multiple of 4
    c = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, global_batch_size=48))
    got = check_plan(
        ParallelPlan(dp=8, pp=4, vpp=2, grad_accum_steps=6, pp_schedule="interleaved_1f1b"),
        c.model,
        c.train,
        c.cluster,
        c.space,
    )
    assert got == "grad_accum_steps=6 is not a multiple of pp=4 (Interleaved1F1B needs n_microbatches % pp == 0)"


def test_tp_within_node_and_override():
    c = load_config(["model=llama-3.1-8b", "cluster=h100-sxm-80gb", "cluster.gpus_per_node=4"])
    assert _check(c, tp=8, grad_accum_steps=512) == "tp=8 exceeds gpus_per_node=4 (space.tp_within_node=true)"
    c2 = load_config(
        ["model=llama-3.1-8b", "cluster=h100-sxm-80gb", "cluster.gpus_per_node=4", "space.tp_within_node=false"]
    )
    assert _check(c2, tp=8, grad_accum_steps=512) is None


def test_tied_embeddings_run_pipelined():
    # Llama-3.2-1B ties its embeddings (config.json); the last stage holds its own copy of the head (Megatron-LM's
    # embedding group), so every pipeline layout is legal, with or without virtual stages
    c = load_config(["model=llama-3.2-1b"])
    assert c.model.tie_embeddings
    gbs = c.train.global_batch_size
    assert _check(c, pp=2, grad_accum_steps=gbs) is None
    assert _check(c, pp=4, vpp=2, grad_accum_steps=gbs, pp_schedule="interleaved_1f1b") is None


def test_uneven_pipeline_split_rule():
    c = load_config(["model=llama-3.1-8b", "space.allow_uneven_pp=false"])
    assert (
        _check(c, pp=3, grad_accum_steps=512) == "pp*vpp=3 does not divide num_layers=32 (space.allow_uneven_pp=false)"
    )
    assert _check(load_config(["model=llama-3.1-8b"]), pp=3, grad_accum_steps=512) is None
