"""`autotune report SWEEP_DIR [--top K] [--plots] [--json]`"""

from __future__ import annotations

import argparse

from autotune.cli.common import positive_int
from autotune.core.errors import InputFileError


def add_parser(sub, name: str) -> None:
    p = sub.add_parser(name, help="ranked table, status counts, Pareto front (and plots) of a sweep folder")
    p.add_argument("sweep_dir", metavar="SWEEP_DIR", help="results/<sweep_id>")
    p.add_argument("--top", type=positive_int("--top"), default=10, help="rows of the ranked table (default 10)")
    p.add_argument("--plots", action="store_true", help="also write PNG + SVG plots into SWEEP_DIR/plots/")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from autotune.analyse.report import print_summary
    from autotune.run.controller import make_console

    sweep_dir = Path(args.sweep_dir)
    if not (sweep_dir / "trials").is_dir():
        raise InputFileError(f"SWEEP_DIR={args.sweep_dir!r} is not a sweep folder (no trials/ inside)")
    console = make_console()
    print_summary(sweep_dir, console, top=args.top)
    if args.plots:
        from autotune.analyse.plots import make_plots

        files = make_plots(sweep_dir)
        console.print(f"plots: {len(files)} files in {sweep_dir / 'plots'}", highlight=False, soft_wrap=True)
        if not any(p.stem == "pred_vs_measured" for p in files):
            console.print("pred_vs_measured: not drawn (no measured trial in this sweep)", highlight=False)
    return 0
