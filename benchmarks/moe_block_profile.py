"""Per-op cost of bench_model's MoE block (bench_model/moe.py) on one device: forward + backward of each stage run
on its own, with the shapes the block gives it, plus the whole block; prints JSON (last line).

Stages (what MoE.forward does, in order):
  router        F.linear(x, gate).float() and softmax                 (N, E)
  topk          scores.topk(k), gather of the chosen scores, renormalisation
  counts        tokens per expert: bincount(...).tolist() (the host sync learned routing needs)
  permute       argsort of the expert ids, x.index_select(0, order // k) -> (N*k, H) sorted by expert
  grouped_gemm  GroupedExperts: w1/w3 GEMMs, SwiGLU, w2 GEMM          (torch._grouped_mm or a per-expert loop)
  unpermute     index_copy_ back to slot order
  combine       weighted sum over the k slots, a (1, k) x (k, H) bmm per token
  aux_loss      the sequence-wise balance loss (DeepSeek-V3 Eqs. 17-20)
`before`: permute with x[order // k] and combine as an (N, k, H) product + sum, what the block ran before issue 29.
Each stage's `share` is its time over the sum of the stages; `block_s` times MoE.forward + backward as the trainer
runs it. Defaults: Qwen3-30B-A3B's expert shape cut down for a CPU (E = 128, k = 8, F/H = 768/2048 kept as a ratio at
H = 256, F = 96), softmax router, fp32 on CPU (the CPU grouped GEMM runs in fp32), one thread, process CPU time best
of --rounds. On CUDA (--device cuda) bf16 and wall time with synchronisation.

    .venv/bin/python benchmarks/moe_block_profile.py [--tokens 2048] [--hidden 256] [--ffn 96] [--experts 128]
        [--topk 8] [--rounds 5] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from autotune.core.model import ModelSpec  # noqa: E402
from bench_model.moe import MoE, expert_counts  # noqa: E402

STAGES = ("router", "topk", "counts", "permute", "grouped_gemm", "unpermute", "combine", "aux_loss")
BEFORE = ("permute_before", "combine_before")  # the ops issue 29 replaced, timed for the before/after


def _leaf(t: torch.Tensor) -> torch.Tensor:
    return t.detach().clone().requires_grad_(t.is_floating_point())


def _backward(out: torch.Tensor) -> None:
    if out.requires_grad:
        out.backward(torch.ones_like(out))


def stage_fns(moe: MoE, x: torch.Tensor, seq: int) -> dict:
    """Each stage as a closure over inputs captured once from a real forward (leaves, so backward stops there)."""
    n, h, k = x.shape[0], x.shape[1], moe.topk
    with torch.no_grad():
        scores, topi, topv = moe.route(x)
        order = torch.argsort(topi.reshape(-1), stable=True)
        counts = expert_counts(topi, moe.num_experts, False)
        xs = x[order // k]
        ys = moe.experts(xs, counts)
    gate_x = _leaf(x)

    def router():
        _backward(F.linear(gate_x, moe.gate.weight).float().softmax(-1))

    s_leaf = _leaf(scores)

    def topk():
        ti = s_leaf.topk(k, dim=-1).indices
        tv = s_leaf.gather(-1, ti)
        _backward(tv / tv.sum(-1, keepdim=True))

    def count():
        expert_counts(topi, moe.num_experts, False)

    x_leaf, xs_leaf, ys_leaf, topv_leaf = _leaf(x), _leaf(xs), _leaf(ys), _leaf(topv)

    def permute():
        o = torch.argsort(topi.reshape(-1), stable=True)
        _backward(x_leaf.index_select(0, o // k))

    def permute_before():
        o = torch.argsort(topi.reshape(-1), stable=True)
        _backward(x_leaf[o // k])

    def grouped_gemm():
        _backward(moe.experts(xs_leaf, counts))

    def unpermute():
        _backward(torch.empty_like(ys_leaf).index_copy_(0, order, ys_leaf))

    def combine():
        _backward(torch.bmm(topv_leaf.unsqueeze(1), ys_leaf.view(-1, k, h)).squeeze(1))

    def combine_before():
        _backward((ys_leaf.view(-1, k, h) * topv_leaf.unsqueeze(-1)).sum(1))

    def aux():
        _backward(moe.aux_loss(s_leaf, topi, n // seq))

    return dict(
        router=router,
        topk=topk,
        counts=count,
        permute=permute,
        grouped_gemm=grouped_gemm,
        unpermute=unpermute,
        combine=combine,
        aux_loss=aux,
        permute_before=permute_before,
        combine_before=combine_before,
    )


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--seq", type=int, default=1024, help="sequence length of the aux loss (tokens = batch * seq)")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--ffn", type=int, default=96)
    ap.add_argument("--experts", type=int, default=128)
    ap.add_argument("--topk", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    spec = ModelSpec(
        name="moe-profile",
        num_layers=1,
        hidden_size=args.hidden,
        ffn_hidden_size=4 * args.hidden,
        num_heads=4,
        num_kv_heads=4,
        vocab_size=128,
        num_experts=args.experts,
        moe_router_topk=args.topk,
        moe_ffn_hidden_size=args.ffn,
        moe_aux_loss_coeff=1e-3,
        moe_layer_freq=1,
    )
    gen = torch.Generator().manual_seed(0)
    moe = MoE(spec, args.seq)
    with torch.no_grad():
        for p in moe.parameters():
            p.normal_(0, 0.02, generator=gen)
    moe = moe.to(device, dtype)
    x = torch.randn(args.tokens, args.hidden, generator=gen).to(device, dtype)
    fns = stage_fns(moe, x, args.seq)
    xb = x.view(args.tokens // args.seq, args.seq, args.hidden).clone().requires_grad_(True)

    def block():
        moe(xb).float().sum().backward()

    fns["block"] = block
    clock = time.process_time if device.type == "cpu" else time.perf_counter
    best = dict.fromkeys(fns, float("inf"))
    for r in range(args.rounds + 1):  # round 0 is warm-up
        for name, fn in fns.items():
            if device.type == "cuda":
                torch.cuda.synchronize()
            t0 = clock()
            fn()
            if device.type == "cuda":
                torch.cuda.synchronize()
            if r:
                best[name] = min(best[name], clock() - t0)
        moe.zero_grad(set_to_none=True)
    total = sum(best[s] for s in STAGES)
    out = {
        "shape": {
            "tokens": args.tokens,
            "seq": args.seq,
            "hidden": args.hidden,
            "ffn": args.ffn,
            "experts": args.experts,
            "topk": args.topk,
            "dtype": str(dtype).removeprefix("torch."),
            "device": device.type,
            "threads": args.threads,
            "rounds": args.rounds,
            "grouped_gemm_path": moe.experts.path,
            "torch": torch.__version__,
        },
        "ops": {s: {"fwd_bwd_s": best[s], "share": best[s] / total} for s in STAGES},
        "stages_sum_s": total,
        "block_s": best["block"],
        "dominant": max(STAGES, key=lambda s: best[s]),
        "before": {s.removesuffix("_before"): best[s] for s in BEFORE},
    }
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
