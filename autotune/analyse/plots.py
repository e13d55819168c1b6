"""Sweep plots, each saved as PNG and SVG under <sweep>/plots/ (matplotlib, Agg backend; imported only here).

- throughput.*   every layout's tok/s/GPU coloured by status. Trials that failed (oom, crash, timeout) have no measured
                 throughput: they are drawn at their *predicted* throughput with their own marker, so the layouts that
                 did not run stay visible (the Ultra-Scale Playbook's grey OOM points).
- tp_pp_heatmap.* best measured tok/s/GPU for each (tp, pp); a cell where nothing succeeded names the failure.
- pred_vs_measured.* predicted vs measured peak memory and tok/s/GPU, with the y = x line; not drawn for a sweep with
                 no measured (ok) trial, e.g. `--backend simulate` (it would be two empty panels).
- pareto.*       throughput vs peak memory, the Pareto front joined (autotune.analyse.pareto).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.core.errors import InputFileError
from autotune.results.schema import predicted_peak

if TYPE_CHECKING:
    import pandas as pd

STATUS_STYLE = {  # status -> (colour, marker, label)
    "ok": ("tab:green", "o", "ok (measured)"),
    "simulated": ("tab:blue", "o", "simulated (predicted)"),
    "oom": ("0.55", "s", "oom (at prediction)"),
    "crash": ("tab:red", "x", "crash (at prediction)"),
    "timeout": ("tab:orange", "v", "timeout (at prediction)"),
    "invalid": ("tab:purple", "x", "invalid (at prediction)"),
}
GIB = 2.0**30


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, plots_dir: Path, name: str) -> list[Path]:
    out = []
    for ext in ("png", "svg"):
        path = plots_dir / f"{name}.{ext}"
        fig.savefig(path, dpi=120, bbox_inches="tight")
        out.append(path)
    _plt().close(fig)
    return out


def _title(df: pd.DataFrame) -> str:
    first = df.iloc[0] if len(df) else None
    return "" if first is None else f"{first['model_name']} on {int(first['num_gpus'])} x {first['hardware']}"


def plot_throughput(df: pd.DataFrame, plots_dir: Path) -> list[Path]:
    from autotune.analyse.report import ranked
    from autotune.run.progress import layout_text

    plt = _plt()
    runs = ranked(df)
    y = (
        runs["tokens_per_s_per_gpu"]
        .astype(float)
        .where(runs["status"] == "ok", runs["pred_tokens_per_s_per_gpu"].astype(float))
    )
    fig, ax = plt.subplots(figsize=(max(6.0, 0.35 * len(runs) + 2), 4.5))
    for status, (color, marker, label) in STATUS_STYLE.items():
        sel = runs["status"] == status
        if sel.any():
            ax.scatter(runs.index[sel], y[sel], c=color, marker=marker, s=40, label=f"{label} ({int(sel.sum())})")
    ax.set_xticks(range(len(runs)))
    ax.set_xticklabels([layout_text(r) for _, r in runs.iterrows()], rotation=80, fontsize=7)
    ax.set_ylabel("tokens / s / GPU")
    ax.set_title(f"throughput of every layout run — {_title(df)}")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _save(fig, plots_dir, "throughput")


def plot_tp_pp_heatmap(df: pd.DataFrame, plots_dir: Path) -> list[Path]:
    import numpy as np

    plt = _plt()
    runs = df[~df["status"].isin(["pruned"])]
    tps, pps = sorted(runs["tp"].unique()), sorted(runs["pp"].unique())
    grid = np.full((len(pps), len(tps)), np.nan)
    notes = [["" for _ in tps] for _ in pps]
    for (tp, pp), cell in runs.groupby(["tp", "pp"]):
        i, j = pps.index(pp), tps.index(tp)
        ok = cell[cell["status"] == "ok"]["tokens_per_s_per_gpu"].astype(float)
        sim = cell[cell["status"] == "simulated"]["pred_tokens_per_s_per_gpu"].astype(float)
        vals = ok if len(ok) else sim
        if len(vals) and vals.notna().any():
            grid[i, j] = vals.max()
            notes[i][j] = f"{vals.max():,.0f}" + ("" if len(ok) else "\n(pred)")
        else:
            notes[i][j] = "/".join(sorted(cell["status"].unique()))
    fig, ax = plt.subplots(figsize=(1.4 * len(tps) + 2.5, 1.0 * len(pps) + 2))
    im = ax.imshow(grid, cmap="viridis", origin="lower", aspect="auto")
    for i in range(len(pps)):
        for j in range(len(tps)):
            ax.text(
                j,
                i,
                notes[i][j],
                ha="center",
                va="center",
                fontsize=8,
                color="white" if not np.isnan(grid[i, j]) else "black",
            )
    ax.set_xticks(range(len(tps)), [str(t) for t in tps])
    ax.set_yticks(range(len(pps)), [str(p) for p in pps])
    ax.set_xlabel("TP")
    ax.set_ylabel("PP")
    ax.set_title(f"best tok/s/GPU per TP x PP — {_title(df)}")
    fig.colorbar(im, ax=ax, label="tokens / s / GPU")
    return _save(fig, plots_dir, "tp_pp_heatmap")


def plot_pred_vs_measured(df: pd.DataFrame, plots_dir: Path) -> list[Path]:
    ok = df[df["status"] == "ok"]
    if ok.empty:
        return []  # nothing measured (a simulate sweep): no empty figure
    plt = _plt()
    mem = ok["peak_mem_reserved_bytes"].astype(float).fillna(ok["peak_mem_allocated_bytes"].astype(float))
    pairs = [
        ("peak memory (GiB)", predicted_peak(ok) / GIB, mem / GIB),
        ("tokens / s / GPU", ok["pred_tokens_per_s_per_gpu"].astype(float), ok["tokens_per_s_per_gpu"].astype(float)),
    ]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.5))
    for ax, (what, pred, meas) in zip(axes, pairs):
        have = pred.notna() & meas.notna()
        ax.scatter(pred[have], meas[have], c="tab:green", s=30)
        if have.any():
            lo, hi = float(min(pred[have].min(), meas[have].min())), float(max(pred[have].max(), meas[have].max()))
            ax.plot([lo, hi], [lo, hi], "k--", lw=1, label="y = x")
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "no trial with both values", ha="center", va="center", transform=ax.transAxes)
        ax.set_xlabel(f"predicted {what}")
        ax.set_ylabel(f"measured {what}")
        ax.grid(alpha=0.3)
    fig.suptitle(f"model vs measurement ({int(len(ok))} ok trials) — {_title(df)}")
    return _save(fig, plots_dir, "pred_vs_measured")


def plot_pareto(df: pd.DataFrame, plots_dir: Path) -> list[Path]:
    from autotune.analyse.pareto import metric_columns, pareto_front

    plt = _plt()
    runs = df[df["status"].isin(["ok", "simulated"])]
    m = metric_columns(runs)
    front = pareto_front(df)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.scatter(m["memory_bytes"] / GIB, m["throughput"], c="0.6", s=25, label="layouts")
    ax.plot(front["memory_bytes"] / GIB, front["throughput"], "o-", c="tab:red", label="Pareto front")
    ax.set_xlabel("peak memory per rank (GiB)" + (" — predicted" if (m["source"] == "predicted").all() else ""))
    ax.set_ylabel("tokens / s / GPU")
    ax.set_title(f"throughput vs peak memory — {_title(df)}")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _save(fig, plots_dir, "pareto")


def make_plots(sweep_dir: str | Path) -> list[Path]:
    """All plots of a sweep folder; returns the files written."""
    from autotune.results.store import read_results

    sweep_dir = Path(sweep_dir)
    df = read_results(sweep_dir)
    plots_dir = sweep_dir / "plots"
    plots_dir.mkdir(parents=True, exist_ok=True)
    if not (df["status"] != "pruned").any():
        raise InputFileError(f"{sweep_dir}: no trial has run yet (only pruned rows): nothing to plot")
    out = []
    for plot in (plot_throughput, plot_tp_pp_heatmap, plot_pred_vs_measured, plot_pareto):
        out += plot(df, plots_dir)
    return out
