"""issue 28 item 1: every preset model's best layout for 64, 256 and 1,024 GPUs, exported in each format, is accepted
by that framework's own code (no training: parse, validate, construct configs on CPU):

- megatron: Megatron-LM core_v0.16.1's own `parse_args`, `validate_args` and `core_transformer_config_from_args`
  (vendored: tests/vendor/megatron_lm/README.md), which builds megatron-core 0.16.1's TransformerConfig or
  MLATransformerConfig (their __post_init__ checks the pipeline split, heads, MoE and MLA fields).
- torchtitan 0.2.2: ConfigManager parses the TOML, ParallelDims checks the degrees against the world size, and the
  registered model flavor's ModelArgs carry the preset's dims (head_dim, qk_norm, experts).
- deepspeed 0.19.8: DeepSpeedConfig (pydantic sections forbid unknown keys; batch check as test_interop_schemas.py).
- accelerate 1.15: ClusterConfig.from_yaml_file (refuses unknown keys), the launcher's own flag names, and
  ParallelismConfig's size rules on every parallelism_config (tp > 1 too: only its transformers version check is
  bypassed, transformers not being installed; see _accelerate_parallelism_config).
- nanotron (branch bench_cluster @ a27e8fe8, the one the nanotron profile follows): its own `get_config_from_file`
  (dacite strict=True, so an unknown or misplaced key fails; the dataclasses' __post_init__ checks run) from the
  copy in tests/vendor/nanotron (README there: the config package unchanged, dacite 1.8.1 unchanged, shims for the
  GPU-side modules it imports); the model config must come back as LlamaConfig, the class nanotron's trainer builds
  a model from (trainer.py:103 CONFIG_TO_MODEL_CLASS; a dict that LlamaConfig refuses would fall to `Any`).

The layouts come from tests/unit/data/export_best_layouts.json (the planner's rank 1 under each format's profile,
written by tests/unit/data/make_export_best_layouts.py); one entry is re-planned here to catch a stale file.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
import yaml

from autotune.core.types import ParallelPlan
from autotune.interop import render
from autotune.spec.config import load_config

DATA = json.loads((Path(__file__).parent / "data" / "export_best_layouts.json").read_text())
VENDOR = Path(__file__).resolve().parents[1] / "vendor" / "megatron_lm"
NANOTRON_VENDOR = Path(__file__).resolve().parents[1] / "vendor" / "nanotron"


@functools.cache
def _config(overrides: tuple[str, ...]):
    return load_config(list(overrides))  # Hydra composes in ~0.3 s: once per (model, cluster, profile)


def _jobs(fmt: str) -> dict:
    """name -> (cfg, plan) for every entry planned under `fmt`'s profile that has a fitting layout."""
    profile, out = DATA["profiles"][fmt], {}
    for name, e in DATA["entries"].items():
        if name.endswith(f"/{profile}") and e["plan"] is not None:
            out[name] = (_config(tuple(e["overrides"])), ParallelPlan(**e["plan"]))
    return out


def _write(fmt: str, tmp_path) -> dict:
    files = {}
    for name, (cfg, plan) in _jobs(fmt).items():
        path = tmp_path / (name.replace("/", "_").replace("@", "_") + f".{fmt}")
        path.write_text(render(fmt, cfg.model, cfg.train, cfg.cluster, plan))
        files[name] = (str(path), plan.world_size)
    return files


def test_every_preset_model_has_a_layout_at_256_and_1024_gpus():
    models = {n.split("@")[0] for n in DATA["entries"]}
    assert len(models) == 16  # search_spaces/model/*.yaml except hf (needs a config.json)
    for name, e in DATA["entries"].items():
        # no layout: 64 GPUs too small for DeepSeek-V3 / Kimi-K2 / 405B, or a global batch too small for 1,024
        # data-parallel ranks (the tiny test models, DeepSpeed's dp-only layouts): the planner's one-line reason
        assert e["plan"] is not None or e["why"].startswith(("no layout of", "no valid layout of")), name
        if not name.startswith("tiny") and name.split("@")[1].split("/")[0] in ("256", "1024"):
            assert e["plan"] is not None or name.endswith("/deepspeed"), name


def test_the_stored_best_layout_is_still_the_planners():
    """Re-plan one entry (Qwen3-235B on 256 H100, megatron profile: ~1 s); a mismatch means predictions changed:
    rerun tests/unit/data/make_export_best_layouts.py."""
    from autotune.layouts.planner import enumerate_candidates, top_candidates

    e = DATA["entries"]["qwen3-235b-a22b@256/megatron"]
    cfg = _config(tuple(e["overrides"]))
    top = top_candidates(enumerate_candidates(cfg, 256), cfg, 256, 1)
    assert top.iloc[0]["candidate_id"] == e["candidate_id"]


MEGATRON_SCRIPT = r"""
import contextlib, io, json, os, shlex, sys, warnings
warnings.filterwarnings("ignore")
sys.path.insert(0, sys.argv[2])
os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "1"  # the exported file's note; validate_args asserts it with tp/cp > 1
import torch
torch.cuda.get_device_capability = lambda *a: (9, 0)  # MOCK (no GPU in CI): the Hopper GPU the files target; --moe-grouped-gemm asks
import argparse
from megatron.training import arguments
from megatron.training.arguments import core_transformer_config_from_args, parse_args, validate_args
# parse_args builds the same ~1,000-flag parser on every call (0.5 s): build it once, as parse_args does, and reuse it
_parser = arguments.add_megatron_arguments(argparse.ArgumentParser(description="Megatron-LM Arguments", allow_abbrev=False))
arguments.add_megatron_arguments = lambda parser: _parser
out = {}
for name, (path, world) in json.loads(sys.argv[1]).items():
    os.environ["WORLD_SIZE"] = str(world)
    # --no-rope-fusion: Transformer Engine is not installed here (TransformerConfig refuses rope fusion without it)
    sys.argv = ["pretrain_gpt.py", *shlex.split(open(path).read(), comments=True), "--no-rope-fusion"]
    if "--use-megatron-fsdp" in sys.argv:  # the file's note: Megatron-FSDP asserts CUDA_DEVICE_MAX_CONNECTIONS != 1
        os.environ.pop("CUDA_DEVICE_MAX_CONNECTIONS", None)
    else:
        os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "1"
    with contextlib.redirect_stdout(io.StringIO()):
        args = parse_args()
        validate_args(args)
        cfg = core_transformer_config_from_args(args)
    out[name] = dict(cls=type(cfg).__name__, layers=cfg.num_layers, kv_channels=cfg.kv_channels,
                     qk_layernorm=cfg.qk_layernorm, first=cfg.num_layers_in_first_pipeline_stage,
                     last=cfg.num_layers_in_last_pipeline_stage, pp=cfg.pipeline_model_parallel_size,
                     dp=args.data_parallel_size, experts=cfg.num_moe_experts or 0, vpp=args.virtual_pipeline_model_parallel_size,
                     lr=args.lr, seed=args.seed, fp32_grads=args.accumulate_allreduce_grads_in_fp32,
                     fp8_recipe=cfg.fp8_recipe if cfg.fp8 else None)
print(json.dumps(out))
"""


def test_megatron_lm_parser_accepts_every_preset_best_layout(tmp_path):
    pytest.importorskip("megatron.core", reason="megatron-core not installed")
    jobs, files = _jobs("megatron"), _write("megatron", tmp_path)
    files.update(_fp8_param_gather_files(tmp_path))  # in the same interpreter: megatron.core imports once
    files.update(_fp8_param_gather_files(tmp_path, deferral_and_fp8_attention=True))
    got = _run_with(MEGATRON_SCRIPT, files, str(VENDOR))
    # train.embedding_wgrad_deferral's flags (--defer-embedding-wgrad-compute --wgrad-deferral-limit N) pass
    # parse_args / validate_args too (train.fp8_attention has no argument in this release: listed, not written)
    assert (got["fp8pg/tensorwise+defer+dpa"]["layers"], got["fp8pg/tensorwise+defer+dpa"]["pp"]) == (32, 2)
    # and the train keys it writes (autotune/interop/train_keys.py): --grad-reduce-in-bf16 turns validate_args' fp32
    # main_grad off, --lr as given; the other files keep Megatron's defaults (fp32 main_grad, its own --lr)
    assert [got["fp8pg/tensorwise+defer+dpa"][k] for k in ("lr", "fp32_grads")] == [0.001, False]
    assert [got["fp8pg/tensorwise"][k] for k in ("lr", "fp32_grads")] == [None, True]
    # train.fp8_delayed_scaling: TransformerConfig.fp8_recipe "delayed" where the other files run "tensorwise"
    assert [got[f"fp8pg/{k}"]["fp8_recipe"] for k in ("tensorwise+defer+dpa", "tensorwise", "mxfp8")] == [
        "delayed",
        "tensorwise",
        "mxfp8",
    ]
    # train.fp8_param_gather's flags pass parse_args / validate_args (the distributed optimizer they need is on)
    assert {k: (v["layers"], v["pp"], v["dp"]) for k, v in got.items() if k.startswith("fp8pg")} == {
        "fp8pg/tensorwise": (32, 2, 8),
        "fp8pg/mxfp8": (32, 2, 8),
        "fp8pg/tensorwise+defer+dpa": (32, 2, 8),
    }
    for name, (cfg, plan) in jobs.items():
        m, r = cfg.model, got[name]
        assert r["cls"] == ("MLATransformerConfig" if m.attention == "mla" else "TransformerConfig"), name
        assert (r["layers"], r["pp"], r["dp"], r["experts"]) == (m.num_layers, plan.pp, plan.dp, m.num_experts), name
        if m.attention == "gqa":
            assert r["kv_channels"] == m.head_dim, name  # issue 28: Qwen3-235B was built with 4096/64 = 64
        assert r["qk_layernorm"] == m.qk_norm, name
        assert (r["vpp"] or 1) == plan.vpp, name
    # Qwen3-235B (94 layers) at pp16: bench_model's split 5 + 14x6 + 5, which megatron-core's divisibility assert
    # refused without the first/last flags (issue 28)
    hit = [n for n, (c, p) in jobs.items() if c.model.name == "qwen3-235b-a22b" and c.model.num_layers % p.pp]
    for name in hit:
        r = got[name]
        assert r["first"] is not None and r["last"] is not None, name


def _fp8_param_gather_files(tmp_path, deferral_and_fp8_attention: bool = False) -> dict:
    """Llama-3.1-8B on 64 GB200 (dp8 tp4 pp2, ZeRO-1) with train.fp8_param_gather under both FP8 recipes it covers:
    --fp8-param-gather (+ --reuse-grad-buf-for-mxfp8-param-ag with MXFP8); `deferral_and_fp8_attention`: the
    tensorwise job with train.embedding_wgrad_deferral=4, train.fp8_attention, train.grad_dtype=bf16, train.lr and
    train.fp8_delayed_scaling (--fp8-recipe delayed) as well."""

    extra = (
        (
            "train.embedding_wgrad_deferral=4",
            "train.fp8_attention=true",
            "train.grad_dtype=bf16",
            "train.lr=0.001",
            "train.fp8_delayed_scaling=true",
        )
        if deferral_and_fp8_attention
        else ()
    )
    cfg = _config(
        ("model=llama-3.1-8b", "cluster=gb200-nvl72", "train.framework=megatron", "train.fp8_param_gather=true", *extra)
    )
    files = {}
    for fp8 in ("tensorwise",) if extra else ("tensorwise", "mxfp8"):
        plan = ParallelPlan(
            dp=8, tp=4, pp=2, zero_stage=1, sequence_parallel=True, fp8=fp8, micro_batch_size=1,
            grad_accum_steps=cfg.train.global_batch_size // 8,
        )  # fmt: skip
        text = render("megatron", cfg.model, cfg.train, cfg.cluster, plan)
        assert "--fp8-param-gather" in text and ("--reuse-grad-buf-for-mxfp8-param-ag" in text) == (fp8 == "mxfp8")
        tag = f"{fp8}+defer+dpa" if extra else fp8
        if extra:
            assert "--defer-embedding-wgrad-compute" in text and "train.fp8_attention=True: " in text
        path = tmp_path / f"fp8pg_{tag}.megatron"
        path.write_text(text)
        files[f"fp8pg/{tag}"] = (str(path), plan.world_size)
    return files


def _run_with(script: str, payload: dict, *extra: str) -> dict:
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, "-c", script, json.dumps(payload), *extra], capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


TORCHTITAN_SCRIPT = r"""
import dataclasses, importlib, importlib.util, json, sys, types
from pathlib import Path
root = Path(importlib.util.find_spec("torchtitan").origin).parent
pkg = types.ModuleType("torchtitan"); pkg.__path__ = [str(root)]; sys.modules["torchtitan"] = pkg  # skip its __init__
from torchtitan.config.manager import ConfigManager
from torchtitan.distributed.parallel_dims import ParallelDims
ARGS = {"llama3": "llama3_args", "qwen3": "qwen3_args", "deepseek_v3": "deepseekv3_args"}
out = {}
for name, (path, world) in json.loads(sys.argv[1]).items():
    cfg = ConfigManager().parse_args(["--job.config_file", path])
    par = cfg.parallelism
    dims = ParallelDims(dp_replicate=par.data_parallel_replicate_degree, dp_shard=par.data_parallel_shard_degree,
                        cp=par.context_parallel_degree, tp=par.tensor_parallel_degree,
                        pp=par.pipeline_parallel_degree, ep=par.expert_parallel_degree,
                        etp=par.expert_tensor_parallel_degree, world_size=world)
    flavors = getattr(importlib.import_module(f"torchtitan.models.{cfg.model.name}"), ARGS[cfg.model.name])
    a = flavors.get(cfg.model.flavor)
    dims_of = None if a is None else dict(dim=a.dim, n_layers=a.n_layers, n_heads=a.n_heads,
                                          qk_norm=getattr(a, "qk_norm", False), head_dim=getattr(a, "head_dim", None),
                                          rope_theta=float(a.rope_theta))
    out[name] = dict(model=[cfg.model.name, cfg.model.flavor], args=dims_of, dp=dims.dp_replicate * dims.dp_shard,
                     lr=cfg.optimizer.lr, seed=cfg.debug.seed)
print(json.dumps(out))
"""


def test_torchtitan_accepts_every_preset_best_layout(tmp_path):
    pytest.importorskip("tyro", reason="torchtitan 0.2.2 + tyro not installed")
    jobs, files = _jobs("torchtitan"), _write("torchtitan", tmp_path)
    # train.lr / train.seed off their defaults: written as optimizer.lr / debug.seed (autotune/interop/train_keys.py)
    cfg = _config(("model=llama-3.1-8b", "cluster=h100-sxm-80gb", "train.lr=0.001", "train.seed=7"))
    plan = ParallelPlan(dp=8, zero_stage=3, micro_batch_size=1, grad_accum_steps=cfg.train.global_batch_size // 8)
    (tmp_path / "lr_seed.toml").write_text(render("torchtitan", cfg.model, cfg.train, cfg.cluster, plan))
    files["lr_seed"] = (str(tmp_path / "lr_seed.toml"), 8)
    got = _run_with(TORCHTITAN_SCRIPT, files)
    written = got.pop("lr_seed")
    assert (written["lr"], written["seed"]) == (0.001, 7)
    registered = 0
    for name, (cfg, plan) in jobs.items():
        m, r = cfg.model, got[name]
        assert r["dp"] == plan.dp, name
        if r["args"] is None:  # not a torchtitan flavor: written under the model's own name and listed as such
            assert r["model"][1] == m.name and f'register flavor "{m.name}"' in Path(files[name][0]).read_text()
            continue
        registered += 1
        assert (r["args"]["dim"], r["args"]["n_layers"], r["args"]["n_heads"]) == (
            m.hidden_size,
            m.num_layers,
            m.num_heads,
        ), name
        # a flavor's other RoPE base (torchtitan's Qwen3-235B: 5e6, HF config 1e6) is listed as not mapped
        listed = f"model.rope_theta={m.rope_theta:g}: torchtitan 0.2.2's registered" in Path(files[name][0]).read_text()
        assert (r["args"]["rope_theta"] != m.rope_theta) == listed, name
        if m.attention == "gqa" and r["args"]["head_dim"] is not None:
            assert (r["args"]["head_dim"], r["args"]["qk_norm"]) == (m.head_dim, m.qk_norm), name
    assert registered >= 9  # Llama-3.1 8B/70B/405B, Qwen3 30B/235B, DeepSeek-V3 at the sizes they fit


DEEPSPEED_SCRIPT = r"""
import json, sys
from deepspeed.runtime.config import DeepSpeedConfig
out = {}
for name, (path, world) in json.loads(sys.argv[1]).items():
    doc = json.load(open(path))
    doc.pop("train_batch_size")  # no process group: DeepSpeed's dp world is 1, so it re-derives the batch
    c = DeepSpeedConfig(doc)
    out[name] = dict(micro=c.train_micro_batch_size_per_gpu, accum=c.gradient_accumulation_steps,
                     zero=int(c.zero_optimization_stage))
print(json.dumps(out))
"""


def test_deepspeed_accepts_every_preset_best_layout(tmp_path):
    pytest.importorskip("deepspeed", reason="deepspeed not installed")
    jobs, files = _jobs("deepspeed"), _write("deepspeed", tmp_path)
    got = _run_with(DEEPSPEED_SCRIPT, files)
    for name, (_, plan) in jobs.items():
        assert plan.tp == 1, name  # the deepspeed profile's no_tp rule picked it; the exporter refuses tp > 1
        assert (got[name]["micro"], got[name]["accum"], got[name]["zero"]) == (
            plan.micro_batch_size,
            plan.grad_accum_steps,
            plan.zero_stage,
        ), name


def test_accelerate_accepts_every_preset_best_layout(tmp_path):
    pytest.importorskip("accelerate", reason="accelerate not installed")
    from accelerate.commands.config.config_args import ClusterConfig
    from accelerate.commands.launch import launch_command_parser

    flags = {a.dest for a in launch_command_parser()._actions}
    jobs, tp_checked = _jobs("accelerate"), 0
    for name, (path, _) in _write("accelerate", tmp_path).items():
        cfg = ClusterConfig.from_yaml_file(path)  # ValueError on any key ClusterConfig does not know
        doc = yaml.safe_load(Path(path).read_text())
        for section in ("fsdp_config", "deepspeed_config", "parallelism_config"):
            assert not set(doc.get(section) or {}) - flags, name
        assert cfg.num_processes == doc["num_processes"], name
        if doc.get("parallelism_config"):
            pc = _accelerate_parallelism_config(doc["parallelism_config"])
            assert pc.total_size == doc["num_processes"] and pc.tp_size == jobs[name][1].tp, name
            tp_checked += pc.tp_size > 1
    # every tp > 1 layout went through ParallelismConfig (17 of the stored bench_model layouts after the 2026-11-25 refit;
    # the floor keeps the check from going vacuous when the planner moves)
    assert tp_checked == sum(plan.tp > 1 for _, plan in jobs.values()) >= 10


def _accelerate_parallelism_config(section: dict):
    """accelerate's ParallelismConfig from the file's parallelism_config_* sizes, with its __post_init__ size rules
    (each size >= 1; no TP/CP with pure replication). With tp_size > 1 it would build TorchTensorParallelConfig(),
    whose __post_init__ only checks the torch and transformers versions (accelerate/utils/dataclasses.py) and fails
    here because transformers is not installed: MOCK (that version check only) - the handler is passed in, built
    without its __post_init__, with accelerate's default enable_async_tp=False."""
    from accelerate.parallelism_config import ParallelismConfig
    from accelerate.utils.dataclasses import TorchTensorParallelConfig

    handler = object.__new__(TorchTensorParallelConfig)
    handler.enable_async_tp = False
    sizes = {k.removeprefix("parallelism_config_"): v for k, v in section.items()}
    return ParallelismConfig(**sizes, tp_handler=handler if sizes.get("tp_size", 1) > 1 else None)


NANOTRON_SCRIPT = r"""
import json, sys, yaml
sys.path.insert(0, sys.argv[2])
from nanotron.config import get_config_from_file
out = {}
for name, (path, world) in json.loads(sys.argv[1]).items():
    try:
        c = get_config_from_file(path)
    except Exception as e:  # the negative controls: report what nanotron's parser raised
        out[name] = dict(error=type(e).__name__)
        continue
    par, mc, tok, opt = c.parallelism, c.model.model_config, c.tokens, c.optimizer
    out[name] = dict(
        model_config=type(mc).__name__, engine=type(par.pp_engine).__name__, tp_mode=par.tp_mode.name,
        par=[par.dp, par.tp, par.pp, par.expert_parallel_size, par.recompute_layer, par.tp_linear_async_communication],
        dims=[mc.hidden_size, mc.intermediate_size, mc.num_hidden_layers, mc.num_attention_heads,
              mc.num_key_value_heads, mc.vocab_size, mc.tie_word_embeddings, mc.rope_theta],
        tokens=[tok.sequence_length, tok.micro_batch_size, tok.batch_accumulation_per_replica],
        global_batch=c.global_batch_size, zero=opt.zero_stage, factory=type(opt.optimizer_factory).__name__,
        dtype=str(c.model.dtype),
    )
print(json.dumps(out))
"""


def test_nanotron_parser_accepts_every_preset_best_layout(tmp_path):
    jobs, files = _jobs("nanotron"), _write("nanotron", tmp_path)
    assert len(jobs) == 42  # 48 (model, GPU count) pairs less the six without a layout (stored reasons above)
    # negative controls, so a parser that accepted anything would fail here: a key ParallelismArgs does not have
    # (dacite strict=True), a pipeline engine nanotron does not have (its type hook refuses it), and a key LlamaConfig
    # does not have (the union falls to `Any`, a dict, and ModelArgs.__post_init__ cannot set _is_using_mup on it)
    base = yaml.safe_load(Path(files["llama-3.1-8b@64/nanotron"][0]).read_text())
    controls = {
        "unknown_key": (("parallelism",), "recompute_granularity", "selective"),
        "bad_engine": (("parallelism",), "pp_engine", "interleaved_1f1b"),
        "unknown_model_key": (("model", "model_config"), "num_experts", 8),
    }
    for bad, (section, key, value) in controls.items():
        doc = yaml.safe_load(yaml.safe_dump(base))
        node = doc
        for part in section:
            node = node[part]
        node[key] = value
        (tmp_path / f"{bad}.yaml").write_text(yaml.safe_dump(doc))
        files[bad] = (str(tmp_path / f"{bad}.yaml"), 64)
    got = _run_with(NANOTRON_SCRIPT, files, str(NANOTRON_VENDOR))
    assert got["unknown_key"] == {"error": "UnexpectedDataError"}  # dacite.exceptions.UnexpectedDataError
    assert got["bad_engine"] == {"error": "ValueError"}  # utils_config.cast_str_to_pipeline_engine
    assert got["unknown_model_key"] == {"error": "AttributeError"}
    for name, (cfg, plan) in jobs.items():
        m, t, r = cfg.model, cfg.train, got[name]
        assert r["model_config"] == "LlamaConfig" and r["factory"] == "AdamWOptimizerArgs", name
        assert r["dtype"] == "torch.bfloat16", name
        assert (
            r["engine"]
            == {"1f1b": "OneForwardOneBackwardPipelineEngine", "gpipe": "AllForwardAllBackwardPipelineEngine"}[
                plan.pp_schedule
            ]
        ), name
        assert r["tp_mode"] == ("REDUCE_SCATTER" if plan.sequence_parallel else "ALL_REDUCE"), name
        assert r["par"] == [plan.dp, plan.tp, plan.pp, plan.ep, plan.recompute == "full", plan.tp_overlap], name
        assert plan.dp * plan.tp * plan.pp == files[name][1], name  # nanotron's world: dp*tp*pp (no cp)
        assert r["dims"] == [
            m.hidden_size,
            m.ffn_hidden_size,
            m.num_layers,
            m.num_heads,
            m.num_kv_heads,
            m.vocab_size,
            m.tie_embeddings,
            m.rope_theta,
        ], name
        assert r["tokens"] == [t.seq_len, plan.micro_batch_size, plan.grad_accum_steps], name
        assert r["global_batch"] == t.global_batch_size, name  # Config.global_batch_size: mbs * accum * dp
        assert r["zero"] == min(plan.zero_stage, 1), name
        # what LlamaConfig cannot say is listed in the file's NOT MAPPED block (Qwen3-235B: 128 experts, head_dim 128
        # where nanotron would use 4096/64 = 64)
        text = Path(files[name][0]).read_text()
        assert (f"model.num_experts={m.num_experts}: " in text) == m.is_moe, name
        assert (f"model.head_dim={m.head_dim}: " in text) == (m.head_dim * m.num_heads != m.hidden_size), name
    # Llama-3.1-405B at 256 GPUs: the nanotron profile needs whole-layer recompute there; the file now asks for it
    assert got["llama-3.1-405b@256/nanotron"]["par"][4] is True
