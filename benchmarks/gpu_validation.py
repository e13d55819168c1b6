"""Measured vs predicted on a real accelerator: bench_model trials at world 1 next to `autotune estimate`.

For every layout of (micro_batch_size x recompute x compile) it runs one trial through the local launcher (the same
path as `autotune bench --nproc 1`) and prints ONE JSON object:
  device, model, cluster, seq_len, cases: [{layout, status, measured: {allocated/reserved peak GiB, tok/s/GPU, MFU,
  wall_s}, predicted: {the same from autotune.predict.memory / autotune.predict.perf, compile_time_s}, ratio: measured / predicted}],
  compile_time_s: per (mbs, recompute) with compile on and off, measured wall_s(compile) - wall_s(eager) next to
  the preset's compile_s_per_graph (the number to refit it with).
Run on a CUDA machine (docs/memory_model.md, "Validating on a GPU"):
  PYTHONPATH=. python benchmarks/gpu_validation.py                       # Llama-3.2-1B, seq 4096, 18 layouts
  PYTHONPATH=. python benchmarks/gpu_validation.py --mbs 2 4 --compile true false
Without CUDA it exits 2, unless `--device cpu --model tiny`: the same code path on one CPU rank (what the tests run).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GIB = 2**30
CUDA_PRESETS = (
    ("H200", "h200-141gb"),
    ("H100", "h100-sxm-80gb"),
    ("A100-SXM4-40GB", "a100-40gb"),
    ("A100", "a100-80gb"),
)


def _bool(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"{text!r} must be true or false")
    return text.lower() == "true"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--model", default="llama-3.2-1b", help="model preset (cpu: only tiny)")
    p.add_argument("--cluster", default=None, help="cluster preset (default: from the GPU's name; cpu on --device cpu)")
    p.add_argument("--seq-len", type=int, default=None, help="default 4096 on cuda, 128 on cpu")
    p.add_argument("--grad-accum", type=int, default=2, help="micro-batches per step (global batch = mbs x this)")
    p.add_argument("--mbs", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--recompute", nargs="+", default=["none", "selective", "full"])
    p.add_argument("--compile", type=_bool, nargs="+", default=[False, True])
    p.add_argument("--warmup-steps", type=int, default=2)
    p.add_argument("--steps", type=int, default=5, help="timed steps per trial")
    p.add_argument("--workdir", default=None, help="trial files and logs (default: results/_gpu_validation)")
    return p.parse_args(argv)


def _cluster(args: argparse.Namespace) -> str:
    if args.cluster:
        return args.cluster
    if args.device == "cpu":
        return "cpu"
    import torch

    name = torch.cuda.get_device_name(0)
    return next((preset for key, preset in CUDA_PRESETS if key in name), "h100-sxm-80gb")


def _gib(x) -> float | None:
    return None if x is None or x != x else round(float(x) / GIB, 3)


def _ratio(a, b) -> float | None:
    return None if a is None or b is None or not b else round(a / b, 4)


def run_case(args, cluster: str, seq: int, mbs: int, recompute: str, compile: bool, workdir: str) -> dict:
    from autotune.cli.bench import run_local
    from autotune.layouts.estimate import estimate
    from autotune.results.trialfile import make_spec
    from autotune.spec.config import load_config

    cfg = load_config(
        [
            f"model={args.model}",
            f"cluster={cluster}",
            f"train.seq_len={seq}",
            f"train.global_batch_size={mbs * args.grad_accum}",
            f"plan.micro_batch_size={mbs}",
            f"plan.recompute={recompute}",
            f"plan.compile={str(compile).lower()}",
        ]
    )
    est = estimate(cfg, 1)
    spec = make_spec(
        cfg, cfg.plan(1), sweep_id="gpu_validation", trial_id=f"mbs{mbs}_{recompute}_{'c' if compile else 'e'}",
        warmup_steps=args.warmup_steps, timed_steps=args.steps,
    )  # fmt: skip
    row = run_local(spec, workdir)
    measured = {
        "allocated_gib": _gib(row.get("peak_mem_allocated_bytes")),
        "reserved_gib": _gib(row.get("peak_mem_reserved_bytes")),
        "tokens_per_s_per_gpu": row.get("tokens_per_s_per_gpu"),
        "mfu": row.get("mfu"),
        "wall_s": row.get("wall_s"),
    }
    predicted = {
        "allocated_gib": _gib(est["mem_allocated_bytes"]),
        "reserved_gib": _gib(est["mem_reserved_bytes"]),
        "tokens_per_s_per_gpu": round(float(est["pred_tokens_per_s_per_gpu"]), 1),
        "mfu": round(float(est["pred_mfu"]), 4),
        "fits": bool(est["fits"]),
        "compile_time_s": est["pred_compile_time_s"],
    }
    return {
        "layout": {"micro_batch_size": mbs, "recompute": recompute, "compile": compile, "seq_len": seq},
        "status": row.get("status"),
        "error": row.get("error_type") or None,
        "measured": measured,
        "predicted": predicted,
        "ratio": {
            k: _ratio(measured[k], predicted[k]) for k in ("allocated_gib", "reserved_gib", "tokens_per_s_per_gpu")
        },
    }


def compile_times(cases: list[dict]) -> list[dict]:
    """wall_s(compile) - wall_s(eager) of the same layout: the trial time compiling costs, warm-up included."""
    by = {(c["layout"]["micro_batch_size"], c["layout"]["recompute"], c["layout"]["compile"]): c for c in cases}
    out = []
    for (mbs, rc, comp), c in by.items():
        eager = by.get((mbs, rc, False))
        if comp and eager and c["measured"]["wall_s"] is not None and eager["measured"]["wall_s"] is not None:
            out.append(
                {
                    "micro_batch_size": mbs,
                    "recompute": rc,
                    "measured_s": round(c["measured"]["wall_s"] - eager["measured"]["wall_s"], 2),
                    "predicted_s": c["predicted"]["compile_time_s"],
                }
            )
    return out


def main(argv: list[str] | None = None) -> int:
    if "--scale-down" in (sys.argv[1:] if argv is None else argv):  # docs/scale_down.md: a mode of its own file
        from benchmarks.gpu_validation_scale_down import main as scale_down

        return scale_down(argv)
    args = parse_args(argv)
    if args.device == "cpu":
        if args.model != "tiny":
            print(f"gpu_validation: --device cpu runs only --model tiny (got {args.model!r})", file=sys.stderr)
            return 2
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # the trial ranks pick CUDA whenever they see one
    else:
        import torch

        if not torch.cuda.is_available():
            print(
                "gpu_validation: no CUDA device here (run on a GPU machine, or --device cpu --model tiny)",
                file=sys.stderr,
            )
            return 2
    cluster = _cluster(args)
    seq = args.seq_len or (128 if args.device == "cpu" else 4096)
    workdir = args.workdir or str(ROOT / "results" / "_gpu_validation")
    cases = [
        run_case(args, cluster, seq, mbs, rc, comp, workdir)
        for mbs, rc, comp in itertools.product(args.mbs, args.recompute, args.compile)
    ]
    out = {"device": args.device, "model": args.model, "cluster": cluster, "seq_len": seq, "cases": cases}
    out["compile_time_s"] = compile_times(cases)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
