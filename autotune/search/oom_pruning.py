"""Learning from OOMs: an out-of-memory trial at layout X prunes every remaining candidate that needs at least as much
memory *for the same reason*.

The partial order ("Y needs >= the memory of X") used here, and why each part holds for the bench trainer:

- **Same shape** — Y and X agree on dp, tp, pp, cp, vpp, sequence_parallel, pp_schedule and compile. These decide how the model
  and the sequence are split; changing any of them moves memory between components, so no claim is made across them.
- **micro_batch_size: Y >= X.** Activations and logits grow linearly with the micro-batch (Korthikanti et al. 2022,
  Eq. 1-2: bytes per layer ∝ s·b·h). With a fixed global batch, a 1F1B pipeline keeps min(pp, m) micro-batches of
  size b in flight, i.e. min(pp·b, B/dp) sequences, which never shrinks as b grows (GPipe keeps all B/dp).
- **recompute: Y <= X** in none < selective < full. Less recomputation saves more tensors (Korthikanti et al. 2022,
  Sec. 4; selective saves matmul and attention outputs, full only layer inputs), so less recompute needs more memory.
- **zero_stage: Y <= X** in 0 < 1 < 2 < 3. A lower ZeRO stage shards fewer of optimizer state / gradients /
  parameters over dp (Rajbhandari et al. 2020, Fig. 1), so it needs more memory. With dp = 1 every stage is the
  same, which the order also allows (equal is dominated too).
- **offload: Y <= X** in none < optimizer < params. Each step moves more model state off the device: optimizer
  offload removes the fp32 master and Adam states (ZeRO-Offload, Ren et al. 2021 Sec 4.1; DeepSpeed's estimator: ZeRO-2
  GPU 4Ψ + 16Ψ/N -> 2Ψ), params offload also the sharded params and grads (ZeRO-3 offload_param: 4·largest layer +
  2Ψ/N -> 4·largest layer; FSDP2 CPUOffloadPolicy), nothing is added on the device. So less offload needs at least the
  device memory. The claim is about device OOM (torch.OutOfMemoryError); a host-memory failure is not an OOM trial.
- **dp_shard: Y <= X**, 0 (= all of dp, plain FSDP) ranking last. With dp equal (a shape column), a smaller HSDP
  sharding group holds a bigger slice of parameters, gradients and optimizer state, P/(dp_shard*cp) (Zhao et al. 2023,
  "PyTorch FSDP", Sec 3.2.2 hybrid sharding: a replica group of F ranks holds the full model state), so it needs more.

Any Y that is >= X in all ordered fields and equal in the shape is dominated: if X did not fit, neither will Y.
Candidates that were already measured are never touched. Pure functions over the planner's candidate DataFrame.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from autotune.core.types import PLAN_DEFAULTS, PLAN_DIMS, PLAN_FIELDS, py_value

# From each ParallelPlan field's `Dim.oom` (autotune.core.types): "shape" fields must match; "higher" / "lower" ones are
# the orders above (a string field ranks by its `Dim.choices`); "derived" ones (grad_accum_steps) follow the rest.
# A field with no decision yet (oom=None) counts as shape: no claim across its values.
SHAPE_COLUMNS: tuple[str, ...] = tuple(f for f in PLAN_FIELDS if PLAN_DIMS[f].oom in ("shape", None))
# the ordered fields, by label: reasons read "mbs .., recompute .., zero .."
ORDERED_COLUMNS: tuple[str, ...] = tuple(
    sorted((f for f in PLAN_FIELDS if PLAN_DIMS[f].oom in ("higher", "lower")), key=lambda f: PLAN_DIMS[f].label)
)
RECOMPUTE_ORDER: dict[str, int] = {name: i for i, name in enumerate(PLAN_DIMS["recompute"].choices)}
PRUNED = "pruned"
_ZERO_IS_ALL = frozenset(f for f in PLAN_FIELDS if PLAN_DIMS[f].zero_is_all)  # 0 = all of dp: after every size
_ALL = 2**62
OOM_RULE = "oom_dominated"  # the `reject_rule` of a candidate pruned here


def _value(row: Mapping[str, Any], key: str) -> Any:
    """The row's value of plan field `key`; a row from before the field existed holds its default."""
    return py_value(row[key]) if key in row else PLAN_DEFAULTS[key]


def _column(candidates: Any, key: str) -> Any:
    import pandas as pd

    if key in candidates.columns:
        return candidates[key]
    return pd.Series([PLAN_DEFAULTS[key]] * len(candidates), index=candidates.index)


def _rank(key: str, v: Any) -> Any:
    """Where `v` sits in the field's order: its index in `choices` for a string field, the number itself else."""
    choices = PLAN_DIMS[key].choices
    if key in _ZERO_IS_ALL and int(v) == 0:
        return _ALL
    return choices.index(str(v)) if choices else int(v)


def _needs_more(key: str, cand: Any, oom: Any) -> bool:
    """`cand` needs at least the memory of `oom` along the ordered field `key` (equal counts)."""
    c, o = _rank(key, cand), _rank(key, oom)
    return c >= o if PLAN_DIMS[key].oom == "higher" else c <= o


def dominance_reason(oom: Mapping[str, Any], cand: Mapping[str, Any]) -> str | None:
    """Why `cand` needs at least the memory of the OOM layout `oom`, as "mbs 4 >= 2, recompute none < selective"
    (only the dimensions that differ; "same layout" when none does), or None if it is not dominated."""
    if any(_value(cand, k) != _value(oom, k) for k in SHAPE_COLUMNS):
        return None
    if not all(_needs_more(k, _value(cand, k), _value(oom, k)) for k in ORDERED_COLUMNS):
        return None
    parts = []
    for k in ORDERED_COLUMNS:
        c, o = _value(cand, k), _value(oom, k)
        if _rank(k, c) != _rank(k, o):
            parts.append(f"{PLAN_DIMS[k].label} {c} {'>=' if PLAN_DIMS[k].oom == 'higher' else '<'} {o}")
    return ", ".join(parts) or "same layout"


def dominated_mask(candidates: Any, oom: Mapping[str, Any]):
    """Boolean numpy array over `candidates` (a DataFrame with the layout columns): True where dominated by `oom`.
    Vectorised: the planner's frame can hold thousands of layouts."""
    import numpy as np

    mask = np.ones(len(candidates), dtype=bool)
    for k in SHAPE_COLUMNS:
        mask &= (_column(candidates, k) == _value(oom, k)).to_numpy()
    for k in ORDERED_COLUMNS:
        choices = PLAN_DIMS[k].choices
        col = _column(candidates, k)  # a frame from before the field existed holds its default
        col = col.map({c: i for i, c in enumerate(choices)}) if choices else col
        if k in _ZERO_IS_ALL:
            col = col.where(col != 0, _ALL)
        o = _rank(k, _value(oom, k))
        mask &= (col >= o).to_numpy() if PLAN_DIMS[k].oom == "higher" else (col <= o).to_numpy()
    return mask


def prune_after_oom(candidates: Any, oom: Mapping[str, Any], trial_id: str, done_ids: Iterable[str] = ()) -> Any:
    """Return a copy of `candidates` where every not-yet-run candidate dominated by the OOM layout `oom` (a result row
    or candidate row) has `status` "pruned", `reject_reason` "dominated by OOM trial <id> (<why>)" and `reject_rule`
    OOM_RULE.

    `done_ids` are candidate ids already measured or in flight (left as they are); candidates already pruned or
    rejected by the planner keep their first reason. The OOM candidate itself is not marked (it has its own row)."""
    df = candidates.copy()
    if "status" not in df.columns:
        df["status"] = None
    for col in ("reject_reason", "reject_rule"):
        if col not in df.columns:
            df[col] = None
        df[col] = df[col].astype(object)
    df["status"] = df["status"].astype(object)
    done = set(done_ids)
    oom_id = oom.get("candidate_id") if hasattr(oom, "get") else None
    open_ = df["reject_reason"].isna().to_numpy() & df["status"].isna().to_numpy()
    open_ &= ~df["candidate_id"].isin(done | {oom_id}).to_numpy()
    hit = dominated_mask(df, oom) & open_
    for idx in df.index[hit]:
        why = dominance_reason(oom, df.loc[idx])
        df.at[idx, "status"] = PRUNED
        df.at[idx, "reject_reason"] = f"dominated by OOM trial {trial_id} ({why})"
        df.at[idx, "reject_rule"] = OOM_RULE
    return df


def newly_pruned(before: Any, after: Any) -> Any:
    """Rows that `prune_after_oom` turned to `pruned` (for the store: one `pruned` row each)."""
    if "status" not in before.columns:
        return after[after["status"] == PRUNED]
    was = (before["status"] == PRUNED).reindex(after.index, fill_value=False)
    return after[(after["status"] == PRUNED) & ~was]


def dominated_candidates(
    candidates: Any, oom: Mapping[str, Any], skip: Any = lambda cid: False
) -> list[tuple[Any, str]]:
    """(candidate row, reason) for every row of `candidates` dominated by the OOM row `oom` whose id `skip` does not
    exclude (already run, in flight or pruned): what a strategy records as `pruned` after an OOM."""
    out = []
    trial = oom.get("trial_id") if hasattr(oom, "get") else None
    for idx in dominated_mask(candidates, oom).nonzero()[0]:
        cand = candidates.iloc[int(idx)]
        if skip(str(cand["candidate_id"])):
            continue
        out.append((cand, f"dominated by OOM trial {trial} ({dominance_reason(oom, cand)})"))
    return out
