"""Cost and saving of bench_model's activation recompute modes on one device, eager and compiled: forward + backward of
a bench_model Llama (no data parallelism) per mode; prints JSON (last line).

`modes` keys: none, selective, full (eager) and none+compile, selective+compile, full+compile (each block compiled
as bench_model.parallel.parallelize does, recompute applied first with apply_recompute(compiled=True)). Each mode
has step_s (best over the rounds), step_rel (against `none` of the same compile setting) and peak_bytes (bytes
allocated at the step's peak above the model and its inputs, bench_model.metrics.step_peak_bytes; on CPU from the
allocator events torch.profiler records, Inductor's buffers included). Targets (issue 29): selective <= 1.05x none
compiled and <= 1.10x eager, each with peak_bytes below its none. Modes are interleaved round by round and each keeps
its best (minimum) time, so load from other processes hits every mode alike; the default clock is the process's CPU
time (one intra-op thread), which other processes' load does not inflate.

    .venv/bin/python benchmarks/recompute_cost.py [--hidden 512] [--seq 512] [--layers 4] [--rounds 5] [--clock cpu|wall]
        [--no-compile]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from autotune.core.model import ModelSpec  # noqa: E402
from bench_model.metrics import step_peak_bytes  # noqa: E402
from bench_model.model import Llama  # noqa: E402
from bench_model.parallel.recompute import apply_recompute  # noqa: E402

EAGER = ("none", "selective", "full")
TARGETS = {"selective": 1.10, "selective+compile": 1.05}


def build(spec: ModelSpec, seq: int, mode: str) -> Llama:
    recompute, compiled = mode.removesuffix("+compile"), mode.endswith("+compile")
    model = Llama(spec, seq)
    model.init_weights(0)
    apply_recompute(model, recompute, compiled=compiled)
    if compiled:  # per block, as bench_model.parallel.parallelize
        for block in model.layers.values():
            block.compile()
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
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1: steadiest on a shared box)")
    ap.add_argument(
        "--clock",
        choices=("cpu", "wall"),
        default="cpu",
        help="cpu: this process's CPU time (immune to other processes on a loaded machine; with one "
        "thread it is the step's cost, Python overhead included); wall: perf_counter",
    )
    ap.add_argument("--no-compile", action="store_true", help="eager modes only")
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
    modes = EAGER if args.no_compile else (*EAGER, *(f"{m}+compile" for m in EAGER))
    models = {m: build(spec, args.seq, m) for m in modes}
    clock = {"cpu": time.process_time, "wall": time.perf_counter}[args.clock]
    peaks = {}
    for m in modes:  # warm-up (allocator, kernels, compilation), then the peak of one more step
        time_step(models[m], tokens, clock)
        peaks[m] = step_peak_bytes(lambda m=m: time_step(models[m], tokens, clock))
    best = {m: [float("inf")] * 3 for m in modes}
    for r in range(args.rounds):
        for m in modes if r % 2 == 0 else modes[::-1]:
            fwd, bwd = time_step(models[m], tokens, clock)
            b = best[m]
            b[0], b[1], b[2] = min(b[0], fwd), min(b[1], bwd), min(b[2], fwd + bwd)

    def base(m: str) -> str:
        return "none+compile" if m.endswith("+compile") else "none"

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
                "step_rel": best[m][2] / best[base(m)][2],
                "peak_bytes": peaks[m],
                "peak_rel": peaks[m] / peaks[base(m)],
            }
            for m in modes
        },
    }
    out["target"] = {
        m: {
            "step_rel_max": lim,
            "met": out["modes"][m]["step_rel"] <= lim and out["modes"][m]["peak_bytes"] < peaks[base(m)],
        }
        for m, lim in TARGETS.items()
        if m in out["modes"]
    }
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
