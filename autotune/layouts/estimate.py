"""One layout's full estimate: the planner's row for `cfg.plan(num_gpus)` plus the named memory and step-time terms
(what `autotune estimate` prints, and what benchmarks compare measurements with)."""

from __future__ import annotations

from typing import Any

from autotune.core.errors import SpecError


def estimate(cfg: Any, num_gpus: int | None) -> dict[str, Any]:
    """Everything `estimate` reports for cfg.plan(num_gpus) (cfg: autotune.spec.config.Config): the planner's row
    (mem_*, pred_*, fits, reject_reason, margins) plus the compute-dtype copy, what the caching allocator keeps beyond
    the allocated peak per class (mem_cached_{step,grads,logits}_bytes), the device-side model states, the worst
    pipeline rank, each step-time term as pred_<term>_s and the trial's compile time. SpecError when a layout rule
    refuses the plan. Imports lazily: `autotune estimate` builds its parser without numpy."""
    from autotune.core.plan_arrays import arrays_from_plans
    from autotune.layouts.planner import score_arrays
    from autotune.layouts.rules import check_plan
    from autotune.predict.memory import memory_arrays
    from autotune.predict.perf import perf_arrays
    from autotune.predict.perf_terms import compile_time_s

    plan = cfg.plan(num_gpus)
    reason = check_plan(plan, cfg.model, cfg.train, cfg.cluster, cfg.space)
    if reason is not None:
        raise SpecError(reason)
    arr = arrays_from_plans([plan])
    row = score_arrays(arr, cfg, plan.world_size).iloc[0].to_dict()
    mem = {k: float(v[0]) for k, v in memory_arrays(arr, cfg.model, cfg.train, cfg.cluster).items()}
    perf = {k: float(v[0]) for k, v in perf_arrays(arr, cfg.model, cfg.train, cfg.cluster).items()}
    model_states = mem["params"] - mem["compute_copy"] + mem["grads"] + mem["optimizer"]  # device side only
    row.update(
        {
            "mem_compute_copy_bytes": mem["compute_copy"],
            # what the caching allocator keeps beyond the allocated peak, per class (autotune/predict/reserved.py)
            **{f"mem_cached_{k}_bytes": mem[f"cached_{k}"] for k in ("step", "grads", "logits")},
            "mem_model_states_bytes": model_states,
            "worst_pp_rank": int(mem["worst_pp_rank"]),
            "worst_pp_rank_layers": int(mem["worst_pp_rank_layers"]),
            **{f"pred_{k}": v for k, v in perf.items() if k.endswith("_s") and k != "step_s"},
        }
    )
    # the trial's compile time (warm-up: outside the step, inside its wall time and cost)
    row["pred_compile_time_s"] = float(compile_time_s([plan.compile], cfg.cluster)[0])
    row.pop("rank", None)
    return row
