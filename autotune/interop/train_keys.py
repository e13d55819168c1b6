"""Every exporter's table for the `train.*` fields (TrainSpec), as autotune/interop/plan_keys.py is for the plan's: each
field -> what the target's file does with it, so a job setting that the file cannot carry is listed in it, never
dropped (tests/unit/test_export_train_keys.py checks every table names every TrainSpec field and lists what it
must).

An entry is one of:
  "SET <key>"          written when the job sets the field off TrainSpec's default (`_common.apply_set_keys`);
  "NOT MAPPED: <why>"  the file cannot express it; listed with this why when the job sets it off its default;
  "RUNS <v>: <why>"    the target runs value <v> (lower-case; `precision` = the dtype the file's precision flag gives,
                       bf16 or fp32); listed with this why when the job sets the field off its default to another
                       value. A null field means "the framework's own" and is never listed;
  any other text       what the exporter's translate() writes (or lists) for it, in code.

Fields read by the megatron profile only (MEGATRON_ONLY) are NOT MAPPED for the other trainers.
"""

from __future__ import annotations

# TrainSpec fields only Megatron-Core runs (autotune/core/train.py refuses them outside train.framework=megatron, or
# only the megatron profile reads them) and what Megatron calls them
MEGATRON_ONLY: dict[str, str] = {
    "fp8_param_gather": "--fp8-param-gather",
    "fp8_delayed_scaling": "--fp8-recipe delayed",
    "master_remainders": "Apex DistributedFusedAdam's store_param_remainders (NeMo 1.x)",
    "cuda_graphs": "--cuda-graph-impl",
    "cross_entropy_fusion": "--cross-entropy-loss-fusion",
    "fused_grouped_mlp": "Transformer Engine's fused grouped MLP",
    "fp8_attention": "TransformerConfig.fp8_dot_product_attention",
    "embedding_wgrad_deferral": "--defer-embedding-wgrad-compute",
    "mtp_num_layers": "--mtp-num-layers",
    "pp_layout": "--pipeline-model-parallel-layout",
}

_TORCHTITAN_ONLY = "NOT MAPPED: torchtitan's ChunkedLossWrapper only (train.framework=torchtitan)"
_BATCH = "the file's batch keys (global = dp x micro_batch_size x grad_accum_steps)"
_FRAMEWORK = "the accounting the estimate used; the header's expected-memory line re-prices the layout as this target"
_ROUTING = "_common.skip_train: the target's routing override, or listed (learned is every router's default)"
DROPOUT_LISTED = (
    "_common.skip_train: listed when a megatron-profile job prices dropout masks the target's model does not make"
)


def _megatron_only(target: str) -> dict[str, str]:
    return {k: f"NOT MAPPED: Megatron-Core only ({v}); {target} has no such setting" for k, v in MEGATRON_ONLY.items()}


_TORCHTITAN: dict[str, str] = {
    "seq_len": "training.seq_len",
    "global_batch_size": "training.global_batch_size, training.local_batch_size",
    "precision": "training.mixed_precision_param",
    # torchtitan 0.2.2 config/job_config.py Training / Optimizer / Debug; components/optimizer.py optimizer_classes
    "param_dtype": "RUNS fp32: FSDP2 shards fp32 parameters and casts the gathered copy "
    "(training.mixed_precision_param); torchtitan has no parameter-storage dtype",
    "compute_dtype": "RUNS precision: training.mixed_precision_param takes bfloat16 or float32",
    "grad_dtype": "RUNS fp32: training.mixed_precision_reduce takes float32 only",
    "master_dtype": "RUNS null: the fp32 parameters are the optimizer's; torchtitan keeps no separate master copy",
    "optimizer": "RUNS adamw: optimizer.name takes Adam or AdamW only",
    "optimizer_dtype": "RUNS fp32: AdamW's states take the fp32 parameters' dtype",
    "seed": "SET debug.seed",
    "lr": "SET optimizer.lr",
    "framework": _FRAMEWORK,
    "moe_routing": _ROUTING + " (balanced -> [debug] moe_force_load_balance)",
    "hidden_dropout": DROPOUT_LISTED,
    "attention_kernel": "NOT MAPPED: the file picks no attention kernel (torchtitan's model calls SDPA or flex "
    "attention by flavor; torch picks the SDPA backend)",
    "loss_kernel": "NOT MAPPED: torchtitan's loss is F.cross_entropy on the fp32 logits, compiled with the model "
    "under compile.components; not a setting",
    "loss_chunks": "NOT MAPPED: torchtitan 0.2.2's TOML has no chunked loss; on torchtitan main (2026-06 on) set "
    "Trainer.Config(loss=ChunkedLossWrapper.Config(num_chunks=N)) in the model's config_registry",
    "sdpa_repeat_kv": "RUNS false: torchtitan 0.2.2 calls SDPA with enable_gqa (K/V at the KV heads, #2259)",
    "fp8_casts": "RUNS torchao: torchtitan's float8 / MX converters are torchao's per-linear casts",
    **_megatron_only("torchtitan"),
}

_MEGATRON: dict[str, str] = {
    "seq_len": "--seq-length, --max-position-embeddings",
    "global_batch_size": "--global-batch-size",
    "precision": "--bf16",
    # Megatron-LM arguments.py (core_v0.16.1, tests/vendor/megatron_lm): --bf16 sets params_dtype; validate_args turns
    # --accumulate-allreduce-grads-in-fp32 on unless --grad-reduce-in-bf16; --main-params-dtype / --exp-avg-dtype
    # only with --use-precision-aware-optimizer
    "param_dtype": "RUNS precision: --bf16 trains bf16 parameters (fp32 without it), fp32 main params in the optimizer",
    "compute_dtype": "RUNS precision: --bf16 computes in bf16, fp32 without it (--fp16 is not written)",
    "grad_dtype": "--grad-reduce-in-bf16 for bf16 (main_grad and its reduction); fp32 is --bf16's default; "
    "others listed",
    "master_dtype": "RUNS fp32: the optimizer's main params are fp32 (--main-params-dtype fp16 needs "
    "--use-precision-aware-optimizer, not written)",
    "optimizer": "SET --optimizer",
    "optimizer_dtype": "RUNS fp32: Adam's states are fp32 (--exp-avg-dtype / --exp-avg-sq-dtype need "
    "--use-precision-aware-optimizer, not written)",
    "seed": "SET --seed",
    "lr": "SET --lr",
    "framework": _FRAMEWORK,
    "moe_routing": "--moe-router-force-load-balancing for balanced; collapsed is a learned router's state, "
    "written as the learned router",
    "hidden_dropout": "--hidden-dropout",
    "attention_kernel": "NOT MAPPED: set --attention-backend by hand (flash = flash-attn 2 / 3, fused = cuDNN "
    "fused attention); Transformer Engine picks among the installed backends under auto",
    "loss_kernel": "NOT MAPPED: Megatron's loss kernel is train.cross_entropy_fusion (--cross-entropy-loss-fusion)",
    "loss_chunks": _TORCHTITAN_ONLY,
    "sdpa_repeat_kv": "RUNS false: Transformer Engine's attention takes K/V at the query groups (no repeat)",
    "fp8_casts": "RUNS te: Megatron-Core's FP8 linears are Transformer Engine modules",
    "fp8_param_gather": "--fp8-param-gather",
    "fp8_delayed_scaling": "--fp8-recipe delayed (plan.fp8=tensorwise; listed with another recipe)",
    "master_remainders": "a note: Apex's store_param_remainders has no Megatron-LM flag (NeMo 1.x set it)",
    "cuda_graphs": "a note with the --cuda-graph-impl / --cuda-graph-scope flags",
    "cross_entropy_fusion": "--cross-entropy-loss-fusion, --cross-entropy-fusion-impl",
    "fused_grouped_mlp": "listed: Transformer Engine's op fuser has no core_v0.16.1 argument",
    "fp8_attention": "listed: TransformerConfig.fp8_dot_product_attention has no core_v0.16.1 argument",
    "embedding_wgrad_deferral": "--defer-embedding-wgrad-compute, --wgrad-deferral-limit (pp > 1; listed at pp = 1)",
    "mtp_num_layers": "--mtp-num-layers",
    "pp_layout": "--pipeline-model-parallel-layout, as given (in place of the split bench_model's stages derive)",
}

_NANOTRON: dict[str, str] = {
    "seq_len": "tokens.sequence_length",
    "global_batch_size": "tokens.micro_batch_size, tokens.batch_accumulation_per_replica (x parallelism.dp)",
    "precision": "model.dtype",
    # nanotron @ a27e8fe8 (bench_cluster branch): model.dtype is the parameters' and the compute dtype;
    # optimizer.accumulate_grad_in_fp32 (written true) keeps fp32 gradients and the fp32 master the optimizer steps
    "param_dtype": "RUNS precision: model.dtype is the parameters' dtype",
    "compute_dtype": "RUNS precision: model.dtype",
    "grad_dtype": "RUNS fp32: the file sets optimizer.accumulate_grad_in_fp32 (fp32 gradient accumulator)",
    "master_dtype": "RUNS fp32: accumulate_grad_in_fp32 keeps an fp32 master of every parameter for the optimizer",
    "optimizer": "RUNS adamw: optimizer.optimizer_factory.name adamW (the file's)",
    "optimizer_dtype": "RUNS fp32: AdamW's states on the fp32 master",
    "seed": "general.seed",
    "lr": "optimizer.learning_rate_scheduler.learning_rate (min_decay_lr = lr / 10)",
    "framework": _FRAMEWORK,
    "moe_routing": _ROUTING,
    "hidden_dropout": DROPOUT_LISTED,
    "attention_kernel": "NOT MAPPED: nanotron calls flash-attn 2's kernels; the kernel is not a setting",
    "loss_kernel": "NOT MAPPED: nanotron's sharded cross entropy is not a setting",
    "loss_chunks": _TORCHTITAN_ONLY,
    "sdpa_repeat_kv": "RUNS false: flash-attn takes K/V at the KV heads",
    "fp8_casts": "NOT MAPPED: nanotron 0.4 has no FP8 linears",
    **_megatron_only("nanotron"),
}


def _script_trainer(target: str, precision_key: str) -> dict[str, str]:
    """DeepSpeed and accelerate: the config file carries the parallelism and the precision flag; model, optimizer and
    loop are the user's training script's."""
    dtypes = f"NOT MAPPED: the file writes {precision_key} only; {target}'s mixed precision sets the per-tensor dtypes"
    script = "NOT MAPPED: the training script's"
    return {
        "seq_len": "the header's Batch line: the training script's sequence length (no config key)",
        "global_batch_size": _BATCH,
        "precision": precision_key,
        "param_dtype": dtypes,
        "compute_dtype": dtypes,
        "grad_dtype": dtypes,
        "master_dtype": dtypes,
        "optimizer": script + " (the file has no optimizer block)",
        "optimizer_dtype": dtypes,
        "seed": script,
        "lr": script + " (the file has no optimizer block)",
        "framework": _FRAMEWORK,
        "moe_routing": _ROUTING,
        "hidden_dropout": DROPOUT_LISTED,
        "attention_kernel": script + " model's attention kernel",
        "loss_kernel": script + " loss",
        "loss_chunks": _TORCHTITAN_ONLY,
        "sdpa_repeat_kv": script + " model's attention",
        "fp8_casts": script + " FP8 library",
        **_megatron_only(target),
    }


TRAIN_TABLES: dict[str, dict[str, str]] = {
    "torchtitan": _TORCHTITAN,
    "megatron": _MEGATRON,
    "nanotron": _NANOTRON,
    "deepspeed": _script_trainer("DeepSpeed", "bf16.enabled"),
    "accelerate": _script_trainer("accelerate", "mixed_precision"),
}
