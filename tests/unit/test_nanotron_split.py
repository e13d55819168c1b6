"""nanotron's compute-balanced pipeline split (autotune/predict/frameworks/nanotron_split.py), hand-computed from
huggingface/nanotron branch bench_cluster @ a27e8fe8 models/base.py:215-237 (the walk) and models/llama.py:812-823 (the
costs), on bench_cluster's llama-1B (bench_cluster/create_configs.py @ f55b5e5 `update_config_based_on_model`: h 2048,
f 4096, 24 layers, 32 heads, MHA; V = the GPT-2 tokenizer's 50,257; tied)."""

from __future__ import annotations

import numpy as np
import pytest

from autotune.core.model import ModelSpec
from autotune.core.plan_arrays import arrays_from_plans
from autotune.core.types import ClusterSpec, ParallelPlan, TrainSpec
from autotune.layouts.rules import rejections
from autotune.predict.frameworks.nanotron import nanotron_layer_bytes_per_token
from autotune.predict.frameworks.nanotron_split import nanotron_empty_ranks, nanotron_layers_of_rank
from autotune.predict.memory import memory_arrays

GiB = 2**30
BC_1B = ModelSpec(
    name="bench_cluster-llama-1B", num_layers=24, hidden_size=2048, ffn_hidden_size=4096, num_heads=32,
    num_kv_heads=32, vocab_size=50257, tie_embeddings=True,
)  # fmt: skip
# a decoder layer: 4 * 32 * 64 * 2048 + 3 * 4096 * 2048 = 16,777,216 + 25,165,824 = 41,943,040; the lm_head
# 50,257 * 2048 = 102,926,336 (2.454 layers); total 24 * 41,943,040 + 102,926,336 = 1,109,559,296 = 26.454 layers
CLUSTER = ClusterSpec(
    name="c", device_memory_bytes=80 * GiB, peak_flops_bf16=1e15, peak_flops_fp32=1e14, gpus_per_node=8,
    intra_node_bw_bytes_per_s=1e11, intra_node_latency_s=1e-6, inter_node_bw_bytes_per_s=1e10, inter_node_latency_s=1e-5,
)  # fmt: skip


@pytest.mark.parametrize(
    "pp,layers",
    [
        (1, [24]),
        # thresholds 13.227 / 26.454 layers: rank 0 takes layers 1-14 (the 14th passes 13.227)
        (2, [14, 10]),
        # thresholds 6.614 / 13.227 / 19.841: 1-7, 8-14, 15-20, then 21-24 with the head
        (4, [7, 7, 6, 4]),
        # every 3.307 layers: 1-4, 5-7, 8-10, 11-14, 15-17, 18-20, 21-24; the 24th passes 23.148, so the final norm,
        # lm_head, cast and loss are all rank 7's
        (8, [4, 3, 3, 4, 3, 3, 4, 0]),
    ],
)
def test_walk_on_bench_cluster_llama_1b(pp, layers):
    assert nanotron_layers_of_rank(BC_1B, pp, np.arange(pp)).tolist() == layers
    assert int(nanotron_empty_ranks(BC_1B, pp)) == 0


def test_ranks_left_without_a_block_are_refused():
    """pp=32 on llama-1B: one layer per rank up to rank 23; the final norm (cumulative 24 > 23.97), lm_head, cast and
    loss then each move one rank on (ranks 24-27), leaving ranks 28-31 empty (pp > L is refused before, generically).
    A refusal the generic rules do not make: 8 layers of h 256 (790,528 each: 4*8*32*256 + 3*688*256) and V 128,000
    (32,768,000 = 41.45 layers) at pp=4: thresholds 12.36 / 24.73 / 37.09 layers, so rank 0 takes all 8 layers, the
    norm and the lm_head, which passes the first threshold; cast and loss move on to ranks 1 and 2, rank 3 is empty.
    nanotron builds nothing there and bench_cluster's `is_enough_layers_for_pp` skips the layout."""
    assert int(nanotron_empty_ranks(BC_1B, 32)) == 4
    big_vocab = ModelSpec(
        name="v", num_layers=8, hidden_size=256, ffn_hidden_size=688, num_heads=8, num_kv_heads=8, vocab_size=128000
    )
    assert nanotron_layers_of_rank(big_vocab, 4, np.arange(4)).tolist() == [8, 0, 0, 0]
    assert int(nanotron_empty_ranks(big_vocab, 4)) == 1
    train = TrainSpec(seq_len=256, global_batch_size=4, framework="nanotron")
    ids, reasons = rejections(arrays_from_plans([ParallelPlan(pp=4, grad_accum_steps=4)]), big_vocab, train, CLUSTER)
    assert ids[0] == "nanotron_pp_blocks"
    assert reasons[0].startswith("nanotron: pp=4: ") and "leaves 1 pipeline rank(s) without a block" in reasons[0]
    ids, _ = rejections(arrays_from_plans([ParallelPlan(pp=2, grad_accum_steps=4)]), big_vocab, train, CLUSTER)
    assert ids[0] is None


def test_rank0_activations_follow_the_walk():
    """pp=2, 1f1b, m=2, mbs 1, tp 1: rank 0 holds 2 micro-batches in flight of its 14 layers (an even split: 12)."""
    plan = ParallelPlan(pp=2, grad_accum_steps=2)
    train = TrainSpec(seq_len=4096, global_batch_size=2, framework="nanotron")
    mem = memory_arrays(arrays_from_plans([plan]), BC_1B, train, CLUSTER)
    assert int(mem["worst_pp_rank"][0]) == 0 and int(mem["worst_pp_rank_layers"][0]) == 14
    per_layer = 4096 * float(nanotron_layer_bytes_per_token(BC_1B, 1, False, 2))
    assert float(mem["activations"][0]) == pytest.approx(14 * 2 * per_layer)
