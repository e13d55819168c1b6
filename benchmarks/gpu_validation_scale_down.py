"""`benchmarks/gpu_validation.py --scale-down`: one 8-GPU layout composed from a 1-GPU scale-down trial
(autotune/run/scaledown.py, docs/scale_down.md), next to the published measurement of the same layout.

The layout: NVIDIA NeMo 24.07's performance summary, LLAMA2-7B pre-training on 8 x H100 (DGX-H100), FP8, global batch
128, micro-batch 1, seq 4096, TP 1, PP 1, CP 1 (so DP 8 with the distributed optimizer): 16,934 tokens/s/GPU
(benchmarks/data/measured/nemo_megatron_bridge_performance_summary.csv, row "LLAMA2-7B,8,FP8,128,1,4096"; source
NVIDIA/NeMo docs/source/performance/performance_summary.md @8e3d65dc). Llama-2-7B is llama-3.1-8b's shape with
vocab 32000, 32 KV heads (MHA) and FFN 11008 (Touvron et al. 2023, Table 1 / the HF config). bench_model runs the FP8
linears as torchao tensorwise float8 (NeMo: Transformer Engine delayed scaling), and plain ZeRO-1 for the distributed
optimizer. The replica: dp 1, all 32 layers, 4 micro-batches, ZeRO 0, on one GPU; the DP-8 gradient reduce-scatter
and parameter all-gather priced from the cluster preset's alpha-beta (no netbench fit on one GPU).

    PYTHONPATH=. python benchmarks/gpu_validation.py --scale-down               # on a CUDA machine (H100/H200)
    PYTHONPATH=. python benchmarks/gpu_validation.py --scale-down --device cpu  # the same path, tiny model, CPU

Prints ONE JSON object: target and replica layouts, the replica's measured step, the composed step / tok/s/GPU / MFU,
measured and modelled parts, the published tok/s/GPU and composed / published. Not run yet: no GPU was lent.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PUBLISHED_TOK_S_GPU = 16934.0  # NeMo 24.07 LLAMA2-7B, 8 x H100, FP8, gbs 128, mbs 1, seq 4096, tp1 pp1 cp1
LLAMA2_7B = ["model=llama-3.1-8b", "model.vocab_size=32000", "model.num_kv_heads=32", "model.ffn_hidden_size=11008"]
CUDA_CASE = [*LLAMA2_7B, "train.seq_len=4096", "train.global_batch_size=128", "plan.fp8=tensorwise"]
CPU_CASE = ["experiment=demo"]  # tiny, 16 x 128 tokens: the same code path on CPU ranks


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scale-down", action="store_true")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument("--cluster", default="h100-sxm-80gb", help="preset the layout is priced on (cuda)")
    p.add_argument("--warmup-steps", type=int, default=2)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--workdir", default=str(ROOT / "results" / "_gpu_validation_scale_down"))
    args = p.parse_args(argv)
    if args.device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
        overrides = [*CPU_CASE, "cluster=cpu"]
    else:
        import torch

        if not torch.cuda.is_available():
            print("gpu_validation --scale-down: no CUDA device here (or --device cpu)", file=sys.stderr)
            return 2
        overrides = [*CUDA_CASE, f"cluster={args.cluster}"]
    from autotune.results.trialfile import make_spec
    from autotune.run.scaledown import compose_row, replica_spec
    from autotune.spec.config import load_config
    from launchers.local import LocalLauncher

    cfg = load_config([*overrides, f"sweep.warmup_steps={args.warmup_steps}"])
    plan = dataclasses.replace(cfg.plan(8), dp=8, zero_stage=1, micro_batch_size=1)
    plan = dataclasses.replace(plan, grad_accum_steps=cfg.train.global_batch_size // 8)
    target = make_spec(cfg, plan, sweep_id="gpu-validation", trial_id="scale-down-8from1", timed_steps=args.steps)
    sd = replica_spec(target, 1)
    launcher = LocalLauncher(workdir=args.workdir)
    try:
        replica_row = launcher.submit(sd.replica).result()
    finally:
        launcher.close()
    row = compose_row(sd, replica_row)
    keys = ("status", "replica_step_time_s", "step_time_mean_s", "tokens_per_s_per_gpu", "mfu", "measured_parts")
    out = {
        "device": args.device,
        "target": {"num_gpus": 8, **{k: getattr(plan, k) for k in ("dp", "tp", "pp", "cp", "zero_stage", "fp8")}},
        "replica": {k: row[f"replica_{k}"] for k in ("num_gpus", "dp", "num_layers", "grad_accum_steps")},
        **{k: row[k] for k in (*keys, "modelled_parts", "full_size_gpu_seconds")},
        "error": replica_row.get("error_message"),
    }
    if args.device == "cuda":
        out["published_tok_s_gpu"] = PUBLISHED_TOK_S_GPU
        tok = row["tokens_per_s_per_gpu"]
        out["composed_over_published"] = None if tok is None else tok / PUBLISHED_TOK_S_GPU
    print(json.dumps(out))
    return 0 if row["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
