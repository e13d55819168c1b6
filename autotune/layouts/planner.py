"""Enumerate every parallel layout of N GPUs, reject the impossible ones (with reasons), score the rest with the
memory and performance models, and rank them. Vectorised: one numpy array per plan field, no Python loop per
candidate except hashing the candidate ids (which need one sha1 each)."""

from __future__ import annotations

from typing import Any

import numpy as np

from autotune.core.errors import AutotuneError, UsageError
from autotune.core.model import ModelSpec
from autotune.core.plan_arrays import plan_array, plan_columns, pp_schedule_codes
from autotune.core.types import PLAN_DIMS, PLAN_FIELDS, PLAN_KINDS, TrainSpec
from autotune.core.types import candidate_ids as _candidate_ids
from autotune.layouts.rules import HOST_MEMORY_RULE, MEMORY_RULE, rejections
from autotune.predict.margin import memory_margin, rank_order
from autotune.predict.memory import memory_arrays
from autotune.predict.perf import perf_arrays
from autotune.spec.config import SPACE_FIELDS

# memory_arrays / perf_arrays keys that become frame columns: mem_<key>_bytes and pred_<key> (the same names as
# MemoryEstimate.as_columns and PerfEstimate.as_columns, which tests/unit/test_planner.py checks)
_MEM_KEYS = (
    "params",
    "grads",
    "optimizer",
    "activations",
    "logits",
    "buffers",
    "overhead",
    "allocated",
    "reserved",
    "allocator_peak",
    "device_total",
    "host",
)
_PERF_KEYS = ("step_s", "tokens_per_s", "tokens_per_s_per_gpu", "mfu")
COLUMNS = [
    "candidate_id",
    "num_gpus",
    *PLAN_FIELDS,
    "reject_rule",
    "reject_reason",
    "fits",
    *(f"mem_{k}_bytes" for k in _MEM_KEYS),
    "mem_margin_bytes",
    "mem_margin_sigma",
    *(f"pred_{k}" for k in _PERF_KEYS),
    "rank",
]


class NoValidLayoutError(AutotuneError):
    """No enumerated layout is valid and fits; the message says why (one line)."""


def _layouts(space, num_gpus: int) -> np.ndarray:
    """(dp, tp, pp, cp) rows with dp*tp*pp*cp = num_gpus over the space's values."""
    tp, pp, cp = np.meshgrid(np.array(space.tp), np.array(space.pp), np.array(space.cp), indexing="ij")
    tp, pp, cp = tp.ravel(), pp.ravel(), cp.ravel()
    inner = tp * pp * cp
    ok = num_gpus % inner == 0
    dp = num_gpus // inner
    if space.dp is not None:
        ok &= np.isin(dp, np.array(space.dp))
    return np.stack([dp[ok], tp[ok], pp[ok], cp[ok]], axis=1).astype(np.int64)


# The plan fields the planner takes from the search space besides the mesh axes (which _layouts pairs up), in the
# nesting of the enumeration: field order, except that vpp has always varied inside recompute (the row order of every
# candidate frame, which stored results and tests/unit/data/golden/ follow). A new field comes last and, while the
# space holds it at one value, leaves the order of the other rows as it was.
_SEARCHED = tuple(n for n in SPACE_FIELDS if not PLAN_DIMS[n].mesh)
_NESTING = tuple(
    sorted(_SEARCHED, key=lambda n: _SEARCHED.index("recompute") + 0.5 if n == "vpp" else _SEARCHED.index(n))
)


def _space_values(space, name: str) -> np.ndarray:
    """The plan-array values the space lists for `name`, each once: booleans false first, others as listed."""
    values = getattr(space, name)
    return plan_array(name, sorted(set(values)) if PLAN_KINDS[name] == "bool" else list(dict.fromkeys(values)))


def enumerate_arrays(space, train: TrainSpec, num_gpus: int) -> dict[str, np.ndarray]:
    """Plan arrays of every canonical layout: SP only with tp > 1, vpp > 1 only with pp > 1, grad_accum =
    global_batch / (dp * micro_batch) (floored to >= 1 when it does not divide; the batch rule then rejects it), and
    the schedule of `pp_schedule_codes` (interleaved 1F1B exactly when vpp > 1, GPipe when grad_accum_steps < pp)."""
    lay = _layouts(space, num_gpus)
    values = {n: _space_values(space, n) for n in _NESTING}
    grids = [g.ravel() for g in np.meshgrid(np.arange(len(lay)), *values.values(), indexing="ij")]
    arr = dict(zip(_NESTING, grids[1:]))
    for j, axis in enumerate(("dp", "tp", "pp", "cp")):
        arr[axis] = lay[grids[0], j] if len(lay) else np.zeros(0, np.int64)
    dp, tp, pp, vpp, sp, z, ds = (
        arr[k] for k in ("dp", "tp", "pp", "vpp", "sequence_parallel", "zero_stage", "dp_shard")
    )
    # tp=1 has no sequence parallelism: keep one row (the first listed SP value) and store it as false
    # pp=1 has no virtual stages: likewise keep the first listed vpp value and store vpp=1
    keep = ((tp > 1) | (sp == values["sequence_parallel"][0])) & ((pp > 1) | (vpp == values["vpp"][0]))
    # dp_shard: dp itself is stored as 0 (all of dp); ZeRO 0/1 shard no parameters, so they keep one row, stored 0.
    # A size that does not divide dp is not a layout of that dp: dropped, as dp*tp*pp*cp != num_gpus is (_layouts).
    keep &= (z < 2) | (ds == 0) | (dp % np.maximum(ds, 1) == 0)
    canon = np.where((ds == dp) | (z < 2), 0, ds)
    shards = values["dp_shard"]
    if 0 not in shards:  # no 0 listed: the first listed size stands for ZeRO 0/1, dp itself for FSDP
        keep &= (canon == ds) | np.where(z < 2, ds == shards[0], ds == dp)
    else:
        keep &= canon == ds
    # ep*etp must divide the ranks of a pipeline stage (the folded MoE mesh): other sizes are not layouts of this
    # world, dropped like non-dividing dp_shard sizes (the rule moe_fold names them for a plan given by hand)
    keep &= (dp * arr["cp"] * tp) % (arr["ep"] * arr["etp"]) == 0
    arr["dp_shard"] = canon
    arr["sequence_parallel"] = sp & (tp > 1)
    arr["vpp"] = np.where(pp > 1, vpp, 1)
    arr = {k: np.asarray(v)[keep] for k, v in arr.items()}
    arr["grad_accum_steps"] = np.maximum(train.global_batch_size // (arr["dp"] * arr["micro_batch_size"]), 1)
    arr["pp_schedule"] = pp_schedule_codes(arr["pp"], arr["vpp"], arr["grad_accum_steps"])
    return {f: arr[f] for f in PLAN_FIELDS}


def candidate_ids(arr: dict[str, np.ndarray], model: ModelSpec, train: TrainSpec) -> list[str]:
    """`autotune.core.types.candidate_id` for every row of plan arrays (the same function, fed columns)."""
    cols = {k: (v.tolist() if isinstance(v, np.ndarray) else list(v)) for k, v in plan_columns(arr).items()}
    return _candidate_ids(cols, model, train)


def _memory_reason(reserved: np.ndarray, device_bytes: int, headroom: float) -> np.ndarray:
    usable = device_bytes * (1 - headroom)
    suffix = f" GiB > {usable / 2**30:.1f} GiB usable ({device_bytes / 2**30:.1f} GiB - {headroom * 100:g}% headroom)"
    return np.array([f"needs {r / 2**30:.1f}{suffix}" for r in reserved.tolist()], dtype=object)


def _host_reason(host: np.ndarray, host_bytes: int | None) -> np.ndarray:
    have = f"{(host_bytes or 0) / 2**30:.1f} GiB"
    return np.array(
        [
            f"offloaded states need {h / 2**30:.1f} GiB host memory per GPU > {have} (cluster.host_memory_bytes_per_gpu)"
            for h in host.tolist()
        ],
        dtype=object,
    )


def score_arrays(arr: dict[str, np.ndarray], cfg, num_gpus: int, profile=None):
    """DataFrame (COLUMNS) for plan arrays: reasons, memory, predictions, fits, rank. `profile`: the framework profile
    whose memory accounting applies (default: cfg.train.framework's; a published run of an older framework version
    passes its own, autotune/fitting/published_runs.py)."""
    import pandas as pd

    model, train, cluster, space = cfg.model, cfg.train, cfg.cluster, cfg.space
    rules, reasons = rejections(arr, model, train, cluster, space)
    mem = memory_arrays(arr, model, train, cluster, profile)
    perf = perf_arrays(arr, model, train, cluster)
    # the device total (allocator peak + CUDA context and NCCL buffers: autotune/predict/memory.py `_peaks`) decides
    fits = mem["device_total"] <= cluster.device_memory_bytes * (1 - space.memory_headroom)
    over = np.equal(reasons, None) & ~fits
    if over.any():
        reasons[over] = _memory_reason(mem["device_total"][over], cluster.device_memory_bytes, space.memory_headroom)
        if train.framework != "bench_model":  # the profile's accounting decided it (autotune/predict/frameworks/)
            reasons[over] = np.array([f"{train.framework}: {r}" for r in reasons[over]], dtype=object)
        rules[over] = MEMORY_RULE
    host_over = np.equal(reasons, None) & (mem["host"] > (cluster.host_memory_bytes_per_gpu or 0))
    if host_over.any():
        reasons[host_over] = _host_reason(mem["host"][host_over], cluster.host_memory_bytes_per_gpu)
        rules[host_over] = HOST_MEMORY_RULE
    cols: dict[str, Any] = {
        "candidate_id": candidate_ids(arr, model, train),
        "num_gpus": np.full(len(arr["dp"]), num_gpus, dtype=np.int64),
    }
    cols.update(plan_columns(arr))
    cols["reject_rule"] = rules
    cols["reject_reason"] = reasons
    cols["fits"] = fits
    cols.update({f"mem_{k}_bytes": mem[k] for k in _MEM_KEYS})
    margin, sigma = memory_margin(mem["device_total"], cluster.device_memory_bytes, space.memory_headroom)
    cols["mem_margin_bytes"], cols["mem_margin_sigma"] = margin, sigma
    cols.update({f"pred_{k}": perf[k] for k in _PERF_KEYS})
    df = pd.DataFrame(cols)
    ok = np.equal(reasons, None)
    # expected throughput (tok/s x P(fits)), margins below space.min_margin_sigma last: autotune/predict/margin.py
    order = rank_order(perf["tokens_per_s"], mem["reserved"], sigma, ok, space.min_margin_sigma)
    rank = pd.array(np.zeros(len(df), dtype=np.int64), dtype="Int64")
    rank[order] = np.arange(1, len(order) + 1)
    rank[~ok] = pd.NA
    df["rank"] = rank
    return df[COLUMNS]


def enumerate_candidates(cfg, num_gpus: int):
    """Every enumerated candidate of `num_gpus` GPUs (rejected ones included) as a pandas DataFrame with COLUMNS."""
    if isinstance(num_gpus, bool) or not isinstance(num_gpus, (int, np.integer)) or num_gpus < 1:
        raise UsageError(f"num_gpus={num_gpus!r} must be an integer >= 1")
    return score_arrays(enumerate_arrays(cfg.space, cfg.train, int(num_gpus)), cfg, int(num_gpus))


def best_candidates(cfg, num_gpus: int, k: int = 10):
    """The top-k valid, fitting candidates (by rank); NoValidLayoutError naming why when there are none."""
    return top_candidates(enumerate_candidates(cfg, num_gpus), cfg, num_gpus, k)


def top_candidates(df, cfg, num_gpus: int, k: int = 10):
    """`best_candidates` of an already enumerated frame `df`."""
    good = df[df["rank"].notna()].sort_values("rank")
    if len(good):
        return good.head(k)
    raise NoValidLayoutError(explain_no_layout(df, cfg, num_gpus))


def explain_no_layout(df, cfg, num_gpus: int) -> str:
    s = cfg.space
    if len(df) == 0:
        return (
            f"no dp*tp*pp*cp = {num_gpus} from space.tp={list(s.tp)}, space.pp={list(s.pp)}, "
            f"space.cp={list(s.cp)}" + ("" if s.dp is None else f", space.dp={list(s.dp)}")
        )
    rule_ok = df["reject_rule"].isna() | (df["reject_rule"] == MEMORY_RULE)
    if rule_ok.any():
        valid = df[rule_ok]
        best = valid.loc[valid["mem_reserved_bytes"].idxmin()]
        return f"no layout of {num_gpus} GPUs fits: smallest {best['reject_reason']}"
    reasons = df["reject_reason"]
    if (df["reject_rule"] == "batch_divisible").all():
        gbs = cfg.train.global_batch_size
        steps = sorted({int(d) * int(b) for d, b in zip(df["dp"], df["micro_batch_size"])})
        lower = next((g for g in range(gbs - 1, 0, -1) if any(g % x == 0 for x in steps)), None)
        upper = next(g for g in range(gbs + 1, 2 * gbs + steps[0] + 1) if any(g % x == 0 for x in steps))
        near = " or ".join(str(g) for g in (lower, upper) if g is not None)
        return (
            f"train.global_batch_size={gbs} is not divisible by dp*micro_batch_size for any layout of {num_gpus} "
            f"GPUs (dp*micro_batch_size is one of {steps[:8]}{'...' if len(steps) > 8 else ''}): "
            f"train.global_batch_size={near} would divide"
        )
    top = reasons.value_counts()
    return (
        f"no valid layout of {num_gpus} GPUs: {len(df)} candidates rejected, most often: {top.index[0]} "
        f"({int(top.iloc[0])}x)"
    )
