"""How well the step-time model predicts public measured runs (autotune.fitting.reference_runs), before and after fitting.

Prints ONE JSON object:
  rows_used / rows_skipped (+ skipped_reasons: count per reason),
  in_sample_median_abs_err: |pred - measured| / measured of tok/s/GPU with the coefficients stored in the presets
    (fitted on all rows by autotune.fitting.fit_reference),
  out_of_sample_median_abs_err / out_of_sample_p90_abs_err: leave one source out: refit every GPU family on the
    other sources, predict the held-out source's rows (a family the other sources do not cover, e.g. H200 when the
    H200 bench is held out, uses the Hopper coefficients fitted on H100 rows: the family is fitted jointly),
  median_group_spearman: Spearman rank correlation of predicted vs measured within every (source, model, GPU count,
    preset) group of >= 5 configurations (in-sample coefficients), and the per-group values,
  before: the same figures with the model and presets of BEFORE_COMMIT (git archive of that commit, run in a
    subprocess), per_source: the same per source.
Run: PYTHONPATH=. python benchmarks/model_accuracy.py [--refit] [--quick]   (--refit prints the fitted coefficients too;
--quick leaves out the leave-one-source-out figures, for the smoke test)
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autotune.fitting.fit_reference import (
    FAMILY_OF,
    FREE,
    apply_fit,
    fit_all,
    load_preset,
    predict,
)
from autotune.fitting.reference_runs import SOURCES, load_reference_runs

BEFORE_COMMIT = "46ae7e1"  # last commit before the fitted model (perf.py roofline + uncalibrated presets)
PRESETS = ("h100-sxm-80gb", "h200-141gb", "a100-80gb", "a100-40gb")
MIN_GROUP = 5


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic)


def summarise(runs: list, pred: np.ndarray, loso: np.ndarray | None) -> dict:
    meas = np.array([r.measured_tokens_per_s_per_gpu for r in runs])
    err = np.abs(pred - meas) / meas
    groups: dict[tuple, list[int]] = {}
    for i, r in enumerate(runs):
        groups.setdefault((r.source, r.model.name, r.num_gpus, r.cluster), []).append(i)
    rho = {
        "/".join(map(str, k)): round(spearman(pred[v], meas[v]), 3) for k, v in groups.items() if len(v) >= MIN_GROUP
    }
    out = {
        "rows": len(runs),
        "in_sample_median_abs_err": round(float(np.median(err)), 4),
        "in_sample_p90_abs_err": round(float(np.percentile(err, 90)), 4),
        "median_group_spearman": round(float(np.median(list(rho.values()))), 3) if rho else None,
        "groups": rho,
    }
    if loso is not None:
        oe = np.abs(loso - meas) / meas
        out["out_of_sample_median_abs_err"] = round(float(np.median(oe)), 4)
        out["out_of_sample_p90_abs_err"] = round(float(np.percentile(oe, 90)), 4)
    return out


def report(runs: list, pred: np.ndarray, loso: np.ndarray | None) -> dict:
    res = summarise(runs, pred, loso)
    res["per_source"] = {}
    for s in SOURCES:
        idx = [i for i, r in enumerate(runs) if r.source == s]
        if idx:
            sub = summarise([runs[i] for i in idx], pred[idx], None if loso is None else loso[idx])
            sub.pop("groups")
            res["per_source"][s] = sub
    return res


def leave_one_source_out(runs: list, clusters: dict) -> np.ndarray:
    out = np.full(len(runs), np.nan)
    for s in SOURCES:
        held = [i for i, r in enumerate(runs) if r.source == s]
        if not held:
            continue
        train = [r for r in runs if r.source != s]
        fitted = apply_fit(clusters, fit_all(train, clusters))
        out[held] = predict([runs[i] for i in held], fitted)
    return out


_BEFORE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from omegaconf import OmegaConf
# the old tree's flat modules (these names are BEFORE_COMMIT's, not today's packages)
from autotune.perf import perf_arrays
from autotune.plan_arrays import arrays_from_plans
from autotune.types import ClusterSpec
import dataclasses, importlib.util, types
import autotune.types as old_types
# today's reference_runs.py imports autotune.core.types: point that name at the old module
sys.modules["autotune.core"] = types.ModuleType("autotune.core")
sys.modules["autotune.core.types"] = sys.modules["autotune.core.model"] = old_types
# plan fields added after BEFORE_COMMIT (compile, ...) did not exist for the old model: it predicts without them
_known = {f.name for f in dataclasses.fields(old_types.ParallelPlan)}
_OldPlan = old_types.ParallelPlan
old_types.ParallelPlan = lambda **kw: _OldPlan(**{k: v for k, v in kw.items() if k in _known})
spec = importlib.util.spec_from_file_location("rr", sys.argv[2]); rr = importlib.util.module_from_spec(spec)
sys.modules["rr"] = rr
spec.loader.exec_module(rr)
runs, _ = rr.load_reference_runs(sys.argv[3])
cl = {}
out = []
for r in runs:
    if r.cluster not in cl:
        cl[r.cluster] = ClusterSpec(**OmegaConf.to_container(OmegaConf.load(f"{sys.argv[1]}/search_spaces/cluster/{r.cluster}.yaml")))
    out.append(float(perf_arrays(arrays_from_plans([r.plan]), r.model, r.train, cl[r.cluster])["tokens_per_s_per_gpu"][0]))
print(json.dumps(out))
"""


def before_predictions() -> np.ndarray | None:
    """Predictions of the model and presets at BEFORE_COMMIT (None when git or the commit is unavailable; the old
    model failing on today's loader raises with its stderr, so `before: null` never hides a broken replay)."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", BEFORE_COMMIT, "autotune", "search_spaces"],
                capture_output=True,
                check=True,
            ).stdout
        except (subprocess.CalledProcessError, FileNotFoundError):
            return None
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                _BEFORE,
                tmp,
                str(ROOT / "autotune" / "fitting" / "reference_runs.py"),
                str(ROOT / "benchmarks" / "data" / "measured"),
            ],
            capture_output=True,
            text=True,
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": tmp},
        )
        if done.returncode != 0:
            raise RuntimeError(f"model_accuracy: the {BEFORE_COMMIT} model failed: {done.stderr[-2000:]}")
    return np.array(json.loads(done.stdout))


def nemo_out_of_sample() -> dict:
    """The NeMo / Megatron-Bridge summary rows autotune/fitting/nemo_runs.py maps (dense and MoE, H100 and Blackwell,
    BF16 / FP8 / MXFP8 / NVFP4), predicted with the presets as they are: no coefficient was fitted on them, so every
    error here is out of sample. Median and p90 |error| and Spearman per GPU type, recipe and dense/MoE."""
    from scipy.stats import spearmanr

    from autotune.fitting.nemo_runs import load_nemo_rows

    runs, skipped = load_nemo_rows()
    clusters = {r.cluster: load_preset(r.cluster) for r in runs}
    pred = predict(runs, clusters)
    meas = np.array([r.measured_tokens_per_s_per_gpu for r in runs])
    err = np.abs(pred / meas - 1)
    keys = {
        "gpu": [r.cluster for r in runs],
        "recipe": [r.plan.fp8 for r in runs],
        "kind": ["moe" if r.model.is_moe else "dense" for r in runs],
    }
    out: dict = {"rows_used": len(runs), "rows_skipped": len(skipped)}
    out["median_abs_err"] = round(float(np.median(err)), 4)
    out["p90_abs_err"] = round(float(np.percentile(err, 90)), 4)
    for name, labels in keys.items():
        groups = {}
        for g in sorted(set(labels)):
            idx = [i for i, x in enumerate(labels) if x == g]
            rho = spearmanr(pred[idx], meas[idx]).statistic if len(idx) > 2 else None
            groups[g] = {
                "n": len(idx),
                "median_abs_err": round(float(np.median(err[idx])), 4),
                "p90_abs_err": round(float(np.percentile(err[idx], 90)), 4),
                "spearman": None if rho is None or np.isnan(rho) else round(float(rho), 3),
            }
        out[f"by_{name}"] = groups
    out["moe_rows"] = [
        {
            "model": r.model.name, "gpu": r.cluster, "gpus": r.plan.world_size, "layout": f"tp{r.plan.tp} pp{r.plan.pp} "
            f"vp{r.plan.vpp} ep{r.plan.ep}", "recipe": r.plan.fp8, "measured": r.measured_tokens_per_s_per_gpu,
            "predicted": round(float(p)),
        }
        for r, p in zip(runs, pred) if r.model.is_moe
    ]  # fmt: skip
    return out


def main() -> None:
    runs, skipped = load_reference_runs()
    clusters = {n: load_preset(n) for n in PRESETS}
    pred = predict(runs, clusters)
    quick = "--quick" in sys.argv  # smoke mode (tests/benchmarks): no leave-one-source-out refits, the slow part
    loso = None if quick else leave_one_source_out(runs, clusters)
    result = {
        "rows_used": len(runs),
        "rows_skipped": len(skipped),
        "skipped_reasons": dict(Counter(f"{s.source}: {s.reason.split(':')[0]}" for s in skipped)),
        **report(runs, pred, loso),
    }
    result.pop("rows")
    old = before_predictions()
    if old is not None:
        b = report(runs, old, None)
        b.pop("groups")
        result["before"] = {
            **b,
            "commit": BEFORE_COMMIT,
            "out_of_sample_median_abs_err": b["in_sample_median_abs_err"],
            "out_of_sample_p90_abs_err": b["in_sample_p90_abs_err"],
            "note": "uncalibrated presets: nothing was fitted, so in- and out-of-sample coincide",
        }
    else:
        result["before"] = None
    if "--refit" in sys.argv:
        fit = fit_all(runs, clusters)
        result["refit"] = {fam: {k: round(float(v), 4) for k, v in c.items()} for fam, c in fit.items()}
        result["refit_in_sample_median_abs_err"] = summarise(runs, predict(runs, apply_fit(clusters, fit)), None)[
            "in_sample_median_abs_err"
        ]
    result["nemo_not_fitted"] = nemo_out_of_sample()
    result["families"] = {p: FAMILY_OF[p] for p in PRESETS}
    result["quick"] = quick
    result["free_coefficients"] = list(FREE)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
