"""How well autotune/predict/reserved.py predicts the CUDA caching allocator's reserved peak on the measured H200 rows.

Rows: every bench_model / probe-memory case with both peak_alloc_gib and peak_reserved_gib
(torch.cuda.max_memory_allocated / max_memory_reserved; expandable_segments off) of the three H200 leases, each
predicted as the trainer that ran it (`LEASES`): 2026-11-23 (h200_bench_model_2026-11.csv, `FlatGatherTrainer`: ZeRO-1
gathered into one flat buffer, the loss made the whole fp32 logits), 2026-11-25 (`ChunkedLossTrainer`), 2026-11-29
(today's `BenchModelProfile`). For each row the allocator model gets the MEASURED allocated peak as input (the fit is
about the allocator, not the trainer's allocated terms) and the layout's three transient classes (fp32 logits block,
step temporaries, gradients made in backward) from autotune.predict.memory; it is compared with the measured reserved
peak (which has no CUDA context / NCCL overhead, so neither has the prediction).
Prints ONE JSON object: per-row measured / predicted GiB and relative errors
  before_err: allocated * (1 + 0.05), the constant-fragmentation model the presets used before,
  before_estimate_err: the 2026-11-23 CSV's est_reserved_gib (the old estimate, incl. 2 GiB runtime overhead),
  after_err: autotune/predict/reserved.py with the coefficients stored there,
  after_estimated_alloc_err: the same with autotune's own allocated estimate (end-to-end, today's trainer terms),
and max / rms of each; `leave_one_lease_out`: each lease predicted by the coefficients fitted on the other two;
the three expandable_segments runs of benchmarks/data/measured/README.md; `end_to_end_2026_11_25` / `_29`: the
allocator-visible peak (`allocator_peak`, no runtime overhead) and the allocated estimate of those leases against
max_memory_reserved / max_memory_allocated; `torchtitan_published`: the torchtitan profile against torchtitan's own
published max reserved memory (Llama 3.1 8B FSDP 8 and 128, no compile, no Float8; not fitted). With --fit also the
non-negative least-squares coefficients (reserved.fit_coefficients) over all rows, to store in
autotune/predict/reserved.py.
Run: PYTHONPATH=. python benchmarks/reserved_accuracy.py [--fit]
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autotune.core.plan_arrays import RECOMPUTE_CODE, arrays_from_plans
from autotune.predict import reserved
from autotune.predict.frameworks.bench_model import LOSS_CHUNK_TOKENS, BenchModelProfile
from autotune.predict.frameworks.torchtitan import TORCHTITAN_2024_12
from autotune.predict.memory import memory_arrays
from autotune.spec.config import load_config

CSV = ROOT / "benchmarks" / "data" / "measured" / "h200_bench_model_2026-11.csv"
HELD_OUT_CSV = ROOT / "benchmarks" / "data" / "measured" / "h200_bench_model_2026-11-25.csv"
LEASE_2026_11_29 = ROOT / "benchmarks" / "data" / "measured" / "h200_bench_model_2026-11-29.csv"
GIB = 2**30
# benchmarks/data/measured/README.md, "With PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True": reserved GiB with the
# setting on, allocated unchanged (the case's row in the CSV gives allocated)
EXPANDABLE = {"8b_dp4tp2_z1": 106.9, "8b_fsdp8_tt": 98.4, "1b_mbs4": 79.8}


def measured_rows(path: Path = CSV) -> list[dict]:
    """Rows of autotune's own trainer with both peaks, each with its autotune config and GPU count."""
    out = []
    with open(path) as fh:
        for r in csv.DictReader(fh):
            if not (r["peak_alloc_gib"] and r["peak_reserved_gib"] and r["layout"].startswith("model=")):
                continue
            gpus = int(r["kind"].split("--gpus ")[1].split()[0]) if "--gpus " in r["kind"] else 1
            cfg = load_config(r["layout"].split() + ["cluster=h200-141gb"])
            out.append(
                {
                    "case": r["case"],
                    "cfg": cfg,
                    "gpus": gpus,
                    "alloc": float(r["peak_alloc_gib"]) * GIB,
                    "reserved": float(r["peak_reserved_gib"]) * GIB,
                    "est_reserved": float(r["est_reserved_gib"]) * GIB if r["est_reserved_gib"] else None,
                }
            )
    return out


@dataclasses.dataclass(frozen=True)
class FlatGatherTrainer(BenchModelProfile):
    """bench_model as the 2026-11-23 rows ran it: ZeRO1AdamW all-gathered into ONE flat receive buffer of the whole
    local model (4 Psi bytes) instead of <= 256 MiB buckets (bench_model/parallel/data_parallel.py since 2026-11-25)."""

    def step_temporaries(self, local_params, zero_stage, shard, arr, optimizer_states, largest_param=None, train=None):
        return super().step_temporaries(local_params, zero_stage, shard, arr, optimizer_states, None)


@dataclasses.dataclass(frozen=True)
class ChunkedLossTrainer(BenchModelProfile):
    """bench_model as the 2026-11-25 lease ran it: the chunked, checkpointed cross-entropy at every layout, (8 + c)
    bytes per logit of one 1,024-token chunk (the fused linear cross-entropy that replaced it at pp=1 tp=1 keeps
    4 + c: frameworks/bench_model.py `logits`), and selective recompute that saved nothing under compile."""

    def compiled_layer_activations(self, model, seq, mbs, tp, sp, recompute, act_bytes):
        # that trainer's selective regions broke the compiled graph and Inductor kept what compiled "none" keeps
        # (the lease measured the same 41.6 / 75.7 GiB for both); today's SwiGLU checkpoint region saves c*f/t
        sel = np.asarray(recompute) == RECOMPUTE_CODE["selective"]
        none = np.where(sel, RECOMPUTE_CODE["none"], recompute)
        return super().compiled_layer_activations(model, seq, mbs, tp, sp, none, act_bytes)

    def logits(self, model, tokens, pp, tp, act_bytes):
        pp1, tp = np.asarray(pp) == 1, np.asarray(tp)
        n = np.where(pp1, np.minimum(tokens, LOSS_CHUNK_TOKENS), tokens)
        return (8.0 + act_bytes) * n * model.vocab_size / tp


# the three H200 leases, each with the trainer that ran it (its rows are predicted as that trainer)
LEASES = (
    ("2026-11-23", CSV, FlatGatherTrainer),
    ("2026-11-25", HELD_OUT_CSV, ChunkedLossTrainer),
    ("2026-11-29", LEASE_2026_11_29, BenchModelProfile),
)


def all_rows() -> list[dict]:
    """Every bench_model row with both peaks of the three leases, tagged with its lease and trainer profile."""
    out = []
    for lease, path, prof in LEASES:
        rows = measured_rows(path) if lease == LEASES[0][0] else held_out_rows(path)
        out += [{**r, "lease": lease, "profile": prof()} for r in rows]
    return out


def transients(row: dict, expandable: bool = False, profile=None) -> dict:
    """memory_arrays' result for the row's layout (its logits and step_temporaries feed the allocator model), under the
    trainer that produced the row (default: the 2026-11-23 one, `FlatGatherTrainer`)."""
    cfg = row["cfg"]
    cluster = dataclasses.replace(cfg.cluster, expandable_segments=expandable)
    arr = arrays_from_plans([cfg.plan(row["gpus"])])
    prof = FlatGatherTrainer() if profile is None else profile
    return {"res": memory_arrays(arr, cfg.model, cfg.train, cluster, prof), "arr": arr, "cluster": cluster}


def old_trainer_logits_fp32(row: dict) -> float:
    """fp32 logits bytes of the trainer that produced the rows (cross_entropy on the whole logits.float(): 4 b s V / t
    per rank, s = seq_len / cp; all rows are pp = 1). Fixed here, not taken from autotune.predict.memory's logits term, so a
    later trainer change (e.g. a chunked loss) does not move the fit against these measurements."""
    p, cfg = row["cfg"].plan(row["gpus"]), row["cfg"]
    return 4.0 * p.micro_batch_size * cfg.train.seq_len / p.cp * cfg.model.vocab_size / p.tp


def classes(row: dict, t: dict) -> tuple[float, float, float]:
    """The row's three transient classes (reserved.py): fp32 logits block, step temporaries, gradients made in
    backward, under the trainer that produced it (the 2026-11-23 rows' logits fixed by `old_trainer_logits_fp32`)."""
    res = t["res"]
    if row.get("lease", LEASES[0][0]) == LEASES[0][0]:
        logits = old_trainer_logits_fp32(row)
    else:
        logits = float(reserved.fp32_logits_block(res, t["arr"], row["cfg"].train)[0])
    return logits, float(res["step_temporaries"][0]), float(res["backward_grads"][0])


def _allocator(row: dict, t: dict, coefficients=None) -> float:
    """autotune/predict/reserved.py with the row's measured allocated peak and the measured trainer's transient blocks."""
    lg, st, gr = classes(row, t)
    exp = t["cluster"].expandable_segments
    got = reserved.reserved_bytes(row["alloc"], lg, st, exp, coefficients=coefficients, backward_grads=gr)
    return float(np.ravel(got)[0]) * (1.0 + t["cluster"].allocator_fragmentation)


def _t(row: dict, expandable: bool = False) -> dict:
    return transients(row, expandable, row.get("profile"))


def _stats(errs) -> dict:
    e = np.asarray(errs, dtype=float)
    return {
        "median_abs": round(float(np.median(np.abs(e))), 4),
        "max_abs": round(float(np.max(np.abs(e))), 4),
        "rms": round(float(np.sqrt(np.mean(np.square(e)))), 4),
        "median_signed": round(float(np.median(e)), 4),
    }


def evaluate(rows: list[dict]) -> dict:
    """Per row: the allocator model with the measured allocated peak (`after_err`), end to end with autotune's own
    allocated estimate (`after_estimated_alloc_err`), and for the 2026-11-23 rows the models before (`before_err`:
    allocated x 1.05; `before_estimate_err`: that CSV's est_reserved_gib, incl. 2 GiB runtime overhead)."""
    per, errs = [], {"before_err": [], "before_estimate_err": [], "after_err": [], "after_estimated_alloc_err": []}
    for r in rows:
        t = _t(r)
        after = _allocator(r, t)
        after_est = float(t["res"]["allocator_reserved"][0])
        e = {
            "before_err": r["alloc"] * 1.05 / r["reserved"] - 1,
            "after_err": after / r["reserved"] - 1,
            "after_estimated_alloc_err": after_est / r["reserved"] - 1,
            "before_estimate_err": (r["est_reserved"] / r["reserved"] - 1) if r.get("est_reserved") else None,
        }
        for k, v in e.items():
            if v is not None:
                errs[k].append(v)
        per.append(
            {
                "lease": r.get("lease", LEASES[0][0]),
                "case": r["case"],
                "measured_alloc_gib": round(r["alloc"] / GIB, 2),
                "measured_reserved_gib": round(r["reserved"] / GIB, 2),
                "pred_reserved_gib": round(after / GIB, 2),
                **{k: (None if v is None else round(v, 4)) for k, v in e.items()},
            }
        )
    summary = {f"{k}_max_abs": round(float(np.max(np.abs(v))), 4) for k, v in errs.items()}
    summary.update({f"{k}_rms": round(float(np.sqrt(np.mean(np.square(v)))), 4) for k, v in errs.items()})
    summary["after_err_median_abs"] = _stats(errs["after_err"])["median_abs"]
    return {"rows": per, **summary}


def expandable(rows: list[dict]) -> list[dict]:
    out = []
    for r in rows:
        if r["case"] in EXPANDABLE and r.get("lease", LEASES[0][0]) == LEASES[0][0]:
            t = _t(r, expandable=True)
            pred = _allocator(r, t)
            meas = EXPANDABLE[r["case"]] * GIB
            out.append(
                {
                    "case": r["case"],
                    "measured_reserved_gib": EXPANDABLE[r["case"]],
                    "pred_reserved_gib": round(pred / GIB, 2),
                    "err": round(pred / meas - 1, 4),
                }
            )
    return out


def _with_transients(rows: list[dict]) -> list[tuple[dict, dict]]:
    """Each row with its transients (`_t`), computed once for every fit and error below."""
    return [(r, _t(r)) for r in rows]


def _fit(pairs: list[tuple[dict, dict]]) -> tuple[float, float, float]:
    lg, st, gr = zip(*(classes(r, t) for r, t in pairs))
    return reserved.fit_coefficients([r["alloc"] for r, _ in pairs], [r["reserved"] for r, _ in pairs], lg, st, gr)


def fit(rows: list[dict]) -> dict:
    k = _fit(_with_transients(rows))
    return {"LOGITS_CACHED": round(k[0], 3), "STEP_CACHED": round(k[1], 3), "GRADS_CACHED": round(k[2], 3)}


def leave_one_lease_out(rows: list[dict]) -> dict:
    """For each lease: the coefficients fitted on the other two, the allocator model's error on it (measured
    allocated as input): how well the fit carries to a trainer it did not see."""
    pairs, out = _with_transients(rows), {}
    for lease, _, _ in LEASES:
        test = [(r, t) for r, t in pairs if r["lease"] == lease]
        k = _fit([(r, t) for r, t in pairs if r["lease"] != lease])
        errs = [_allocator(r, t, k) / r["reserved"] - 1 for r, t in test]
        out[lease] = {"n_rows": len(test), "coefficients": [round(x, 3) for x in k], **_stats(errs)}
    return out


def held_out_rows(path: Path = HELD_OUT_CSV) -> list[dict]:
    """The bench_model trainer's rows of a lease with both peaks (not the 46ae7e1 trainer's, not HF's)."""
    out = []
    with open(path) as fh:
        for r in csv.DictReader(fh):
            if r["status"] != "ok" or not r["peak_reserved_gib"] or not r["kind"].startswith("bench_model trainer"):
                continue
            cfg = load_config(r["layout"].split() + ["cluster=h200-141gb"])
            alloc, res = float(r["peak_alloc_gib"]) * GIB, float(r["peak_reserved_gib"]) * GIB
            out.append({"case": r["case"], "cfg": cfg, "gpus": 1, "alloc": alloc, "reserved": res})
    return out


def evaluate_held_out(rows: list[dict], profile=None, source: Path = HELD_OUT_CSV) -> dict:
    """Allocated and allocator-visible reserved peaks, end to end (autotune's own allocated estimate), per row, under
    the trainer that ran them (default: the 2026-11-25 one, `ChunkedLossTrainer`)."""
    per, e_alloc, e_res = [], [], []
    for r in rows:
        m = transients(r, profile=profile or ChunkedLossTrainer())["res"]
        a, p = float(m["allocated"][0]), float(m["allocator_peak"][0])
        e_alloc.append(a / r["alloc"] - 1)
        e_res.append(p / r["reserved"] - 1)
        per.append(
            {
                "case": r["case"],
                "measured_alloc_gib": round(r["alloc"] / GIB, 2),
                "pred_alloc_gib": round(a / GIB, 2),
                "measured_reserved_gib": round(r["reserved"] / GIB, 2),
                "pred_allocator_peak_gib": round(p / GIB, 2),
                "alloc_err": round(e_alloc[-1], 4),
                "reserved_err": round(e_res[-1], 4),
            }
        )
    return {
        "source": str(source.relative_to(ROOT)),
        "n_rows": len(rows),
        "rows": per,
        "alloc_err_median_abs": round(float(np.median(np.abs(e_alloc))), 4),
        "alloc_err_max_abs": round(float(np.max(np.abs(e_alloc))), 4),
        "reserved_err_median_abs": round(float(np.median(np.abs(e_res))), 4),
        "reserved_err_max_abs": round(float(np.max(np.abs(e_res))), 4),
        "reserved_err_rms": round(float(np.sqrt(np.mean(np.square(e_res)))), 4),
    }


# pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md (torchtitan 9dec370, torch 1963fc8, 2024-12; H100
# 96 GB; memory = the max reserved GiB torchtitan logs, max over ranks; its launcher sets expandable_segments): the
# rows without torch.compile and Float8 (the torchtitan profile models neither), Llama 3.1 8B, seq 8192, local batch
# 2, selective (op) AC: Table 1 FSDP 8 and Table 3 FSDP 128
TORCHTITAN_PUBLISHED = [("table1_fsdp8", 8, 82.4), ("table3_fsdp128", 128, 67.0)]


def evaluate_torchtitan_published() -> dict:
    """The torchtitan profile's allocator-visible peak against torchtitan's published max reserved memory."""
    per = []
    for case, gpus, gib in TORCHTITAN_PUBLISHED:
        over = ["model=llama-3.1-8b", "cluster=h100-sxm-80gb", "cluster.expandable_segments=true",
                "train.framework=torchtitan", "train.seq_len=8192", f"train.global_batch_size={2 * gpus}",
                f"plan.dp={gpus}", "plan.zero_stage=3", "plan.micro_batch_size=2", "plan.recompute=selective"]  # fmt: skip
        cfg = load_config(over)
        # the torchtitan that ran (9dec370: "default" reshard policy with the root unit, eager loss)
        m = memory_arrays(arrays_from_plans([cfg.plan(gpus)]), cfg.model, cfg.train, cfg.cluster, TORCHTITAN_2024_12)
        peak = float(m["allocator_peak"][0])
        per.append(
            {
                "case": case,
                "measured_reserved_gib": gib,
                "pred_allocated_gib": round(float(m["allocated"][0]) / GIB, 2),
                "pred_allocator_peak_gib": round(peak / GIB, 2),
                "reserved_err": round(peak / GIB / gib - 1, 4),
            }
        )
    return {"source": "pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md", "rows": per}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fit", action="store_true", help="also print the coefficients fitted on the measured rows")
    args = ap.parse_args()
    rows = all_rows()
    out = {
        "sources": [str(path.relative_to(ROOT)) for _, path, _ in LEASES],
        "n_rows": {lease: sum(r["lease"] == lease for r in rows) for lease, _, _ in LEASES},
        "coefficients": {
            "LOGITS_CACHED": reserved.LOGITS_CACHED,
            "STEP_CACHED": reserved.STEP_CACHED,
            "GRADS_CACHED": reserved.GRADS_CACHED,
            "EXPANDABLE_SCALE": reserved.EXPANDABLE_SCALE,
            "RESERVED_SIGMA_REL": reserved.RESERVED_SIGMA_REL,
        },
        **evaluate(rows),
        "leave_one_lease_out": leave_one_lease_out(rows),
        "expandable_segments": expandable(rows),
        "end_to_end_2026_11_25": evaluate_held_out(held_out_rows()),
        "end_to_end_2026_11_29": evaluate_held_out(
            held_out_rows(LEASE_2026_11_29), BenchModelProfile(), LEASE_2026_11_29
        ),
        "torchtitan_published": evaluate_torchtitan_published(),
    }
    if args.fit:
        out["fitted"] = fit(rows)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
