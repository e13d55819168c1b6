"""Gradients of one training step of MoE layouts against the single-device model, inside ONE torchrun launch:

    torchrun --nproc-per-node N tests/distributed/moe_grads.py OUT.json SPEC.json [SPEC.json ...]

For each layout: the trainer's `compute_gradients(0)` (every micro-batch's backward and the reductions the
optimizer would step with), then every rank compares its routed experts' gradient slices (gathered over edp where
FSDP shards them) and the routers' gradients with the same step on the plain single-device Llama of the same init,
fed the whole global batch as one micro-batch (mean cross-entropy + the balance loss at weight 1). Rank 0 writes
{layout: {parameter: max |g - g_ref| / max |g_ref|}} with the worst rank's error of each parameter."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F


def _full(t: torch.Tensor) -> torch.Tensor:
    from torch.distributed.tensor import DTensor

    return t.full_tensor() if isinstance(t, DTensor) else t


def reference_grads(spec) -> dict[str, torch.Tensor]:
    from bench_model import data
    from bench_model.model import Llama
    from bench_model.parallel.expert_parallel import moe_modules

    t = spec.train
    model = Llama(spec.model, t.seq_len)
    model.init_weights(t.seed)
    for moe in moe_modules(model):
        moe.balanced = t.moe_routing == "balanced"
    tokens, labels = data.batch(t.seed, 0, range(t.global_batch_size), t.seq_len, spec.model.vocab_size, None)
    F.cross_entropy(model(tokens).flatten(0, 1), labels.flatten()).backward()
    return {n: p.grad for n, p in model.named_parameters() if p.grad is not None}


def compare(spec) -> dict[str, float]:
    from bench_model.trainer import build_trainer
    from bench_model.trial import init_distributed

    trainer = build_trainer(spec, init_distributed())
    trainer.compute_gradients(0)
    ref = reference_grads(spec)
    # every MoE layer's name on every rank (a pipeline stage reports 0 for the layers it does not hold), so the
    # worst-rank reduction below has the same shape everywhere
    m = spec.model
    errors = {
        f"layers.{i}.{w}": 0.0
        for i in range(m.num_layers)
        if m.is_moe_layer(i)
        for w in ("experts.w1", "experts.w2", "experts.w3", "gate")
    }
    for key, block in trainer.parts[0].layers.items():
        moe = block.feed_forward
        if not hasattr(moe, "experts"):
            continue
        for leaf in ("w1", "w2", "w3"):
            got = _full(getattr(moe.experts, leaf).grad)
            want = ref[f"layers.{key}.feed_forward.experts.{leaf}"]
            if moe.experts.shard is not None:  # this rank's (ep, etp) slice
                want = moe.experts.shard.take(leaf, want)
            errors[f"layers.{key}.experts.{leaf}"] = float((got - want).abs().max() / want.abs().max())
        want = ref[f"layers.{key}.feed_forward.gate.weight"]
        got = _full(moe.gate.weight.grad)
        errors[f"layers.{key}.gate"] = float((got - want).abs().max() / want.abs().max())
    names = sorted(errors)
    worst = torch.tensor([errors[n] for n in names], dtype=torch.float64)
    dist.all_reduce(worst, op=dist.ReduceOp.MAX)
    return dict(zip(names, worst.tolist()))


def main(argv: list[str]) -> int:
    from autotune.core.trial import TrialSpec

    out, specs = Path(argv[0]), [Path(a) for a in argv[1:]]
    results = {path.stem: compare(TrialSpec.from_json(path.read_text())) for path in specs}
    if int(os.environ["RANK"]) == 0:
        out.write_text(json.dumps(results))
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
