"""DeepSpeed config (JSON), key names of DeepSpeed 0.19.8 (`deepspeed/runtime/config.py`, `runtime/constants.py`,
`runtime/zero/config.py`): train_batch_size, train_micro_batch_size_per_gpu, gradient_accumulation_steps,
zero_optimization.stage, bf16.enabled. A layout with tp > 1 is refused (UsageError): the deepspeed profile models the
plain engine, which has no tensor parallelism (AutoTP's tensor_parallel.autotp_size is not modelled).

DeepSpeed checks train_batch_size == micro_batch * gradient_accumulation_steps * data-parallel world size, so the
file is valid for exactly dp = plan.dp data-parallel ranks.

JSON has no comments: what did not map is the list under the top-level key "_autotune_unmapped", and the layout
under "_autotune"; DeepSpeed reads only the keys it knows and ignores these two.
"""

from __future__ import annotations

import json

from autotune.analyse.target import expected_memory
from autotune.core.errors import UsageError
from autotune.core.model import ModelSpec
from autotune.core.types import ClusterSpec, ParallelPlan, TrainSpec
from autotune.interop._common import (
    Export,
    ExportContext,
    apply_tables,
    header_lines,
    skip_not_mapped,
    skip_train,
)
from autotune.interop.plan_keys import TABLES
from autotune.interop.train_keys import TRAIN_TABLES

TARGET = "DeepSpeed 0.19.8 (deepspeed/runtime/config.py; deepspeed.initialize(config=FILE))"
PLAN_KEYS = TABLES["deepspeed"]  # autotune/interop/plan_keys.py
TRAIN_KEYS = TRAIN_TABLES["deepspeed"]  # autotune/interop/train_keys.py


def translate(ctx: ExportContext) -> Export:
    p = ctx.plan
    if p.tp > 1:
        # The deepspeed profile (autotune/predict/frameworks/deepspeed.py, rule no_tp) models the plain engine, which has
        # no tensor parallelism; DeepSpeed's AutoTP training (tensor_parallel.autotp_size) is not modelled, so a file
        # asking for it would run a layout nobody predicted. Refused rather than written with a warning.
        raise UsageError(
            f"--format=deepspeed: plan.tp={p.tp}: the DeepSpeed engine has no tensor parallelism (tp must be 1); "
            "`autotune export --best --format deepspeed` picks the best layout the deepspeed profile accepts"
        )
    ex = Export(
        target=TARGET,
        body={},
        notes=["The training script owns the model code: DeepSpeed applies ZeRO, batching and AutoTP from this file."],
    )
    skip_not_mapped(ex, p, PLAN_KEYS, handled=("pp", "vpp", "pp_schedule"))  # pipeline: one line below
    skip_train(ex, ctx, TRAIN_KEYS)
    body: dict = {
        "train_batch_size": ctx.global_batch_size,
        "train_micro_batch_size_per_gpu": p.micro_batch_size,
        "gradient_accumulation_steps": p.grad_accum_steps,
        "bf16": {"enabled": ctx.bf16},
        "zero_optimization": {"stage": p.zero_stage},
    }
    if (
        p.offload != "none"
    ):  # DeepSpeedZeroOffloadOptimizerConfig / DeepSpeedZeroOffloadParamConfig (zero/offload_config.py)
        body["zero_optimization"]["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if p.offload == "params":
        body["zero_optimization"]["offload_param"] = {"device": "cpu", "pin_memory": True}
    if p.dp_shard:
        _hpz(p, body, ex)
    if p.pp > 1:
        ex.skip(
            f"plan.pp={p.pp} vpp={p.vpp} pp_schedule={p.pp_schedule}",
            "DeepSpeed pipeline parallelism needs "
            "the model written as a deepspeed.pipe.PipelineModule(num_stages=pp); it is not a config key",
        )
    ex.body = body
    return apply_tables(ex, ctx, PLAN_KEYS, TRAIN_KEYS)


def _hpz(p: ParallelPlan, body: dict, ex: Export) -> None:
    """HSDP as ZeRO++ hierarchical partitioning (Wang et al. 2023, "ZeRO++", Sec 3.2 hpZ; DeepSpeed
    runtime/zero/config.py zero_hpz_partition_size): stage 3 keeps a secondary copy of the parameters sharded within
    groups of zero_hpz_partition_size ranks, so backward all-gathers stay in the group as in HSDP. Unlike HSDP,
    gradients and optimizer state stay sharded over all dp ranks. Stage 2 has no such knob."""
    if p.zero_stage != 3:
        ex.skip(
            f"plan.dp_shard={p.dp_shard} zero_stage={p.zero_stage}",
            "DeepSpeed has no hybrid sharding for stage 2 (ZeRO++ hpZ applies to stage 3); written as stage 2 over "
            "all of dp",
        )
        return
    body["zero_optimization"]["zero_hpz_partition_size"] = p.dp_shard
    ex.skip(
        f"plan.dp_shard={p.dp_shard} (HSDP)",
        "written as ZeRO++ hpZ: forward all-gathers span all dp ranks and gradients/optimizer state stay sharded "
        f"over dp={p.dp} (HSDP shards them over dp_shard={p.dp_shard}); the secondary copy adds P/{p.dp_shard}",
    )


def render(model: ModelSpec, train: TrainSpec, cluster: ClusterSpec, plan: ParallelPlan) -> str:
    ctx = ExportContext(model, train, cluster, plan)
    ex = translate(ctx)
    info = {
        "comment": header_lines(ctx, ex)[:4] + ex.notes,
        "expected_memory": expected_memory(model, train, cluster, plan, "deepspeed"),
        "plan": plan.to_dict(),
        "model": model.name,
        "num_gpus": ctx.world_size,
    }
    doc = {"_autotune": info, "_autotune_unmapped": ex.unmapped, **ex.body}
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
