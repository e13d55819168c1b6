"""`autotune devbench [--backend local|slurm|ray] [--gpus N] [-o PRESET.yaml] [--cap D] [cluster=BASE] [model=...]
[train.seq_len=...]`: time the model's GEMMs (bf16, and FP8 where the device has it), the experts' grouped GEMM, causal
attention at the configured sequence length and HBM bandwidth on the user's device, on ranks started by the sweep's
own launchers; fit the speed model's efficiencies (fractions of the preset's datasheet peaks) and write a cluster
preset that future plans load with `cluster=<preset stem>` (autotune/fitting/devbench.py)."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from pathlib import Path

from autotune.cli.common import add_overrides, positive_int, print_json


def add_parser(sub, name: str) -> None:
    p = sub.add_parser(
        name, help="measure GEMM/attention/HBM efficiency and write a cluster preset", description=__doc__
    )
    from launchers import launcher_names

    p.add_argument(
        "--backend",
        default="local",
        choices=launcher_names(measuring=True),
        help="local: N ranks on this host; slurm / ray: ranks placed like a trial's",
    )
    p.add_argument(
        "--workdir", default=None, help="ranks' files and logs (default: <sweep.results_dir>/_devbench/<UTC>)"
    )
    p.add_argument("--gpus", type=positive_int("--gpus"), default=1, help="ranks to start, one per device (default 1)")
    p.add_argument(
        "-o", "--output", default=None, help="preset to write (default: search_spaces/cluster/<base>-devbench.yaml)"
    )
    p.add_argument(
        "--cap",
        type=positive_int("--cap"),
        default=None,
        help="largest dimension timed (default: none on CUDA, 256 on a cpu preset: CI-sized shapes)",
    )
    p.add_argument("--iters", type=positive_int("--iters"), default=5, help="timed iterations per shape")
    p.add_argument("--json", action="store_true", help="print the samples and the fit as JSON")
    add_overrides(p)
    p.set_defaults(run=run)


def _header(args: argparse.Namespace, base: str, device: str, fit, n: int) -> str:
    raw = ", ".join(f"{k}={v:.4g}" for k, v in fit.raw.items())
    grouped = "" if fit.grouped_vs_model is None else f"\ngrouped GEMM measured / modelled = {fit.grouped_vs_model:.3f}"
    return (
        f"Measured by `autotune devbench --backend {args.backend} --gpus {args.gpus}` on "
        f"{datetime.now(timezone.utc).isoformat(timespec='seconds')} ({device}, {n} samples)\nfrom preset {base!r}: "
        f"efficiencies = measured fraction of the preset's peaks (autotune/fitting/devbench.py). Raw: {raw}{grouped}\n"
        + "\n".join(fit.notes)
    )


def run(args: argparse.Namespace) -> int:
    from autotune.fitting.devbench import (
        CPU_DIM_CAP,
        DevbenchFailed,
        apply_to_cluster,
        fit_devbench,
        run_devbench,
    )
    from autotune.fitting.netbench import check_preset_path, preset_usage, write_cluster_preset
    from autotune.spec.config import SEARCH_SPACES, load_config

    if args.output is not None:
        check_preset_path(args.output)
    cfg = load_config(args.overrides)
    base = cfg.cluster
    cap = args.cap if args.cap is not None else (CPU_DIM_CAP if base.device_type == "cpu" else None)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    workdir = Path(args.workdir or Path(cfg.sweep.results_dir) / "_devbench" / stamp).resolve()
    print(f"devbench: {args.gpus} rank(s) via --backend {args.backend}; files and logs in {workdir}", file=sys.stderr)
    try:
        samples, device = run_devbench(
            args.gpus,
            cfg=cfg,
            backend=args.backend,
            iters=args.iters,
            cap=cap,
            workdir=workdir,
            timeout_s=cfg.sweep.timeout_s,
        )
    except DevbenchFailed as e:
        print(f"autotune: devbench failed: {e}", file=sys.stderr)
        return 1
    fit = fit_devbench(samples, base, cfg.train.compute_dtype)
    out = args.output or str(SEARCH_SPACES / "cluster" / f"{base.name}-devbench.yaml")
    path = write_cluster_preset(apply_to_cluster(base, fit), out, _header(args, base.name, device, fit, len(samples)))
    fields = (
        "matmul_efficiency",
        "lowp_gemm_efficiency",
        "attention_efficiency",
        "stream_efficiency",
        "grouped_vs_model",
    )
    if args.json:
        print_json({"device": device, "fit": {f: getattr(fit, f) for f in fields}, "raw": fit.raw,
                    "notes": list(fit.notes), "samples": samples, "preset": str(path)})  # fmt: skip
    else:
        for f in fields:
            v = getattr(fit, f)
            print(f"{f:>22}: {'not measured' if v is None else f'{v:.4f}'}")
        for note in fit.notes:
            print(f"note: {note}")
        print(f"wrote {path} ({preset_usage(path)})")
    return 0
