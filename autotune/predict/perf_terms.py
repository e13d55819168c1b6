"""Physical terms of the step-time model that are not GEMM roofline or collective bandwidth (autotune.predict.perf uses them).

Every function is pure and vectorised over numpy arrays of candidate plans; sources next to each term.

- Memory-bound (non-GEMM) work: normalisations, RoPE, SwiGLU/GeLU elementwise, residual adds, the loss
  (softmax + cross-entropy over the vocabulary) and the optimizer step are bandwidth-bound, not FLOP-bound (roofline,
  Williams et al. 2009; Ivanov et al. 2021 "Data Movement Is All You Need", Sec 4: in BERT training the normalisation
  and elementwise operators take ~1/3 of runtime while doing <1% of the FLOPs). Their time is bytes moved /
  (HBM bandwidth * memory_efficiency). Bytes are counted tensor by tensor (one read of each input, one write of each
  output, as Korthikanti et al. 2022 count activations), see `elementwise_bytes_per_token`.
- Attention kernels (FlashAttention; Dao 2023 "FlashAttention-2", Sec 4.1: 50-73% of peak forward on A100, lower
  backward) run at their own efficiency, separate from the dense GEMMs: `attention_efficiency` in the preset.
- Pipeline: the busiest stage sets the pace (Narayanan et al. 2021 Sec 2.2: steady state of 1F1B runs at the slowest
  stage); the embedding gather sits on the first stage, the LM head GEMM and the loss on the last.
- Per micro-batch and virtual stage a pipeline boundary costs a p2p send/recv of the activation (latency + bytes/bw,
  forward and backward) plus a fixed schedule overhead (stream sync, kernel launch gap at the boundary):
  `pp_microbatch_overhead_s` in the preset.
- FSDP prefetch as bench_model runs it (FSDP2 fully_shard per block, implicit forward/backward prefetch of the next
  block's all-gather; PyTorch FSDP2 docs "fully_shard", torchtitan docs/fsdp.md): the all-gather of block i+1 overlaps
  the compute of block i, so the exposed time per block is max(0, comm - compute); the first gather is never hidden.
  `dp_overlap` is the fraction of the overlapped part that is really hidden (NCCL kernels share SMs with compute).
- torch.compile per block (`compiled_elementwise_factor`, `compile_time_s`): Inductor fuses the chains of
  memory-bound elementwise ops of a block (RMSNorm's cast/square/mean/rsqrt/scale, RoPE's mul/neg/cat/add, SwiGLU's
  silu*up, residual adds) into a few kernels that read each input once (PyTorch 2 paper, Ansel et al. 2024 Sec 5:
  "Inductor ... fuses pointwise and reduction ops"); GEMMs and SDPA still call cuBLAS / FlashAttention unchanged. So
  only the layers' elementwise time moves. Eager bench_model moves ~2.8x the bytes `elementwise_bytes_per_token`
  counts (RMSNorm 36h vs 6h bytes per token, RoPE ~5x, SwiGLU 10f vs 6f): eager Llama blocks are priced at
  EAGER_LLAMA_BYTES_FACTOR times the count, compiled ones at `compile_memory_traffic_factor` of that (fitted; its
  physical scale is the fused/eager byte ratio ~0.36). Before this term eager elementwise work was priced at the
  fused count, so the model gave compile +7% where the H200 measured +19% (mbs 2) and +22% (mbs 4).
  Compiling is warm-up (bench_model times no step before `warmup_steps`), but it costs trial wall time.
- FP8 linears: autotune/predict/fp8_terms.py (re-exported here).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autotune.core.errors import SpecError
from autotune.core.model import ModelSpec
from autotune.core.types import ClusterSpec
from autotune.predict.attention_terms import (  # noqa: F401  (re-exported: callers import them from perf_terms)
    ATTN_BWD_FWD_RATIO,
    ATTN_CAUSAL_BLOCK,
    ATTN_SEQ_HALF,
    ATTN_SEQ_HALF_FA2,
    FA2_BWD_PEAK_FRACTION,
    FA2_FWD_PEAK_FRACTION,
    TRITON_BWD_SLOWDOWN,
    TRITON_FWD_SLOWDOWN,
    attention_passes,
    attention_s,
    attention_shape_factor,
    softmax_exp_s,
    softmax_exps,
    triton_attention_factor,
)
from autotune.predict.fp8_terms import (  # noqa: F401  (re-exported: callers import them from perf_terms)
    CAST_EXTRA_BYTES,
    CAST_FUSED_EXTRA_BYTES,
    FP8_CASTS_PER_OPERAND,
    RECIPE_PEAK_FIELD,
    fp8_cast_bytes,
    fp8_linear_elements,
    linear_efficiency_factor,
    linear_peak_flops,
    recipe_cast_bytes,
    te_fp8_cast_bytes,
)

# Adam(W) step (Kingma & Ba 2015, Algorithm 1; torch foreach/fused AdamW): per parameter it reads param, grad,
# exp_avg, exp_avg_sq and writes param, exp_avg, exp_avg_sq: 7 tensors of the optimizer dtype (fp32: 28 bytes).
ADAM_TENSORS_PER_PARAM = 7
# torch.optim.AdamW without fused=True (the foreach and single-tensor paths, torch/optim/adam.py _single_tensor_adam /
# _multi_tensor_adam, non-capturable): one kernel per line, each reading its inputs and writing its output:
# param.mul_(1 - lr wd) 2, exp_avg.lerp_(grad) 3, exp_avg_sq.mul_ 2 + .addcmul_(grad, grad) 3, sqrt 2, / bias
# correction 2, .add_(eps) 2, param.addcdiv_(exp_avg, denom) 4: 20 tensor accesses per parameter (fp32: 80 bytes).
# bench_model builds torch.optim.AdamW(lr, betas, eps, weight_decay) (bench_model/trainer.py): this path. Megatron
# (TE / apex FusedAdam), torchtitan (optimizer.implementation="fused") and DeepSpeed (FusedAdam) run one fused kernel.
ADAM_TENSORS_UNFUSED = 20
UNFUSED_ADAM_FRAMEWORKS = frozenset({"bench_model"})


def adam_tensors_per_param(framework: str) -> int:
    """Tensor accesses per parameter of the framework's AdamW step (ADAM_TENSORS_UNFUSED / ADAM_TENSORS_PER_PARAM)."""
    return ADAM_TENSORS_UNFUSED if framework in UNFUSED_ADAM_FRAMEWORKS else ADAM_TENSORS_PER_PARAM


# Loss over the vocabulary per logit element (bench_model: loss on logits.float()): write the compute-dtype logits,
# read them and write the fp32 copy, log-softmax reads fp32 and writes fp32, backward reads the fp32 log-probs and
# writes the fp32 gradient, the cast back reads fp32 and writes the compute-dtype gradient: 2c + 6*4 bytes.
LOSS_FP32_ACCESSES = 6
PERF_FIELDS = ("hbm_bw_bytes_per_s", "memory_efficiency", "attention_efficiency", "pp_microbatch_overhead_s")


def require_perf_fields(cluster: ClusterSpec) -> None:
    """A preset without a field the step-time model needs is refused in one line naming the field (no default)."""
    for f in PERF_FIELDS:
        if getattr(cluster, f, None) is None:
            raise SpecError(
                f"cluster.{f} is not set in preset {cluster.name!r}: the performance model needs it "
                f"(see search_spaces/cluster/h100-sxm-80gb.yaml)"
            )


def elementwise_bytes_per_token(model: ModelSpec, c: int, tp: Any, sp: Any) -> np.ndarray:
    """HBM bytes per token per layer of one forward pass of the non-GEMM ops (each input read once, output written
    once; c = compute dtype bytes). Llama block (bench_model/model.py):
      2 RMSNorms: read h (cast to fp32, 4 bytes), write h in c: 2 * (4 + c) h
      RoPE on q and k: read and write q + k: 2c(q + k), q = num_heads x head_dim (= h unless head_dim is decoupled:
        Qwen3-235B 64 x 128 = 8192 on h 4096, GPT-OSS 64 x 64 = 4096 on h 2880; the rotation runs on every query
        and key head, Su et al. 2021 Eq. 34; MLA keeps h here, its RoPE runs on the decoupled 64-wide part only)
      SwiGLU silu(w1 x) * w3 x: read 2f, write f (silu's output fused in the product kernel): 3cf
      2 residual adds: read 2h, write h: 6ch
      softmax of the attention runs inside the FlashAttention kernel (no HBM traffic of its own)
    GPT block (LayerNorm with bias, GeLU 4h MLP, biases): 2 LayerNorms 2 * 2ch, GeLU read/write f: 2cf, bias adds on
    the 4 GEMM outputs read/write 3h + f + h (fused into the GEMM epilogue in Megatron and llm-foundry: not counted),
    residuals 6ch.
    TP divides what lives on the sharded hidden dimension (RoPE, MLP elementwise) by tp; norms and residuals are
    replicated across TP unless sequence parallel splits the sequence (Korthikanti et al. 2022 Sec 4.2.2)."""
    h, f, k = model.hidden_size, model.ffn_hidden_size, model.kv_dim
    q = model.q_dim if model.attention == "gqa" else h
    tp = np.asarray(tp, dtype=np.float64)
    split = np.where(np.asarray(sp, dtype=bool), tp, 1.0)
    if model.block == "gpt":
        sharded, replicated = 2.0 * c * f, 4.0 * c * h + 6.0 * c * h
    else:
        sharded, replicated = 2.0 * c * (q + k) + 3.0 * c * f, 2.0 * (4 + c) * h + 6.0 * c * h
    return sharded / tp + replicated / split


def memory_bound_s(nbytes: Any, cluster: ClusterSpec) -> np.ndarray:
    """Roofline for bandwidth-bound kernels: bytes / (HBM bandwidth * memory_efficiency)."""
    return np.asarray(nbytes, dtype=np.float64) / (cluster.hbm_bw_bytes_per_s * cluster.memory_efficiency)


def streaming_s(nbytes: Any, cluster: ClusterSpec) -> np.ndarray:
    """Roofline of a long streaming kernel over whole parameter-sized tensors (the AdamW step, weight casts): bytes /
    (HBM bandwidth * stream_efficiency). Each such kernel reads and writes hundreds of MB contiguously, with none of
    the launch gaps and short tensors of the blocks' eager elementwise mix that `memory_efficiency` is fitted on; a
    device-to-device copy reaches ~0.9 of the datasheet bandwidth on H100 (3.0 of 3.35 TB/s), torch's multi-tensor
    (foreach / fused) AdamW kernels, 64k-element chunks per block, somewhat less (coefficients.py: prior and range).
    A preset without it keeps memory_efficiency."""
    eff = cluster.stream_efficiency if cluster.stream_efficiency is not None else cluster.memory_efficiency
    return np.asarray(nbytes, dtype=np.float64) / (cluster.hbm_bw_bytes_per_s * eff)


# The loss kernels a job runs over the LM head's logits (TrainSpec.loss_kernel, else FrameworkProfile.loss_kernel),
# each as (head GEMM passes, (compute-dtype, fp32) accesses per logit of the loss's own kernels; the head GEMM's write
# of the logits is the GEMM's):
# - unfused: F.cross_entropy(logits.float()) over the stage's logits (above): 3 passes, 2c + 6*4;
# - fused: one pass reading the compute-dtype logits for the log-sum-exp, one reading them again and writing their
#   gradient: 3c. bench_model's compiled fused linear cross-entropy (bench_model/loss.py
#   `chunk_loss_and_dlogits_functional`, Inductor: a reduction and a pointwise kernel), flash-attn's Triton cross
#   entropy (forward reads the logits, backward reads them and writes the gradient in place);
# - fused_eager: bench_model's eager in-place chain (`chunk_loss_and_dlogits`): .float() (r c, w 4), amax (r 4),
#   sub_ (r 4, w 4), exp_ (r 4, w 4), sum (r 4), div_ (r 4, w 4), the cast for the GEMMs (r 4, w c): 2c + 10*4;
# - checkpointed: bench_model's chunks under non-reentrant checkpoint (tp > 1: loss_parallel), the head GEMM run again
#   in backward (4 passes) and the loss's forward (r c, w 4; log-softmax r 4, w 4) twice before the unfused backward
#   (r 4, w 4; r 4, w c): 3c + 10*4.
LOSS_KERNELS = ("unfused", "fused", "fused_eager", "checkpointed")
LOSS_HEAD_PASSES = (3.0, 3.0, 3.0, 4.0)
LOSS_ACCESSES = ((2.0, LOSS_FP32_ACCESSES), (3.0, 0.0), (2.0, 10.0), (3.0, 10.0))  # (c-sized, fp32) per logit


def loss_kernel_codes(kernel: str | None, framework_codes: Any) -> np.ndarray:
    """The job's loss kernel (TrainSpec.loss_kernel) for every candidate, else the framework's per-candidate codes."""
    codes = np.asarray(framework_codes)
    return codes if kernel is None else np.full(codes.shape, LOSS_KERNELS.index(kernel))


def loss_head_passes(codes: Any) -> np.ndarray:
    """Forward-equivalent passes of the V x h head GEMM per loss kernel code (LOSS_HEAD_PASSES)."""
    return np.asarray(LOSS_HEAD_PASSES)[np.asarray(codes)]


def loss_bytes_per_token(model: ModelSpec, c: int, tp: Any, codes: Any = 0) -> np.ndarray:
    """HBM bytes per token of the loss over the (vocab-parallel) logits: V/t elements, each the kernel's accesses
    (LOSS_ACCESSES; code 0, unfused: 2c + 6*4)."""
    acc = np.asarray(LOSS_ACCESSES)[np.asarray(codes)]
    return model.vocab_size / np.asarray(tp, dtype=np.float64) * (acc[..., 0] * c + acc[..., 1] * 4.0)


def optimizer_step_s(
    params_on_rank: Any,
    shard: Any,
    zero_stage: Any,
    opt_bytes: int,
    cluster: ClusterSpec,
    tensors: int = ADAM_TENSORS_PER_PARAM,
) -> np.ndarray:
    """Time of the AdamW update: `tensors` accesses per parameter the rank updates (its 1/shard slice from ZeRO-1
    on): 7 fused, 20 for torch's unfused AdamW (adam_tensors_per_param), streamed (streaming_s)."""
    updated = np.asarray(params_on_rank, dtype=np.float64) / np.where(np.asarray(zero_stage) >= 1, shard, 1)
    return streaming_s(updated * tensors * opt_bytes, cluster)


OFFLOAD_FIELDS = ("host_memory_bytes_per_gpu", "host_device_bw_bytes_per_s", "cpu_adam_params_per_s")


def require_offload_fields(cluster: ClusterSpec, offload_names: Any) -> None:
    """A layout with CPU offload on a preset that does not state the host side is refused in one line."""
    names = sorted({str(n) for n in offload_names} - {"none"})
    for f in OFFLOAD_FIELDS if names else ():
        if getattr(cluster, f, None) is None:
            raise SpecError(
                f"plan.offload={names[0]} needs cluster.{f}, which preset {cluster.name!r} does not set "
                f"(see search_spaces/cluster/h100-sxm-80gb.yaml)"
            )


def host_device_s(nbytes: Any, cluster: ClusterSpec) -> np.ndarray:
    """Seconds to copy `nbytes` between host and device in one direction: pinned copies over PCIe / NVLink-C2C at
    cluster.host_device_bw_bytes_per_s (nominal, per GPU) times comm_efficiency (the fraction of link bandwidth a
    transfer reaches; pinned cudaMemcpy over PCIe Gen5 x16 reaches ~50-55 of the nominal 64 GB/s)."""
    bw = cluster.host_device_bw_bytes_per_s
    if bw is None:
        return np.zeros_like(np.asarray(nbytes, dtype=np.float64))
    return np.asarray(nbytes, dtype=np.float64) / (bw * cluster.comm_efficiency)


def offload_step_s(updated: Any, offload_code: Any, param_bytes: int, grad_bytes: int, cluster: ClusterSpec):
    """Per optimizer step, the host side of CPU offload (`offload_code`: 0 none, 1 optimizer, 2 params) for `updated`
    parameters this rank's optimizer updates:
      optimizer (ZeRO-Offload, Ren et al. 2021 Sec 4.2): gradients D2H (updated * grad bytes), the CPU Adam step,
      updated params H2D (updated * param bytes), one after the other. bench_model copies after backward, as DeepSpeed
      does without overlap_comm; the paper overlaps the D2H with backward and its one-step delayed parameter update
      (Sec 5, DPU, optional: it changes the numerics) hides the step and the H2D behind the next step. Not modelled
      here: this is the serial upper bound the trainer runs.
      params (FSDP2 CPUOffloadPolicy): the CPU Adam step only; the per-block copies are priced with the FSDP
      collectives (autotune/predict/perf.py), the params stay on the host.
    The CPU step runs at cluster.cpu_adam_params_per_s (benchmarks/cpu_adam.py)."""
    u, code = np.asarray(updated, dtype=np.float64), np.asarray(offload_code)
    rate = cluster.cpu_adam_params_per_s or np.inf
    step = np.where(code > 0, u / rate, 0.0)
    copies = np.where(code == 1, host_device_s(u * grad_bytes, cluster) + host_device_s(u * param_bytes, cluster), 0.0)
    return step + copies


def prefetch_exposed_s(comm: Any, compute: Any, overlap: float) -> np.ndarray:
    """Exposed time of a collective that runs while `compute` proceeds: the part longer than the compute, plus the
    (1 - overlap) share of the part that overlaps (bandwidth and SM contention slow one of the two)."""
    comm, compute = np.asarray(comm, dtype=np.float64), np.asarray(compute, dtype=np.float64)
    return np.maximum(comm - compute, 0.0) + (1.0 - overlap) * np.minimum(comm, compute)


def fsdp_exposed_s(
    layers: Any,
    ag_layer: Any,
    rs_layer: Any,
    fwd_layer: Any,
    bwd_layer: Any,
    zero_stage: Any,
    overlap: float,
    bwd_gathers: Any = 1.0,
) -> np.ndarray:
    """Exposed data-parallel time of one micro-batch under FSDP2 per-block wrapping with implicit prefetch.
    stage 3 (reshard after forward): forward gathers every block (the first gather exposed, the others behind the
    previous block's forward); backward gathers again (`bwd_gathers` times: 2 where the recomputed forward gathers
    and releases the block before its backward gathers it again, DeepSpeed ZeRO-3 under full recompute) and
    reduce-scatters each block behind the block's backward.
    stage 2 (no reshard after forward): one gather per block in forward, reduce-scatter in backward."""
    layers, z = np.asarray(layers, dtype=np.float64), np.asarray(zero_stage)
    fwd = ag_layer + (layers - 1) * prefetch_exposed_s(ag_layer, fwd_layer, overlap)
    bwd_comm = np.where(z >= 3, np.asarray(bwd_gathers) * ag_layer + rs_layer, rs_layer)
    bwd = layers * prefetch_exposed_s(bwd_comm, bwd_layer, overlap)
    return fwd + bwd


# Distinct block graphs one rank compiles: bench_model calls block.compile() on every transformer block, and since
# torch 2.5 Dynamo inlines built-in nn.Modules (torch._dynamo.config.inline_inbuilt_nn_modules=True), so blocks of
# one class share one compiled graph (forward + AOT backward) with their parameters as inputs: one graph per rank.
# Measured on CPU with the tiny model at 2 and 8 layers (counters["stats"]["unique_graphs"]; docs/memory_model.md).
COMPILED_GRAPHS_PER_RANK = 1


def _compile_field(cluster: ClusterSpec, name: str) -> float:
    v = getattr(cluster, name, None)
    if v is None:
        raise SpecError(
            f"cluster.{name} is not set in preset {cluster.name!r}: plan.compile=true needs it "
            f"(see search_spaces/cluster/h200-141gb.yaml)"
        )
    return float(v)


# Eager bench_model Llama block: HBM bytes its unfused kernels move over what `elementwise_bytes_per_token` counts
# (one read per input, one write per output). Counted kernel by kernel (module doc): the hand-written RMSNorm (cast to
# fp32, square, mean, rsqrt, two muls, cast back) moves 36h bytes per token instead of 6h, RoPE ~5x, SwiGLU 10f vs 6f:
# ~2.8x over the block. A GPT block (nn.LayerNorm, nn.GELU: one native kernel each, llm-foundry's MPT) is already
# at the counted bytes: 1.
EAGER_LLAMA_BYTES_FACTOR = 2.8


def compiled_elementwise_factor(compile: Any, cluster: ClusterSpec, block: str = "llama") -> np.ndarray:
    """Multiplier on the counted elementwise (memory-bound) time of a layer: eager, the block's unfused kernels move
    EAGER_LLAMA_BYTES_FACTOR (Llama block) or 1 (GPT block) times the counted bytes; compiled (plan.compile, or a
    trainer's hand-fused kernels), compile_memory_traffic_factor of the eager traffic is left (Inductor fusion; its
    physical scale is 1/2.8 ~ 0.36: fused chains read each input once, which is what the count is)."""
    compile = np.asarray(compile, dtype=bool)
    eager = EAGER_LLAMA_BYTES_FACTOR if block == "llama" else 1.0
    if not compile.any():
        return np.full(compile.shape, eager)
    return eager * np.where(compile, _compile_field(cluster, "compile_memory_traffic_factor"), 1.0)


def compile_time_s(compile: Any, cluster: ClusterSpec) -> np.ndarray:
    """Wall seconds a trial spends compiling before its first step (every rank compiles its graph at once):
    compile_s_per_graph * COMPILED_GRAPHS_PER_RANK where plan.compile, 0 elsewhere."""
    compile = np.asarray(compile, dtype=bool)
    if not compile.any():
        return np.zeros(compile.shape)
    return np.where(compile, _compile_field(cluster, "compile_s_per_graph") * COMPILED_GRAPHS_PER_RANK, 0.0)


# TP communication overlap (plan.tp_overlap: Megatron --tp-comm-overlap, Transformer Engine userbuffers; torch async
# TP, Inductor's micro-pipeline TP). Wang et al. 2023 (ASPLOS, "Overlap Communication with Dependent Computation via
# Decomposition", Sec 4, "collective matmul"): the all-gather feeding a column-parallel GEMM (and the reduce-scatter
# fed by a row-parallel GEMM) is split into its n = tp ring steps; step i moves one shard while the GEMM of the shard
# that arrived before it runs, and the local shard's GEMM runs with no transfer beside it. With collective time C
# (n - 1 steps of C/(n-1)) and GEMM time G (n chunks of G/n) the pair takes G/n + (n-1) max(G/n, C/(n-1)), so the
# exposed communication is max(0, C - (n-1)/n G). The decomposed kernels do not hide everything even behind a long
# GEMM (chunk-boundary synchronisation, copy/SM contention, narrower GEMM chunks): a fraction 1 - eta of C stays
# exposed. eta = TP_OVERLAP_EFFICIENCY below the 96% that Flux's fused GEMM+communication kernels overlap (Chang et al.
# 2024, arXiv 2406.06858, abstract), since TE userbuffers and torch async TP run separate GEMM and copy kernels per
# chunk. A prior, not a fit: the Megatron-LM README 2024 H100 rows (--tp-comm-overlap) cannot pin it, their residual
# is the data-parallel overlap (median |error| 27.7% / 25.3% / 22.7% at eta 0.6 / 0.8 / 1.0; docs/memory_model.md).
TP_OVERLAP_EFFICIENCY = 0.8


def tp_overlap_exposed_s(comm_s: Any, gemm_s: Any, tp: Any, efficiency: float = TP_OVERLAP_EFFICIENCY) -> np.ndarray:
    """Exposed seconds of TP collectives of total time `comm_s` decomposed around GEMMs of total time `gemm_s` over
    `tp` ranks: max(C - (n-1)/n G, (1 - eta) C) (Wang et al. 2023 Sec 4; module docstring). 0 when tp = 1."""
    n = np.asarray(tp, dtype=np.float64)
    comm = np.asarray(comm_s, dtype=np.float64)
    hidden = (n - 1) / np.maximum(n, 1) * np.asarray(gemm_s, dtype=np.float64)
    return np.maximum(comm - hidden, (1.0 - efficiency) * comm)


def tp_overlap_layer_s(tp_comm_s: Any, attn_gemm_s: Any, mlp_gemm_s: Any, tp: Any) -> np.ndarray:
    """One layer's exposed TP seconds under plan.tp_overlap: the attention half of the collectives (all-gather into
    QKV, reduce-scatter out of the output projection, forward and backward) behind the attention linears' GEMMs, the
    MLP half behind the MLP linears' (each block moves the same b*s*h activation, so the halves are equal)."""
    half = np.asarray(tp_comm_s, dtype=np.float64) / 2.0
    return tp_overlap_exposed_s(half, attn_gemm_s, tp) + tp_overlap_exposed_s(half, mlp_gemm_s, tp)
