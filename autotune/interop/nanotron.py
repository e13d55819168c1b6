"""nanotron config (YAML) for huggingface/nanotron's `bench_cluster` branch @ a27e8fe8 (the branch HF's bench_cluster
checks out, which the nanotron profile follows: autotune/predict/frameworks/nanotron.py): `parallelism`
dp/pp/tp/pp_engine/tp_mode/tp_linear_async_communication/recompute_layer/expert_parallel_size, `model.model_config`
(LlamaConfig: hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, num_key_value_heads, vocab_size,
tie_word_embeddings, max_position_embeddings, rms_norm_eps, rope_theta), `tokens` sequence_length/micro_batch_size/
batch_accumulation_per_replica/train_steps, `optimizer` zero_stage and `optimizer.optimizer_factory` (AdamW keys).
A complete `Config` (every required section), so `run_train.py --config-file FILE` reads it; the sections autotune
does not tune (optimizer betas, lr schedule, checkpoints, train_steps) carry placeholder values (AdamW 0.9/0.95,
cosine decay, 1000 steps) and say so. nanotron's own parser (`get_config_from_file`, dacite strict=True, copied in
tests/vendor/nanotron) reads every preset model's best layout in tests/unit/test_interop_presets.py.

That nanotron has no context parallelism, no interleaved pipeline, no selective recompute (`recompute_layer` puts the
whole decoder layer under checkpoint: plan.recompute=full), ZeRO stage 0 or 1 only (`helpers.py`: any
zero_stage > 0 builds ZeroDistributedOptimizer), and a LlamaConfig without experts, MLA, QK-norm or a free head_dim
(its attention uses hidden_size / num_attention_heads): those are listed as not mapped.
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
)
from autotune.interop.plan_keys import TABLES
from autotune.interop.train_keys import TRAIN_TABLES

TARGET = (
    "nanotron branch bench_cluster @ a27e8fe8 (src/nanotron/config/config.py; run: torchrun ... run_train.py "
    "--config-file FILE)"
)
ENGINES = {"1f1b": "1f1b", "gpipe": "afab"}  # afab = all-forward-all-backward, i.e. GPipe
PLAN_KEYS = TABLES["nanotron"]  # autotune/interop/plan_keys.py
TRAIN_KEYS = TRAIN_TABLES["nanotron"]  # autotune/interop/train_keys.py


def translate(ctx: ExportContext) -> Export:
    m, p, t = ctx.model, ctx.plan, ctx.train
    ex = Export(
        target=TARGET,
        body={},
        notes=[
            "Sections autotune does not tune (optimizer betas/eps/weight decay, lr schedule, checkpoints, "
            "train_steps, data) hold placeholders autotune did not tune: edit them."
        ],
    )
    skip_not_mapped(ex, ctx.plan, PLAN_KEYS)
    skip_train(ex, ctx, TRAIN_KEYS)
    _unmapped(ctx, ex)
    ex.body = {
        "general": {"project": "autotune", "run": m.name, "seed": t.seed, "ignore_sanity_checks": True},
        "parallelism": {
            "dp": p.dp,
            "pp": p.pp,
            "tp": p.tp,
            "pp_engine": ENGINES.get(p.pp_schedule, "1f1b"),
            # REDUCE_SCATTER is nanotron's sequence-parallel TP mode (parallelism_config.py docstring)
            "tp_mode": "REDUCE_SCATTER" if p.sequence_parallel else "ALL_REDUCE",
            "tp_linear_async_communication": False,
            # ParallelismArgs.recompute_layer (config/parallelism_config.py @ a27e8fe8; models/llama.py:657 runs the
            # whole decoder layer under checkpoint): plan.recompute=full; selective is refused (rule nanotron_selective)
            "recompute_layer": p.recompute == "full",
        },
        "model": {
            "ddp_bucket_cap_mb": 25,
            "dtype": "bfloat16" if ctx.bf16 else "float32",
            "init_method": {"std": 0.02},
            "make_vocab_size_divisible_by": 1,
            "model_config": {
                "bos_token_id": 1,
                "eos_token_id": 2,
                "hidden_act": "silu",
                "hidden_size": m.hidden_size,
                "initializer_range": 0.02,
                "intermediate_size": m.ffn_hidden_size,
                "is_llama_config": True,
                "max_position_embeddings": t.seq_len,
                "num_attention_heads": m.num_heads,
                "num_hidden_layers": m.num_layers,
                "num_key_value_heads": m.num_kv_heads,
                "pad_token_id": None,
                "pretraining_tp": 1,
                "rms_norm_eps": float(m.norm_eps),
                "rope_scaling": None,
                "rope_theta": float(m.rope_theta),  # LlamaConfig.rope_theta @ a27e8fe8 (models/llama.py:324, :328)
                "tie_word_embeddings": m.tie_embeddings,
                "use_cache": True,
                "vocab_size": m.vocab_size,
            },
        },
        "tokenizer": {"tokenizer_name_or_path": None, "tokenizer_revision": None, "tokenizer_max_length": None},
        "checkpoints": {
            "checkpoints_path": "checkpoints",
            "checkpoint_interval": 1000,
            "save_initial_state": False,
            "resume_checkpoint_path": None,
            "checkpoints_path_is_shared_file_system": False,
        },
        "logging": {"log_level": "info", "log_level_replica": "info", "iteration_step_info_interval": 1},
        "tokens": {
            "sequence_length": t.seq_len,
            "micro_batch_size": p.micro_batch_size,
            "batch_accumulation_per_replica": p.grad_accum_steps,
            "train_steps": 1000,
            "val_check_interval": -1,
            "limit_val_batches": 0,
            "limit_test_batches": 0,
        },
        "optimizer": {
            "zero_stage": min(p.zero_stage, 1),
            "weight_decay": 0.01,
            "clip_grad": 1.0,
            "accumulate_grad_in_fp32": True,
            # the AdamW keys live under optimizer_factory in nanotron's config since the bench_cluster era
            # (huggingface/nanotron src/nanotron/config/config.py @ 00708b80 AdamWOptimizerArgs; bench_cluster's
            # base_config.py @ 8dd6e520 writes them there); flat keys fail its strict dacite parse
            "optimizer_factory": {
                "name": "adamW",
                "adam_eps": 1.0e-8,
                "adam_beta1": 0.9,
                "adam_beta2": 0.95,
                "torch_adam_is_fused": True,
            },
            "learning_rate_scheduler": {
                "learning_rate": t.lr,
                "lr_warmup_steps": 0,
                "lr_warmup_style": "linear",
                "lr_decay_style": "cosine",
                "min_decay_lr": float(f"{t.lr / 10:.6g}"),
            },
        },
    }
    return apply_tables(ex, ctx, PLAN_KEYS, TRAIN_KEYS)


def _unmapped(ctx: ExportContext, ex: Export) -> None:
    """What the table cannot say: a partial mapping (ZeRO 2/3 written as 1) and model settings."""
    m, p = ctx.model, ctx.plan
    if p.zero_stage > 1:
        ex.skip(f"plan.zero_stage={p.zero_stage}", "nanotron 0.4 shards optimizer state only (ZeRO-1); written as 1")
    if m.block != "llama":
        ex.skip(f"model.block={m.block}", "written as a LlamaConfig; nanotron has no GPT-2 block config")
    # nanotron's LlamaConfig (src/nanotron/config/models_config.py @ a27e8fe8) has no expert, MLA, QK-norm or
    # head_dim field; its MoE is a separate example (examples/moe), not a config run_train.py builds
    dense = "the file describes a dense Llama of the same hidden size and layers"
    if m.is_moe:
        ex.skip(f"model.num_experts={m.num_experts}", f"nanotron's LlamaConfig has no experts; {dense}")
    if m.attention == "mla":
        ex.skip("model.attention=mla", "nanotron's LlamaConfig has GQA attention only; written as GQA")
    if m.qk_norm:
        ex.skip("model.qk_norm=true", "nanotron's LlamaConfig has no QK-norm")
    if m.sliding_window_layers:  # LlamaConfig has no window: every layer attends causally over the full sequence
        ex.skip(window_label(m), "nanotron's LlamaConfig has no sliding-window attention; written as full attention")
    if m.yarn_scaling_factor != 1.0:
        ex.skip(
            f"model.yarn_scaling_factor={m.yarn_scaling_factor:g}", "nanotron's LlamaConfig has no YaRN; plain RoPE"
        )
    if m.head_dim * m.num_heads != m.hidden_size:
        ex.skip(
            f"model.head_dim={m.head_dim}",
            f"nanotron's Llama attention uses hidden_size/num_attention_heads = {m.hidden_size // m.num_heads}",
        )


def render(model: ModelSpec, train: TrainSpec, cluster: ClusterSpec, plan: ParallelPlan) -> str:
    import yaml

    ctx = ExportContext(model, train, cluster, plan)
    ex = translate(ctx)
    return comment_block(header_lines(ctx, ex)) + yaml.safe_dump(ex.body, sort_keys=False)
