"""How fast does autotune predict MLPerf Training's Llama 3.1 405B submissions ran, against the step times they logged?

The 20 submissions of benchmarks/data/measured/mlperf_llama31_405b_configs.csv (v5.0 and v5.1: H100, H200, B200,
GB200, GB300; autotune/fitting/mlperf_runs.py maps each config to its layout) with their median logged
`train_step_time` (`measured_tokens_per_s_per_gpu`). Nothing in the performance model was fitted on these rows, so
the errors are out of sample. Each layout is scored by the planner (`autotune.layouts.planner.score_arrays`) under
benchmarks/published_fit.py's `layout_config` (its cluster preset with the recipe's allocator setting).
Prints one line per submission on stderr, then ONE JSON object on stdout: `rows`, `median_abs_err`, `median_signed_err` (predicted /
measured - 1), `by_cluster` ({cluster: {n, median_signed_err}}), `per_row` (row, cluster, layout, measured and
predicted tokens/s per GPU, err).
Run: PYTHONPATH=. python benchmarks/mlperf_speed.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from published_fit import layout_config  # noqa: E402  (benchmarks/, on sys.path)

from autotune.core.labels import layout_label  # noqa: E402
from autotune.core.plan_arrays import arrays_from_plans  # noqa: E402
from autotune.fitting.mlperf_runs import measured_tokens_per_s_per_gpu  # noqa: E402
from autotune.fitting.published_runs import load_mlperf  # noqa: E402
from autotune.layouts.planner import score_arrays  # noqa: E402


def predicted_tokens_per_s_per_gpu(lay) -> float:
    cfg = layout_config(lay)
    row = score_arrays(arrays_from_plans([lay.plan]), cfg, lay.plan.world_size, lay.profile).iloc[0]
    return float(row["pred_tokens_per_s_per_gpu"])


def main() -> None:
    measured = measured_tokens_per_s_per_gpu()
    rows = []
    for lay in load_mlperf()[0]:
        pred, meas = predicted_tokens_per_s_per_gpu(lay), measured[lay.row]
        err = pred / meas - 1.0
        rows.append(
            {
                "row": lay.row,
                "cluster": lay.cluster,
                "layout": layout_label(lay.plan),
                "measured_tokens_per_s_per_gpu": round(meas, 1),
                "predicted_tokens_per_s_per_gpu": round(pred, 1),
                "err": round(err, 4),
            }
        )
        print(
            f"{lay.row:22s} {lay.cluster:14s} measured {meas:8.1f} predicted {pred:8.1f} tok/s/GPU  {err:+.1%}",
            file=sys.stderr,
        )
    errs = np.array([r["err"] for r in rows])
    by_cluster = {}
    for c in dict.fromkeys(r["cluster"] for r in rows):
        e = np.array([r["err"] for r in rows if r["cluster"] == c])
        by_cluster[c] = {"n": int(len(e)), "median_signed_err": round(float(np.median(e)), 4)}
    summary = {
        "rows": len(rows),
        "median_abs_err": round(float(np.median(np.abs(errs))), 4),
        "median_signed_err": round(float(np.median(errs)), 4),
        "by_cluster": by_cluster,
        "per_row": rows,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
