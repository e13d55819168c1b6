"""MoE / MLA exports validated by the targets' own code (the jobs and helpers are test_interop_schemas.py's):
torchtitan 0.2.2's ConfigManager + ParallelDims building its sparse mesh on a fake process group, and megatron-core
0.16.1's TransformerConfig / MLATransformerConfig, initialize_model_parallel and microbatch calculator built from the
exported Megatron-LM flags (Megatron-LM's own argparse is not packaged)."""

import importlib.util

import pytest

from tests.unit.test_interop_schemas import MOE_JOBS, _run, _write_moe, moe_job

TORCHTITAN_MOE_SCRIPT = r"""
import importlib.util, json, sys, types
from pathlib import Path
root = Path(importlib.util.find_spec("torchtitan").origin).parent
pkg = types.ModuleType("torchtitan"); pkg.__path__ = [str(root)]; sys.modules["torchtitan"] = pkg  # skip its __init__
import torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore
import torchtitan.distributed.parallel_dims as tt_dims
from torchtitan.config.manager import ConfigManager
tt_dims.device_type = "cpu"  # torchtitan picks "cuda" without an accelerator; the fake process group runs on CPU
out = {}
for name, (path, world) in json.loads(sys.argv[1]).items():
    cfg = ConfigManager().parse_args(["--job.config_file", path])
    par = cfg.parallelism
    dims = tt_dims.ParallelDims(dp_replicate=par.data_parallel_replicate_degree, dp_shard=par.data_parallel_shard_degree,
                                cp=par.context_parallel_degree, tp=par.tensor_parallel_degree,
                                pp=par.pipeline_parallel_degree, ep=par.expert_parallel_degree,
                                etp=par.expert_tensor_parallel_degree, world_size=world)
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    dims.build_mesh()  # unflattens (pp, dp_replicate, efsdp, ep, etp) over the world and checks every mesh size
    sizes = {k: dims._meshes[k].size() for k in ("ep", "efsdp", "etp")}  # get_mesh refuses a size-1 dim
    dist.destroy_process_group()
    out[name] = dict(model=[cfg.model.name, cfg.model.flavor], ep=par.expert_parallel_degree,
                     etp=par.expert_tensor_parallel_degree, sizes=sizes)
print(json.dumps(out))
"""


def test_torchtitan_parallel_dims_accept_moe_exports(tmp_path):
    """torchtitan 0.2.2 parallelism.expert_parallel_degree / expert_tensor_parallel_degree parsed by its ConfigManager,
    then its ParallelDims builds the sparse mesh (pp, dp_replicate, efsdp, ep, etp) on a fake process group of the
    layout's world size: efsdp = dp_shard*cp*tp / (ep*etp) must be whole (parallel_dims.py `build_mesh`) and ETP is
    1 or TP ("Currently we only support ETP=TP or ETP=1", `_validate`)."""
    spec = importlib.util.find_spec("torchtitan")
    if spec is None or importlib.util.find_spec("tyro") is None:
        pytest.skip("torchtitan 0.2.2 + tyro not installed (pip install --no-deps torchtitan==0.2.2 tyro ...)")
    files = _write_moe("torchtitan", tmp_path)
    got = _run(TORCHTITAN_MOE_SCRIPT, {k: [str(v), moe_job(k)[3].world_size] for k, v in files.items()})
    for name in MOE_JOBS:
        p, r = moe_job(name)[3], got[name]
        assert (r["ep"], r["etp"]) == (p.ep, p.etp), name
        efsdp = p.dp * p.cp * p.tp // (p.ep * p.etp)  # Megatron's parallel folding: the same expert-dp group
        assert r["sizes"] == {"ep": p.ep, "efsdp": efsdp, "etp": p.etp}, name
    # the MoE model flavours torchtitan registers; tiny-moe is not one (written under its own name and listed)
    assert got["qwen3_30b_ep8_pp2"]["model"] == ["qwen3", "30B-A3B"]
    assert got["deepseek_v3_ep16_pp4"]["model"] == ["deepseek_v3", "671B"]
    assert got["tiny_mla_ep4"]["model"] == ["deepseek_v3", "tiny-moe"]
    assert 'register flavor "tiny-moe"' in files["tiny_ep2_z3"].read_text()


MEGATRON_MOE_SCRIPT = r"""
import dataclasses, json, shlex, sys, warnings
warnings.filterwarnings("ignore")  # "Transformer Engine and Apex are not installed"
import torch.nn.functional as F
import torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore
from megatron.core import parallel_state as ps
from megatron.core.distributed import DistributedDataParallelConfig
from megatron.core.num_microbatches_calculator import destroy_num_microbatches_calculator, get_num_microbatches, init_num_microbatches_calculator
from megatron.core.transformer.transformer_config import MLATransformerConfig, TransformerConfig
# Megatron-LM megatron/training/arguments.py: argparse dests that differ from the flag, and what
# core_transformer_config_from_args() renames (num_experts -> num_moe_experts, norm_epsilon -> layernorm_epsilon,
# swiglu -> gated_linear_unit + silu, --disable-bias-linear is dest add_bias_linear store_false, fp8_format -> fp8)
RENAMES = {"num_experts": "num_moe_experts", "norm_epsilon": "layernorm_epsilon", "fp8_format": "fp8",
           "fp4_format": "fp4"}
SWITCHES = {"swiglu": {"gated_linear_unit": True, "activation_func": F.silu}, "disable_bias_linear": {"add_bias_linear": False},
            "group_query_attention": {}, "multi_latent_attention": {}}
# not TransformerConfig fields: each goes to the Megatron-Core object named here (checked below or by signature)
ELSEWHERE = {"seq_length": "data", "max_position_embeddings": "GPTModel.max_sequence_length",
             "vocab_size": "GPTModel.vocab_size", "make_vocab_size_divisible_by": "data",
             "position_embedding_type": "GPTModel.position_embedding_type", "rotary_base": "GPTModel.rotary_base",
             "untie_embeddings_and_output_weights": "GPTModel.share_embeddings_and_output_weights",
             "micro_batch_size": "microbatches", "global_batch_size": "microbatches",
             "use_distributed_optimizer": "DistributedDataParallelConfig",
             "use_torch_fsdp2": "megatron.core.distributed.TorchFullyShardedDataParallel (the model wrapper)",
             "num_layers_per_virtual_pipeline_stage": "virtual_pipeline_model_parallel_size",
             "ckpt_format": "megatron.training checkpointing (fsdp_dtensor with Megatron-FSDP)"}
DDP_FIELDS = ("use_distributed_optimizer", "use_megatron_fsdp", "data_parallel_sharding_strategy", "fsdp_double_buffer")
def value(v):
    if v.startswith("["):
        return eval(v)  # --moe-layer-freq: Megatron's moe_freq_type evaluates the list expression
    if "," in v:  # --window-size: Megatron's tuple_type, "128,0" -> (128, 0)
        return tuple(int(x) for x in v.split(","))
    for cast in (int, float):
        try:
            return cast(v)
        except ValueError:
            pass
    return v
out = {}
for name, (path, world) in json.loads(sys.argv[1]).items():
    argv, args = shlex.split(open(path).read(), comments=True), {}
    for i, a in enumerate(argv):
        if a.startswith("--"):
            nxt = argv[i + 1] if i + 1 < len(argv) else "--"
            args[a[2:].replace("-", "_")] = True if nxt.startswith("--") else value(nxt)
    cls = MLATransformerConfig if args.get("multi_latent_attention") else TransformerConfig
    fields = {f.name for f in dataclasses.fields(cls)}
    kw, unmapped = {}, []
    for k, v in args.items():
        if k in SWITCHES:
            kw.update(SWITCHES[k])
        elif RENAMES.get(k, k) in fields:
            kw[RENAMES.get(k, k)] = v
        elif k not in ELSEWHERE and k not in DDP_FIELDS:
            unmapped.append(k)
    if "num_layers_per_virtual_pipeline_stage" in args:
        kw["virtual_pipeline_model_parallel_size"] = args["num_layers"] // (args["pipeline_model_parallel_size"] * args["num_layers_per_virtual_pipeline_stage"])
    import torch
    kw["params_dtype"] = kw["pipeline_dtype"] = torch.bfloat16 if args.get("bf16") else torch.float32
    cfg = cls(**kw)  # TransformerConfig.__post_init__: Megatron-Core's own MoE / MLA / parallelism checks
    DistributedDataParallelConfig(**{k: args[k] for k in DDP_FIELDS if k in args})  # Megatron-FSDP's fields too
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    ps.initialize_model_parallel(cfg.tensor_model_parallel_size, cfg.pipeline_model_parallel_size,
                                 context_parallel_size=cfg.context_parallel_size,
                                 expert_model_parallel_size=cfg.expert_model_parallel_size,
                                 expert_tensor_parallel_size=cfg.expert_tensor_parallel_size,
                                 create_gloo_process_groups=False)
    dp = ps.get_data_parallel_world_size()
    init_num_microbatches_calculator(0, None, args["global_batch_size"], args["micro_batch_size"], dp)
    out[name] = dict(cls=cls.__name__, unmapped=unmapped, dp=dp, ep=ps.get_expert_model_parallel_world_size(),
                     etp=ps.get_expert_tensor_parallel_world_size(), edp=ps.get_expert_data_parallel_world_size(),
                     microbatches=get_num_microbatches(), moe_layers=sum(cfg.moe_layer_freq),
                     experts=cfg.num_moe_experts, topk=cfg.moe_router_topk,
                     kv_lora_rank=getattr(cfg, "kv_lora_rank", None), score=cfg.moe_router_score_function,
                     expert_bias=cfg.moe_router_enable_expert_bias, window=cfg.window_size,
                     window_skip=cfg.window_attn_skip_freq)
    destroy_num_microbatches_calculator(); ps.destroy_model_parallel(); dist.destroy_process_group()
print(json.dumps(out))
"""


def test_megatron_core_config_accepts_moe_exports(tmp_path):
    """Megatron-LM's argparse is not packaged; megatron-core 0.16.1's is what the flags become: every exported flag is
    turned into a TransformerConfig (MLATransformerConfig for --multi-latent-attention) field the way
    megatron/training/arguments.py `core_transformer_config_from_args` does (a field of the flag's name, or its
    listed rename), or is one of the few arguments another Megatron-Core object takes (GPTModel, the microbatch
    calculator, DistributedDataParallelConfig). A flag that maps to none of them fails. The config's __post_init__
    runs Megatron's MoE/MLA checks, `initialize_model_parallel` folds ep x etp over the world on a fake process group
    (its world-size divisibility checks), and the microbatch calculator checks global = micro x accumulation x dp."""
    if importlib.util.find_spec("megatron") is None or importlib.util.find_spec("megatron.core") is None:
        pytest.skip("megatron-core 0.16.1 not installed (make installs it --no-deps)")
    files = _write_moe("megatron", tmp_path)
    payload = {k: [str(v), moe_job(k)[3].world_size] for k, v in files.items()}
    bogus = tmp_path / "bogus.megatron"  # a flag Megatron does not have must not pass unnoticed
    bogus.write_text(files["tiny_ep2_z3"].read_text() + "--moe-num-experts 8\n")
    got = _run(MEGATRON_MOE_SCRIPT, {**payload, "bogus": [str(bogus), 4]})
    assert got["bogus"]["unmapped"] == ["moe_num_experts"]
    for name in MOE_JOBS:
        m, _, _, p = moe_job(name)
        r = got[name]
        assert r["unmapped"] == [], name
        assert r["cls"] == ("MLATransformerConfig" if m.attention == "mla" else "TransformerConfig"), name
        edp = p.dp * p.cp * p.tp // (p.ep * p.etp)  # parallel folding: world / (etp*ep*pp)
        assert (r["dp"], r["ep"], r["etp"], r["edp"]) == (p.dp, p.ep, p.etp, edp), name
        assert r["microbatches"] == p.grad_accum_steps, name
        assert (r["experts"], r["topk"]) == (m.num_experts, m.moe_router_topk), name
        assert r["moe_layers"] == sum(m.is_moe_layer(i) for i in range(m.num_layers)), name
    assert got["deepseek_v3_ep16_pp4"]["kv_lora_rank"] == 512 and got["tiny_mla_ep4"]["kv_lora_rank"] == 32
    assert (got["deepseek_v3_ep16_pp4"]["score"], got["deepseek_v3_ep16_pp4"]["expert_bias"]) == ("sigmoid", True)
    assert got["qwen3_30b_ep8_pp2"]["moe_layers"] == 48 and got["tiny_ep2_z3"]["moe_layers"] == 3
    # GPT-OSS-120B: a 128-token window on every other layer (Megatron-Bridge GPTOSSProvider (128, 0), skip freq 2)
    assert (got["gpt_oss_ep8"]["window"], got["gpt_oss_ep8"]["window_skip"]) == ([128, 0], 2)
    assert got["qwen3_30b_ep8_pp2"]["window"] is None
