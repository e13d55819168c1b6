"""Exporters: every format parses with its standard parser (tomllib / shlex / yaml.safe_load / json) and carries the
layout's values under the target's key names; what a target cannot express is listed in the file, never dropped."""

import json
import shlex
from pathlib import Path

import pytest
import yaml

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from autotune.core.errors import UsageError
from autotune.core.types import ParallelPlan
from autotune.interop import FORMATS, SUFFIXES, render, unmapped
from autotune.spec.config import load_config


@pytest.fixture(scope="module")
def llama8b():
    cfg = load_config(["model=llama-3.1-8b", "cluster=h100-sxm-80gb"])  # global batch 512 x seq 4096
    return cfg.model, cfg.train, cfg.cluster


def plan(**kw) -> ParallelPlan:
    """A layout of llama-3.1-8b's 512-sequence batch: grad_accum_steps completes dp*mbs*gas = 512."""
    kw.setdefault("micro_batch_size", 1)
    kw.setdefault("pp_schedule", "interleaved_1f1b" if kw.get("vpp", 1) > 1 else "1f1b")
    kw["grad_accum_steps"] = 512 // (kw.get("dp", 1) * kw["micro_batch_size"])
    return ParallelPlan(**kw)


FOUR_D = dict(
    dp=4, tp=4, pp=2, cp=2, vpp=2, zero_stage=1, micro_batch_size=2, recompute="selective", sequence_parallel=True
)  # 64 GPUs, 8 nodes of 8


FOUR_D_NO_TP = {**FOUR_D, "tp": 1, "dp": 16, "sequence_parallel": False}  # DeepSpeed refuses tp > 1


def out(fmt, job, p):
    return render(fmt, *job, p)


def test_formats_and_suffixes_cover_every_target():
    assert set(FORMATS) == set(SUFFIXES) == {"torchtitan", "megatron", "nanotron", "deepspeed", "accelerate"}


def test_unknown_format_is_a_one_line_value_error(llama8b):
    with pytest.raises(ValueError, match=r"--format='titan' is not an export format \(choose from: torchtitan"):
        render("titan", *llama8b, plan(dp=8))


def test_batch_that_does_not_add_up_is_refused(llama8b):
    bad = ParallelPlan(dp=8, micro_batch_size=1, grad_accum_steps=1)  # 8 != 512
    with pytest.raises(
        ValueError,
        match=r"dp\*micro_batch_size\*grad_accum_steps=8\*1\*1=8 != "
        r"train.global_batch_size=512",
    ):
        render("deepspeed", *llama8b, bad)


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_unmapped_setting_is_written_into_the_file(fmt, llama8b):
    p = plan(**(FOUR_D if fmt != "deepspeed" else FOUR_D_NO_TP))
    text = out(fmt, llama8b, p)
    missing = unmapped(fmt, *llama8b, p)
    if fmt == "megatron":
        assert missing == []  # Megatron expresses the whole 4D layout
        assert "NOT MAPPED: nothing" in text
    else:
        assert missing, f"{fmt} cannot express all of dp/tp/pp/cp/vpp/selective recompute"
        body = json.loads(text)["_autotune_unmapped"] if fmt == "deepspeed" else text
        for item in missing:
            assert item in body


# ---------------------------------------------------------------- torchtitan (TOML)


def test_torchtitan_4d_layout(llama8b):
    doc = tomllib.loads(out("torchtitan", llama8b, plan(**FOUR_D)))
    par, tr = doc["parallelism"], doc["training"]
    assert (par["data_parallel_replicate_degree"], par["data_parallel_shard_degree"]) == (1, 4)
    assert (par["tensor_parallel_degree"], par["pipeline_parallel_degree"], par["context_parallel_degree"]) == (4, 2, 2)
    assert par["pipeline_parallel_schedule"] == "Interleaved1F1B"
    assert par["pipeline_parallel_layers_per_stage"] == 8  # 32 layers / (pp 2 * vpp 2)
    assert par["pipeline_parallel_microbatch_size"] == 2
    # with PP, local_batch_size holds all microbatches of one step: 2 * (512 / (4*2)) = 128; global = 512
    assert (tr["local_batch_size"], tr["global_batch_size"], tr["seq_len"]) == (128, 512, 4096)
    assert tr["mixed_precision_param"] == "bfloat16"
    assert doc["activation_checkpoint"] == {"mode": "selective", "selective_ac_option": "op"}
    assert doc["model"] == {"name": "llama3", "flavor": "8B"}


def test_torchtitan_pure_dp_zero0_is_ddp_and_zero3_reshards(llama8b):
    ddp = tomllib.loads(out("torchtitan", llama8b, plan(dp=8, zero_stage=0)))["parallelism"]
    assert (ddp["data_parallel_replicate_degree"], ddp["data_parallel_shard_degree"]) == (8, 1)
    fsdp = tomllib.loads(out("torchtitan", llama8b, plan(dp=8, zero_stage=3, recompute="full")))
    assert (fsdp["parallelism"]["data_parallel_shard_degree"], fsdp["parallelism"]["fsdp_reshard_after_forward"]) == (
        8,
        "always",
    )
    assert fsdp["activation_checkpoint"] == {"mode": "full"}
    assert fsdp["training"]["local_batch_size"] == 1  # no PP: torchtitan accumulates 512/(1*8) = 64 steps itself


def test_torchtitan_says_what_it_cannot_do(llama8b):
    text = out("torchtitan", llama8b, plan(dp=4, tp=2, zero_stage=0, sequence_parallel=False))
    assert "plan.zero_stage=0 (replicated DP): torchtitan 0.2.2 supports DDP only as 1-D" in text
    assert "plan.sequence_parallel=false: torchtitan 0.2.2 always applies SequenceParallel" in text
    tiny = load_config(["model=tiny"])
    text = render("torchtitan", tiny.model, tiny.train, tiny.cluster, tiny.plan(1))
    assert "model tiny (hidden_size=128" in text and 'register flavor "tiny" with these dims' in text
    assert tomllib.loads(text)["model"] == {"name": "llama3", "flavor": "tiny"}


# ---------------------------------------------------------------- Megatron-LM (argv)


def megatron_argv(text: str) -> dict:
    argv = shlex.split(text, comments=True)
    args, i = {}, 0
    while i < len(argv):
        assert argv[i].startswith("--"), argv[i]
        if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            args[argv[i]], i = argv[i + 1], i + 2
        else:
            args[argv[i]], i = True, i + 1
    return args


def test_megatron_4d_layout_and_model(llama8b):
    a = megatron_argv(out("megatron", llama8b, plan(**FOUR_D)))
    assert (a["--tensor-model-parallel-size"], a["--pipeline-model-parallel-size"], a["--context-parallel-size"]) == (
        "4",
        "2",
        "2",
    )
    assert a["--num-layers-per-virtual-pipeline-stage"] == "8"
    assert a["--sequence-parallel"] is True and a["--use-distributed-optimizer"] is True
    assert (a["--micro-batch-size"], a["--global-batch-size"], a["--seq-length"]) == ("2", "512", "4096")
    assert a["--recompute-granularity"] == "selective" and "--recompute-method" not in a
    # Llama-3.1-8B config.json dims (search_spaces/model/llama-3.1-8b.yaml)
    assert (a["--num-layers"], a["--hidden-size"], a["--ffn-hidden-size"], a["--num-attention-heads"]) == (
        "32",
        "4096",
        "14336",
        "32",
    )
    assert a["--group-query-attention"] is True and a["--num-query-groups"] == "8"
    assert (a["--normalization"], a["--position-embedding-type"], a["--rotary-base"]) == ("RMSNorm", "rope", "500000")
    assert a["--swiglu"] is True and a["--untie-embeddings-and-output-weights"] is True and a["--bf16"] is True


def test_megatron_zero_stages_recompute_and_gpipe(llama8b):
    z0 = megatron_argv(out("megatron", llama8b, plan(dp=8)))
    assert "--use-distributed-optimizer" not in z0 and "--sequence-parallel" not in z0
    assert "--recompute-granularity" not in z0
    z3 = megatron_argv(out("megatron", llama8b, plan(dp=8, zero_stage=3, recompute="full")))
    # ZeRO 2/3 are Megatron-FSDP, as the megatron profile prices them (optim_grads / optim_grads_params)
    assert z3["--use-megatron-fsdp"] is True and "--use-distributed-optimizer" not in z3
    assert (z3["--data-parallel-sharding-strategy"], z3["--ckpt-format"]) == ("optim_grads_params", "fsdp_dtensor")
    assert (z3["--recompute-granularity"], z3["--recompute-method"], z3["--recompute-num-layers"]) == (
        "full",
        "uniform",
        "1",
    )
    gp = plan(dp=4, pp=2, zero_stage=2, pp_schedule="gpipe")
    assert unmapped("megatron", *llama8b, gp) == [
        "plan.pp_schedule=gpipe: Megatron runs 1F1B (interleaved with virtual stages); no GPipe option",
    ]
    assert megatron_argv(out("megatron", llama8b, gp))["--data-parallel-sharding-strategy"] == "optim_grads"


def test_megatron_tied_embeddings_drop_the_untie_flag():
    cfg = load_config(["model=llama-3.2-1b"])
    a = megatron_argv(render("megatron", cfg.model, cfg.train, cfg.cluster, cfg.plan(8)))
    assert "--untie-embeddings-and-output-weights" not in a and a["--vocab-size"] == "128256"


# ---------------------------------------------------------------- nanotron (YAML)


def test_nanotron_layout_tokens_and_model(llama8b):
    doc = yaml.safe_load(
        out(
            "nanotron",
            llama8b,
            plan(dp=8, tp=4, pp=2, zero_stage=1, micro_batch_size=2, sequence_parallel=True, pp_schedule="gpipe"),
        )
    )
    assert doc["parallelism"] == {
        "dp": 8,
        "pp": 2,
        "tp": 4,
        "pp_engine": "afab",
        "tp_mode": "REDUCE_SCATTER",
        "tp_linear_async_communication": False,
        "recompute_layer": False,
    }
    assert doc["tokens"]["sequence_length"] == 4096 and doc["tokens"]["micro_batch_size"] == 2
    assert doc["tokens"]["batch_accumulation_per_replica"] == 32  # 512 / (8 * 2)
    assert doc["optimizer"]["zero_stage"] == 1
    mc = doc["model"]["model_config"]
    assert (
        mc["hidden_size"],
        mc["intermediate_size"],
        mc["num_hidden_layers"],
        mc["num_attention_heads"],
        mc["num_key_value_heads"],
        mc["vocab_size"],
        mc["tie_word_embeddings"],
    ) == (4096, 14336, 32, 32, 8, 128256, False)


def _nanotron_fields() -> dict[str, set[str]]:
    """tests/unit/data/nanotron_config_fields.txt: field lists copied from nanotron's config dataclasses (cited there)."""
    text = (Path(__file__).parent / "data" / "nanotron_config_fields.txt").read_text()
    rows = [line.split(":", 1) for line in text.splitlines() if line and not line.startswith("#")]
    return {name: set(fields.split()) for name, fields in rows}


def test_nanotron_optimizer_keys_exist_in_its_dataclasses(llama8b):
    """nanotron parses with dacite strict=True: every key written must be a field. The AdamW keys sit under
    optimizer_factory (AdamWOptimizerArgs); written flat into optimizer they were unknown keys (the bug fixed)."""
    fields = _nanotron_fields()
    doc = yaml.safe_load(out("nanotron", llama8b, plan(dp=8, zero_stage=1)))
    opt = doc["optimizer"]
    assert set(opt) <= fields["OptimizerArgs"]
    assert set(opt["optimizer_factory"]) <= fields["AdamWOptimizerArgs"] and opt["optimizer_factory"]["name"] == "adamW"
    assert set(opt["learning_rate_scheduler"]) <= fields["LRSchedulerArgs"]
    assert set(doc["tokens"]) <= fields["TokensArgs"] and set(doc["model"]) <= fields["ModelArgs"]
    assert not {"adam_eps", "adam_beta1", "adam_beta2", "torch_adam_is_fused"} & set(opt)


def test_nanotron_zero3_becomes_zero1_and_says_so(llama8b):
    p = plan(dp=8, zero_stage=3, recompute="full")
    doc = yaml.safe_load(out("nanotron", llama8b, p))
    assert doc["optimizer"]["zero_stage"] == 1 and doc["parallelism"]["tp_mode"] == "ALL_REDUCE"
    missing = unmapped("nanotron", *llama8b, p)
    assert any(m.startswith("plan.zero_stage=3: nanotron 0.4 shards optimizer state only") for m in missing)
    # whole-layer recompute is nanotron's ParallelismArgs.recompute_layer (bench_cluster branch @ a27e8fe8)
    assert doc["parallelism"]["recompute_layer"] is True
    assert not any(m.startswith("plan.recompute=") for m in missing)


# ---------------------------------------------------------------- DeepSpeed (JSON)


def test_deepspeed_batch_and_zero(llama8b):
    p = plan(dp=16, zero_stage=2, micro_batch_size=4)
    doc = json.loads(out("deepspeed", llama8b, p))
    # DeepSpeed's rule: train_batch_size = micro * gradient_accumulation_steps * data-parallel world
    assert doc["train_batch_size"] == doc["train_micro_batch_size_per_gpu"] * doc["gradient_accumulation_steps"] * 16
    assert (doc["train_batch_size"], doc["train_micro_batch_size_per_gpu"], doc["gradient_accumulation_steps"]) == (
        512,
        4,
        8,
    )
    assert doc["zero_optimization"] == {"stage": 2} and doc["bf16"] == {"enabled": True}
    assert "tensor_parallel" not in doc and doc["_autotune_unmapped"] == []


def test_deepspeed_refuses_tensor_parallel_layouts(llama8b):
    """issue 28: the export warned "the DeepSpeed engine has no tensor parallelism (tp must be 1)" and still wrote
    "autotp_size": 4. The deepspeed profile's no_tp rule and the exporter now agree: one-line refusal."""
    with pytest.raises(UsageError, match=r"--format=deepspeed: plan.tp=4: the DeepSpeed engine has no tensor paral"):
        out("deepspeed", llama8b, plan(dp=16, tp=4, zero_stage=2, micro_batch_size=4))


def test_deepspeed_lists_cp_pp_and_recompute(llama8b):
    doc = json.loads(out("deepspeed", llama8b, plan(**FOUR_D_NO_TP)))
    keys = [u.split(":")[0] for u in doc["_autotune_unmapped"]]
    # the table-driven skips in field order (interop/_common.skip_not_mapped), then the pipeline's one line
    assert keys == [
        "plan.cp=2",
        "plan.recompute=selective",
        "plan.pp=2 vpp=2 pp_schedule=interleaved_1f1b",
    ]


# ---------------------------------------------------------------- accelerate (YAML)


@pytest.mark.parametrize("zero,strategy", [(0, "NO_SHARD"), (2, "SHARD_GRAD_OP"), (3, "FULL_SHARD")])
def test_accelerate_fsdp1_strategies(zero, strategy, llama8b):
    doc = yaml.safe_load(out("accelerate", llama8b, plan(dp=16, zero_stage=zero, recompute="full")))
    assert doc["distributed_type"] == "FSDP" and doc["fsdp_config"]["fsdp_version"] == 1
    assert doc["fsdp_config"]["fsdp_reshard_after_forward"] == strategy
    assert doc["fsdp_config"]["fsdp_activation_checkpointing"] is True
    assert (doc["num_processes"], doc["num_machines"], doc["mixed_precision"]) == (16, 2, "bf16")


def test_accelerate_zero1_uses_the_deepspeed_plugin(llama8b):
    doc = yaml.safe_load(out("accelerate", llama8b, plan(dp=8, zero_stage=1, micro_batch_size=2)))
    assert doc["distributed_type"] == "DEEPSPEED"
    assert doc["deepspeed_config"]["zero_stage"] == 1 and doc["deepspeed_config"]["gradient_accumulation_steps"] == 32


def test_accelerate_tp_cp_use_fsdp2_parallelism_config(llama8b):
    text = out("accelerate", llama8b, plan(**FOUR_D))
    doc = yaml.safe_load(text)
    assert doc["fsdp_config"]["fsdp_version"] == 2 and doc["fsdp_config"]["fsdp_reshard_after_forward"] is False
    assert doc["parallelism_config"] == {
        "parallelism_config_dp_replicate_size": 1,
        "parallelism_config_dp_shard_size": 4,
        "parallelism_config_tp_size": 4,
        "parallelism_config_cp_size": 2,
    }
    assert doc["num_processes"] == 32  # dp*tp*cp: PP is not expressible, and the file says so
    assert "the file describes num_processes = dp*tp*cp = 32 ranks, not 64" in text
    tp_only = yaml.safe_load(out("accelerate", llama8b, plan(tp=8, zero_stage=3)))
    assert (
        tp_only["distributed_type"] == "MULTI_GPU" and tp_only["parallelism_config"]["parallelism_config_tp_size"] == 8
    )


def test_compile_is_exported_to_torchtitan_and_flagged_elsewhere(llama8b):
    # torchtitan 0.2.2 config/job_config.py: [compile] enable (default false), components (default model, loss)
    on = tomllib.loads(out("torchtitan", llama8b, plan(dp=8, zero_stage=3, compile=True)))["compile"]
    off = tomllib.loads(out("torchtitan", llama8b, plan(dp=8, zero_stage=3)))["compile"]
    assert on == {"enable": True} and off == {"enable": False}
    for fmt in ("megatron", "deepspeed", "accelerate", "nanotron"):
        assert any("plan.compile=true" in u for u in unmapped(fmt, *llama8b, plan(dp=8, zero_stage=3, compile=True)))
        assert not any("compile" in u for u in unmapped(fmt, *llama8b, plan(dp=8, zero_stage=3)))


def test_layout_label_names_compile():
    from autotune.core.labels import layout_label

    assert layout_label(plan(dp=8, compile=True)).endswith(" compile")
    assert "compile" not in layout_label(plan(dp=8))


def test_hsdp_exports(llama8b):
    """plan.dp_shard in each target: torchtitan's two degrees (job_config.py Parallelism), accelerate's FSDP1
    HYBRID_SHARD when the shard group is one node (torch FSDP1 shards within the node) else FSDP2's
    dp_replicate/dp_shard sizes, DeepSpeed ZeRO++ hpZ at stage 3 (zero_hpz_partition_size), Megatron's partial
    distributed optimizer at stage 2 (--num-distributed-optimizer-instances), nanotron: listed as not mapped."""
    node = plan(dp=16, zero_stage=3, dp_shard=8)
    quad = plan(dp=16, zero_stage=2, dp_shard=4)
    par = tomllib.loads(out("torchtitan", llama8b, quad))["parallelism"]
    assert (par["data_parallel_replicate_degree"], par["data_parallel_shard_degree"]) == (4, 4)
    assert par["fsdp_reshard_after_forward"] == "never"
    par = tomllib.loads(out("torchtitan", llama8b, plan(dp=16, zero_stage=3)))["parallelism"]
    assert (par["data_parallel_replicate_degree"], par["data_parallel_shard_degree"]) == (1, 16)
    acc = yaml.safe_load(out("accelerate", llama8b, node))
    assert (
        acc["fsdp_config"]["fsdp_version"] == 1 and acc["fsdp_config"]["fsdp_reshard_after_forward"] == "HYBRID_SHARD"
    )
    acc = yaml.safe_load(out("accelerate", llama8b, quad))
    assert acc["fsdp_config"]["fsdp_version"] == 2
    assert acc["parallelism_config"]["parallelism_config_dp_replicate_size"] == 4
    assert acc["parallelism_config"]["parallelism_config_dp_shard_size"] == 4
    ds = json.loads(out("deepspeed", llama8b, node))
    assert ds["zero_optimization"] == {"stage": 3, "zero_hpz_partition_size": 8}
    assert any("plan.dp_shard=8 (HSDP)" in u for u in unmapped("deepspeed", *llama8b, node))
    assert "zero_hpz_partition_size" not in json.loads(out("deepspeed", llama8b, quad))["zero_optimization"]
    assert any("plan.dp_shard=4 zero_stage=2" in u for u in unmapped("deepspeed", *llama8b, quad))
    mg = out("megatron", llama8b, quad)
    # Megatron-FSDP's hybrid mode is not modelled: written as FSDP over all of dp, and said so
    assert "--use-megatron-fsdp" in megatron_argv(mg) and "--num-distributed-optimizer-instances" not in megatron_argv(
        mg
    )
    assert any("plan.dp_shard=4 zero_stage=2" in u for u in unmapped("megatron", *llama8b, quad))
    assert any("plan.dp_shard=8 zero_stage=3" in u for u in unmapped("megatron", *llama8b, node))
    assert any("plan.dp_shard=8" in u for u in unmapped("nanotron", *llama8b, node))
    for fmt in ("torchtitan", "megatron", "deepspeed", "accelerate", "nanotron"):
        assert not any("dp_shard" in u for u in unmapped(fmt, *llama8b, plan(dp=16, zero_stage=3)))


# ---------------------------------------------------------------- Megatron: head_dim, qk-norm, uneven pipeline splits


def _qwen3_235b(**kw):
    cfg = load_config(["model=qwen3-235b-a22b", "cluster=h100-sxm-80gb"])  # global batch 8192
    kw = {"micro_batch_size": 1, **kw}
    kw["grad_accum_steps"] = 8192 // (kw["dp"] * kw["micro_batch_size"])
    return cfg.model, cfg.train, cfg.cluster, ParallelPlan(**kw)


def test_megatron_qwen3_235b_pp16_head_dim_and_qk_norm():
    """issue 28: Qwen3-235B at pp16 lacked the uneven split flags (94 layers: megatron-core asserts num_layers % pp),
    --kv-channels 128 (Megatron would build head_dim 4096/64 = 64) and --qk-layernorm. bench_model's split of 94 over
    16 stages: 5, then 14 stages of 6, then 5 (autotune/predict/schedule.py layers_of_rank)."""
    job = _qwen3_235b(dp=16, pp=16, ep=16, zero_stage=1)
    argv = shlex.split(render("megatron", *job), comments=True)
    flag = {a: argv[i + 1] for i, a in enumerate(argv[:-1]) if a.startswith("--") and not argv[i + 1].startswith("--")}
    assert (flag["--decoder-first-pipeline-num-layers"], flag["--decoder-last-pipeline-num-layers"]) == ("5", "5")
    assert flag["--kv-channels"] == "128" and "--qk-layernorm" in argv
    assert 5 + 14 * 6 + 5 == 94


def test_megatron_uneven_interleaved_split_is_a_layout_megatron_core_parses():
    from autotune.interop._common import ExportContext
    from autotune.predict.schedule import layers_of_rank

    job = _qwen3_235b(dp=8, pp=4, vpp=3, ep=8, zero_stage=1, pp_schedule="interleaved_1f1b")
    stages = ExportContext(*job).stage_layers  # 94 over 12 stages: 7 + 10 x 8 + 7
    assert stages == (7,) + (8,) * 10 + (7,)
    for r in range(4):  # rank r holds stages r, r+4, r+8: the same totals the memory model uses
        assert sum(stages[r::4]) == int(layers_of_rank(94, 4, 3, r))
    argv = shlex.split(render("megatron", *job), comments=True)
    layout = argv[argv.index("--pipeline-model-parallel-layout") + 1]
    core = pytest.importorskip("megatron.core.transformer.pipeline_parallel_layer_layout")
    parsed = core.PipelineParallelLayerLayout.parse_str_to_list(layout)
    assert [sum(1 for t in s if str(t).endswith("decoder")) for s in parsed] == list(stages)
    assert "--num-layers-per-virtual-pipeline-stage" not in argv


def test_megatron_writes_train_hidden_dropout_and_fp8_param_gather(llama8b):
    """--hidden-dropout is train.hidden_dropout (it was always 0.0 while the default is 0.1, Megatron-Core's); NVIDIA's
    FP8 recipes' fp8_param_gather is --fp8-param-gather (+ --reuse-grad-buf-for-mxfp8-param-ag for MXFP8, as
    Megatron-Bridge's bf16_with_mxfp8_mixed sets), refused with the note at ZeRO-0 (validate_args asserts it)."""
    import dataclasses

    model, train, cluster = llama8b
    a = megatron_argv(render("megatron", model, train, cluster, plan(**FOUR_D)))
    assert (a["--hidden-dropout"], a["--attention-dropout"]) == ("0.1", "0.0") and "--fp8-param-gather" not in a
    mg = dataclasses.replace(train, framework="megatron", hidden_dropout=0.0, fp8_param_gather=True)
    a = megatron_argv(render("megatron", model, mg, cluster, plan(**{**FOUR_D, "fp8": "tensorwise"})))
    assert a["--hidden-dropout"] == "0.0" and a["--fp8-param-gather"] is True
    assert "--reuse-grad-buf-for-mxfp8-param-ag" not in a
    a = megatron_argv(render("megatron", model, mg, cluster, plan(**{**FOUR_D, "fp8": "mxfp8"})))
    assert a["--fp8-param-gather"] is True and a["--reuse-grad-buf-for-mxfp8-param-ag"] is True
    z0 = plan(dp=8, fp8="tensorwise")
    assert "--fp8-param-gather" not in megatron_argv(render("megatron", model, mg, cluster, z0))
    assert any(u.startswith("train.fp8_param_gather=True") for u in unmapped("megatron", model, mg, cluster, z0))


def test_gpt_oss_window_and_yarn_are_written_or_listed_never_dropped():
    """GPT-OSS-120B (search_spaces/model/gpt-oss-120b.yaml: a 128-token window on 18 of 36 layers, alternating, and
    YaRN factor 32). Megatron-LM gets --window-size 128,0 and --window-attn-skip-freq 2 (arguments.py @d98e8a6: N =
    an (N-1):1 ratio of window to full layers; 36 / (36 - 18) = 2), whose values megatron-core 0.16.1's
    TransformerConfig holds (window_size, window_attn_skip_freq); YaRN has no Megatron-LM flag and nanotron has
    neither, so both are in the files' NOT MAPPED lists (they were dropped silently before)."""
    import dataclasses

    from autotune.interop._common import window_skip_freq

    cfg = load_config(["model=gpt-oss-120b", "cluster=h100-sxm-80gb"])
    train = dataclasses.replace(cfg.train, global_batch_size=64)
    job = (cfg.model, train, cfg.cluster, ParallelPlan(dp=8, ep=8, micro_batch_size=1, grad_accum_steps=8))
    argv = shlex.split(render("megatron", *job), comments=True)
    assert argv[argv.index("--window-size") + 1] == "128,0"
    assert argv[argv.index("--window-attn-skip-freq") + 1] == "2"
    assert [u.split(":")[0] for u in unmapped("megatron", *job)] == ["model.yarn_scaling_factor=32"]
    nano = [u.split(":")[0] for u in unmapped("nanotron", *job)]
    assert "model.sliding_window=128 on 18 of 36 layers" in nano and "model.yarn_scaling_factor=32" in nano
    shape = dataclasses.replace(cfg.model, num_layers=32, sliding_window_layers=24)  # 3 window : 1 full -> 4
    assert window_skip_freq(shape) == 4
    assert window_skip_freq(dataclasses.replace(shape, sliding_window_layers=32)) is None  # all layers: no flag
    odd = dataclasses.replace(shape, num_layers=10, sliding_window_layers=3)  # 7 full layers: no period states it
    assert window_skip_freq(odd) is None
    assert "model.sliding_window=128 on 3 of 10 layers" in [
        u.split(":")[0] for u in unmapped("megatron", odd, train, cfg.cluster, job[3])
    ]
