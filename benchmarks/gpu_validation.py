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
  PYTHONPATH=. python benchmarks/gpu_validation.py --all --csv rows.csv  # one lease: every case that matters
Without CUDA it exits 2, unless `--device cpu --model tiny`: the same code path on one CPU rank (what the tests run).

`--all` runs ALL_CASES (CPU: CPU_CASES, a tiny dense and a tiny MoE model) in priority order. Timed on the
2026-11-29 H200 lease: 11 cases in 672 s (23-110 s each: the compiled MoE case 110 s, the 3B cases ~55 s), more than
one 10-minute call: give `--budget-s` (no case starts after it) and run the rest in a second call. The cases: the
regression layout (Llama-3.2-1B, seq 4096, mbs 4, compiled; none and selective), the 3B none/selective compiled, the
FP8 recipes (tensorwise on 1B and 3B, rowwise on 3B), the MoE presets cut with `--layers` (Qwen3-30B-A3B 4 layers at
mbs 1/2 eager and mbs 2 compiled, Mixtral-8x7B 2 layers), and eager selective.
`--csv PATH` writes one row per case in the format of the measured reference CSVs the fit reads
(h200_bench_model_2026-11-25.csv: case, kind, layout, compile, status, tokens_per_s_per_gpu, mfu, peak_alloc_gib,
peak_reserved_gib, est_alloc_gib, est_reserved_gib, est_tokens_per_s_per_gpu, est_fits, notes; est_reserved_gib is the
predicted device total, runtime overhead included, as in the earlier leases' files: the JSON's `ratio.reserved_gib`
divides by the allocator's peak, what torch.cuda.max_memory_reserved measures).
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import os
import sys
import time
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


# (case, model, overrides): the 2026-11-25 lease's case names (h200_bench_model_2026-11-25.csv), regression first
_1B = ("model=llama-3.2-1b", "train.seq_len=4096")
_3B = ("model=llama-3.2-3b", "train.seq_len=4096")
_QWEN = ("model=qwen3-30b-a3b", "model.num_layers=4", "train.seq_len=4096")
ALL_CASES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("1b_mbs4_none_c", (*_1B, "plan.micro_batch_size=4", "plan.recompute=none", "plan.compile=true")),
    ("1b_mbs4_sel_c", (*_1B, "plan.micro_batch_size=4", "plan.recompute=selective", "plan.compile=true")),
    ("1b_mbs4_fp8tw_c", (*_1B, "plan.micro_batch_size=4", "plan.fp8=tensorwise", "plan.compile=true")),
    ("qwen3moe_4l_mbs1", (*_QWEN, "plan.micro_batch_size=1", "plan.compile=false")),
    ("qwen3moe_4l_mbs2", (*_QWEN, "plan.micro_batch_size=2", "plan.compile=false")),
    ("qwen3moe_4l_mbs2_c", (*_QWEN, "plan.micro_batch_size=2", "plan.compile=true")),
    ("mixtral_2l_mbs1", ("model=mixtral-8x7b", "model.num_layers=2", "train.seq_len=4096", "plan.micro_batch_size=1")),
    ("3b_mbs2_none_c", (*_3B, "plan.micro_batch_size=2", "plan.recompute=none", "plan.compile=true")),
    ("3b_mbs2_sel_c", (*_3B, "plan.micro_batch_size=2", "plan.recompute=selective", "plan.compile=true")),
    ("3b_mbs2_fp8tw_c", (*_3B, "plan.micro_batch_size=2", "plan.fp8=tensorwise", "plan.compile=true")),
    ("3b_mbs2_fp8rw_c", (*_3B, "plan.micro_batch_size=2", "plan.fp8=rowwise", "plan.compile=true")),
    ("1b_mbs2_sel_e", (*_1B, "plan.micro_batch_size=2", "plan.recompute=selective", "plan.compile=false")),
)
CPU_CASES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("tiny_mbs1_none_e", ("model=tiny", "train.seq_len=128", "plan.micro_batch_size=1")),
    ("tinymoe_2l_mbs1_e", ("model=tiny-moe", "model.num_layers=2", "train.seq_len=128", "plan.micro_batch_size=1")),
)
CSV_COLUMNS = (
    "case", "kind", "layout", "compile", "status", "tokens_per_s_per_gpu", "mfu", "peak_alloc_gib",
    "peak_reserved_gib", "est_alloc_gib", "est_reserved_gib", "est_tokens_per_s_per_gpu", "est_fits", "notes",
)  # fmt: skip


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
    p.add_argument("--layers", type=int, default=None, help="cut the model to this many layers (model.num_layers)")
    p.add_argument("--all", action="store_true", help="run ALL_CASES (CPU: CPU_CASES) instead of the grid")
    p.add_argument("--csv", default=None, help="also write one row per case in the reference CSV format")
    p.add_argument("--workdir", default=None, help="trial files and logs (default: results/_gpu_validation)")
    p.add_argument(
        "--trial-timeout-s", type=float, default=None, help="sweep.timeout_s of each trial (default: the sweep's)"
    )
    p.add_argument(
        "--budget-s", type=float, default=None,
        help="start no new case after this many seconds (a lease's device time: the cases run in priority order)",
    )  # fmt: skip
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


def grid_overrides(args, seq: int, mbs: int, recompute: str, compile: bool) -> tuple[str, ...]:
    layers = (f"model.num_layers={args.layers}",) if args.layers else ()
    return (
        f"model={args.model}", *layers, f"train.seq_len={seq}", f"plan.micro_batch_size={mbs}",
        f"plan.recompute={recompute}", f"plan.compile={str(compile).lower()}",
    )  # fmt: skip


def run_case(args, cluster: str, name: str, overrides: tuple[str, ...], workdir: str) -> dict:
    from autotune.cli.bench import run_local
    from autotune.core.trial import measured_peak_prediction
    from autotune.layouts.estimate import estimate
    from autotune.results.trialfile import make_spec
    from autotune.spec.config import load_config

    mbs = next((int(o.split("=")[1]) for o in overrides if o.startswith("plan.micro_batch_size=")), 1)
    limit = () if args.trial_timeout_s is None else (f"sweep.timeout_s={args.trial_timeout_s:g}",)
    cfg = load_config([f"cluster={cluster}", *overrides, f"train.global_batch_size={mbs * args.grad_accum}", *limit])
    est = estimate(cfg, 1)
    spec = make_spec(
        cfg, cfg.plan(1), sweep_id="gpu_validation", trial_id=name,
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
        "reserved_gib": _gib(est["mem_reserved_bytes"]),  # the device total (what decides fits), the CSVs' est column
        "allocator_peak_gib": _gib(est["mem_allocator_peak_bytes"]),  # what max_memory_reserved measures
        "tokens_per_s_per_gpu": round(float(est["pred_tokens_per_s_per_gpu"]), 1),
        "mfu": round(float(est["pred_mfu"]), 4),
        "fits": bool(est["fits"]),
        "compile_time_s": est["pred_compile_time_s"],
    }
    plan = cfg.plan(1)
    return {
        "case": name,
        "overrides": list(overrides),
        "global_batch_size": cfg.train.global_batch_size,
        "layout": {
            "micro_batch_size": mbs,
            "recompute": plan.recompute,
            "compile": plan.compile,
            "seq_len": cfg.train.seq_len,
        },  # fmt: skip
        "status": row.get("status"),
        "error": row.get("error_type") or None,
        "measured": measured,
        "predicted": predicted,
        "ratio": {
            "allocated_gib": _ratio(measured["allocated_gib"], predicted["allocated_gib"]),
            # what the trial's reserved peak measures: the allocator's peak on CUDA, the device total on CPU ranks
            # (docs/memory_model.md "Two peaks")
            "reserved_gib": _ratio(
                measured["reserved_gib"],
                measured_peak_prediction(args.device, predicted["reserved_gib"], predicted["allocator_peak_gib"]),
            ),
            "tokens_per_s_per_gpu": _ratio(measured["tokens_per_s_per_gpu"], predicted["tokens_per_s_per_gpu"]),
        },
    }


def compile_times(cases: list[dict]) -> list[dict]:
    """wall_s(compile) - wall_s(eager) of the same layout (the same overrides but plan.compile): the trial time
    compiling costs, warm-up included."""

    def key(c: dict) -> tuple:
        return tuple(o for o in c["overrides"] if not o.startswith("plan.compile=")), c["layout"]["compile"]

    by = {key(c): c for c in cases}
    out = []
    for (rest, comp), c in by.items():
        eager = by.get((rest, False))
        if comp and eager and c["measured"]["wall_s"] is not None and eager["measured"]["wall_s"] is not None:
            out.append(
                {
                    "case": c["case"],
                    "micro_batch_size": c["layout"]["micro_batch_size"],
                    "recompute": c["layout"]["recompute"],
                    "measured_s": round(c["measured"]["wall_s"] - eager["measured"]["wall_s"], 2),
                    "predicted_s": c["predicted"]["compile_time_s"],
                }
            )
    return out


def write_csv(path: str, cases: list[dict], device: str) -> None:
    """One row per case, the columns of the measured reference CSVs (CSV_COLUMNS); missing values empty."""
    import torch

    where = torch.cuda.get_device_name(0) if device == "cuda" else "CPU"
    kind = f"bench_model trainer, 1 {'GPU' if device == 'cuda' else 'CPU rank'}, through the local launcher (autotune bench path)"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        w.writeheader()
        for c in cases:
            m, p = c["measured"], c["predicted"]
            w.writerow(
                {
                    "case": c["case"],
                    "kind": kind,
                    "layout": " ".join((*c["overrides"], f"train.global_batch_size={c['global_batch_size']}")),
                    "compile": c["layout"]["compile"],
                    "status": c["status"],
                    "tokens_per_s_per_gpu": m["tokens_per_s_per_gpu"],
                    "mfu": m["mfu"],
                    "peak_alloc_gib": m["allocated_gib"],
                    "peak_reserved_gib": m["reserved_gib"],
                    "est_alloc_gib": p["allocated_gib"],
                    "est_reserved_gib": p["reserved_gib"],
                    "est_tokens_per_s_per_gpu": p["tokens_per_s_per_gpu"],
                    "est_fits": p["fits"],
                    "notes": f"{where}, torch {torch.__version__}" + (f", {c['error']}" if c["error"] else ""),
                }
            )


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
    if args.all:
        todo = list(CPU_CASES if args.device == "cpu" else ALL_CASES)
    else:
        todo = [
            (f"mbs{mbs}_{rc}_{'c' if comp else 'e'}", grid_overrides(args, seq, mbs, rc, comp))
            for mbs, rc, comp in itertools.product(args.mbs, args.recompute, args.compile)
        ]
    cases: list[dict] = []
    start = time.monotonic()
    for name, overrides in todo:
        if args.budget_s is not None and time.monotonic() - start > args.budget_s:
            skipped = [n for n, _ in todo[len(cases) :]]
            print(
                f"gpu_validation: --budget-s {args.budget_s:g} s spent; not run: {' '.join(skipped)}", file=sys.stderr
            )
            break
        cases.append(run_case(args, cluster, name, overrides, workdir))
        if args.csv:  # after every case: a lease that ends mid-list still returns the rows it measured
            write_csv(args.csv, cases, args.device)
    out = {"device": args.device, "model": args.model, "cluster": cluster, "seq_len": seq, "cases": cases}
    out["compile_time_s"] = compile_times(cases)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
