"""Build one layout from a TrialSpec and run its timed training loop.

Loss: mean cross-entropy over every token of the global batch. Each micro-batch's loss is the mean over its tokens,
and all micro-batches hold the same number of tokens, so averaging per micro-batch (1/grad_accum, or the pipeline
schedule's gradient scaling) and then across the dp x cp group (FSDP's mean reduction) gives the global mean. TP ranks
compute the same (replicated) loss through `loss_parallel`."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import time
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch import nn

from autotune.core.errors import SpecError
from autotune.core.trial import TrialSpec
from autotune.layouts.rules import require_well_formed
from bench_model import data
from bench_model.ends_timing import EndsClock, backward, install_embedding_timer, timed_loss_fn
from bench_model.host_cost import HostCost, OpCounter, host_cost
from bench_model.loss import cross_entropy, lm_loss
from bench_model.model import build_meta_model
from bench_model.parallel import Meshes, build_meshes, parallelize
from bench_model.parallel.comm_timing import DpCommClock, install_dp_comm_timers
from bench_model.parallel.context_parallel import cp_positions
from bench_model.parallel.data_parallel import ZeRO1AdamW, experts_use_fsdp, needs_fsdp, set_gradient_sync
from bench_model.parallel.expert_parallel import finalize_expert_grads
from bench_model.parallel.float8 import check_fp8_device
from bench_model.parallel.mesh import build_expert_meshes
from bench_model.parallel.offload import HostOffloadAdamW, materialize_device
from bench_model.parallel.pipeline import (
    allreduce_tied_embedding_grads,
    build_schedule,
    build_stage_module,
    layer_split,
    losses_are_scaled,
    stage_indices,
    tied_embedding_group,
)
from bench_model.trainer_moe import check_moe_trial, configure_moe, expert_zero1_optimizer
from bench_model.weights import init_parameters

ADAMW = dict(betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)


def _labelled_loss(labels: torch.Tensor, compiled: bool, head: nn.Module, h: torch.Tensor) -> torch.Tensor:
    return lm_loss(head, h, labels, compiled=compiled)


def _plain(t: torch.Tensor) -> torch.Tensor:
    """Under loss_parallel the loss is a replicated DTensor; its local value is the loss."""
    from torch.distributed.tensor import DTensor

    return t.to_local() if isinstance(t, DTensor) else t


@dataclass
class Trainer:
    spec: TrialSpec
    device: torch.device
    meshes: Meshes
    parts: list[nn.Module]
    optimizer: object
    schedule: object | None
    is_first: bool
    is_last: bool
    positions: torch.Tensor | None
    step_times_s: list[float] = field(default_factory=list)
    # this rank's CPU seconds per timed step (time.process_time: every thread of the process, gloo's included): what a
    # rank costs independent of how many other processes share the cores (docs/scale_down.md "Fair on a shared CPU")
    step_cpu_s: list[float] = field(default_factory=list)
    # of which in the optimizer step and zero_grad (CPU seconds, no device sync: a scale-down composition scales it by
    # the optimizer's own model ratio, not the compute's; docs/scale_down.md)
    optimizer_cpu_s: list[float] = field(default_factory=list)
    _last_optimizer_cpu_s: float = 0.0
    # of which in FSDP2's sharded data-parallel collectives (CPU ranks only: bench_model/parallel/comm_timing.py; a
    # scale-down composition prices the target's at full size instead of scaling the replica's, docs/scale_down.md)
    dp_comm_cpu_s: list[float] = field(default_factory=list)
    # of which on threads other than this one (CPU ranks, one intra-op thread: gloo's collective threads, i.e. the
    # collectives' own CPU, measured in situ: process_time - thread_time; docs/scale_down.md)
    comm_thread_cpu_s: list[float] = field(default_factory=list)
    dp_comm_clock: DpCommClock | None = None
    # CPU ranks: operations dispatched in one untimed step's forward+backward x measured seconds per operation
    # (bench_model/host_cost.py); the host part a scale-down composition does not scale with FLOPs
    host: HostCost | None = None
    op_counter: OpCounter | None = None  # set for the one step whose operations are counted
    # CPU ranks, pp = 1: the embedding's and the head + loss's CPU seconds (bench_model/ends_timing.py), per timed step
    ends_clock: EndsClock | None = None
    ends_cpu_s: list[tuple[float, float, float]] = field(default_factory=list)  # (embedding, head, their comm threads)
    tied_group: dist.ProcessGroup | None = None  # first + last pipeline rank: the two copies of a tied embedding

    def loss_context(self):
        if self.spec.plan.tp > 1:
            from torch.distributed.tensor.parallel import loss_parallel

            return loss_parallel()
        return contextlib.nullcontext()

    def local_batch(self, step: int, indices: range) -> tuple[torch.Tensor, torch.Tensor]:
        t = self.spec.train
        tokens, labels = data.batch(t.seed, step, indices, t.seq_len, self.spec.model.vocab_size, self.positions)
        return tokens.to(self.device), labels.to(self.device)

    def step(self, step: int) -> torch.Tensor:
        """One optimizer step; returns this rank's mean loss (zero on non-last pipeline stages), not synchronised."""
        with self.op_counter or contextlib.nullcontext():
            loss = self.compute_gradients(step)
        c0 = time.process_time()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self._last_optimizer_cpu_s = time.process_time() - c0
        return loss

    def compute_gradients(self, step: int) -> torch.Tensor:
        """Forward and backward of every micro-batch of `step` and the gradient reductions after them: each
        parameter's .grad is then what the optimizer steps with."""
        p = self.spec.plan
        indices = data.rank_sample_range(self.meshes.dp_rank, p.micro_batch_size, p.grad_accum_steps)
        loss = self._pipeline_step(step, indices) if self.schedule is not None else self._flat_step(step, indices)
        if self.tied_group is not None:
            allreduce_tied_embedding_grads(self.parts, self.tied_group)
        if self.meshes.expert is not None and not experts_use_fsdp(
            p.zero_stage, p.dp * p.cp, self.spec.train.precision
        ):
            finalize_expert_grads(self.parts, self.meshes, p)
        return loss

    def _flat_step(self, step: int, indices: range) -> torch.Tensor:
        p = self.spec.plan
        total = torch.zeros((), device=self.device)
        for m in range(p.grad_accum_steps):
            mb = indices[m * p.micro_batch_size : (m + 1) * p.micro_batch_size]
            tokens, labels = self.local_batch(step, mb)
            set_gradient_sync(self.parts, p.zero_stage, m == p.grad_accum_steps - 1)
            total += _plain(self.microbatch_backward(tokens, labels).detach())
        return total

    def microbatch_backward(self, tokens: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Forward, chunked loss (bench_model.loss.lm_loss) and backward of one micro-batch (pp=1); returns its
        loss / grad_accum_steps."""
        loss_fn = functools.partial(_labelled_loss, labels, self.spec.plan.compile)
        ends = self.ends_clock
        with self.loss_context():
            loss_fn = loss_fn if ends is None else timed_loss_fn(loss_fn, ends)
            loss = self.parts[0](tokens, loss_fn=loss_fn) / self.spec.plan.grad_accum_steps
            loss.backward() if ends is None else backward(loss, ends)
        return loss

    def _pipeline_step(self, step: int, indices: range) -> torch.Tensor:
        tokens, labels = self.local_batch(step, indices)  # (mbs*ga, S); the schedule splits micro-batches on dim 0
        losses: list[torch.Tensor] = []
        args = (tokens,) if self.is_first else ()
        kwargs = dict(target=labels, losses=losses) if self.is_last else {}
        with self.loss_context():
            self.schedule.step(*args, **kwargs)
        if not self.is_last:
            return torch.zeros((), device=self.device)
        stacked = torch.stack([_plain(x.detach()).float() for x in losses])
        return stacked.sum() if losses_are_scaled() else stacked.mean()


def build_trainer(
    spec: TrialSpec, device: torch.device, after_startup=lambda: None, materialize=contextlib.nullcontext
) -> Trainer:
    """`after_startup` runs once the process groups (and their threads) exist, before any model memory is allocated:
    the point where a memory cap measures the layout and not the runtime. `materialize()` is the context in which the
    parallelised meta model gets storage and the optimizer is built (FakeTensorMode for the memory probe)."""
    p, m, t = spec.plan, spec.model, spec.train
    require_well_formed(p, t)  # autotune.layouts.rules: the batch product and the plan's cross-field rules
    if p.offload == "params" and not (p.zero_stage == 3 and needs_fsdp(p.dp * p.cp, t.precision)):
        raise SpecError(
            f"plan.offload=params with zero_stage={p.zero_stage}, dp*cp={p.dp * p.cp}: FSDP2's CPUOffloadPolicy "
            "requires fully sharded parameters (zero_stage=3 over dp*cp > 1)"
        )
    if p.fp8 != "none":
        check_fp8_device(p.fp8, device)  # one-line SpecError, never a silent bf16 run
    check_moe_trial(spec)
    meshes = build_meshes(p, device.type, dist.get_world_size())
    if m.is_moe:
        meshes = dataclasses.replace(meshes, expert=build_expert_meshes(p, device.type, meshes.world))
    tied_group = tied_embedding_group(meshes) if p.pp > 1 and m.tie_embeddings else None
    after_startup()
    full = build_meta_model(m, t.seq_len)
    num_stages = p.pp * p.vpp
    if p.pp > 1:
        stages = stage_indices(p.pp, p.vpp, meshes.pp_rank)
        split = layer_split(m.num_layers, num_stages)
        parts = [build_stage_module(full, s, num_stages, split[s]) for s in stages]
    else:
        stages, parts = [0], [full]
    for part in parts:
        parallelize(part, meshes, p, t.precision, compile=p.compile, device_type=device.type)
        configure_moe(part, spec)
    with materialize():
        for part in parts:
            part.to_empty(device=materialize_device(p.offload, device))  # buffers go to `device` in init_parameters
            if m.tie_embeddings and part.tok_embeddings is not None and part.output is not None:
                # to_empty gives each module a new plain (non-DTensor) Parameter, which unties a shared one
                part.output.weight = part.tok_embeddings.weight
            init_parameters(part, t.seed, m.num_layers, device)
        params = [q for part in parts for q in part.parameters()]
        optimizer = _make_optimizer(params, spec, meshes, parts)
    schedule = None
    if p.pp > 1:
        schedule = build_schedule(
            parts, stages, num_stages, meshes, p.pp_schedule, p.grad_accum_steps, cross_entropy, device
        )
    positions = cp_positions(t.seq_len, p.cp, meshes.cp_rank) if p.cp > 1 else None
    clock = None
    if device.type == "cpu":  # on GPUs process_time says nothing of NCCL's work, and a forced-sync gather costs overlap
        clock = DpCommClock()
        install_dp_comm_timers(parts, clock)
    ends = None
    if device.type == "cpu" and p.pp == 1 and parts[0].tok_embeddings is not None:  # a scale-down replica's stage
        ends = EndsClock(dp_clock=clock)
        install_embedding_timer(parts[0].tok_embeddings, ends)
    return Trainer(
        spec=spec,
        device=device,
        meshes=meshes,
        parts=parts,
        optimizer=optimizer,
        schedule=schedule,
        is_first=0 in stages,
        is_last=(num_stages - 1) in stages,
        positions=positions,
        tied_group=tied_group,
        dp_comm_clock=clock,
        ends_clock=ends,
    )


def _make_optimizer(params: list[nn.Parameter], spec: TrialSpec, meshes: Meshes, parts: list[nn.Module]):
    from torch.distributed.tensor import DTensor

    if spec.train.optimizer != "adamw":
        raise SpecError(f"train.optimizer={spec.train.optimizer!r}: bench_model implements adamw only")
    kwargs = dict(lr=spec.train.lr, **ADAMW)
    kinds = {isinstance(q, DTensor) for q in params}
    if len(kinds) > 1:  # foreach kernels cannot mix DTensor and plain tensors (TP without SP and without FSDP)
        kwargs["foreach"] = False
    p = spec.plan
    if p.zero_stage == 1 and needs_fsdp(p.dp * p.cp, spec.train.precision) and p.dp * p.cp > 1:
        if meshes.expert is not None:  # the routed experts' states are sliced over their own (edp) group
            return expert_zero1_optimizer(parts, meshes, host=p.offload == "optimizer", **kwargs)
        return ZeRO1AdamW(params, meshes.dp_cp.get_group(), host=p.offload == "optimizer", **kwargs)
    if p.offload == "optimizer":  # fp32 master + AdamW states on the host, the step there (ZeRO-Offload)
        return HostOffloadAdamW(params, **kwargs)
    return torch.optim.AdamW(params, **kwargs)  # offload=params: the params are host tensors, so is the step


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def untimed_steps(spec: TrialSpec) -> int:
    """Warm-up steps before timing: spec.warmup_steps, and at least one when the blocks are compiled (torch.compile
    compiles the forward and AOT backward graphs in the first step: compile time is warm-up, never timed)."""
    return max(spec.warmup_steps, 1) if spec.plan.compile else spec.warmup_steps


def run_steps(trainer: Trainer, fault_hook) -> list[torch.Tensor]:
    """untimed_steps(spec) untimed + timed_steps timed; step times are this rank's wall time between device syncs."""
    spec = trainer.spec
    losses = []
    warmup = untimed_steps(spec)
    dist.barrier()
    count = warmup > 0 and trainer.device.type == "cpu" and not spec.plan.compile and hasattr(trainer, "host")
    for step in range(warmup + spec.timed_steps):
        timed = step >= warmup
        if timed and step == warmup:
            fault_hook()
        if count:
            trainer.op_counter = OpCounter() if step == 0 else None
        synchronize(trainer.device)
        clock = getattr(trainer, "dp_comm_clock", None)
        if clock is not None:
            clock.reset()
        ends = getattr(trainer, "ends_clock", None)
        if ends is not None:
            ends.reset()
            ends.counter = trainer.op_counter if count else None
        t0, c0, h0 = time.perf_counter(), time.process_time(), time.thread_time()
        losses.append(trainer.step(step))
        synchronize(trainer.device)
        if timed:
            trainer.step_times_s.append(time.perf_counter() - t0)
            trainer.step_cpu_s.append(time.process_time() - c0)
            trainer.optimizer_cpu_s.append(trainer._last_optimizer_cpu_s)
            if clock is not None:
                trainer.dp_comm_cpu_s.append(clock.cpu_s)
                trainer.comm_thread_cpu_s.append(trainer.step_cpu_s[-1] - (time.thread_time() - h0))
            if ends is not None:
                trainer.ends_cpu_s.append((ends.embed_s, ends.head_s, ends.comm_thread_s))
        if count and step == 0:
            trainer.host = host_cost(trainer.op_counter, trainer.meshes.tp, trainer.device)
    if count:
        trainer.op_counter = None
    return losses
