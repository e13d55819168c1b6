"""The nanotron profile (docs/frameworks.md): huggingface/nanotron's Llama trainer.

Sources (huggingface/nanotron, read from the public repository):
  [PAR] src/nanotron/config/parallelism_config.py @ 6b2ff6502c1ed4ef12843642572c10a8e7a5d3df: ParallelismArgs has dp,
        pp, tp, pp_engine ("1f1b" | "afab"), tp_mode ("all_reduce" | "reduce_scatter" = sequence parallel),
        recompute_granularity ("full" | "selective"), tp_linear_async_communication; no context parallelism and no
        interleaved (virtual) pipeline stages.
  [FN]  src/nanotron/parallel/tensor_parallel/functional.py @ eca4bdc54d29877237901450c9da5cb132c28831:
        _ColumnLinearAsyncCommunication (tp_linear_async_communication=true, REDUCE_SCATTER) saves the
        sequence-sharded input and all-gathers it again in backward (Megatron's SP semantics, adapted from
        Megatron-LM's layers.py); _ShardedCrossEntropy saves the normalised exp_logits, the caller casts the logits
        to fp32 (`sharded_cross_entropy(..., dtype=torch.float)`): 4 bytes per logit of n*V/t.
  Ultra-Scale Playbook (nanotron's memory chapter): bf16 params 2 + bf16 grads 2 + fp32 grad accumulation 4 + fp32
        master 4 + Adam 8 bytes per parameter; ZeRO-1 divides master + Adam by N_d.
Assumes tp_linear_async_communication=true with reduce_scatter (the sharded-input path; the synchronous path saves the
gathered input as DTensor does), flash attention (no s^2 scores; selective recompute then saves what none does) and
no dropout in the Llama block (so Megatron's two dropout masks per layer are absent).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from autotune.core.model import ModelSpec
from autotune.core.plan_arrays import SCHEDULE_CODE
from autotune.core.types import TrainSpec
from autotune.predict.frameworks.base import state_inputs
from autotune.predict.frameworks.megatron import MegatronProfile


@dataclass(frozen=True)
class NanotronProfile(MegatronProfile):
    name: str = "nanotron"
    # torch-like limits: 1F1B needs m >= pp (kept); tp_linear_async_communication (plan.tp_overlap) is nanotron's own
    # autograd function, no torch.compile involved
    replaces_rules: frozenset[str] = frozenset({"tp_overlap_needs_compile"})
    dropout_units: float = 0.0  # no dropout masks in nanotron's Llama block

    def model_states(
        self, num_params: Any, zero_stage: Any, shard: Any, train: TrainSpec, offload: Any = 0
    ) -> dict[str, np.ndarray]:
        psi, z, d, c, master, o = state_inputs(num_params, zero_stage, shard, train)
        grads = psi * (c + (4.0 if c != 4 else 0.0))  # bf16 .grad + fp32 accumulator (accumulate_grad_in_fp32)
        optimizer = psi * (master + o) / np.where(z >= 1, d, 1.0)
        host = np.zeros_like(psi * z * np.asarray(offload))  # no CPU offload in nanotron (rule below)
        return {
            "params": psi * c,
            "compute_copy": np.zeros_like(psi * z),
            "grads": grads,
            "optimizer": optimizer,
            "host": host,
        }

    def first_stage_activations(self, model: ModelSpec, tokens: Any, tp: Any, sp: Any, act_bytes: int) -> Any:
        return 0.0

    def head_activations(self, model: ModelSpec, tokens: Any, tp: Any, sp: Any, act_bytes: int) -> np.ndarray:
        # final norm input and output, sequence-sharded with SP; the head's input is re-gathered in backward
        return 2.0 * act_bytes * tokens * model.hidden_size / np.where(sp, tp, 1)

    def rules(self) -> tuple:
        return (
            self.rule(
                "offload",
                lambda offload: offload >= 1,
                lambda offload: f"offload={offload}: nanotron has no CPU offload (offload must be none)",
            ),
            self.rule(
                "fp8",
                lambda fp8: fp8 >= 1,
                lambda fp8: (
                    f"fp8={fp8}: nanotron 0.4's config has no FP8 training option (its experimental "
                    "src/nanotron/fp8 is its own recipe); fp8 must be none"
                ),
            ),
            self.rule(
                "zero_stage",
                lambda zero_stage: zero_stage >= 2,
                lambda zero_stage: (
                    f"zero_stage={zero_stage}: nanotron's optimizer shards with ZeRO-1 only (zero_stage must be <= 1)"
                ),
            ),
            self.rule(
                "no_cp",
                lambda cp: cp > 1,
                lambda cp: f"cp={cp}: ParallelismArgs has no context parallelism (cp must be 1)",
            ),
            self.rule(
                "no_interleaved",
                lambda vpp, pp_schedule: (vpp > 1) | (pp_schedule == SCHEDULE_CODE["interleaved_1f1b"]),
                lambda vpp: f"vpp={vpp}: nanotron's pipeline engines are afab and 1f1b (vpp must be 1)",
            ),
        )
