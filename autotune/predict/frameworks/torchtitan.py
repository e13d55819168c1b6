"""The torchtitan profile (docs/frameworks.md): torchtitan 0.2.2's Llama 3 trainer, as autotune's torchtitan export
configures it (autotune/interop/torchtitan.py: ZeRO-3 -> fsdp_reshard_after_forward "always", ZeRO-2 -> "never",
selective -> activation_checkpoint selective_ac_option "op").

Sources (torchtitan 0.2.2, the package `make` installs; paths under torchtitan/):
  [PAR]  models/llama3/infra/parallelize.py `apply_fsdp`: one FSDP2 unit per block, one for tok_embeddings, one for
         [norm, output] (resharded after forward only under "always"), the root; MixedPrecisionPolicy(param_dtype=
         mixed_precision_param, reduce_dtype=float32). `apply_tp`: every block's norms SequenceParallel, wq/wk/wv/w1/w3
         ColwiseParallel behind PrepareModuleInput(Shard(1) -> Replicate()) (the all-gathered input is what the
         matmuls save), wo/w2 RowwiseParallel(output_layouts=Shard(1)) (a reduce-scatter); output ColwiseParallel with
         Shard(-1) logits (loss parallel). `_op_sac_save_list`: mm, SDPA kernels, reduce_scatter_tensor, max.
  [AC]   distributed/activation_checkpoint.py `_apply_op_sac._custom_policy`: saves the outputs of the ops in the
         save list except every second mm (per block: wq, wv, w1, w2 of the mm sequence wq wk wv wo w1 w3 w2);
         `_apply_full_ac`: checkpoint_wrapper around each block (keeps the block input).
  [MOD]  models/llama3/model/model.py `apply_rotary_emb` (complex multiply by the freqs_cis buffer: saves only the
         table, a view of the buffer), `Attention.forward` (SDPA output (B,S,H,D) is wo's input), `FeedForward`,
         `TransformerBlock` (nn.RMSNorm: torch's composite rms_norm saves the fp32 input, the fp32 normalised
         tensor and the per-token rstd).
  [LOSS] components/loss.py `cross_entropy_loss`: F.cross_entropy(pred.flatten(0, 1).float(), reduction="sum"),
         unchunked; train.py `forward_backward_step` frees pred before backward.
  [CHUNK] torchtitan main (2026-06 on; not 0.2.2) components/loss.py `ChunkedLossWrapper` (train.loss_chunks = N,
         its num_chunks; the models' config_registry entries set it, default 8): the decoder returns the normed hidden
         states (decoder.py `_skip_lm_head`), cut into N token slices; per slice lm_head -> the inner loss ->
         chunk_loss.backward(), the slice's gradient copied into `GradAccumulator` (an fp32 buffer of the hidden states'
         shape, zeros_like(..., dtype=float32)), then .to(compute dtype) for the decoder's backward. lm_head is
         unsharded for the whole loop (`lm_head.unshard()`, reshard off) and its gradient sync off for slices 0..N-2, so
         FSDP2 keeps the unsharded gradient, cast to reduce_dtype fp32 (_fsdp_param.py `to_accumulated_grad_if_needed`).
         The hidden states enter replicated on the TP axis (loss parallel per slice).
  [RAF]  reshard_after_forward under torchtitan's "default" policy (what its published runs used; autotune's export
         writes "always" for ZeRO-3): 0.2.2 / since #1094 (July 2025, e.g. 6fc499f6) models/llama3/infra/
         parallelize.py `apply_fsdp`: the [norm, output] unit reshards only under "always"; before (9dec370,
         820504e, e7c0cae) parallelisms/parallelize_llama.py: every block but the last reshards, the root unit
         (embedding, norm, output) is fully_shard(model, reshard_after_forward=not pp_enabled), which FSDP2 keeps
         unsharded after forward as the root (fully_shard docstring: "The root FSDP state has its value specially
         set to False as a heuristic since its parameters would typically be immediately all-gathered for backward").
  [CLOSS] components/loss.py `build_cross_entropy_loss`: the loss is compiled with the model (0.2.2: compile.enable
         and "loss" in compile.components, default ["model", "loss"]; e7c0cae / 820504e (June 2025) and 6fc499f6
         (Aug 2025): training.compile). Not at 9dec370 (Dec 2024): train.py "TODO: compiling loss function causes CUDA
         errors, turning off for now" (`compiled_loss=False`, the profile of the Dec 2024 benchmark page).
  [PPOUT] torch/distributed/pipelining/stage.py `forward_one_chunk`: "Prepare for final output merge or reduction":
         the last stage appends each micro-batch's output to `output_chunks`, cleared only when the next step starts
         (`clear_runtime_states`), so the m logits tensors stay. torchtitan 0.2.2 calls pp_schedule.step(...,
         return_outputs=False) (train.py), which no longer keeps them; 9dec370 (train.py pp_schedule.step(target=,
         losses=)) on torch of Dec 2024 did.
  [AMP]  distributed/utils.py `maybe_enable_amp`: without FSDP (dp_shard = cp = 1) and with TP or PP, mixed
         precision is disabled: the model trains in fp32.
  [PP]   distributed/pipeline_parallel.py `build_pipeline_schedule` (fewer micro-batches than stages: a warning, it
         runs); apply_fsdp's "default" policy does not reshard under PP.
  [PPF]  FSDP2 inside a pipeline stage: parallelize.py `apply_fsdp` ("default": reshard_after_forward=False for every
         block and the root when pp is on, "to avoid per-microbatch all-gathers"; the same at 9dec370,
         parallelisms/parallelize_llama.py); torch/distributed/pipelining/stage.py `backward_maybe_with_nosync`
         (set_reshard_after_backward(False), set_requires_gradient_sync(False) for every micro-batch, FSDP's
         post_backward run by hand after the last); torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py
         `post_backward` (no reduce: `to_accumulated_grad_if_needed`, the unsharded gradient cast to reduce_dtype).
  [PPBUF] torch/distributed/pipelining/stage.py: m forward receive buffers per non-first stage, m gradient receive
         buffers per non-last stage (allocated once, kept across steps) and each in-flight micro-batch's stage output
         (`fwd_cache`); the inter-stage tensor is the sequence-sharded block output (mbs, s/(cp tp), h) [PAR]
         (9dec370 builds its PipelineStage without input_args: torch infers the shapes at the first step).
  [CP]   context parallelism: torch/distributed/tensor/experimental/_attention.py (torch 2.6 on; the same code
         at the 2025 commits) `_templated_ring_attention_backward`: grad_query, grad_key, grad_value = zeros_like(...,
         dtype=float32) (_ContextParallelOptions.convert_to_f32 = True), each ring step's dK/dV sent on as
         torch.cat([grad_key.flatten(), grad_value.flatten()]) through `_AllToAllRotater` (a received fp32 buffer of
         the same size); K/V exchanged by `_AllGatherRotater` (torchtitan's context_parallel_rotate_method default
         "allgather": 9dec370 config_manager.py, 0.2.2 config/job_config.py), one all_gather_tensor of
         cat(K, V) over the cp ranks kept for the whole loop. K and V enter SDPA with the local query heads where
         the model repeats them first (models/llama3 model.py `repeat_kv` from 9dec370 to 06bbcd20 (Oct 2025) and
         in experiments/llama4), with the KV heads where it passes enable_gqa (#2259 ff0829c1, Jan 2026; 0.2.2).
  [OPT]  optimizer.py `build_optimizers` @9dec370: {"fused": fused, "foreach": not fused} with config_manager.py
         `--optimizer.fused` store_true (default False; no toml of that commit sets it): foreach AdamW; from
         820504e on `Optimizer.implementation` = "fused" (config_manager.py / config/job_config.py).
Validated on rank 0 of a fake process group against torchtitan's own model + parallelize_llama
(autotune/validation/torchtitan_probe.py; tests/unit/test_frameworks_torchtitan.py): within 5% on 11 layouts.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from autotune.core.model import ModelSpec
from autotune.core.plan_arrays import RECOMPUTE_CODE
from autotune.core.types import DTYPE_BYTES, TrainSpec
from autotune.predict import reserved
from autotune.predict.frameworks.base import (
    FrameworkProfile,
    Overlaps,
    fsdp_pipeline_held,
    fused_adamw_step_temporaries,
)
from autotune.predict.frameworks.bench_model import BenchModelProfile
from autotune.predict.perf_terms import LOSS_KERNELS

_NONE, _SEL = RECOMPUTE_CODE["none"], RECOMPUTE_CODE["selective"]
# [LOSS] bytes per (local) logit at the loss's peak, fp32 tensors of the logits' size alive at once. Plain
# cross-entropy (tp=1), in its log_softmax backward: the saved log-softmax, the gradient arriving from nll_loss and the
# gradient it produces: 12. Loss parallel (tp>1; torch/distributed/tensor/parallel/loss.py
# `_nll_loss_and_log_softmax_backward`, nll and log_softmax backward fused on the local vocab shard): the saved
# log-softmax x, grad_input = zeros_like(x), (grad_input + exp(x)) and its product with grad_output: 16.
LOGIT_BYTES_PLAIN, LOGIT_BYTES_PARALLEL = 12.0, 16.0
# [CLOSS] the compiled loss (tp=1): Inductor's decomposition of log_softmax and the min-cut partitioner save only the
# compute-dtype logits (the graph's input) and two fp32 values per token (amax, log-sum-exp); the backward is one
# reduction and one fused pointwise kernel writing the compute-dtype gradient (the zeros+scatter of nll_loss's backward
# becomes a pointwise select: torch/_inductor/fx_passes/post_grad.py `scatter_upon_const_tensor`). Peak: the saved
# logits and their gradient, 2 x act_bytes per logit. Checked on CPU, torch 2.13: aot_module_simplified with
# select_decomp_table() and min_cut_rematerialization_partition on torchtitan's cross_entropy_loss saves
# (bf16 pred, int64 labels, fp32 amax (N,1), fp32 log (N,1)) and its backward returns bf16. Measured peak (CPU
# allocator events, benchmarks/torchtitan_loss_peak.py, 2048 tokens x V 4096, torch 2.13): compiled 4.003 bytes per
# logit with pred in bf16 (8.003 in fp32), eager 12.000 beyond pred (LOGIT_BYTES_PLAIN).
LOGIT_ACT_COPIES_COMPILED = 2.0
ID_BYTES = 8  # int64 token ids (first stage) and labels (last stage), per token


@dataclass(frozen=True)
class TorchtitanProfile(FrameworkProfile):
    name: str = "torchtitan"
    compiled_loss: bool = True  # [CLOSS] plan.compile compiles the loss too (torchtitan >= 2025; not at 9dec370)
    pp_output_chunks: bool = False  # [PPOUT] the last stage keeps every micro-batch's logits (9dec370; not 0.2.2)
    # [RAF] what plan.zero_stage=3 runs: "always" (autotune's export), or torchtitan's "default" policy as published
    # runs used it: "default_units" (since #1094, July 2025: [norm, output] kept gathered from forward to backward),
    # "default_root" (before: the root unit (embedding, norm, output) and the last block stay gathered)
    reshard_policy: str = "always"
    fused_adamw: bool = True  # [OPT] the optimizer step: fused AdamW (2025 on), foreach AdamW at 9dec370
    repeat_kv: bool = (
        False  # [CP] K/V repeated to the query heads before SDPA (until #2259, Jan 2026; 0.2.2: enable_gqa)
    )
    loss_chunks: int = 0  # [CHUNK] train.loss_chunks (for_train): ChunkedLossWrapper's num_chunks, 0 = unchunked
    # as bench_model (autotune/predict/frameworks/bench_model.py): FSDP2 model states as bench_model/parallel/data_parallel.py applies them; the 1F1B/interleaved schedules of torch.distributed.pipelining
    model_states = BenchModelProfile.model_states
    inflight = BenchModelProfile.inflight
    moe_layer_activations = BenchModelProfile.moe_layer_activations
    # [PPBUF] the same torch.distributed.pipelining stages (base.torch_pipeline_buffers); full AC keeps the block input
    pipeline_stage_buffers = BenchModelProfile.pipeline_stage_buffers

    def moe_host_sync(self, ep: Any, balanced: bool, capacity: bool) -> np.ndarray:
        """With expert parallelism the token dispatch reads its all-to-all split sizes on the host (the "EP
        token-routing split .tolist()" torchtitan's graph trainer cannot replay, torchtitan/experiments/
        graph_trainer/cudagraph.py); without it the grouped GEMM takes device offsets (torch._grouped_mm): no sync."""
        return np.asarray(ep) > 1

    def attention_kernel(self) -> str:
        """torchtitan's default attention is F.scaled_dot_product_attention (torchtitan/models/attention.py), whose
        CUDA flash backend is FlashAttention-2 (aten/src/ATen/native/transformers/cuda/flash_attn): "fa2"."""
        return "fa2"

    def context_parallel_attention(self) -> str:
        """[CP] torchtitan's context parallelism is torch's `context_parallel` (ring attention)."""
        return "torch_ring"

    def sdpa_repeats_kv(self) -> bool:
        """[CP] `repeat_kv` before SDPA (9dec370 to Jan 2026), enable_gqa after (#2259)."""
        return self.repeat_kv

    def fp8_casts(self) -> str:
        """torchtitan's Float8 converter swaps in torchao's Float8Linear (torchtitan/components/quantization):
        "torchao"."""
        return "torchao"

    def grads_made_in_backward(self) -> bool:
        """Yes: FSDP2 sets each block's sharded .grad in its post-backward hook, and under pp > 1 (torch.distributed.
        pipelining's backward_maybe_with_nosync: set_requires_gradient_sync(False)) it accumulates the unsharded
        fp32 gradient, also allocated in the first micro-batch's backward; the trainer zeroes with set_to_none."""
        return True

    def overlaps(self) -> Overlaps:
        """torchtitan: FSDP2 fully_shard per block with implicit prefetch (torchtitan docs/fsdp.md); DDP via
        torch's bucketed allreduce hooks during backward (replicate); no ZeRO-1 (torchtitan has none)."""
        return Overlaps(grad_reduce=True, param_gather=False, fsdp_prefetch=True, zero1_reduce_scatter=False)

    def root_copy(self, root_params: Any, zero_stage: Any, train) -> np.ndarray:
        # [PAR] ZeRO-3 is written as "always": the embedding and [norm, output] units reshard after forward too, so no
        # gathered copy outlives its unit's forward (ZeRO-2, "never": model_states' compute copy of every unit)
        return np.zeros(np.shape(np.asarray(root_params) * np.asarray(zero_stage)))

    def pipeline_held(self, stage_params: Any, zero_stage: Any, shard: Any, pp: Any, train: TrainSpec) -> dict:
        """[PPF] FSDP2 under PP: apply_fsdp does not reshard after forward when PP is on, and the pipeline stage runs
        every micro-batch's backward with reshard_after_backward and gradient sync off, so the stage's parameters
        stay gathered in the compute dtype (ZeRO-3; ZeRO-2 keeps them already) and its unsharded gradients
        accumulate in the reduce dtype (FSDPParam.to_accumulated_grad_if_needed) until the last micro-batch.
        FSDP is applied when the sharding group dp*cp > 1 (torchtitan wraps nothing otherwise)."""
        return fsdp_pipeline_held(
            stage_params, zero_stage, shard, pp, DTYPE_BYTES[train.compute_dtype], DTYPE_BYTES[train.grad_dtype]
        )

    def pipeline_defers_grad_reduce(self) -> bool:
        return True  # [PPF]: one reduce-scatter per step after the last micro-batch (perf_dp.fsdp_s)

    def layer_activations(
        self, model: ModelSpec, seq: Any, mbs: Any, tp: Any, sp: Any, recompute: Any, act_bytes: int
    ) -> dict[str, np.ndarray]:
        if model.block != "llama":
            return BenchModelProfile.layer_activations(self, model, seq, mbs, tp, sp, recompute, act_bytes)
        s, b, t = (np.asarray(x, dtype=np.float64) for x in (seq, mbs, tp))
        r = np.asarray(recompute)
        h, f, k, a, c = model.hidden_size, model.ffn_hidden_size, model.kv_dim, model.num_heads, act_bytes
        q = model.q_dim  # query and attention-output width (= h unless head_dim is decoupled)
        tok, sp_div = s * b, np.where(sp, t, 1.0)  # [PAR] tp > 1 is always sequence parallel
        # [MOD] per token: each RMSNorm keeps its fp32 input, the fp32 normalised tensor and rstd ((8h + 4), SP-sharded);
        # the (all-gathered, [PAR]) norm outputs feed wq/wk/wv and w1/w3 (2ch); SDPA keeps q, k, v, its output
        # (= wo's input) and the fp32 logsumexp; SwiGLU keeps w1 out, silu out, w3 out and the product (= w2's input)
        none = 2 * (8 * h + 4) / sp_div + 2 * c * h + (c * (2 * q + 2 * k + 4 * f) + 4 * a) / t
        # [AC] op SAC: the block input (checkpoint input, SP-sharded), mm outputs wq (h), wv (k), w1 (f) (/t) and w2
        # (the row-parallel partial sum before its reduce-scatter: full h), the SDPA output and logsumexp (/t) and,
        # with TP, the two reduce-scatter outputs (h/t each)
        sel = c * h / sp_div + c * (h + k + f) / t + c * h + (c * h + 4 * a) / t + np.where(t > 1, 2 * c * h / t, 0.0)
        full = c * h / sp_div  # [AC] checkpoint_wrapper keeps the block input
        saved = tok * np.select([r == _NONE, r == _SEL], [none, sel], full)
        # in a recomputed block's backward, what `none` keeps comes back for that one block
        transient = np.where(r == _NONE, 0.0, tok * none - saved)
        return {"saved": saved, "transient": transient}

    def context_parallel_transient(self, model: ModelSpec, tokens: Any, tp: Any, cp: Any, act_bytes: int) -> Any:
        """[CP] torch's ring attention in one layer's backward (cp > 1), beyond a plain SDPA backward: the all-gathered
        cat(K, V) of the cp ranks (2 cp u_kv c), the fp32 accumulators grad_query, grad_key, grad_value
        (4 (u_q + 2 u_kv)) and the dK/dV rotation's fp32 send and receive buffers (2 x 8 u_kv); u_q = local tokens
        x q_dim / tp, u_kv the same at the K/V width SDPA sees (q_dim with `repeat_kv`, kv_dim otherwise). The
        forward's ring holds the same gathered K/V and an fp32 output (less): the backward is the layer's peak."""
        t, n = np.asarray(tp, dtype=np.float64), np.asarray(cp, dtype=np.float64)
        u_q = tokens * model.q_dim / t
        u_kv = tokens * (model.q_dim if self.repeat_kv else model.kv_dim) / t
        ring = 2 * n * u_kv * act_bytes + 4 * (u_q + 2 * u_kv) + 2 * 8 * u_kv
        return np.where(n > 1, ring, 0.0)

    def first_stage_activations(self, model: ModelSpec, tokens: Any, tp: Any, sp: Any, act_bytes: int) -> Any:
        return ID_BYTES * tokens  # the input ids

    def for_train(self, train: TrainSpec) -> TorchtitanProfile:
        return replace(self, loss_chunks=train.loss_chunks)

    def head_activations(self, model: ModelSpec, tokens: Any, tp: Any, sp: Any, act_bytes: int) -> np.ndarray:
        # [MOD] the final RMSNorm (composite: (8h + 4) per token, SP-sharded [PAR]), the output projection's
        # (gathered) input and the labels
        return tokens * ((8.0 * model.hidden_size + 4) / np.where(sp, tp, 1) + act_bytes * model.hidden_size + ID_BYTES)

    def logits(self, model: ModelSpec, tokens: Any, pp: Any, tp: Any, act_bytes: int) -> np.ndarray:
        # [LOSS] no chunking at any pp: the whole micro-batch's logits, vocab-sharded under TP (loss parallel)
        t = np.asarray(tp, dtype=np.float64)
        per = np.where(t > 1, LOGIT_BYTES_PARALLEL, LOGIT_BYTES_PLAIN)
        if self.loss_chunks:  # [CHUNK] one slice at a time, whose compute-dtype logits the loop keeps through backward
            return self.chunked_loss(model, tokens, pp, tp, act_bytes, per + act_bytes)
        return per * tokens * model.vocab_size / t + self.gathered_at_loss(model, pp, tp, act_bytes)

    def chunked_loss(self, model: ModelSpec, tokens: Any, pp: Any, tp: Any, c: int, per_logit: Any) -> np.ndarray:
        """[CHUNK] The loss phase under ChunkedLossWrapper, L = tokens/N x V/t logits per slice: the fp32
        GradAccumulator (4 h per token: the hidden states replicated on the TP axis) throughout; during the loop
        lm_head's unsharded fp32 gradient (4 V h/t, from the second slice on) and the larger of a slice's loss (`per_logit` x L)
        and its lm_head backward (the slice's logits and their gradient, 2c L, with the fresh compute-dtype weight
        gradient c V h/t); at the last slice FSDP2's reduce-scatter copies the accumulated gradient into its fp32 input
        (_fsdp_collectives.py `foreach_reduce`: 8 V h/t together; as under FSDP, torchtitan's dp_shard > 1); after the
        loop the accumulator's compute-dtype copy (c h per token). Plus lm_head's gathered weight (c V h/t) where the
        reshard policy does not hold it already (gathered_at_loss), and what that policy holds. Measured on CPU (the
        loop without the reduce-scatter): benchmarks/torchtitan_loss_peak.py --chunks."""
        t, h, V = np.asarray(tp, dtype=np.float64), model.hidden_size, model.vocab_size
        tokens = np.asarray(tokens, dtype=np.float64)
        logits = tokens / self.loss_chunks * V / t
        head = c * V * h / t
        loop = 4.0 * V * h / t + np.maximum(per_logit * logits, head + 2.0 * c * logits)
        acc = 4.0 * tokens * h + np.maximum(np.maximum(loop, 8.0 * V * h / t), c * tokens * h)
        weight = np.where((np.asarray(pp) == 1) & (self.reshard_policy != "always"), 0.0, head)
        return acc + weight + self.gathered_at_loss(model, pp, tp, c)

    def gathered_at_loss(self, model: ModelSpec, pp: Any, tp: Any, act_bytes: int) -> np.ndarray:
        """[RAF] Compute-dtype parameters torchtitan's "default" reshard policy keeps gathered while the loss runs
        (pp = 1; under PP `pipeline_held` has the whole stage): "default_units" the [norm, output] unit (V h/t + h),
        "default_root" the root unit (embedding, norm, output: 2 V h/t + h untied) and the last block (its matrices /t
        and two norms). Priced in the loss phase, where the published rows peak: the root unit stays gathered through
        the blocks' backward too (FSDP2 keeps the root unsharded after forward), which this does not add there."""
        t, h = np.asarray(tp, dtype=np.float64), model.hidden_size
        head = model.vocab_size * h / t + h
        block = (model.layer_params() - 2 * h) / t + 2 * h
        root = head + (0.0 if model.tie_embeddings else model.vocab_size * h / t) + block
        held = {"always": 0.0, "default_units": head, "default_root": root}[self.reshard_policy]
        return np.where(np.asarray(pp) == 1, held * act_bytes, 0.0)

    def pipeline_outputs(self, model: ModelSpec, tokens: Any, m: Any, tp: Any, act_bytes: int) -> Any:
        # [PPOUT] the last stage's outputs are the local (vocab-sharded under TP) logits in the compute dtype
        if not self.pp_output_chunks:
            return 0.0
        return (
            np.asarray(m, dtype=np.float64) * tokens * model.vocab_size / np.asarray(tp, dtype=np.float64) * act_bytes
        )

    def loss_kernel(self, arr: dict[str, np.ndarray]) -> np.ndarray:
        """[CLOSS] under plan.compile at tp = 1 the loss is compiled with the model (Inductor: a log-sum-exp reduction
        and one pointwise pass over the bf16 logits, perf_terms.LOSS_KERNELS "fused"); eager, or loss parallel at
        tp > 1, `F.cross_entropy(pred.float())` ("unfused"). A profile with compiled_loss=False (9dec370) never
        compiles it; the speed model reads the default profile, so those rows set train.loss_kernel."""
        comp = np.asarray(arr["compile"], dtype=bool) & (np.asarray(arr["tp"]) == 1) & self.compiled_loss
        return np.where(comp, LOSS_KERNELS.index("fused"), LOSS_KERNELS.index("unfused")).astype(np.int64)

    def compiled_logits(self, model: ModelSpec, tokens: Any, pp: Any, tp: Any, act_bytes: int) -> np.ndarray:
        # [CLOSS] compiled plain cross-entropy (tp=1); loss parallel (tp>1) keeps the eager account: its DTensor
        # log_softmax / nll_loss handlers (torch/distributed/tensor/parallel/loss.py) are not measured under compile
        t = np.asarray(tp, dtype=np.float64)
        plain = self.logits(model, tokens, pp, tp, act_bytes)
        if self.loss_chunks:  # [CHUNK] the inner loss compiled per slice (lm_head is not): its logits + gradient
            compiled = self.chunked_loss(model, tokens, pp, tp, act_bytes, LOGIT_ACT_COPIES_COMPILED * act_bytes)
        else:
            compiled = LOGIT_ACT_COPIES_COMPILED * act_bytes * tokens * model.vocab_size / t
            compiled = compiled + self.gathered_at_loss(model, pp, tp, act_bytes)
        return np.where((t == 1) & self.compiled_loss, compiled, plain)

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
        """[OPT] torchtitan's AdamW is the fused kernel (torchtitan/config/job_config.py `Optimizer.implementation`
        defaults to "fused"): no per-parameter temporaries; FSDP2 has no ZeRO-1 gather buffers either. The step adds
        no large transient block. At 9dec370 (`fused_adamw=False`) it is foreach AdamW, whose fp32 sqrt temporary
        over the rank's parameter shard (1/(dp*cp) at ZeRO 2/3) is bench_model's (autotune/predict/reserved.py)."""
        if self.fused_adamw:
            return fused_adamw_step_temporaries(local_params, zero_stage, shard)
        return reserved.step_temporaries(local_params, zero_stage, shard, False, optimizer_states, largest_param)

    def buffers(self, layer_params: Any, zero_stage: Any, shard: Any, train) -> np.ndarray:
        # [PAR] FSDP2 at a block's post-backward: bench_model's buffers (the block's gathered compute-dtype gradient
        # and its fp32 reduce-scatter input; ZeRO-3 also the block gathered for its backward and the next one
        # prefetched) plus the reduced fp32 gradient shard of the block before it (the probe's SHARDED_GRAD then)
        g = DTYPE_BYTES[train.grad_dtype]
        return BenchModelProfile.buffers(self, layer_params, zero_stage, shard, train) + layer_params * g / np.asarray(
            shard
        )

    def allocated(self, params, grads, optimizer, activations, logits, buffers, transient) -> np.ndarray:
        # Two phases: the loss (every block's saved activations + the loss's tensors; gradients are None after
        # torchtitan's zero_grad, FSDP holds no unsharded block: [PAR]) and the blocks' backward (the loss is freed;
        # FSDP2's per-block buffers, a recomputed block; the peak comes at the first blocks, when only their
        # gradients are reduced, so the gradient term is in `buffers`). The peak is the larger.
        saved = activations - transient
        return params + optimizer + saved + np.maximum(logits, buffers + transient)

    def rules(self) -> tuple:
        return (
            self.rule(
                "moe_dispatcher",
                lambda moe_dispatcher: moe_dispatcher == 1,
                lambda moe_dispatcher: (
                    f"moe_dispatcher={moe_dispatcher}: torchtitan has no all-gather token dispatcher (parallelism.expert_parallel_comm_backend: standard all-to-all, deepep, hybridep)"
                ),
            ),
            self.rule(
                "sp_always",
                lambda tp, sequence_parallel: (tp > 1) & ~np.asarray(sequence_parallel, dtype=bool),
                lambda tp: f"tp={tp} requires sequence_parallel=true: apply_tp always shards the sequence",
            ),
            self.rule(
                "zero1",
                lambda zero_stage, dp, cp: (zero_stage == 1) & (dp * cp > 1),
                lambda zero_stage: (
                    f"zero_stage={zero_stage} is not available: FSDP2 has no optimizer-only sharding (use 0, 2 or 3)"
                ),
            ),
            self.rule(
                "ddp_1d",
                lambda zero_stage, dp, tp, pp, cp: (zero_stage == 0) & (dp > 1) & (tp * pp * cp > 1),
                lambda dp, tp: (
                    f"zero_stage=0 with dp={dp} and tp={tp}: apply_ddp: DDP has not supported > 1D parallelism"
                ),
            ),
            self.rule(
                "amp_off",
                lambda dp, cp, tp, pp, train: (
                    (dp * cp == 1) & ((tp > 1) | (pp > 1)) & (train.compute_dtype != train.param_dtype)
                ),
                lambda tp, pp: (
                    f"tp={tp}, pp={pp} without FSDP (dp*cp=1) requires train.precision=fp32: maybe_enable_amp "
                    "disables mixed precision with TP or PP"
                ),
            ),
            self.rule(
                "loss_chunks_divide_tokens",
                lambda micro_batch_size, cp, train: (
                    (train.loss_chunks > 0)
                    & ((micro_batch_size * train.seq_len // cp) % max(train.loss_chunks, 1) != 0)
                ),
                lambda micro_batch_size, cp, train: (
                    f"train.loss_chunks={train.loss_chunks} does not divide the micro-batch's tokens per rank "
                    f"micro_batch_size*seq_len/cp={micro_batch_size}*{train.seq_len}/{cp}: ChunkedLossWrapper cuts "
                    "them into equal slices"
                ),
            ),
            self.rule(
                "seq_divisor",
                lambda tp, cp, train: train.seq_len % (tp * 2 * cp) != 0,
                lambda tp, cp, train: (
                    f"seq_len={train.seq_len} must be divisible by tp*2*cp={tp}*2*{cp} (ParallelDims.seq_len_divisor)"
                ),
            ),
        )


# torchtitan at 9dec370 (Dec 2024, its llama3_h100_202412 benchmark page): no compiled loss [CLOSS], the pipeline's last
# stage keeps its micro-batches' outputs [PPOUT]; autotune/fitting/published_runs.py prices those rows with it
TORCHTITAN_2024_12 = TorchtitanProfile(
    compiled_loss=False, pp_output_chunks=True, reshard_policy="default_root", fused_adamw=False, repeat_kv=True
)
# torchtitan between 2025-03 and #1094 (820504e, e7c0cae: its June 2025 pages): compiled loss, the root-unit "default"
TORCHTITAN_2025_06 = TorchtitanProfile(reshard_policy="default_root", repeat_kv=True)
# torchtitan's own defaults since #1094 (6fc499f6, 0.2.x) as a published run ran them: "default" reshard policy;
# K/V repeated before SDPA as the 2025 commits the published rows ran (the torchao B200 rows: Oct 2025) [CP]
TORCHTITAN_DEFAULT = TorchtitanProfile(reshard_policy="default_units", repeat_kv=True)
