"""Peak memory of bench_model (`autotune probe-memory`) against torchtitan 0.2.2 (its Llama 3 model and
`parallelize_llama`), layout by layout, both measured on rank 0 of a fake process group under FakeTensorMode +
FSDPMemTracker (autotune/validation/torchtitan_probe.py). A reduced Llama-3-shaped model (V/h = 32 and f/h = 3.5 as
in Llama 3.1 8B, GQA) keeps the loss's share of memory realistic; world size 8 for every layout.

Prints one JSON object: per layout both peaks (bytes, optimizer state excluded: neither probe tracks it in fake
mode, both would add the same analytical AdamW state), their categories and bench_model/torchtitan, and next to them
the torchtitan profile's prediction (autotune.predict.memory with train.framework=torchtitan, autotune/predict/frameworks/torchtitan.py;
allocated peak less the AdamW state) and its ratio to torchtitan's peak.
    PYTHONPATH=. python benchmarks/memory_vs_torchtitan.py [--layouts NAME,...] [--small]"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from autotune.core.model import ModelSpec
from autotune.core.types import ParallelPlan

MODEL = ModelSpec(
    name="llama3-reduced",
    num_layers=4,
    hidden_size=256,
    ffn_hidden_size=896,
    num_heads=16,
    num_kv_heads=8,
    vocab_size=8192,
)
SEQ_LEN = 1024
Z3 = 3  # dp = FSDP degree; ZeRO-3 = fsdp_reshard_after_forward "always", as autotune's torchtitan export writes it
LAYOUTS = {  # world size 8 each; tp without FSDP trains in fp32 in torchtitan (maybe_enable_amp)
    "fsdp8_none": ParallelPlan(dp=8, zero_stage=Z3, micro_batch_size=2, recompute="none"),
    "fsdp8_selective": ParallelPlan(dp=8, zero_stage=Z3, micro_batch_size=2, recompute="selective"),
    "fsdp8_full": ParallelPlan(dp=8, zero_stage=Z3, micro_batch_size=2, recompute="full"),
    "fsdp8_none_zero2": ParallelPlan(dp=8, zero_stage=2, micro_batch_size=2, recompute="none"),
    "tp8_sp": ParallelPlan(dp=1, tp=8, sequence_parallel=True, micro_batch_size=2, recompute="none"),
    "fsdp4_tp2_sp_selective": ParallelPlan(
        dp=4, tp=2, zero_stage=Z3, sequence_parallel=True, micro_batch_size=2, recompute="selective"
    ),
    "fsdp4_tp2_sp_full": ParallelPlan(
        dp=4, tp=2, zero_stage=Z3, sequence_parallel=True, micro_batch_size=2, recompute="full"
    ),
    "fsdp2_tp4_sp_none": ParallelPlan(
        dp=2, tp=4, zero_stage=Z3, sequence_parallel=True, micro_batch_size=2, recompute="none"
    ),
    # torchtitan's CP needs CUDA SDPA (no CP rule for the CPU flash kernel): these two report its error
    "fsdp4_cp2_none": ParallelPlan(dp=4, cp=2, zero_stage=Z3, micro_batch_size=2, recompute="none"),
    "fsdp2_tp2_cp2_full": ParallelPlan(
        dp=2, tp=2, cp=2, zero_stage=Z3, sequence_parallel=True, micro_batch_size=2, recompute="full"
    ),
}


def profile_peak(plan: ParallelPlan, model: ModelSpec = MODEL, seq_len: int = SEQ_LEN) -> float:
    """The torchtitan profile's allocated peak less the AdamW state (neither probe tracks it)."""
    from autotune.core.plan_arrays import arrays_from_plans
    from autotune.predict.memory import memory_arrays
    from autotune.spec.config import load_config

    fp32 = plan.dp * plan.cp == 1  # torchtitan's maybe_enable_amp: no mixed precision with TP/PP but no FSDP
    cfg = load_config(
        [
            "model=tiny",
            "cluster=cpu",
            f"train.precision={'fp32' if fp32 else 'bf16'}",
            f"train.seq_len={seq_len}",
            f"train.global_batch_size={plan.dp * plan.micro_batch_size}",
            "train.framework=torchtitan",
        ]
    )
    m = memory_arrays(arrays_from_plans([plan]), model, cfg.train, cfg.cluster)
    return float(m["allocated"][0] - m["optimizer"][0])


def compare(name: str, plan: ParallelPlan, model: ModelSpec = MODEL, seq_len: int = SEQ_LEN) -> dict:
    from autotune.validation.torchtitan_probe import compare_layout

    both = compare_layout(model, plan, seq_len, "fp32" if plan.dp * plan.cp == 1 else "bf16")
    bm, tt = both["bench_model"], both["torchtitan"]
    pred = profile_peak(plan, model, seq_len)
    return {
        "layout": name,
        "plan": {k: getattr(plan, k) for k in ("dp", "tp", "cp", "micro_batch_size", "recompute", "sequence_parallel")},
        "bench_model_peak_bytes": bm["peak_bytes"],
        "torchtitan_peak_bytes": tt["peak_bytes"],
        "ratio": bm["peak_bytes"] / tt["peak_bytes"],
        "torchtitan_profile_peak_bytes": pred,
        "profile_ratio": pred / tt["peak_bytes"],
        "bench_model_by_category": bm["by_category"],
        "torchtitan_by_category": tt["by_category"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layouts", default=",".join(LAYOUTS))
    ap.add_argument("--small", action="store_true", help="one layer, seq 256: the smoke test's run (same code path)")
    args = ap.parse_args(argv)
    names = args.layouts.split(",")
    unknown = [n for n in names if n not in LAYOUTS]
    if unknown:
        ap.error(f"--layouts: unknown {unknown}; known: {list(LAYOUTS)}")
    model = dataclasses.replace(MODEL, num_layers=1) if args.small else MODEL
    seq_len = 256 if args.small else SEQ_LEN
    rows = []
    for name in names:
        try:
            rows.append(compare(name, LAYOUTS[name], model, seq_len))
        except RuntimeError as exc:  # a layout one of the probes cannot run is reported, not hidden
            rows.append({"layout": name, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"})
    ok = [r for r in rows if "ratio" in r]
    print(
        json.dumps(
            {
                "model": model.name,
                "num_layers": model.num_layers,
                "seq_len": seq_len,
                "world_size": 8,
                "layouts": rows,
                # true only when every layout was compared and bench_model's peak <= torchtitan's on each
                "bench_model_le_torchtitan": all(r["ratio"] <= 1.0 for r in ok) and len(ok) == len(rows),
                "compared": len(ok),
                "bench_model_le_torchtitan_on_compared": all(r["ratio"] <= 1.0 for r in ok),
                "not_compared": [r["layout"] for r in rows if "ratio" not in r],
                "profile_within_5pct": all(abs(r["profile_ratio"] - 1) <= 0.05 for r in ok),
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
