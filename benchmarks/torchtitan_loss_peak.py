"""Peak bytes per logit of torchtitan's loss, eager and compiled, measured on CPU against the torchtitan profile's
logits term (autotune/predict/frameworks/torchtitan.py [LOSS], [CLOSS]).

torchtitan's `cross_entropy_loss` (components/loss.py, 0.2.2: F.cross_entropy(pred.flatten(0, 1).float(), labels,
reduction="sum", ignore_index=-100)) runs forward + backward on compute-dtype logits `pred` the caller keeps; the peak
above them is measured with the CPU allocator's events (bench_model.metrics.step_peak_bytes, which sees the buffers of
Inductor-generated code too). The profile prices eager at LOGIT_BYTES_PLAIN per logit (pred freed by the caller,
its fp32 copies counted) and compiled at LOGIT_ACT_COPIES_COMPILED x c (pred kept by the compiled graph, plus its
gradient), so measured + c (pred) is compared with the profile's term.
`--chunks N`: also torchtitan main's ChunkedLossWrapper (components/loss.py, 2026-06 on; train.loss_chunks), replicated
at tp 1 without a process group: N token slices of the hidden states (`--hidden` wide), each through lm_head and the
loss and backpropagated before the next, the slice gradients copied into an fp32 GradAccumulator, then cast to the
compute dtype; FSDP2's fp32 accumulation of lm_head's unsharded gradient (_fsdp_param.py
`to_accumulated_grad_if_needed`) emulated with a post-accumulate-grad hook. Its peak is compared with the profile's
chunked loss term (TorchtitanProfile.chunked_loss) less the gathered weight, which exists before the step here.
Run: PYTHONPATH=. python benchmarks/torchtitan_loss_peak.py [--tokens N --vocab V --dtype bfloat16 --no-compile]
[--chunks N --hidden H]
Last line: one JSON object {"rows": [{"mode", "tokens", "vocab", "dtype", "peak_bytes", "bytes_per_logit",
"profile_bytes_per_logit", "rel_err"}], "max_abs_rel_err"}.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autotune.predict.frameworks.torchtitan import LOGIT_ACT_COPIES_COMPILED, LOGIT_BYTES_PLAIN  # noqa: E402
from bench_model.metrics import step_peak_bytes  # noqa: E402


def cross_entropy_loss(pred: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """torchtitan 0.2.2 components/loss.py `cross_entropy_loss` (IGNORE_INDEX = -100)."""
    return F.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1), reduction="sum", ignore_index=-100)


def measure(fn, tokens: int, vocab: int, dtype: torch.dtype) -> int:
    pred = torch.randn(1, tokens, vocab, dtype=dtype, requires_grad=True)
    labels = torch.randint(0, vocab, (1, tokens))

    def step() -> None:
        fn(pred, labels).backward()
        pred.grad = None

    step()  # compile / warm up outside the measurement
    return step_peak_bytes(step)


def measure_chunked(fn, tokens: int, vocab: int, hidden: int, chunks: int, dtype: torch.dtype) -> int:
    """Peak bytes of the ChunkedLossWrapper replica's loop (module doc) above the hidden states and lm_head's weight."""
    h_all = torch.randn(tokens, hidden, dtype=dtype)
    weight = torch.nn.Parameter(torch.randn(vocab, hidden, dtype=dtype) / hidden**0.5)
    labels = torch.randint(0, vocab, (tokens,))
    state: dict = {}

    def fsdp_accumulate(p: torch.Tensor) -> None:  # the unsharded gradient, accumulated in fp32 (reduce_dtype)
        if state.get("acc") is None:
            state["acc"] = p.grad.float()
        else:  # CUDA adds bf16 into fp32 in one kernel; CPU's add_ would cast a whole fp32 copy first: 64 rows at a time
            for i in range(0, p.shape[0], 64):
                state["acc"][i : i + 64].add_(p.grad[i : i + 64])
        p.grad = None

    weight.register_post_accumulate_grad_hook(fsdp_accumulate)

    def step() -> None:
        n = tokens // chunks
        acc = torch.zeros_like(h_all, dtype=torch.float32)  # GradAccumulator
        for i, (h_chunk, label_chunk) in enumerate(zip(torch.split(h_all, n), torch.split(labels, n))):
            h_chunk = h_chunk.detach().requires_grad_(True)
            logits = h_chunk @ weight.t()  # lm_head; the loop keeps `logits` through the slice's backward
            fn(logits.unsqueeze(0), label_chunk.unsqueeze(0)).backward()
            acc[i * n : (i + 1) * n].copy_(h_chunk.grad)
            h_chunk.grad = None
        out = acc.to(dtype)  # for the decoder's backward
        del acc, out
        state["acc"] = None

    step()  # compile / warm up outside the measurement
    return step_peak_bytes(step)


def chunked_rows(args, modes, dtype: torch.dtype, c: int) -> list[dict]:
    """One row per mode: the replica's measured peak against TorchtitanProfile(loss_chunks=N).chunked_loss."""
    from autotune.core.model import ModelSpec
    from autotune.predict.frameworks.torchtitan import TorchtitanProfile

    model = ModelSpec("loss-peak", 1, args.hidden, 4 * args.hidden, 4, 4, args.vocab)
    prof = TorchtitanProfile(loss_chunks=args.chunks)
    rows = []
    for mode, fn, _, _ in modes:
        per = LOGIT_BYTES_PLAIN + c if mode == "eager" else LOGIT_ACT_COPIES_COMPILED * c
        predicted = float(prof.chunked_loss(model, args.tokens, 1, 1, c, per)) - c * args.vocab * args.hidden
        peak = measure_chunked(fn, args.tokens, args.vocab, args.hidden, args.chunks, dtype)
        rows.append({"mode": f"chunked_{mode}", "tokens": args.tokens, "vocab": args.vocab, "dtype": args.dtype,
                     "chunks": args.chunks, "hidden": args.hidden, "peak_bytes": peak,
                     "profile_bytes": round(predicted), "rel_err": round(peak / predicted - 1.0, 4)})  # fmt: skip
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    ap.add_argument("--no-compile", action="store_true", help="eager only (smoke test)")
    ap.add_argument("--chunks", type=int, default=0, help="also ChunkedLossWrapper's loop with N slices")
    ap.add_argument("--hidden", type=int, default=512, help="hidden size of the chunked replica's lm_head")
    args = ap.parse_args()
    dtype = getattr(torch, args.dtype)
    c = torch.finfo(dtype).bits // 8
    modes = [("eager", cross_entropy_loss, LOGIT_BYTES_PLAIN, 0)]
    if not args.no_compile:  # the compiled graph keeps pred: count it (c) as the profile does
        modes.append(("compiled", torch.compile(cross_entropy_loss), LOGIT_ACT_COPIES_COMPILED * c, c))
    rows = []
    for mode, fn, profile, kept in modes:
        peak = measure(fn, args.tokens, args.vocab, dtype)
        per = peak / (args.tokens * args.vocab) + kept
        rows.append({"mode": mode, "tokens": args.tokens, "vocab": args.vocab, "dtype": args.dtype,
                     "peak_bytes": peak, "bytes_per_logit": round(per, 4), "profile_bytes_per_logit": profile,
                     "rel_err": round(per / profile - 1.0, 4)})  # fmt: skip
    if args.chunks:
        rows += chunked_rows(args, modes, dtype, c)
    print(json.dumps({"rows": rows, "max_abs_rel_err": max(abs(r["rel_err"]) for r in rows)}))


if __name__ == "__main__":
    main()
