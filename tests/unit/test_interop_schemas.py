"""Exported configs validated by the target projects' own config code, where that package installs cheaply:

- accelerate 1.15 (a `test` extra): ClusterConfig.from_yaml_file (refuses unknown top-level keys), the launcher's own
  flag names for every fsdp_config / deepspeed_config / parallelism_config key, FullyShardedDataParallelPlugin and
  ParallelismConfig built from the file's values.
- DeepSpeed 0.19.8 (`pip install --no-deps --no-build-isolation deepspeed==0.19.8` + hjson, py-cpuinfo, pydantic,
  msgpack, einops): DeepSpeedConfig, whose pydantic sections forbid unknown keys and which checks
  train_batch_size == micro * accumulation * data-parallel world (world = 1 without a process group, so the full
  check runs on dp = 1 layouts; dp > 1 layouts are built without train_batch_size and DeepSpeed re-derives it).
- torchtitan 0.2.2 (`pip install --no-deps torchtitan==0.2.2 tyro docstring-parser typeguard shtab`): its
  ConfigManager parses the TOML into JobConfig (refuses unknown sections/keys), ParallelDims checks the degrees
  against the world size. torchtitan's package __init__ pulls its data stack (datasets, tokenizers), so the config
  modules are loaded from the installed package folder without it, in a subprocess.
A validator that is not installed skips its test with the reason, and that skip fails the run (tests/skip_policy.py:
`make` installs all three); the parse tests in test_interop.py always run.
- megatron-core 0.16.1 (`make` installs it --no-deps), for the MoE/MLA exports: Megatron-LM's argument parser is not
  packaged (megatron-core ships megatron/core only), so each flag becomes the Megatron-Core config field or
  constructor argument megatron/training/arguments.py turns it into, and those objects validate themselves.
nanotron 0.4 (PyPI) cannot be imported (circular import between nanotron.config and nanotron.logging): its exports
are checked by the bench_cluster branch's own config parser, vendored (tests/unit/test_interop_presets.py).
"""

import importlib.util
import json
import subprocess
import sys

import pytest
import yaml
from moe_shapes import TINY_MLA

from autotune.core.types import ParallelPlan
from autotune.interop import render
from autotune.spec.config import load_config

LAYOUTS = {  # llama-3.1-8b, global batch 512: grad_accum_steps = 512 / (dp * micro_batch_size)
    "dp1_tp4_z2": dict(dp=1, tp=4, zero_stage=2, micro_batch_size=4, sequence_parallel=True),
    "dp16_z3_full": dict(dp=16, zero_stage=3, micro_batch_size=2, recompute="full"),
    "dp8_z0": dict(dp=8, zero_stage=0),
    "dp8_z1": dict(dp=8, zero_stage=1, micro_batch_size=2),
    "dp4_cp2_z2": dict(dp=4, cp=2, zero_stage=2),
    "4d_vpp2": dict(
        dp=4,
        tp=4,
        pp=2,
        cp=2,
        vpp=2,
        zero_stage=1,
        recompute="selective",
        sequence_parallel=True,
        pp_schedule="interleaved_1f1b",
    ),
    "dp2_pp4_gpipe": dict(dp=2, pp=4, zero_stage=0, micro_batch_size=1, pp_schedule="gpipe"),
    "dp8_z3_offload_params": dict(dp=8, zero_stage=3, micro_batch_size=2, offload="params"),
    "dp8_z2_offload_optimizer": dict(dp=8, zero_stage=2, micro_batch_size=2, offload="optimizer"),
    "dp1_tp4_z1_offload_optimizer": dict(dp=1, tp=4, zero_stage=1, micro_batch_size=4, offload="optimizer"),
    # HSDP: FSDP1 HYBRID_SHARD (shard group = one 8-GPU node), FSDP2 dp_replicate x dp_shard, with CP
    "dp16_hsdp8_z3": dict(dp=16, zero_stage=3, dp_shard=8),
    "dp16_hsdp4_z2": dict(dp=16, zero_stage=2, dp_shard=4),
    "dp4_cp2_hsdp2_z3": dict(dp=4, cp=2, zero_stage=3, dp_shard=2),
    "dp8_z3_fp8": dict(dp=8, zero_stage=3, micro_batch_size=2, fp8="tensorwise"),
    # async TP: torchtitan's Parallelism.enable_async_tensor_parallel (with compile.enable, which it requires)
    "dp2_tp4_z2_async_tp": dict(
        dp=2, tp=4, zero_stage=2, micro_batch_size=2, sequence_parallel=True, compile=True, tp_overlap=True
    ),
}


def layout(name: str) -> ParallelPlan:
    kw = dict(LAYOUTS[name])
    kw.setdefault("micro_batch_size", 1)
    kw["grad_accum_steps"] = 512 // (kw["dp"] * kw["micro_batch_size"])
    return ParallelPlan(**kw)


@pytest.fixture(scope="module")
def job():
    cfg = load_config(["model=llama-3.1-8b", "cluster=h100-sxm-80gb"])
    return cfg.model, cfg.train, cfg.cluster


def _write_all(fmt: str, job, tmp_path) -> dict:
    files = {}
    for name in LAYOUTS:
        files[name] = tmp_path / f"{name}.{fmt}"
        files[name].write_text(render(fmt, *job, layout(name)))
    return files


def _run(script: str, payload: dict) -> dict:
    r = subprocess.run([sys.executable, "-c", script, json.dumps(payload)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- accelerate


def test_accelerate_accepts_every_exported_file(job, tmp_path):
    pytest.importorskip("accelerate", reason="accelerate (test extra) not installed")
    from accelerate.commands.config.config_args import ClusterConfig
    from accelerate.commands.launch import launch_command_parser
    from accelerate.utils import FullyShardedDataParallelPlugin
    from torch.distributed.fsdp import ShardingStrategy

    flags = {a.dest for a in launch_command_parser()._actions}
    moe = _write_moe("accelerate", tmp_path)  # the MoE exports pass the same checks, ep/etp listed as NOT MAPPED
    for name, path in {**_write_all("accelerate", job, tmp_path), **moe}.items():
        cfg = ClusterConfig.from_yaml_file(str(path))  # ValueError on any key ClusterConfig does not know
        doc = yaml.safe_load(path.read_text())
        for section in ("fsdp_config", "deepspeed_config", "parallelism_config"):
            unknown = sorted(set(doc.get(section) or {}) - flags)
            assert not unknown, f"{name}: {section} keys accelerate launch does not read: {unknown}"
        assert cfg.num_processes == doc["num_processes"]
        if cfg.distributed_type.value == "FSDP":
            fsdp = doc["fsdp_config"]
            plugin = FullyShardedDataParallelPlugin(
                fsdp_version=fsdp["fsdp_version"], reshard_after_forward=fsdp["fsdp_reshard_after_forward"]
            )
            if fsdp["fsdp_version"] == 1:  # the string became torch's enum member of the same name
                assert plugin.reshard_after_forward == ShardingStrategy[fsdp["fsdp_reshard_after_forward"]]
    text = moe["tiny_ep2_tp2_etp2"].read_text()
    assert "#   - plan.ep=2: accelerate's config has no expert parallelism" in text
    assert "#   - plan.etp=2: accelerate's config has no expert tensor parallelism" in text


def test_accelerate_parallelism_config_sizes(job, tmp_path):
    pytest.importorskip("accelerate", reason="accelerate (test extra) not installed")
    from accelerate.parallelism_config import ParallelismConfig

    # tp_size > 1 makes ParallelismConfig build a transformers TP handler (transformers is not installed here):
    # the CP layout exercises the same size rules (no TP/CP with pure replication; sizes multiply to the world).
    # tp > 1 files: test_interop_presets.py builds them with that handler passed in (its version check bypassed).
    doc = yaml.safe_load(render("accelerate", *job, layout("dp4_cp2_z2")))
    sizes = {k.removeprefix("parallelism_config_"): v for k, v in doc["parallelism_config"].items()}
    pc = ParallelismConfig(**sizes)
    assert pc.total_size == doc["num_processes"] == 8
    with pytest.raises(ValueError, match="cannot be used with pure data parallelism"):
        ParallelismConfig(**{**sizes, "dp_replicate_size": 4, "dp_shard_size": 1})


# ---------------------------------------------------------------- DeepSpeed

DEEPSPEED_SCRIPT = r"""
import json, sys
from deepspeed.runtime.config import DeepSpeedConfig
out = {}
for name, path in json.loads(sys.argv[1]).items():
    doc = json.load(open(path))
    dp = doc["_autotune"]["plan"]["dp"]
    if dp > 1:  # no process group here: DeepSpeed's data-parallel world is 1, so let it derive the batch
        doc.pop("train_batch_size")
    c = DeepSpeedConfig(doc)
    bad = None
    if dp == 1:
        doc["train_batch_size"] += 1
        try:
            DeepSpeedConfig(doc)
        except AssertionError as e:
            bad = str(e)
    out[name] = dict(world=c.world_size, train_batch_size=c.train_batch_size, micro=c.train_micro_batch_size_per_gpu,
                     accum=c.gradient_accumulation_steps, zero=int(c.zero_optimization_stage),
                     bf16=bool(c.bfloat16_config.enabled), autotp=c.tensor_parallel_config.autotp_size, bad=bad)
print(json.dumps(out))
"""


def test_deepspeed_config_accepts_every_exported_file(job, tmp_path):
    if importlib.util.find_spec("deepspeed") is None:
        pytest.skip("deepspeed not installed (needs pip install --no-deps --no-build-isolation deepspeed==0.19.8)")
    # the exporter refuses tp > 1 (the deepspeed profile has no TP: test_interop.py); every other layout is written
    names = [n for n in LAYOUTS if layout(n).tp == 1]
    moe = [n for n in MOE_JOBS if moe_job(n)[3].tp == 1]
    files = {n: tmp_path / f"{n}.json" for n in [*names, *moe, "dp1_z0"]}
    for n in names:
        files[n].write_text(render("deepspeed", *job, layout(n)))
    for n in moe:
        files[n].write_text(render("deepspeed", *moe_job(n)))
    dp1 = ParallelPlan(dp=1, micro_batch_size=4, grad_accum_steps=128)
    files["dp1_z0"].write_text(render("deepspeed", *job, dp1))
    got = _run(DEEPSPEED_SCRIPT, {k: str(v) for k, v in files.items()})  # MoE files: DeepSpeedConfig accepts them
    assert len(moe) == 3 and len(names) == len(LAYOUTS) - 4
    for name in moe:
        p = moe_job(name)[3]
        unmapped = json.loads(files[name].read_text())["_autotune_unmapped"]
        assert f"plan.ep={p.ep}: DeepSpeed-MoE sets ep_size on each deepspeed.moe.layer.MoE" in " ".join(unmapped)
        assert (got[name]["micro"], got[name]["accum"]) == (p.micro_batch_size, p.grad_accum_steps), name
    for name in [*names, "dp1_z0"]:
        p, r = (layout(name) if name != "dp1_z0" else dp1), got[name]
        assert (r["micro"], r["accum"], r["zero"], r["bf16"]) == (
            p.micro_batch_size,
            p.grad_accum_steps,
            p.zero_stage,
            True,
        ), name
        assert r["autotp"] == 0, name  # no tensor_parallel section: DeepSpeed's default
        assert r["train_batch_size"] == p.micro_batch_size * p.grad_accum_steps * r["world"], name
    # dp = 1: DeepSpeed's own batch check ran on the file as written, and fires on an off-by-one
    assert got["dp1_z0"]["train_batch_size"] == 512
    assert (
        "train_batch_size is not equal to micro_batch_per_gpu * gradient_acc_step * world_size 513 != 4 * 128 * 1"
        in got["dp1_z0"]["bad"]
    )


# ---------------------------------------------------------------- torchtitan

TORCHTITAN_SCRIPT = r"""
import dataclasses, importlib.util, json, sys, types, typing
from pathlib import Path
root = Path(importlib.util.find_spec("torchtitan").origin).parent
pkg = types.ModuleType("torchtitan"); pkg.__path__ = [str(root)]; sys.modules["torchtitan"] = pkg  # skip its __init__
from torchtitan.config.manager import ConfigManager
from torchtitan.distributed.parallel_dims import ParallelDims
out = {}
for name, (path, world) in json.loads(sys.argv[1]).items():
    cfg = ConfigManager().parse_args(["--job.config_file", path])
    bad_literals = []
    for section in (cfg.parallelism, cfg.training, cfg.activation_checkpoint):
        hints = typing.get_type_hints(type(section))
        for f in dataclasses.fields(section):
            if typing.get_origin(hints[f.name]) is typing.Literal:
                if getattr(section, f.name) not in typing.get_args(hints[f.name]):
                    bad_literals.append(f.name)
    par = cfg.parallelism
    dims = ParallelDims(dp_replicate=par.data_parallel_replicate_degree, dp_shard=par.data_parallel_shard_degree,
                        cp=par.context_parallel_degree, tp=par.tensor_parallel_degree,
                        pp=par.pipeline_parallel_degree, ep=1, etp=1, world_size=world)
    out[name] = dict(parallelism=dataclasses.asdict(par), training=dataclasses.asdict(cfg.training),
                     ac_mode=cfg.activation_checkpoint.mode, bad_literals=bad_literals,
                     batch_degree=dims.dp_replicate * dims.dp_shard)
print(json.dumps(out))
"""


def test_torchtitan_job_config_accepts_every_exported_file(job, tmp_path):
    spec = importlib.util.find_spec("torchtitan")
    if spec is None or importlib.util.find_spec("tyro") is None:
        pytest.skip("torchtitan 0.2.2 + tyro not installed (pip install --no-deps torchtitan==0.2.2 tyro ...)")
    from pathlib import Path

    if not (Path(spec.origin).parent / "config" / "job_config.py").exists():
        pytest.skip("installed torchtitan is not the TOML-reading 0.2.x line")
    files = _write_all("torchtitan", job, tmp_path)
    got = _run(TORCHTITAN_SCRIPT, {k: [str(v), layout(k).world_size] for k, v in files.items()})
    for name in LAYOUTS:
        p, r = layout(name), got[name]
        assert r["bad_literals"] == [], name
        assert r["batch_degree"] == p.dp, name  # ParallelDims accepted the degrees for world_size
        tr, par = r["training"], r["parallelism"]
        # torchtitan train.py: accumulation = global / (local * dp); with PP, microbatches = local / microbatch size
        accum = tr["global_batch_size"] // (tr["local_batch_size"] * p.dp)
        microbatches = tr["local_batch_size"] // par["pipeline_parallel_microbatch_size"] if p.pp > 1 else 1
        assert tr["global_batch_size"] % (tr["local_batch_size"] * p.dp) == 0, name
        assert accum * microbatches * p.dp * p.micro_batch_size == 512, name
        assert (accum if p.pp == 1 else microbatches) == p.grad_accum_steps, name
        assert r["ac_mode"] == p.recompute, name
    assert got["4d_vpp2"]["parallelism"]["pipeline_parallel_schedule"] == "Interleaved1F1B"
    assert got["dp2_pp4_gpipe"]["parallelism"]["pipeline_parallel_schedule"] == "GPipe"
    assert got["dp2_tp4_z2_async_tp"]["parallelism"]["enable_async_tensor_parallel"] is True
    assert not got["dp1_tp4_z2"]["parallelism"]["enable_async_tensor_parallel"]


# ---------------------------------------------------------------- MoE / MLA exports

MLA_TINY = TINY_MLA
# name -> (config overrides, plan fields); grad_accum_steps = the preset's global batch / (dp * micro_batch_size)
MOE_JOBS = {
    "tiny_ep2_z3": (["model=tiny-moe"], dict(dp=4, ep=2, zero_stage=3)),
    "tiny_ep2_tp2_etp2": (["model=tiny-moe"], dict(dp=2, tp=2, ep=2, etp=2, zero_stage=1, sequence_parallel=True)),
    "tiny_mla_ep4": (["model=tiny-moe", *MLA_TINY], dict(dp=4, ep=4, zero_stage=1)),
    "qwen3_30b_ep8_pp2": (
        ["model=qwen3-30b-a3b"],
        dict(dp=8, tp=2, pp=2, ep=8, zero_stage=1, sequence_parallel=True),
    ),
    "qwen3_30b_ep8_etp2": (
        ["model=qwen3-30b-a3b"],
        dict(dp=8, tp=2, ep=8, etp=2, zero_stage=3, sequence_parallel=True),
    ),
    "deepseek_v3_ep16_pp4": (
        ["model=deepseek-v3", "train.seq_len=4096"],
        dict(dp=8, tp=2, pp=4, ep=16, zero_stage=1, sequence_parallel=True),
    ),
    "gpt_oss_ep8": (["model=gpt-oss-120b"], dict(dp=8, ep=8, zero_stage=1)),  # sliding window on half the layers
}


def moe_job(name: str):
    overrides, kw = MOE_JOBS[name]
    cfg = load_config([*overrides, "cluster=h100-sxm-80gb"])
    kw = {"micro_batch_size": 1, **kw}
    kw["grad_accum_steps"] = cfg.train.global_batch_size // (kw["dp"] * kw["micro_batch_size"])
    return cfg.model, cfg.train, cfg.cluster, ParallelPlan(**kw)


def _write_moe(fmt: str, tmp_path) -> dict:
    files = {}
    for name in MOE_JOBS:
        files[name] = tmp_path / f"{name}.{fmt}"
        files[name].write_text(render(fmt, *moe_job(name)))
    return files
