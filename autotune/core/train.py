"""`TrainSpec`: the training shape and numerics of a job (the `train.*` keys), and the value tables it checks against.
Plain data like autotune/core/types.py, which re-exports everything here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from autotune.core.errors import positive_int, require

# train.cuda_graphs values (autotune/predict/host.py prices them)
CUDA_GRAPHS = ("none", "moe", "attn_moe", "full")

DTYPE_BYTES: dict[str, int] = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
MOE_ROUTINGS: tuple[str, ...] = ("learned", "balanced", "collapsed")
# train.framework: the trainers whose memory accounting and limits autotune models, one profile each
# (autotune/predict/frameworks/, which checks that its PROFILES are exactly these names)
FRAMEWORKS: tuple[str, ...] = ("bench_model", "torchtitan", "megatron", "nanotron", "deepspeed")


@dataclass(frozen=True)
class TrainSpec:
    """Training shape and numerics. `precision` picks defaults for the dtypes below; each dtype can be overridden to
    describe other frameworks' accounting (e.g. the ZeRO paper: bf16 params and grads, fp32 master, fp32 Adam)."""

    seq_len: int
    global_batch_size: int  # sequences per optimizer step
    precision: Literal["bf16", "fp32"] = "bf16"
    param_dtype: str = "fp32"  # dtype of the parameters the trainer stores (sharded by ZeRO-3)
    compute_dtype: str = "bf16"  # dtype of the gathered copy used in matmuls (and of activations)
    grad_dtype: str = "fp32"
    master_dtype: str | None = (
        None  # a separate fp32 master copy (Megatron/DeepSpeed style); None = params are the master
    )
    optimizer: Literal["adamw", "sgd"] = "adamw"
    optimizer_dtype: str = "fp32"
    seed: int = 1234
    lr: float = 3e-4
    framework: str = "bench_model"  # whose memory accounting and limits apply (autotune/predict/frameworks/)
    # MoE token routing: "learned" = the router's own top-k; "balanced" = every expert gets the same number of token
    # copies regardless of the scores (NVIDIA's published MoE benchmarks: "force-balanced, no token drop"), so a
    # benchmark does not depend on an untrained router; "collapsed" = a learned router that has collapsed onto one EP
    # rank's experts (the busiest rank receives every copy its local experts can take: autotune/predict/moe.py
    # `collapsed_imbalance`), what a published run's own figures show (autotune/fitting/public_moe_runs.py)
    moe_routing: str = "learned"
    # Megatron's --hidden-dropout (the embedding's and the two bias-dropout-adds' probability; TransformerConfig default
    # 0.1, megatron/core/transformer/transformer_config.py): with p > 0 each keeps a 1-byte mask per element, with p = 0
    # torch's dropout returns its input and keeps none (aten/src/ATen/native/Dropout.cpp `_dropout_impl`). Read by
    # the megatron profile only (bench_model and the other profiles run no dropout).
    hidden_dropout: float = 0.1
    # causal attention kernel the job runs (attention_terms.attention_s): "fa2" (FlashAttention-2 class), "fa3"
    # (FlashAttention-3 / cuDNN) or "triton" (FlashAttention in Triton, llm-foundry's attn_impl=triton); None = the
    # framework's (FrameworkProfile.attention_kernel)
    attention_kernel: str | None = None
    # the loss kernel the job runs over the LM head's logits (the speed model: head GEMM passes and the loss kernels'
    # HBM bytes, perf_terms.LOSS_KERNELS): unfused | fused | fused_eager | checkpointed; None = the framework's
    # (FrameworkProfile.loss_kernel: bench_model picks by pp / tp / compile, the others unfused)
    loss_kernel: str | None = None
    # torchtitan's ChunkedLossWrapper (components/loss.py, torchtitan main since 2026-06; the models' config_registry
    # entries use it with num_chunks=8): the LM head and loss run on N slices of the micro-batch's tokens, each
    # backpropagated before the next, so only one slice's logits exist at a time (autotune/predict/frameworks/
    # torchtitan.py [CHUNK]). 0 = one pass over all tokens (torchtitan 0.2.2, the package). Read by the torchtitan
    # profile only.
    loss_chunks: int = 0
    # whether K and V enter SDPA repeated to the query heads (the model's repeat_kv before SDPA, as torchtitan's
    # llama3 did from 9dec370 to #2259, Jan 2026) instead of at the KV heads (enable_gqa): the width torch's ring
    # attention moves and accumulates (autotune/predict/ring_attention.py); None = the framework's
    # (FrameworkProfile.sdpa_repeats_kv)
    sdpa_repeat_kv: bool | None = None
    # how the block linears' FP8 operands are cast (perf.py): "te" (Transformer Engine modules: fused cast-transposes,
    # perf_terms.te_fp8_cast_bytes) or "torchao" (per-linear casts, perf_terms.fp8_cast_bytes); None = the framework's
    # (FrameworkProfile.fp8_casts). llm-foundry's amp_fp8 rows are TE (composer/core/precision.py: te.fp8_autocast).
    fp8_casts: str | None = None
    # Megatron's --fp8-param-gather (DistributedDataParallelConfig.fp8_param_gather: "keep the compute param in fp8 ...
    # and perform the param all-gather in fp8"), which NVIDIA's FP8 recipes set (Megatron-Bridge training/
    # mixed_precision.py: the delayed, current-scaling and MXFP8 recipes; not NVFP4's): the block linears' weights
    # are stored as Transformer Engine quantized tensors instead of bf16 (FrameworkProfile.stored_weight_bytes) and
    # gathered as such (gather_weight_bytes), where the layout runs an FP8 recipe (plan.fp8 tensorwise / mxfp8).
    # Read by the megatron profile only.
    fp8_param_gather: bool = False
    # Transformer Engine's DelayedScaling recipe for plan.fp8=tensorwise (Megatron --fp8-recipe delayed: scales from an
    # amax history) instead of per-tensor current scaling (--fp8-recipe tensorwise, what NVIDIA's recipes run since
    # Megatron-Bridge's FP8-CS): Megatron-Core keeps the quantized copies of the attention projection's and the shared
    # expert's inputs only under it (transformer/attention.py, moe/shared_experts.py @ core_v0.16.1: their
    # set_save_original_input for other recipes on Transformer Engine >= 2.6). The profile describes that release:
    # Megatron-Core before core_v0.14.0 keeps the copies under every recipe, which is not modelled (the older published
    # rows ran delayed scaling anyway: NeMo 1.x fp8_hybrid, NeMo 2.0's perf scripts' default "ds", MLPerf v5.0's
    # conf default). Read by the megatron profile only.
    fp8_delayed_scaling: bool = False
    # The fp32 master weights kept as their trailing 16 bits (int16) next to the bf16 params, from which the fp32 value
    # is rebuilt: 2 bytes per parameter instead of 4, sharded with the optimizer states. Apex DistributedFusedAdam's
    # store_param_remainders (apex/contrib/optimizers/distributed_fused_adam.py @ f3f04924 StateBucket:
    # param_remainders_shard, dtype=torch.int16), which NeMo 1.x sets for bf16 O2 models with an fp32 optimizer and no
    # fp8_params (nemo/collections/nlp/models/language_modeling/megatron_base_model.py @ r2.0.0rc1 / v1.23.0
    # `setup_optimization`: store_params=False, store_param_remainders=True); Megatron-Core's precision-aware optimizer
    # has the same (OptimizerConfig.store_param_remainders). Read by the megatron profile only.
    master_remainders: bool = False
    # CUDA graphs the job captures (autotune/predict/host.py CUDA_GRAPHS; Megatron-Core --cuda-graph-impl and its
    # scopes): "none"; "moe" = transformer_engine graphs of the scopes moe_router + moe_preprocess; "attn_moe" = attn
    # as well; "full" = full_iteration. A captured scope costs the host one launch instead of its ops. Megatron only.
    cuda_graphs: str = "none"
    # Megatron's loss kernel (--cross-entropy-loss-fusion, --cross-entropy-fusion-impl; megatron/core/
    # model_parallel_config.py): "none" (vocab_parallel_cross_entropy) and "native" (fused_vocab_parallel_cross_entropy)
    # keep fp32 softmax probabilities for backward, "te" (Transformer Engine's parallel_cross_entropy) writes the
    # gradient into the bf16 logits in place and keeps only them. Read by the megatron profile only (its `logits`).
    cross_entropy_fusion: str = "none"
    # Transformer Engine's fused grouped MLP for the routed experts (Megatron-Core use_transformer_engine_op_fuser with
    # NVTE_CUTEDSL_FUSED_GROUPED_MLP=1; NVIDIA/TransformerEngine transformer_engine/pytorch/ops/fused/grouped_mlp.py @
    # d0067d0, first #2769 2026-04-03 "GEMM + Swiglu fused Grouped MLP for MXFP8"): fc1, the gated activation and fc2
    # run as cuDNN-frontend CuTe DSL grouped GEMMs whose epilogues apply the activation (SwiGLU, GPT-OSS's clamped
    # GeGLU), the router probabilities and the MXFP8 / NVFP4 quantization, and in backward the dGLU (+ dbias). TE
    # fuses only under an MXFP8 / NVFP4 recipe on compute capability 10.x (`fuse_grouped_mlp_ops`, `is_supported`):
    # priced where plan.fp8 is mxfp8 or nvfp4 (autotune/predict/perf_moe.py). Megatron only.
    fused_grouped_mlp: bool = False
    # FP8 attention (Megatron --fp8-dot-product-attention, Megatron-Bridge mixed_precision.fp8_dot_product_attention;
    # TE DotProductAttention with the recipe's fp8_dpa: cuDNN FusedAttention runs QK^T and PV on FP8 operands,
    # transformer_engine/pytorch/attention/dot_product_attention/utils.py @ d0067d0, which keeps FusedAttention for
    # learnable-sink softmax in FP8 on compute capability >= 10.0 with cuDNN >= 9.21): the attention matmuls run at
    # the FP8 tensor-core peak where plan.fp8 runs a recipe (autotune/predict/perf.py), the softmax as before. Megatron only.
    fp8_attention: bool = False
    # Megatron's deferred output-layer weight gradient (--defer-embedding-wgrad-compute with --wgrad-deferral-limit N;
    # TransformerConfig.defer_embedding_wgrad_compute / wgrad_deferral_limit): the last pipeline stage keeps the
    # output layer's input (embedding_activation_buffer, megatron/core/tensor_parallel/layers.py ColumnParallelLinear
    # .forward) and its gradient (grad_output_buffer, LinearWithGradAccumulationAndAsyncCommunication.backward) of up
    # to N micro-batches and runs their weight-gradient GEMMs in the pipeline flush (megatron/core/pipeline_parallel/
    # schedules.py finish_embedding_wgrad_compute). The number of micro-batches N; 0 = not deferred (Megatron's own
    # limit 0 means "all": write the step's micro-batch count). MLPerf's Llama 3.1 405B submissions set 50. Read by
    # the megatron profile only, at pp > 1 (the pipelined schedules drain the buffers).
    embedding_wgrad_deferral: int = 0
    # Megatron's multi-token prediction (--mtp-num-layers; DeepSeek-V3, arXiv 2412.19437 Sec 2.2): N MTP modules after
    # the decoder, each the next tokens' embedding, two RMSNorms, a 2h -> h projection (eh_proj), one transformer
    # layer of the decoder's last kind and the shared output head with its own loss (megatron/core/transformer/
    # multi_token_prediction.py; megatron/core/models/gpt/gpt_model.py `_postprocess` @ core_v0.16.1). The stage
    # holding them builds its own embedding copy. NVIDIA's DeepSeek-V3 recipes set 1. Megatron only.
    mtp_num_layers: int = 0
    # Megatron's --pipeline-model-parallel-layout: which stage holds the embedding, which decoder layers, the MTP
    # modules and the loss, e.g. "Et*4|(t*4|)*14tmL" (autotune/core/pp_layout.py); None = Megatron's even split
    # (with plan.pp_split_embedding / pp_split_loss). Its stage count fixes pp * vpp (rule pp_layout_stages).
    # Megatron only.
    pp_layout: str | None = None

    def __post_init__(self) -> None:
        positive_int("train.seq_len", self.seq_len)
        require(
            isinstance(self.mtp_num_layers, int)
            and not isinstance(self.mtp_num_layers, bool)
            and self.mtp_num_layers >= 0
            and (self.mtp_num_layers == 0 or self.framework == "megatron"),
            f"train.mtp_num_layers={self.mtp_num_layers!r} with train.framework={self.framework}: must be an integer "
            ">= 0, > 0 only for Megatron-Core (--mtp-num-layers; the other trainers build no MTP module)",
        )
        require(
            self.pp_layout is None or self.framework == "megatron",
            f"train.pp_layout={self.pp_layout!r} with train.framework={self.framework}: only Megatron-Core takes a "
            "custom pipeline layout (--pipeline-model-parallel-layout)",
        )
        if self.pp_layout is not None:
            from autotune.core.pp_layout import parse_pp_layout

            parse_pp_layout(self.pp_layout)
        require(
            isinstance(self.embedding_wgrad_deferral, int)
            and not isinstance(self.embedding_wgrad_deferral, bool)
            and self.embedding_wgrad_deferral >= 0
            and (self.embedding_wgrad_deferral == 0 or self.framework == "megatron"),
            f"train.embedding_wgrad_deferral={self.embedding_wgrad_deferral!r} with train.framework={self.framework}: "
            "must be a micro-batch count >= 0 (0 = off), > 0 only for Megatron-Core (--defer-embedding-wgrad-compute)",
        )
        require(
            isinstance(self.fp8_attention, bool) and (not self.fp8_attention or self.framework == "megatron"),
            f"train.fp8_attention={self.fp8_attention!r} with train.framework={self.framework}: must be true or "
            "false, true only for Megatron-Core (--fp8-dot-product-attention)",
        )
        require(
            isinstance(self.fused_grouped_mlp, bool) and (not self.fused_grouped_mlp or self.framework == "megatron"),
            f"train.fused_grouped_mlp={self.fused_grouped_mlp!r} with train.framework={self.framework}: must be true "
            "or false, true only for Megatron-Core (Transformer Engine's op fuser)",
        )
        require(
            self.cuda_graphs in CUDA_GRAPHS,
            f"train.cuda_graphs={self.cuda_graphs!r} must be one of {', '.join(CUDA_GRAPHS)}",
        )
        require(
            self.cuda_graphs == "none" or self.framework == "megatron",
            f"train.cuda_graphs={self.cuda_graphs} with train.framework={self.framework}: only Megatron-Core "
            "captures CUDA graphs (--cuda-graph-impl); this framework runs eager",
        )
        require(
            self.cross_entropy_fusion in ("none", "native", "te")
            and (self.cross_entropy_fusion == "none" or self.framework == "megatron"),
            f"train.cross_entropy_fusion={self.cross_entropy_fusion!r} must be none, native or te (native / te: "
            f"Megatron-Core's fused losses, train.framework=megatron; framework={self.framework})",
        )
        require(
            isinstance(self.fp8_param_gather, bool),
            f"train.fp8_param_gather={self.fp8_param_gather!r} must be true or false",
        )
        require(
            not self.fp8_param_gather or self.framework == "megatron",
            f"train.fp8_param_gather=True with train.framework={self.framework}: Megatron-Core's --fp8-param-gather "
            "needs train.framework=megatron",
        )
        require(
            isinstance(self.fp8_delayed_scaling, bool)
            and (not self.fp8_delayed_scaling or self.framework == "megatron"),
            f"train.fp8_delayed_scaling={self.fp8_delayed_scaling!r} with train.framework={self.framework}: must be "
            "true or false, true only for Megatron-Core (--fp8-recipe delayed)",
        )
        require(
            isinstance(self.master_remainders, bool),
            f"train.master_remainders={self.master_remainders!r} must be true or false",
        )
        require(
            not self.master_remainders
            or (self.framework == "megatron" and self.param_dtype == "bf16" and self.master_dtype == "fp32"),
            f"train.master_remainders=True with framework={self.framework}, param_dtype={self.param_dtype}, "
            f"master_dtype={self.master_dtype}: 16-bit remainders rebuild an fp32 master from bf16 params "
            "(train.framework=megatron, param_dtype=bf16, master_dtype=fp32)",
        )
        require(
            isinstance(self.hidden_dropout, (int, float)) and 0.0 <= float(self.hidden_dropout) < 1.0,
            f"train.hidden_dropout={self.hidden_dropout!r} must be a probability in [0, 1)",
        )
        require(
            self.attention_kernel in (None, "fa2", "fa3", "triton"),
            f"train.attention_kernel={self.attention_kernel!r} must be one of fa2, fa3, triton (or null: the "
            "framework's)",
        )
        require(
            self.loss_kernel in (None, "unfused", "fused", "fused_eager", "checkpointed"),
            f"train.loss_kernel={self.loss_kernel!r} must be one of unfused, fused, fused_eager, checkpointed (or "
            "null: the framework's)",
        )
        require(
            isinstance(self.loss_chunks, int)
            and not isinstance(self.loss_chunks, bool)
            and self.loss_chunks >= 0
            and (self.loss_chunks == 0 or self.framework == "torchtitan"),
            f"train.loss_chunks={self.loss_chunks!r} with train.framework={self.framework}: must be an integer >= 0, "
            "above 0 only for torchtitan (ChunkedLossWrapper's num_chunks)",
        )
        require(
            self.sdpa_repeat_kv in (None, True, False),
            f"train.sdpa_repeat_kv={self.sdpa_repeat_kv!r} must be true, false or null (the framework's)",
        )
        require(
            self.fp8_casts in (None, "te", "torchao"),
            f"train.fp8_casts={self.fp8_casts!r} must be one of te, torchao (or null: the framework's)",
        )
        positive_int("train.global_batch_size", self.global_batch_size)
        require(
            self.precision in ("bf16", "fp32"),
            f"train.precision={self.precision!r} must be one of bf16, fp32 (FP8 linears: plan.fp8=tensorwise|rowwise)",
        )
        for f in ("param_dtype", "compute_dtype", "grad_dtype", "optimizer_dtype"):
            require(
                getattr(self, f) in DTYPE_BYTES,
                f"train.{f}={getattr(self, f)!r} must be one of {', '.join(DTYPE_BYTES)}",
            )
        require(
            self.master_dtype is None or self.master_dtype in DTYPE_BYTES,
            f"train.master_dtype={self.master_dtype!r} must be null or one of {', '.join(DTYPE_BYTES)}",
        )
        require(
            self.moe_routing in MOE_ROUTINGS,
            f"train.moe_routing={self.moe_routing!r} must be one of {', '.join(MOE_ROUTINGS)}",
        )
        require(
            self.framework in FRAMEWORKS,
            f"train.framework={self.framework!r} must be one of {', '.join(FRAMEWORKS)}",
        )

    @property
    def global_batch_tokens(self) -> int:
        return self.global_batch_size * self.seq_len

    @property
    def optimizer_states(self) -> int:
        return 2 if self.optimizer == "adamw" else 0  # Adam: exp_avg, exp_avg_sq (Kingma & Ba 2015)
