"""Does autotune accept the layouts teams actually ran? Every shared published layout (autotune/fitting/published_runs.py:
NeMo / Megatron-Bridge summaries, moe_blackwell_public_2026-11.csv, the torchao/torchtitan B200 rows, the H200 rows,
torchtitan's own benchmark pages: torchtitan_benchmarks.csv)
under its framework's profile (train.framework) with its recipe's settings, through the planner's own scoring
(`autotune.layouts.planner.score_arrays`: the rules and memory model `plan` and `estimate` use).

A layout that ran must be predicted to fit (no reject rule); an H200 case that OOMed must be predicted not to fit.
Where the source prints the allocator-visible peak (torch.cuda.max_memory_reserved), it is compared with the
predicted caching-allocator peak without runtime overhead (`mem_allocator_reserved`, which max_memory_reserved does not
include either). Each verdict is given twice: at the configured space.memory_headroom (the user's safety policy, 5%
by default: `fits`, `predicted_to_fit`) and at none (`fits_no_headroom`, `predicted_to_fit_no_headroom`: the device
total against the whole device). A row's recipe environment that changes the allocator (Megatron-Bridge's
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, `PublishedLayout.expandable_segments`) replaces the preset's. Prints per source and in total, last line ONE JSON object with `layouts`, `predicted_to_fit`,
`fit_rate`, `memory_median_abs_err`, `memory_max_abs_err`, `oom_predicted_not_to_fit`, `misses` (each: source, row,
framework, layout, reason, predicted reserved and usable GiB).
Run: PYTHONPATH=. python benchmarks/published_fit.py [--sources nemo,moe_blackwell,h200,torchtitan]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from functools import cache
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autotune.core.labels import layout_label  # noqa: E402
from autotune.core.plan_arrays import arrays_from_plans  # noqa: E402
from autotune.fitting.published_runs import LOADERS  # noqa: E402
from autotune.layouts.planner import score_arrays  # noqa: E402
from autotune.predict.memory import memory_arrays  # noqa: E402
from autotune.spec.config import load_config  # noqa: E402

GIB = 2**30


@cache
def _config(cluster: str):
    return load_config([f"cluster={cluster}"])


def layout_config(lay):
    """The config a published layout is scored under: its cluster preset with the recipe's allocator setting
    (PYTORCH_CUDA_ALLOC_CONF, published_runs.PublishedLayout.expandable_segments), its model and train."""
    base = _config(lay.cluster)
    cluster = base.cluster
    if lay.expandable_segments is not None:
        cluster = dataclasses.replace(cluster, expandable_segments=lay.expandable_segments)
    return dataclasses.replace(base, model=lay.model, train=lay.train, cluster=cluster)


def score(lay) -> dict:
    """The planner's verdict and memory for one published layout (its model, train and framework)."""
    cfg = layout_config(lay)
    arr = arrays_from_plans([lay.plan])
    row = score_arrays(arr, cfg, lay.plan.world_size, lay.profile).iloc[0]
    mem = memory_arrays(arr, lay.model, lay.train, cfg.cluster, lay.profile)
    usable = cfg.cluster.device_memory_bytes * (1 - cfg.space.memory_headroom)
    fits0 = row["reject_reason"] is None
    if not fits0:  # the same verdict without the user's safety margin (space.memory_headroom = 0)
        cfg0 = dataclasses.replace(cfg, space=dataclasses.replace(cfg.space, memory_headroom=0.0))
        fits0 = score_arrays(arr, cfg0, lay.plan.world_size, lay.profile).iloc[0]["reject_reason"] is None
    out = {
        "source": lay.source,
        "row": lay.row,
        "framework": lay.framework,
        "model": lay.model.name,
        "cluster": lay.cluster,
        "layout": layout_label(lay.plan),
        "ran": lay.ran,
        "fits": row["reject_reason"] is None,
        "fits_no_headroom": bool(fits0),
        "device_gib": round(cfg.cluster.device_memory_bytes / GIB, 2),
        "reason": row["reject_reason"],
        "reserved_gib": round(float(mem["reserved"][0]) / GIB, 2),
        "allocator_reserved_gib": round(float(mem["allocator_reserved"][0]) / GIB, 2),
        "usable_gib": round(usable / GIB, 2),
        "measured_gib": lay.measured_gib,
        "recipe_not_modelled": lay.recipe or None,
    }
    if lay.measured_gib:
        out["mem_err"] = round(out["allocator_reserved_gib"] / lay.measured_gib - 1.0, 4)
    return out


def summarise(rows: list[dict]) -> dict:
    ran = [r for r in rows if r["ran"]]
    oom = [r for r in rows if not r["ran"]]
    errs = np.abs([r["mem_err"] for r in rows if "mem_err" in r])
    fit = sum(r["fits"] for r in ran)
    fit0 = sum(r["fits_no_headroom"] for r in ran)
    return {
        "layouts": len(ran),
        "predicted_to_fit": fit,
        "fit_rate": round(fit / len(ran), 4) if ran else None,
        "oom_layouts": len(oom),
        "oom_predicted_not_to_fit": sum(not r["fits"] for r in oom),
        # the same verdicts at space.memory_headroom = 0 (the device total against the whole device)
        "predicted_to_fit_no_headroom": fit0,
        "fit_rate_no_headroom": round(fit0 / len(ran), 4) if ran else None,
        "oom_predicted_not_to_fit_no_headroom": sum(not r["fits_no_headroom"] for r in oom),
        "memory_rows": len(errs),
        "memory_median_abs_err": round(float(np.median(errs)), 4) if len(errs) else None,
        "memory_max_abs_err": round(float(errs.max()), 4) if len(errs) else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sources", default=",".join(LOADERS), help="comma-separated subset of " + ",".join(LOADERS))
    ap.add_argument("--limit", type=int, default=0, help="first N layouts of each source (smoke test)")
    args = ap.parse_args()
    rows, skipped = [], {}
    for name in args.sources.split(","):
        lays, skip = LOADERS[name]()
        rows += [score(lay) for lay in (lays[: args.limit] if args.limit else lays)]
        skipped[name] = len(skip)
    per_source = {s: summarise([r for r in rows if r["source"] == s]) for s in dict.fromkeys(r["source"] for r in rows)}
    for s, v in per_source.items():
        print(f"{s}: {json.dumps(v)}", file=sys.stderr)
    keys = ("source", "row", "framework", "model", "cluster", "layout", "reason", "reserved_gib", "usable_gib")
    keys += ("ran", "device_gib", "fits_no_headroom", "recipe_not_modelled")
    misses = [{k: r[k] for k in keys} for r in rows if r["fits"] != r["ran"]]
    for m in misses:
        why = f" [recipe also ran: {m['recipe_not_modelled']}]" if m["recipe_not_modelled"] else ""
        at0 = " (fits without headroom)" if m["fits_no_headroom"] == m["ran"] else ""
        print(f"miss {m['source']} {m['row']} {m['model']} {m['layout']}: {m['reason']}{at0}{why}", file=sys.stderr)
    mem = [
        {k: r[k] for k in ("source", "row", "model", "layout", "measured_gib", "allocator_reserved_gib", "mem_err")}
        for r in rows
        if "mem_err" in r
    ]
    print(
        json.dumps({**summarise(rows), "per_source": per_source, "skipped": skipped, "memory": mem, "misses": misses})
    )


if __name__ == "__main__":
    main()
