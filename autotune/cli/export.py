"""`autotune export SWEEP_DIR (--best | --trial ID) [--format autotune|torchtitan|...] [-o FILE]`

`--format autotune` (default) writes the trial file `autotune bench --config FILE` runs as is
(autotune.results.trialfile.dump_trialfile); other formats come from autotune.interop."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from autotune.core.errors import InputFileError, UsageError


def add_parser(sub, name: str) -> None:
    p = sub.add_parser(name, help="write the best (or a chosen) trial's layout as a runnable config")
    p.add_argument("sweep_dir", metavar="SWEEP_DIR", help="results/<sweep_id>")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--best", action="store_true", help="the top-ranked trial (measured tok/s/GPU)")
    which.add_argument("--trial", metavar="ID", help="a trial id (or candidate id) of this sweep")
    p.add_argument("--format", default="autotune", help="autotune (default) or an autotune.interop format")
    p.add_argument("-o", "--output", metavar="FILE", help="file to write (default: stdout)")
    p.set_defaults(run=run)


def select_row(df: Any, best: bool, trial: str | None) -> dict[str, Any]:
    from autotune.analyse.report import best_row

    if best:
        return best_row(df)
    hit = df[(df["trial_id"] == trial) | (df["candidate_id"] == trial)]
    if hit.empty:
        raise UsageError(f"--trial={trial!r} is not a trial or candidate id of this sweep ({len(df)} rows)")
    return hit.iloc[0].to_dict()


def export_text(sweep_dir: Path, row: dict[str, Any], fmt: str) -> tuple[str, Any]:
    """(text, parts) for one row: parts = (model, train, cluster, plan) from the sweep's saved config."""
    from autotune.layouts.candidate import plan_from_row
    from autotune.results.store import SweepStore

    cfg = SweepStore(sweep_dir).config()
    plan = plan_from_row(row)
    if plan.candidate_id(cfg.model, cfg.train) != row["candidate_id"]:
        raise InputFileError(
            f"trial {row['trial_id']}: its layout does not match the sweep's config "
            f"(candidate_id {row['candidate_id']} != {plan.candidate_id(cfg.model, cfg.train)})"
        )
    parts = (cfg.model, cfg.train, cfg.cluster, plan)
    if fmt == "autotune":
        return "", parts
    try:
        from autotune import interop
    except ImportError:
        raise UsageError(f"--format={fmt!r}: autotune.interop is not available in this install") from None
    if fmt not in interop.FORMATS:
        raise UsageError(f"--format={fmt!r} must be one of autotune, {', '.join(interop.FORMATS)}")
    return interop.render(fmt, *parts), parts


def _fmt(v: Any) -> str:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return "-"
    return "-" if f != f else f"{f:,.1f}"


def _warn_framework(parts: Any, fmt: str, sweep_dir: Path) -> None:
    """One stderr line when the sweep predicted memory for another framework than the export's trainer."""
    from autotune.analyse.target import expected_memory, profile_for_format

    model, train, cluster, plan = parts
    target = profile_for_format(fmt, train)
    if target != train.framework:
        e = expected_memory(model, train, cluster, plan, target)
        need = (
            f"the {target} profile rejects this layout ({e['rejected']})"
            if e["rejected"]
            else f"under the {target} profile this layout needs {e['reserved_bytes'] / 2**30:.1f} GiB "
            f"of {e['device_bytes'] / 2**30:.1f} GiB"
        )
        print(
            f"autotune: warning: {sweep_dir} planned with train.framework={train.framework}, not {target} "
            f"(--format={fmt}); {need}",
            file=sys.stderr,
        )


def run(args: argparse.Namespace) -> int:
    from autotune.results.store import read_results
    from autotune.results.trialfile import dump_trialfile

    sweep_dir = Path(args.sweep_dir)
    if not (sweep_dir / "trials").is_dir():
        raise InputFileError(f"SWEEP_DIR={args.sweep_dir!r} is not a sweep folder (no trials/ inside)")
    row = select_row(read_results(sweep_dir), args.best, args.trial)
    if row["status"] not in ("ok", "simulated") and not args.trial:
        raise UsageError(f"trial {row['trial_id']} has status {row['status']}: nothing runnable to export")
    text, parts = export_text(sweep_dir, row, args.format)
    _warn_framework(parts, args.format, sweep_dir)
    comment = (
        f"exported by `autotune export` from {sweep_dir} trial {row['trial_id']} (status {row['status']}, "
        f"tok/s/GPU {_fmt(row.get('tokens_per_s_per_gpu'))}, predicted {_fmt(row.get('pred_tokens_per_s_per_gpu'))})"
    )
    if args.format == "autotune":
        if args.output:
            dump_trialfile(*parts, args.output, comment=comment)
        else:
            import tempfile

            with tempfile.TemporaryDirectory() as tmp:
                sys.stdout.write(dump_trialfile(*parts, Path(tmp) / "best.yaml", comment=comment).read_text())
    elif args.output:
        out = Path(args.output)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    else:
        sys.stdout.write(text)
    if args.output:
        print(f"wrote {args.output} ({args.format}) from trial {row['trial_id']} of {sweep_dir}", file=sys.stderr)
    return 0
