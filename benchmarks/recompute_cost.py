"""Wall-time cost of bench_model's activation recompute modes on one CPU: forward and backward of a bench_model Llama
(no data parallelism), per mode, relative to recompute=none; prints JSON. Target: selective <= 1.15x none per step.

Modes: none, selective (bench_model.parallel.recompute: region checkpoints around the norms and SwiGLU), full, and
`selective_op_sac` - the op-level selective checkpoint bench_model used before (a per-aten-op policy saving matmul
and attention outputs, torch.utils.checkpoint.create_selective_checkpoint_contexts; torchtitan's "op" SAC), kept here
only as the "before" reference. Modes are interleaved round by round and each keeps its best (minimum) time over the
rounds, so load from other processes on a shared machine hits every mode alike and is filtered out. By default
the clock is the process's CPU time (one intra-op thread), which other processes' load does not inflate.

    .venv/bin/python benchmarks/recompute_cost.py [--hidden 512] [--seq 512] [--layers 4] [--rounds 9] [--clock cpu|wall]
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper  # noqa: E402
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts  # noqa: E402

from autotune.core.model import ModelSpec
from bench_model.model import Llama  # noqa: E402
from bench_model.parallel.recompute import apply_recompute  # noqa: E402

MODES = ("none", "selective", "full", "selective_op_sac")


def _op_sac_policy(ctx, op, *args, **kwargs) -> CheckpointPolicy:
    aten = torch.ops.aten
    save = {
        aten.mm.default,
        aten.bmm.default,
        aten.addmm.default,
        aten._scaled_dot_product_flash_attention_for_cpu.default,
    }
    return CheckpointPolicy.MUST_SAVE if op in save else CheckpointPolicy.PREFER_RECOMPUTE


def apply_op_sac(model: Llama) -> None:
    """The previous selective mode (op-level SAC per block), for the before/after comparison."""
    ctx = functools.partial(create_selective_checkpoint_contexts, _op_sac_policy)
    for key, block in list(model.layers.items()):
        model.layers[key] = checkpoint_wrapper(block, context_fn=ctx, preserve_rng_state=False)


def build(spec: ModelSpec, seq: int, mode: str) -> Llama:
    model = Llama(spec, seq)
    model.init_weights(0)
    if mode == "selective_op_sac":
        apply_op_sac(model)
    else:
        apply_recompute(model, mode)
    return model


def time_step(model: Llama, tokens: torch.Tensor, clock) -> tuple[float, float]:
    t0 = clock()
    logits = model(tokens)
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), tokens.flatten())
    t1 = clock()
    loss.backward()
    t2 = clock()
    model.zero_grad(set_to_none=True)
    return t1 - t0, t2 - t1


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--ffn", type=int, default=1408)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1: steadiest on a shared box)")
    ap.add_argument(
        "--clock",
        choices=("cpu", "wall"),
        default="cpu",
        help="cpu: this process's CPU time (immune to other processes on a loaded machine; with one "
        "thread it is the step's cost, Python overhead included); wall: perf_counter",
    )
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    spec = ModelSpec(
        name="bench",
        num_layers=args.layers,
        hidden_size=args.hidden,
        ffn_hidden_size=args.ffn,
        num_heads=args.heads,
        num_kv_heads=args.kv_heads,
        vocab_size=args.vocab,
    )
    tokens = torch.randint(0, args.vocab, (args.batch, args.seq))
    models = {m: build(spec, args.seq, m) for m in MODES}
    clocks = {"cpu": time.process_time, "wall": time.perf_counter}
    clock = clocks[args.clock]
    for m in MODES:  # warm-up: allocator, kernels, checkpoint machinery
        time_step(models[m], tokens, clock)
    best = {m: [float("inf"), float("inf"), float("inf")] for m in MODES}
    for r in range(args.rounds):
        for m in MODES if r % 2 == 0 else MODES[::-1]:
            fwd, bwd = time_step(models[m], tokens, clock)
            b = best[m]
            b[0], b[1], b[2] = min(b[0], fwd), min(b[1], bwd), min(b[2], fwd + bwd)
    base = best["none"]
    out = {
        "shape": {
            "hidden": args.hidden,
            "ffn": args.ffn,
            "heads": args.heads,
            "kv_heads": args.kv_heads,
            "layers": args.layers,
            "seq": args.seq,
            "batch": args.batch,
            "vocab": args.vocab,
            "threads": args.threads,
            "rounds": args.rounds,
            "clock": args.clock,
            "torch": torch.__version__,
        },
        "modes": {
            m: {
                "fwd_s": best[m][0],
                "bwd_s": best[m][1],
                "step_s": best[m][2],
                "fwd_rel": best[m][0] / base[0],
                "bwd_rel": best[m][1] / base[1],
                "step_rel": best[m][2] / base[2],
            }
            for m in MODES
        },
    }
    out["target"] = {"selective_step_rel_max": 1.15, "met": out["modes"]["selective"]["step_rel"] <= 1.15}
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
