"""The performance model's validated error, printed next to a prediction (issue 28 item 7).

Read from benchmarks/model_accuracy.py's latest result file (benchmarks/data/model_accuracy_result.json) by its
structure, not by fixed numbers: `leave_one_source_out` (each source of published runs predicted by coefficients fitted
without it: the honest, out-of-sample figure) holds `by_gpu` (cluster preset -> n, median_abs_err, p90_abs_err) and
`by_kind` (dense | moe -> the same); `families` maps presets to GPU families (hopper, blackwell, ...). A preset without
rows of its own is described by the rows of its family's presets, pooled by count; none at all is said so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RESULT_FILE = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "model_accuracy_result.json"
SECTION = "leave_one_source_out"


@dataclass(frozen=True)
class ErrorBand:
    """Relative |predicted - measured| / measured of tokens/s over `n` published rows of `what`."""

    what: str
    n: int
    median: float
    p90: float

    def text(self) -> str:
        return f"{self.what}: median {100 * self.median:.0f}%, p90 {100 * self.p90:.0f}% (n={self.n})"


def load_result(path: Path = RESULT_FILE) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get(SECTION), dict) else None


def _band(what: str, entry: Any) -> ErrorBand | None:
    if not isinstance(entry, dict) or not entry.get("n"):
        return None
    try:
        return ErrorBand(what, int(entry["n"]), float(entry["median_abs_err"]), float(entry["p90_abs_err"]))
    except (KeyError, TypeError, ValueError):
        return None


def gpu_band(doc: dict[str, Any], cluster: str) -> ErrorBand | None:
    """The preset's own rows, else its family's (the largest-n preset of the family stands for it)."""
    by_gpu = doc[SECTION].get("by_gpu") or {}
    own = _band(cluster, by_gpu.get(cluster))
    if own is not None:
        return own
    families = doc.get("families") or {}
    fam = families.get(cluster) or next((f for p, f in families.items() if cluster.startswith(p)), None)
    peers = [_band(f"{fam} ({p})", by_gpu.get(p)) for p, f in families.items() if f == fam and fam is not None]
    peers = [b for b in peers if b is not None]
    return max(peers, key=lambda b: b.n) if peers else None


def accuracy_note(cluster: str, is_moe: bool, doc: dict[str, Any] | None = None) -> str:
    """One line: the validated out-of-sample error of tokens/s for this GPU and this model kind."""
    doc = load_result() if doc is None else doc
    if doc is None:
        return f"validated error: unknown ({RESULT_FILE.name} not found: run benchmarks/model_accuracy.py)"
    kind = "moe" if is_moe else "dense"
    parts = [gpu_band(doc, cluster), _band(f"{kind} models", (doc[SECTION].get("by_kind") or {}).get(kind))]
    shown = [b.text() for b in parts if b is not None] or [f"no validated rows for {cluster} or {kind} models"]
    return "validated error of tok/s (out of sample, published runs): " + "; ".join(shown)
