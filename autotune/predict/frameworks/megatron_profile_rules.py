"""The megatron profile's own feasibility rules (split out of megatron.py): what Megatron-LM cannot run, each with the
source that says so. The layout rules it shares with the other profiles are autotune/layouts/megatron_rules.py."""

from __future__ import annotations

from typing import Any

from autotune.core.plan_arrays import FP8_CODE


def megatron_profile_rules(prof: Any) -> tuple:
    """MegatronProfile.rules: each a `prof.rule` (id and message prefixed with the profile's name)."""
    # an uneven layer split is Megatron-Core's --decoder-first/last-pipeline-num-layers: no divisibility rule
    return (
        prof.rule(
            "offload_params",
            lambda offload: offload >= 2,
            lambda offload: (
                f"offload={offload}: Megatron-LM offloads the optimizer only "
                "(--optimizer-cpu-offload); parameter offload requires another framework"
            ),
        ),
        # train.cuda_graphs (autotune/predict/host.py): Megatron-Bridge docs/training/cuda-graphs.md @ 3029767
        # "Feature Interactions": TE-scoped graphs do not support full activation recompute ("only local
        # full-iteration graphs support full recompute"), and CUDA graphs are incompatible with CPU offloading
        prof.rule(
            "cuda_graphs_full_recompute",
            lambda recompute, train: (train.cuda_graphs in ("moe", "attn_moe")) & (recompute == 2),
            lambda train: (
                f"train.cuda_graphs={train.cuda_graphs} with recompute=full: Transformer Engine scoped CUDA graphs "
                "do not support full activation recompute (only full-iteration graphs do)"
            ),
        ),
        prof.rule(
            "cuda_graphs_offload",
            lambda offload, act_offload_layers, train: (
                (train.cuda_graphs != "none") & ((offload != 0) | (act_offload_layers > 0))
            ),
            lambda train: f"train.cuda_graphs={train.cuda_graphs} with CPU offloading: CUDA graphs are incompatible",
        ),
        # Megatron-LM arguments.py --fp8-recipe: delayed, tensorwise, mxfp8, blockwise (Transformer Engine)
        prof.rule(
            "fp8_rowwise",
            lambda fp8: fp8 == FP8_CODE["rowwise"],
            lambda fp8: (
                f"fp8={fp8}: Megatron-LM's --fp8-recipe has no rowwise recipe (delayed, tensorwise, "
                "mxfp8, blockwise); fp8 must be none or tensorwise"
            ),
        ),
        # Megatron-Bridge src/megatron/bridge/training/config.py @ 067f987d (the Megatron-FSDP checks):
        # "use_tp_pp_dp_mapping is not supported with Megatron FSDP" (zero_stage 2 / 3 here: [MFSDP])
        prof.rule(
            "tp_pp_dp_mapping_fsdp",
            lambda tp_pp_dp_mapping, zero_stage: tp_pp_dp_mapping & (zero_stage >= 2),
            lambda zero_stage: (
                f"plan.tp_pp_dp_mapping=true with zero_stage={zero_stage}: Megatron-FSDP does not support the "
                "tp-pp-dp rank order (zero_stage must be <= 1)"
            ),
        ),
    )
