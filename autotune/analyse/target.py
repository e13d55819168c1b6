"""Memory a layout is expected to need under a target framework's profile, next to what bench_model measured.

A sweep's trials run bench_model, so its measured peaks are bench_model's; when `train.framework` names another
target, `autotune report` shows each measured layout's predicted peak under that target's profile next to the
measured bench_model peak, and `autotune export` writes the target's expected peak into the exported file.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from autotune.predict.frameworks import PROFILES

# the first word of each exporter's TARGET string (autotune/interop/*.py) -> the profile that describes that trainer
_TARGET_PREFIX = {
    "torchtitan": "torchtitan",
    "megatron-lm": "megatron",
    "nanotron": "nanotron",
    "deepspeed": "deepspeed",
}


def profile_for_format(fmt: str, train) -> str:
    """The profile an export format's trainer follows: the format's own profile, bench_model for `autotune` (the
    trial file bench_model runs), otherwise (accelerate) the sweep's train.framework."""
    if fmt in PROFILES:
        return fmt
    return "bench_model" if fmt == "autotune" else train.framework


def profile_for_target(target: str, train) -> str:
    """The profile for an exporter's TARGET string ("Megatron-LM core_r0.12.0 (...)" -> megatron)."""
    return _TARGET_PREFIX.get(target.split()[0].lower(), train.framework) if target else train.framework


def expected_memory(model, train, cluster, plan, framework: str) -> dict[str, Any]:
    """Worst-rank allocated and reserved bytes of `plan` under `framework`'s profile, and `rejected`: the profile's
    rule the layout breaks (its message), None when the profile can run it. A rejected layout's bytes are the
    profile's accounting applied outside what it models: a bound, not a prediction."""
    from autotune.core.plan_arrays import arrays_from_plans
    from autotune.layouts.rules import rejections
    from autotune.predict.memory import memory_arrays

    arr, target = arrays_from_plans([plan]), replace(train, framework=framework)
    m = memory_arrays(arr, model, target, cluster)
    _, reasons = rejections(arr, model, target, cluster)
    return {
        "framework": framework,
        "allocated_bytes": float(m["allocated"][0]),
        "reserved_bytes": float(m["reserved"][0]),
        "worst_pp_rank": int(m["worst_pp_rank"][0]),
        "device_bytes": int(cluster.device_memory_bytes),
        "rejected": reasons[0],
    }


def expected_memory_line(model, train, cluster, plan, framework: str) -> str:
    e = expected_memory(model, train, cluster, plan, framework)
    if e["rejected"]:
        return f"Expected memory under the {framework} profile: not modelled, the profile rejects this layout ({e['rejected']})."
    return (
        f"Expected memory under the {framework} profile (docs/frameworks.md): peak {e['reserved_bytes'] / 2**30:.1f} "
        f"GiB reserved ({e['allocated_bytes'] / 2**30:.1f} GiB allocated) per GPU, pipeline rank "
        f"{e['worst_pp_rank']}, of {e['device_bytes'] / 2**30:.1f} GiB."
    )


def target_peaks(df, cfg) -> Any:
    """For each measured (`ok`) or simulated row of a sweep whose train.framework is not bench_model: trial_id, the measured
    bench_model peak, bench_model's predicted peak and the target profile's predicted peak (reserved bytes)."""
    import pandas as pd

    from autotune.layouts.candidate import plan_from_row

    rows = []
    for _, r in df[df["status"].isin(["ok", "simulated"])].iterrows():
        plan = plan_from_row(r.to_dict())
        peak = r.get("peak_mem_reserved_bytes")
        if peak is None or peak != peak:
            peak = r.get("peak_mem_allocated_bytes")
        bench = expected_memory(cfg.model, cfg.train, cfg.cluster, plan, "bench_model")
        target = expected_memory(cfg.model, cfg.train, cfg.cluster, plan, cfg.train.framework)
        rows.append(
            {
                "trial_id": r["trial_id"],
                "measured_peak_bytes": peak,
                "pred_bench_model_bytes": bench["reserved_bytes"],
                "pred_target_bytes": target["reserved_bytes"],
                "framework": cfg.train.framework,
                "row": r,
            }
        )
    return pd.DataFrame(rows)
