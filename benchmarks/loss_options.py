"""Time and peak memory of the LM-head + cross-entropy options bench_model could use, forward + backward of one
micro-batch's loss at a 128k vocabulary (Llama 3's 128,256) and a small hidden size; prints JSON (last line).

Options (bench_model/loss.py implements the trainer's two):
  unchunked_eager        F.cross_entropy(F.linear(h, W).float(), y): the whole micro-batch's logits
  unchunked_compiled     the same under torch.compile (Inductor fuses the log-softmax and its backward)
  chunked_ckpt           bench_model's loss before issue 29: chunks of --chunk tokens under non-reentrant checkpoint,
                         recomputed in backward (one extra head GEMM per chunk)
  chunked_ckpt_compiled  the same with each chunk's head + loss compiled
  fused                  bench_model.loss.fused_linear_cross_entropy: gradients computed in forward per chunk, no
                         recompute (Liger-Kernel's FusedLinearCrossEntropy)
  fused_compiled         the same with the per-chunk softmax - onehot compiled
  fused_compiled_c<N>    fused_compiled at other chunk sizes (--chunk-choices)

Time: this process's CPU time (one intra-op thread by default: other engineers' load on a shared box does not inflate
it), options interleaved round by round, best (minimum) per option. Peak: the largest sum of live bytes allocated
during the step above what existed before it (h, W, labels), from the CPU allocator's events under
torch.profiler(profile_memory=True), which sees Inductor's buffers too; on CUDA torch.cuda.max_memory_allocated
(bench_model.metrics.step_peak_bytes).
`target`: the chosen option (fused_compiled) within 5% of unchunked_compiled's time and 10% of chunked_ckpt's peak.

    .venv/bin/python benchmarks/loss_options.py [--tokens 2048] [--hidden 128] [--vocab 128256] [--chunk 1024]
        [--chunk-choices 512,2048] [--rounds 3] [--dtype float32|bfloat16] [--device cpu|cuda]
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
import torch.nn.functional as F  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402

from bench_model import loss as bm_loss  # noqa: E402
from bench_model.metrics import step_peak_bytes  # noqa: E402

CHOSEN = "fused_compiled"


def _unchunked(head: torch.nn.Linear, h: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(head(h).float(), y)


def _chunked_ckpt(chunk_fn, chunk: int, head: torch.nn.Linear, h: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    total = sum(
        checkpoint(chunk_fn, head, hc, yc, use_reentrant=False) for hc, yc in zip(h.split(chunk), y.split(chunk))
    )
    return total / y.numel()


def options(chunk: int, choices: list[int]) -> dict:
    compiled_chunk = torch.compile(bm_loss._chunk_loss_sum)
    out = {
        "unchunked_eager": _unchunked,
        "unchunked_compiled": torch.compile(_unchunked),
        "chunked_ckpt": functools.partial(_chunked_ckpt, bm_loss._chunk_loss_sum, chunk),
        "chunked_ckpt_compiled": functools.partial(_chunked_ckpt, compiled_chunk, chunk),
        "fused": functools.partial(bm_loss.fused_linear_cross_entropy, chunk=chunk, compiled=False),
        "fused_compiled": functools.partial(bm_loss.fused_linear_cross_entropy, chunk=chunk, compiled=True),
    }
    for c in choices:
        out[f"fused_compiled_c{c}"] = functools.partial(bm_loss.fused_linear_cross_entropy, chunk=c, compiled=True)
    return out


def step(fn, head, h, y) -> None:
    fn(head, h, y).backward()
    head.weight.grad, h.grad = None, None


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, head, h, y, clock) -> float:
    sync(h.device)
    t0 = clock()
    step(fn, head, h, y)
    sync(h.device)
    return clock() - t0


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--chunk", type=int, default=bm_loss.LOSS_CHUNK_TOKENS)
    ap.add_argument("--chunk-choices", default="512,2048", help="comma-separated extra chunk sizes for fused_compiled")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    choices = [int(c) for c in args.chunk_choices.split(",") if c]
    gen = torch.Generator().manual_seed(0)
    head = torch.nn.Linear(args.hidden, args.vocab, bias=False)
    with torch.no_grad():
        head.weight.normal_(0, 0.02, generator=gen)
    head = head.to(device, dtype)
    h = torch.randn(args.tokens, args.hidden, generator=gen).to(device, dtype).requires_grad_()
    y = torch.randint(0, args.vocab, (args.tokens,), generator=gen).to(device)
    opts = options(args.chunk, choices)
    clock = time.perf_counter if device.type == "cuda" else time.process_time
    peaks, losses = {}, {}
    for name, fn in opts.items():  # warm-up (compiles), loss value and peak
        step(fn, head, h, y)
        losses[name] = float(fn(head, h, y).detach())
        peaks[name] = step_peak_bytes(functools.partial(step, fn, head, h, y))
    best = dict.fromkeys(opts, float("inf"))
    for r in range(args.rounds):
        for name in list(opts) if r % 2 == 0 else list(opts)[::-1]:
            best[name] = min(best[name], timed(opts[name], head, h, y, clock))
    base_t, base_m = best["unchunked_compiled"], peaks["chunked_ckpt"]
    out = {
        "shape": {
            "tokens": args.tokens,
            "hidden": args.hidden,
            "vocab": args.vocab,
            "chunk": args.chunk,
            "dtype": args.dtype,
            "device": device.type,
            "threads": args.threads,
            "rounds": args.rounds,
            "clock": "wall" if device.type == "cuda" else "cpu",
            "torch": torch.__version__,
        },
        "options": {
            n: {
                "step_s": best[n],
                "peak_bytes": peaks[n],
                "time_vs_unchunked_compiled": best[n] / base_t,
                "peak_vs_chunked_ckpt": peaks[n] / base_m,
                "loss": losses[n],
            }
            for n in opts
        },
        "chosen": CHOSEN,
    }
    c = out["options"][CHOSEN]
    out["target"] = {
        "time_vs_unchunked_compiled_max": 1.05,
        "peak_vs_chunked_ckpt_max": 1.10,
        "met": c["time_vs_unchunked_compiled"] <= 1.05 and c["peak_vs_chunked_ckpt"] <= 1.10,
    }
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
