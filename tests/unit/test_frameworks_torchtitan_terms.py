"""The torchtitan profile's terms that its fake-mode probe (test_frameworks_torchtitan.py) cannot run, against figures
computed by hand from the model's shapes: FSDP2 inside a pipeline stage (parallelize.py apply_fsdp: no reshard after
forward under PP; torch/distributed/pipelining/stage.py: no gradient sync until the last micro-batch, so the unsharded
gradients accumulate in FSDP's reduce dtype) and the compiled loss (components/loss.py: compiled with the model since
2025, not at 9dec370). Sources cited in autotune/predict/frameworks/torchtitan.py ([PPF], [CLOSS])."""

from __future__ import annotations

import pytest

from autotune.core.plan_arrays import arrays_from_plans
from autotune.core.types import ParallelPlan, TrainSpec
from autotune.fitting.run_types import preset_model
from autotune.predict.frameworks.torchtitan import TorchtitanProfile
from autotune.predict.memory import memory_arrays
from autotune.spec.config import load_config

TT = TorchtitanProfile()
TRAIN = TrainSpec(seq_len=8192, global_batch_size=256, framework="torchtitan")  # bf16 compute, fp32 grads / reduce


@pytest.mark.parametrize(
    ("zero", "shard", "pp", "copy", "grads"),
    [
        (3, 8, 8, 2e9, 4e9),  # reshard "always" under PP still keeps the stage gathered: 2 B (bf16) + 4 B (fp32)
        (2, 8, 8, 0.0, 4e9),  # "never": model_states has the gathered copy already; the fp32 accumulation is new
        (3, 8, 1, 0.0, 0.0),  # no PP: FSDP reshards after forward and reduces every backward
        (3, 1, 8, 0.0, 0.0),  # dp*cp = 1: torchtitan applies no FSDP
    ],
)
def test_pipeline_held_by_hand(zero, shard, pp, copy, grads):
    held = TT.pipeline_held(1e9, zero, shard, pp, TRAIN)
    assert (float(held["compute_copy"]), float(held["grads"])) == (copy, grads)


def test_405b_pp8_first_stage_holds_its_gathered_bf16_copy_and_fp32_grads():
    """torchtitan's Table 5 layout (Llama 3.1 405B, FSDP 8 x TP 8 x PP 8, 1F1B). Rank 0 holds 15 layers (126 = 15 +
    6 x 16 + 15: generate_split_points @9dec370) and the vocab-parallel embedding. One layer at tp 8: attention
    (2 x 16384^2 + 2 x 16384 x 1024) / 8 + MLP 3 x 16384 x 53248 / 8 + two norms 2 x 16384 = 398,491,648; the embedding
    128256 x 16384 / 8 = 262,668,288; the stage 15 x 398,491,648 + 262,668,288 = 6,240,043,008 parameters."""
    model = preset_model("llama-3.1-405b")
    plan = ParallelPlan(dp=8, tp=8, pp=8, zero_stage=3, micro_batch_size=4, grad_accum_steps=8, recompute="full",
                        sequence_parallel=True, pp_schedule="1f1b")  # fmt: skip
    cluster = load_config(["cluster=h100-hbm2e-96gb"]).cluster
    mem = memory_arrays(arrays_from_plans([plan]), model, TRAIN, cluster)
    stage = 6_240_043_008
    assert int(mem["worst_pp_rank"][0]) == 0
    assert float(mem["compute_copy"][0]) == pytest.approx(2 * stage, rel=1e-12)  # bf16, all 8 micro-batches
    assert float(mem["grads"][0]) == pytest.approx(4 * stage / 8 + 4 * stage, rel=1e-12)  # fp32 shard + accumulated
    # the same layout without PP holds neither (one stage of 126 layers, so compare per-parameter: no gathered copy)
    flat = memory_arrays(arrays_from_plans([ParallelPlan(dp=64, tp=8, zero_stage=3, recompute="full",
                                                          sequence_parallel=True)]), model, TRAIN, cluster)  # fmt: skip
    assert float(flat["compute_copy"][0]) == 0.0


def test_compiled_loss_keeps_two_compute_dtype_copies_of_the_logits():
    """Llama 3.1 8B, local batch 2 x 8192 tokens, vocab 128256, tp 1 (the H200 page's layout): the compiled loss holds
    the bf16 logits and their bf16 gradient, 2 x 2 x 16384 x 128256 = 8,405,385,216 bytes; torchtitan at 9dec370
    (no compiled loss) the eager 12 bytes per logit, 25,216,155,648."""
    model = preset_model("llama-3.1-8b")
    tokens = 2 * 8192
    assert float(TT.compiled_logits(model, tokens, 1, 1, 2)) == 8_405_385_216
    dec2024 = TorchtitanProfile(compiled_loss=False)
    assert (
        float(dec2024.compiled_logits(model, tokens, 1, 1, 2))
        == 25_216_155_648
        == float(TT.logits(model, tokens, 1, 1, 2))
    )
    # loss parallel (tp > 1) keeps the eager account, 16 bytes per local logit
    assert float(TT.compiled_logits(model, tokens, 1, 8, 2)) == 16 * tokens * 128256 / 8
    plan = ParallelPlan(dp=32, zero_stage=3, micro_batch_size=2, recompute="selective", compile=True)
    cluster = load_config(["cluster=h200-141gb"]).cluster
    train = TrainSpec(seq_len=8192, global_batch_size=64, framework="torchtitan")
    arr = arrays_from_plans([plan])
    assert float(memory_arrays(arr, model, train, cluster)["logits"][0]) == 8_405_385_216
    assert float(memory_arrays(arr, model, train, cluster, dec2024)["logits"][0]) == 25_216_155_648


def test_dec2024_last_stage_keeps_every_micro_batch_logits():
    """torch.distributed.pipelining of Dec 2024 (stage.py `output_chunks`) under torchtitan 9dec370: the last stage of
    the 405B Table 5 layout keeps its 8 micro-batches' local logits, bf16: 8 x (4 x 8192) x 128256 / 8 x 2 =
    8,405,385,216 bytes; torchtitan 0.2.2 (return_outputs=False) keeps none."""
    from autotune.predict.frameworks.torchtitan import TORCHTITAN_2024_12

    model = preset_model("llama-3.1-405b")
    assert float(TORCHTITAN_2024_12.pipeline_outputs(model, 4 * 8192, 8, 8, 2)) == 8_405_385_216
    assert float(TT.pipeline_outputs(model, 4 * 8192, 8, 8, 2)) == 0.0


def test_default_reshard_policy_keeps_head_or_root_gathered_at_the_loss():
    """torchtitan's "default" policy (what its published runs used), Llama 3.1 8B, tp 1, bf16, pp 1. Since #1094 the
    [norm, output] unit stays gathered: (128256 x 4096 + 4096) x 2 = 1,050,681,344 bytes. Before, the root unit
    (embedding, norm, output) and the last block: + 128256 x 4096 x 2 + 218,112,000 x 2 (one block: attention
    2 x 4096^2 + 2 x 4096 x 1024, MLP 3 x 4096 x 14336, norms 2 x 4096) = 2,537,578,496. autotune's export ("always")
    keeps none; under PP the whole stage is held instead (pipeline_held)."""
    from autotune.predict.frameworks.torchtitan import TORCHTITAN_2024_12, TORCHTITAN_DEFAULT

    model = preset_model("llama-3.1-8b")
    assert float(TORCHTITAN_DEFAULT.gathered_at_loss(model, 1, 1, 2)) == 1_050_681_344
    assert float(TORCHTITAN_2024_12.gathered_at_loss(model, 1, 1, 2)) == 2_537_578_496
    assert (
        float(TT.gathered_at_loss(model, 1, 1, 2)) == 0.0 == float(TORCHTITAN_DEFAULT.gathered_at_loss(model, 8, 1, 2))
    )


def test_dec2024_optimizer_step_is_foreach_adamw():
    """torchtitan 9dec370 builds AdamW with foreach=not optimizer.fused (default False): foreach AdamW's fp32 sqrt
    temporary over the rank's parameter shard. The 405B Table 5 rank 0 (6,240,043,008 local parameters, FSDP over 8):
    4 x 780,005,376 = 3,120,021,504 bytes, rounded up to the allocator's 2 MiB (3,120,562,176). From 820504e on the
    step is the fused kernel: nothing."""
    from autotune.predict.frameworks.torchtitan import TORCHTITAN_2024_12, TORCHTITAN_2025_06

    arr = arrays_from_plans([ParallelPlan(dp=8, tp=8, pp=8, zero_stage=3)])
    got = TORCHTITAN_2024_12.step_temporaries(6_240_043_008, 3, 8, arr, 2)
    assert float(got) == 3_120_562_176 == 2**21 * -(-3_120_021_504 // 2**21)
    assert float(TORCHTITAN_2025_06.step_temporaries(6_240_043_008, 3, 8, arr, 2)) == 0.0


def test_compiled_loss_saves_the_same_at_scout_size_as_at_8b_size():
    """[CLOSS] at the size of the torchao Llama-4-Scout rows (moe_blackwell r015-r018: mbs 8 x 8192 tokens x V 202048 =
    13.2e9 logits, past 2^31) the min-cut partitioner saves what it saves at Llama 3.1 8B's 16384 x 128256: the bf16
    logits (the graph's input), the labels and two fp32 values per token, so the profile's 2c per logit holds there
    too (traced under FakeTensorMode: no memory)."""
    import torch
    from torch._functorch.aot_autograd import aot_function
    from torch._functorch.partitioners import min_cut_rematerialization_partition
    from torch._inductor.decomposition import select_decomp_table
    from torch._subclasses.fake_tensor import FakeTensorMode

    def ce(pred, labels):  # components/loss.py cross_entropy_loss @06bbcd20 (mean reduction)
        return torch.nn.functional.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))

    def saved(b: int, s: int, v: int) -> list:
        out = []

        def fw(gm, _):
            ret = next(n for n in gm.graph.nodes if n.op == "output").args[0]
            out.extend((tuple(a.meta["val"].shape), a.meta["val"].dtype) for a in ret[1:])
            return gm

        with FakeTensorMode():
            pred = torch.empty(b, s, v, dtype=torch.bfloat16, requires_grad=True)
            f = aot_function(ce, fw_compiler=fw, bw_compiler=lambda gm, _: gm, decompositions=select_decomp_table(),
                             partition_fn=min_cut_rematerialization_partition)  # fmt: skip
            f(pred, torch.empty(b, s, dtype=torch.long)).backward()
        return out

    n, scout = 8 * 8192, saved(8, 8192, 202048)
    assert scout == [
        ((8, 8192, 202048), torch.bfloat16),
        ((8, 8192), torch.int64),
        ((n, 1), torch.float32),
        ((n, 1), torch.float32),
        ((), torch.float32),
    ]
    assert [dt for _, dt in saved(2, 8192, 128256)] == [dt for _, dt in scout]
