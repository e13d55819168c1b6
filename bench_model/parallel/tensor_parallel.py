"""Tensor parallelism (Megatron-LM, Shoeybi et al. 2019) with optional sequence parallelism (Korthikanti et al. 2022)
via DTensor `parallelize_module`, the torchtitan plan: wq/wk/wv and w1/w3 column-parallel, wo and w2 row-parallel,
embedding row-parallel (vocab-sharded), output head column-parallel with vocab-sharded logits kept as a DTensor so the
loss runs under `loss_parallel` (no full-vocab all-gather). With SP the norms and residual stream are sharded on the
sequence dim (Shard(1)) between the TP regions; without SP they are replicated across tp."""

from __future__ import annotations

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
