"""Rules of plan.recompute_layers, partial full recompute (Megatron-Core `--recompute-method block
--recompute-num-layers N`; autotune/core/types.py has the field's sources). Part of the generic table in
autotune/layouts/rules.py, which re-exports these names."""

from __future__ import annotations

import math

from autotune.core.plan_arrays import RECOMPUTE_CODE
from autotune.core.rules import Rule

# Megatron-Core TransformerConfig.__post_init__ (megatron/core/transformer/transformer_config.py @ core_r0.16.1):
# "When using recompute_granularity: selective recompute_num_layers must be None"; the count means full recompute
RECOMPUTE_LAYERS_NEEDS_FULL = Rule(
    "recompute_layers_needs_full",
    lambda recompute_layers, recompute: (recompute_layers > 0) & (recompute != RECOMPUTE_CODE["full"]),
    lambda recompute_layers, recompute: (
        f"plan.recompute_layers={recompute_layers} requires plan.recompute=full (recompute={recompute}): "
        "Megatron's --recompute-num-layers with --recompute-method block counts fully recomputed layers"
    ),
)
# the count is per pipeline model chunk (a virtual stage's TransformerBlock: num_layers_per_pipeline_rank =
# len(self.layers)); more than the largest chunk holds is every layer, which recompute_layers=0 already says
RECOMPUTE_LAYERS_WITHIN_CHUNK = Rule(
    "recompute_layers_within_chunk",
    lambda recompute_layers, pp, vpp, model: recompute_layers > -(-model.num_layers // (pp * vpp)),
    lambda recompute_layers, pp, vpp, model: (
        f"plan.recompute_layers={recompute_layers} exceeds the layers of one pipeline model chunk "
        f"(num_layers/(pp*vpp) = {model.num_layers}/{pp * vpp}, at most {math.ceil(model.num_layers / (pp * vpp))})"
    ),
)
# the trainers that run a per-chunk layer count: Megatron-Core (block method) and bench_model (the first N blocks of
# each stage chunk, bench_model/parallel/recompute.py). torchtitan's selective_ac_option=N checkpoints every N-th
# layer (another set, torchtitan/models/llama3/infra/parallelize.py), nanotron and DeepSpeed have no per-layer count
RECOMPUTE_LAYERS_FRAMEWORKS = ("bench_model", "megatron")
RECOMPUTE_LAYERS_FRAMEWORK = Rule(
    "recompute_layers_framework",
    lambda recompute_layers, train: (recompute_layers > 0) & (train.framework not in RECOMPUTE_LAYERS_FRAMEWORKS),
    lambda recompute_layers, train: (
        f"plan.recompute_layers={recompute_layers} requires train.framework=bench_model or megatron (framework="
        f"{train.framework}): Megatron-Core's --recompute-method block --recompute-num-layers"
    ),
)
RECOMPUTE_LAYERS_RULES: tuple[Rule, ...] = (
    RECOMPUTE_LAYERS_WITHIN_CHUNK,
    RECOMPUTE_LAYERS_FRAMEWORK,
)
