"""bench_model's profile: the memory accounting of autotune's own trainer (bench_model/), derived term by term.

Model states (per rank; p, c, g, o, m = bytes of param, compute, grad, one optimizer state, master), as
bench_model/parallel/data_parallel.py applies them (FSDP2 per block + a root unit, MixedPrecisionPolicy(param_dtype=c,
reduce_dtype=fp32)) when train.master_dtype is null:
    stage 0 (HSDP, shard=1)   params Psi*p, grads Psi*g, optimizer 2*Psi*o
    stage 1                   as 0, but AdamW state and an fp32 slice of the params it updates are /D (ZeRO1AdamW)
    stage 2 (reshard_after_forward=False) params and grads /D too
    stage 3 (reshard_after_forward=True)  the same; two gathered blocks (current + prefetch) -> buffers
  compute copy (`compute_copy`, a separate term so it can be reconciled with measured peaks): FSDP2's gathered/cast
    params of every block live from forward to backward in stages 0-2 (Psi*c; none with one rank and no cast: no
    wrapper); in stage 3 only the root unit (embedding, final norm, head) stays gathered all step.
  paper accounting (train.master_dtype set; Megatron/DeepSpeed/ZeRO): params are the working copy (full until stage 3),
    master + optimizer states sharded from stage 1, grads from stage 2. With bf16 params/grads and fp32 master + Adam
    this is Rajbhandari et al. 2020 Sec 5 / Table 1: (2+2+K)*Psi, K=12; stage 1: 4Psi + 12Psi/D; stage 2:
    2Psi + 14Psi/D; stage 3: 16Psi/D.

Activations of the Llama block as bench_model/model.py implements it (RMSNorm in fp32 then cast back, wq/wk/wv with
GQA, rotate-half RoPE, F.scaled_dot_product_attention(is_causal=True, enable_gqa=True) so K/V stay at num_kv_heads,
wo, SwiGLU w2(silu(w1 x) * w3 x)), derived by the method of Korthikanti et al. 2022 ("Reducing Activation
Recomputation", Sec 4.1 / Table 2): count what autograd saves, per token (bytes; c = compute dtype bytes):
  each RMSNorm: its fp32 input x.float() (4h, kept by pow), the rsqrt per token (4 bytes) and the normalised y cast
             back (c*h, kept by `* weight`). Two norms: 2((4 + c)h + 4).
  norm outputs: the shared input of wq/wk/wv and of w1/w3 (c*h each): 2ch.
  attention: SDPA keeps q after RoPE (h), k after RoPE (k), v (k), its output (h) and logsumexp (4a bytes, fp32);
             the output is laid out (B, S, heads, D), so wo's input (its transpose-reshape) is a view of the same
             storage. RoPE multiplies by constant cos/sin tables, so pre-RoPE q/k are not kept; the tables cast to
             the compute dtype are kept per call (4*s*head_dim*c per layer, none in fp32). No s^2 scores.
  MLP:       w1 out (f, for silu'), silu out and w3 out (2f, for the product), product = w2 input (f).
  total: 2((4 + c)h + 4) + 2ch + c(2h + 2k + 4f) + 4a per token (+ the RoPE tables); a GPT block gives 34h + 5as (Korthikanti Table 2).
  TP divides the attention and MLP tensors (2h + 2k + 4f, and the heads of the logsumexp) by t. Sequence parallel
  (DTensor) divides the two norms' tensors by t, but autograd saves the all-gathered input of the column-parallel
  linears at full sequence length, so the 2ch of norm outputs stays (unlike Megatron SP, where Korthikanti's 34/t
  applies to everything).
  selective (bench_model/parallel/recompute.py: region checkpoints around the two RMSNorms and SwiGLU's gating):
             each norm keeps only its input (ch, /t with SP) instead of (4 + c)h + 4; SwiGLU keeps the w1 and w3
             outputs and drops the silu output (3cf/t instead of 4cf/t); everything else is as for none. Total
             2ch (/t with SP) + 2ch + c(2h + 2k + 3f)/t + 4a per token (+ the RoPE tables). Transient: the larger
             recomputed region of one layer during its backward, a norm's internals (fp32 copy unless c = 4,
             rsqrt, output) or the silu output (cf/t). Under torch.compile (apply_selective_compiled) the
             partitioner already recomputes the norms and the silu output for none (compiled_savings_per_token);
             selective's checkpoint region around SwiGLU also drops the product silu(w1 x) * w3 x (w2's input):
             compiled none - cf/t per token (measured: tests/unit/test_recompute.py, bf16, 20,480 bytes on
             64 tokens at f = 160, Inductor and aot_eager_decomp_partition alike).
  full:      layer input only (ch, /t with SP), plus, once, one whole layer's activations during its recompute.
  CP divides s by cp. GPT blocks use Korthikanti Table 2 literally: sbh(10 + 24/t + 5as/(ht)), SP: sbh(34/t + 5as/(ht)),
  selective drops 5as/(ht), full 2sbh (2sbh/t with SP); these are for 2-byte activations and are scaled by c/2.
Logits: bench_model computes the loss on logits.float(), last stage. With pp=1 the loss is chunked (bench_model/loss.py),
  so only one chunk's logits exist at a time: n = min(b*s, LOSS_CHUNK_TOKENS = 1024). At tp=1 the fused loss
  computes each chunk's gradient in forward, in the fp32 logits' storage, plus the compute-dtype copy its GEMMs read:
  (4 + c) bytes per logit (4 in fp32). At tp>1 the checkpointed chunk under loss_parallel keeps the fp32
  log-softmax, its fp32 gradient and the compute-dtype gradient into the head in its backward: (8 + c) per element
  of n*V/t. The pipeline's loss_fn sees the whole micro-batch's logits: n = b*s, (8 + c).
Buffers (when FSDP2 wraps the model): one block's unsharded gradient in compute dtype plus its fp32 reduce buffer;
  stage 3 adds two gathered blocks in compute dtype. Runtime overhead (CUDA context, NCCL buffers) is
  cluster.runtime_overhead_bytes; reserved = the caching allocator's reserved peak (autotune/predict/reserved.py: allocated plus
  the cached segments of large transient blocks, times 1 + cluster.allocator_fragmentation) + overhead.
CPU offload (plan.offload; `model_state_arrays`' `host`, the `mem_host_bytes` column): host bytes per GPU next to the
  device terms, which drop what moved. U = the parameters this rank updates (Psi/D from stage 1).
  optimizer (ZeRO-Offload, Ren et al. 2021 Sec 4.1: fp32 master + Adam states and fp32 gradients on the CPU, the
    step there): host U*(4 + o + 4) = 16U for Adam; device optimizer 0. bench_model keeps its fp32 params and grads
    on the device (they are the FSDP2 shards it computes with); paper accounting (DeepSpeed offload_optimizer) keeps
    only the working params there: DeepSpeed's estimate_zero2_model_states_mem_needs(cpu_offload=True) GPU = 2*Psi,
    estimate_zero3 (offload_optimizer only) = 4*largest layer + 2*Psi/N, CPU 16*Psi per node of N GPUs
    (docs/code-docs/source/memory.rst; tests/unit/test_offload.py checks the rows).
  params (FSDP2 CPUOffloadPolicy; DeepSpeed ZeRO-3 offload_param + offload_optimizer): sharded params, grads and
    optimizer state on the host, (p + g + o)*Psi/D = 16*Psi/D (paper accounting 2 + 4 + 12 = 18*Psi/D, DeepSpeed's
    `18 * total_params` per node); the device keeps the gathered blocks (buffers, compute copy), DeepSpeed's
    4*largest layer. Host temporaries of the CPU step and the fp32 shard copied to the device before each block's
    all-gather (p*Psi_layer/D) are not modelled; DeepSpeed's estimator also counts a full fp32 model per process at
    load time (max(4*gpus_per_node, 16|18)*Psi), which is a start-up peak, not the training step's.
CP (bench_model/parallel/context_parallel.py, exact attention on all-gathered K/V with an explicit mask; [CPMEM] in
  bench_model_activations.py): each layer saves the gathered K/V and the mask cast to the compute dtype; the gathered
  dK/dV of the SDPA backward are a per-layer transient; the bool mask is cached once per rank.
Not modelled: transient bf16 gradients of one layer. Optimizer-step temporaries are not in
the allocated peak; they set the reserved one (FrameworkProfile.step_temporaries, autotune/predict/reserved.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from autotune.core.model import ModelSpec
from autotune.core.plan_arrays import FP8_CODE, OFFLOAD_CODE, RECOMPUTE_CODE
from autotune.core.types import DTYPE_BYTES, TrainSpec
from autotune.predict import moe
from autotune.predict.frameworks.base import FrameworkProfile, Overlaps, fsdp_pipeline_held, torch_pipeline_buffers
from autotune.predict.frameworks.bench_model_activations import (  # noqa: F401  (re-exported)
    compiled_savings_per_token,
    context_parallel_mask_bytes,
    context_parallel_saved_bytes,
    context_parallel_transient_bytes,
    fp8_compiled_saving_per_token,
    layer_activation_bytes,
    mla_attention_bytes,
)
from autotune.predict.perf_terms import LOSS_KERNELS
from autotune.predict.schedule import inflight_microbatches

_NONE, _SEL = RECOMPUTE_CODE["none"], RECOMPUTE_CODE["selective"]  # anything else is full recompute
# bench_model.loss.LOSS_CHUNK_TOKENS (tests/unit/test_memory.py checks they agree)
LOSS_CHUNK_TOKENS = 1024
_OFF_OPT, _OFF_PAR = OFFLOAD_CODE["optimizer"], OFFLOAD_CODE["params"]
HOST_MASTER_BYTES = 4  # the host optimizer's fp32 master copy (ZeRO-Offload, Ren et al. 2021 Sec 4.1)
HOST_GRAD_BYTES = 4  # fp32 gradients on the host, the CPU Adam's input (ibid.; DeepSpeed's 16 bytes/param on CPU)


def _dtype_bytes(train: TrainSpec) -> dict[str, int]:
    return {
        "p": DTYPE_BYTES[train.param_dtype],
        "c": DTYPE_BYTES[train.compute_dtype],
        "g": DTYPE_BYTES[train.grad_dtype],
        "o": DTYPE_BYTES[train.optimizer_dtype] * train.optimizer_states,
        "m": DTYPE_BYTES[train.master_dtype] if train.master_dtype else 0,
    }


def model_state_arrays(
    num_params: Any, zero_stage: Any, shard: Any, train: TrainSpec, offload: Any = 0
) -> dict[str, np.ndarray]:
    """Bytes of params, compute copy, grads and optimizer (incl. master) on the device and the offloaded states on
    the host (`host`) for `num_params` parameters on a rank, ZeRO stage `zero_stage`, sharding group size `shard`
    (= dp*cp), `offload` the plan.offload code (0 none, 1 optimizer, 2 params; `OFFLOAD_CODE`). Takes raw counts so
    published tables that give only a parameter count (ZeRO paper, accelerate, DeepSpeed's estimators) can be checked
    with the same code the planner uses."""
    psi = np.asarray(num_params, dtype=np.float64)
    z = np.asarray(zero_stage)
    d = np.asarray(shard, dtype=np.float64)
    off = np.asarray(offload)
    opt_off, par_off = off >= _OFF_OPT, off >= _OFF_PAR
    b = _dtype_bytes(train)
    updated = psi / np.where(z >= 1, d, 1.0)  # the parameters this rank's optimizer updates
    if train.master_dtype is not None:  # paper accounting: working params full until stage 3, master with optimizer
        params = psi * b["p"] / np.where(z >= 3, d, 1.0)
        grads = psi * b["g"] / np.where(z >= 2, d, 1.0)
        optimizer = updated * (b["o"] + b["m"])
        copy = np.where((z < 3) & (b["c"] != b["p"]), psi * b["c"], 0.0)
        # DeepSpeed offload_optimizer: master + Adam states and the reduced gradient partition (fp32) on the host,
        # nothing of them on the device; offload_param (ZeRO-3) moves the param partition too (module docstring)
        host = np.where(opt_off, updated * (b["o"] + b["m"] + HOST_GRAD_BYTES), 0.0) + np.where(par_off, params, 0.0)
        return {
            "params": np.where(par_off, 0.0, params),
            "compute_copy": copy,
            "grads": np.where(opt_off, 0.0, grads),
            "optimizer": np.where(opt_off, 0.0, optimizer),
            "host": host,
        }
    params = psi * b["p"] / np.where(z >= 2, d, 1.0)
    grads = psi * b["g"] / np.where(z >= 2, d, 1.0)
    # ZeRO-1 (bench_model ZeRO1AdamW): each rank keeps an fp32 slice of the params it updates plus its Adam states
    optimizer = updated * b["o"] + np.where(z == 1, psi * b["p"] / d, 0.0)
    # FSDP2 (every stage; HSDP with shard=1 for stages 0-1) gathers/casts params per block and keeps them from forward
    # to backward unless it reshards (stage 3); with one rank and no cast there is no wrapper and no copy
    fsdp = (d > 1) | (b["c"] != b["p"])
    copy = np.where((z <= 2) & fsdp, psi * b["c"], 0.0)
    # offload=optimizer (bench_model/parallel/offload.py): an fp32 master slice, the Adam states and an fp32 gradient
    # buffer of the updated parameters on the host; params=FSDP2 CPUOffloadPolicy: sharded params, grads and the
    # optimizer state built on them live on the host
    host = np.select(
        [par_off, opt_off],
        [params + grads + updated * b["o"], updated * (HOST_MASTER_BYTES + b["o"] + HOST_GRAD_BYTES)],
    )
    return {
        "params": np.where(par_off, 0.0, params),
        "compute_copy": copy,
        "grads": np.where(par_off, 0.0, grads),
        "optimizer": np.where(opt_off, 0.0, optimizer),
        "host": host,
    }


@dataclass(frozen=True)
class BenchModelProfile(FrameworkProfile):
    """bench_model's accounting (this module's docstring derives each term)."""

    name: str = "bench_model"

    def moe_host_sync(self, ep: Any, balanced: bool, capacity: bool) -> np.ndarray:
        """Learned routing reads the tokens per expert on the host (bench_model/moe.py expert_counts:
        bincount(...).tolist()); with ep > 1 the all-to-all splits are read too (bench_model/parallel/
        expert_parallel.py: recv.tolist()). Balanced routing on one EP rank knows its counts without reading them."""
        return (np.asarray(ep) > 1) | (not balanced)

    def loss_kernel(self, arr: dict[str, np.ndarray]) -> np.ndarray:
        """bench_model/loss.py `lm_loss`: pp > 1, the schedule's loss_fn on the stage's logits (unfused); tp > 1, the
        checkpointed chunks under loss_parallel; else the fused linear cross-entropy, compiled with plan.compile
        (fused) or the eager in-place chain (fused_eager). perf_terms.LOSS_KERNELS gives each one's passes and bytes."""
        pp, tp, comp = arr["pp"], arr["tp"], np.asarray(arr["compile"], dtype=bool)
        code = LOSS_KERNELS.index
        picks = [code("unfused"), code("checkpointed"), code("fused")]
        return np.select([pp > 1, tp > 1, comp], picks, code("fused_eager")).astype(np.int64)

    def compiled_selective_rerun_bytes(self, model: Any, c: int, tp: Any) -> np.ndarray:
        """Compiled selective is one checkpoint around SwiGLU (bench_model/parallel/recompute.py
        `apply_selective_compiled`): AOTAutograd's partitioner rebuilds silu(w1 x) * (w3 x) from the saved w1 / w3
        outputs, reading 2c and writing c per element of the layer's FFN width a token passes through (top-k experts +
        shared expert on an MoE layer; layers averaged), over tp. No other elementwise op runs again. H200 2026-11-29
        (h200_bench_model_2026-11-29.csv): 1B mbs 4 compiled 59.6k tok/s selective vs 60.1k none (-0.9%), 3B mbs 2
        22.50k vs 22.55k (-0.3%); the eager elementwise pass this replaces priced -5%."""
        moe_width = model.moe_router_topk * model.moe_ffn_hidden_size + model.moe_shared_expert_ffn_hidden_size
        n_moe = model.num_moe_layers if model.is_moe else 0
        width = (n_moe * moe_width + (model.num_layers - n_moe) * model.ffn_hidden_size) / model.num_layers
        return 3.0 * c * width / np.asarray(tp, dtype=np.float64)

    def attention_kernel(self) -> str:
        """bench_model/model.py calls F.scaled_dot_product_attention. torch's CUDA SDPA puts cuDNN attention first on
        sm90 / sm100 when the runtime cuDNN is newer than 9.15 (aten/src/ATen/native/transformers/cuda/sdp_utils.cpp
        `check_prefer_cudnn_attention`; CUDA 13 wheels ship it), FA3-class on Hopper: "fa3". The H200 rows ran torch
        2.11.0+cu130 (the backend picked was not logged). Older torch put the FlashAttention-2 backend first: a job on
        one says train.attention_kernel=fa2 (llm-foundry's MPT rows, priced as this trainer, say the kernel their table
        ran: triton or fa2, reference_runs.mpt_attention_kernel)."""
        return "fa3"

    def context_parallel_attention(self) -> str:
        """bench_model/parallel/context_parallel.py: K/V all-gathered over the cp ranks, one SDPA with an explicit mask
        on global positions: "allgather_mask" (autotune/predict/ring_attention.py)."""
        return "allgather_mask"

    def fp8_casts(self) -> str:
        """bench_model converts its linears with torchao's Float8Linear (bench_model/parallel/float8.py): "torchao"."""
        return "torchao"

    def grads_made_in_backward(self) -> bool:
        """Yes: every ZeRO stage is FSDP2 (bench_model/parallel/data_parallel.py), whose post-backward hook sets each
        block's .grad from the reduce-scatter output during backward (foreach_reduce); the routed experts outside
        FSDP (ignored_params at ZeRO 0/1) get theirs from autograd's AccumulateGrad; trainer.py frees them all at
        zero_grad(set_to_none=True) after the step."""
        return True

    def overlaps(self) -> Overlaps:
        """bench_model/parallel/data_parallel.py: FSDP2 per block for every stage; stages 0-1 all-reduce each block's
        gradients during backward (FSDP2 HSDP with shard=1); stage 1 then all-gathers the updated parameters in one
        flat collective before the next step (not overlapped)."""
        return Overlaps(grad_reduce=True, param_gather=False, fsdp_prefetch=True, zero1_reduce_scatter=False)

    def expert_grads_overlapped(self) -> bool:
        """ZeRO 0/1 leaves the routed experts out of FSDP (ignored_params) and all-reduces each expert tensor over the
        edp group once per step after the last backward (bench_model/parallel/expert_parallel.py
        `finalize_expert_grads`): nothing to hide behind."""
        return False

    def grad_reduce_collectives(self, layers: Any) -> np.ndarray:
        """bench_model/parallel/data_parallel.py wraps every transformer block and the root unit (embedding, final
        norm, head) in its own FSDP2 unit at every ZeRO stage; at stages 0-1 (HSDP, shard 1) each unit all-reduces its
        gradients on its own after the last micro-batch's backward: layers + 1 all-reduces per step. On 8 gloo ranks
        each costs ~1.4-5.6 ms of CPU almost regardless of its size (`autotune netbench`, 4 KiB to 4 MiB;
        docs/scale_down.md), so the count, not the bytes, prices the tiny model's ZeRO-0 step."""
        return np.asarray(layers, dtype=np.float64) + 1.0

    def pipeline_defers_grad_reduce(self) -> bool:
        """pp > 1 runs torch.distributed.pipelining (bench_model/parallel/pipeline.py), whose stage backward sets
        FSDP2's set_requires_gradient_sync(False) and set_reshard_after_backward(False) on every micro-batch and
        reduce-scatters once in perform_reduce_grad after the last one (torch/distributed/pipelining/stage.py
        `backward_maybe_with_nosync`, `perform_reduce_grad`; torch 2.13)."""
        return True

    def pipeline_held(self, stage_params: Any, zero_stage: Any, shard: Any, pp: Any, train: TrainSpec) -> dict:
        """The same pipelining under FSDP2 (base.fsdp_pipeline_held); the unsharded gradients accumulate in the
        reduce dtype, fp32 (bench_model/parallel/data_parallel.py MixedPrecisionPolicy reduce_dtype)."""
        g = max(DTYPE_BYTES[train.grad_dtype], DTYPE_BYTES["fp32"])
        return fsdp_pipeline_held(stage_params, zero_stage, shard, pp, DTYPE_BYTES[train.compute_dtype], g)

    def rules(self) -> tuple:
        return (
            self.rule(
                "moe_dispatcher",
                lambda moe_dispatcher: moe_dispatcher != 0,
                lambda moe_dispatcher: (
                    f"moe_dispatcher={moe_dispatcher}: bench_model's expert parallelism dispatches with all-to-all only "
                    "(bench_model/parallel/expert_parallel.py); use alltoall, or another train.framework"
                ),
            ),
        )

    def model_states(
        self, num_params: Any, zero_stage: Any, shard: Any, train: TrainSpec, offload: Any = 0
    ) -> dict[str, np.ndarray]:
        return model_state_arrays(num_params, zero_stage, shard, train, offload)

    def root_copy(self, root_params: Any, zero_stage: Any, train: TrainSpec) -> np.ndarray:
        """FSDP2's root unit (embedding, final norm, head) stays gathered all step in stage 3
        (bench_model/parallel/data_parallel.py); the paper accounting (master_dtype set) has none."""
        z = np.asarray(zero_stage)
        if train.master_dtype is not None:
            return np.zeros(np.shape(z))
        return np.where(z == 3, np.asarray(root_params, dtype=np.float64) * DTYPE_BYTES[train.compute_dtype], 0.0)

    def layer_activations(
        self, model: ModelSpec, seq: Any, mbs: Any, tp: Any, sp: Any, recompute: Any, act_bytes: int
    ) -> dict[str, np.ndarray]:
        return layer_activation_bytes(model, seq, mbs, tp, sp, recompute, act_bytes)

    def compiled_layer_activations(
        self, model: ModelSpec, seq: Any, mbs: Any, tp: Any, sp: Any, recompute: Any, act_bytes: int
    ) -> dict[str, np.ndarray]:
        return layer_activation_bytes(model, seq, mbs, tp, sp, recompute, act_bytes, compiled=True)

    def fp8_layer_saving(
        self, model: ModelSpec, tokens: Any, tp: Any, sp: Any, recompute: Any, compiled: Any, fp8: Any, act_bytes: int
    ) -> Any:
        """torchao float8 under torch.compile with no recompute (`fp8_compiled_saving_per_token`); eager, selective
        and full recompute keep what bf16 keeps. mxfp8 / nvfp4: not measured, no saving assumed."""
        on = (np.asarray(fp8) == FP8_CODE["tensorwise"]) | (np.asarray(fp8) == FP8_CODE["rowwise"])
        on = on & np.asarray(compiled, dtype=bool) & (np.asarray(recompute) == _NONE)
        per_token = fp8_compiled_saving_per_token(model, tp, sp, act_bytes)
        return np.where(on, np.asarray(tokens, dtype=np.float64) * per_token, 0.0)

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
        """bench_model/moe.py's MoE block; torchao keeps the high-precision GEMM inputs (fp8 changes nothing)."""
        return moe.bench_model_moe_layer_bytes(model, tokens, tp, sp, recompute, act_bytes, ep, etp, mbs)

    def expert_states(
        self, num_params: Any, zero_stage: Any, edp: Any, dense_shard: Any, train: TrainSpec, offload: Any = 0
    ) -> dict[str, np.ndarray]:
        """bench_model/parallel/data_parallel.py: the experts get their own fully_shard on the edp mesh only at ZeRO
        2/3 (when FSDP wraps the model at all: dp*cp > 1 or a bf16 cast); at ZeRO 2 that unit keeps its gathered copy
        from forward to backward (also on a one-rank edp mesh: FSDP2's all-gather output is a separate storage). At
        ZeRO 0/1 they are ignored by FSDP (reduced by finalize_expert_grads): no gathered copy (see
        `expert_cast_bytes`)."""
        out = model_state_arrays(num_params, zero_stage, edp, train, offload)
        c, p = DTYPE_BYTES[train.compute_dtype], DTYPE_BYTES[train.param_dtype]
        z = np.asarray(zero_stage)
        wrapped = (np.asarray(dense_shard) > 1) | (c != p)
        if train.master_dtype is None:
            psi = np.asarray(num_params, dtype=np.float64)
            out["compute_copy"] = np.where(wrapped & (z == 2), psi * c, 0.0)
        return out

    def moe_tp_replicated_params(self, model: ModelSpec) -> float:
        """bench_model/parallel/expert_parallel.py `_replicate_dense_params`: the router and the shared expert are
        Replicate DTensors on the tp mesh (each rank computes them on its own tokens), not split by tp."""
        if not model.is_moe:
            return 0.0
        return model.num_experts * model.hidden_size + 3.0 * model.hidden_size * model.moe_shared_expert_ffn_hidden_size

    def expert_cast_bytes(self, num_params: Any, zero_stage: Any, train: TrainSpec) -> Any:
        """ZeRO 0/1 with bf16 compute: GroupedExperts.forward casts the fp32 expert weights (`w.to(x.dtype)`) and the
        GEMMs keep the cast copies for backward, one set per in-flight micro-batch."""
        c, p = DTYPE_BYTES[train.compute_dtype], DTYPE_BYTES[train.param_dtype]
        z = np.asarray(zero_stage)
        return np.where((z < 2) & (c != p), np.asarray(num_params, dtype=np.float64) * c, 0.0)

    def context_parallel_saved(self, model: ModelSpec, seq: Any, mbs: Any, tp: Any, cp: Any, act_bytes: int) -> Any:
        return context_parallel_saved_bytes(model, seq, mbs, tp, cp, act_bytes)

    def context_parallel_transient(self, model: ModelSpec, tokens: Any, tp: Any, cp: Any, act_bytes: int) -> Any:
        return context_parallel_transient_bytes(model, tokens, tp, cp, act_bytes)

    def context_parallel_buffers(self, seq: Any, cp: Any) -> Any:
        return context_parallel_mask_bytes(seq, cp)

    def first_stage_activations(self, model: ModelSpec, tokens: Any, tp: Any, sp: Any, act_bytes: int) -> Any:
        return 0.0  # the embedding's output is the first block's saved input, counted with the layers

    def head_activations(self, model: ModelSpec, tokens: Any, tp: Any, sp: Any, act_bytes: int) -> np.ndarray:
        """The final norm's tensors ((4 + c)h, /t with SP) and the head's gathered input (ch)."""
        return tokens * model.hidden_size * ((4.0 + act_bytes) / np.where(sp, tp, 1) + act_bytes)

    def logits(self, model: ModelSpec, tokens: Any, pp: Any, tp: Any, act_bytes: int) -> np.ndarray:
        """pp=1, tp=1: bench_model.loss.fused_linear_cross_entropy, one chunk (min(tokens, LOSS_CHUNK_TOKENS)) of fp32
        logits turned into their gradient in place plus its compute-dtype copy: (4 + c) bytes per logit, 4 in fp32.
        pp=1, tp>1: the checkpointed chunked loss under loss_parallel, (8 + c) per logit of one chunk's n*V/t.
        pp>1: the pipeline's loss_fn sees the whole micro-batch's logits, (8 + c) per logit of n*V/t."""
        pp1, tp = np.asarray(pp) == 1, np.asarray(tp)
        n = np.where(pp1, np.minimum(tokens, LOSS_CHUNK_TOKENS), tokens)
        fused = 4.0 + (act_bytes if act_bytes != 4 else 0)
        per_logit = np.where(pp1 & (tp == 1), fused, 8.0 + act_bytes)
        return per_logit * n * model.vocab_size / tp

    def buffer_unit_params(self, layer_params: Any, expert_params: Any, zero_stage: Any) -> Any:
        """At ZeRO 0/1 the routed experts are `ignored_params` of the block's fully_shard (bench_model/parallel/
        data_parallel.py `apply_data_parallel`; finalize_expert_grads reduces them in place), so the block's unsharded
        gradient and fp32 reduce buffer cover its other parameters only. At ZeRO 2/3 the experts are a unit of their
        own, priced with the block's (not measured apart). H200 2026-11-29, Mixtral-8x7B 2 layers (1.41B expert
        parameters a layer, dp 1, bf16 over fp32 parameters, so FSDP wraps): allocated 57.2 GiB measured, 64.3
        predicted with the experts in the buffer (7.9 GiB of it)."""
        return np.where(np.asarray(zero_stage) < 2, np.asarray(layer_params) - expert_params, layer_params)

    def buffers(self, layer_params: Any, zero_stage: Any, shard: Any, train: TrainSpec) -> np.ndarray:
        """FSDP2 (when it wraps the model): one block's unsharded gradient in compute dtype plus its fp32 reduce
        buffer; stage 3 adds two gathered blocks (current + prefetch)."""
        c, g, p = (DTYPE_BYTES[x] for x in (train.compute_dtype, train.grad_dtype, train.param_dtype))
        fsdp = (np.asarray(shard) > 1) | (c != p)
        z = np.asarray(zero_stage)
        return np.where(fsdp, layer_params * (c + g), 0.0) + np.where(z == 3, 2 * layer_params * c, 0.0)

    def allocated(
        self, params: Any, grads: Any, optimizer: Any, activations: Any, logits: Any, buffers: Any, transient: Any
    ) -> np.ndarray:
        """Every term at once (a conservative sum over the step's phases)."""
        return params + grads + optimizer + activations + logits + buffers

    def pipeline_stage_buffers(
        self, hidden: Any, m: Any, inflight: Any, rank: Any, pp: Any, vpp: Any, recompute: Any
    ) -> Any:
        """bench_model/parallel/pipeline.py runs torch's PipelineStage: its receive buffers and kept stage outputs
        (base.torch_pipeline_buffers); full recompute's checkpoint keeps the block input, the in-flight receive buffer."""
        full = ~np.isin(np.asarray(recompute), (_NONE, _SEL))
        return torch_pipeline_buffers(hidden, m, inflight, rank, pp, vpp, full)

    def inflight(self, pp: Any, vpp: Any, m: Any, schedule: Any, rank: Any) -> np.ndarray:
        return inflight_microbatches(pp, vpp, m, schedule, rank)
