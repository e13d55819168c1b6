"""bench_model against torchtitan 0.2.2 on the same layout and the same device: a plain training loop (forward, loss,
backward, AdamW step) on synthetic tokens, step time and peak memory of each; prints JSON (last line) with, per
variant (`dense`, `moe`), `speed_ratio` (bench_model tok/s / torchtitan tok/s) and `memory_ratio` (bench_model peak /
torchtitan peak).

torchtitan: its Llama 3 `Transformer` built from the same shapes as bench_model's (autotune.validation.
torchtitan_probe._model_args: exact FFN width), parallelised by its own `parallelize_llama` on a one-rank world
(gloo on CPU, NCCL on CUDA: nothing to shard at world 1, so what runs is its model, its activation checkpointing and,
with --compile, its per-block torch.compile), `init_weights()`, its `cross_entropy_loss` (sum) / tokens.
bench_model: `bench_model.model.Llama` parallelised by `bench_model.parallel.parallelize` with the same plan and
its trainer's loss (`bench_model.loss.lm_loss`: the fused chunked loss). Both fp32 on CPU, bf16 autocast-free
bf16 params on CUDA (`--dtype`). Peak: bytes allocated above what the model and its optimizer state hold before
the step (bench_model.metrics.step_peak_bytes: CPU allocator events, or CUDA max_memory_allocated), measured on
the step after warm-up (the AdamW states exist). Time: process CPU time on CPU (one thread), wall on CUDA.

MoE (variant `moe`, `--experts E --topk k --moe-ffn F`): torchtitan's Qwen3 MoE (`torchtitan.models.qwen3`, `parallelize_qwen3`) with
bench_model's shapes (every layer MoE, softmax router, top-k renormalised, no shared expert, no qk-norm) against
bench_model's MoE block (bench_model/moe.py).
Not covered: multi-rank layouts (FSDP / TP
need a world; the memory side of those is `autotune.validation.torchtitan_probe` / benchmarks/memory_vs_torchtitan.py).
CPU setup (torchtitan picks "cuda" without an accelerator): torchtitan.tools.utils.device_type and
torchtitan.distributed.parallel_dims.device_type set to "cpu" (/work/shared/reference/measured/README.md).

    .venv/bin/python benchmarks/vs_torchtitan_step.py [--hidden 256] [--layers 2] [--seq 256] [--mbs 2]
        [--vocab 32000] [--recompute none|selective|full] [--compile] [--steps 3] [--device cpu|cuda]
        [--variants dense,moe] [--experts 8] [--topk 2] [--moe-ffn 128]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from autotune.core.model import ModelSpec  # noqa: E402
from autotune.core.types import ParallelPlan  # noqa: E402
from bench_model.metrics import step_peak_bytes  # noqa: E402

# bench_model recompute -> torchtitan activation_checkpoint.mode (selective: its op-level SAC)
_AC = {"none": "none", "selective": "selective", "full": "full"}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def torchtitan_model(spec: ModelSpec, plan: ParallelPlan, seq: int, device: torch.device):
    import torchtitan.distributed.parallel_dims as tt_dims
    import torchtitan.tools.utils as tt_utils
    from torchtitan.components.loss import cross_entropy_loss
    from torchtitan.config import JobConfig
    from torchtitan.distributed import ParallelDims
    from torchtitan.models.llama3 import Transformer, parallelize_llama

    from autotune.validation.torchtitan_probe import _model_args

    tt_utils.device_type = tt_dims.device_type = device.type
    if device.type == "cpu" and spec.is_moe:
        _patch_histc_for_cpu()
    parallelize = parallelize_llama
    with torch.device("meta"):
        if spec.is_moe:
            net, parallelize = _qwen3_moe(spec, seq)
        else:
            net = Transformer(_model_args(spec, seq))
    dims = ParallelDims(dp_replicate=1, dp_shard=1, cp=1, tp=1, pp=1, ep=1, etp=1, world_size=1)
    dims.build_mesh()
    jc = JobConfig()
    jc.training.seq_len, jc.training.local_batch_size = seq, plan.micro_batch_size
    jc.activation_checkpoint.mode = _AC[plan.recompute]
    jc.activation_checkpoint.selective_ac_option = "op"
    jc.compile.enable = plan.compile
    jc.compile.components = ["model"]
    parallelize(net, dims, jc)
    net.to_empty(device=device)
    with torch.no_grad():
        net.init_weights(buffer_device=device)

    def loss_fn(tokens: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return cross_entropy_loss(net(tokens), labels) / labels.numel()

    return net, loss_fn


def _patch_histc_for_cpu() -> None:
    """torchtitan's MoE counts tokens per expert with torch.histc on the int64 expert ids, which CPU's histogram kernel
    does not implement ("histogram_cpu" not implemented for 'Long'); on CPU this process counts them in fp32 and
    casts back (exact: ids < 2^24), and its permutation uses its own CPU path (generate_permute_indices(use_cpu=True)).
    CPU-only patches like the device_type ones, never applied on CUDA."""
    if getattr(torch.histc, "_cpu_int_patch", False):
        return
    histc = torch.histc

    def patched(input, *args, **kwargs):
        if input.is_floating_point():
            return histc(input, *args, **kwargs)
        return histc(input.float(), *args, **kwargs).to(input.dtype)

    patched._cpu_int_patch = True
    torch.histc = patched
    # its token permutation for the grouped GEMM's alignment padding is a Triton kernel unless use_cpu=True
    import torchtitan.models.moe.utils as tt_moe_utils

    tt_moe_utils.generate_permute_indices = functools.partial(tt_moe_utils.generate_permute_indices, use_cpu=True)


def _qwen3_moe(spec: ModelSpec, seq: int):
    """torchtitan's Qwen3 MoE with bench_model's MoE shapes: every layer MoE, softmax router with top-k renormalised,
    no shared expert, no qk-norm (bench_model has none), no load-balancing bias update (bench_model runs no aux loss
    here either), grouped GEMM experts."""
    from torchtitan.models.moe import MoEArgs
    from torchtitan.models.qwen3 import parallelize_qwen3
    from torchtitan.models.qwen3.model.args import Qwen3ModelArgs
    from torchtitan.models.qwen3.model.model import Qwen3Model

    args = Qwen3ModelArgs(
        dim=spec.hidden_size, n_layers=spec.num_layers, n_heads=spec.num_heads, n_kv_heads=spec.num_kv_heads,
        vocab_size=spec.vocab_size, head_dim=spec.head_dim, hidden_dim=spec.ffn_hidden_size, qk_norm=False,
        max_seq_len=seq, rope_theta=spec.rope_theta, norm_eps=spec.norm_eps, moe_enabled=True,
        moe_inter_dim=spec.moe_ffn_hidden_size,
        moe_args=MoEArgs(
            num_experts=spec.num_experts, num_shared_experts=0, score_func="softmax", route_norm=True,
            top_k=spec.moe_router_topk, load_balance_coeff=None, use_grouped_mm=True,
        ),
    )  # fmt: skip
    return Qwen3Model(args), parallelize_qwen3


def bench_model_model(spec: ModelSpec, plan: ParallelPlan, seq: int, device: torch.device):
    from bench_model.loss import lm_loss
    from bench_model.model import Llama
    from bench_model.parallel import build_meshes, parallelize

    net = Llama(spec, seq)
    parallelize(net, build_meshes(plan, device.type, 1), plan, "fp32", compile=plan.compile, device_type=device.type)
    net = net.to(device)
    net.init_weights(0)

    def loss_fn(tokens: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return net(tokens, loss_fn=functools.partial(lambda y, head, h: lm_loss(head, h, y, plan.compile), labels))

    return net, loss_fn


def measure(build, spec: ModelSpec, plan: ParallelPlan, seq: int, steps: int, device: torch.device) -> dict:
    net, loss_fn = build(spec, plan, seq, device)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, spec.vocab_size, (plan.micro_batch_size, seq), generator=gen).to(device)
    labels = torch.randint(0, spec.vocab_size, (plan.micro_batch_size, seq), generator=gen).to(device)
    losses = []

    def step() -> None:
        loss = loss_fn(tokens, labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()))

    step()  # warm-up: compilation, the AdamW states
    peak = step_peak_bytes(step)
    clock = time.perf_counter if device.type == "cuda" else time.process_time
    best = float("inf")
    for _ in range(steps):
        _sync(device)
        t0 = clock()
        step()
        _sync(device)
        best = min(best, clock() - t0)
    tokens_n = plan.micro_batch_size * seq
    return {"step_s": best, "tokens_per_s": tokens_n / best, "peak_bytes": peak, "first_loss": losses[0]}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--ffn", type=int, default=704)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--mbs", type=int, default=2)
    ap.add_argument("--recompute", choices=tuple(_AC), default="none")
    ap.add_argument("--variants", default="dense,moe", help="dense (Llama 3), moe (Qwen3 MoE), or both")
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--topk", type=int, default=2)
    ap.add_argument("--moe-ffn", type=int, default=128)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dense = ModelSpec(
        name="vs-torchtitan",
        num_layers=args.layers,
        hidden_size=args.hidden,
        ffn_hidden_size=args.ffn,
        num_heads=args.heads,
        num_kv_heads=args.kv_heads,
        vocab_size=args.vocab,
    )
    moe = dataclasses.replace(
        dense, num_experts=args.experts, moe_router_topk=args.topk, moe_ffn_hidden_size=args.moe_ffn
    )
    specs = {"dense": dense, "moe": moe}
    plan = ParallelPlan(micro_batch_size=args.mbs, grad_accum_steps=1, recompute=args.recompute, compile=args.compile)
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo", store=dist.HashStore(), rank=0, world_size=1)
    out: dict = {
        "shape": {
            "hidden": args.hidden,
            "ffn": args.ffn,
            "heads": args.heads,
            "kv_heads": args.kv_heads,
            "layers": args.layers,
            "vocab": args.vocab,
            "seq": args.seq,
            "mbs": args.mbs,
            "recompute": args.recompute,
            "experts": args.experts,
            "topk": args.topk,
            "moe_ffn": args.moe_ffn,
            "compile": args.compile,
            "device": device.type,
            "threads": args.threads,
            "torch": torch.__version__,
        }
    }
    try:
        for variant in args.variants.split(","):
            tt = measure(torchtitan_model, specs[variant], plan, args.seq, args.steps, device)
            bm = measure(bench_model_model, specs[variant], plan, args.seq, args.steps, device)
            out[variant] = {
                "torchtitan": tt,
                "bench_model": bm,
                "speed_ratio": bm["tokens_per_s"] / tt["tokens_per_s"],
                "memory_ratio": bm["peak_bytes"] / tt["peak_bytes"],
            }
    finally:
        dist.destroy_process_group()
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
