"""The nanotron profile (docs/frameworks.md): huggingface/nanotron's Llama trainer as HF's bench_cluster drives it.

Which nanotron: bench_cluster pins nanotron by branch, not by commit (huggingface/bench_cluster
Dockerfile.bench_cluster and bench_cluster/template/base_bench.slurm @ aef070f8: `git checkout bench_cluster`); its
config (bench_cluster/template/base_config.py @ 8dd6e520) sets tp_mode REDUCE_SCATTER,
tp_linear_async_communication false, pp_engine 1f1b, zero_stage 1, accumulate_grad_in_fp32 true, recompute_layer
false, MHA (num_key_value_heads = num_attention_heads). The stored index holds no commit of that branch, so the code
below is read from the closest published release, the nanotron 0.4 wheel (PyPI; line numbers `[file:line]` refer to
it, paths under nanotron/), and the recompute switch from huggingface/nanotron @ 19f88fbe
(config/parallelism_config.py `recompute_layer`: the whole decoder layer under checkpoint, bench_cluster's key).

Per-layer saved activations per token (c = activation bytes, t = tp, /t' = /t only with tp_mode REDUCE_SCATTER):
  two TritonRMSNorm [nn/layer_norm.py:24-50] = flash-attn's triton rms_norm: each saves its input and an fp32 rstd
    per row: 2(ch + 4)/t'.
  qkv_proj and gate_up_proj, synchronous column linears [parallel/tensor_parallel/functional.py:341-359]: the input
    is all-gathered (REDUCE_SCATTER) or identity (ALL_REDUCE) before F.linear, which saves the full-sequence input:
    2ch, not /t (the async path, not used by bench_cluster, would save the shard).
  attention [models/llama.py:542-582]: q (contiguous copy; with MHA a view of the [3, b, s, h, d] qkv copy at :378,
    which keeps all 3 alive), key/value as one tensor from torch.cat + permute (:547), rotary in place
    (flash-attn RotaryEmbedding, :550), flash_attn_varlen_func [:213] saves q, k, v, out and the fp32 logsumexp;
    o_proj's input is a view of out: c(q + 2k + q)/t + 4a/t (MHA: c(3q + 2k + q)/t + 4a/t).
  MLP [models/llama.py:127-180]: gate_up output (2f; silu's saved input is a view of it), the unfused silu output
    (f, saved by the product) and the product (f, down_proj's input): 4cf/t.
  o_proj at mbs > 1 (branch bench_cluster @ a27e8fe8, models/llama.py:596-598): its input is flash-attn's output
    viewed [b, s, h/t] then transposed to [s, b, h/t]; F.linear on that non-contiguous 3-D input goes through
    at::matmul, which folds it with reshape (a copy unless b = 1) and saves the copy for the weight gradient
    (aten/src/ATen/native/LinearAlgebra.cpp _matmul_impl; measured with saved_tensors_hooks, torch 2.13 CPU, in
    tests/unit/test_nanotron_profile.py): c q/t more per token when mbs > 1, next to the out that flash-attn saves
    (bench_cluster's torch 2.1 / 2.3, requirements.txt and the NGC 24.04 image, not run here).
  recompute_layer: the layer's input (ch/t') is kept, one layer's activations exist again during its backward.
No dropout and no s^2 scores (flash attention).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from autotune.core.model import ModelSpec
from autotune.core.plan_arrays import RECOMPUTE_CODE, SCHEDULE_CODE
from autotune.core.types import DTYPE_BYTES, TrainSpec
from autotune.predict import moe, reserved
from autotune.predict.frameworks.base import FrameworkProfile, Overlaps, state_inputs
from autotune.predict.frameworks.bench_model import BenchModelProfile
from autotune.predict.frameworks.nanotron_split import nanotron_empty_ranks, nanotron_layers_of_rank

_AFAB = SCHEDULE_CODE["gpipe"]  # nanotron's all-forward-all-backward engine (the exporter writes pp_engine: afab)


def nanotron_layer_bytes_per_token(model: ModelSpec, tp: Any, sp: Any, act_bytes: int, mbs: Any = 1) -> np.ndarray:
    """What one nanotron Llama decoder layer saves per token (module docstring, term by term)."""
    t = np.asarray(tp, dtype=np.float64)
    sp_div = np.where(np.asarray(sp, dtype=bool), t, 1.0)
    c, h, q, k, f = act_bytes, model.hidden_size, model.q_dim, model.kv_dim, model.ffn_hidden_size
    mha = model.num_kv_heads == model.num_heads  # llama.py:290 is_gqa; MHA keeps the whole qkv copy via q
    q_saved = 3 * q if mha else q
    norms = 2.0 * (c * h + 4.0) / sp_div
    column_inputs = 2.0 * c * h
    o_proj_copy = np.where(np.asarray(mbs) > 1, q, 0)  # the folded copy of o_proj's transposed input (docstring)
    attention = (c * (q_saved + 2 * k + q + o_proj_copy) + 4.0 * model.num_heads) / t
    mlp = 4.0 * c * f / t
    return norms + column_inputs + attention + mlp


@dataclass(frozen=True)
class NanotronProfile(FrameworkProfile):
    name: str = "nanotron"
    # nanotron's 1F1B asserts m >= pp - 1 only (engine.py:236-238); its own rule below replaces torch's m >= pp.
    # tp_linear_async_communication (plan.tp_overlap) is nanotron's own autograd function: no torch.compile involved
    replaces_rules: frozenset[str] = frozenset({"pp_microbatches", "tp_overlap_needs_compile"})
    compiled_dispatch: bool = False  # base.FrameworkProfile: plan.compile is not torch.compile here
    allocated = BenchModelProfile.allocated  # every term at once (a conservative sum over the step's phases)

    def attention_kernel(self) -> str:
        """nanotron's Llama calls the flash-attn 2 package (flash_attn_varlen_func): "fa2"."""
        return "fa2"

    def fp8_casts(self) -> str:
        """nanotron's FP8 path is not modelled apart: its per-linear casts are priced as torchao's."""
        return "torchao"

    def overlaps(self) -> Overlaps:
        """nanotron: torch DDP (bucketed all-reduce hooks during backward); its ZeroDistributedOptimizer all-gathers
        the updated shards after the step (nanotron/optim/zero.py), not overlapped."""
        return Overlaps(grad_reduce=True, param_gather=False, fsdp_prefetch=True, zero1_reduce_scatter=False)

    def model_states(
        self, num_params: Any, zero_stage: Any, shard: Any, train: TrainSpec, offload: Any = 0
    ) -> dict[str, np.ndarray]:
        psi, z, d, c, master, o = state_inputs(num_params, zero_stage, shard, train)
        # bf16 .grad of every parameter, alive to the end of each backward (optim/gradient_accumulator.py:212-223
        # adds it into the fp32 buffer, then sets it to None); the fp32 accumulation buffer of ALL parameters, also
        # with ZeRO-1 (gradient_accumulator.py:158-173, helpers.py:186-188 grad_buckets_named_params=all);
        # DistributedDataParallel's reducer buckets in the param dtype when dp > 1 (trainer.py:608 make_ddp,
        # :669-674 bucket_cap_mb=ddp_bucket_cap_mb; torch DDP allocates one flat bucket buffer per bucket)
        accum = 4.0 if c != 4 else 0.0
        grads = psi * (c + accum + np.where(d > 1, c, 0.0))
        # fp32 master copy of the parameters this rank updates (gradient_accumulator.py:95) + AdamW's two fp32 states;
        # ZeroDistributedOptimizer (helpers.py:202-207) hands the optimizer its dp slice only
        optimizer = psi * (master + o) / np.where(z >= 1, d, 1.0)
        return {
            "params": psi * c,
            "compute_copy": np.zeros_like(psi * z),
            "grads": grads,
            "optimizer": optimizer,
            "host": np.zeros_like(psi * z * np.asarray(offload)),  # no CPU offload (rule below)
        }

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
        """nanotron's AdamW is the fused kernel (bench_cluster template/base_config.py @ 8dd6e520 sets
        optimizer_factory.torch_adam_is_fused: true, which helpers.py:340 passes as fused=): no per-parameter
        temporaries. Its ZeRO-1 (optim/zero.py:217-247 ZeroDistributedOptimizer._all_gather_params) gathers the updated
        bf16 slices with nanotron's distributed.all_gather_coalesced (distributed.py:157-215), which flattens the
        inputs into one buffer (Psi/D) and the outputs into one buffer per rank (D x Psi/D) before copying back: c
        Psi (1 + 1/D) bytes of the parameters' dtype, at ZeRO-1 with dp > 1 (huggingface/nanotron branch
        bench_cluster @ a27e8fe8, the one bench_cluster checks out)."""
        psi, z, d = (np.asarray(x, dtype=np.float64) for x in (local_params, zero_stage, shard))
        c = DTYPE_BYTES[train.compute_dtype] if train is not None else 2
        out = np.where((z == 1) & (d > 1), reserved.round_large(c * psi / d), 0.0)  # the flat input buffer
        return out + np.where((z == 1) & (d > 1), d * reserved.round_large(c * psi / d), 0.0)  # D output buffers

    def root_copy(self, root_params: Any, zero_stage: Any, train: TrainSpec) -> np.ndarray:
        return np.zeros(np.shape(np.asarray(zero_stage)))  # params are the working weights, never gathered

    def layer_activations(
        self, model: ModelSpec, seq: Any, mbs: Any, tp: Any, sp: Any, recompute: Any, act_bytes: int
    ) -> dict[str, np.ndarray]:
        tok = np.asarray(seq, dtype=np.float64) * np.asarray(mbs, dtype=np.float64)
        layer = tok * nanotron_layer_bytes_per_token(model, tp, sp, act_bytes, mbs)
        sp_div = np.where(np.asarray(sp, dtype=bool), np.asarray(tp, dtype=np.float64), 1.0)
        full = tok * act_bytes * model.hidden_size / sp_div  # recompute_layer keeps the layer input
        is_full = np.asarray(recompute) != RECOMPUTE_CODE["none"]  # selective is rejected (rules)
        return {"saved": np.where(is_full, full, layer), "transient": np.where(is_full, layer, 0.0)}

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
        # the generic MoE-layer estimate (moe.py), without bench_model's ep/etp/mbs refinements: ep, etp and mbs are
        # accepted for the hook's signature (FrameworkProfile.moe_layer_activations) and not used
        return moe.moe_layer_extra_activation_bytes(model, tokens, tp, sp, recompute, act_bytes)

    def first_stage_activations(self, model: ModelSpec, tokens: Any, tp: Any, sp: Any, act_bytes: int) -> Any:
        return 0.0  # the embedding output is layer 0's input, saved by its input_layernorm (counted there)

    def head_activations(self, model: ModelSpec, tokens: Any, tp: Any, sp: Any, act_bytes: int) -> np.ndarray:
        # final TritonRMSNorm: input + fp32 rstd (/t with SP); lm_head, a synchronous column linear, saves its
        # all-gathered input (llama.py:713-738, functional.py:341-359)
        sp_div = np.where(np.asarray(sp, dtype=bool), np.asarray(tp, dtype=np.float64), 1.0)
        return tokens * ((act_bytes * model.hidden_size + 4.0) / sp_div + act_bytes * model.hidden_size)

    def logits(self, model: ModelSpec, tokens: Any, pp: Any, tp: Any, act_bytes: int) -> np.ndarray:
        """The loss's largest moment, per logit of the whole micro-batch (n*V/t, no chunking), branch bench_cluster @
        a27e8fe8: at the forward's end the fp32 logits of cast_to_fp32 (models/llama.py:808; `.float()` saves nothing,
        the bf16 logits are gone once LlamaModel.forward returns) stay referenced by LlamaForTraining.forward
        (:912-916) while _ShardedCrossEntropy.forward subtracts the max into a new fp32 tensor (functional.py:44),
        exponentiated and normalised in place and saved (:75-86): 4 + 4 bytes. The backward then holds the softmax
        reused as its gradient (:96) and the bf16 gradient into lm_head: 4 + c <= 8. So 8 bytes per logit, at the
        forward's end (FrameworkProfile.backward_only_grads: nanotron's peak is the larger of that end and a
        backward's end)."""
        return 8.0 * tokens * model.vocab_size / np.asarray(tp, dtype=np.float64)

    def backward_only_grads(self, num_params: Any, train: TrainSpec) -> Any:
        """The bf16 .grad of every parameter: autograd allocates each during a micro-batch's backward and
        FP32GradientAccumulator.backward (optim/gradient_accumulator.py:204-223, branch bench_cluster @ a27e8fe8)
        adds it into the fp32 buffer and sets it to None right after that backward (engine.py:86 calls it per
        micro-batch): not alive at any forward's end. Without accumulate_grad_in_fp32 (fp32 compute: no
        accumulator) the grads stay."""
        c = DTYPE_BYTES[train.compute_dtype]
        return np.asarray(num_params, dtype=np.float64) * (c if c != 4 else 0.0)

    def buffers(self, layer_params: Any, zero_stage: Any, shard: Any, train: TrainSpec) -> np.ndarray:
        # DDP's buckets cover the whole model and are counted in model_states' grads
        return np.zeros(np.broadcast(np.asarray(layer_params), np.asarray(zero_stage)).shape)

    def inflight(self, pp: Any, vpp: Any, m: Any, schedule: Any, rank: Any) -> np.ndarray:
        # afab (engine.py:165-219): every micro-batch forward first, so all m in flight, also at pp=1 (the trainer
        # always runs the engine); 1f1b (engine.py:222-330): pp - rank - 1 warm-up forwards (:249) then one forward
        # before each backward, min(pp - rank, m)
        pp, m, sch, r = (np.asarray(x, dtype=np.float64) for x in (pp, m, schedule, rank))
        one_f_one_b = np.where(pp == 1, 1.0, np.minimum(pp - r, m))
        return np.where(sch == _AFAB, m, one_f_one_b)

    def pipeline_layers(self, model: ModelSpec, pp: Any, vpp: Any, rank: Any, embed: Any = False, loss: Any = False):
        """nanotron's compute-balanced split (nanotron_split.py): rank 0 takes the ceiling of its cost share, the
        lm_head's V h takes layers off the last ranks. MoE models keep the even split (nanotron's Llama has no MoE
        blocks; what a MoE block costs in its walk is not read here). Megatron's split accounting is rejected
        elsewhere (megatron-only knobs)."""
        if model.is_moe:
            return super().pipeline_layers(model, pp, vpp, rank, embed, loss)
        return nanotron_layers_of_rank(model, pp, rank)

    def last_stage_inflight(self, pp: Any, m: Any, schedule: Any) -> np.ndarray:
        # afab keeps every micro-batch's loss graph (engine.py:54 stores each loss for the backward pass): the head
        # activations and fp32 softmax of all m micro-batches on the last stage
        sch, m = np.asarray(schedule), np.asarray(m, dtype=np.float64)
        return np.where(sch == _AFAB, m, 1.0) * np.ones(np.broadcast(np.asarray(pp), m, sch).shape)

    def rules(self) -> tuple:
        return (
            self.rule(
                "moe_dispatcher",
                lambda moe_dispatcher: moe_dispatcher != 0,
                lambda moe_dispatcher: (
                    f"moe_dispatcher={moe_dispatcher}: nanotron 0.4's MoE dispatches with its own all-to-all only; moe_dispatcher must be alltoall"
                ),
            ),
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
            self.rule(
                "selective",
                lambda recompute: recompute == RECOMPUTE_CODE["selective"],
                lambda recompute: (
                    f"recompute={recompute}: nanotron recomputes whole layers only "
                    "(ParallelismArgs.recompute_layer); recompute must be none or full"
                ),
            ),
            self.rule(
                "pp_blocks",
                lambda pp, model: (not model.is_moe) & (nanotron_empty_ranks(model, pp) > 0),
                lambda pp, model: (
                    f"pp={pp}: nanotron's compute-balanced split (lm_head counted as V*h = "
                    f"{model.vocab_size * model.hidden_size:,}) leaves {int(nanotron_empty_ranks(model, pp))} pipeline "
                    "rank(s) without a block (models/base.py build_model; bench_cluster skips these layouts)"
                ),
            ),
            self.rule(
                "pp_microbatches",
                lambda pp_schedule, pp, grad_accum_steps: (
                    (pp_schedule == SCHEDULE_CODE["1f1b"]) & (pp > 1) & (grad_accum_steps < pp - 1)
                ),
                lambda grad_accum_steps, pp: (
                    f"grad_accum_steps={grad_accum_steps} < pp-1={pp - 1}: nanotron's 1f1b engine asserts "
                    "batch_accumulation_per_replica >= pp - 1"
                ),
            ),
        )
