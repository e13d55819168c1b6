"""The framework profile seam: how one training framework spends memory and which layouts it can run.

`autotune.predict.memory.memory_arrays` and `autotune.layouts.rules.rejections` call a profile's hooks instead of deciding the
accounting themselves; `train.framework` names the profile (docs/frameworks.md). `FrameworkProfile` is the interface
only: every accounting hook is abstract, and each profile (bench_model.py, torchtitan.py, megatron.py, nanotron.py,
deepspeed.py) implements all of them, citing its framework's source; where a framework spends memory as bench_model
does, its profile says so by delegating to bench_model.py's function explicitly.

All hooks are vectorised over candidate arrays (numpy broadcasting), like the rest of the estimator.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from autotune.core.model import ModelSpec
from autotune.core.rules import Rule
from autotune.core.types import DTYPE_BYTES, TrainSpec
from autotune.predict import reserved
from autotune.predict.frameworks.shared_terms import (  # noqa: F401  (re-exported: the profiles import them here)
    fsdp_pipeline_held,
    fused_adamw_step_temporaries,
    state_inputs,
    torch_pipeline_buffers,
)
from autotune.predict.schedule import layers_of_rank


@dataclass(frozen=True)
class Overlaps:
    """Which data-parallel communication a framework hides behind compute (autotune.predict.perf prices the hidden
    part with cluster.dp_overlap, the exposed part in full)."""

    grad_reduce: bool  # DDP / distributed-optimizer gradient buckets reduced while backward runs
    param_gather: bool  # ZeRO-1 / distributed-optimizer parameter all-gather behind the next forward, layer by layer
    fsdp_prefetch: bool  # ZeRO-2/3 (FSDP): next layer's all-gather and this layer's reduce-scatter behind compute
    zero1_reduce_scatter: bool  # ZeRO-1 reduces gradients with a reduce-scatter (else an all-reduce, then gathers)
    # pipeline p2p sends beside a model chunk's compute under an interleaved schedule (autotune/predict/pp_overlap.py)
    interleaved_p2p: bool = False


@dataclass(frozen=True)
class FrameworkProfile(ABC):
    """The hooks a framework profile implements (all vectorised over candidate arrays)."""

    name: str
    # generic rules of autotune.layouts.rules that are this framework's limits and that the profile replaces by its
    # own (e.g. torch's 1F1B needs m >= pp; Megatron's runs fewer micro-batches)
    replaces_rules: frozenset[str] = frozenset()
    # plan.compile runs the blocks as torch.compile (Inductor) graphs: the host issues the generated code's kernel
    # launches, not one dispatch per ATen op (autotune/predict/host.py COMPILED_DENSE_OPS). False where plan.compile
    # stands for the framework's own fused kernels under eager modules (Megatron-Core) or for nothing (nanotron)
    compiled_dispatch: bool = True

    def for_train(self, train: TrainSpec) -> FrameworkProfile:
        """This profile with the settings it reads from `train` (memory_arrays calls it first). Default: itself; the
        megatron profile reads train.hidden_dropout."""
        return self

    # ---- communication overlap (autotune.predict.perf) -------------------------------------------------------------
    @abstractmethod
    def overlaps(self) -> Overlaps:
        """The data-parallel overlaps this framework performs, each cited to its source."""

    def expert_grads_overlapped(self) -> bool:
        """Whether the routed experts' gradients (ZeRO 0/1) are reduced over their expert-data-parallel group in
        buckets behind the backward like the dense ones (perf_dp.expert_ddp_s). Default: as the dense gradients
        (Megatron's DDP: separate expert bucket groups, same overlap)."""
        return self.overlaps().grad_reduce

    def grad_reduce_collectives(self, layers: Any) -> np.ndarray:
        """How many gradient all-reduces DDP / ZeRO-1 issues per step on a rank holding `layers` transformer blocks
        (perf_dp.ddp_s pays the latency term once per collective; the bytes are the same). Default: one bucketed
        all-reduce of the whole gradient (the accounting of a framework whose buckets are larger than the rank's
        gradient; not checked against each framework's bucket size)."""
        return np.ones(np.shape(np.asarray(layers)))

    def fsdp_collectives_per_block(self, model: ModelSpec, layer_params: Any) -> tuple[Any, Any]:
        """(all-gathers per pass, reduce-scatters) one transformer block of `layer_params` elements (this rank's
        unsharded block) costs at ZeRO-2/3 (perf_dp.fsdp_s pays NCCL's ring latency once per collective, the bytes
        once). Default: FSDP2 with one unit per block (torchtitan, bench_model: fully_shard on every block): its
        parameters in one all-gather (foreach_all_gather into one flat buffer) and its gradients in one
        reduce-scatter (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py)."""
        return 1.0, 1.0

    def recompute_regathers(self) -> bool:
        """Whether under full recompute ZeRO-3 gathers each block a second time in backward (the recomputed forward
        gathers and releases it, then the backward gathers it again; perf_dp.fsdp_s). Default: no (FSDP2: the
        pre-backward hook gathers the block and its recomputed forward runs on the gathered parameters)."""
        return False

    def pipeline_defers_grad_reduce(self) -> bool:
        """Whether under pp > 1 the framework's ZeRO-2/3 (FSDP) reduce-scatters each block's gradient once per step,
        after the last micro-batch's backward, instead of after every micro-batch (perf_dp.fsdp_s). Default: no."""
        return False

    def moe_host_sync(self, ep: Any, balanced: bool, capacity: bool) -> np.ndarray:
        """Whether an MoE layer's forward reads device values on the host (a device-to-host sync the host cannot run
        ahead of: autotune/predict/host.py), per candidate expert-parallel degree `ep`, under balanced routing and
        a capacity factor (token dropping). Default: yes (a dropless dispatch sizes its buffers, all-to-all splits
        and grouped GEMM groups from tokens-per-expert counts computed on the device)."""
        return np.ones(np.shape(np.asarray(ep)), dtype=bool)

    def unfused_scaled_rope(self) -> bool:
        """Whether this framework runs RoPE unfused when the model's YaRN attention factor is not 1
        (autotune/predict/rope.py). Default: no (torch.compile / Inductor fuses the scaled rotation like any other)."""
        return False

    def selective_reruns_elementwise(self) -> bool:
        """Whether plan.recompute=selective re-runs the block's elementwise ops in backward (the speed model's extra
        memory-bound pass). Default: yes (bench_model's policy saves matmul and SDPA outputs, recomputes the rest)."""
        return True

    def loss_kernel(self, arr: dict[str, np.ndarray]) -> np.ndarray:
        """Per candidate, the index in perf_terms.LOSS_KERNELS of the loss kernel this framework runs over the LM
        head's logits (TrainSpec.loss_kernel overrides it). Default: unfused (F.cross_entropy on the fp32 logits)."""
        return np.zeros(np.shape(arr["tp"]), dtype=np.int64)

    def compiled_selective_rerun_bytes(self, model: Any, c: int, tp: Any) -> np.ndarray | None:
        """HBM bytes per token and layer that plan.recompute=selective re-runs in backward under plan.compile, where
        the framework's compiled selective re-runs one region rather than the block's elementwise pass; None = the
        elementwise pass as eager (selective_reruns_elementwise). Default: None."""
        return None

    def unfused_glu_clamp(self) -> bool:
        """Whether this framework clamps the experts' gate outside its fused activation kernel (autotune/predict/
        glu_clamp.py). Default: no (a compiled activation fuses the clamp)."""
        return False

    @abstractmethod
    def attention_kernel(self) -> str:
        """The causal attention kernel this framework runs on CUDA: "fa3" (FlashAttention-3 or cuDNN fused
        attention, the family's best: cluster.attention_efficiency) or "fa2" (FlashAttention-2 class, which Hopper
        runs at cluster.fa2_attention_ratio of it; attention_terms.attention_s)."""

    def context_parallel_attention(self) -> str:
        """How this framework's context parallelism runs attention (autotune/predict/ring_attention.py):
        "torch_ring" (torch's ring attention, torch/distributed/tensor/experimental/_attention.py: per-step SDPA, fp32
        merges and gradient accumulators, asynchronous K/V all-gather and dK/dV sends), "allgather_mask"
        (bench_model: all-gathered K/V and one SDPA with an explicit mask), or "p2p" (default: the K/V exchanges
        priced as 3 (cp - 1) exposed transfers, perf.py)."""
        return "p2p"

    def sdpa_repeats_kv(self) -> bool:
        """Whether K and V enter SDPA repeated to the query heads (the model calls repeat_kv before SDPA) rather than
        at the KV heads (enable_gqa): the width ring attention moves and accumulates. Default: no."""
        return False

    @abstractmethod
    def fp8_casts(self) -> str:
        """How this framework casts the block linears' operands under plan.fp8: "torchao" (each linear casts its
        operands itself, twice each: perf_terms.fp8_cast_bytes) or "te" (Transformer Engine's fused
        cast-transposes, weights cached across micro-batches: perf_terms.te_fp8_cast_bytes)."""

    # ---- model states -------------------------------------------------------------------------------------------
    @abstractmethod
    def model_states(
        self, num_params: Any, zero_stage: Any, shard: Any, train: TrainSpec, offload: Any = 0
    ) -> dict[str, np.ndarray]:
        """Bytes of params, compute_copy, grads and optimizer (master included) on the device and the offloaded
        states on the host (`host`) for `num_params` parameters on one rank at ZeRO/FSDP/distributed-optimizer stage
        `zero_stage`, sharded over `shard` (= dp*cp) ranks; `offload` is the plan.offload code (0 none, 1 optimizer,
        2 params)."""

    def stored_weight_bytes(self, fp8: Any, train: TrainSpec, cluster: Any) -> np.ndarray:
        """Bytes per element of the block linears' stored weights (`params` counts them at the compute dtype's c) for
        plan.fp8 codes `fp8` on `cluster`. Default: c, the weights are not kept quantized (the megatron profile's
        differ under train.fp8_param_gather)."""
        return np.full(np.shape(np.asarray(fp8)), float(DTYPE_BYTES[train.compute_dtype]))

    def gather_weight_bytes(self, fp8: Any, train: TrainSpec) -> np.ndarray:
        """Bytes per block-linear weight the ZeRO-1 / distributed-optimizer parameter all-gather moves
        (autotune/predict/perf_dp.py `ddp_s`). Default: the param dtype's."""
        return np.full(np.shape(np.asarray(fp8)), float(DTYPE_BYTES[train.param_dtype]))

    def fsdp_gather_delta(self, layer_matmul: Any, zero_stage: Any, fp8: Any, train: TrainSpec) -> np.ndarray:
        """Bytes the ZeRO-3 / FSDP gathered units (`buffers`, counted at the compute dtype) differ by when the
        framework gathers the block linears' weights quantized; `layer_matmul` = one layer's local dense linear
        weights. Default: none (the megatron profile's differ under train.fp8_param_gather with Megatron-FSDP)."""
        return np.zeros(np.broadcast(np.asarray(layer_matmul), np.asarray(zero_stage), np.asarray(fp8)).shape)

    @abstractmethod
    def root_copy(self, root_params: Any, zero_stage: Any, train: TrainSpec) -> np.ndarray:
        """Extra bytes of the root unit (embedding, final norm, head) kept gathered all step."""

    # ---- activations --------------------------------------------------------------------------------------------
    @abstractmethod
    def layer_activations(
        self, model: ModelSpec, seq: Any, mbs: Any, tp: Any, sp: Any, recompute: Any, act_bytes: int
    ) -> dict[str, np.ndarray]:
        """One layer's saved activation bytes per micro-batch (`saved`) and the recompute transient (`transient`);
        `seq` is tokens per rank (seq_len/cp), `recompute` the integer code, `sp` sequence parallel."""

    def compiled_layer_activations(
        self, model: ModelSpec, seq: Any, mbs: Any, tp: Any, sp: Any, recompute: Any, act_bytes: int
    ) -> dict[str, np.ndarray]:
        """`layer_activations` of a layer under plan.compile. Default: unchanged (a framework that does not compile
        per block, or whose compiled saving is unmeasured); bench_model overrides it."""
        return self.layer_activations(model, seq, mbs, tp, sp, recompute, act_bytes)

    def fp8_layer_saving(
        self, model: ModelSpec, tokens: Any, tp: Any, sp: Any, recompute: Any, compiled: Any, fp8: Any, act_bytes: int
    ) -> Any:
        """Bytes one layer saves LESS per micro-batch when its linears run in FP8 (`fp8` the plan.fp8 code,
        `tokens` = seq/cp x mbs). Default: nothing (a framework whose FP8 recipe keeps the high-precision inputs, or
        whose FP8 memory is modelled in its activation terms, e.g. Megatron's Transformer Engine)."""
        return 0.0

    def context_parallel_transient(self, model: ModelSpec, tokens: Any, tp: Any, cp: Any, act_bytes: int) -> Any:
        """Bytes one layer's attention holds beyond a plain SDPA call while it runs under context parallelism (cp > 1;
        `tokens` = seq/cp x mbs): the ring's exchanged K/V and its accumulators, alive inside one layer only, so a
        transient. Default: none (a framework whose CP buffers are not modelled)."""
        return 0.0

    def context_parallel_saved(self, model: ModelSpec, seq: Any, mbs: Any, tp: Any, cp: Any, act_bytes: int) -> Any:
        """Bytes one layer keeps for backward under context parallelism (cp > 1; `seq` = seq_len/cp tokens per
        sequence) beyond `layer_activations`' count at those tokens: a CP whose attention saves gathered K/V or an
        explicit mask per layer. Default: none (a framework whose CP keeps only the local K/V)."""
        return 0.0

    def context_parallel_buffers(self, seq: Any, cp: Any) -> Any:
        """Bytes a rank keeps once for the whole step under context parallelism (a cached mask, ...). Default: none."""
        return 0.0

    @abstractmethod
    def first_stage_activations(self, model: ModelSpec, tokens: Any, tp: Any, sp: Any, act_bytes: int) -> Any:
        """Bytes pipeline rank 0 keeps per in-flight micro-batch outside the layers (embedding output, ...)."""

    @abstractmethod
    def head_activations(self, model: ModelSpec, tokens: Any, tp: Any, sp: Any, act_bytes: int) -> np.ndarray:
        """Last stage, one micro-batch: what the final norm and the head keep."""

    @abstractmethod
    def logits(self, model: ModelSpec, tokens: Any, pp: Any, tp: Any, act_bytes: int) -> np.ndarray:
        """Loss memory on the last stage (bytes per logit times the logits alive at the loss's peak)."""

    def pipeline_outputs(self, model: ModelSpec, tokens: Any, m: Any, tp: Any, act_bytes: int) -> Any:
        """Bytes the last pipeline stage (pp > 1) keeps of its `m` micro-batches' outputs until the step ends
        (`tokens` per micro-batch). Default: none."""
        return 0.0

    def deferred_wgrad_buffers(
        self, model: ModelSpec, tokens: Any, m: Any, tp: Any, sp: Any, act_bytes: int, train: TrainSpec
    ) -> Any:
        """Bytes the last pipeline stage (pp > 1) keeps for output-layer weight gradients deferred to the pipeline
        flush (train.embedding_wgrad_deferral), `m` micro-batches a step of `tokens` each. Default: none."""
        return 0.0

    def pipeline_stage_buffers(
        self, hidden: Any, m: Any, inflight: Any, rank: Any, pp: Any, vpp: Any, recompute: Any
    ) -> Any:
        """Bytes the pipeline engine itself keeps on pipeline rank `rank` (pp > 1) beyond the layers' saved tensors,
        `hidden` bytes being one micro-batch's inter-stage activation. Default: none (see `torch_pipeline_buffers`)."""
        return 0.0

    def compiled_logits(self, model: ModelSpec, tokens: Any, pp: Any, tp: Any, act_bytes: int) -> np.ndarray:
        """`logits` under plan.compile. Default: unchanged (a framework that does not compile its loss, or whose
        compiled loss is modelled in `logits`); torchtitan overrides it."""
        return self.logits(model, tokens, pp, tp, act_bytes)

    def loss_without_fp32_logits(self) -> bool:
        """Whether the loss, compiled or not, never allocates an fp32 block of the logits' size (no cached fp32 logits
        block in autotune/predict/reserved.py). Default: no; megatron with train.cross_entropy_fusion="te"."""
        return False

    def compiled_loss_has_fp32_block(self) -> bool:
        """Whether the loss under plan.compile still allocates the fp32 logits block the caching-allocator model
        (autotune/predict/reserved.py) leaves cached. Default: yes. torchtitan keeps the default although its compiled
        loss materialises no fp32 logits (CPU measurement, [CLOSS]): with the block its published compiled runs' peaks
        (torchtitan pages, torchao B200 rows; benchmarks/published_fit.py) are within 4.4% median, without it 5.2%
        and the Scout rows 26% low: on CUDA a segment of that size stays reserved for another reason, not identified.
        Since the Scout rows' collapsed router is priced (train.moe_routing, h-mem7): without the block every compiled-
        loss row is low, 4.3-5.7% (torchao 8B), 6.4-7.6% (Scout), 6.8-7.9% (torchtitan pages' 2025-06 rows)."""
        return True

    @abstractmethod
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
        """What one MoE layer saves per micro-batch beyond a dense layer (routed tokens, router, experts' SwiGLU;
        autotune/predict/moe.py); `fp8` the plan.fp8 code, `mbs` the micro-batch size (sequences)."""

    def mla_recompute_saving(self, model: ModelSpec, tokens: Any, tp: Any, act_bytes: int) -> Any:
        """Bytes per layer and micro-batch that plan.mla_recompute (Megatron's mla_up_proj) does not keep. Default:
        none (only the megatron profile has the module; rule mla_recompute_needs_megatron refuses it elsewhere)."""
        return 0.0

    def norm_recompute_saving(
        self, model: ModelSpec, tokens: Any, tp: Any, sp: Any, act_bytes: int, fp8: Any
    ) -> tuple[Any, Any]:
        """(bytes per layer, bytes per MoE layer) and micro-batch that plan.norm_recompute (Megatron's layernorm
        module) does not keep: the input norm's output where it is a module of its own (every layer), the pre-MLP
        norm's (MoE layers). Default: none (rule norm_recompute_needs_megatron refuses it elsewhere)."""
        return 0.0, 0.0

    def mlp_recompute_saving(self, model: ModelSpec, tokens: Any, tp: Any, sp: Any, act_bytes: int, fp8: Any) -> Any:
        """Bytes per dense layer and micro-batch that plan.mlp_recompute (Megatron's mlp module) does not keep, and
        that come back for one layer in its backward. Default: none (rule mlp_recompute_needs_megatron)."""
        return 0.0

    def moe_recompute_saving(
        self, model: ModelSpec, tokens: Any, tp: Any, sp: Any, act_bytes: int, fp8: Any, etp: Any, mode: Any
    ) -> np.ndarray:
        """Bytes per MoE layer and micro-batch that plan.moe_recompute (code `mode`: MOE_RECOMPUTE_MODES) does not
        keep, out of `moe_layer_activations`' term. Default: none (only Megatron has the modules; rule
        moe_recompute_needs_megatron refuses it elsewhere)."""
        return np.zeros(np.broadcast(np.asarray(tokens), np.asarray(mode)).shape)

    def moe_offload_bytes(
        self, model: ModelSpec, tokens: Any, tp: Any, sp: Any, act_bytes: int, fp8: Any, etp: Any, mode: Any
    ) -> np.ndarray:
        """Bytes per MoE layer and micro-batch that plan.moe_offload (code `mode`: MOE_OFFLOAD_MODES) moves to the host
        between the layer's forward and its backward, out of `moe_layer_activations`' term. Default: none (only
        Megatron has fine-grained activation offloading; rule moe_offload_needs_megatron refuses it elsewhere)."""
        return np.zeros(np.broadcast(np.asarray(tokens), np.asarray(mode)).shape)

    def expert_states(
        self, num_params: Any, zero_stage: Any, edp: Any, dense_shard: Any, train: TrainSpec, offload: Any = 0
    ) -> dict[str, np.ndarray]:
        """The routed experts' states on one rank, sharded over their expert-data-parallel group `edp`
        (`dense_shard` = the dense states' group, dp*cp). Default: as the dense states over edp."""
        return self.model_states(num_params, zero_stage, edp, train, offload)

    def moe_tp_replicated_params(self, model: ModelSpec) -> float:
        """Parameters of one MoE layer kept whole on every tp rank (beyond the routed experts). Default: none (the
        router and shared expert counted with the layer's tp-split matrices)."""
        return 0.0

    def expert_cast_bytes(self, num_params: Any, zero_stage: Any, train: TrainSpec) -> Any:
        """Bytes per in-flight micro-batch of the experts' weights cast to the compute dtype and kept for backward
        outside any FSDP wrapper (bench_model at ZeRO 0/1). Default: none."""
        return 0.0

    def pipeline_held(self, stage_params: Any, zero_stage: Any, shard: Any, pp: Any, train: TrainSpec) -> dict:
        """Bytes a pipeline rank holds beyond `model_states` because its data-parallel wrapper runs once per micro-batch
        under the pipeline schedule (`stage_params`: the rank's local parameters): `compute_copy`, gathered parameters
        kept from the first micro-batch's forward to the last one's backward, and `grads`, gradients accumulated
        unreduced until the last micro-batch's backward (held through every phase of the peak). Default: none."""
        zero = np.zeros(np.broadcast(np.asarray(stage_params), np.asarray(zero_stage), np.asarray(pp)).shape)
        return {"compute_copy": zero, "grads": zero}

    # ---- communication buffers ----------------------------------------------------------------------------------
    def buffer_unit_params(self, layer_params: Any, expert_params: Any, zero_stage: Any) -> Any:
        """The parameters of one layer that the data-parallel wrapper's per-layer buffers (`buffers`) cover, of a layer
        holding `expert_params` routed-expert parameters. Default: all of them."""
        return layer_params

    @abstractmethod
    def buffers(self, layer_params: Any, zero_stage: Any, shard: Any, train: TrainSpec) -> np.ndarray:
        """Communication and gathered-parameter buffers of the data-parallel wrapper."""

    # ---- the optimizer step's transient blocks (the reserved peak: autotune/predict/reserved.py) ------------------
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
        """Bytes of the large blocks the optimizer step allocates and frees after backward; the caching allocator keeps
        their segments reserved (autotune/predict/reserved.py). Default: bench_model's pattern (foreach AdamW's fp32
        sqrt temporary over the updated parameters, ZeRO1AdamW's bucketed gather buffers at ZeRO-1; `largest_param`
        the largest local parameter, elements); a framework whose step allocates otherwise overrides it."""
        zero1 = reserved.zero1_gather(arr)
        return reserved.step_temporaries(local_params, zero_stage, shard, zero1, optimizer_states, largest_param)

    def grads_made_in_backward(self) -> bool:
        """Whether the gradients (`grads`) are allocated during the step's first backward and held to its end, rather
        than living in a buffer allocated before the first step: the caching allocator then keeps part of the
        activation segments they land in unusable (autotune/predict/reserved.py GRADS_CACHED). Default: no
        (Megatron's DDP grad buffer, nanotron's fp32 accumulator, both allocated at wrap time). FSDP2's frameworks
        (bench_model, torchtitan) say yes. DeepSpeed keeps the default: not read closely enough to say."""
        return False

    # ---- the peak ---------------------------------------------------------------------------------------------
    @abstractmethod
    def allocated(
        self, params: Any, grads: Any, optimizer: Any, activations: Any, logits: Any, buffers: Any, transient: Any
    ) -> np.ndarray:
        """The allocated peak from the terms (`activations` includes the recompute `transient`)."""

    def backward_only_grads(self, num_params: Any, train: TrainSpec) -> Any:
        """Bytes of `model_states`' grads that exist only from a micro-batch's backward to its end (freed after every
        backward, so never at the forward's end): the allocated peak is then the larger of the forward's end and a
        backward's end (`_rank_memory`). Default: none (every profile's grads live all step)."""
        return 0.0

    # ---- pipeline -----------------------------------------------------------------------------------------------
    def pipeline_layers(self, model: ModelSpec, pp: Any, vpp: Any, rank: Any, embed: Any = False, loss: Any = False):
        """Layers pipeline rank `rank` holds: bench_model's split, with Megatron's embedding / loss accounting where
        the plan asks for it (autotune/predict/schedule.py `layers_of_rank`). A framework that splits otherwise
        (nanotron's compute-balanced walk) overrides it."""
        return layers_of_rank(model.num_layers, pp, vpp, rank, embed, loss)

    @abstractmethod
    def inflight(self, pp: Any, vpp: Any, m: Any, schedule: Any, rank: Any) -> np.ndarray:
        """Micro-batches whose activations pipeline rank `rank` holds at its peak (units of all its layers)."""

    def last_stage_inflight(self, pp: Any, m: Any, schedule: Any) -> np.ndarray:
        """Micro-batches whose head activations and loss tensors the last pipeline rank holds at once. One for every
        schedule that runs a micro-batch's backward right after its forward on the last stage; a profile whose engine
        runs all forwards first (nanotron's afab) overrides it."""
        return np.ones(np.broadcast(np.asarray(pp), np.asarray(m), np.asarray(schedule)).shape)

    # ---- feasibility --------------------------------------------------------------------------------------------
    def rules(self) -> tuple[Rule, ...]:
        """Layouts this framework cannot run, beyond autotune.layouts.rules' generic rules; build each with `rule`.
        None by default."""
        return ()

    def rule(self, rule_id: str, violated: Callable[..., Any], message: Callable[..., str]) -> Rule:
        """A rule (autotune/core/rules.py) whose stable id is `<name>_<rule_id>` and whose message starts with
        `<name>: `."""
        return Rule(f"{self.name}_{rule_id}", violated, message, prefix=f"{self.name}: ")
