"""Pareto front of throughput (higher is better) against peak memory (lower is better).

A layout is on the front when no other layout is at least as fast with at most as much memory and strictly better in
one of the two. Sort by memory ascending (ties: faster first) and keep each point faster than every point before it:
O(n log n) (Kung, Luccio & Preparata 1975, "On finding the maxima of a set of vectors").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from autotune.results.schema import predicted_peak

if TYPE_CHECKING:
    import pandas as pd

MEASURED = ("tokens_per_s_per_gpu", "peak_mem_reserved_bytes")


def metric_columns(df: pd.DataFrame) -> pd.DataFrame:
    """Per row, the throughput and memory to compare, and where each comes from: measured columns for run trials;
    for `simulated` rows (nothing measured) the predictions. Peak memory is the reserved peak, else the allocated peak,
    else (simulated only) the prediction."""
    import pandas as pd

    sim = df["status"].eq("simulated")
    thr = df["tokens_per_s_per_gpu"].astype("float64")
    thr = thr.where(~sim, df["pred_tokens_per_s_per_gpu"].astype("float64"))
    mem = df["peak_mem_reserved_bytes"].astype("float64").fillna(df["peak_mem_allocated_bytes"].astype("float64"))
    mem = mem.where(~sim, predicted_peak(df))
    source = pd.Series(["predicted" if s else "measured" for s in sim], index=df.index)
    return pd.DataFrame({"throughput": thr, "memory_bytes": mem, "source": source}, index=df.index)


def pareto_mask(throughput, memory_bytes) -> list[bool]:
    """True for the points on the front; points with a missing value are never on it."""
    import numpy as np

    thr = np.asarray(throughput, dtype=float)
    mem = np.asarray(memory_bytes, dtype=float)
    ok = np.isfinite(thr) & np.isfinite(mem)
    mask = np.zeros(len(thr), dtype=bool)
    idx = np.flatnonzero(ok)
    order = idx[np.lexsort((-thr[idx], mem[idx]))]  # memory ascending, then throughput descending
    best = -np.inf
    for i in order:
        if thr[i] > best:
            mask[i] = True
            best = thr[i]
    return mask.tolist()


def pareto_front(df: pd.DataFrame) -> pd.DataFrame:
    """Rows of `df` (status ok or simulated) on the throughput/memory front, by memory ascending, with the compared
    values as columns `throughput` and `memory_bytes`."""
    rows = df[df["status"].isin(["ok", "simulated"])]
    m = metric_columns(rows)
    front = rows.assign(throughput=m["throughput"], memory_bytes=m["memory_bytes"])
    front = front[pareto_mask(m["throughput"], m["memory_bytes"])]
    return front.sort_values("memory_bytes", kind="stable")
