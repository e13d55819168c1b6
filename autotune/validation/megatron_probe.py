"""Megatron-Core's own per-rank memory for a layout, measured without GPUs: the megatron profile
(autotune/predict/frameworks/megatron.py) is checked against it (tests/unit/test_frameworks_megatron_probe.py).

What runs (megatron-core 0.16.1, the newest release on the package index; `make` installs it --no-deps): one rank of
the world on torch's `fake` process group after `parallel_state.initialize_model_parallel(tp, pp, cp, ep, etp)`,
Megatron-Core's `GPTModel` built from the local (non-Transformer-Engine) layer spec `get_gpt_layer_local_spec` for
the pipeline stage of that rank, all under FakeTensorMode (no bytes are allocated, shapes and dtypes are real):

* model states: the model wrapped in Megatron's `DistributedDataParallel` (bf16 param buffer, fp32 main_grad buffer)
  and `get_megatron_optimizer` (Adam, --bf16, distributed optimizer = plan.zero_stage 1) with its Adam states
  initialised (`init_state_fn`); the bytes are the storages these objects hold: param buffer(s), grad buffer(s),
  fp32 master shards, exp_avg / exp_avg_sq. Dense and expert (MoE) buffers are reported apart.
* activations (dense models): one micro-batch's forward (+ the vocab-parallel loss on the last stage) with
  `torch.autograd.graph.saved_tensors_hooks` recording every tensor autograd keeps for backward, attributed to the
  module that saved it first (embedding, each layer, final norm + output layer, loss). Parameters are excluded.
  MoE models: the token dispatcher sizes its buffers from routed counts (`.tolist()`), which fake tensors do not
  have, so their forward runs on a second, real-tensor copy of the stage (small models only: it allocates) with
  `moe_router_force_load_balancing` and the all-gather dispatcher (patches 10-12, megatron_patches.balanced_moe).
  Every saved storage is held until the count ends, so a freed one's address cannot pass for it.

Patches, each because the local spec assumes a GPU or an extension that a CPU host lacks:
1. CUDA placement -> CPU: `torch.cuda.current_device()` returns the CPU device and a TorchFunctionMode rewrites
   `device="cuda"` / `.cuda()` to CPU (Megatron allocates its buffers, rope frequencies and scale tensors there).
2. `Tensor.type()` reports CPU tensors as `torch.cuda.*Tensor`: megatron/core/optimizer/distrib_optimizer.py sorts
   parameters into bf16/fp32 groups by those strings and rejects anything else.
3. Norms: the local spec's `WrappedTorchNorm` refuses sequence parallelism (torch_norm.py asserts it) because it
   cannot mark its weight for the TP gradient all-reduce. The probe's RMSNorm is what Apex's FusedRMSNorm
   (apex/normalization/fused_layer_norm.py, `FusedRMSNormAffineFunction`) and TE's RMSNorm do: params in
   params_dtype, `weight.sequence_parallel` set, and it saves the input and the fp32 inverse rms per token.
4. Core attention: the local spec's `DotProductAttention` materialises the s x s scores (unfused softmax); the profile
   assumes Transformer Engine's flash attention, which saves q, k, v, the output and the fp32 log-sum-exp. The probe
   runs torch's SDPA (CPU flash kernel) in its place: the same saved tensors.
5. `torch._dynamo.config.disable`: Megatron wraps its fused functions (SwiGLU, bias-dropout-add) in torch.compile
   when `megatron.core` is imported (megatron/core/jit.py); compiled on fake CPU tensors they crash, eager they run
   the same autograd Functions with the same saved tensors.
6. The optimizer is built outside FakeTensorMode: `_get_param_groups` calls `all_gather_object`, which pickles into
   real tensors (the fake process group leaves them as they are); its master shards derive from the fake params and
   are fake themselves.
8. RoPE: without Transformer Engine, Megatron applies rotary embeddings unfused (rope_utils.py
   `_apply_rotary_pos_emb_bshd`), which keeps a cos and a sin tensor per call for backward; TE's fused RoPE
   (`FusedRoPEFunc`, what `apply_rope_fusion` selects on a GPU) keeps only the shared frequencies. The probe's
   `_FusedRope` does the latter.
9. Dropout: on CPU `F.dropout` keeps its scaled noise in the activation dtype (2 bytes per element); CUDA's
   `native_dropout` keeps a bool mask (1 byte). The probe calls `torch.native_dropout` as CUDA does.
7. Megatron's CUDA RNG tracker (tensor_parallel/random.py) forks a per-TP-rank CUDA generator around the embedding
   and sequence-parallel dropouts; `fork` becomes a no-op context (which generator draws the mask does not change
   its bytes).
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from dataclasses import asdict
from typing import Any

import torch
import torch.nn.functional as F

from autotune.core.errors import SpecError
from autotune.core.model import ModelSpec
from autotune.core.types import ParallelPlan
from autotune.validation.megatron_patches import (
    FlashCoreAttention,
    SequenceParallelRMSNorm,
    balanced_moe,
    cuda_on_cpu,
    fused_rope,
)

MEGATRON_CORE_VERSION = "0.16.1"


def _transformer_config(model: ModelSpec, plan: ParallelPlan, ep: int, etp: int, precision: str):
    from megatron.core.transformer.transformer_config import TransformerConfig

    if model.block != "llama":
        raise SpecError(f"model.block={model.block}: the Megatron probe builds Llama blocks (RMSNorm, SwiGLU, RoPE)")
    bf16 = precision == "bf16"
    moe = {}
    if model.num_experts > 0:
        if model.moe_first_k_dense or model.moe_layer_freq != 1 or model.attention != "gqa":
            raise SpecError("the Megatron probe builds MoE models whose every layer is MoE, with GQA attention")
        moe = dict(
            num_moe_experts=model.num_experts,
            moe_router_topk=model.moe_router_topk,
            moe_ffn_hidden_size=model.moe_ffn_hidden_size or model.ffn_hidden_size,
            moe_token_dispatcher_type="allgather",  # alltoall makes a CUDA stream at construction; states are the same
            moe_shared_expert_intermediate_size=model.moe_shared_expert_ffn_hidden_size or None,
        )
    return TransformerConfig(
        num_layers=model.num_layers,
        hidden_size=model.hidden_size,
        num_attention_heads=model.num_heads,
        num_query_groups=model.num_kv_heads,
        kv_channels=model.head_dim,
        ffn_hidden_size=model.ffn_hidden_size,
        tensor_model_parallel_size=plan.tp,
        pipeline_model_parallel_size=plan.pp,
        context_parallel_size=plan.cp,
        expert_model_parallel_size=ep,
        expert_tensor_parallel_size=etp,
        sequence_parallel=plan.sequence_parallel,
        gated_linear_unit=True,  # SwiGLU (--swiglu)
        activation_func=F.silu,
        normalization="RMSNorm",
        add_bias_linear=False,
        hidden_dropout=0.1,  # Megatron's default, the dropout masks [TMU] counts
        attention_dropout=0.0,  # inside the flash kernel: no mask is kept either way
        bf16=bf16,
        params_dtype=torch.bfloat16 if bf16 else torch.float32,
        pipeline_dtype=torch.bfloat16 if bf16 else torch.float32,
        use_cpu_initialization=True,
        perform_initialization=False,  # values do not change memory
        gradient_accumulation_fusion=False,  # needs Apex's fused_weight_gradient_mlp_cuda
        bias_dropout_fusion=True,
        bias_activation_fusion=True,  # SwiGLUFunction: saves fc1's output only (fused_bias_swiglu.py)
        masked_softmax_fusion=False,
        apply_rope_fusion=False,
        **moe,
    )


def _layer_spec(model: ModelSpec):
    import megatron.core.transformer.transformer_block as mc_block
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec

    spec = get_gpt_layer_local_spec(
        num_experts=model.num_experts or None, moe_grouped_gemm=False, normalization="RMSNorm"
    )
    import megatron.core.transformer.attention as mc_attention

    mc_attention.apply_rotary_pos_emb = fused_rope  # patch 8
    spec.submodules.input_layernorm = SequenceParallelRMSNorm
    spec.submodules.pre_mlp_layernorm = SequenceParallelRMSNorm
    spec.submodules.self_attention.submodules.core_attention = FlashCoreAttention
    mc_block.LayerNormImpl = SequenceParallelRMSNorm  # the final norm of the block
    return spec


def _storage_key(t: torch.Tensor) -> int:
    return t.untyped_storage()._cdata


class _Bytes:
    """Bytes of distinct storages, each counted once under the first category that claims it."""

    def __init__(self) -> None:
        self.seen: dict[int, str] = {}
        self.by_cat: dict[str, float] = {}
        self.held: list[Any] = []  # keeps each counted storage alive: its key is its address

    def add(self, cat: str, t: torch.Tensor | None) -> None:
        if t is None or _storage_key(t) in self.seen:
            return
        self.held.append(t.untyped_storage())
        self.seen[_storage_key(t)] = cat
        self.by_cat[cat] = self.by_cat.get(cat, 0.0) + float(t.untyped_storage().nbytes())


def _model_state_bytes(ddp, optimizer) -> dict[str, float]:
    """What Megatron's DDP buffers and distributed optimizer hold on this rank (module docstring)."""
    acc = _Bytes()
    for kind, buffers in (("dense", ddp.buffers), ("expert", ddp.expert_parallel_buffers)):
        for buf in buffers:
            acc.add(f"{kind}_params", buf.param_data)  # None without the distributed optimizer
            acc.add(f"{kind}_grads", buf.grad_data)
    for p in ddp.module.parameters():  # the params' own storage, or a view of the param buffer counted above
        acc.add("dense_params" if getattr(p, "allreduce", True) else "expert_params", p)
    for opt in getattr(optimizer, "chained_optimizers", [optimizer]):
        opt.init_state_fn(opt.optimizer, opt.config)  # Adam's exp_avg / exp_avg_sq, as before the first step
        kind = "expert" if getattr(opt, "is_expert", False) or _expert_group(opt) else "dense"
        for group in opt.optimizer.param_groups:
            for p in group["params"]:
                acc.add(f"{kind}_master", p)  # the fp32 master shard (bf16 training)
                for v in opt.optimizer.state[p].values():
                    if torch.is_tensor(v) and v.dim() > 0:
                        acc.add(f"{kind}_adam", v)
    return acc.by_cat


def _expert_group(opt) -> bool:
    groups = opt.optimizer.param_groups
    return bool(groups) and all(g.get("is_expert_parallel", False) for g in groups)


class _SavedTensors:
    """Every tensor autograd saves for backward, attributed to the region (module) running when it is first saved."""

    def __init__(self, exclude: set[int]) -> None:
        self.region = "other"
        self.acc = _Bytes()
        self.exclude = exclude

    def pack(self, t: torch.Tensor):
        if _storage_key(t) not in self.exclude:
            self.acc.add(self.region, t)
        return t

    def enter(self, name: str):
        def hook(_module, _args):
            self.region = name

        return hook


def _activation_bytes(net, model: ModelSpec, plan: ParallelPlan, seq_len: int) -> dict[str, float]:
    """Saved-for-backward bytes of one micro-batch's forward (+ loss on the last stage), by region."""
    from megatron.core import parallel_state as ps

    saved = _SavedTensors({_storage_key(p) for p in net.parameters()})
    hooks = []
    if net.pre_process:
        hooks.append(net.embedding.register_forward_pre_hook(saved.enter("embedding")))
    for i, layer in enumerate(net.decoder.layers):
        hooks.append(layer.register_forward_pre_hook(saved.enter(f"layer{i}")))
    if net.post_process:
        hooks.append(net.decoder.final_layernorm.register_forward_pre_hook(saved.enter("head")))
        hooks.append(net.output_layer.register_forward_hook(lambda *_: setattr(saved, "region", "loss")))
    b, s = plan.micro_batch_size, seq_len // plan.cp
    tokens = torch.randint(0, model.vocab_size, (b, s))
    positions = torch.arange(s).unsqueeze(0).expand(b, s)
    if not net.pre_process:  # the previous stage's output: (s/t with SP, b, h)
        local_s = s // plan.tp if plan.sequence_parallel else s
        dtype = net.config.pipeline_dtype
        net.set_input_tensor(torch.empty(local_s, b, model.hidden_size, dtype=dtype, requires_grad=True))
    with torch.autograd.graph.saved_tensors_hooks(saved.pack, lambda t: t):
        labels = tokens if net.post_process else None
        net(tokens, positions, None, labels=labels)
        saved.region = "other"
    for h in hooks:
        h.remove()
    assert ps.get_tensor_model_parallel_world_size() == plan.tp
    return saved.acc.by_cat


def probe_megatron(
    model: ModelSpec,
    plan: ParallelPlan,
    seq_len: int,
    precision: str = "bf16",
    ep: int = 1,
    etp: int = 1,
    rank: int = 0,
    activations: bool = True,
) -> dict[str, Any]:
    """Bytes Megatron-Core holds on global rank `rank` (Megatron's rank order tp-cp-ep-dp-pp: pipeline stage
    rank // (tp*cp*dp)) for `plan` with expert parallelism `ep` x `etp`. Returns {"states": {category: bytes},
    "activations": {region: bytes} (dense models, when asked), "stage": pipeline stage, "layers": layers on it}.
    Run it in a fresh process (`run_probes`): it patches torch and Megatron's globals (module docstring)."""
    if plan.zero_stage > 1 or plan.vpp > 1 or plan.offload != "none":
        raise SpecError(
            f"plan.zero_stage={plan.zero_stage}, vpp={plan.vpp}, offload={plan.offload}: the Megatron probe runs "
            "the distributed optimizer (zero_stage 0/1) without interleaving or offload"
        )
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    world = plan.world_size
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world)
    try:
        with cuda_on_cpu():
            return _probe(model, plan, seq_len, precision, ep, etp, activations)
    finally:
        from megatron.core import parallel_state as ps

        ps.destroy_model_parallel()
        dist.destroy_process_group()


def _probe(model, plan, seq_len, precision, ep, etp, activations) -> dict[str, Any]:
    from megatron.core import parallel_state as ps
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
    from torch._subclasses.fake_tensor import FakeTensorMode

    ps.initialize_model_parallel(
        plan.tp,
        plan.pp,
        context_parallel_size=plan.cp,
        expert_model_parallel_size=ep,
        expert_tensor_parallel_size=etp,
        create_gloo_process_groups=False,
    )
    from megatron.core.tensor_parallel import get_cuda_rng_tracker

    get_cuda_rng_tracker().fork = lambda *_a, **_k: contextlib.nullcontext()  # patch 7
    config = _transformer_config(model, plan, ep, etp, precision)
    bf16 = precision == "bf16"
    fake = FakeTensorMode(allow_non_fake_inputs=True)
    with fake:
        net = _gpt_model(config, model, seq_len)
        ddp_config = DistributedDataParallelConfig(
            grad_reduce_in_fp32=True, use_distributed_optimizer=plan.zero_stage >= 1
        )
        ddp = DistributedDataParallel(config, ddp_config, net)
    # patch 6: outside the fake mode
    opt_config = OptimizerConfig(
        optimizer="adam", lr=1e-4, bf16=bf16, params_dtype=config.params_dtype,
        use_distributed_optimizer=plan.zero_stage >= 1,
    )  # fmt: skip
    optimizer = get_megatron_optimizer(opt_config, [ddp], use_gloo_process_groups=False)
    out: dict[str, Any] = {
        "states": _model_state_bytes(ddp, optimizer),
        "stage": ps.get_pipeline_model_parallel_rank(),
        "layers": len(net.decoder.layers),
        "num_params": sum(p.numel() for p in net.parameters()),
    }
    if activations and model.num_experts == 0:
        with fake:
            out["activations"] = _activation_bytes(net, model, plan, seq_len)
    elif activations:
        out["activations"] = _moe_activation_bytes(config, model, plan, seq_len)
    return out


def _gpt_model(config, model: ModelSpec, seq_len: int):
    """Megatron-Core's GPTModel for this pipeline stage (local layer spec, RoPE, tied embeddings as the model says)."""
    from megatron.core import parallel_state as ps
    from megatron.core.models.gpt import GPTModel

    return GPTModel(
        config,
        _layer_spec(model),
        vocab_size=model.vocab_size,
        max_sequence_length=seq_len,
        pre_process=ps.is_pipeline_first_stage(),
        post_process=ps.is_pipeline_last_stage(),
        share_embeddings_and_output_weights=model.tie_embeddings,
        position_embedding_type="rope",
        rotary_base=int(model.rope_theta),
    )


def _moe_activation_bytes(config, model: ModelSpec, plan: ParallelPlan, seq_len: int) -> dict[str, float]:
    """The stage's forward on real tensors (module docstring): force-balanced routing, all-gather dispatcher."""
    from dataclasses import replace

    config = replace(config, moe_router_force_load_balancing=True)
    with balanced_moe(model.moe_router_topk):
        net = _gpt_model(config, model, seq_len).to(config.params_dtype)
        return _activation_bytes(net, model, plan, seq_len)


def run_probes(requests: list[dict[str, Any]], timeout_s: float = 600.0) -> list[dict[str, Any]]:
    """`probe_megatron` on each request ({"model": ModelSpec, "plan": ParallelPlan, "seq_len", and optionally
    "precision", "ep", "etp", "rank", "activations"}) in one fresh Python process, one world after the other. Raises
    RuntimeError with the child's last error line (e.g. megatron-core missing: `make` installs it)."""
    import os
    from pathlib import Path

    payload = [{**r, "model": asdict(r["model"]), "plan": asdict(r["plan"])} for r in requests]
    root = str(Path(__file__).resolve().parents[2])  # this checkout's autotune, also when not installed
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(
        [sys.executable, "-m", "autotune.validation.megatron_probe", json.dumps(payload)],
        capture_output=True,
        check=False,
        text=True,
        timeout=timeout_s,
        env=env,
    )
    if proc.returncode != 0:
        lines = [x for x in proc.stderr.splitlines() if x.strip()]
        raise RuntimeError(f"Megatron-Core probe failed (exit {proc.returncode}): {lines[-1] if lines else ''}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _main(arg: str) -> None:
    import warnings

    warnings.filterwarnings("ignore")  # "Apex / Transformer Engine not installed": the local spec is the point
    results = []
    for req in json.loads(arg):
        kwargs = {k: v for k, v in req.items() if k not in ("model", "plan")}
        results.append(probe_megatron(ModelSpec(**req["model"]), ParallelPlan(**req["plan"]), **kwargs))
    print(json.dumps(results))


if __name__ == "__main__":
    _main(sys.argv[1])
