"""Which rows pull a fitted coefficient towards a bound of its range (benchmarks/model_accuracy.py
`coefficients_at_bound`): for every public row (autotune/fitting/reference_runs.py) under the stored presets, its
residual r = log(predicted / measured tok/s/GPU), its sensitivity d = log(pred at `--to`) - log(pred at the preset's
value) and its pull w * r * d, where w = 1 / sqrt(1 + (r / 0.1)^2) is the weight autotune/fitting/fit_reference.py's
soft_l1 loss (f_scale 0.1) gives the row. Pull > 0: the row wants the coefficient moved *away* from `--to` (predicted
too fast where raising it speeds the row up); the sum over rows is the data's side of the fit's gradient (the prior's
is not in it). Grouped by source, framework, dense/MoE x ZeRO stage x EP overlap, with the rows pulling hardest.

Run: PYTHONPATH=. python benchmarks/coefficient_pull.py [--coefficient dp_overlap] [--to 1.0] [--sources a,b] [--top N]
Prints the table on stderr and ONE JSON object on stdout: rows, coefficient, value, total pull, groups and top rows.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from residual_groups import cli, group_indices, layout_label, selected_runs  # noqa: E402  (benchmarks/, on sys.path)

from autotune.fitting.fit_reference import FAMILIES, load_preset, predict

SOFT_L1_SCALE = 0.1  # fit_reference.fit_all: least_squares(loss="soft_l1", f_scale=0.1)
GROUPS = {
    "source": lambda r: r.source,
    "framework": lambda r: r.train.framework,
    "kind/zero/ep_overlap": lambda r: (
        f"{'moe' if r.model.is_moe else 'dense'} z{r.plan.zero_stage} epov{int(bool(r.plan.ep_overlap))}"
    ),
}


def row_pull(runs: list, name: str, to: float) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """(preset value, residual, sensitivity, pull) of every run for coefficient `name` (module doc)."""
    clusters = {p: load_preset(p) for presets in FAMILIES.values() for p in presets}
    value = float(getattr(clusters[FAMILIES["hopper"][0]], name))
    moved = {k: dataclasses.replace(c, **{name: to}) for k, c in clusters.items()}
    base = np.log(predict(runs, clusters))
    res = base - np.log([r.measured_tokens_per_s_per_gpu for r in runs])
    sens = np.log(predict(runs, moved)) - base
    weight = 1.0 / np.sqrt(1.0 + (res / SOFT_L1_SCALE) ** 2)
    weight = np.where([bool(r.fit_excluded) for r in runs], 0.0, weight)  # scored, not fitted (ReferenceRun)
    return value, res, sens, weight * res * sens


def grouped(runs: list, res: np.ndarray, sens: np.ndarray, pull: np.ndarray) -> dict[str, dict[str, dict]]:
    table: dict[str, dict[str, dict]] = {}
    for name, idx in group_indices(runs, GROUPS).items():
        table[name] = {}
        for k, v in sorted(idx.items(), key=lambda kv: -abs(pull[kv[1]].sum())):
            v = np.array(v)
            touched = v[np.abs(sens[v]) > 0.005]  # rows the coefficient moves by more than 0.5%
            table[name][k] = {
                "n": len(v),
                "n_sensitive": len(touched),
                "pull": round(float(pull[v].sum()), 4),
                "median_log_ratio_sensitive": round(float(np.median(res[touched])), 4) if len(touched) else None,
                "median_sensitivity": round(float(np.median(sens[touched])), 4) if len(touched) else None,
            }
    return table


def main() -> None:
    ap = cli(__doc__)
    ap.add_argument(
        "--coefficient", default="dp_overlap", help="a free coefficient of autotune/fitting/coefficients.py"
    )
    ap.add_argument("--to", type=float, default=1.0, help="the value the sensitivity moves the coefficient to")
    ap.add_argument("--top", type=int, default=20, help="how many hardest-pulling rows to list")
    args = ap.parse_args()
    runs = selected_runs(args.sources)
    name, to = args.coefficient, args.to
    value, res, sens, pull = row_pull(runs, name, to)
    table = grouped(runs, res, sens, pull)
    print(f"{name} = {value:.4f}, moved to {to}: total pull {pull.sum():+.4f} over {len(runs)} rows", file=sys.stderr)
    for group, rows in table.items():
        print(f"== {group}", file=sys.stderr)
        for k, g in rows.items():
            print(f"  {k:32s} n={g['n']:3d} sensitive={g['n_sensitive']:3d} pull={g['pull']:+.4f}", file=sys.stderr)
    top = []
    for i in np.argsort(-np.abs(pull))[: args.top]:
        r, p = runs[i], runs[i].plan
        layout = layout_label(p)
        top.append(
            {
                "row": f"{r.source}:{r.row}",
                "model": r.model.name,
                "gpu": r.cluster,
                "framework": r.train.framework,
                "layout": layout,
                "ep_overlap": bool(p.ep_overlap),
                "log_ratio": round(float(res[i]), 4),
                "sensitivity": round(float(sens[i]), 4),
                "pull": round(float(pull[i]), 4),
            }
        )
    out = {"rows": len(runs), "coefficient": name, "value": value, "to": to, "total_pull": round(float(pull.sum()), 4)}
    print(json.dumps(out | {"groups": table, "top": top}))


if __name__ == "__main__":
    main()
