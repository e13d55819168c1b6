"""The Megatron-LM profile (docs/frameworks.md): Megatron-Core GPT/Llama training with --bf16, TE flash attention,
tensor + sequence parallelism, the distributed optimizer and its pipeline schedules.

Sources (NVIDIA/Megatron-LM, read from the public repository):
  [TMU] megatron/training/theoretical_memory_usage.py @ 38644dd756c46142787b1bd5dc08ed82ca0e6de1: bytes per
        parameter 18 (bf16 param 2 + fp32 main_grad 4 + fp32 master 4 + Adam 8), with the distributed optimizer
        6 + 12/DP; activations per layer sbh(18 + 4f/h)/t with sequence parallel and selective recompute (Korthikanti
        et al. 2022 Table 2, generalised in f); embedding input 8sb + dropout mask sbh per in-flight micro-batch;
        output layer + CE loss 4sbh(1 + V/h); interleaving penalty 1 + (pp-1)/(pp*vpp); 1F1B scaled by min(1, m/pp).
  [XE]  megatron/core/tensor_parallel/cross_entropy.py @ 8e6e7cd73500331b5d5f739e2597d403d0c2eb1e: the
        vocab-parallel loss saves the normalised exp_logits (the softmax) for backward: 4 bytes per logit of fp32
        logits, sharded over TP.
  [TE-XE] train.cross_entropy_fusion="te" (Megatron-Core language_module.py @ 55ac7082 `compute_language_model_loss`:
        cross_entropy_loss_fusion with cross_entropy_fusion_impl "te" calls Transformer Engine's
        parallel_cross_entropy): transformer_engine/pytorch/cross_entropy.py @ 5671fd36 `CrossEntropyFunction.forward`
        saves only `inp` after triton/cross_entropy.py `cross_entropy_forward` has written the gradient into it (the
        loss math runs in fp32 registers; the returned gradient is "upcasted to the datatype of the input"): c bytes per
        logit of the bf16 logits, sharded over TP, plus 3 fp32 per row (m, d, X_y: not counted). The "native" fused
        loss (megatron/core/fusions/fused_cross_entropy.py, same commit) saves fp32 exp_logits as [XE] does.
  [SCH] megatron/core/pipeline_parallel/schedules.py @ 4dabc62385799f8256fb05ccf3dfd4a7218781bd: 1F1B warm-up
        min(pp - rank - 1, m) (runs m < pp); interleaving requires m % pp == 0 ("number of microbatches is not
        divisible by pipeline-parallel size when using interleaved schedule").
  [OPT] megatron/core/optimizer/__init__.py @ 0044db1f20bf9311d6cfc77e76fa05163e97ce44: `from
        transformer_engine.pytorch.optimizers import FusedAdam as Adam` (Apex FusedAdam as fallback).
  [BUF] megatron/core/distributed/param_and_grad_buffer.py (same commit): _ParamAndGradBuffer allocates one
        contiguous grad_data (and param_data with the distributed optimizer) per dtype at wrap time; parameters
        and main_grad are views into them.
  [DO]  megatron/core/optimizer/distrib_optimizer.py (same commit) `_copy_model_grads_to_main_grads`:
        `shard_main_param.grad = shard_model_grad.float()` (optimizer.py does the same for all params without the
        distributed optimizer).
  [GRAD] main_grad's dtype: fp32 with `--accumulate-allreduce-grads-in-fp32` (Megatron-LM's arguments.py turns it on
        for --bf16; autotune's default train.grad_dtype fp32), the param dtype with `grad_reduce_in_fp32=False`,
        which NVIDIA's performance recipes set (Megatron-Bridge scripts/performance/configs/llama/
        llama3_llm_pretrain.py @ 2a0d46e2 `set_llama3_common_configs`; NeMo scripts/performance `grad_reduce_in_fp32
        = False`): train.grad_dtype=bf16, as autotune/fitting/nemo_runs.py maps those rows.
  [MFSDP] Megatron-FSDP: docs/discussions/megatron-fsdp-user-guide/megatron-fsdp-user-guide.md (same commit;
        --use-megatron-fsdp, --data-parallel-sharding-strategy optim_grads_params, --fsdp-double-buffer) and
        megatron/core/distributed/fsdp/src/README.md (parameters and main_grad in sharded ParamAndGradBuffers,
        gathered per unit on demand). NVIDIA's recipes run it as `use_megatron_fsdp=True` with
        `fsdp_double_buffer=True` (Megatron-Bridge scripts/performance/configs/llama/llama3_llm_pretrain.py).
  [RCM] megatron/core/transformer/transformer_config.py (same commit) `recompute_modules` ("moe_act", "moe",
        "layernorm", "core_attn", ...) with recompute_granularity="selective"; moe/experts.py checkpoints the
        activation function (CheckpointWithoutOutput), moe/moe_layer.py the whole layer for "moe".
  [DROP] Megatron-Core's dropouts (embedding, the two bias-dropout-adds) use TransformerConfig.hidden_dropout (default
        0.1, megatron/core/transformer/transformer_config.py @ d98e8a64); torch's dropout at p = 0 returns its input
        and keeps no mask (aten/src/ATen/native/Dropout.cpp `_dropout_impl`: `if (p == 0 || !train ...) return
        input`). The attention dropout runs inside the flash kernel (no mask either way). NVIDIA's recipes run 0.0
        (autotune/fitting/nemo_runs.py HIDDEN_DROPOUT): train.hidden_dropout.
  [TE-ATTN] transformer_engine/pytorch/attention/dot_product_attention/backends.py (same commit) `FusedAttnFunc`:
        saves q, k, v and the bf16 output `out` (f16_tensors) for its backward.
  [TE-QKV] transformer_engine/pytorch/attention/dot_product_attention/utils.py (same commit) `get_qkv_layout`: q and
        k rotated into new tensors and v a view of the fused projection output fit no known layout (k and v on
        different storages with different strides): "not_supported" -> `q, k, v = [x.contiguous() ...]`, so v is
        a copy and nothing keeps the projection output; ops/basic/rmsnorm.py saves `input_.contiguous()` (q/k norms).
  [TE-LIN], [FP8P], [TE-WS], [TE-SOI]: Transformer Engine's saved FP8 inputs, quantized weights and their cache, in
        autotune/predict/frameworks/megatron_te.py with their sources.
  [REM] train.master_remainders: Apex DistributedFusedAdam's store_param_remainders (NVIDIA/apex
        apex/contrib/optimizers/distributed_fused_adam.py @ f3f04924 (2024-04) StateBucket: no params_shard,
        param_remainders_shard = torch.zeros([shard_size], dtype=torch.int16) beside the fp32 exp_avg / exp_avg_sq
        shards; `_local_step_with_param_remainders` rebuilds the fp32 master from the bf16 param and the remainder).
        NeMo 1.x turns it on for every bf16 megatron_amp_O2 model with the default fp32 optimizer and no fp8_params
        (NVIDIA/NeMo nemo/collections/nlp/models/language_modeling/megatron_base_model.py `setup_optimization` @
        v1.23.0 and r2.0.0rc1: store_params=False, store_param_remainders=True), and the NeMo-Framework-Launcher
        24.03.01 / 24.07 training yamls run distributed_fused_adam with megatron_amp_O2 and no fp8_params: master 2
        bytes per parameter instead of 4, sharded over the data-parallel group with the Adam moments.
Sequence parallel (Korthikanti Sec 4.2.2, Megatron's LinearWithGradAccumulationAndAsyncCommunication in
megatron/core/tensor_parallel/layers.py): the column-parallel linears save their sequence-sharded input and
all-gather it again in backward, so every per-layer tensor is /t (34/t for a GPT block), unlike DTensor SP.
Llama-specific generalisation of [TMU]'s per-layer term, per token in units of h (2-byte activations): layer norms 4,
QKV input 2, Q 2, K and V 2k/h each (GQA: [TMU] counts 4 + 2 for Q/K and V at full width), projection input 2, MLP
input 2, fc1 output (gate and up) 4f/h and fc2 input 2f/h for SwiGLU (GELU: 2f/h + 2f/h), two dropout masks 1 each
(counted as [TMU] does). With k = h and GELU this is exactly [TMU]'s 18 + 4f/h. Beyond [TMU]: Megatron-Core splits
the fused QKV projection output into q, k, v views (transformer/attention.py get_query_key_value_tensors); q and k are
rotated into new tensors but v stays a view, so the saved v keeps the whole projection output alive: its Q and K parts,
2(q_dim + kv_dim)/h more units per layer (measured byte for byte on Megatron-Core's own model with the local spec:
tests/unit/test_frameworks_megatron_probe.py). Transformer Engine's spec, NVIDIA's, keeps no view ([TE-QKV]).
[MLA] Multi-head latent attention (model.attention="mla": DeepSeek-V3, Kimi-K2) in Megatron-Core's TE spec
(megatron/core/transformer/multi_latent_attention.py @ core_v0.16.1 `get_query_key_value_tensors`; gpt_layer_specs.py
MLA submodules): the down projections (TELinear) save the normed hidden state (the "QKV input 2" above); the
compressed q (q_lora_rank) and kv (kv_lora_rank) are gathered to the whole sequence on every TP rank and
linear_q_up_proj / linear_kv_up_proj (TELayerNormColumnParallelLinear) save the norm's input and output, 2c(qr + kr)
per token, split neither by TP nor by SP; the up projections' q, k (n(dn + dr) each, the rope part expanded to every
head) and v (n dv) are contiguous tensors TE's attention saves, and its output n dv the projection's input: in place of
Q 2, K and V 4k/h and the projection input 2, 2(2n(dn + dr) + 2n dv)/h, TP-sharded (n heads / t).
FP8 (plan.fp8, Transformer Engine): `fp8_layer_saving` ([TE-LIN], [TE-ATTN]). Flash attention keeps no s^2 scores, so recompute=none saves what
selective does (selective recomputes core attention only; its checkpoint keeps q, k, v, so the view stays too).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from autotune.core.model import ModelSpec
from autotune.core.plan_arrays import RECOMPUTE_CODE
from autotune.core.types import DTYPE_BYTES, TrainSpec
from autotune.predict import reserved
from autotune.predict.frameworks import megatron_moe, megatron_recompute, megatron_te
from autotune.predict.frameworks.base import FrameworkProfile, Overlaps, state_inputs
from autotune.predict.frameworks.bench_model import BenchModelProfile
from autotune.predict.frameworks.megatron_profile_rules import megatron_profile_rules


def _params_are_master(train: TrainSpec) -> bool:
    """[B16] bf16 parameters, bf16 optimizer states and no master copy (train.param_dtype and optimizer_dtype bf16,
    master_dtype null): NeMo 1.x's Apex DistributedFusedAdam with `optim.dtype: bf16`, which its setup_optimization
    gives store_params=False when the optimizer dtype is the model's (nemo/collections/nlp/models/language_modeling/
    megatron_base_model.py @ v2.0.0rc0 `setup_optimization`): Adam's moments in bf16, the step writes the bf16 params
    (Nemotron-4 340B's launcher yaml). With an fp32 optimizer (the default) Megatron keeps its fp32 master."""
    return train.master_dtype is None and train.param_dtype == "bf16" and train.optimizer_dtype == "bf16"


def megatron_layer_units(model: ModelSpec, dropout: float = 2.0, qkv_view: bool = True) -> tuple[float, float]:
    """(not TP-sharded, TP-sharded) per-layer activation bytes per token / h at 2-byte activations, as [TMU] splits
    Korthikanti's Table 2: without SP, norms (4), QKV and MLP inputs (2 + 2) and `dropout` masks (2) are replicated;
    plus the fused QKV output kept by v's view (module docstring), TP-sharded."""
    h, f, k = model.hidden_size, model.ffn_hidden_size, model.kv_dim
    mlp = 6.0 * f / h if model.block != "gpt" else 4.0 * f / h  # SwiGLU: fc1 out 2f + fc2 in f; GELU: f + f
    view = 2.0 * (model.q_dim + k) / h if qkv_view else 0.0  # the fused QKV output's Q and K parts v's view keeps
    attn = 2.0 + 4.0 * k / h + 2.0  # Q, K and V, the projection input
    if model.attention == "mla":  # [MLA] q, k, v and the output at the heads' widths; no fused QKV output to view
        n, dqk, dv = model.num_heads, model.qk_nope_head_dim + model.qk_rope_head_dim, model.v_head_dim
        attn, view = 2.0 * (2 * n * dqk + 2 * n * dv) / h, 0.0
    return 8.0 + dropout, attn + mlp + view


def mla_latent_units(model: ModelSpec) -> float:
    """[MLA] the up projections' saved inputs, per token in units of h at 2-byte activations, on every TP rank and
    the whole (local) sequence: the compressed q and kv before and after their fused norms, 2 x 2(qr + kr)/h."""
    if model.attention != "mla":
        return 0.0
    return 4.0 * (model.q_lora_rank + model.kv_lora_rank) / model.hidden_size


@dataclass(frozen=True)
class MegatronProfile(FrameworkProfile):
    name: str = "megatron"
    # as bench_model (autotune/predict/frameworks/bench_model.py): every term at once; Megatron's 1F1B/interleaved in-flight counts (Korthikanti Eq. 5)
    allocated = BenchModelProfile.allocated
    inflight = BenchModelProfile.inflight

    def stored_weight_bytes(self, fp8: Any, train: TrainSpec, cluster: Any) -> np.ndarray:
        return megatron_te.stored_weight_bytes(fp8, train, cluster)  # [FP8P], [TE-WS]

    def gather_weight_bytes(self, fp8: Any, train: TrainSpec) -> np.ndarray:
        return megatron_te.gather_weight_bytes(fp8, train)  # [FP8P]

    def moe_host_sync(self, ep: Any, balanced: bool, capacity: bool) -> np.ndarray:
        """Dropless MoE syncs once per MoE layer forward: MoEAlltoAllTokenDispatcher.preprocess copies the token
        counts / all-to-all splits to the host and waits for them at `cuda_sync_point` ("before_ep_alltoall" with
        EP, "before_finish" without; megatron/core/transformer/moe/token_dispatcher.py
        `_maybe_dtoh_and_synchronize`, d98e8a6), and TEGroupedMLP reads tokens_per_expert with .tolist() under FP8
        (experts.py) whatever the dispatcher. With a capacity factor and padding (drop_and_pad:
        moe_pad_expert_input_to_capacity, what the token-drop recipes set) the counts are static: no sync."""
        return np.full(np.shape(np.asarray(ep)), not capacity, dtype=bool)

    def unfused_scaled_rope(self) -> bool:
        """Megatron-Core >= 0.16 applies RoPE unfused when mscale != 1, which TE's fused RoPE does not take
        (megatron/core/models/common/embeddings/rope_utils.py `apply_rotary_pos_emb`, 987395813b; autotune/predict/
        rope.py)."""
        return True

    def selective_reruns_elementwise(self) -> bool:
        """No: Megatron's selective granularity re-runs only its recompute_modules (transformer_config.py @
        core_v0.16.1), each priced where it is a plan value (plan.moe_recompute: perf_moe; plan.mla_recompute: perf
        _layer_terms). Its default module, core_attn, re-runs the attention forward; not priced (flash attention
        keeps no s^2 scores, so NVIDIA's recipes name other modules)."""
        return False

    def unfused_glu_clamp(self) -> bool:
        """Megatron-Core clamps before `weighted_bias_quick_geglu_impl`'s fused kernel, in eager PyTorch
        (megatron/core/fusions/fused_bias_geglu.py; autotune/predict/glu_clamp.py)."""
        return True

    def attention_kernel(self) -> str:
        """Megatron-Core's TEDotProductAttention: Transformer Engine picks cuDNN fused (flash) attention on Hopper and
        later when both it and flash-attn apply (NeMo docs, memory_optimizations.rst "Flash Attention", NVIDIA/NeMo
        PR 9188: "Transformer Engine prefers cuDNN flash attention on Hopper+ architectures"): "fa3"."""
        return "fa3"

    def fp8_casts(self) -> str:
        """Megatron-Core's linears are Transformer Engine modules (TELayerNormColumnParallelLinear,
        TERowParallelLinear) under fp8_autocast: "te"."""
        return "te"

    def overlaps(self) -> Overlaps:
        """Megatron-Core distributed optimizer with --overlap-grad-reduce (bucketed gradient reduce-scatter during
        backward) and --overlap-param-gather (each bucket's parameter all-gather behind the next forward)
        (megatron/core/distributed/distributed_data_parallel.py, param_and_grad_buffer.py); both are on in the
        Megatron-LM README's 2024 runs and in Megatron-Bridge's performance recipes (comm_overlap config).
        Megatron-FSDP prefetches like FSDP2. With vpp > 1 every Megatron entry point sets overlap_p2p_comm
        (autotune/predict/pp_overlap.py [OVL])."""
        return Overlaps(
            grad_reduce=True, param_gather=True, fsdp_prefetch=True, zero1_reduce_scatter=True, interleaved_p2p=True
        )

    def moe_layer_activations(
        self,
        model: ModelSpec,
        tokens: Any,
        tp: Any,
        sp: Any,
        recompute: Any,
        act_bytes: int,
        fp8: Any,
        ep: Any = 1,
        etp: Any = 1,
        mbs: Any = 1,
    ) -> np.ndarray:
        """Megatron-Core's MoE layer beyond the dense layer it replaces (megatron_moe.layer_activations)."""
        return megatron_moe.layer_activations(
            model, tokens, tp, sp, recompute, act_bytes, fp8, etp, self.fp8_delayed_scaling
        )

    def mla_recompute_saving(self, model: ModelSpec, tokens: Any, tp: Any, act_bytes: int) -> Any:
        return megatron_recompute.mla_saving(model, tokens, tp, act_bytes)  # [MLA] mla_up_proj

    def norm_recompute_saving(
        self, model: ModelSpec, tokens: Any, tp: Any, sp: Any, act_bytes: int, fp8: Any
    ) -> tuple[Any, Any]:
        return megatron_recompute.norm_saving(model, tokens, tp, sp, act_bytes, fp8, self.fp8_delayed_scaling)

    def mlp_recompute_saving(self, model: ModelSpec, tokens: Any, tp: Any, sp: Any, act_bytes: int, fp8: Any) -> Any:
        return megatron_recompute.mlp_saving(model, tokens, tp, sp, act_bytes, fp8)  # [RCM] mlp

    def moe_recompute_saving(
        self, model: ModelSpec, tokens: Any, tp: Any, sp: Any, act_bytes: int, fp8: Any, etp: Any, mode: Any
    ) -> np.ndarray:
        """[RCM] recompute_modules moe_act / moe (megatron_moe.recompute_saving)."""
        return megatron_moe.recompute_saving(model, tokens, tp, sp, act_bytes, fp8, etp, mode)

    def moe_offload_bytes(
        self, model: ModelSpec, tokens: Any, tp: Any, sp: Any, act_bytes: int, fp8: Any, etp: Any, mode: Any
    ) -> np.ndarray:
        """Fine-grained activation offloading of expert_fc1 / moe_act (megatron_moe.offload_bytes)."""
        return megatron_moe.offload_bytes(model, tokens, tp, sp, act_bytes, fp8, etp, mode)

    # Megatron's 1F1B runs fewer micro-batches than stages ([SCH] warm-up min(pp - rank - 1, m))
    # pp_microbatches: Megatron runs fewer micro-batches than stages; tp_overlap_needs_compile: --tp-comm-overlap is
    # Transformer Engine's userbuffers, no torch.compile involved
    # pp_split_needs_megatron: Megatron-Core's own embedding / loss pipeline-split accounting
    replaces_rules: frozenset[str] = frozenset(
        {
            "pp_microbatches",
            "tp_overlap_needs_compile",
            "pp_split_needs_megatron",
            "moe_recompute_needs_megatron",
            "act_offload_needs_megatron",
            "moe_offload_needs_megatron",  # --fine-grained-activation-offloading --offload-modules
            "ep_overlap_needs_megatron",  # --overlap-moe-expert-parallel-comm is Megatron-Core's
            "tp_pp_dp_mapping_needs_megatron",  # --use-tp-pp-dp-mapping is Megatron-Core's rank order
            "mla_recompute_needs_megatron",  # --recompute-modules mla_up_proj is Megatron-Core's
            "norm_recompute_needs_megatron",  # --recompute-modules layernorm is Megatron-Core's
            "mlp_recompute_needs_megatron",  # --recompute-modules mlp is Megatron-Core's
        }
    )
    # train.hidden_dropout (`for_train`): [TMU]'s attention and MLP dropout masks (1 byte per element each) and the
    # embedding's are kept only when it is > 0 ([DROP])
    hidden_dropout: float = 0.1
    compiled_dispatch: bool = False  # base.FrameworkProfile: plan.compile is not torch.compile here
    # Megatron-Core's layer spec: "transformer_engine" (Megatron-LM's default --transformer-impl, what NVIDIA's recipes
    # run) or "local" (the probe's: tests/unit/test_frameworks_megatron_probe.py); decides the QKV view ([TE-QKV])
    transformer_impl: str = "transformer_engine"
    qkv_view: bool | None = None  # None: as the spec keeps it ([TE-QKV]); True / False forces it (False = [TMU])

    # train.cross_entropy_fusion (`for_train`): which loss kernel keeps what for backward ([XE], [TE-XE])
    cross_entropy_fusion: str = "none"
    # train.fp8_delayed_scaling (`for_train`): Transformer Engine's DelayedScaling recipe for plan.fp8=tensorwise, under
    # which the attention projection and the shared expert's fc1 keep quantized input copies ([TE-SOI])
    fp8_delayed_scaling: bool = False

    def for_train(self, train: TrainSpec) -> MegatronProfile:
        return replace(
            self,
            hidden_dropout=float(train.hidden_dropout),
            cross_entropy_fusion=train.cross_entropy_fusion,
            fp8_delayed_scaling=bool(train.fp8_delayed_scaling),
        )

    @property
    def dropout_units(self) -> float:
        return 2.0 if self.hidden_dropout > 0 else 0.0  # [DROP]: p = 0 keeps no mask

    def keeps_qkv_view(self, model: ModelSpec) -> bool:
        """[TE-QKV]: the local spec's saved v view keeps the fused QKV output; Transformer Engine's attention copies
        the views it cannot lay out into contiguous tensors, so nothing keeps it. With q/k norms (model.qk_norm) TE's
        RMSNorm saves a contiguous copy of its q / k input instead: the same 2(q_dim + kv_dim)/h units."""
        if self.qkv_view is not None:
            return self.qkv_view
        return self.transformer_impl == "local" or model.qk_norm

    def model_states(
        self, num_params: Any, zero_stage: Any, shard: Any, train: TrainSpec, offload: Any = 0
    ) -> dict[str, np.ndarray]:
        # [TMU]: params in the compute dtype, main_grad ([GRAD]), fp32 master (none when training in fp32) + Adam
        # states; the distributed optimizer (zero_stage=1) shards master + Adam over the data-parallel group;
        # Megatron-FSDP ([MFSDP] --data-parallel-sharding-strategy optim_grads (2) / optim_grads_params (3))
        # shards main_grad too, and the bf16 params at stage 3
        psi, z, d, c, master, o = state_inputs(num_params, zero_stage, shard, train)
        if train.master_remainders:  # [REM] the fp32 master as its low 16 bits (int16) next to the bf16 params
            master = float(DTYPE_BYTES["bf16"])
        if _params_are_master(train):  # [B16] no master: the optimizer steps the bf16 params themselves
            master = 0.0
        optimizer = psi * (master + o) / np.where(z >= 1, d, 1.0)
        # --optimizer-cpu-offload --optimizer-offload-fraction 1.0 (megatron/core/optimizer/cpu_offloading/README.md):
        # master + Adam states and an fp32 copy of the gradient partition the CPU step reads live on the host;
        # main_grad stays on the device. Params offload does not exist (rule below).
        opt_off = np.asarray(offload) >= 1
        host = np.where(opt_off, optimizer + psi * 4.0 / np.where(z >= 1, d, 1.0), 0.0)
        return {
            "params": psi * c / np.where(z >= 3, d, 1.0),
            "compute_copy": np.zeros_like(psi * z),
            "grads": psi * float(DTYPE_BYTES[train.grad_dtype]) / np.where(z >= 2, d, 1.0),  # main_grad ([GRAD])
            "optimizer": np.where(opt_off, 0.0, optimizer),
            "host": host,
        }

    def root_copy(self, root_params: Any, zero_stage: Any, train: TrainSpec) -> np.ndarray:
        return np.zeros(np.shape(np.asarray(zero_stage)))  # no gathered copy: params are the working weights

    def layer_activations(
        self, model: ModelSpec, seq: Any, mbs: Any, tp: Any, sp: Any, recompute: Any, act_bytes: int
    ) -> dict[str, np.ndarray]:
        s, b, t = (np.asarray(x, dtype=np.float64) for x in (seq, mbs, tp))
        sp, r = np.asarray(sp, dtype=bool), np.asarray(recompute)
        sbh = s * b * model.hidden_size * act_bytes / 2.0
        repl, shard = megatron_layer_units(model, self.dropout_units, self.keeps_qkv_view(model))
        layer = sbh * (repl / np.where(sp, t, 1.0) + shard / t + mla_latent_units(model))
        full = sbh * 2.0 / np.where(sp, t, 1.0)  # full recompute keeps the layer input (sequence-sharded with SP)
        is_full = (r != RECOMPUTE_CODE["none"]) & (r != RECOMPUTE_CODE["selective"])
        return {"saved": np.where(is_full, full, layer), "transient": np.where(is_full, layer, 0.0)}

    def fp8_layer_saving(
        self, model: ModelSpec, tokens: Any, tp: Any, sp: Any, recompute: Any, compiled: Any, fp8: Any, act_bytes: int
    ) -> Any:
        # [TE-LIN], [TE-SOI] (megatron_te.fp8_layer_saving)
        return megatron_te.fp8_layer_saving(model, tokens, tp, sp, recompute, fp8, act_bytes, self.fp8_delayed_scaling)

    def first_stage_activations(self, model: ModelSpec, tokens: Any, tp: Any, sp: Any, act_bytes: int) -> Any:
        # [TMU]: "Input to embedding" 8 bytes per token and the embedding dropout mask sbh (none at p = 0, [DROP]), /t
        mask = model.hidden_size if self.hidden_dropout > 0 else 0.0
        return tokens * (8.0 + mask) / np.asarray(tp, dtype=np.float64)

    def head_activations(self, model: ModelSpec, tokens: Any, tp: Any, sp: Any, act_bytes: int) -> np.ndarray:
        return 4.0 * tokens * model.hidden_size / np.asarray(tp, dtype=np.float64)  # [TMU] output-layer input 4sbh/t

    def deferred_wgrad_buffers(
        self, model: ModelSpec, tokens: Any, m: Any, tp: Any, sp: Any, act_bytes: int, train: TrainSpec
    ) -> Any:
        """train.embedding_wgrad_deferral (its comment cites the Megatron-Core lines): each of min(N, m) micro-batches
        keeps the output layer's input as the ColumnParallelLinear received it (sequence-sharded under SP, h/t per
        token; the whole h without SP) and its gradient (V/t per token), both in the activation dtype; counted over
        the whole step (the buffers fill as the backwards complete, while the stage's in-flight activations stay)."""
        n = np.minimum(float(train.embedding_wgrad_deferral), np.asarray(m, dtype=np.float64))
        t = np.asarray(tp, dtype=np.float64)
        per_token = model.hidden_size / np.where(np.asarray(sp, dtype=bool), t, 1.0) + model.vocab_size / t
        return n * np.asarray(tokens, dtype=np.float64) * per_token * act_bytes

    def loss_without_fp32_logits(self) -> bool:
        return self.cross_entropy_fusion == "te"  # [TE-XE]: fp32 only in registers and 4 floats per row

    def logits(self, model: ModelSpec, tokens: Any, pp: Any, tp: Any, act_bytes: int) -> np.ndarray:
        # [XE] fp32 softmax, 4sbV/t; [TE-XE] the bf16 logits themselves, which hold the gradient after the forward
        per_logit = float(act_bytes) if self.cross_entropy_fusion == "te" else 4.0
        return per_logit * tokens * model.vocab_size / np.asarray(tp, dtype=np.float64)

    def buffers(self, layer_params: Any, zero_stage: Any, shard: Any, train: TrainSpec) -> np.ndarray:
        """DDP / distributed optimizer: none beyond the model states (the grad buffer is main_grad, the distributed
        optimizer gathers into the param buffer). Megatron-FSDP [MFSDP]: per FSDP unit (a transformer layer), the
        unsharded gradient before its reduce-scatter (main_grad dtype), and at stage 3 the gathered parameters of
        two units (`--fsdp-double-buffer`, which NVIDIA's recipes set: the current unit and the prefetched one)."""
        g, c = DTYPE_BYTES[train.grad_dtype], DTYPE_BYTES[train.compute_dtype]
        z = np.asarray(zero_stage)
        lp = np.asarray(layer_params, dtype=np.float64)
        return np.where(z >= 2, lp * g, 0.0) + np.where(z >= 3, 2.0 * lp * c, 0.0)

    def fsdp_gather_delta(self, layer_matmul: Any, zero_stage: Any, fp8: Any, train: TrainSpec) -> np.ndarray:
        return megatron_te.fsdp_gather_delta(layer_matmul, zero_stage, fp8, train)  # [MFSDP]

    def step_temporaries(
        self,
        local_params: Any,
        zero_stage: Any,
        shard: Any,
        arr: dict[str, np.ndarray],
        optimizer_states: Any,
        largest_param: Any = None,
        train: TrainSpec | None = None,
    ) -> np.ndarray:
        """Megatron allocates its step's memory once, not per step: [OPT] Transformer Engine's FusedAdam (Apex's as
        fallback) updates master, moments and params in place with multi_tensor_adam, no per-parameter temporary
        (torch's foreach AdamW allocates one); [BUF] the DDP grad buffer and, with the distributed optimizer, the
        param buffer are contiguous buffers allocated at wrap time, and the grad reduce-scatter and updated-param
        all-gather run in place on them (bench_model's ZeRO1AdamW allocates a flat send and receive buffer every
        step instead). What the step does allocate: [DO] `shard_main_param.grad = shard_model_grad.float()`, an fp32
        copy of the gradients this rank updates when main_grad is not fp32 (grad_reduce_in_fp32=False, as NVIDIA's
        performance recipes run; `.float()` of an fp32 tensor is the tensor itself), Psi/D values with the
        distributed optimizer, all Psi without. [REM] Apex's DistributedFusedAdam (NeMo 1.x) makes no fp32 copy: its
        `_local_step_with_param_remainders` reads the grads shard `_start_bucket_grad_sync` allocated in grad_sync_dtype
        (torch.empty([shard_size], dtype=grads_bucket.dtype), kept until zero_grad; apex @ f3f04924): g x Psi/D."""
        psi, z, d = (np.asarray(x, dtype=np.float64) for x in (local_params, zero_stage, shard))
        updated = psi / np.where(z >= 1, d, 1.0)
        g = float(DTYPE_BYTES[train.grad_dtype])
        copy = 4.0 * updated if g != 4 else np.zeros_like(updated)
        if train.master_remainders or _params_are_master(train):  # [REM], [B16] Apex: the grad_sync_dtype shard
            copy = g * updated
        return reserved.round_large(np.where(np.asarray(optimizer_states) > 0, copy, 0.0))

    def rules(self) -> tuple:
        return megatron_profile_rules(self)  # autotune/predict/frameworks/megatron_profile_rules.py
