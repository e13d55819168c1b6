"""Sweep folder size and read-back time of a simulated sweep (issue 28 item 2: a 5-trial Qwen3-235B sweep on 256 H100
left 42,304 files / 829 MB, one per rejected candidate, and `report` / `export` took 76-81 s).

Runs `autotune sweep --gpus N model=M cluster=C --backend simulate --max-trials K` in a temporary folder, then times
`autotune report` and `autotune export --best` on it (each its own process, as a user runs them). Prints JSON
{"model", "num_gpus", "rows", "pruned_rows", "files", "megabytes", "sweep_s", "report_s", "export_s"}; files counts
every file under the sweep folder except logs/ and work/ (empty for simulate). Targets: report <= 5 s, folder
<= 50 MB for the default (Qwen3-235B, 256 GPUs, 5 trials)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

AUTOTUNE = [sys.executable, "-m", "autotune.cli.main"]


def _timed(argv: list[str], cwd: Path) -> float:
    t = time.perf_counter()
    proc = subprocess.run([*AUTOTUNE, *argv], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"autotune {' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--gpus", type=int, default=256)
    ap.add_argument("--model", default="qwen3-235b-a22b")
    ap.add_argument("--cluster", default="h100-sxm-80gb")
    ap.add_argument("--max-trials", type=int, default=5)
    args = ap.parse_args()

    from autotune.results.store import read_results

    with tempfile.TemporaryDirectory(prefix="autotune-bench-store-") as tmp:
        cwd = Path(tmp)
        sweep = [
            "sweep", "--gpus", str(args.gpus), f"model={args.model}", f"cluster={args.cluster}",
            "--backend", "simulate", "--max-trials", str(args.max_trials), "--sweep-id", "s",
        ]  # fmt: skip
        sweep_s = _timed(sweep, cwd)
        folder = cwd / "results" / "s"
        files = [p for p in folder.rglob("*") if p.is_file() and p.relative_to(folder).parts[0] not in ("logs", "work")]
        report_s = _timed(["report", str(folder)], cwd)
        export_s = _timed(["export", str(folder), "--best", "-o", str(cwd / "best.yaml")], cwd)
        df = read_results(folder)
        out = {
            "model": args.model,
            "num_gpus": args.gpus,
            "rows": len(df),
            "pruned_rows": int((df["status"] == "pruned").sum()),
            "files": len(files),
            "megabytes": round(sum(p.stat().st_size for p in files) / 1e6, 3),
            "sweep_s": round(sweep_s, 2),
            "report_s": round(report_s, 2),
            "export_s": round(export_s, 2),
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
