"""Where the step-time model's error sits, by mechanism: log(predicted / measured tok/s/GPU) of every public row
(autotune/fitting/reference_runs.py) under the stored presets, its median per group (source, GPU, FP8 recipe,
framework, dense/MoE, and source x GPU x recipe), and the step-term breakdown (shares of the predicted step: compute and
its attention and memory-bound parts, TP, CP, EP, PP, exposed DP, bubble, optimizer) of the worst rows.

A coefficient at the end of its range (benchmarks/model_accuracy.py `coefficients_at_bound`) says a mechanism is
missing or mis-priced: this table says in which rows and which term. Positive = predicted too fast.

Run: PYTHONPATH=. python benchmarks/residual_groups.py [--sources a,b] [--worst N] [--match TEXT]
(--match keeps the worst rows whose "source cluster model recipe" contains TEXT.)
Prints the table on stderr and ONE JSON object on stdout: rows, the groups {name: {n, median_log_ratio, median_abs_err}}
and the worst rows with their term shares.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from autotune.core.plan_arrays import arrays_from_plans
from autotune.fitting.fit_reference import FAMILIES, load_preset
from autotune.fitting.reference_runs import load_reference_runs
from autotune.predict.perf import perf_arrays

TERMS = (
    "compute_s",
    "attention_s",
    "memory_bound_s",
    "tp_comm_s",
    "cp_comm_s",
    "ep_comm_s",
    "pp_comm_s",
    "dp_comm_s",
    "bubble_s",
    "optimizer_s",
    "host_s",
)
GROUPS = {
    "source": lambda r: r.source,
    "gpu": lambda r: r.cluster,
    "recipe": lambda r: r.plan.fp8,
    "framework": lambda r: r.train.framework,
    "kind": lambda r: "moe" if r.model.is_moe else "dense",
    "source/gpu/recipe": lambda r: f"{r.source}/{r.cluster}/{r.plan.fp8}",
}


def cli(doc: str) -> argparse.ArgumentParser:
    """The parser both diagnostics share: `--sources a,b` and the module doc as `--help` (unknown flags exit 2)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sources", default="", help="comma-separated sources (default: every source)")
    return ap


def row_terms(runs: list) -> list[tuple[float, dict[str, float]]]:
    """(log predicted/measured, {term: share of the predicted step}) of each run under the stored presets."""
    clusters = {p: load_preset(p) for presets in FAMILIES.values() for p in presets}
    out = []
    for r in runs:
        o = perf_arrays(arrays_from_plans([r.plan]), r.model, r.train, clusters[r.cluster])
        step = float(o["step_s"][0])
        ratio = float(np.log(float(o["tokens_per_s_per_gpu"][0]) / r.measured_tokens_per_s_per_gpu))
        out.append((ratio, {t: round(float(o[t][0]) / step, 3) for t in TERMS} | {"step_s": round(step, 4)}))
    return out


def layout_label(p) -> str:
    """A run's layout in one short line (degrees, ZeRO stage, micro-batch size and count)."""
    return f"tp{p.tp} pp{p.pp} cp{p.cp} ep{p.ep} dp{p.dp} z{p.zero_stage} mbs{p.micro_batch_size} m{p.grad_accum_steps}"


def selected_runs(sources: str = "") -> list:
    """The reference runs, only those of the comma-separated `sources` when given."""
    runs, _ = load_reference_runs()
    return [r for r in runs if r.source in sources.split(",")] if sources else runs


def group_indices(runs: list, groups: dict) -> dict[str, dict[str, list[int]]]:
    """Per grouping (name -> key function of a run): each key's row indices."""
    out: dict[str, dict[str, list[int]]] = {}
    for name, key in groups.items():
        idx: dict[str, list[int]] = defaultdict(list)
        for i, r in enumerate(runs):
            idx[str(key(r))].append(i)
        out[name] = idx
    return out


def grouped(runs: list, res: np.ndarray) -> dict[str, dict[str, dict]]:
    table: dict[str, dict[str, dict]] = {}
    for name, idx in group_indices(runs, GROUPS).items():
        table[name] = {
            k: {
                "n": len(v),
                "median_log_ratio": round(float(np.median(res[v])), 4),
                "median_abs_err": round(float(np.median(np.abs(np.exp(res[v]) - 1))), 4),
            }
            for k, v in sorted(idx.items())
        }
    return table


def main() -> None:
    ap = cli(__doc__)
    ap.add_argument("--worst", type=int, default=20, help="how many worst rows to list")
    ap.add_argument("--match", default="", help='keep worst rows whose "source cluster model recipe" contains this')
    args = ap.parse_args()
    runs = selected_runs(args.sources)
    terms = row_terms(runs)
    res = np.array([t[0] for t in terms])
    table = grouped(runs, res)
    for name, groups in table.items():
        print(f"== {name}", file=sys.stderr)
        for k, g in groups.items():
            print(
                f"  {k:48s} n={g['n']:3d} log(pred/meas) {g['median_log_ratio']:+.3f} |err| {g['median_abs_err']:.3f}",
                file=sys.stderr,
            )
    keep = [i for i, r in enumerate(runs) if args.match in f"{r.source} {r.cluster} {r.model.name} {r.plan.fp8}"]
    worst = sorted(keep, key=lambda i: -abs(res[i]))[: args.worst]
    rows = []
    for i in worst:
        r, p = runs[i], runs[i].plan
        layout = layout_label(p)
        rows.append(
            {
                "row": f"{r.source}:{r.row}",
                "model": r.model.name,
                "gpu": r.cluster,
                "gpus": p.world_size,
                "layout": layout,
                "recipe": p.fp8,
                "framework": r.train.framework,
                "log_ratio": round(float(res[i]), 4),
                **terms[i][1],
            }
        )
        shares = " ".join(f"{t.removesuffix('_s')}={terms[i][1][t]:.2f}" for t in TERMS)
        print(
            f"{res[i]:+.2f} {r.source}:{r.row} {r.model.name} {r.cluster} n={p.world_size} {layout} {p.fp8} {shares}",
            file=sys.stderr,
        )
    print(json.dumps({"rows": len(runs), "groups": table, "worst": rows}))


if __name__ == "__main__":
    main()
