"""The ONE refit command: fit every free coefficient (autotune/fitting/coefficients.py) on every usable public row
(autotune/fitting/reference_runs.py), write the fitted values into the cluster presets (search_spaces/cluster/*.yaml,
each line keeps its key and gets a comment naming this command, the date and the row count), then regenerate
benchmarks/data/model_accuracy_result.json with benchmarks/model_accuracy.py on the new presets.

Run: PYTHONPATH=. python benchmarks/refit.py [--no-accuracy] [--presets DIR] [--sources a,b]
(--presets: read and write the presets of DIR instead of search_spaces/cluster; --sources: fit on those sources'
rows only, e.g. for the smoke test; both imply --no-accuracy, whose result file describes the repository's presets.)
Prints ONE JSON object (last line): rows, the fitted coefficients per family, the presets written, and the accuracy
summary (or null with --no-accuracy).
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autotune.fitting.coefficients import BY_NAME
from autotune.fitting.fit_reference import CLUSTERS, FAMILIES, fit_all, load_preset
from autotune.fitting.reference_runs import load_reference_runs

RESULT = ROOT / "benchmarks" / "data" / "model_accuracy_result.json"


def write_preset(path: Path, values: dict[str, float], note: str) -> None:
    """Set each `key: value  # comment` line of the preset YAML to the fitted value (appended when absent)."""
    text = path.read_text()
    for key, value in values.items():
        line = f"{key}: {value:.4f}" if abs(value) >= 1e-3 else f"{key}: {value:.3e}"  # host_op_s: seconds per op
        comment = f"# fitted, {BY_NAME[key].scope} ({note})"
        pattern = re.compile(rf"^{re.escape(key)}:[^\n]*$", re.M)
        new = f"{line:<38}{comment}"
        text = pattern.sub(new, text, count=1) if pattern.search(text) else text.rstrip("\n") + "\n" + new + "\n"
    path.write_text(text)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The flags of the module doc; `--help` prints the doc and writes nothing, an unknown flag exits 2."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-accuracy", action="store_true", help="skip benchmarks/model_accuracy.py (minutes)")
    ap.add_argument("--presets", type=Path, help="read and write the presets of this folder (implies --no-accuracy)")
    ap.add_argument("--sources", help="comma-separated sources to fit on (implies --no-accuracy)")
    return ap.parse_args(argv)


def main() -> None:
    args = parse_args()
    folder = args.presets or CLUSTERS
    sources = args.sources
    runs, _ = load_reference_runs()
    if sources:
        runs = [r for r in runs if r.source in sources.split(",")]
    clusters = {p: load_preset(p, folder) for presets in FAMILIES.values() for p in presets}
    fit = fit_all(runs, clusters)
    note = f"benchmarks/refit.py, {datetime.date.today().isoformat()}: {len(runs)} public rows"
    written = []
    for fam, presets in FAMILIES.items():
        for name in presets:
            write_preset(folder / f"{name}.yaml", fit[fam], note)
            written.append(name)
    accuracy = None
    if not (args.no_accuracy or args.presets or args.sources):
        out = subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / "model_accuracy.py")],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        ).stdout
        RESULT.write_text(out)
        res = json.loads(out)
        accuracy = {
            k: res.get(k)
            for k in ("rows_used", "out_of_sample_median_abs_err", "out_of_sample_p90_abs_err", "coefficients_at_bound")
        }
    fitted = {fam: {k: float(f"{v:.4g}") for k, v in c.items()} for fam, c in fit.items()}  # host_op_s ~1e-5 s
    print(json.dumps({"rows": len(runs), "fitted": fitted, "presets_written": written, "accuracy": accuracy}))


if __name__ == "__main__":
    main()
