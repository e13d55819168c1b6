"""`autotune netbench [--backend local|slurm|ray] --gpus N [-o PRESET.yaml] [cluster=BASE] [sweep.slurm.*|sweep.ray.*]`:
time the collectives on real ranks started by the sweep's own launchers, fit α/β per link class (intra-node, and
inter-node when the ranks span hosts) and write a cluster preset that future sweeps load with `cluster=<preset stem>`."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from pathlib import Path

from autotune.cli.common import add_overrides, positive_int, print_json
from autotune.core.errors import UsageError


def add_parser(sub, name: str) -> None:
    p = sub.add_parser(
        name, help="measure collective latency/bandwidth and write a cluster preset", description=__doc__
    )
    from launchers import launcher_names

    p.add_argument(
        "--backend",
        default="local",
        choices=launcher_names(measuring=True),
        help="local: N ranks on this host (gloo on CPU, NCCL on GPUs; intra-node only); slurm: one job "
        "sized like a trial; ray: a placement group (both measure inter-node links when ranks span hosts)",
    )
    p.add_argument(
        "--workdir",
        default=None,
        help="where the ranks' files and logs go; must be seen by every rank "
        "(default: <sweep.results_dir>/_netbench/<UTC time>)",
    )
    p.add_argument("--gpus", type=positive_int("--gpus"), required=True, help="ranks to start (>= 2)")
    p.add_argument(
        "-o", "--output", default=None, help="preset to write (default: search_spaces/cluster/<base>-netbench.yaml)"
    )
    p.add_argument("--sizes", default=None, help="comma-separated message sizes in bytes (default 4K,64K,1M,4M)")
    p.add_argument("--iters", type=positive_int("--iters"), default=5, help="timed iterations per point")
    p.add_argument("--json", action="store_true", help="print the samples and fits as JSON")
    add_overrides(p)
    p.set_defaults(run=run)


def _sizes(text: str | None) -> tuple[int, ...]:
    from autotune.fitting.netbench import DEFAULT_SIZES_BYTES

    if text is None:
        return DEFAULT_SIZES_BYTES
    try:
        sizes = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise UsageError(f"--sizes={text!r} must be comma-separated integers (bytes)") from None
    if len(set(sizes)) < 2 or min(sizes) < 16:
        raise UsageError(f"--sizes={text!r} must list >= 2 distinct sizes, each >= 16 bytes")
    return sizes


def run(args: argparse.Namespace) -> int:
    from autotune.fitting.netbench import (
        NetbenchFailed,
        apply_to_cluster,
        check_preset_path,
        preset_usage,
        run_netbench,
        write_cluster_preset,
    )
    from autotune.spec.config import SEARCH_SPACES, load_config

    if args.gpus < 2:
        raise UsageError(f"--gpus={args.gpus} must be >= 2 (a collective needs two ranks)")
    sizes = _sizes(args.sizes)
    if args.output is not None:
        check_preset_path(args.output)
    from autotune.cli.keys import check_overrides

    cfg = load_config(check_overrides("netbench", args.overrides))
    base = cfg.cluster
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    workdir = Path(args.workdir or Path(cfg.sweep.results_dir) / "_netbench" / stamp).resolve()
    print(
        f"netbench: {args.gpus} ranks via --backend {args.backend}; files and logs in {workdir}",
        file=sys.stderr,
        flush=True,
    )
    try:
        result = run_netbench(
            args.gpus,
            sizes,
            iters=args.iters,
            cfg=cfg,
            backend=args.backend,
            workdir=workdir,
            timeout_s=cfg.sweep.timeout_s,
        )
    except NetbenchFailed as e:
        print(f"autotune: netbench failed: {e}", file=sys.stderr)
        return 1
    from autotune.fitting.netbench_cpu import store_cpu_fits

    cluster = store_cpu_fits(apply_to_cluster(base, result), result)
    out = args.output or str(SEARCH_SPACES / "cluster" / f"{base.name}-netbench.yaml")
    fitted = "\n".join(
        f"{link} alpha={fit.latency_s:.3g} s beta={fit.bw_bytes_per_s:.3g} B/s (rel. RMS error {fit.rel_rms_error:.2f})"
        for link, fit in result.fits.items()
    )
    fitted += "".join(
        f"\n{link} in CPU seconds per rank (cpu_comm_* below: scale-down on CPU ranks): alpha={fit.latency_s:.3g} s "
        f"beta={fit.bw_bytes_per_s:.3g} B/s (rel. RMS error {fit.rel_rms_error:.2f})"
        for link, fit in result.cpu_fits.items()
    )
    header = (
        f"Measured by `autotune netbench --backend {args.backend} --gpus {args.gpus}` on "
        f"{datetime.now(timezone.utc).isoformat(timespec='seconds')} ({result.backend}, {len(result.samples)} "
        f"samples)\nfrom preset {base.name!r}. Fit t = ring_steps*alpha + busbw_factor*n/beta (autotune.predict.perf.ring_s;\n"
        f"bus factors from nccl-tests PERFORMANCE.md):\n"
        f"{fitted}\n"
        + "\n".join(result.notes)
        + "\ncomm_efficiency=1.0: measured bandwidth is already what the links deliver."
    )
    path = write_cluster_preset(cluster, out, header)
    if args.json:
        print_json({**result.to_json(), "preset": str(path)})
    else:
        for name, fit in {**result.per_collective, **result.fits}.items():
            print(
                f"{name:>15}: alpha {fit.latency_s * 1e6:9.1f} us  beta {fit.bw_bytes_per_s / 1e9:8.3f} GB/s  "
                f"({fit.num_samples} samples, rel. RMS {fit.rel_rms_error:.2f})"
            )
        for link, fit in result.cpu_fits.items():
            print(
                f"{'cpu ' + link:>15}: alpha {fit.latency_s * 1e6:9.1f} us  beta {fit.bw_bytes_per_s / 1e9:8.3f} GB/s  "
                f"(CPU seconds per rank, rel. RMS {fit.rel_rms_error:.2f})"
            )
        for note in result.notes:
            print(f"note: {note}")
        print(f"wrote {path} ({preset_usage(path)})")
    return 0
