"""Every train.* field in every exporter (user trust: no silent drops; autotune/interop/train_keys.py): each target's
TRAIN_KEYS table names every TrainSpec field, and a job that sets a field the file cannot carry (a "NOT MAPPED" entry,
or a "RUNS v" entry with another value than the target runs) gets a line for it in the file's NOT MAPPED list; the
fields the tables SET are written under the target's key names (their parsers check them in test_interop_presets)."""

from __future__ import annotations

import dataclasses

import tomllib

from autotune.core.types import ParallelPlan, TrainSpec
from autotune.interop import FORMATS, render, unmapped
from autotune.interop._common import NOT_MAPPED, RUNS, SET, TRAIN_DEFAULTS
from autotune.interop.train_keys import MEGATRON_ONLY, TRAIN_TABLES
from autotune.spec.config import load_config

CFG = load_config(["model=llama-3.1-8b", "cluster=h100-sxm-80gb"])
PLAN = ParallelPlan(dp=8, zero_stage=1, micro_batch_size=1, grad_accum_steps=1)
BASE = dataclasses.replace(CFG.train, global_batch_size=8)
# off-default values to try, in order; the first the target does not run is used (a RUNS entry names its value)
TRIES = {
    "param_dtype": ("fp16", "bf16"),
    "compute_dtype": ("fp16",),
    "grad_dtype": ("fp16",),
    "master_dtype": ("bf16", "fp32"),
    "optimizer": ("sgd",),
    "optimizer_dtype": ("bf16",),
    "seed": (7,),
    "lr": (1e-3,),
    "attention_kernel": ("fa3",),
    "loss_kernel": ("fused",),
    "loss_chunks": (8,),
    "sdpa_repeat_kv": (True, False),
    "fp8_casts": ("te", "torchao"),
    "fp8_param_gather": (True,),
    "fp8_delayed_scaling": (True,),
    "master_remainders": (True,),
    "cuda_graphs": ("full",),
    "cross_entropy_fusion": ("te",),
    "fused_grouped_mlp": (True,),
    "fp8_attention": (True,),
    "embedding_wgrad_deferral": (4,),
    "mtp_num_layers": (1,),
    "pp_layout": ("Et*16|t*16L",),
}


def _shown(v) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def _job(field: str, value) -> TrainSpec:
    extra = {"framework": "megatron"} if field in MEGATRON_ONLY else {}
    if field == "loss_chunks":  # torchtitan's ChunkedLossWrapper: refused under other frameworks
        extra = {"framework": "torchtitan"}
    if field == "master_remainders":  # 16-bit remainders rebuild an fp32 master from bf16 params
        extra.update(param_dtype="bf16", master_dtype="fp32")
    return dataclasses.replace(BASE, **{field: value}, **extra)


def test_every_table_names_every_train_field_with_a_known_kind():
    fields = [f.name for f in dataclasses.fields(TrainSpec)]
    for fmt in FORMATS:
        table = TRAIN_TABLES[fmt]
        assert sorted(table) == sorted(fields), (fmt, set(fields) ^ set(table))
        for name, entry in table.items():
            assert entry.strip(), (fmt, name)
            if entry.startswith(RUNS):
                assert ": " in entry and name in TRIES, (fmt, name, entry)  # "RUNS v: why", and the test can try it
            if entry.startswith((NOT_MAPPED, SET)):
                assert name in TRAIN_DEFAULTS, (fmt, name)  # "off its default" needs a default


def test_a_field_the_file_cannot_carry_is_listed():
    for fmt in FORMATS:
        for name, entry in TRAIN_TABLES[fmt].items():
            if not entry.startswith((NOT_MAPPED, RUNS)):
                continue
            runs = entry[len(RUNS) :].split(": ")[0] if entry.startswith(RUNS) else None
            runs = "bf16" if runs == "precision" else runs  # the job's precision is bf16
            value = next(v for v in TRIES[name] if _shown(v) != runs and v != TRAIN_DEFAULTS[name])
            lines = unmapped(fmt, CFG.model, _job(name, value), CFG.cluster, PLAN)
            assert any(x.startswith(f"train.{name}={_shown(value)}: ") for x in lines), (fmt, name, lines)
            if runs is not None:  # the value the target runs is not listed
                same = [v for v in TRIES[name] if _shown(v) == runs]
                for v in same:
                    lines = unmapped(fmt, CFG.model, _job(name, v), CFG.cluster, PLAN)
                    assert not any(x.startswith(f"train.{name}=") for x in lines), (fmt, name, v)


def test_default_job_lists_no_train_field():
    for fmt in FORMATS:
        assert not [x for x in unmapped(fmt, CFG.model, BASE, CFG.cluster, PLAN) if x.startswith("train.")], fmt


def test_lr_seed_and_optimizer_are_written_under_the_targets_keys():
    job = dataclasses.replace(BASE, lr=1e-3, seed=7)
    doc = tomllib.loads(render("torchtitan", CFG.model, job, CFG.cluster, PLAN))
    assert (doc["optimizer"]["lr"], doc["debug"]["seed"]) == (1e-3, 7)
    argv = " ".join(render("megatron", CFG.model, dataclasses.replace(job, optimizer="sgd"), CFG.cluster, PLAN).split())
    assert "--lr 0.001" in argv and "--seed 7" in argv and "--optimizer sgd" in argv
    # the defaults are the targets' own (Megatron's --optimizer adam is AdamW): nothing written
    argv = render("megatron", CFG.model, BASE, CFG.cluster, PLAN)
    assert "--lr" not in argv and "--seed" not in argv and "--optimizer" not in argv


def test_megatron_writes_bf16_gradient_reduction():
    """Megatron-LM core_v0.16.1 arguments.py: --grad-reduce-in-bf16 turns --accumulate-allreduce-grads-in-fp32 off
    (validate_args); the megatron profile prices main_grad at train.grad_dtype (NVIDIA's recipes: bf16)."""
    job = dataclasses.replace(BASE, framework="megatron", grad_dtype="bf16")
    assert "--grad-reduce-in-bf16" in render("megatron", CFG.model, job, CFG.cluster, PLAN)
    assert "--grad-reduce-in-bf16" not in render("megatron", CFG.model, BASE, CFG.cluster, PLAN)
