"""Planner speed: enumerate, check, and score every layout of Llama-3.1-405B on 16,384 H100s with the full default
space. Prints JSON {"model", "num_gpus", "candidates", "seconds"}; seconds is the best of --repeat runs of
`enumerate_candidates` (config loading excluded; reported separately). Target: <= 1 s on the 2-core CI machine."""

from __future__ import annotations

import argparse
import json
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--gpus", type=int, default=16384)
    ap.add_argument("--model", default="llama-3.1-405b")
    ap.add_argument("--cluster", default="h100-sxm-80gb")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    t0 = time.perf_counter()
    from autotune.layouts.planner import enumerate_candidates
    from autotune.spec.config import load_config

    cfg = load_config([f"model={args.model}", f"cluster={args.cluster}"])
    config_s = time.perf_counter() - t0
    times, n = [], 0
    for _ in range(args.repeat):
        t = time.perf_counter()
        df = enumerate_candidates(cfg, args.gpus)
        times.append(time.perf_counter() - t)
        n = len(df)
    print(
        json.dumps(
            {
                "model": args.model,
                "num_gpus": args.gpus,
                "candidates": n,
                "seconds": round(min(times), 4),
                "seconds_median": round(sorted(times)[len(times) // 2], 4),
                "fitting": int(df["rank"].notna().sum()),
                "config_load_seconds": round(config_s, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
