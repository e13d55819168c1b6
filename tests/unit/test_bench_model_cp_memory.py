"""bench_model's own context parallelism (bench_model/parallel/context_parallel.py): SDPA on all-gathered K/V with an
explicit (seq, cp*seq) mask, which torch turns into an additive mask of the query dtype per call and saves for backward
(autotune/predict/frameworks/bench_model_activations.py [CPMEM]). Figures by hand from the tiny model's shapes
(search_spaces/model/tiny.yaml: h 128, 8 heads, 4 KV heads of 16 -> kv_dim 64), then against what autograd really
saves (saved_tensors_hooks, real CPU tensors on a fake process group) and against `probe-memory`'s exact peak."""

from __future__ import annotations

import torch
import torch.distributed as dist

from autotune.layouts.estimate import estimate
from autotune.predict.frameworks.bench_model import BenchModelProfile
from autotune.results.trialfile import make_spec
from autotune.spec.config import load_config
from bench_model.memory_probe import probe_memory

PROF = BenchModelProfile()
TINY = load_config([]).model
SHORT = ["model.num_layers=2"]  # two blocks keep the probes to a few seconds


def test_saved_bytes_by_hand():
    """cp 2, seq_len 1024 -> 512 local tokens, bf16, mbs 1, tp 1. Gathered K and V: (2 - 1) x 512 x 2 B x (64 + 64)
    = 131,072 more than the local ones (context_parallel.py `_AllGatherSeq.forward`); the mask SDPA saves, (512, 1024)
    in bf16 (attention.cpp `convert_boolean_attn_mask`): 1,048,576. Sum 1,179,648."""
    assert float(PROF.context_parallel_saved(TINY, 512, 1, 1, 2, 2)) == 1_179_648
    # tp 2 halves the K/V heads, not the mask (every tp rank builds the same one): 65,536 + 1,048,576
    assert float(PROF.context_parallel_saved(TINY, 512, 1, 2, 2, 2)) == 1_114_112
    # mbs 2 doubles K/V; the mask broadcasts over the batch: 262,144 + 1,048,576
    assert float(PROF.context_parallel_saved(TINY, 512, 2, 1, 2, 2)) == 1_310_720
    # cp 4, seq_len 1024 -> 256 local: K/V 3 x 256 x 2 x 128 = 196,608; mask 256 x 1024 x 2 = 524,288
    assert float(PROF.context_parallel_saved(TINY, 256, 1, 1, 4, 2)) == 720_896
    assert float(PROF.context_parallel_saved(TINY, 1024, 1, 1, 1, 2)) == 0.0  # causal SDPA, no mask


def test_transient_and_cached_mask_by_hand():
    """The SDPA backward's dK, dV at the gathered length: (cp - 1) x 512 x 2 B x 128 = 131,072 at cp 2 (u = 65,536 per
    K or V); the bool mask `ContextParallelAttention.mask` caches once per rank: 512 x 1024 x 1 B = 524,288."""
    assert float(PROF.context_parallel_transient(TINY, 512, 1, 2, 2)) == 131_072
    assert float(PROF.context_parallel_transient(TINY, 256, 1, 4, 2)) == 3 * 65_536
    assert float(PROF.context_parallel_buffers(512, 2)) == 524_288
    assert float(PROF.context_parallel_transient(TINY, 1024, 1, 1, 2)) == 0.0
    assert float(PROF.context_parallel_buffers(1024, 1)) == 0.0


def _layer0_saved_bytes(num_gpus: int, overrides: list[str]) -> int:
    """Bytes of the distinct storages autograd saves inside block 0 for one micro-batch (real tensors, fake group)."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from bench_model.parallel.data_parallel import set_gradient_sync
    from bench_model.trainer import build_trainer

    cfg = load_config(SHORT + overrides)
    plan = cfg.plan(num_gpus)
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=plan.world_size)
    try:
        trainer = build_trainer(make_spec(cfg, plan, sweep_id="t", trial_id="t"), torch.device("cpu"))
        block, seen, inside = trainer.parts[0].layers["0"], {}, [False]
        block.register_forward_pre_hook(lambda *_: inside.__setitem__(0, True))
        block.register_forward_hook(lambda *_: inside.__setitem__(0, False))

        def pack(t):
            if inside[0]:
                seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
            return t

        tokens, labels = trainer.local_batch(0, range(plan.micro_batch_size))
        set_gradient_sync(trainer.parts, plan.zero_stage, True)
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            trainer.microbatch_backward(tokens, labels)
    finally:
        dist.destroy_process_group()
    return sum(seen.values())


def test_saved_term_is_what_autograd_keeps():
    """The same 512 local tokens at cp 1 (seq 512) and cp 2 (seq 1024): block 0 saves exactly the hand term more
    (the weights' bf16 casts, norms, MLP and RoPE tables are the same at the same local length)."""
    extra = _layer0_saved_bytes(4, ["plan.cp=2", "train.seq_len=1024"]) - _layer0_saved_bytes(
        2, ["plan.cp=1", "train.seq_len=512"]
    )
    assert extra == 1_179_648 == float(PROF.context_parallel_saved(TINY, 512, 1, 1, 2, 2))


def _allocated(num_gpus: int, overrides: list[str]) -> tuple[float, float]:
    cfg = load_config(SHORT + overrides)
    probe = probe_memory(make_spec(cfg, cfg.plan(num_gpus), sweep_id="t", trial_id="t"))
    return estimate(cfg, num_gpus)["mem_allocated_bytes"], probe["mem_allocated_bytes"]


def test_estimate_follows_the_probe_as_cp_grows():
    """`probe-memory` (FakeTensorMode + MemTracker on a fake group, the exact peak of rank 0) at cp 4, seq 2048 against
    cp 1, seq 512 (the same 512 local tokens, dp 2 both): the peak grows by the two blocks' gathered K/V and masks and
    the cached bool mask (measured: 6,033,400 bytes). The estimate grows by the same plus one layer's backward
    transient (the gathered dK/dV, 3 x 512 x 2 x 128 = 393,216), which it adds to every phase (bench_model's
    `allocated` is a conservative sum) while the probe's peak is at the loss, before any layer's backward: within
    that transient + 0.1%. Before the term the estimate did not grow at all. Both sides' absolute peaks differ by the
    same conservative sum at cp 1 (gradients and the loss chunk counted with the activations): not what this checks."""
    e1, p1 = _allocated(2, ["plan.cp=1", "train.seq_len=512"])
    e4, p4 = _allocated(8, ["plan.cp=4", "train.seq_len=2048"])
    # by hand, per block: K/V 3 x 512 x 2 x 128 = 393,216, mask 512 x 2048 x 2 = 2,097,152; bool mask 1,048,576 once
    saved = 2 * (393_216 + 2_097_152) + 1_048_576
    assert abs((p4 - p1) - saved) <= 0.001 * saved
    transient = float(PROF.context_parallel_transient(TINY, 512, 1, 4, 2))
    assert transient == 393_216
    assert (p4 - p1) <= (e4 - e1) <= (p4 - p1) + transient + 0.001 * (p4 - p1)
