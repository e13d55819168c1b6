"""`autotune probe-memory [overrides incl. plan.*] [--gpus N] [--json]`: measure the worst-rank peak memory of one
layout of a world of N on this machine alone (fake process group; see bench_model/memory_probe.py), with the same
mem_* keys as `autotune estimate --json` so the two can be compared."""

from __future__ import annotations

import argparse

from autotune.cli.common import add_layout_command, gib, print_json


def add_parser(subparsers, name: str) -> argparse.ArgumentParser:
    return add_layout_command(
        subparsers,
        name,
        help="measure one layout's worst-rank peak memory without N devices",
        description="Probe one layout given by plan.* overrides on a fake process group; dp "
        "defaults to --gpus / (tp*pp*cp).",
        json_help="print the mem_* keys as JSON",
        run=run,
    )


def run(args) -> int:
    from autotune.cli.keys import load_config_for
    from autotune.results.trialfile import make_spec
    from bench_model.memory_probe import probe_memory

    cfg = load_config_for("probe-memory", args.overrides)
    spec = make_spec(cfg, cfg.plan(args.gpus), sweep_id="probe", trial_id="probe")
    row = probe_memory(spec)
    if args.json:
        print_json(row)
        return 0
    print(
        f"probe-memory ({row['probe_method']}), rank 0 of {row['num_gpus']}: what is alive at the moment of the "
        "allocated peak (a component freed or not yet allocated then reads 0)"
    )
    for key, value in row.items():
        if key.startswith("mem_"):
            print(f"  {key[4:-6]:<12} {gib(value)}")
    if not row.get("mem_grads_bytes") and row.get("mem_params_bytes"):
        # e.g. llama-3.2-1b on 8 ranks, seq 512, ZeRO-2 (FSDP2 keeps the unsharded parameters after the forward)
        print(
            "  grads 0: no gradient was alive at the moment of the allocated peak that the tracker reports; the "
            "step still holds gradients at other moments (`autotune estimate` counts them)"
        )
    return 0
