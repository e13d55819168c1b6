"""Every exporter's table: each ParallelPlan field -> the target key(s) it becomes, in one module so a new layout field
is decided for all five targets in one place (docs/extending.md; tests/unit/test_layout_completeness.py checks every
table is complete).

An entry is one of:
  "SET <key>"          the plan value goes to that key as is when the layout sets the field off its default:
                       a dotted path into the document (TOML/YAML/JSON) or a Megatron flag (`--name value`);
                       `_common.apply_table` writes it, so such a field needs no code in the exporter;
  "NOT MAPPED: <why>"  the target cannot express it; `_common.apply_table` lists it in the file with this why
                       whenever the layout sets it off its default;
  any other text       what the exporter's translate() writes for it (a mapping that needs code).
"""

from __future__ import annotations

# torchtitan
_TORCHTITAN: dict[str, str] = {
    "dp": "parallelism.data_parallel_shard_degree (data_parallel_replicate_degree for pure-DP ZeRO-0)",
    "tp": "parallelism.tensor_parallel_degree",
    "pp": "parallelism.pipeline_parallel_degree",
    "cp": "parallelism.context_parallel_degree",
    "vpp": "parallelism.pipeline_parallel_layers_per_stage (num_layers / (pp*vpp))",
    "zero_stage": "parallelism.fsdp_reshard_after_forward (DDP vs FSDP degree)",
    "micro_batch_size": "training.local_batch_size, parallelism.pipeline_parallel_microbatch_size",
    "grad_accum_steps": "training.global_batch_size (torchtitan derives the accumulation steps from it)",
    "recompute": "activation_checkpoint.mode",
    "sequence_parallel": "NOT MAPPED: no key; torchtitan 0.2.2 always applies SequenceParallel with TP",
    "pp_schedule": "parallelism.pipeline_parallel_schedule",
    "compile": "compile.enable (compile.components left at its default: model, loss)",
    "offload": "training.enable_cpu_offload (params: FSDP2 CPUOffloadPolicy); optimizer-only offload is not mapped",
    "dp_shard": "parallelism.data_parallel_shard_degree = dp_shard, data_parallel_replicate_degree = dp / dp_shard",
    "fp8": "model.converters += quantize.linear.float8 (recipe_name, filter_fqns) or quantize.linear.mx (mxfp8)",
    "ep": "SET parallelism.expert_parallel_degree",
    "etp": "SET parallelism.expert_tensor_parallel_degree",
    # torchtitan config/job_config.py Parallelism.expert_parallel_comm_backend takes "standard" | "deepep" | "hybridep":
    # the values differ from the plan's, and there is no all-gather dispatcher, so it is set by hand
    "moe_dispatcher": 'NOT MAPPED: set parallelism.expert_parallel_comm_backend = "deepep" or "hybridep" by hand for '
    'deepep / hybridep ("standard" is torchtitan\'s all-to-all); torchtitan has no all-gather token dispatcher',
    # torchtitan 0.2.2 config/job_config.py Parallelism.enable_async_tensor_parallel; maybe_enable_async_tp raises
    # unless compile.enable with "model" in compile.components (rule tp_overlap_needs_compile)
    "tp_overlap": "SET parallelism.enable_async_tensor_parallel",
    "pp_split_embedding": "NOT MAPPED: torchtitan 0.2.2 splits layers by parallelism.pipeline_parallel_layers_per_stage with no embedding / loss slot (rule pp_split_needs_megatron)",
    "pp_split_loss": "NOT MAPPED: torchtitan 0.2.2 splits layers by parallelism.pipeline_parallel_layers_per_stage with no embedding / loss slot (rule pp_split_needs_megatron)",
    "moe_recompute": "NOT MAPPED: torchtitan's activation_checkpoint has no MoE-module granularity (rule moe_recompute_needs_megatron)",
    "act_offload_layers": "NOT MAPPED: torchtitan 0.2.2 has no per-layer activation offload key (rule act_offload_needs_megatron)",
    "recompute_layers": "NOT MAPPED: torchtitan's selective_ac_option=N checkpoints every N-th layer, not the first N of a chunk (rule recompute_layers_framework)",
    "moe_offload": "NOT MAPPED: torchtitan 0.2.2 has no module-level activation offload (rule moe_offload_needs_megatron)",
    "ep_overlap": "NOT MAPPED: torchtitan dispatches its all-to-alls on the compute stream; no EP overlap schedule (rule ep_overlap_needs_megatron)",
    "mla_recompute": "NOT MAPPED: torchtitan's DeepSeek-V3 has no MLA up-projection recompute (rule mla_recompute_needs_megatron)",
    "norm_recompute": "NOT MAPPED: torchtitan's selective AC is op-level; no norm-only module (rule norm_recompute_needs_megatron)",
    "mlp_recompute": "NOT MAPPED: torchtitan's selective AC is op-level; no MLP-only module (rule mlp_recompute_needs_megatron)",
    "tp_pp_dp_mapping": "NOT MAPPED: torchtitan builds its device mesh pp-outermost (pp, dp_replicate, dp_shard, cp, tp); no rank-order option (rule tp_pp_dp_mapping_needs_megatron)",
}

# megatron
_MEGATRON: dict[str, str] = {
    "dp": "the launch's world size (Megatron derives dp = world_size / (tp*pp*cp); see the file's launch note)",
    "tp": "--tensor-model-parallel-size",
    "pp": "--pipeline-model-parallel-size",
    "cp": "--context-parallel-size",
    "vpp": "--num-layers-per-virtual-pipeline-stage",
    "zero_stage": "--use-distributed-optimizer (1), --use-megatron-fsdp --data-parallel-sharding-strategy optim_grads (2) / optim_grads_params (3)",
    "micro_batch_size": "--micro-batch-size",
    "grad_accum_steps": "--global-batch-size (Megatron derives the accumulation steps from it)",
    "recompute": "--recompute-granularity, --recompute-method, --recompute-num-layers",
    "sequence_parallel": "--sequence-parallel",
    "pp_schedule": "NOT MAPPED: no flag; Megatron runs 1F1B (interleaved with virtual stages), never GPipe",
    "compile": "NOT MAPPED: Megatron-LM has no torch.compile flag; its fused kernels (--bias-swiglu-fusion etc.) cover "
    "part of the gain",
    "offload": "--optimizer-cpu-offload --optimizer-offload-fraction 1.0 --use-precision-aware-optimizer "
    "(optimizer; Megatron-Core HybridDeviceOptimizer, megatron/core/optimizer/cpu_offloading/README.md); "
    "params: not mapped (no parameter offload flag)",
    "dp_shard": "NOT MAPPED: Megatron-FSDP's hybrid sharding (--outer-dp-sharding-strategy) is not modelled; written as FSDP over all of dp",
    "fp8": "--fp8-format hybrid --fp8-recipe tensorwise | --fp8-recipe mxfp8 | --fp4-recipe nvfp4 (Transformer Engine; no rowwise recipe)",
    "ep": "SET --expert-model-parallel-size",
    "etp": "--expert-tensor-parallel-size, always written for an MoE model (Megatron's default is ETP = TP)",
    # Megatron-LM arguments.py: --moe-token-dispatcher-type {allgather,alltoall,flex}; DeepEP is the flex dispatcher with
    # --moe-enable-deepep (newer releases: --moe-flex-dispatcher-backend deepep|hybridep): one plan value, two flags
    "moe_dispatcher": "NOT MAPPED: write --moe-token-dispatcher-type alltoall|allgather, or for deepep "
    "--moe-token-dispatcher-type flex --moe-enable-deepep (newer: --moe-flex-dispatcher-backend deepep), for hybridep "
    "--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend hybridep, by hand",
    # Transformer Engine userbuffers; Megatron-LM validate_args asserts sequence parallelism (rule tp_overlap_needs_sp)
    "tp_overlap": "SET --tp-comm-overlap",
    # Megatron-Core TransformerConfig account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split
    # (megatron/training/arguments.py: the flags of the same names), boolean switches written bare
    "pp_split_embedding": "SET --account-for-embedding-in-pipeline-split",
    "pp_split_loss": "SET --account-for-loss-in-pipeline-split",
    # megatron/training/arguments.py --recompute-modules (with --recompute-granularity selective, which plan.recompute
    # = selective writes; rule moe_recompute_needs_selective); the plan's values are Megatron's module names
    "moe_recompute": "--recompute-modules (one list with the other recompute modules)",
    # megatron/training/arguments.py: --cpu-offloading switches Transformer Engine's offload context on and
    # --cpu-offloading-num-layers sets N; both on one line of the args file ("--cpu-offloading
    # --cpu-offloading-num-layers N"), the argv body being whitespace-split like any Megatron args file
    "act_offload_layers": "SET --cpu-offloading --cpu-offloading-num-layers",
    "recompute_layers": "--recompute-method block --recompute-num-layers N (with --recompute-granularity full)",
    # megatron/training/arguments.py --fine-grained-activation-offloading and --offload-modules (nargs "+": the plan's
    # "expert_fc1+moe_act" is written as two module names; Megatron-LM newer than core_r0.12.0)
    "moe_offload": "--fine-grained-activation-offloading --offload-modules, written by translate",
    # megatron/training/arguments.py --overlap-moe-expert-parallel-comm (MCore >= 0.14, combined 1F1B); NVIDIA's recipes
    # add --delay-wgrad-compute with it (Megatron-Bridge scripts/performance/utils/overrides.py), not written here
    "ep_overlap": "SET --overlap-moe-expert-parallel-comm",
    "tp_pp_dp_mapping": "SET --use-tp-pp-dp-mapping",
    "mla_recompute": "--recompute-modules mla_up_proj (one list with the other recompute modules)",
    "norm_recompute": "--recompute-modules layernorm (one list with the other recompute modules)",
    "mlp_recompute": "--recompute-modules mlp (one list with the other recompute modules)",
}

# nanotron
_NANOTRON: dict[str, str] = {
    "dp": "parallelism.dp",
    "tp": "parallelism.tp",
    "pp": "parallelism.pp",
    "cp": "NOT MAPPED: nanotron 0.4 has no context parallelism; run dp*cp data-parallel ranks or another trainer (the "
    "dp written here is autotune's dp, so this file describes dp*tp*pp ranks)",
    "vpp": "NOT MAPPED: nanotron 0.4 pipeline engines are 1f1b and afab only (no interleaved_1f1b); written as 1f1b",
    "zero_stage": "optimizer.zero_stage (0 or 1)",
    "micro_batch_size": "tokens.micro_batch_size",
    "grad_accum_steps": "tokens.batch_accumulation_per_replica",
    "recompute": "parallelism.recompute_layer (full; selective is refused: rule nanotron_selective)",
    "sequence_parallel": "parallelism.tp_mode (REDUCE_SCATTER)",
    "pp_schedule": "parallelism.pp_engine (1f1b, afab)",
    "compile": "NOT MAPPED: nanotron 0.4 has no torch.compile option",
    "offload": "NOT MAPPED: nanotron 0.4 has no CPU offload of parameters or optimizer state",
    "dp_shard": "NOT MAPPED: nanotron 0.4 has no hybrid sharding (its ZeRO-1 optimizer shards over all of dp); "
    "written over dp",
    "fp8": "NOT MAPPED: nanotron 0.4's config has no FP8 option (its experimental src/nanotron/fp8 is its own "
    "delayed-scaling recipe, not torchao's)",
    "ep": "SET parallelism.expert_parallel_size",
    "etp": "NOT MAPPED: nanotron 0.4 has no expert tensor parallelism (each expert whole on its ep rank)",
    "moe_dispatcher": "NOT MAPPED: nanotron 0.4's MoE dispatches with its own all-to-all only",
    # ParallelismArgs.tp_linear_async_communication (config/parallelism_config.py @ 6b2ff65): functional.py
    # _ColumnLinearAsyncCommunication, REDUCE_SCATTER mode only: the column linears' all-gather runs behind the local
    # shard's GEMM, their backward reduce-scatter behind the weight-gradient GEMM; the row linears' reduce-scatter
    # stays exposed, so nanotron hides less than the cost term assumes (it relies on CUDA_DEVICE_MAX_CONNECTIONS=1)
    "tp_overlap": "SET parallelism.tp_linear_async_communication",
    "pp_split_embedding": "NOT MAPPED: nanotron 0.4 balances its pipeline split by compute cost itself; no embedding / loss slot (rule pp_split_needs_megatron)",
    "pp_split_loss": "NOT MAPPED: nanotron 0.4 balances its pipeline split by compute cost itself; no embedding / loss slot (rule pp_split_needs_megatron)",
    "moe_recompute": "NOT MAPPED: nanotron has no MoE-only recompute (recompute_layer is the whole layer)",
    "act_offload_layers": "NOT MAPPED: nanotron 0.4 has no activation offload",
    "recompute_layers": "NOT MAPPED: nanotron 0.4 recomputes every layer or none (rule recompute_layers_framework)",
    "moe_offload": "NOT MAPPED: nanotron 0.4 has no activation offload",
    "ep_overlap": "NOT MAPPED: nanotron 0.4 has no EP communication overlap (rule ep_overlap_needs_megatron)",
    "mla_recompute": "NOT MAPPED: nanotron 0.4 has no multi-latent attention (rule mla_recompute_needs_megatron)",
    "norm_recompute": "NOT MAPPED: nanotron 0.4 recomputes whole layers only (rule norm_recompute_needs_megatron)",
    "mlp_recompute": "NOT MAPPED: nanotron 0.4 recomputes whole layers only (rule mlp_recompute_needs_megatron)",
    "tp_pp_dp_mapping": "NOT MAPPED: nanotron 0.4's ParallelContext has a fixed rank order; no rank-order option (rule tp_pp_dp_mapping_needs_megatron)",
}

# deepspeed
_DEEPSPEED: dict[str, str] = {
    "dp": "train_batch_size (DeepSpeed checks it = micro * accumulation * dp)",
    "tp": "refused when > 1 (UsageError): the deepspeed profile models the plain engine, which has no tensor "
    "parallelism; AutoTP (tensor_parallel.autotp_size) is not modelled",
    "pp": "NOT MAPPED: pipeline parallelism is a deepspeed.pipe.PipelineModule in the model code, not a key",
    "cp": "NOT MAPPED: DeepSpeed has no ring context parallelism (DeepSpeed-Ulysses is a different algorithm: "
    "all-to-all over attention heads, set up in the training script)",
    "vpp": "NOT MAPPED: no pipeline key (see pp)",
    "zero_stage": "zero_optimization.stage",
    "micro_batch_size": "train_micro_batch_size_per_gpu",
    "grad_accum_steps": "gradient_accumulation_steps",
    "recompute": "NOT MAPPED: DeepSpeed's activation_checkpointing section only configures "
    "deepspeed.checkpointing.checkpoint(), which the model code must call per layer",
    "sequence_parallel": "refused with tp (it needs tp > 1): DeepSpeed has no Megatron-style sequence parallelism",
    "pp_schedule": "NOT MAPPED: no pipeline key (see pp)",
    "compile": "NOT MAPPED: the DeepSpeed config has no torch.compile switch: call engine.compile() in the training "
    "script",
    "offload": "zero_optimization.offload_optimizer (optimizer, params), zero_optimization.offload_param (params)",
    "dp_shard": "zero_optimization.zero_hpz_partition_size (ZeRO++ hpZ, stage 3: a secondary parameter shard per "
    "group; gradients and optimizer state stay sharded over all of dp)",
    "fp8": "NOT MAPPED: the DeepSpeed config has no FP8 compute switch: convert the model's linears in the training "
    "script (torchao convert_to_float8_training with this recipe, or Transformer Engine) before deepspeed.initialize",
    "ep": "NOT MAPPED: DeepSpeed-MoE sets ep_size on each deepspeed.moe.layer.MoE in the model code, not in the config",
    "etp": "NOT MAPPED: DeepSpeed-MoE has no expert tensor parallelism",
    "moe_dispatcher": "NOT MAPPED: DeepSpeed-MoE dispatches with its own all-to-all only (deepspeed.moe.sharded_moe)",
    "tp_overlap": "refused with tp (it needs tp > 1): no TP communication to overlap",
    "pp_split_embedding": "NOT MAPPED: no pipeline key (see pp); the PipelineModule partition_method is set in the model code",
    "pp_split_loss": "NOT MAPPED: no pipeline key (see pp); the PipelineModule partition_method is set in the model code",
    "moe_recompute": "NOT MAPPED: DeepSpeed's activation checkpointing is called per layer in the model code",
    "act_offload_layers": "NOT MAPPED: DeepSpeed's activation_checkpointing.cpu_checkpointing offloads checkpoints of full recompute, another mechanism",
    "recompute_layers": "NOT MAPPED: DeepSpeed has no per-layer recompute count (rule recompute_layers_framework)",
    "moe_offload": "NOT MAPPED: DeepSpeed has no module-level activation offload of MoE experts",
    "ep_overlap": "NOT MAPPED: DeepSpeed-MoE has no EP communication overlap schedule (rule ep_overlap_needs_megatron)",
    "mla_recompute": "NOT MAPPED: DeepSpeed's activation checkpointing is called per layer in the model code",
    "norm_recompute": "NOT MAPPED: DeepSpeed's activation checkpointing is called per layer in the model code",
    "mlp_recompute": "NOT MAPPED: DeepSpeed's activation checkpointing is called per layer in the model code",
    "tp_pp_dp_mapping": "NOT MAPPED: DeepSpeed's PipelineModule topology has no rank-order option here (rule tp_pp_dp_mapping_needs_megatron)",
}

# accelerate
_ACCELERATE: dict[str, str] = {
    "dp": "num_processes, parallelism_config_dp_shard_size",
    "tp": "parallelism_config_tp_size",
    "pp": "NOT MAPPED: accelerate has no pipeline-parallel config",
    "cp": "parallelism_config_cp_size",
    "vpp": "NOT MAPPED: accelerate has no pipeline-parallel config",
    "zero_stage": "fsdp_config.fsdp_reshard_after_forward, deepspeed_config.zero_stage",
    "micro_batch_size": "NOT MAPPED: the DataLoader batch_size in the training script",
    "grad_accum_steps": "deepspeed_config.gradient_accumulation_steps (DeepSpeed plugin; else the script's)",
    "recompute": "fsdp_config.fsdp_activation_checkpointing (full only)",
    "sequence_parallel": "NOT MAPPED: accelerate's TP applies the model's tp_plan; it has no Megatron-style "
    "sequence-parallel switch",
    "pp_schedule": "NOT MAPPED: accelerate has no pipeline-parallel config",
    "compile": "NOT MAPPED: accelerate's dynamo_config compiles the whole model at once; bench_model compiles each "
    "transformer block",
    "offload": "fsdp_config.fsdp_offload_params (params), deepspeed_config.offload_optimizer_device (optimizer: "
    "FSDP has no optimizer-only offload, so the DeepSpeed plugin with tp = cp = 1)",
    "dp_shard": "fsdp_config.fsdp_reshard_after_forward HYBRID_SHARD (dp_shard = gpus_per_node), else "
    "parallelism_config_dp_shard_size / parallelism_config_dp_replicate_size (FSDP2)",
    "fp8": "mixed_precision: fp8 with fp8_config.backend AO (torchao; tensorwise only)",
    "ep": "NOT MAPPED: accelerate's config has no expert parallelism (FSDP/DeepSpeed plugins only)",
    "etp": "NOT MAPPED: accelerate's config has no expert tensor parallelism",
    "moe_dispatcher": "NOT MAPPED: accelerate's config has no expert parallelism",
    "tp_overlap": "NOT MAPPED: accelerate's parallelism_config has no async-TP switch; enable torch async TP in the "
    "training script (torch._inductor.config._micro_pipeline_tp under torch.compile)",
    "pp_split_embedding": "NOT MAPPED: accelerate has no pipeline-parallel config",
    "pp_split_loss": "NOT MAPPED: accelerate has no pipeline-parallel config",
    "moe_recompute": "NOT MAPPED: accelerate's activation checkpointing is whole-layer (full) only",
    "act_offload_layers": "NOT MAPPED: accelerate has no activation offload key",
    "recompute_layers": "NOT MAPPED: accelerate's fsdp_activation_checkpointing wraps every layer",
    "moe_offload": "NOT MAPPED: accelerate has no activation offload key",
    "ep_overlap": "NOT MAPPED: accelerate's config has no expert parallelism",
    "mla_recompute": "NOT MAPPED: accelerate's activation checkpointing is whole-layer (full) only",
    "norm_recompute": "NOT MAPPED: accelerate's activation checkpointing is whole-layer (full) only",
    "mlp_recompute": "NOT MAPPED: accelerate's activation checkpointing is whole-layer (full) only",
    "tp_pp_dp_mapping": "NOT MAPPED: accelerate has no pipeline-parallel config",
}

TABLES: dict[str, dict[str, str]] = {
    "torchtitan": _TORCHTITAN,
    "megatron": _MEGATRON,
    "nanotron": _NANOTRON,
    "deepspeed": _DEEPSPEED,
    "accelerate": _ACCELERATE,
}
