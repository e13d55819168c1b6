"""train.loss_chunks: torchtitan main's ChunkedLossWrapper (components/loss.py, 2026-06 on), priced by
TorchtitanProfile.chunked_loss ([CHUNK] in autotune/predict/frameworks/torchtitan.py) and checked against a CPU
replica of its loop (benchmarks/torchtitan_loss_peak.py --chunks: exact in eager, +3% compiled). Here: the term by
hand, what it does to a whole layout, the validation and the rule."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from autotune.core.errors import SpecError
from autotune.core.model import ModelSpec
from autotune.core.plan_arrays import arrays_from_plans
from autotune.core.types import ParallelPlan, TrainSpec
from autotune.fitting.run_types import preset_model
from autotune.layouts.rules import check_plan
from autotune.predict.frameworks.torchtitan import LOGIT_BYTES_PARALLEL, LOGIT_BYTES_PLAIN, TorchtitanProfile
from autotune.predict.memory import memory_arrays
from autotune.spec.config import load_config

GIB = 2**30


def test_chunked_loss_term_by_hand() -> None:
    """h 512, V 4096, 2048 tokens, 8 slices of 256: L = 256 x 4096 = 1,048,576 logits per slice. Eager (12 + 2 bytes
    per logit) the slice's loss outweighs its lm_head backward (2 x 4096 x 512 + 4 L = 8,388,608): 4 h T (GradAccumulator,
    4,194,304) + 4 V h (fp32 head gradient, 8,388,608) + 14 L (14,680,064) + the gathered weight 2 V h (4,194,304)."""
    model = ModelSpec("chunk", 1, 512, 2048, 4, 4, 4096)
    prof = TorchtitanProfile(loss_chunks=8)
    assert float(prof.logits(model, 2048, 1, 1, 2)) == 4_194_304 + 8_388_608 + 14_680_064 + 4_194_304
    # compiled inner loss (2 x 2 bytes per logit): the lm_head backward is the larger, 4,194,304 + 4 L
    assert float(prof.compiled_logits(model, 2048, 1, 1, 2)) == 4_194_304 + 8_388_608 + 8_388_608 + 4_194_304
    # loss parallel at tp 2: the vocabulary and the head split, the accumulator (replicated hidden states) not
    per = LOGIT_BYTES_PARALLEL + 2
    expect = 4_194_304 + 4 * 4096 * 512 / 2 + per * 256 * 2048 + 2 * 4096 * 512 / 2
    assert float(prof.logits(model, 2048, 1, 2, 2)) == expect
    # unchunked (0.2.2): the whole micro-batch's logits at 12 bytes each
    assert float(TorchtitanProfile().logits(model, 2048, 1, 1, 2)) == LOGIT_BYTES_PLAIN * 2048 * 4096


def _layout(chunks: int) -> dict:
    """torchtitan's qwen3_30b_a3b_with_deepep.toml (2026-01): 8 GPUs, FSDP 8 x EP 8, local batch 8 x 4096, full AC,
    model and loss compiled, on 8 H100."""
    cfg = load_config(["cluster=h100-sxm-80gb"])
    train = TrainSpec(seq_len=4096, global_batch_size=64, framework="torchtitan", loss_chunks=chunks)
    plan = ParallelPlan(dp=8, ep=8, zero_stage=3, micro_batch_size=8, recompute="full", compile=True)
    mem = memory_arrays(arrays_from_plans([plan]), preset_model("qwen3-30b-a3b"), train, cfg.cluster)
    return {k: float(np.asarray(v)[0]) for k, v in mem.items()}


def test_chunking_shrinks_the_loss_phase_of_a_published_layout() -> None:
    """Qwen3-30B-A3B, 32,768 tokens x V 151,936 = 4.98e9 logits: unchunked the compiled loss holds its bf16 logits and
    their gradient (4 bytes each, 18.55 GiB) and the layout does not fit 80 GiB at 5% headroom (77.5 GiB); in 8
    slices the loss phase is 4 h T + 6 V h + 4 L + 2 V h = 4.89 GiB and the device total drops by the difference
    (plus the cached fp32 block's share of it: autotune/predict/reserved.py)."""
    whole, sliced = _layout(0), _layout(8)
    assert whole["logits"] / GIB == pytest.approx(4 * 32768 * 151936 / GIB)
    h, V, T = 2048, 151936, 32768
    assert sliced["logits"] == 4 * T * h + 4 * V * h + 2 * V * h + 4 * T / 8 * V + 2 * V * h
    assert whole["device_total"] / GIB > 75.7 > sliced["device_total"] / GIB
    assert whole["device_total"] - sliced["device_total"] > whole["logits"] - sliced["logits"]


def test_loss_chunks_validation_and_rule() -> None:
    with pytest.raises(SpecError, match=r"train.loss_chunks=8 with train.framework=bench_model"):
        TrainSpec(seq_len=4096, global_batch_size=8, loss_chunks=8)
    with pytest.raises(SpecError, match=r"train.loss_chunks=-1"):
        TrainSpec(seq_len=4096, global_batch_size=8, loss_chunks=-1, framework="torchtitan")
    cfg = load_config(["cluster=h100-sxm-80gb", "model=llama-3.1-8b"])
    train = TrainSpec(seq_len=4096, global_batch_size=8, framework="torchtitan", loss_chunks=3)
    cfg = dataclasses.replace(cfg, train=train)
    reason = check_plan(ParallelPlan(dp=8, zero_stage=3), cfg.model, cfg.train, cfg.cluster)
    assert reason is not None and "train.loss_chunks=3 does not divide" in reason, reason
    ok = dataclasses.replace(train, loss_chunks=8)
    assert check_plan(ParallelPlan(dp=8, zero_stage=3), cfg.model, ok, cfg.cluster) is None
