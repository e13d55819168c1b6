"""Throughput of the AdamW step on this machine's CPU (parameters updated per second), the default of
`cluster.cpu_adam_params_per_s` for CPU offload (autotune/predict/perf_terms.py `offload_step_s`); prints JSON.

What it times: torch.optim.AdamW over fp32 tensors that live in host memory (the host step of plan.offload=optimizer
/ params: bench_model/parallel/offload.py and FSDP2 CPUOffloadPolicy both run torch's CPU AdamW), `foreach` and
`fused` variants, best of `--rounds` steps each after one warm-up step. DeepSpeed's DeepSpeedCPUAdam (AVX512/AVX2
SIMD, OpenMP over all cores) is faster per core than torch's CPU kernels; the ZeRO-Offload paper (Ren et al. 2021,
Sec 5.1, Table 2) reports its CPU-Adam 5.1-6.4x faster than PyTorch's CPU Adam.

The number stored in the presets is THIS 2-core shared CI box's (AMD EPYC, 2 vCPUs, torch CPU build), a placeholder
to be calibrated on the cluster's host CPUs (a DGX H100 host has 2x 56-core Xeon 8480C: far more).

    .venv/bin/python benchmarks/cpu_adam.py [--params 16000000] [--rounds 5] [--threads 0 (= torch default)]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import torch


def time_step(numel: int, chunks: int, rounds: int, **kw) -> float:
    """Best seconds of one AdamW step over `numel` fp32 parameters split into `chunks` tensors."""
    params = [torch.nn.Parameter(torch.randn(numel // chunks)) for _ in range(chunks)]
    for p in params:
        p.grad = torch.randn_like(p)
    opt = torch.optim.AdamW(params, lr=1e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, **kw)
    opt.step()  # allocates exp_avg / exp_avg_sq
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        opt.step()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--params", type=int, default=16_000_000)
    ap.add_argument("--chunks", type=int, default=16, help="tensors the parameters are split into (one per block)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0 = torch's default)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    out = {
        "what": "torch.optim.AdamW step on fp32 host tensors, parameters per second",
        "params": args.params,
        "threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "cpu": platform.processor() or platform.machine(),
        "torch": torch.__version__,
    }
    for name, kw in (("foreach", {"foreach": True}), ("fused", {"fused": True})):
        try:
            s = time_step(args.params, args.chunks, args.rounds, **kw)
        except (RuntimeError, TypeError) as e:  # fused CPU AdamW needs torch >= 2.4
            out[f"{name}_error"] = str(e).splitlines()[0]
            continue
        out[f"{name}_step_s"] = s
        out[f"{name}_params_per_s"] = args.params / s
    rates = [v for k, v in out.items() if k.endswith("_params_per_s")]
    out["cpu_adam_params_per_s"] = max(rates) if rates else None
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
