"""The results table: one row per trial (docs/architecture.md "Store: the results table"). The trainer writes these
keys as JSON, the store writes them as Parquet with this exact Arrow schema, so every backend yields identical
columns. Missing numbers are null, never -1."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from autotune.core.types import LATER_FIELDS, PLAN_FIELDS, PLAN_KINDS

SCHEMA_VERSION = 1
# A composed row keeps the target layout in the plan columns and its measured-and-composed step in the speed columns;
# these say what ran instead (the replica) and which parts of the step were measured vs modelled.
SCALE_DOWN_FIELDS: list[tuple[str, pa.DataType]] = [
    ("scaled_from", pa.string()),  # the target candidate id this row was composed for
    ("replica_num_gpus", pa.int64()),
    ("replica_dp", pa.int64()),
    ("replica_tp", pa.int64()),
    ("replica_pp", pa.int64()),
    ("replica_cp", pa.int64()),
    ("replica_ep", pa.int64()),
    ("replica_etp", pa.int64()),
    ("replica_num_layers", pa.int64()),
    ("replica_grad_accum_steps", pa.int64()),
    ("replica_step_time_s", pa.float64()),  # the replica's measured per-rank step (CPU seconds on CPU ranks)
    ("measured_parts", pa.string()),  # comma-separated step parts measured on the replica
    ("modelled_parts", pa.string()),  # comma-separated step parts priced by autotune/predict (alpha-beta, schedule)
    ("full_size_gpu_seconds", pa.float64()),  # what running this layout at full size would have cost (estimate)
]
STATUSES: tuple[str, ...] = ("ok", "oom", "crash", "timeout", "pruned", "simulated", "invalid")

_S, _I, _F, _B = pa.string(), pa.int64(), pa.float64(), pa.bool_()
PLAN_ARROW_TYPES: dict[str, pa.DataType] = {"int": _I, "str": _S, "bool": _B}  # ParallelPlan field type -> column

RESULT_FIELDS: list[tuple[str, pa.DataType]] = [
    ("schema_version", _I),
    ("sweep_id", _S),
    ("trial_id", _S),
    ("candidate_id", _S),
    ("backend", _S),
    ("status", _S),
    ("error_type", _S),
    ("error_message", _S),
    ("reject_reason", _S),
    ("reject_rule", _S),
    # model
    ("model_name", _S),
    ("num_layers", _I),
    ("hidden_size", _I),
    ("ffn_hidden_size", _I),
    ("num_heads", _I),
    ("num_kv_heads", _I),
    ("vocab_size", _I),
    ("tie_embeddings", _B),
    ("num_params", _I),
    # hardware + layout
    ("hardware", _S),
    ("num_gpus", _I),
    *[(f, PLAN_ARROW_TYPES[PLAN_KINDS[f]]) for f in PLAN_FIELDS],
    ("precision", _S),
    ("seq_len", _I),
    ("global_batch_tokens", _I),
    # measured
    ("tokens_per_s", _F),
    ("tokens_per_s_per_gpu", _F),
    ("mfu", _F),
    ("tflops_per_gpu", _F),
    ("step_time_mean_s", _F),
    ("step_time_std_s", _F),
    ("step_cpu_time_mean_s", _F),  # the busiest rank's CPU seconds per step (process_time), mean over timed steps
    ("optimizer_cpu_time_mean_s", _F),  # of which in the optimizer step (the busiest rank's), mean over timed steps
    ("dp_comm_cpu_time_mean_s", _F),  # of which in FSDP2's all-gathers / reduce-scatters (busiest rank's; CPU ranks)
    ("comm_thread_cpu_time_mean_s", _F),  # of which on the collectives' threads (process - main thread; CPU ranks)
    ("host_ops_per_step", _I),  # operations dispatched in one step's forward+backward (busiest rank's; CPU ranks)
    ("host_cpu_time_s", _F),  # of the step's CPU seconds, their host cost: ops x measured seconds per op (CPU ranks)
    ("comm_ops_per_step", _I),  # functional (tensor-parallel) collectives in one step's forward+backward (CPU ranks)
    ("comm_op_cpu_s", _F),  # CPU seconds per tiny functional collective on the tp group, measured (CPU ranks)
    # of the step's CPU seconds, the embedding's and the head + loss's (all threads, FSDP2 collectives excluded), of
    # both the part on the collectives' threads and their host dispatch (CPU ranks, pp = 1: bench_model/ends_timing.py)
    ("embed_cpu_time_mean_s", _F),
    ("head_cpu_time_mean_s", _F),
    ("ends_comm_thread_cpu_time_mean_s", _F),
    ("ends_host_cpu_time_s", _F),
    ("timed_steps", _I),
    ("peak_mem_allocated_bytes", _I),
    ("peak_mem_reserved_bytes", _I),
    ("final_loss", _F),
    ("losses", pa.list_(_F)),
    # predicted
    ("pred_mem_bytes", _F),
    # what peak_mem_reserved_bytes measures, predicted like for like (TrialSpec.pred_peak_mem_reserved_bytes): the
    # allocator peak on CUDA, the device total (pred_mem_bytes) on CPU ranks
    ("pred_peak_mem_reserved_bytes", _F),
    ("pred_tokens_per_s_per_gpu", _F),
    ("pred_mfu", _F),
    # bookkeeping
    ("started_at", _S),
    ("ended_at", _S),
    ("wall_s", _F),
    ("gpu_seconds", _F),
    ("code_version", _S),
    ("torch_version", _S),
    ("hostname", _S),
    ("log_path", _S),
    # scale-down trials (autotune/run/scaledown.py, docs/scale_down.md): null on a row measured at full size
    *SCALE_DOWN_FIELDS,
]
RESULT_COLUMNS: list[str] = [name for name, _ in RESULT_FIELDS]
# Columns added after files of this schema version were first written: a file without them is still whole (it was
# written before them) and reads as null there, so earlier sweeps resume instead of re-running every trial.
LATER_COLUMNS: frozenset[str] = frozenset(
    {
        "reject_rule",
        "step_cpu_time_mean_s",
        "optimizer_cpu_time_mean_s",
        "dp_comm_cpu_time_mean_s",
        "comm_thread_cpu_time_mean_s",
        "host_ops_per_step",
        "host_cpu_time_s",
        "comm_ops_per_step",
        "comm_op_cpu_s",
        "embed_cpu_time_mean_s",
        "head_cpu_time_mean_s",
        "ends_comm_thread_cpu_time_mean_s",
        "ends_host_cpu_time_s",
        "pred_peak_mem_reserved_bytes",
        *LATER_FIELDS,
        *(n for n, _ in SCALE_DOWN_FIELDS),
    }
)
RESULT_SCHEMA = pa.schema(RESULT_FIELDS)


def predicted_peak(rows: Any) -> Any:
    """The prediction to set beside `peak_mem_reserved_bytes` (a frame's column or one row's value):
    `pred_peak_mem_reserved_bytes`, or `pred_mem_bytes` in files written before that column (their device total)."""
    if hasattr(rows, "columns"):
        new = rows["pred_peak_mem_reserved_bytes"] if "pred_peak_mem_reserved_bytes" in rows.columns else None
        old = rows["pred_mem_bytes"].astype("float64")
        return old if new is None else new.astype("float64").fillna(old)
    new = rows.get("pred_peak_mem_reserved_bytes")
    return rows.get("pred_mem_bytes") if new is None or new != new else new


def empty_row() -> dict[str, Any]:
    row: dict[str, Any] = {name: None for name in RESULT_COLUMNS}
    row["schema_version"] = SCHEMA_VERSION
    return row


def row_from_spec(spec: Any) -> dict[str, Any]:
    """The identity and layout part of a row, filled from a TrialSpec (autotune.core.types)."""
    m, p, t = spec.model, spec.plan, spec.train
    row = empty_row()
    row.update(
        sweep_id=spec.sweep_id,
        trial_id=spec.trial_id,
        candidate_id=spec.candidate_id,
        backend=spec.backend,
        model_name=m.name,
        num_layers=m.num_layers,
        hidden_size=m.hidden_size,
        ffn_hidden_size=m.ffn_hidden_size,
        num_heads=m.num_heads,
        num_kv_heads=m.num_kv_heads,
        vocab_size=m.vocab_size,
        tie_embeddings=m.tie_embeddings,
        num_params=m.num_params(),
        hardware=spec.cluster.name,
        num_gpus=p.world_size,
        **p.to_dict(),
        precision=t.precision,
        seq_len=t.seq_len,
        global_batch_tokens=t.global_batch_tokens,
        pred_mem_bytes=spec.pred_mem_bytes,
        pred_peak_mem_reserved_bytes=spec.pred_peak_mem_reserved_bytes,
        pred_tokens_per_s_per_gpu=spec.pred_tokens_per_s_per_gpu,
        pred_mfu=spec.pred_mfu,
    )
    return row


def normalize_row(row: dict[str, Any]) -> dict[str, Any]:
    """Check a row against the schema: unknown keys are an error (a typo would silently drop data), missing keys null,
    status must be known."""
    unknown = set(row) - set(RESULT_COLUMNS)
    if unknown:
        raise ValueError(f"result row has unknown columns {sorted(unknown)}")
    out = empty_row()
    out.update(row)
    if out["status"] not in STATUSES:
        raise ValueError(f"result row status={out['status']!r} must be one of {', '.join(STATUSES)}")
    return out
