"""The DeepSpeed profile (docs/frameworks.md): a Hugging Face-style Llama under the DeepSpeed engine (ZeRO 0-3,
bf16), optionally its PipelineEngine, and DeepSpeed-Ulysses for sequence (context) parallelism.

Sources:
  [MEM] deepspeedai/DeepSpeed docs/code-docs/source/memory.rst ("Memory Requirements") and the estimators it
        documents (`estimate_zero2_model_states_mem_needs`, `estimate_zero3_model_states_mem_needs` in
        deepspeed/runtime/zero/stage_1_and_2.py and stage3.py): ZeRO-2 GPU memory 4*params + 16*params/gpus (bf16
        params and bf16 grads whole, fp32 master + Adam + fp32 grad partition sharded); ZeRO-3
        largest_layer_memory + 18*params/gpus with largest_layer_memory = 4*largest_layer_params (the gathered bf16
        layer and its bf16 gradient). Rows: ../shared/reference/deepspeed_memory_estimator_docs.csv.
  [ZeRO] Rajbhandari et al. 2020 Table 1: no ZeRO (2 + 2 + K)*Psi, K = 12; stage 1 shards the K part.
  [PIPE] deepspeed/runtime/pipe/engine.py: the PipelineEngine asserts ZeRO stage < 2 ("ZeRO-2 and ZeRO-3 are
        incompatible with pipeline parallelism"); its TrainSchedule (deepspeed/runtime/pipe/schedule.py) is 1F1B
        only (no GPipe/AFAB, no interleaving); TiedLayerSpec ties embeddings across stages.
  [Z3C] ZeRO-3's collectives: parameters are fetched per submodule (PartitionedParameterCoordinator.fetch_sub_module,
        deepspeed/runtime/zero/partitioned_param_coordinator.py), the submodule's partitioned parameters and those
        prefetched with them (up to `stage3_prefetch_bucket_size` = 5e7 elements, deepspeed/runtime/zero/config.py)
        in one all_gather_coalesced (partition_parameters.py); parameters under `stage3_param_persistence_threshold`
        (1e5 elements: norms, biases) stay whole and are never gathered. Gradients are reduce-scattered in buckets of
        `reduce_bucket_size` = 5e8 elements (config.py; stage3.py __reduce_and_partition_ipg_grads).
  Tensor parallelism is not part of the plain DeepSpeed engine (Megatron-DeepSpeed brings Megatron's), so tp > 1
  (and with it sequence parallel) is rejected; cp maps to DeepSpeed-Ulysses (deepspeed/sequence/layer.py,
  DistributedAttention: all-to-all over heads), which needs num_heads and num_kv_heads divisible by cp.
Activations and logits are the model's own autograd (a Llama block with SDPA, loss on fp32 logits, not chunked):
bench_model's per-layer accounting, with the whole micro-batch's logits at every pp.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from autotune.core.model import ModelSpec
from autotune.core.plan_arrays import SCHEDULE_CODE
from autotune.core.types import DTYPE_BYTES, TrainSpec
from autotune.predict.frameworks.base import FrameworkProfile, Overlaps, state_inputs
from autotune.predict.frameworks.bench_model import BenchModelProfile

Z3_PREFETCH_BUCKET = 5e7  # [Z3C] stage3_prefetch_bucket_size default (elements)
Z3_REDUCE_BUCKET = 5e8  # [Z3C] reduce_bucket_size default (elements)


@dataclass(frozen=True)
class DeepSpeedProfile(FrameworkProfile):
    name: str = "deepspeed"
    # as bench_model (autotune/predict/frameworks/bench_model.py): a Hugging Face-style Llama's autograd per layer and at the head, every term at once; the PipelineEngine's 1F1B
    layer_activations = BenchModelProfile.layer_activations
    first_stage_activations = BenchModelProfile.first_stage_activations
    head_activations = BenchModelProfile.head_activations
    allocated = BenchModelProfile.allocated
    inflight = BenchModelProfile.inflight
    moe_layer_activations = BenchModelProfile.moe_layer_activations

    def attention_kernel(self) -> str:
        """DeepSpeed trains the user's model (HF transformers: sdpa or flash_attention_2, both FlashAttention-2
        kernels on CUDA): "fa2"."""
        return "fa2"

    def fp8_casts(self) -> str:
        """DeepSpeed runs FP8 through Transformer Engine's modules (DeepSpeed docs, FP8 with TE): "te"."""
        return "te"

    def overlaps(self) -> Overlaps:
        """DeepSpeed ZeRO: stage 1/2 reduce gradients in buckets; overlap_comm defaults to false for stages 1-2
        (deepspeed/runtime/zero/config.py: `overlap_comm` None -> True only for stage 3), so the reduction is exposed;
        stage 3 prefetches parameters (stage3_prefetch_bucket_size) and overlaps. The updated partitions are
        all-gathered after the step (not overlapped)."""
        return Overlaps(grad_reduce=False, param_gather=False, fsdp_prefetch=True, zero1_reduce_scatter=True)

    def fsdp_collectives_per_block(self, model: ModelSpec, layer_params: Any) -> tuple[Any, Any]:
        """[Z3C]: one all-gather per fetched linear submodule (GPT block: qkv, proj, fc1, fc2; HF Llama block: q, k,
        v, o, gate, up, down; MoE: the router and each expert's three), fewer where whole submodules fit one 5e7
        prefetch bucket: min(submodules, ceil(layer / 5e7)). Gradients: layer / 5e8 reduce-scatters per block (the
        bucket's share of one). GPT-3 175B (1.8e9 per block): 4 gathers and 3.6 reduce-scatters per block."""
        linears = 4 if model.block == "gpt" else 7
        if model.is_moe:
            shared = 3 if model.moe_shared_expert_ffn_hidden_size else 0
            linears = 4 + 1 + 3 * model.num_experts + shared  # attention q/k/v/o + router + experts
        layer = np.asarray(layer_params, dtype=np.float64)
        gathers = np.minimum(float(linears), np.maximum(np.ceil(layer / Z3_PREFETCH_BUCKET), 1.0))
        return gathers, layer / Z3_REDUCE_BUCKET

    def recompute_regathers(self) -> bool:
        """[Z3C] under activation checkpointing the recomputed forward fires ZeRO-3's forward pre-hook (gather) and
        post-hook (release: partition_parameters.py re-partitions `param.data` after the submodule's forward), and the
        backward's pre-hook gathers again: three gathers per block per micro-batch (traced in huggingface/transformers
        issue 47254 against DeepSpeed v0.19.2; DeepSpeed issue 4784: the recompute runs the forward hooks)."""
        return True

    def model_states(
        self, num_params: Any, zero_stage: Any, shard: Any, train: TrainSpec, offload: Any = 0
    ) -> dict[str, np.ndarray]:
        psi, z, d, c, master, o = state_inputs(num_params, zero_stage, shard, train)
        # [MEM] stages 1-2 (stage_1_and_2.py): bf16 params and grads whole, fp32 grad partition for the optimizer;
        # stage 3: bf16 param shard + fp32 grad partition (18 = 2 + 4 + 12); stage 0: [ZeRO] 2 + 2 + 12
        params = psi * c / np.where(z >= 3, d, 1.0)
        grads = np.select([z == 0, z <= 2], [psi * c, psi * c + psi * 4.0 / d], psi * 4.0 / d)
        optimizer = psi * (master + o) / np.where(z >= 1, d, 1.0)
        # offload_optimizer (ZeRO-Offload, Ren et al. 2021 Sec 4.1): master + Adam states and the fp32 gradient
        # partition on the host, no gradient on the device ([MEM] estimate_zero2(cpu_offload=True): GPU 2*Psi);
        # offload_param (ZeRO-3 only) moves the bf16 param partition too ([MEM] GPU = 4 * largest layer)
        off = np.asarray(offload)
        opt_off, par_off = off >= 1, off >= 2
        updated = psi / np.where(z >= 1, d, 1.0)
        host = np.where(opt_off, optimizer + updated * 4.0, 0.0) + np.where(par_off, params, 0.0)
        return {
            "params": np.where(par_off, 0.0, params),
            "compute_copy": np.zeros_like(psi * z),
            "grads": np.where(opt_off, 0.0, grads),
            "optimizer": np.where(opt_off, 0.0, optimizer),
            "host": host,
        }

    def root_copy(self, root_params: Any, zero_stage: Any, train: TrainSpec) -> np.ndarray:
        return np.zeros(np.shape(np.asarray(zero_stage)))

    def buffers(self, layer_params: Any, zero_stage: Any, shard: Any, train: TrainSpec) -> np.ndarray:
        # [MEM] ZeRO-3's largest_layer_memory: the gathered layer and its gradient in the compute dtype
        c = DTYPE_BYTES[train.compute_dtype]
        return np.where(np.asarray(zero_stage) == 3, 2.0 * c * np.asarray(layer_params, dtype=np.float64), 0.0)

    def logits(self, model: ModelSpec, tokens: Any, pp: Any, tp: Any, act_bytes: int) -> np.ndarray:
        return (8.0 + act_bytes) * tokens * model.vocab_size / tp  # whole micro-batch, fp32 log-softmax + grads

    def rules(self) -> tuple:
        return (
            self.rule(
                "moe_dispatcher",
                lambda moe_dispatcher: moe_dispatcher != 0,
                lambda moe_dispatcher: (
                    f"moe_dispatcher={moe_dispatcher}: DeepSpeed-MoE dispatches with its own all-to-all only (deepspeed/moe/sharded_moe.py); moe_dispatcher must be alltoall"
                ),
            ),
            self.rule(
                "no_tp",
                lambda tp: tp > 1,
                lambda tp: f"tp={tp}: the DeepSpeed engine has no tensor parallelism (tp must be 1)",
            ),
            self.rule(
                "pp_zero",
                lambda pp, zero_stage: (pp > 1) & (zero_stage >= 2),
                lambda pp, zero_stage: (
                    f"pp={pp} with zero_stage={zero_stage}: the PipelineEngine supports ZeRO stage 0-1 only (zero_stage must be <= 1)"
                ),
            ),
            self.rule(
                "pp_schedule",
                lambda pp, vpp, pp_schedule: (pp > 1) & ((pp_schedule != SCHEDULE_CODE["1f1b"]) | (vpp > 1)),
                lambda pp, vpp: (
                    f"pp={pp} vpp={vpp}: the PipelineEngine runs 1F1B only (pp_schedule must be 1f1b, vpp 1)"
                ),
            ),
            self.rule(
                "ulysses_heads",
                lambda cp, model: (cp > 1) & ((model.num_heads % cp != 0) | (model.num_kv_heads % cp != 0)),
                lambda cp, model: (
                    f"cp={cp} (Ulysses) does not divide num_heads={model.num_heads} and num_kv_heads={model.num_kv_heads}"
                ),
            ),
        )
