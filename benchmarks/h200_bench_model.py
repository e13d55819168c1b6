"""Predicted vs measured throughput of autotune's own trainer on one H200 (benchmarks/data/measured/
h200_bench_model_2026-11-29.csv, the newest lease: bench_model at 3fab1c6, torch 2.11.0+cu130, one GPU through the
local launcher; `--csv h200_bench_model_2026-11-25.csv` scores the earlier trainer's lease). Each `bench_model` row's `layout` column is the override list the run used; the
estimate is `autotune estimate cluster=h200-141gb <layout>` (plan.compile as the row says). Not a fit: the preset's
coefficients as they are. Prints one JSON object: per row measured, predicted and the signed error, and the median /
max |error| over the MoE rows (Qwen3-30B-A3B 4 layers, Mixtral-8x7B 2 layers) and over the dense rows.

    .venv/bin/python benchmarks/h200_bench_model.py [--moe-only] [--csv FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import pandas as pd

from autotune.core.types import ParallelPlan
from autotune.predict.perf import estimate_perf
from autotune.spec.config import load_config

MEASURED = Path(__file__).resolve().parent / "data" / "measured"
NEWEST = "h200_bench_model_2026-11-29.csv"
PLAN_KEYS = {"micro_batch_size", "recompute", "compile"}


def predict(layout: str, compile_: bool) -> float:
    overrides = [o for o in layout.split() if not o.startswith("plan.")]
    plan_items = dict(o.split("=", 1) for o in layout.split() if o.startswith("plan."))
    cfg = load_config(["cluster=h200-141gb", *overrides])
    mbs = int(plan_items.get("plan.micro_batch_size", 1))
    plan = ParallelPlan(
        micro_batch_size=mbs,
        grad_accum_steps=cfg.train.global_batch_size // mbs,
        recompute=plan_items.get("plan.recompute", "none"),
        compile=plan_items.get("plan.compile", str(compile_)).lower() == "true",
        fp8=plan_items.get("plan.fp8", "none"),
    )
    return estimate_perf(plan, cfg.model, cfg.train, cfg.cluster).tokens_per_s_per_gpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--moe-only", action="store_true", help="only the MoE rows (the smoke test's mode)")
    ap.add_argument("--csv", default=NEWEST, help=f"a lease's file in {MEASURED.name}/ (default {NEWEST})")
    args = ap.parse_args()
    data = MEASURED / args.csv
    df = pd.read_csv(data)
    rows = []
    for r in df.itertuples():
        if r.status != "ok" or not str(r.kind).startswith("bench_model") or "=" not in str(r.layout):
            continue
        if str(r.case).startswith("OLD"):  # the 2026-11-23 trainer (commit 46ae7e1), not the one the model describes
            continue
        moe = "qwen3-30b-a3b" in r.layout or "mixtral" in r.layout
        if args.moe_only and not moe:
            continue
        pred = predict(r.layout, bool(r.compile))
        meas = float(r.tokens_per_s_per_gpu)
        rows.append({"case": r.case, "moe": moe, "measured": meas, "predicted": pred, "error": pred / meas - 1.0})
    out: dict = {"source": data.name, "rows": rows}
    for name, sel in (("moe", [x for x in rows if x["moe"]]), ("dense", [x for x in rows if not x["moe"]])):
        if sel:
            errs = [abs(x["error"]) for x in sel]
            out[f"{name}_median_abs_err"], out[f"{name}_max_abs_err"] = statistics.median(errs), max(errs)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
