"""Tensor parallelism (Megatron-LM, Shoeybi et al. 2019) with optional sequence parallelism (Korthikanti et al. 2022)
via DTensor `parallelize_module`, the torchtitan plan: wq/wk/wv and w1/w3 column-parallel, wo and w2 row-parallel,
embedding row-parallel (vocab-sharded), output head column-parallel with vocab-sharded logits kept as a DTensor so the
loss runs under `loss_parallel` (no full-vocab all-gather). With SP the norms and residual stream are sharded on the
sequence dim (Shard(1)) between the TP regions; without SP they are replicated across tp."""

from __future__ import annotations

import os
import warnings

from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)

from autotune.core.errors import SpecError


def apply_tensor_parallel(model: nn.Module, tp_mesh: DeviceMesh, sequence_parallel: bool) -> None:
    """In place on a (possibly pipeline-stage) Llama; layers missing on this stage are simply absent."""
    spec = model.spec
    if spec.attention == "mla":
        raise SpecError(
            f"model.attention=mla with plan.tp={tp_mesh.size()}: bench_model runs MLA without tensor parallelism"
        )
    if spec.num_heads % tp_mesh.size() or spec.num_kv_heads % tp_mesh.size():
        raise SpecError(
            f"plan.tp={tp_mesh.size()} must divide model.num_heads={spec.num_heads} "
            f"and model.num_kv_heads={spec.num_kv_heads}"
        )
    stream = Shard(1) if sequence_parallel else Replicate()  # layout of the residual stream between TP regions
    top: dict[str, object] = {}
    if model.tok_embeddings is not None:
        top["tok_embeddings"] = RowwiseParallel(input_layouts=Replicate(), output_layouts=stream)
    if model.norm is not None and sequence_parallel:
        top["norm"] = SequenceParallel()
    if model.output is not None:
        top["output"] = ColwiseParallel(input_layouts=stream, output_layouts=Shard(-1), use_local_output=False)
    if top:
        parallelize_module(model, tp_mesh, top)
    if spec.tie_embeddings and model.tok_embeddings is not None and model.output is not None:
        model.output.weight = model.tok_embeddings.weight  # both Shard(0) over the vocab: re-tie the DTensor
    for block in model.layers.values():
        plan: dict[str, object] = {
            "attention": PrepareModuleInput(input_layouts=(stream, None), desired_input_layouts=(Replicate(), None)),
            "attention.wq": ColwiseParallel(),
            "attention.wk": ColwiseParallel(),
            "attention.wv": ColwiseParallel(),
            "attention.wo": RowwiseParallel(output_layouts=stream),
        }
        if hasattr(block.feed_forward, "experts"):
            # MoE (bench_model.parallel.expert_parallel): the block runs on this rank's local tokens (its sequence
            # shard under SP), so it takes the local tensor and returns one in the stream's layout
            if sequence_parallel:
                plan["feed_forward"] = PrepareModuleInput(
                    input_layouts=(stream,), desired_input_layouts=(stream,), use_local_output=True
                )
        else:
            plan["feed_forward"] = PrepareModuleInput(input_layouts=(stream,), desired_input_layouts=(Replicate(),))
            plan["feed_forward.w1"] = ColwiseParallel()
            plan["feed_forward.w3"] = ColwiseParallel()
            plan["feed_forward.w2"] = RowwiseParallel(output_layouts=stream)
        if sequence_parallel:
            plan["attention_norm"] = SequenceParallel()
            plan["ffn_norm"] = SequenceParallel()
        parallelize_module(block, tp_mesh, plan)


def enable_async_tp(tp_mesh: DeviceMesh, device_type: str, compile: bool) -> None:
    """plan.tp_overlap: torch's async TP, as torchtitan 0.2.2 applies it (`maybe_enable_async_tp`): Inductor's
    micro-pipeline TP pass (`torch._inductor.config._micro_pipeline_tp`) rewrites each compiled block's all-gather ->
    matmul and matmul -> reduce-scatter into decomposed ops over symmetric memory
    (`torch.distributed._symmetric_memory`), so every TP rank must map its peers' buffers: CUDA GPUs of one host with
    peer (NVLink) access. Anywhere else one SpecError naming the field, never a silent plain-TP run."""
    import torch

    rule = "torch async TP needs CUDA GPUs with peer (NVLink) access in one host and plan.compile=true"
    if not compile:
        raise SpecError(f"plan.tp_overlap=true with plan.compile=false: {rule} (rule tp_overlap_needs_compile)")
    if device_type != "cuda" or not torch.cuda.is_available():
        raise SpecError(
            f"plan.tp_overlap=true on device {device_type}: {rule} (plan and export model it; this trainer cannot run it)"
        )
    local = int(os.environ.get("LOCAL_WORLD_SIZE", torch.cuda.device_count()))
    me = torch.cuda.current_device()
    peers = [d for d in range(torch.cuda.device_count()) if d != me]
    if tp_mesh.size() > local or not all(torch.cuda.can_device_access_peer(me, d) for d in peers):
        raise SpecError(
            f"plan.tp_overlap=true with tp={tp_mesh.size()} over {local} local GPU(s) (peer access: "
            f"{all(torch.cuda.can_device_access_peer(me, d) for d in peers)}): {rule}"
        )
    import torch._inductor.config
    from torch.distributed._symmetric_memory import enable_symm_mem_for_group

    torch._inductor.config._micro_pipeline_tp = True
    with warnings.catch_warnings():  # needed before torch 2.11, a deprecated no-op since (FutureWarning)
        warnings.simplefilter("ignore", FutureWarning)
        enable_symm_mem_for_group(tp_mesh.get_group().group_name)
