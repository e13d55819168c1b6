"""`autotune calibrate SWEEP_DIR -o search_spaces/cluster/<name>.yaml [KEY=VALUE ...]`: refit the perf-model
efficiencies and memory-model overhead/fragmentation from the sweep's measured rows and write a calibrated cluster
preset (future sweeps load it with `cluster=<name>`). The model/train/cluster are the sweep's own configuration
(its saved overrides), and KEY=VALUE overrides on top."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone
from pathlib import Path

from autotune.cli.common import add_overrides, print_json
from autotune.core.errors import InputFileError


def add_parser(sub, name: str) -> None:
    p = sub.add_parser(
        name,
        help="refit model coefficients from a sweep's measurements and write a cluster preset",
        description=__doc__,
    )
    p.add_argument("sweep_dir", metavar="SWEEP_DIR", help="results/<sweep_id>")
    p.add_argument("-o", "--output", required=True, help="preset YAML to write, e.g. search_spaces/cluster/mine.yaml")
    p.add_argument("--json", action="store_true", help="print the fit as JSON")
    add_overrides(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from autotune.cli.keys import check_overrides
    from autotune.fitting.netbench import check_preset_path, preset_usage, write_cluster_preset
    from autotune.results.store import read_results
    from autotune.search.calibrate import calibrate, sweep_specs

    sweep_dir = Path(args.sweep_dir)
    check_preset_path(args.output)
    if not sweep_dir.is_dir():
        raise InputFileError(f"SWEEP_DIR={str(sweep_dir)!r} is not a directory")
    model, train, cluster = sweep_specs(sweep_dir, check_overrides("calibrate", args.overrides))
    rows = read_results(sweep_dir)
    rows = rows[(rows["model_name"] == model.name) & (rows["seq_len"] == train.seq_len)]
    cal = calibrate(rows, model, train, cluster)
    if cal.perf_rms_log_error_before is None:
        raise InputFileError(
            f"SWEEP_DIR={str(sweep_dir)!r} has {cal.num_rows} measured rows (status ok) for model "
            f"{model.name!r}; calibration needs >= 3"
        )
    # composed rows (scale-down trials, docs/scale_down.md) are fitted like measured ones and counted apart: their
    # dp / pp / bubble parts are the model's own terms, so they constrain the compute coefficients only
    composed = int(rows.loc[rows["status"] == "ok", "scaled_from"].notna().sum())
    kind = f" ({composed} composed from scale-down trials)" if composed else ""
    header = (
        f"Calibrated by `autotune calibrate {sweep_dir}` on {datetime.now(timezone.utc).isoformat(timespec='seconds')}\n"
        f"from preset {cluster.name!r} and {cal.num_rows} measured rows{kind} of model {model.name!r}:\n"
        + "\n".join(cal.describe())
        + f"\nRMS log error of predicted tokens/s/GPU: {cal.perf_rms_log_error_before:.3f} -> "
        f"{cal.perf_rms_log_error_after:.3f}"
    )
    path = write_cluster_preset(cal.cluster, args.output, header)
    if args.json:
        print_json(
            {
                "preset": str(path),
                "num_rows": cal.num_rows,
                "num_composed_rows": composed,
                "changes": [{"name": n, "before": a, "after": b} for n, a, b in cal.changes],
                "perf_rms_log_error": [cal.perf_rms_log_error_before, cal.perf_rms_log_error_after],
                "spearman": [cal.spearman_before, cal.spearman_after],
            }
        )
    else:
        if composed:
            print(f"{composed} of the {cal.num_rows} rows are composed from scale-down trials")
        for line in cal.describe():
            print(line)
        print(f"wrote {path} ({preset_usage(path)})")
    return 0
