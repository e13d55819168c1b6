"""torchtitan's own peak memory for a layout, measured the way `autotune probe-memory` measures bench_model's
(bench_model/memory_probe.py): rank 0 of the world on a fake process group, the parallelised meta model materialised
under FakeTensorMode, one forward + loss + backward of one micro-batch under torch's FSDPMemTracker (MemTracker when
no FSDP is applied), the peak snapshot split by category.

What runs is torchtitan 0.2.2's Llama 3 `Transformer` and its `parallelize_llama` (TP + SP with loss parallel, CP,
activation checkpointing, FSDP2 with the reshard policy autotune's export writes for plan.zero_stage: 3 "always",
2 "never", else torchtitan's "default"), and its `cross_entropy_loss` on `pred.float()`.
The model is built from an autotune ModelSpec (dim, layers, heads, kv heads, vocab, exact ffn size) so both trainers
run the same shapes. Not run: `init_weights` (its truncated-normal init is data-dependent and fails under fake
tensors; values do not change memory), pipeline parallelism. The optimizer state is not tracked by either probe in
fake mode; both report AdamW's analytical 2 fp32 states per local element (`optimizer_bytes`).

Requires torchtitan's import-time dependencies (tokenizers, torchdata, tensorboard, datasets, triton, ...): the
Makefile installs them; a missing one raises ImportError (callers must not turn that into a skip).
Setup notes: docs/memory_model.md "Against torchtitan"."""

from __future__ import annotations

import contextlib
import functools
import math
from dataclasses import replace
from typing import Any

import torch
import torch.distributed as dist

from autotune.core.errors import SpecError
from autotune.core.model import ModelSpec
from autotune.core.types import ParallelPlan
from bench_model.memory_probe import private_sharding_propagation

# bench_model recompute mode -> torchtitan activation_checkpoint (mode, selective_ac_option); "op" is torchtitan's
# op-level SAC, the policy bench_model/parallel/recompute.py implements
_AC = {"none": ("none", "op"), "selective": ("selective", "op"), "full": ("full", "op")}


def _model_args(model: ModelSpec, seq_len: int):
    from torchtitan.models.llama3 import TransformerModelArgs

    # FeedForward: hidden = int(2 * 4 * dim / 3); int(mult * hidden); round up to multiple_of. With multiple_of=1 and
    # mult = (f + 0.5) / hidden the result is exactly f.
    base = int(2 * 4 * model.hidden_size / 3)
    return TransformerModelArgs(
        dim=model.hidden_size,
        n_layers=model.num_layers,
        n_heads=model.num_heads,
        n_kv_heads=model.num_kv_heads,
        vocab_size=model.vocab_size,
        multiple_of=1,
        ffn_dim_multiplier=(model.ffn_hidden_size + 0.5) / base,
        norm_eps=model.norm_eps,
        rope_theta=model.rope_theta,
        max_seq_len=seq_len,
    )


def _job_config(plan: ParallelPlan, seq_len: int, precision: str):
    from torchtitan.config import JobConfig

    jc = JobConfig()
    jc.training.seq_len, jc.training.local_batch_size = seq_len, plan.micro_batch_size
    jc.training.mixed_precision_param = "bfloat16" if precision == "bf16" else "float32"
    jc.training.mixed_precision_reduce = "float32"
    jc.parallelism.data_parallel_shard_degree = plan.dp
    jc.parallelism.tensor_parallel_degree = plan.tp
    jc.parallelism.context_parallel_degree = plan.cp
    jc.activation_checkpoint.mode, jc.activation_checkpoint.selective_ac_option = _AC[plan.recompute]
    # as autotune's torchtitan export writes it (autotune/interop/torchtitan.py): ZeRO-3 -> "always", ZeRO-2 ->
    # "never"; stages 0 and 1 keep torchtitan's own "default" (reshard every unit but [norm, output])
    policy = {3: "always", 2: "never"}.get(plan.zero_stage, "default")
    jc.parallelism.fsdp_reshard_after_forward = policy
    jc.compile.enable = False
    return jc


def probe_torchtitan(model: ModelSpec, plan: ParallelPlan, seq_len: int, precision: str = "bf16") -> dict[str, Any]:
    """Peak bytes of rank 0 for torchtitan running `plan` (dp = FSDP degree, tp with SP + loss parallel, cp; pp=1).
    Returns {"peak_bytes": tracked peak without optimizer state, "by_category": {...}, "optimizer_bytes": ...}."""
    if plan.pp > 1:
        raise SpecError(f"plan.pp={plan.pp}: the torchtitan probe supports pp=1 only")
    if plan.offload != "none":
        raise SpecError(
            f"plan.offload={plan.offload} is not supported by the torchtitan probe (it runs on CPU: one memory pool)"
        )
    if plan.tp > 1 and not plan.sequence_parallel:
        raise SpecError("plan.sequence_parallel=false: torchtitan always applies sequence parallelism with tp > 1")
    import torchtitan.distributed.parallel_dims as tt_dims
    import torchtitan.tools.utils as tt_utils
    from torch.testing._internal.distributed.fake_pg import FakeStore

    # torchtitan picks "cuda" when no accelerator is found; the fake process group runs on CPU tensors
    tt_utils.device_type = tt_dims.device_type = "cpu"
    world = plan.dp * plan.tp * plan.cp
    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    try:
        with private_sharding_propagation():
            return _probe(model, plan, seq_len, precision, world)
    finally:
        dist.destroy_process_group()


def _loss_context(tp: int):
    if tp == 1:
        return contextlib.nullcontext()
    from torch.distributed.tensor.parallel import loss_parallel

    return loss_parallel()


def _probe(model: ModelSpec, plan: ParallelPlan, seq_len: int, precision: str, world: int) -> dict[str, Any]:
    import torchtitan.models.llama3.infra.parallelize as tt_par
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed._tools.mem_tracker import MemTracker
    from torch.distributed.tensor import DTensor
    from torchtitan.components.loss import cross_entropy_loss
    from torchtitan.distributed import ParallelDims
    from torchtitan.models.llama3 import Transformer, parallelize_llama

    # On CUDA the SDPA flash/efficient/cudnn kernels are in torchtitan's op-SAC save list (`_op_sac_save_list`); on
    # CPU SDPA dispatches to the CPU flash kernel, which is not. Saving it too keeps the probe's selective AC what it
    # is on a GPU (the CPU kernel returns the same output + fp32 logsumexp as the CUDA flash kernel).
    tt_par._op_sac_save_list.add(torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default)
    args = _model_args(model, seq_len)
    with torch.device("meta"):
        net = Transformer(args)
    ffn = net.layers["0"].feed_forward.w1.out_features
    assert ffn == model.ffn_hidden_size, f"torchtitan ffn {ffn} != model.ffn_hidden_size {model.ffn_hidden_size}"
    dims = ParallelDims(dp_replicate=1, dp_shard=plan.dp, cp=plan.cp, tp=plan.tp, pp=1, ep=1, etp=1, world_size=world)
    dims.build_mesh()
    parallelize_llama(net, dims, _job_config(plan, seq_len, precision))
    fake = FakeTensorMode(allow_non_fake_inputs=True)
    with fake:
        net.to_empty(device="cpu")
    fsdp = hasattr(net, "set_requires_gradient_sync")
    tracker = FSDPMemTracker(net) if fsdp else MemTracker()
    if not fsdp:
        tracker.track_external(net)
    local_seq = seq_len // plan.cp  # the train loop hands each CP rank its sequence shard
    with fake, tracker, _loss_context(plan.tp):
        tokens = torch.randint(0, model.vocab_size, (plan.micro_batch_size, local_seq))
        labels = torch.randint(0, model.vocab_size, (plan.micro_batch_size, local_seq))
        (cross_entropy_loss(net(tokens), labels) / labels.numel()).backward()
    snap = next(iter(tracker.get_tracker_snapshot("peak").values()))
    by_cat = {str(k): float(v) for k, v in snap.items() if k != "Total"}
    numels = [(q.to_local() if isinstance(q, DTensor) else q).numel() for q in net.parameters()]
    return {
        "peak_bytes": float(snap.get("Total", sum(by_cat.values()))),
        "by_category": by_cat,
        "optimizer_bytes": float(sum(2 * 4 * n for n in numels)),
    }


@functools.lru_cache(maxsize=8)
def _config(precision: str, seq_len: int, global_batch_size: int):
    from autotune.spec.config import load_config

    return load_config(
        [
            "model=tiny",
            "cluster=cpu",
            f"train.precision={precision}",
            f"train.seq_len={seq_len}",
            f"train.global_batch_size={global_batch_size}",
        ]
    )


def bench_model_probe(model: ModelSpec, plan: ParallelPlan, seq_len: int, precision: str = "bf16") -> dict[str, Any]:
    """bench_model's `autotune probe-memory` on the same layout, reduced to the same keys as `probe_torchtitan`."""
    from autotune.results.trialfile import make_spec
    from bench_model.memory_probe import probe_memory

    cfg = replace(_config(precision, seq_len, plan.dp * plan.micro_batch_size), model=model)
    row = probe_memory(make_spec(cfg, replace(plan, zero_stage=3, grad_accum_steps=1)))
    keys = ("params", "grads", "activations", "logits", "buffers")
    by_cat = {k: float(row[f"mem_{k}_bytes"]) for k in keys}
    return {
        "peak_bytes": math.fsum(by_cat.values()),
        "by_category": by_cat,
        "optimizer_bytes": float(row["mem_optimizer_bytes"]),
    }


def compare_layout(
    model: ModelSpec, plan: ParallelPlan, seq_len: int, precision: str = "bf16", timeout_s: float = 900.0
) -> dict[str, Any]:
    """Both probes on one layout, each in a fresh Python process (torch's process-group registry and torchtitan's
    module-level device settings do not survive a second world in one process). Raises RuntimeError with the child's
    last error line when a probe fails, e.g. when torchtitan or one of its import-time dependencies is missing."""
    import json
    import subprocess
    import sys
    from dataclasses import asdict

    out: dict[str, Any] = {}
    for which in ("bench_model", "torchtitan"):
        arg = json.dumps(
            {"which": which, "model": asdict(model), "plan": asdict(plan), "seq_len": seq_len, "precision": precision}
        )
        proc = subprocess.run(
            [sys.executable, "-m", "autotune.validation.torchtitan_probe", arg],
            capture_output=True,
            check=False,
            text=True,
            timeout=timeout_s,
        )
        if proc.returncode != 0:
            lines = [x for x in proc.stderr.splitlines() if x.strip()]
            raise RuntimeError(f"{which} probe failed (exit {proc.returncode}): {lines[-1] if lines else ''}")
        out[which] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def _main(arg: str) -> None:
    import json

    req = json.loads(arg)
    model, plan = ModelSpec(**req["model"]), ParallelPlan(**req["plan"])
    fn = probe_torchtitan if req["which"] == "torchtitan" else bench_model_probe
    print(json.dumps(fn(model, plan, req["seq_len"], req["precision"])))


if __name__ == "__main__":
    import sys

    _main(sys.argv[1])
