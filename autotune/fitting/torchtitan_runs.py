"""torchtitan's published benchmark tables (benchmarks/data/measured/torchtitan_benchmarks.csv, one row per printed cell,
copied from github.com/pytorch/torchtitan; each row's `source_file` @ `source_commit` is the page, `torchtitan_commit`
the trainer it ran) as ReferenceRuns:

- benchmarks/llama3_h100_202412_torchtitan.md (Tables 1-6: Llama 3.1 8B / 70B / 405B on 8-512 H100, FSDP, CP, TP,
  async TP, PP 1F1B / interleaved, torch.compile, Float8; tok/s per GPU and max memory),
- benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md (70B on 256 and 8B on 64 H100, vanilla vs async TP, bf16 /
  float8 tensorwise / rowwise; no memory printed),
- benchmarks/llama3-8b_h200_202506_trainy-whitefiber.md (8B on 32 and 64 H200, FSDP + compile + Float8).

The H100 pages ran on Grand Teton hosts (96GB HBM2e, 2.4 TB/s, 500 W): search_spaces/cluster/h100-hbm2e-96gb.yaml.

How a row becomes a layout (train.framework=torchtitan; where the page is silent the assumption is named and the
csv's `notes` column repeats it):
- FSDP n -> dp n with zero_stage 3 (FSDP2 fully_shard; the blocks reshard after forward under torchtitan's "default"
  policy except as autotune/fitting/published_runs.py's per-commit profiles say: the root unit and the last block
  before torchtitan #1094, every block's stage under PP); TP -> tp with
  sequence parallelism (torchtitan's apply_tp shards the norms' sequence: SequenceParallel); async TP -> plan.tp_overlap;
  CP -> cp; PP -> pp with the printed schedule (1F1B, Interleaved1F1B -> interleaved_1f1b at 2 stages per rank, the
  default of torchtitan's generate_split_points at 9dec370 when no split points are given).
- batch: `local_batch` is per data-parallel rank (CP ranks share it); global = fsdp * local_batch. Without PP one
  micro-batch of the whole local batch (no gradient accumulation: torchtitan @9dec370 has none; the 2025 runs set no
  global batch). With PP the micro-batch count is pipeline_parallel_microbatches' default, the pp degree
  (torchtitan/parallelisms/pipelining_utils.py build_pipeline_schedule @9dec370): micro-batch = local_batch / pp.
- recompute: the page's "Selective activation checkpointing" / "per op SAC" -> selective (selective_ac_option "op" in
  the llama3 tomls); "Full activation checkpointing" -> full.
- Float8 -> fp8 "tensorwise" (torchao Float8Linear dynamic tensorwise scaling, the recipe of that time); "float8
  rowwise" -> "rowwise". Float8 all-gather of FSDP (the 405B toml, the H200 CLI) is not a plan field: the all-gather is
  priced in bf16.
- sequence length: not printed outside the CP tables: the model's toml at the run's torchtitan commit (8192 for all).
- numerics: fp32 sharded parameters computed in bf16, fp32 gradient reduction (torchtitan's mixed_precision_param
  bfloat16 / mixed_precision_reduce float32 defaults): TrainSpec's defaults.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from autotune.core.types import ParallelPlan, TrainSpec
from autotune.fitting.run_types import DATA, ReferenceRun, SkippedRow, preset_model

SOURCE = "torchtitan"
FILE = "torchtitan_benchmarks.csv"
GPU = {"H100 96GB HBM2e 500W": "h100-hbm2e-96gb", "H200": "h200-141gb"}
SCHEDULE = {"": "1f1b", "1F1B": "1f1b", "Interleaved1F1B": "interleaved_1f1b"}
INTERLEAVED_STAGES_PER_RANK = 2  # generate_split_points @9dec370: multi-stage schedules default to 2 stages per rank


def _flag(v: Any) -> bool:
    return str(v).strip().lower() == "true"


def torchtitan_layout(r: Any) -> tuple[TrainSpec, ParallelPlan]:
    """One csv row as (train, plan); raises ValueError when the degrees or the batch do not split."""
    fsdp, tp, pp, cp, lbs = (int(r[k]) for k in ("fsdp", "tp", "pp", "cp", "local_batch"))
    if fsdp * tp * pp * cp != int(r.num_gpus) or lbs % pp:
        raise ValueError(f"num_gpus={r.num_gpus} local_batch={lbs} do not split as fsdp={fsdp} tp={tp} pp={pp} cp={cp}")
    schedule = SCHEDULE[str(r.pp_schedule) if not pd.isna(r.pp_schedule) else ""]
    plan = ParallelPlan(
        dp=fsdp,
        tp=tp,
        pp=pp,
        cp=cp,
        vpp=INTERLEAVED_STAGES_PER_RANK if schedule == "interleaved_1f1b" else 1,
        zero_stage=3,
        micro_batch_size=lbs // pp,
        grad_accum_steps=pp,
        recompute=str(r.ac),
        sequence_parallel=tp > 1,
        tp_overlap=_flag(r.async_tp) and tp > 1,
        pp_schedule=schedule,
        fp8=str(r.float8),
        compile=_flag(r.compile),
    )
    # every commit of these pages (9dec370, 820504e, e7c0cae) repeats K/V to the query heads before SDPA (llama3
    # model.py `repeat_kv`, until #2259 of Jan 2026): the width torch's ring attention moves (ring_attention.py)
    # 9dec370 (the Dec 2024 page) did not compile the loss (TORCHTITAN_2024_12, compiled_loss=False): its rows run
    # the eager cross entropy under compile too; the 2025 pages' commits compile it (the profile's loss_kernel)
    train = TrainSpec(
        seq_len=int(r.seq_len),
        global_batch_size=int(r.global_batch),
        framework="torchtitan",
        sdpa_repeat_kv=True,
        loss_kernel="unfused" if str(r.torchtitan_commit) == "9dec370" else None,
    )
    return train, plan


def load_torchtitan(folder: Path = DATA) -> tuple[list[ReferenceRun], list[SkippedRow]]:
    df = pd.read_csv(folder / FILE)
    runs, skipped = [], []
    for i, r in df.iterrows():
        if str(r.gpu_type) not in GPU:
            skipped.append(SkippedRow(SOURCE, i, f"gpu_type={r.gpu_type}: no cluster preset"))
            continue
        try:
            train, plan = torchtitan_layout(r)
        except ValueError as e:
            skipped.append(SkippedRow(SOURCE, i, str(e)))
            continue
        model = preset_model(str(r.model))
        runs.append(ReferenceRun(SOURCE, i, model, train, GPU[str(r.gpu_type)], plan, float(r.tokens_per_s_per_gpu)))
    return runs, skipped
