"""Peak bytes per logit of torchtitan's loss, eager and compiled, measured on CPU against the torchtitan profile's
logits term (autotune/predict/frameworks/torchtitan.py [LOSS], [CLOSS]).

torchtitan's `cross_entropy_loss` (components/loss.py, 0.2.2: F.cross_entropy(pred.flatten(0, 1).float(), labels,
reduction="sum", ignore_index=-100)) runs forward + backward on compute-dtype logits `pred` the caller keeps; the peak
above them is measured with the CPU allocator's events (bench_model.metrics.step_peak_bytes, which sees the buffers of
Inductor-generated code too). The profile prices eager at LOGIT_BYTES_PLAIN per logit (pred freed by the caller,
its fp32 copies counted) and compiled at LOGIT_ACT_COPIES_COMPILED x c (pred kept by the compiled graph, plus its
gradient), so measured + c (pred) is compared with the profile's term.
Run: PYTHONPATH=. python benchmarks/torchtitan_loss_peak.py [--tokens N --vocab V --dtype bfloat16 --no-compile]
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    ap.add_argument("--no-compile", action="store_true", help="eager only (smoke test)")
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
    print(json.dumps({"rows": rows, "max_abs_rel_err": max(abs(r["rel_err"]) for r in rows)}))


if __name__ == "__main__":
    main()
