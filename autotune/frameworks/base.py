"""The framework profile seam: how one training framework spends memory and which layouts it can run.

`autotune.memory.memory_arrays` and `autotune.constraints.rejections` call a profile's hooks instead of deciding the
accounting themselves; `train.framework` names the profile (docs/frameworks.md). The base class is bench_model,
autotune's own trainer: every hook delegates to the functions in `autotune.memory` that describe it, so the
bench_model numbers are exactly what they were before profiles existed. A subclass overrides only the hooks where
its framework differs, and cites the framework's source for each.

All hooks are vectorised over candidate arrays (numpy broadcasting), like the rest of the estimator.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from autotune.types import DTYPE_BYTES, ClusterSpec, ModelSpec, TrainSpec

# (rule id, failing mask, message template(**cols) -> str, columns the template takes): autotune.constraints' format
Rule = tuple[str, Any, Callable[..., str], tuple[str, ...]]


def state_inputs(num_params: Any, zero_stage: Any, shard: Any, train: TrainSpec) -> tuple:
    """The arrays and byte counts every profile's `model_states` starts from: (psi, zero_stage, shard, compute bytes,
    fp32 master bytes per parameter (0 when training in fp32), optimizer-state bytes per parameter)."""
    c = DTYPE_BYTES[train.compute_dtype]
    return (
        np.asarray(num_params, dtype=np.float64),
        np.asarray(zero_stage),
        np.asarray(shard, dtype=np.float64),
        c,
        4.0 if c != 4 else 0.0,
        DTYPE_BYTES[train.optimizer_dtype] * train.optimizer_states,
    )


@dataclass(frozen=True)
class FrameworkProfile:
    """bench_model's accounting (autotune/memory.py's module docstring derives each term)."""

    name: str = "bench_model"
    # generic rules of autotune.constraints that are this framework's limits and that the profile replaces by its own
    # (e.g. torch's 1F1B needs m >= pp; Megatron's runs fewer micro-batches)
    replaces_rules: frozenset[str] = frozenset()

    # ---- model states -------------------------------------------------------------------------------------------
    def model_states(
        self, num_params: Any, zero_stage: Any, shard: Any, train: TrainSpec, offload: Any = 0
    ) -> dict[str, np.ndarray]:
        """Bytes of params, compute_copy, grads and optimizer (master included) on the device and the offloaded
        states on the host (`host`) for `num_params` parameters on one rank at ZeRO/FSDP/distributed-optimizer stage
        `zero_stage`, sharded over `shard` (= dp*cp) ranks; `offload` is the plan.offload code (0 none, 1 optimizer,
        2 params)."""
        from autotune.memory import model_state_arrays

        return model_state_arrays(num_params, zero_stage, shard, train, offload)

    def root_copy(self, root_params: Any, zero_stage: Any, train: TrainSpec) -> np.ndarray:
        """Extra bytes of the root unit (embedding, final norm, head) kept gathered all step: FSDP2's root unit in
        stage 3 (bench_model/parallel/data_parallel.py); the paper accounting (master_dtype set) has none."""
        z = np.asarray(zero_stage)
        if train.master_dtype is not None:
            return np.zeros(np.shape(z))
        return np.where(z == 3, np.asarray(root_params, dtype=np.float64) * DTYPE_BYTES[train.compute_dtype], 0.0)

    # ---- activations --------------------------------------------------------------------------------------------
    def layer_activations(
        self, model: ModelSpec, seq: Any, mbs: Any, tp: Any, sp: Any, recompute: Any, act_bytes: int
    ) -> dict[str, np.ndarray]:
        """One layer's saved activation bytes per micro-batch (`saved`) and the recompute transient (`transient`);
        `seq` is tokens per rank (seq_len/cp), `recompute` the integer code, `sp` sequence parallel."""
        from autotune.memory import layer_activation_bytes

        return layer_activation_bytes(model, seq, mbs, tp, sp, recompute, act_bytes)

    def first_stage_activations(self, model: ModelSpec, tokens: Any, tp: Any, sp: Any, act_bytes: int) -> Any:
        """Bytes pipeline rank 0 keeps per in-flight micro-batch outside the layers (embedding output, ...)."""
        return 0.0

    def head_activations(self, model: ModelSpec, tokens: Any, tp: Any, sp: Any, act_bytes: int) -> np.ndarray:
        """Last stage, one micro-batch: the final norm's tensors ((4 + c)h, /t with SP) and the head's gathered
        input (ch)."""
        return tokens * model.hidden_size * ((4.0 + act_bytes) / np.where(sp, tp, 1) + act_bytes)

    def logits(self, model: ModelSpec, tokens: Any, pp: Any, tp: Any, act_bytes: int) -> np.ndarray:
        """Loss memory on the last stage: bench_model's loss on fp32 logits keeps the fp32 log-softmax, its fp32
        gradient and the compute-dtype gradient into the head, (8 + c) bytes per logit of n*V/t; pp=1 chunks the
        loss (min(tokens, LOSS_CHUNK_TOKENS) at a time), the pipeline's loss_fn sees the whole micro-batch."""
        from autotune.memory import LOSS_CHUNK_TOKENS

        n = np.where(np.asarray(pp) == 1, np.minimum(tokens, LOSS_CHUNK_TOKENS), tokens)
        return (8.0 + act_bytes) * n * model.vocab_size / tp

    # ---- communication buffers ----------------------------------------------------------------------------------
    def buffers(self, layer_params: Any, zero_stage: Any, shard: Any, train: TrainSpec) -> np.ndarray:
        """FSDP2 (when it wraps the model): one block's unsharded gradient in compute dtype plus its fp32 reduce
        buffer; stage 3 adds two gathered blocks (current + prefetch)."""
        c, g, p = (DTYPE_BYTES[x] for x in (train.compute_dtype, train.grad_dtype, train.param_dtype))
        fsdp = (np.asarray(shard) > 1) | (c != p)
        z = np.asarray(zero_stage)
        return np.where(fsdp, layer_params * (c + g), 0.0) + np.where(z == 3, 2 * layer_params * c, 0.0)

    # ---- the peak ---------------------------------------------------------------------------------------------
    def allocated(
        self, params: Any, grads: Any, optimizer: Any, activations: Any, logits: Any, buffers: Any, transient: Any
    ) -> np.ndarray:
        """The allocated peak from the terms (`activations` includes the recompute `transient`): bench_model counts
        every term at once (a conservative sum over the step's phases)."""
        return params + grads + optimizer + activations + logits + buffers

    # ---- pipeline -----------------------------------------------------------------------------------------------
    def inflight(self, pp: Any, vpp: Any, m: Any, schedule: Any, rank: Any) -> np.ndarray:
        """Micro-batches whose activations pipeline rank `rank` holds at its peak (units of all its layers)."""
        from autotune.memory import inflight_microbatches

        return inflight_microbatches(pp, vpp, m, schedule, rank)

    # ---- feasibility --------------------------------------------------------------------------------------------
    def rules(self, arr: dict[str, np.ndarray], model: ModelSpec, train: TrainSpec, cluster: ClusterSpec) -> list[Rule]:
        """Layouts this framework cannot run, beyond autotune.constraints' generic rules; build each with `rule`."""
        return []

    def rule(self, rule_id: str, mask: Any, template: Callable[..., str], cols: tuple[str, ...]) -> Rule:
        """A rule whose stable id is `<name>_<rule_id>` and whose message starts with `<name>: `."""
        return (f"{self.name}_{rule_id}", mask, lambda **kw: f"{self.name}: {template(**kw)}", cols)
