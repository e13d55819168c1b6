"""torchtitan job config (TOML), key names of torchtitan 0.2.2 (PyPI; `torchtitan/config/job_config.py`:
`[job]`, `[model]` name/flavor, `[training]` local_batch_size/global_batch_size/seq_len/mixed_precision_param,
`[parallelism]` data_parallel_replicate_degree/data_parallel_shard_degree/fsdp_reshard_after_forward/
tensor_parallel_degree/pipeline_parallel_degree/pipeline_parallel_schedule/pipeline_parallel_microbatch_size/
pipeline_parallel_layers_per_stage/context_parallel_degree, `[activation_checkpoint]` mode/selective_ac_option).
0.2.2 is the last release that reads TOML (`--job.config_file`); 0.3.0 takes the same `section.key` names as CLI flags.

Mapping (our bench trainer is built the torchtitan way, so most of it is one-to-one):
- ZeRO-3 -> FSDP2 with reshard_after_forward "always"; ZeRO-2 -> FSDP2 "never" (gathered params kept from forward to
  backward, grads and optimizer state sharded); ZeRO-1 has no FSDP2 equivalent -> "never" and said so;
  ZeRO-0 -> DDP (data_parallel_replicate_degree) only when the layout is pure DP: torchtitan 0.2.2
  `llama3/infra/parallelize.py` raises "DDP has not supported > 1D parallelism" otherwise, so it becomes FSDP.
- torchtitan's [training] local_batch_size is per DP rank per optimizer step *before* gradient accumulation;
  with PP it is split into microbatches of pipeline_parallel_microbatch_size. So local_batch_size =
  micro_batch_size x (grad_accum_steps with PP, else 1) and global_batch_size = dp x micro x grad_accum, from which
  torchtitan derives the accumulation steps (`train.py`: global_batch_size // (local_batch_size * dp_degree)).
"""

from __future__ import annotations

import json

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
)
from autotune.interop.plan_keys import TABLES
from autotune.interop.train_keys import TRAIN_TABLES

TARGET = (
    "torchtitan 0.2.2 (torchtitan/config/job_config.py; run: torchrun ... -m torchtitan.train --job.config_file FILE)"
)
SCHEDULES = {"1f1b": "1F1B", "gpipe": "GPipe", "interleaved_1f1b": "Interleaved1F1B"}
PLAN_KEYS = TABLES["torchtitan"]  # autotune/interop/plan_keys.py
TRAIN_KEYS = TRAIN_TABLES["torchtitan"]  # autotune/interop/train_keys.py
# torchtitan 0.2.2 `torchtitan/models/llama3/__init__.py` flavors (dim, n_layers, n_heads, n_kv_heads, ffn, vocab)
# with ffn = the SwiGLU hidden size its ffn_dim_multiplier/multiple_of produce (the Llama-3.1 config.json values).
FLAVORS = {
    (4096, 32, 32, 8, 14336, 128256): "8B",
    (8192, 80, 64, 8, 28672, 128256): "70B",
    (16384, 126, 128, 8, 53248, 128256): "405B",
}
# torchtitan 0.2.2 MoE models (`torchtitan/models/qwen3/__init__.py`, `models/deepseek_v3/__init__.py`): (model name,
# flavor) by (dim, n_layers, n_heads, vocab, num_experts, top_k, moe_inter_dim). Qwen3's flavours also apply
# qk_norm, which autotune's model does not count (two head_dim-wide RMSNorm weights per layer).
MOE_FLAVORS = {
    (2048, 48, 32, 151936, 128, 8, 768): ("qwen3", "30B-A3B"),
    (4096, 94, 64, 151936, 128, 8, 1536): ("qwen3", "235B-A22B"),
    (7168, 61, 128, 129280, 256, 8, 2048): ("deepseek_v3", "671B"),
}


# RoPE base of each registered flavor (torchtitan 0.2.2 models/llama3/__init__.py: 500000 for 8B/70B/405B;
# models/qwen3/__init__.py: 1000000 for 30B-A3B, 5000000 for 235B-A22B although Qwen/Qwen3-235B-A22B config.json says
# 1000000; models/deepseek_v3/model/args.py default 10000.0). A flavor whose base differs from the model's is listed.
FLAVOR_ROPE_THETA = {
    ("llama3", "8B"): 500000.0,
    ("llama3", "70B"): 500000.0,
    ("llama3", "405B"): 500000.0,
    ("qwen3", "30B-A3B"): 1000000.0,
    ("qwen3", "235B-A22B"): 5000000.0,
    ("deepseek_v3", "671B"): 10000.0,
}


def translate(ctx: ExportContext) -> Export:
    m, p, t = ctx.model, ctx.plan, ctx.train
    ex = Export(target=TARGET, body={})
    skip_not_mapped(ex, p, PLAN_KEYS, handled=("sequence_parallel",))  # SP is unmapped when it is OFF: below
    skip_train(ex, ctx, TRAIN_KEYS, maps_moe_routing=True)  # moe_routing: _moe_routing below
    ex.body["job"] = {"description": f"autotune export: {m.name} {ctx.summary()}"}
    ex.body["model"] = _model_section(m, ex)
    ex.body["training"] = {
        "local_batch_size": p.micro_batch_size * (p.grad_accum_steps if p.pp > 1 else 1),
        "global_batch_size": ctx.global_batch_size,
        "seq_len": t.seq_len,
        "mixed_precision_param": "bfloat16" if ctx.bf16 else "float32",
        # torchtitan 0.2.2 config/job_config.py Training.enable_cpu_offload -> apply_fsdp(cpu_offload=...)
        "enable_cpu_offload": p.offload == "params",
    }
    if p.offload == "optimizer":
        ex.skip(
            "plan.offload=optimizer",
            "torchtitan 0.2.2 offloads only through FSDP2's CPUOffloadPolicy (params, grads and optimizer state: "
            "training.enable_cpu_offload, i.e. offload=params); it has no optimizer-only offload",
        )
    ex.body["parallelism"] = _parallelism(ctx, ex)
    _moe_routing(ctx, ex)
    ex.body["activation_checkpoint"] = _activation_checkpoint(ctx, ex)
    # torchtitan 0.2.2 config/job_config.py Compile: enable, components (default ["model", "loss"])
    ex.body["compile"] = {"enable": p.compile}  # components stay at the default, ["model", "loss"]
    if p.fp8 != "none":
        # torchtitan 0.2.2: config/job_config.py Model.converters and Float8Linear (recipe_name, filter_fqns);
        # components/quantization/float8.py registers the converter as "quantize.linear.float8". The LM head stays
        # in bf16 as in bench_model (bench_model/parallel/float8.py); fp8 all-gather off, as bench_model runs it.
        if p.fp8 == "nvfp4":
            ex.skip("plan.fp8=nvfp4", "torchtitan 0.2.2 has no NVFP4 training converter (quantize.linear: float8, mx)")
        elif p.fp8 == "mxfp8":  # components/quantization/mx.py: "quantize.linear.mx", job_config MXLinear recipe_name
            ex.body["model"]["converters"] = ["quantize.linear.mx"]
            ex.body["quantize"] = {"linear": {"mx": {"recipe_name": "mxfp8_cublas", "filter_fqns": ["output"]}}}
        else:
            ex.body["model"]["converters"] = ["quantize.linear.float8"]
            ex.body["quantize"] = {"linear": {"float8": {"recipe_name": p.fp8, "filter_fqns": ["output"]}}}
    return apply_tables(ex, ctx, PLAN_KEYS, TRAIN_KEYS)


def _moe_routing(ctx: ExportContext, ex: Export) -> None:
    """train.moe_routing on an MoE model: "balanced" is torchtitan 0.2.2's `[debug] moe_force_load_balance`
    (config/job_config.py Debug: "we force each experts to get the same amount of tokens via round-robin"); "collapsed"
    describes a router that has collapsed, not a setting torchtitan has: listed."""
    if not ctx.model.is_moe or ctx.train.moe_routing == "learned":
        return
    if ctx.train.moe_routing == "balanced":
        ex.body["debug"] = {"moe_force_load_balance": True}
    else:
        ex.skip(
            f"train.moe_routing={ctx.train.moe_routing}",
            "describes a collapsed learned router (what the estimate prices), not a torchtitan setting: the file runs "
            "the learned router",
        )


def _model_section(m: ModelSpec, ex: Export) -> dict:
    """[model] name and flavor: torchtitan model dims come from a registered flavor, not the TOML, so an unregistered
    shape is written under the model's own name (torchtitan refuses it instead of silently training other dims)."""
    if m.is_moe:
        key = (m.hidden_size, m.num_layers, m.num_heads, m.vocab_size, m.num_experts, m.moe_router_topk)
        family = "deepseek_v3" if m.attention == "mla" else "qwen3"  # torchtitan's MLA MoE vs its GQA MoE
        name, flavor = MOE_FLAVORS.get((*key, m.moe_ffn_hidden_size), (family, None))
        where = f"torchtitan/models/{family}/__init__.py"
    else:
        key = (m.hidden_size, m.num_layers, m.num_heads, m.num_kv_heads, m.ffn_hidden_size, m.vocab_size)
        name, flavor = "llama3", FLAVORS.get(key)
        where = "torchtitan/models/llama3/__init__.py"
    if flavor is None or m.tie_embeddings:
        flavor = m.name
        ex.skip(
            f"model {m.name} (hidden_size={m.hidden_size} num_layers={m.num_layers} num_heads={m.num_heads} "
            f"num_kv_heads={m.num_kv_heads} ffn_hidden_size={m.ffn_hidden_size} vocab_size={m.vocab_size} "
            + (f"num_experts={m.num_experts} " if m.is_moe else "")
            + f"tie_embeddings={str(m.tie_embeddings).lower()}"
            + (f" sliding_window={m.sliding_window} on {m.sliding_window_layers} layers" if m.sliding_window else "")
            + (f" yarn_scaling_factor={m.yarn_scaling_factor:g}" if m.yarn_scaling_factor != 1.0 else "")
            + ")",
            "torchtitan model dims come from a registered flavor, not the TOML; register flavor "
            f'"{m.name}" with these dims in {where} (0.2.2 has no weight tying)',
        )
    theta = FLAVOR_ROPE_THETA.get((name, flavor))
    if theta is not None and theta != m.rope_theta:
        ex.skip(
            f"model.rope_theta={m.rope_theta:g}",
            f"torchtitan 0.2.2's registered {name} flavor {flavor} uses rope_theta={theta:g}; set it in {where} "
            "to train this model",
        )
    return {"name": name, "flavor": flavor}


def _parallelism(ctx: ExportContext, ex: Export) -> dict:
    p = ctx.plan
    pure_dp = p.tp == p.pp == p.cp == 1
    if p.zero_stage == 0 and not pure_dp:
        ex.skip(
            "plan.zero_stage=0 (replicated DP)",
            "torchtitan 0.2.2 supports DDP only as 1-D parallelism; "
            'written as FSDP (data_parallel_shard_degree) with fsdp_reshard_after_forward="never"',
        )
    if p.zero_stage == 1:
        ex.skip(
            "plan.zero_stage=1",
            "FSDP2 has no optimizer-only sharding; written as fsdp_reshard_after_forward="
            '"never" (ZeRO-2-like: gradients are sharded too)',
        )
    use_ddp = p.zero_stage == 0 and pure_dp
    shard = 1 if use_ddp else p.dp_shard_size  # HSDP: torchtitan's 2-D (dp_replicate, dp_shard) FSDP2 mesh
    out = {
        "data_parallel_replicate_degree": p.dp // shard,
        "data_parallel_shard_degree": shard,
        "fsdp_reshard_after_forward": "always" if p.zero_stage == 3 else "never",
        "tensor_parallel_degree": p.tp,
        "pipeline_parallel_degree": p.pp,
        "context_parallel_degree": p.cp,
    }
    if p.tp > 1 and not p.sequence_parallel:
        ex.skip("plan.sequence_parallel=false", "torchtitan 0.2.2 always applies SequenceParallel together with TP")
    if p.pp > 1:
        out["pipeline_parallel_schedule"] = SCHEDULES[p.pp_schedule]
        out["pipeline_parallel_microbatch_size"] = p.micro_batch_size
        per_stage = ctx.layers_per_virtual_stage
        if per_stage is not None:
            # pp*vpp equal chunks like autotune's split: torchtitan counts the embedding and the head as one layer
            # each unless told not to (num_stages = ceil((L + first + last) / layers_per_stage), pipeline_parallel.py)
            out["pipeline_parallel_layers_per_stage"] = per_stage
            out["pipeline_parallel_first_stage_less_layers"] = 0
            out["pipeline_parallel_last_stage_less_layers"] = 0
        else:
            ex.skip(
                f"plan.pp={p.pp} x vpp={p.vpp} uneven split of num_layers={ctx.model.num_layers}",
                "left to torchtitan's own split (first/last stage take fewer layers)",
            )
    return out


def _activation_checkpoint(ctx: ExportContext, ex: Export) -> dict:
    mode = ctx.plan.recompute
    if mode == "selective":
        # torchtitan 0.2.2 "op" policy: torchtitan/distributed/activation_checkpoint.py `_custom_policy`
        ex.skip(
            "plan.recompute=selective",
            "autotune's selective recompute is op-level SAC that saves the outputs of "
            "every matmul and of the attention (SDPA) kernel and recomputes the rest (norms, RoPE, SwiGLU "
            'activation, residual adds); torchtitan\'s selective_ac_option="op" saves the same ops except every '
            "second matmul, so it keeps fewer activations and recomputes more",
        )
        return {"mode": "selective", "selective_ac_option": "op"}
    return {"mode": mode}


def _toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return json.dumps(str(v))  # a JSON string is a valid TOML basic string


def to_toml(doc: dict) -> str:
    """Tables of scalars and lists; a nested dict becomes its dotted sub-table ([quantize.linear.float8]). Parsed
    back by tomllib in the tests."""
    out = []
    for section, values in doc.items():
        scalars = {k: v for k, v in values.items() if not isinstance(v, dict)}
        if scalars or not values:
            out.append(f"\n[{section}]\n")
            out += [f"{k} = {_toml_value(v)}\n" for k, v in scalars.items()]
        tables = {f"{section}.{k}": v for k, v in values.items() if isinstance(v, dict)}
        if tables:
            out.append(to_toml(tables))
    return "".join(out)


def render(model: ModelSpec, train: TrainSpec, cluster: ClusterSpec, plan: ParallelPlan) -> str:
    ctx = ExportContext(model, train, cluster, plan)
    ex = translate(ctx)
    return comment_block(header_lines(ctx, ex)) + to_toml(ex.body)
