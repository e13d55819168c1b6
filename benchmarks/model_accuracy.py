"""How well the step-time model predicts public measured runs (autotune.fitting.reference_runs), before and after fitting.

Prints ONE JSON object:
  rows_used / rows_skipped (+ skipped_reasons: count per reason), rows_not_fitted: the rows scored but left out of
    every fit (ReferenceRun.fit_excluded: hardware its preset does not describe), count per reason,
  in_sample_median_abs_err: |pred - measured| / measured of tok/s/GPU with the coefficients stored in the presets
    (fitted on all rows by autotune.fitting.fit_reference),
  out_of_sample_median_abs_err / out_of_sample_p90_abs_err: leave one source out: refit every GPU family on the
    other sources, predict the held-out source's rows (a family the other sources do not cover, e.g. H200 when the
    H200 bench is held out, uses the Hopper coefficients fitted on H100 rows: the family is fitted jointly),
  median_group_spearman: Spearman rank correlation of predicted vs measured within every (source, model, GPU count,
    preset) group of >= 5 configurations (in-sample coefficients), and the per-group values,
  before: the same figures with the model and presets of BEFORE_COMMIT (git archive of that commit, run in a
    subprocess), per_source: the same per source.
  coefficients: every free coefficient per GPU family with its prior, range and an at_bound flag
    (autotune/fitting/coefficients.py), coefficients_at_bound: the ones at an end of their range.
Run: PYTHONPATH=. python benchmarks/model_accuracy.py [--refit] [--quick]   (--refit prints the fitted coefficients too;
--quick leaves out the leave-one-source-out figures, for the smoke test)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autotune.fitting.coefficients import BY_NAME, FREE, at_bound
from autotune.fitting.fit_reference import (
    FAMILIES,
    FAMILY_OF,
    apply_fit,
    fit_all,
    load_preset,
    predict,
)
from autotune.fitting.reference_runs import load_reference_runs
from autotune.fitting.run_types import SOURCES

BEFORE_COMMIT = "46ae7e1"  # last commit before the fitted model (perf.py roofline + uncalibrated presets)
PRESETS = tuple(p for presets in FAMILIES.values() for p in presets)
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
        "/".join(map(str, k)): round(spearman(pred[v], meas[v]), 3)
        for k, v in groups.items()
        if len(v) >= MIN_GROUP and len(set(pred[v])) > 1 and len(set(meas[v])) > 1
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


def leave_one_out(runs: list, clusters: dict, key) -> np.ndarray:
    """Out-of-sample predictions: for each value of key(run) (a source, or a GPU type), refit every coefficient on the
    other rows and predict the held-out rows. A family left without rows keeps the presets' (in-sample) value of its
    own coefficients: held-out GPU types of a family the rest still covers borrow that family's fit."""
    out = np.full(len(runs), np.nan)
    for v in sorted({key(r) for r in runs}):
        held = [i for i, r in enumerate(runs) if key(r) == v]
        train = [r for r in runs if key(r) != v]
        fitted = apply_fit(clusters, fit_all(train, clusters))
        out[held] = predict([runs[i] for i in held], fitted)
    return out


def leave_one_source_out(runs: list, clusters: dict) -> np.ndarray:
    return leave_one_out(runs, clusters, lambda r: r.source)


def breakdown(runs: list, pred: np.ndarray) -> dict:
    """|error| median and p90 per GPU type, recipe and dense/MoE, and the Spearman of predicted vs measured within every
    (source, model, GPU count, preset) group of >= MIN_GROUP rows, with the groups below 0.8 named."""
    meas = np.array([r.measured_tokens_per_s_per_gpu for r in runs])
    err = np.abs(pred / meas - 1)
    out: dict = {
        "median_abs_err": round(float(np.median(err)), 4),
        "p90_abs_err": round(float(np.percentile(err, 90)), 4),
    }
    keys = {
        "gpu": [r.cluster for r in runs],
        "recipe": [r.plan.fp8 for r in runs],
        "kind": ["moe" if r.model.is_moe else "dense" for r in runs],
    }
    for name, labels in keys.items():
        out[f"by_{name}"] = {
            g: {
                "n": len(idx),
                "median_abs_err": round(float(np.median(err[idx])), 4),
                "p90_abs_err": round(float(np.percentile(err[idx], 90)), 4),
            }
            for g in sorted(set(labels))
            for idx in [[i for i, x in enumerate(labels) if x == g]]
        }
    groups: dict[tuple, list[int]] = {}
    for i, r in enumerate(runs):
        groups.setdefault((r.source, r.model.name, r.num_gpus, r.cluster), []).append(i)
    rho = {
        "/".join(map(str, k)): round(spearman(pred[v], meas[v]), 3)
        for k, v in groups.items()
        if len(v) >= MIN_GROUP and len(set(meas[v])) > 1 and len(set(pred[v])) > 1
    }
    out["spearman_groups"] = len(rho)
    out["spearman_below_0.8"] = {k: v for k, v in rho.items() if not v >= 0.8}
    return out


def resisting_rows(runs: list, pred: np.ndarray, limit: float = 0.25) -> list:
    """Where the out-of-sample error exceeds `limit`: rows per (source, preset, model, recipe) with their median
    predicted/measured ratio (> 1: the model is too fast), largest groups first."""
    meas = np.array([r.measured_tokens_per_s_per_gpu for r in runs])
    ratio = pred / meas
    bad: dict[tuple, list[float]] = {}
    for r, q in zip(runs, ratio):
        if abs(q - 1) > limit:
            bad.setdefault((r.source, r.cluster, r.model.name, r.plan.fp8), []).append(float(q))
    rows = [{"group": "/".join(k), "rows": len(v), "median_pred_over_measured": round(float(np.median(v)), 3)}
            for k, v in bad.items()]  # fmt: skip
    return sorted(rows, key=lambda x: -x["rows"])[:15]


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
# likewise train fields added later (framework: which trainer's speed terms apply)
_known_train = {f.name for f in dataclasses.fields(old_types.TrainSpec)}
_OldTrain = old_types.TrainSpec
old_types.TrainSpec = lambda **kw: _OldTrain(**{k: v for k, v in kw.items() if k in _known_train})
spec = importlib.util.spec_from_file_location("rr", sys.argv[2]); rr = importlib.util.module_from_spec(spec)
sys.modules["rr"] = rr
spec.loader.exec_module(rr)
# the old model knows neither the NeMo rows nor FP8 recipes: it replays the rows it could express (BEFORE_ROWS)
runs = [r for name, load in rr.LOADERS.items() if name in ("llmfoundry", "megatron", "h200_bench") for r in load(rr.Path(sys.argv[3]))[0]]
keep = {tuple(k) for k in json.loads(sys.argv[4])}
runs = [r for r in runs if (r.source, r.row) in keep]
cl = {}
out = []
for r in runs:
    if r.cluster not in cl:
        cl[r.cluster] = ClusterSpec(**OmegaConf.to_container(OmegaConf.load(f"{sys.argv[1]}/search_spaces/cluster/{r.cluster}.yaml")))
    out.append(float(perf_arrays(arrays_from_plans([r.plan]), r.model, r.train, cl[r.cluster])["tokens_per_s_per_gpu"][0]))
print(json.dumps(out))
"""


def before_predictions(keys: list) -> np.ndarray | None:
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
                json.dumps(keys),
            ],
            capture_output=True,
            text=True,
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": tmp},
        )
        if done.returncode != 0:
            raise RuntimeError(f"model_accuracy: the {BEFORE_COMMIT} model failed: {done.stderr[-2000:]}")
    return np.array(json.loads(done.stdout))


def before_rows(runs: list) -> list[int]:
    """Indices of the rows BEFORE_COMMIT's model replays, in loader order: the sources it knew (not NeMo, not the
    2026-11-25 H200 or the public MoE/Blackwell rows), no FP8 recipe, and none of the
    Megatron-LM README 2024 H100 rows (all skipped then for --tp-comm-overlap, incl. the TP=1 row that runs without)."""
    return [
        i
        for i, r in enumerate(runs)
        if r.source in ("llmfoundry", "megatron", "h200_bench")
        and r.plan.fp8 == "none"
        and not (r.source == "megatron" and r.cluster.startswith("h100"))
    ]


def coefficient_report(clusters: dict) -> dict:
    """Each free coefficient per GPU family as the presets store it, with its prior, physical range and source
    (autotune/fitting/coefficients.py), and `at_bound` ("low" / "high") when the fit put it at an end of the range."""
    out: dict = {}
    for fam, presets in FAMILIES.items():
        spec = clusters[presets[0]]
        out[fam] = {
            k: {
                "value": getattr(spec, k),
                "prior": BY_NAME[k].prior,
                "range": [BY_NAME[k].low, BY_NAME[k].high],
                "scope": BY_NAME[k].scope,
                "at_bound": None if getattr(spec, k) is None else at_bound(k, float(getattr(spec, k))),
            }
            for k in FREE
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="leave out the leave-one-out refits (smoke test)")
    ap.add_argument("--refit", action="store_true", help="also print the coefficients fitted on every row")
    args = ap.parse_args()
    runs, skipped = load_reference_runs()
    clusters = {n: load_preset(n) for n in PRESETS}
    pred = predict(runs, clusters)
    quick = args.quick  # smoke mode (tests/benchmarks): no leave-one-out refits, the slow part
    loso = None if quick else leave_one_source_out(runs, clusters)
    result = {
        "rows_used": len(runs),
        "rows_skipped": len(skipped),
        "skipped_reasons": dict(Counter(f"{s.source}: {s.reason.split(':')[0]}" for s in skipped)),
        "rows_not_fitted": dict(Counter(f"{r.source}: {r.fit_excluded}" for r in runs if r.fit_excluded)),
        **report(runs, pred, loso),
    }
    result.pop("rows")
    result["in_sample"] = breakdown(runs, pred)
    if not quick:
        logo = leave_one_out(runs, clusters, lambda r: r.cluster)
        result["leave_one_source_out"] = {**breakdown(runs, loso), "resisting_rows": resisting_rows(runs, loso)}
        result["leave_one_gpu_type_out"] = {**breakdown(runs, logo), "resisting_rows": resisting_rows(runs, logo)}
    idx = before_rows(runs)
    old = before_predictions([(runs[i].source, runs[i].row) for i in idx])
    if old is not None:
        b = report([runs[i] for i in idx], old, None)
        b.pop("groups")
        result["before"] = {
            **b,
            "commit": BEFORE_COMMIT,
            "out_of_sample_median_abs_err": b["in_sample_median_abs_err"],
            "out_of_sample_p90_abs_err": b["in_sample_p90_abs_err"],
            "note": "uncalibrated presets on the rows that model expresses (no NeMo, no FP8): nothing was fitted",
        }
    else:
        result["before"] = None
    if args.refit:
        fit = fit_all(runs, clusters)
        result["refit"] = {fam: {k: round(float(v), 4) for k, v in c.items()} for fam, c in fit.items()}
        result["refit_in_sample_median_abs_err"] = summarise(runs, predict(runs, apply_fit(clusters, fit)), None)[
            "in_sample_median_abs_err"
        ]
    result["families"] = {p: FAMILY_OF[p] for p in PRESETS}
    result["quick"] = quick
    result["free_coefficients"] = list(FREE)
    result["coefficients"] = coefficient_report(clusters)
    result["coefficients_at_bound"] = [
        f"{fam}/{k}={v['value']} ({v['at_bound']} end of {v['range']})"
        for fam, cs in result["coefficients"].items()
        for k, v in cs.items()
        if v["at_bound"]
    ]
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
