"""Megatron-LM command-line arguments, flag names of Megatron-LM core_r0.12.0 (`megatron/training/arguments.py`):
parallelism (--tensor-model-parallel-size, --pipeline-model-parallel-size, --context-parallel-size,
--num-layers-per-virtual-pipeline-stage or, for an uneven split, --decoder-first/last-pipeline-num-layers or
--pipeline-model-parallel-layout, --sequence-parallel, --use-distributed-optimizer, --use-megatron-fsdp),
batch (--micro-batch-size, --global-batch-size), recompute (--recompute-granularity full|selective,
--recompute-method, --recompute-num-layers) and the Llama model dims (--num-layers, --hidden-size, --ffn-hidden-size,
--num-attention-heads, --group-query-attention/--num-query-groups, --kv-channels, --qk-layernorm, --swiglu, --normalization RMSNorm,
--position-embedding-type rope, --rotary-base, --disable-bias-linear, --untie-embeddings-and-output-weights).

The file holds one `--flag [value]` per line and `#` comments: `shlex.split(text, comments=True)` gives the argv,
e.g. `torchrun ... pretrain_gpt.py $(grep -v '^#' megatron.args) <data/tokenizer args>`.
Megatron derives the data-parallel size as world_size / (tp * pp * cp), so the launch must use exactly world_size ranks.
"""

from __future__ import annotations

from autotune.core.model import ModelSpec
from autotune.core.types import ClusterSpec, ParallelPlan, TrainSpec
from autotune.interop._common import (
    Export,
    ExportContext,
    apply_tables,
    comment_block,
    header_lines,
    skip_not_mapped,
    skip_train,
    window_label,
    window_skip_freq,
)
from autotune.interop.plan_keys import TABLES
from autotune.interop.train_keys import TRAIN_TABLES

TARGET = "Megatron-LM core_r0.12.0 (megatron/training/arguments.py; pretrain_gpt.py)"
PLAN_KEYS = TABLES["megatron"]  # autotune/interop/plan_keys.py
TRAIN_KEYS = TRAIN_TABLES["megatron"]  # autotune/interop/train_keys.py


def translate(ctx: ExportContext) -> Export:
    ex = Export(
        target=TARGET,
        body=[],
        notes=[
            f"Launch with {ctx.world_size} ranks ({ctx.num_nodes} x {ctx.gpus_per_node}): Megatron derives "
            f"data-parallel size = world_size / (tp*pp*cp) = {ctx.plan.dp}.",
            "Megatron-LM's validate_args requires CUDA_DEVICE_MAX_CONNECTIONS=1 with tp > 1 or cp > 1 before "
            "Blackwell, except under Megatron-FSDP (set it in the launch environment).",
            "Add your data and tokenizer arguments; --vocab-size applies to the NullTokenizer (a real tokenizer "
            "sets the vocabulary, padded by --make-vocab-size-divisible-by).",
        ],
    )
    skip_not_mapped(ex, ctx.plan, PLAN_KEYS, handled=("pp_schedule",))  # interleaved_1f1b maps; gpipe: below
    skip_train(ex, ctx, TRAIN_KEYS, maps_moe_routing=True)  # balanced: _moe_args
    argv: list[list[str]] = []
    argv += _model_args(ctx, ex)
    argv += _parallel_args(ctx, ex)
    argv += [
        ["--micro-batch-size", str(ctx.plan.micro_batch_size)],
        ["--global-batch-size", str(ctx.global_batch_size)],
    ]
    argv += _recompute_args(ctx)
    if ctx.plan.moe_offload != "none":  # arguments.py --fine-grained-activation-offloading, --offload-modules (nargs +)
        argv += [["--fine-grained-activation-offloading"], ["--offload-modules", *ctx.plan.moe_offload.split("+")]]
    argv += [["--bf16"]] if ctx.bf16 else []
    argv += _grad_dtype_args(ctx, ex)
    argv += _fp8_args(ctx, ex)
    _te_op_notes(ctx, ex)
    _cuda_graphs_note(ctx, ex)
    _master_remainders_note(ctx, ex)
    ex.body = argv
    return apply_tables(ex, ctx, PLAN_KEYS, TRAIN_KEYS)


def _grad_dtype_args(ctx: ExportContext, ex: Export) -> list[list[str]]:
    """train.grad_dtype: fp32 main_grad is what --bf16 runs (validate_args turns --accumulate-allreduce-grads-in-fp32
    on); bf16 (NVIDIA's perf recipes: grad_reduce_in_fp32=False) is --grad-reduce-in-bf16 (arguments.py
    core_v0.16.1); any other dtype has no flag."""
    g = ctx.train.grad_dtype
    if g == "bf16" and ctx.bf16:
        return [["--grad-reduce-in-bf16"]]
    if g != "fp32":
        ex.skip(f"train.grad_dtype={g}", "Megatron-LM keeps main_grad in fp32 or, with --grad-reduce-in-bf16 under "
                "--bf16, in bf16")  # fmt: skip
    return []


def _model_args(ctx: ExportContext, ex: Export) -> list[list[str]]:
    m, seq = ctx.model, ctx.train.seq_len
    args = [
        ["--num-layers", str(m.num_layers)],
        ["--hidden-size", str(m.hidden_size)],
        ["--ffn-hidden-size", str(m.ffn_hidden_size)],
        ["--num-attention-heads", str(m.num_heads)],
    ]
    if m.num_kv_heads != m.num_heads and m.attention == "gqa":
        args += [["--group-query-attention"], ["--num-query-groups", str(m.num_kv_heads)]]
    if m.attention == "gqa":
        # arguments.py: --kv-channels defaults to hidden_size // num_attention_heads; Qwen3 decouples head_dim
        # (Qwen3-235B: 64 heads x 128 on hidden 4096), so it is always written
        args.append(["--kv-channels", str(m.head_dim)])
    if m.qk_norm:  # arguments.py --qk-layernorm: RMSNorm on each head's query and key (Qwen3 config.json q_norm/k_norm)
        args.append(["--qk-layernorm"])
    args += _moe_args(ctx) + _mla_args(ctx)
    args += [
        ["--seq-length", str(seq)],
        ["--max-position-embeddings", str(seq)],
        ["--vocab-size", str(m.vocab_size)],
        ["--make-vocab-size-divisible-by", "1"],
    ]
    if m.block == "llama":
        # --rotary-base is parsed as an int by Megatron; every Llama/Mistral/Qwen2 theta is a whole number
        args += [
            ["--swiglu"],
            ["--normalization", "RMSNorm"],
            ["--norm-epsilon", repr(float(m.norm_eps))],
            ["--position-embedding-type", "rope"],
            ["--rotary-base", str(round(m.rope_theta))],
            ["--disable-bias-linear"],
        ]
    if not m.tie_embeddings:
        args.append(["--untie-embeddings-and-output-weights"])
    args += _window_args(ctx, ex)
    # --hidden-dropout: train.hidden_dropout, what the megatron profile prices (its dropout masks); attention dropout
    # has no train field and the profile counts none (the flash kernel's): 0.0
    args += [["--attention-dropout", "0.0"], ["--hidden-dropout", repr(float(ctx.train.hidden_dropout))]]
    if (
        ctx.train.cross_entropy_fusion != "none"
    ):  # arguments.py: --cross-entropy-loss-fusion, --cross-entropy-fusion-impl
        args += [["--cross-entropy-loss-fusion"], ["--cross-entropy-fusion-impl", ctx.train.cross_entropy_fusion]]
    if ctx.train.mtp_num_layers:  # arguments.py @ core_v0.16.1: --mtp-num-layers (DeepSeek-V3's MTP modules)
        args.append(["--mtp-num-layers", str(ctx.train.mtp_num_layers)])
    return args


def _parallel_args(ctx: ExportContext, ex: Export) -> list[list[str]]:
    p = ctx.plan
    args = [
        ["--tensor-model-parallel-size", str(p.tp)],
        ["--pipeline-model-parallel-size", str(p.pp)],
        ["--context-parallel-size", str(p.cp)],
    ]
    args += _pipeline_split_args(ctx)
    n = ctx.train.embedding_wgrad_deferral  # arguments.py: --defer-embedding-wgrad-compute, --wgrad-deferral-limit
    if n and p.pp > 1:
        args += [["--defer-embedding-wgrad-compute"], ["--wgrad-deferral-limit", str(n)]]
    elif n:
        ex.skip(f"train.embedding_wgrad_deferral={n}", "pp=1: only Megatron's pipelined schedules drain the buffers")
    if p.pp > 1 and p.pp_schedule == "gpipe":
        ex.skip("plan.pp_schedule=gpipe", "Megatron runs 1F1B (interleaved with virtual stages); no GPipe option")
    if p.sequence_parallel:
        args.append(["--sequence-parallel"])
    if p.zero_stage == 1:
        args.append(["--use-distributed-optimizer"])
    if p.zero_stage >= 2:
        # Megatron-FSDP, as the megatron profile prices ZeRO 2/3 ([MFSDP] in autotune/predict/frameworks/megatron.py):
        # optim_grads (2) / optim_grads_params (3), double-buffered unit gathers as NVIDIA's recipes run it;
        # validate_args requires the fsdp_dtensor checkpoint format with it (Megatron-LM core_v0.16.1)
        strategy = "optim_grads" if p.zero_stage == 2 else "optim_grads_params"
        args += [
            ["--use-megatron-fsdp"],
            ["--data-parallel-sharding-strategy", strategy],
            ["--fsdp-double-buffer"],
            ["--ckpt-format", "fsdp_dtensor"],
        ]
        ex.notes.append(
            "Megatron-FSDP (plan.zero_stage>=2): validate_args asserts CUDA_DEVICE_MAX_CONNECTIONS is not 1 "
            "(leave it unset or > 1; with tp/cp > 1 it then only warns)."
        )
    if p.dp_shard and p.zero_stage >= 2:
        ex.skip(
            f"plan.dp_shard={p.dp_shard} zero_stage={p.zero_stage}",
            "written as Megatron-FSDP over all of dp: its hybrid mode (--num-distributed-optimizer-instances with "
            "--outer-dp-sharding-strategy) is not modelled by the megatron profile",
        )
    if p.offload == "optimizer" and p.zero_stage in (1, 2):
        # Megatron-Core HybridDeviceOptimizer (megatron/core/optimizer/cpu_offloading/README.md): Adam states and
        # master weights on the CPU, the step there; it wraps the distributed optimizer. Newer than core_r0.12.0.
        args += [
            ["--optimizer-cpu-offload"],
            ["--optimizer-offload-fraction", "1.0"],
            ["--use-precision-aware-optimizer"],
        ]
        ex.notes.append(
            "plan.offload=optimizer: --optimizer-cpu-offload is a Megatron-Core flag newer than core_r0.12.0 "
            "(HybridDeviceOptimizer, megatron/core/optimizer/cpu_offloading/): use a Megatron-LM release that has it"
        )
    elif p.offload != "none":
        ex.skip(
            f"plan.offload={p.offload} with zero_stage={p.zero_stage}",
            "Megatron-LM offloads only the distributed optimizer's state (--optimizer-cpu-offload); it has no "
            "parameter offload and no optimizer offload under Megatron-FSDP",
        )
    return args


def _pipeline_split_args(ctx: ExportContext) -> list[list[str]]:
    """bench_model's split of num_layers over pp*vpp stages (ctx.stage_layers) in Megatron's terms. Megatron-LM
    arguments.py validate_args asserts num_layers % pp == 0 unless the split is given: an even split is
    --num-layers-per-virtual-pipeline-stage (vpp > 1) or nothing; an uneven one with vpp = 1 and equal middle stages is
    --decoder-first/last-pipeline-num-layers (TransformerConfig num_layers_in_first/last_pipeline_stage); any other is
    --pipeline-model-parallel-layout, stages in order separated by "|", "E" the embedding, "t" a transformer layer,
    "L" the loss (megatron/core/transformer/pipeline_parallel_layer_layout.py parse_str_to_list)."""
    p, stages = ctx.plan, ctx.stage_layers
    if ctx.train.pp_layout is not None:  # the job's own layout (train.pp_layout), as Megatron takes it
        return [["--pipeline-model-parallel-layout", ctx.train.pp_layout]]
    if len(set(stages)) == 1:
        return [["--num-layers-per-virtual-pipeline-stage", str(stages[0])]] if p.vpp > 1 else []
    if p.vpp == 1 and len(set(stages[1:-1])) <= 1:
        return [
            ["--decoder-first-pipeline-num-layers", str(stages[0])],
            ["--decoder-last-pipeline-num-layers", str(stages[-1])],
        ]
    layout = "|".join(f"t*{n}" for n in stages)
    return [["--pipeline-model-parallel-layout", f"E{layout}L"]]


def _recompute_args(ctx: ExportContext) -> list[list[str]]:
    if ctx.plan.recompute == "full" and ctx.plan.recompute_layers > 0:
        # plan.recompute_layers: the first N layers of each model chunk, the rest without recompute (block method)
        n = str(ctx.plan.recompute_layers)
        return [["--recompute-granularity", "full"], ["--recompute-method", "block"], ["--recompute-num-layers", n]]
    if ctx.plan.recompute == "full":
        # every layer recomputed from its input: Megatron's "uniform" method with one layer per checkpoint
        return [["--recompute-granularity", "full"], ["--recompute-method", "uniform"], ["--recompute-num-layers", "1"]]
    if ctx.plan.recompute == "selective":
        # The nearest Megatron setting, not the same policy: Megatron's selective recomputes the core attention
        # (Korthikanti et al. 2022, Sec 5); autotune's selective saves matmul and SDPA outputs, recomputes the rest.
        # plan.moe_recompute / mla_recompute / norm_recompute / mlp_recompute name Megatron's modules (arguments.py
        # --recompute-modules, nargs +)
        modules = ["mla_up_proj"] if ctx.plan.mla_recompute else []
        modules += ["layernorm"] if ctx.plan.norm_recompute else []
        modules += ["mlp"] if ctx.plan.mlp_recompute else []
        modules += [ctx.plan.moe_recompute] if ctx.plan.moe_recompute != "none" else []
        return [["--recompute-granularity", "selective"]] + ([["--recompute-modules", *modules]] if modules else [])
    return []


def render(model: ModelSpec, train: TrainSpec, cluster: ClusterSpec, plan: ParallelPlan) -> str:
    ctx = ExportContext(model, train, cluster, plan)
    ex = translate(ctx)
    return comment_block(header_lines(ctx, ex)) + "".join(" ".join(a) + "\n" for a in ex.body)


def _fp8_args(ctx: ExportContext, ex: Export) -> list[list[str]]:
    """Megatron-LM megatron/training/arguments.py (Transformer-Engine group): --fp8-format {e4m3,hybrid} (hybrid = e4m3
    forward, e5m2 gradients, TE's default training format) and --fp8-recipe {tensorwise,delayed,mxfp8,blockwise};
    tensorwise is TE's per-tensor current scaling, torchao's tensorwise recipe. Megatron has no per-row recipe."""
    if ctx.train.fp8_delayed_scaling and ctx.plan.fp8 != "tensorwise":
        ex.skip(
            "train.fp8_delayed_scaling=True",
            f"delayed scaling is a per-tensor recipe; this layout runs plan.fp8={ctx.plan.fp8}",
        )
    if ctx.plan.fp8 == "none":
        return []
    if ctx.plan.fp8 == "rowwise":
        ex.skip(
            "plan.fp8=rowwise",
            "Megatron-LM's --fp8-recipe has tensorwise, delayed, mxfp8 and blockwise scaling, no per-row recipe",
        )
        return []
    if ctx.plan.fp8 == "nvfp4":  # arguments.py: --fp4-format e2m1, --fp4-recipe nvfp4 (Transformer Engine >= 2.7)
        return [["--fp4-format", "e2m1"], ["--fp4-recipe", "nvfp4"]]
    if ctx.plan.fp8 == "mxfp8":  # block scaling: e4m3 everywhere (TE's MXFP8BlockScaling default format)
        return [["--fp8-format", "e4m3"], ["--fp8-recipe", "mxfp8"]] + _fp8_param_args(ctx, ex)
    recipe = "delayed" if ctx.train.fp8_delayed_scaling else "tensorwise"  # train.fp8_delayed_scaling
    return [["--fp8-format", "hybrid"], ["--fp8-recipe", recipe]] + _fp8_param_args(ctx, ex)


def _te_op_notes(ctx: ExportContext, ex: Export) -> None:
    """train.fp8_attention and train.fused_grouped_mlp have no argument in the target release: core_v0.16.1's
    arguments.py lists TransformerConfig.fp8_dot_product_attention among the fields "no CLI argument exists for"
    (older Megatron-LM had --fp8-dot-product-attention; Megatron-Bridge sets it as mixed_precision.
    fp8_dot_product_attention), and Transformer Engine's fused grouped MLP is switched on by Megatron-Core's TE op fuser
    with NVTE_CUTEDSL_FUSED_GROUPED_MLP=1 (autotune/core/train.py cites it). Both are listed, not written."""
    if ctx.train.fp8_attention:
        ex.skip(
            "train.fp8_attention=True",
            "TransformerConfig.fp8_dot_product_attention has no command-line argument in this release (Megatron-"
            "Bridge: mixed_precision.fp8_dot_product_attention)",
        )
    if ctx.train.fused_grouped_mlp:
        ex.skip(
            "train.fused_grouped_mlp=True",
            "set in the environment (NVTE_CUTEDSL_FUSED_GROUPED_MLP=1 with Megatron-Core's Transformer Engine op "
            "fuser), not an argument of the target release",
        )


def _fp8_param_args(ctx: ExportContext, ex: Export) -> list[list[str]]:
    """train.fp8_param_gather: --fp8-param-gather (arguments.py: "only supported with distributed optimizer, torch
    fsdp2, megatron fsdp"), with MXFP8 also --reuse-grad-buf-for-mxfp8-param-ag (Megatron-Bridge's
    bf16_with_mxfp8_mixed sets both; Megatron-LM's MXFP8 param all-gather runs in the grad buffer)."""
    if not ctx.train.fp8_param_gather:
        return []
    if ctx.plan.zero_stage == 0:
        ex.skip(
            "train.fp8_param_gather=True",
            "Megatron's --fp8-param-gather needs the distributed optimizer or Megatron-FSDP (plan.zero_stage >= 1)",
        )
        return []
    extra = [["--reuse-grad-buf-for-mxfp8-param-ag"]] if ctx.plan.fp8 == "mxfp8" else []
    return [["--fp8-param-gather"], *extra]


# train.cuda_graphs as newer Megatron-LM spells it (arguments.py @ d98e8a6: --cuda-graph-impl, --cuda-graph-modules,
# which replaced --cuda-graph-scope); the target release has neither
CUDA_GRAPH_FLAGS = {
    "moe": "--cuda-graph-impl transformer_engine --cuda-graph-modules moe_router moe_preprocess",
    "attn_moe": "--cuda-graph-impl transformer_engine --cuda-graph-modules attn moe_router moe_preprocess",
    "full": "--cuda-graph-impl full_iteration",
}


def _master_remainders_note(ctx: ExportContext, ex: Export) -> None:
    """train.master_remainders: Apex DistributedFusedAdam's store_param_remainders (NeMo 1.x), which Megatron-LM's
    own distributed optimizer does not take: reported, not emitted."""
    if ctx.train.master_remainders:
        ex.skip(
            "train.master_remainders=True",
            "NeMo 1.x's Apex DistributedFusedAdam store_param_remainders; Megatron-LM's distributed optimizer keeps "
            "the full fp32 master (its precision-aware optimizer is not configured by this export)",
        )


def _cuda_graphs_note(ctx: ExportContext, ex: Export) -> None:
    """train.cuda_graphs: not in the target release's arguments (core_r0.12.0 arguments.py: --enable-cuda-graph /
    --external-cuda-graph with --cuda-graph-scope full|attn, a whole layer or its attention: no MoE router scopes,
    no full-iteration graph): reported with the flags of newer releases instead of emitted."""
    if ctx.train.cuda_graphs != "none":
        ex.skip(
            f"train.cuda_graphs={ctx.train.cuda_graphs}",
            f"{TARGET} has no scoped CUDA graphs; newer Megatron-LM: {CUDA_GRAPH_FLAGS[ctx.train.cuda_graphs]}",
        )


# Megatron-LM added --window-size and --window-attn-skip-freq together (commit e5bc924, Sep 2025, "Enabling mixing
# SWA with full attention [gpt-oss 2/5]"; first tagged in core_v0.15.0): newer than this file's TARGET.
WINDOW_SINCE = "core_v0.15.0 (commit e5bc924)"


def _window_args(ctx: ExportContext, ex: Export) -> list[list[str]]:
    """Sliding-window attention: --window-size W,0 (keys [i - W, i], the model's convention) and, when only some
    layers slide, --window-attn-skip-freq N (window_skip_freq); the flags' Megatron-LM version is noted. A pattern no
    N expresses, and YaRN (GPT models read TransformerConfig.yarn_rotary_scaling_factor, which no arguments.py flag
    sets @d98e8a6), go to the file's NOT MAPPED list instead of being dropped."""
    m, args = ctx.model, []
    if m.sliding_window_layers:
        freq = window_skip_freq(m)
        if freq is None and m.sliding_window_layers != m.num_layers:
            ex.skip(window_label(m), "no --window-attn-skip-freq N states this pattern; the file trains full attention")
        else:
            args.append(["--window-size", f"{m.sliding_window},0"])
            args += [["--window-attn-skip-freq", str(freq)]] if freq else []
            ex.notes.append(f"--window-size/--window-attn-skip-freq need Megatron-LM {WINDOW_SINCE} or later.")
    if m.yarn_scaling_factor != 1.0:
        ex.skip(
            f"model.yarn_scaling_factor={m.yarn_scaling_factor:g}",
            "Megatron-LM's GPT model takes YaRN from TransformerConfig.yarn_rotary_scaling_factor "
            "(--position-embedding-type yarn, core_v0.16+), which no command-line flag sets: set it in the model "
            "provider (Megatron-Bridge GPTOSSProvider: 32); the file trains plain RoPE",
        )
    return args


def _moe_args(ctx: ExportContext) -> list[list[str]]:
    """Megatron-LM arguments.py MoE group (megatron/core/transformer/moe/README.md): the experts, the router, the
    grouped-GEMM experts and the all-to-all token dispatcher autotune models; --moe-layer-freq as a Python list
    expression of 0/1 per layer (first-k dense, then every freq-th)."""
    m, p = ctx.model, ctx.plan
    if not m.is_moe:
        return []
    args = [
        ["--num-experts", str(m.num_experts)],
        ["--moe-router-topk", str(m.moe_router_topk)],
        ["--moe-ffn-hidden-size", str(m.moe_ffn_hidden_size)],
        ["--moe-grouped-gemm"],
        ["--moe-token-dispatcher-type", "alltoall"],
        ["--expert-tensor-parallel-size", str(p.etp)],  # always: Megatron's default ETP is TP
        ["--moe-layer-freq", "[" + ",".join("1" if m.is_moe_layer(i) else "0" for i in range(m.num_layers)) + "]"],
        ["--moe-aux-loss-coeff", repr(float(m.moe_aux_loss_coeff))],
    ]
    if m.moe_shared_expert_ffn_hidden_size:
        args.append(["--moe-shared-expert-intermediate-size", str(m.moe_shared_expert_ffn_hidden_size)])
    if m.moe_router == "sigmoid":  # DeepSeek-V3: sigmoid scores, selection bias (aux-loss-free balancing)
        args += [["--moe-router-score-function", "sigmoid"], ["--moe-router-enable-expert-bias"]]
    if ctx.train.moe_routing == "balanced":  # NVIDIA's benchmarks: force-balanced routing, no token drop
        args.append(["--moe-router-force-load-balancing"])
    return args


def _mla_args(ctx: ExportContext) -> list[list[str]]:
    """Megatron-LM multi-latent attention (arguments.py: --multi-latent-attention, --q-lora-rank, --kv-lora-rank,
    --qk-head-dim (the no-position part), --qk-pos-emb-head-dim, --v-head-dim)."""
    m = ctx.model
    if m.attention != "mla":
        return []
    args = [["--multi-latent-attention"], ["--kv-lora-rank", str(m.kv_lora_rank)]]
    if m.q_lora_rank:
        args.append(["--q-lora-rank", str(m.q_lora_rank)])
    return args + [
        ["--qk-head-dim", str(m.qk_nope_head_dim)],
        ["--qk-pos-emb-head-dim", str(m.qk_rope_head_dim)],
        ["--v-head-dim", str(m.v_head_dim)],
    ]
