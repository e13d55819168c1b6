"""`autotune report`: ranked table, status counts and the throughput/memory Pareto front of one sweep folder.

Ranking: measured tokens/s/GPU for trials that ran (`ok`); a simulate sweep has no measurement, so its rows rank by the
model's prediction and the table says so. Failed trials are listed after, with their error; `pruned` rows are counted.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.core.errors import InputFileError
from autotune.results.schema import STATUSES, predicted_peak

if TYPE_CHECKING:
    import pandas as pd

COUNT_ORDER = ("ok", "oom", "crash", "timeout", "pruned", "simulated", "invalid")
assert set(COUNT_ORDER) == set(STATUSES)


def _pd_na() -> Any:
    import pandas as pd

    return pd.NA


def load(sweep_dir: str | Path) -> pd.DataFrame:
    from autotune.results.store import read_results

    return read_results(sweep_dir)


def status_counts(df: pd.DataFrame) -> dict[str, int]:
    counts = df["status"].value_counts()
    return {s: int(counts.get(s, 0)) for s in COUNT_ORDER}


def ranked(df: pd.DataFrame) -> pd.DataFrame:
    """Every row that is not `pruned`, best first: ok by measured tok/s/GPU, then simulated by predicted tok/s/GPU,
    then failures (oom, crash, timeout, invalid). Adds `rank` (1.. over ok/simulated rows; null for failures) and
    `score` (the tok/s/GPU it ranked on)."""
    import pandas as pd

    runs = df[df["status"] != "pruned"].copy()
    measured = runs["tokens_per_s_per_gpu"].astype("float64")
    predicted = runs["pred_tokens_per_s_per_gpu"].astype("float64")
    runs["score"] = measured.where(runs["status"] == "ok", predicted.where(runs["status"] == "simulated"))
    group = runs["status"].map({"ok": 0, "simulated": 1}).fillna(2)
    runs = (
        runs.assign(_g=group)
        .sort_values(["_g", "score", "trial_id"], ascending=[True, False, True], na_position="last", kind="stable")
        .drop(columns="_g")
    )
    good = runs["status"].isin(["ok", "simulated"]) & runs["score"].notna()
    runs["rank"] = pd.array([None] * len(runs), dtype="Int64")
    runs.loc[good, "rank"] = range(1, int(good.sum()) + 1)
    return runs.reset_index(drop=True)


def best_row(df: pd.DataFrame) -> dict[str, Any]:
    r = ranked(df)
    r = r[r["rank"].notna()]
    if r.empty:
        counts = ", ".join(f"{k} {v}" for k, v in status_counts(df).items() if v)
        raise InputFileError(f"no successful trial to export in this sweep ({counts or 'no rows'})")
    return r.iloc[0].to_dict()


def _gib(v: Any) -> str:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return "-"
    return "-" if f != f else f"{f / 2**30:.2f}"


def _num(v: Any, fmt: str) -> str:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return "-"
    return "-" if f != f else format(f, fmt)


def ranked_table(df: pd.DataFrame, top: int = 10) -> Any:
    from rich.table import Table

    from autotune.run.progress import layout_text

    r = ranked(df).head(top)
    table = Table(
        title=f"top {min(top, len(r))} of {int((df['status'] != 'pruned').sum())} trials "
        "(tok/s/GPU: measured; pred = model)"
    )
    for col in (
        "#",
        "trial",
        "layout",
        "status",
        "tok/s/GPU",
        "pred tok/s/GPU",
        "MFU",
        "pred MFU",
        "peak GiB",
        "pred GiB",
        "wall s",
        "error",
    ):
        table.add_column(
            col,
            justify="left" if col in ("trial", "layout", "status", "error") else "right",
            no_wrap=col in ("trial", "layout"),
        )
    for _, row in r.iterrows():
        err = row["error_type"] if isinstance(row["error_type"], str) else ""
        peak = (
            row["peak_mem_reserved_bytes"]
            if row["peak_mem_reserved_bytes"] == row["peak_mem_reserved_bytes"]
            and row["peak_mem_reserved_bytes"] is not None
            else row["peak_mem_allocated_bytes"]
        )
        rank = row["rank"]
        missing = rank is None or rank is _pd_na() or rank != rank  # pd.NA (Int64 column) has no truth value
        table.add_row(
            "-" if missing else str(int(rank)),
            str(row["trial_id"]),
            layout_text(row),
            str(row["status"]) + (" (composed)" if _composed(row) else ""),
            _num(row["tokens_per_s_per_gpu"], ",.1f"),
            _num(row["pred_tokens_per_s_per_gpu"], ",.1f"),
            _num(row["mfu"], ".3f"),
            _num(row["pred_mfu"], ".3f"),
            _gib(peak),
            _gib(predicted_peak(row)),
            _num(row["wall_s"], ".1f"),
            err,
        )
    return table


def _composed(row: Any) -> bool:
    """A row composed from a scale-down trial (docs/scale_down.md) rather than measured at full size."""
    v = row.get("scaled_from")
    return isinstance(v, str) and v != ""


def pareto_table(df: pd.DataFrame) -> Any:
    from rich.table import Table

    from autotune.analyse.pareto import pareto_front
    from autotune.run.progress import layout_text

    front = pareto_front(df)
    table = Table(title="Pareto front: throughput vs peak memory")
    for col in ("trial", "layout", "tok/s/GPU", "peak GiB", "source"):
        table.add_column(col)
    for _, row in front.iterrows():
        table.add_row(
            str(row["trial_id"]),
            layout_text(row),
            _num(row["throughput"], ",.1f"),
            _gib(row["memory_bytes"]),
            "predicted" if row["status"] == "simulated" else "composed" if _composed(row) else "measured",
        )
    return table


def target_table(sweep_dir: str | Path, df: pd.DataFrame) -> Any:
    """When the sweep's train.framework is not bench_model (whose trials ran): each measured layout's measured
    bench_model peak next to its predicted peak under the target profile (autotune/analyse/target.py)."""
    from rich.table import Table

    from autotune.analyse.target import target_peaks
    from autotune.results.store import SweepStore
    from autotune.run.progress import layout_text

    try:
        cfg = SweepStore(sweep_dir).config()
    except Exception:  # a folder without a readable config has no target to compare with
        return None
    if cfg.train.framework == "bench_model" or not df["status"].isin(["ok", "simulated"]).any():
        return None
    fw = cfg.train.framework
    table = Table(title=f"target train.framework={fw}: trials ran bench_model; peaks under the {fw} profile")
    for col in ("trial", "layout", "measured GiB (bench_model)", "pred GiB (bench_model)", f"pred GiB ({fw})"):
        table.add_column(col, justify="left" if col in ("trial", "layout") else "right")
    for _, t in target_peaks(df, cfg).iterrows():
        table.add_row(
            str(t["trial_id"]),
            layout_text(t["row"]),
            _gib(t["measured_peak_bytes"]),
            _gib(t["pred_bench_model_bytes"]),
            _gib(t["pred_target_bytes"]),
        )
    return table


def counts_line(df: pd.DataFrame) -> str:
    return "  ".join(f"{k} {v}" for k, v in status_counts(df).items())


def print_summary(sweep_dir: str | Path, console: Any, top: int = 10) -> pd.DataFrame:
    """Ranked table, status counts, Pareto front; the last line names the folder."""
    df = load(sweep_dir)
    console.print(ranked_table(df, top))
    console.print(f"status: {counts_line(df)}", highlight=False)
    from autotune.search.budget import sweep_cost_lines  # GPU-hours spent vs the exhaustive grid

    for line in sweep_cost_lines(sweep_dir, df):
        console.print(line, highlight=False)
    if df["status"].isin(["ok", "simulated"]).any():
        console.print(pareto_table(df))
    target = target_table(sweep_dir, df)
    if target is not None:
        console.print(target)
    bad = df.attrs.get("corrupt_files") or []
    if bad:
        console.print(f"[red]{len(bad)} corrupt result file(s) skipped:[/red] {', '.join(bad)}", highlight=False)
    console.print(f"results: {Path(sweep_dir)}  ({len(df)} rows)", highlight=False, soft_wrap=True)
    return df
