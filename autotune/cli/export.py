"""`autotune export SWEEP_DIR (--best | --trial ID) [--format autotune|torchtitan|...] [-o FILE]`

`--format autotune` (default) writes the trial file `autotune bench --config FILE` runs as is
(autotune.results.trialfile.dump_trialfile); other formats come from autotune.interop. `--best` with another format
exports the best layout that format's framework profile accepts, re-ranked under that profile, and says so on stderr
(best_for_format)."""

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
    which.add_argument(
        "--best",
        action="store_true",
        help="the top-ranked trial (measured tok/s/GPU) whose layout the --format's framework profile accepts",
    )
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


def best_for_format(df: Any, sweep_dir: Path, fmt: str) -> tuple[dict[str, Any], str | None]:
    """The sweep's best row whose layout `fmt`'s framework profile accepts, and a one-line note when that is not the
    sweep's overall best. Every ok/simulated row is re-scored under that profile (autotune.layouts.planner.score_arrays
    with train.framework = the format's profile: its rules, its memory limit, its speed model); the accepted rows are
    ranked by measured tok/s/GPU (ok rows first), simulated rows by the profile's predicted tok/s/GPU."""
    from dataclasses import replace

    from autotune.analyse.report import best_row
    from autotune.analyse.target import profile_for_format
    from autotune.core.labels import layout_label
    from autotune.core.plan_arrays import arrays_from_frame
    from autotune.layouts.candidate import plan_from_row
    from autotune.layouts.planner import score_arrays
    from autotune.results.store import SweepStore

    overall = best_row(df)  # raises the one-line "no successful trial" error
    cfg = SweepStore(sweep_dir).config()
    profile = profile_for_format(fmt, cfg.train)
    rows = df[df["status"].isin(["ok", "simulated"])].reset_index(drop=True)
    scored = score_arrays(arrays_from_frame(rows), replace(cfg, train=replace(cfg.train, framework=profile)), 0)
    rows = rows.assign(_why=scored["reject_reason"].to_numpy(), _pred=scored["pred_tokens_per_s_per_gpu"].to_numpy())
    rows["_key"] = rows["tokens_per_s_per_gpu"].where(rows["status"] == "ok", rows["_pred"])
    ok = rows[rows["_why"].isna()].sort_values(["status", "_key"], ascending=[True, False], key=_status_first)
    if ok.empty:
        why = rows.loc[rows["trial_id"] == overall["trial_id"], "_why"].iloc[0]
        raise UsageError(
            f"--best --format={fmt}: the {profile} profile accepts none of the sweep's {len(rows)} ok/simulated "
            f"layouts (the best, trial {overall['trial_id']}: {why}); sweep with train.framework={profile}"
        )
    best = ok.iloc[0].drop(labels=["_why", "_pred", "_key"]).to_dict()
    note = (
        f"--best --format={fmt}: trial {best['trial_id']} ({layout_label(plan_from_row(best))}) is the best of the "
        f"{len(ok)} of {len(rows)} layouts the {profile} profile accepts (re-ranked under it)"
    )
    if best["trial_id"] != overall["trial_id"]:
        why = rows.loc[rows["trial_id"] == overall["trial_id"], "_why"].iloc[0]
        note += f"; the sweep's best, trial {overall['trial_id']} ({layout_label(plan_from_row(overall))}), " + (
            f"is rejected: {why}" if isinstance(why, str) else "ranks lower under it"
        )
    return best, note


def _status_first(col: Any) -> Any:
    """sort key: measured (ok) rows before simulated ones; other columns unchanged."""
    return (col != "ok").astype(int) if col.name == "status" else col


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
    df = read_results(sweep_dir)
    note = None
    if args.best and args.format != "autotune":
        row, note = best_for_format(df, sweep_dir, args.format)
    else:
        row = select_row(df, args.best, args.trial)
    if row["status"] not in ("ok", "simulated") and not args.trial:
        raise UsageError(f"trial {row['trial_id']} has status {row['status']}: nothing runnable to export")
    text, parts = export_text(sweep_dir, row, args.format)
    if note:
        print(f"autotune: {note}", file=sys.stderr)
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
