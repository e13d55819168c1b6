"""Predicted vs measured FP8/BF16 throughput ratio on H100: the llm-foundry MPT benchmark tables have BF16 and FP8
(Transformer Engine, amp_fp8) rows of the same model, sequence length and GPU count (benchmarks/data/measured/
llmfoundry_mpt_benchmarks.csv). Each row becomes a plan as autotune/fitting/reference_runs.py `load_llmfoundry` builds it;
the FP8 row gets plan.fp8=tensorwise (TE's per-tensor scaling is the closest recipe). Prints JSON: per pair the
measured and predicted ratios, and Llama 3.2 1B / 3B / 3.1 8B predictions on 8 H100 (FSDP, seq 4096 and 8192).
Not a fit: the perf model's coefficients are the preset's (fitted on BF16 rows only).

    .venv/bin/python benchmarks/fp8_ratio.py
"""

from __future__ import annotations

import argparse
import json

import pandas as pd

from autotune.core.types import ParallelPlan
from autotune.fitting.fit_reference import load_preset
from autotune.fitting.reference_runs import DATA, GPU_PRESET, MPT_SHAPES, llmfoundry_layout
from autotune.predict.perf import estimate_perf
from autotune.spec.config import load_config


def _predict(r, fp8: str) -> float:
    model, train, plan = llmfoundry_layout(r, fp8)
    return estimate_perf(plan, model, train, load_preset(GPU_PRESET[r.gpu_type])).tokens_per_s_per_gpu


def llmfoundry_pairs() -> list[dict]:
    df = pd.read_csv(DATA / "llmfoundry_mpt_benchmarks.csv")
    df = df[(df.gpu_type == "h100_80gb") & df.model.isin(list(MPT_SHAPES))]
    keys = ["model", "seq_len", "n_gpus", "activation_checkpointing"]
    bf, f8 = df[df.precision == "amp_bf16"], df[df.precision == "amp_fp8"]
    out = []
    for _, r8 in f8.iterrows():
        match = bf[(bf[keys] == r8[keys]).all(axis=1)]
        if match.empty:
            continue
        rb = match.iloc[0]
        measured = float(r8.throughput_tok_per_s_per_gpu) / float(rb.throughput_tok_per_s_per_gpu)
        predicted = _predict(r8, "tensorwise") / _predict(rb, "none")
        out.append(
            {
                **{k: (bool(r8[k]) if k == "activation_checkpointing" else r8[k]) for k in keys},
                "micro_batch_fp8": int(r8.micro_batch),
                "micro_batch_bf16": int(rb.micro_batch),
                "measured_ratio": round(measured, 3),
                "predicted_ratio": round(predicted, 3),
            }
        )
    return out


def llama_h100() -> list[dict]:
    out = []
    for model in ("llama-3.2-1b", "llama-3.2-3b", "llama-3.1-8b"):
        for seq, mbs in ((4096, 2), (8192, 1)):
            cfg = load_config(
                [f"model={model}", "cluster=h100-sxm-80gb", "train.global_batch_size=64", f"train.seq_len={seq}"]
            )
            tok = {}
            for fp8 in ("none", "tensorwise"):
                plan = ParallelPlan(dp=8, zero_stage=3, micro_batch_size=mbs, grad_accum_steps=64 // (8 * mbs), fp8=fp8)
                tok[fp8] = estimate_perf(plan, cfg.model, cfg.train, cfg.cluster).tokens_per_s_per_gpu
            out.append(
                {
                    "model": model,
                    "seq_len": seq,
                    "layout": f"dp8 zero3 mbs{mbs}",
                    "bf16_tok_s_gpu": round(tok["none"]),
                    "fp8_tok_s_gpu": round(tok["tensorwise"]),
                    "speedup": round(tok["tensorwise"] / tok["none"], 3),
                }
            )
    return out


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    print(
        json.dumps({"llmfoundry_h100_fp8_vs_bf16": llmfoundry_pairs(), "llama_h100_prediction": llama_h100()}, indent=1)
    )


if __name__ == "__main__":
    main()
