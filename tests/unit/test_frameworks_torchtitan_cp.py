"""torchtitan's context parallelism: torch's ring attention (torch/distributed/tensor/experimental/_attention.py,
`_templated_ring_attention_backward` with the `_AllGatherRotater` torchtitan selects by default) holds, inside one
layer's backward, the all-gathered K/V of the cp ranks, fp32 accumulators for dQ, dK, dV and the fp32 dK/dV ring
buffers (autotune/predict/frameworks/torchtitan.py [CP]). Figures by hand from the model shapes; the rows are
torchtitan's Dec 2024 benchmark page (benchmarks/llama3_h100_202412_torchtitan.md Table 6: Llama 3.1 405B, TP 8, PP 8,
local batch 8 = 8 micro-batches of 1, sequence 32768 per cp rank)."""

from __future__ import annotations

import pytest

from autotune.core.plan_arrays import arrays_from_plans
from autotune.core.types import ParallelPlan, TrainSpec
from autotune.fitting.run_types import preset_model
from autotune.predict.frameworks.torchtitan import TORCHTITAN_2024_12, TorchtitanProfile
from autotune.predict.memory import memory_arrays
from autotune.spec.config import load_config

M405 = preset_model("llama-3.1-405b")  # q_dim 16384 (128 heads x 128), kv_dim 1024 (8 KV heads)
TOK = 32768  # local tokens: one micro-batch of seq_len / cp


def test_ring_term_by_hand_with_repeated_kv():
    """9dec370 repeats K/V to the 16 local query heads (models/llama/model.py repeat_kv), so u_q = u_kv =
    32768 x 16384 / 8 = 67,108,864 elements. cp 8: gathered cat(K, V) 2 x 8 x u x 2 B = 2,147,483,648; fp32 dQ, dK,
    dV 3 x 4u = 805,306,368; the dK/dV send and receive buffers 2 x 8u = 1,073,741,824: 4,026,531,840 bytes."""
    assert float(TORCHTITAN_2024_12.context_parallel_transient(M405, TOK, 8, 8, 2)) == 4_026_531_840
    # cp 2: the gather is 4x smaller (2 x 2 x u x 2 B = 536,870,912), the accumulators the same
    assert float(TORCHTITAN_2024_12.context_parallel_transient(M405, TOK, 8, 2, 2)) == 2_415_919_104


def test_ring_term_by_hand_with_gqa_kv_heads():
    """0.2.2 passes enable_gqa: K/V keep the one local KV head, u_kv = 32768 x 1024 / 8 = 4,194,304. cp 8: gathered
    2 x 8 x u_kv x 2 B = 134,217,728; fp32 accumulators 4 x (67,108,864 + 2 x 4,194,304) = 301,989,888; ring buffers
    16 x 4,194,304 = 67,108,864: 503,316,480 bytes."""
    assert float(TorchtitanProfile().context_parallel_transient(M405, TOK, 8, 8, 2)) == 503_316_480


@pytest.mark.parametrize("prof", [TORCHTITAN_2024_12, TorchtitanProfile()])
def test_no_ring_without_context_parallelism(prof):
    assert float(prof.context_parallel_transient(M405, TOK, 8, 1, 2)) == 0.0


def _peak(cp: int, seq: int) -> float:
    cfg = load_config(["cluster=h100-hbm2e-96gb"])
    train = TrainSpec(seq_len=seq, global_batch_size=8 * 8 // cp, framework="torchtitan")
    plan = ParallelPlan(dp=8 // cp, tp=8, pp=8, cp=cp, zero_stage=3, micro_batch_size=1, grad_accum_steps=8,
                        recompute="full", sequence_parallel=True, compile=True, fp8="tensorwise")  # fmt: skip
    return float(memory_arrays(arrays_from_plans([plan]), M405, train, cfg.cluster, TORCHTITAN_2024_12)["allocated"][0])


def test_ring_term_adds_to_the_first_stage_backward_peak():
    """Table 6 'FSDP 1, CP 8' against 'FSDP 8, CP 1': the same local tokens, the same FSDP group (dp x cp = 8), the same
    stage; rank 0 has no loss, so its peak is a block's backward and grows by the whole ring term (measured: 84.9 vs
    75.3 GiB; this term is 3.75 GiB of the 9.6)."""
    assert _peak(8, 262144) - _peak(1, 32768) == pytest.approx(4_026_531_840, abs=1.0)
