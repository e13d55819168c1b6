"""The best layout per value of an option searched only when asked (offload, dp_shard, fp8: they change the job), so a
slower option stays visible next to the overall ranking (`autotune plan`'s second table, `best_by_variant` in
`plan --json`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from autotune.core.labels import layout_label


def best_by_variant(df: Any, cfg: Any, fields: Iterable[str]) -> list[dict[str, Any]]:
    """For each of `fields` with > 1 enumerated value in the planner frame `df`: the best-ranked fitting layout per
    value with its device and host memory and the step terms the option changes (perf.perf_arrays: optimizer_s
    includes the host AdamW step and its PCIe copies under offload; dp_comm_s the exposed data-parallel time,
    dp_replicate_comm_s the HSDP all-reduce across replicas), or, when none fits, the most common rejection rule."""
    out = []
    for field in fields:
        values = sorted(df[field].dropna().unique().tolist())
        if len(values) < 2:
            continue
        for value in values:
            sub = df[df[field] == value]
            ranked = sub[sub["rank"].notna()].sort_values("rank")
            entry = {"field": field, "value": value, "enumerated": len(sub), "fitting": len(ranked)}
            if ranked.empty:
                entry["most_common_reject_rule"] = sub["reject_rule"].mode().iloc[0] if len(sub) else None
            else:
                entry.update(_best_terms(ranked.iloc[0], cfg))
            out.append(entry)
    return out


def _best_terms(best: Any, cfg: Any) -> dict[str, Any]:
    from autotune.core.plan_arrays import arrays_from_plans
    from autotune.layouts.candidate import plan_from_row
    from autotune.predict.perf import perf_arrays

    terms = perf_arrays(arrays_from_plans([plan_from_row(best)]), cfg.model, cfg.train, cfg.cluster)
    return {
        "rank": int(best["rank"]),
        "layout": layout_label(best),
        "candidate_id": best["candidate_id"],
        "mem_reserved_bytes": float(best["mem_reserved_bytes"]),
        "mem_host_bytes": float(best["mem_host_bytes"]),
        "pred_tokens_per_s_per_gpu": float(best["pred_tokens_per_s_per_gpu"]),
        "optimizer_s": float(terms["optimizer_s"][0]),
        "dp_comm_s": float(terms["dp_comm_s"][0]),
        "dp_replicate_comm_s": float(terms["dp_replicate_comm_s"][0]),
    }
