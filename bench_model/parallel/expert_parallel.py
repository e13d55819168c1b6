"""Expert parallelism (plan.ep) and expert tensor parallelism (plan.etp) on the folded MoE mesh (Megatron-Core
"parallel folding", megatron/core/transformer/moe/README.md): per pipeline stage the W/pp ranks are viewed as
(edp, ep, etp), etp innermost (bench_model.parallel.mesh.build_expert_meshes), independently of the attention's
(dp, cp, tp). A rank holds experts [ep_rank*E/ep, (ep_rank+1)*E/ep) and of each the FFN columns of its etp rank
(w1/w3 rows, w2 columns): Megatron's ETP, the expert FFN split as column/row-parallel linears.

Every rank routes its own tokens (distinct across all ranks of a stage: dp x cp x tp with sequence parallelism,
which autotune.layouts.moe_rules requires when tp > 1). One MoE layer, `AllToAllDispatch`:
  1. etp > 1: all-gather the tokens (and their chosen experts) in the etp group, so the etp ranks of one ep rank
     hold the same token set (backward: reduce-scatter of the token gradients);
  2. sort the token copies by expert, exchange the per-expert counts with all_to_all_single in the ep group (skipped
     with balanced routing, where every rank's counts are known), then all_to_all_single the copies with variable
     splits to the ranks that own their experts (Megatron's MoEAlltoAllTokenDispatcher; torchtitan's
     ExpertParallel._token_dispatch);
  3. regroup what arrived (source-major) expert-major, run the local experts (grouped GEMM or loop), undo both;
  4. all_to_all back; with etp > 1 each output is a partial sum over the FFN columns: reduce-scatter (sum) in the
     etp group returns every rank its own tokens' outputs. Weighting by the router scores happens on the token's
     own rank (bench_model.moe), as on one device.

Gradients. A routed expert's weight gradient on a rank sums the contributions of every token that reached it; the
ranks holding the same expert slice (the edp group) together see every token of the stage once (tp ranks hold
different tokens under SP; without SP, tp > 1 runs only with ep = etp = 1 and every tp rank sees the same tokens, so
they count tp times). The global loss is the mean over the dp x cp token groups, so the experts' gradient is the
edp-sum divided by `expert_grad_divisor` = dp*cp (x tp without SP): at ZeRO 2/3 FSDP2 `fully_shard` of the experts
on the edp mesh with that divide factor (torchtitan's efsdp mesh and `set_gradient_divide_factor`); at ZeRO 0/1
one all-reduce over edp per step (`finalize_expert_grads`), the experts being left out of the dense FSDP wrapper.

Router and shared expert are replicated on every rank of the stage (Megatron TP-shards the shared expert; here it
computes on this rank's tokens only, the same FLOPs). Under TP they are Replicate DTensors on the tp mesh like the
norms, and under SP their gradients are summed over the tp ranks (`_SumGrad`, Megatron's all-reduce of sequence-
parallel weights' gradients)."""

from __future__ import annotations

import functools

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.tensor import DTensor, Replicate, distribute_tensor

from autotune.core.types import ParallelPlan
from bench_model.moe import ExpertShard, GroupedExperts, MoE, expert_counts
from bench_model.parallel.mesh import Meshes


def moe_modules(model: nn.Module) -> list[MoE]:
    return [b.feed_forward for b in model.layers.values() if isinstance(b.feed_forward, MoE)]


def expert_grad_divisor(plan: ParallelPlan) -> int:
    """What the edp-sum of an expert's gradient is divided by: the dp x cp token groups, x tp when tp ranks hold
    the same tokens (no sequence parallelism)."""
    return plan.dp * plan.cp * (1 if plan.sequence_parallel else plan.tp)


def apply_expert_parallel(model: nn.Module, meshes: Meshes, plan: ParallelPlan) -> None:
    """In place on a (meta) model stage, after TP: shard the experts, swap the dispatch, set the CP/SP count sync."""
    em = meshes.expert
    for moe in moe_modules(model):
        if plan.ep * plan.etp > 1:
            _shard(moe.experts, em.ep.get_local_rank(), plan.ep, em.etp.get_local_rank(), plan.etp)
            moe.dispatch = AllToAllDispatch(em.ep.get_group(), em.etp.get_group(), plan.ep, plan.etp)
        if em.seq_group is not None:
            moe.count_sync = functools.partial(_sum_no_grad, group=em.seq_group)
        if plan.tp > 1:
            _replicate_dense_params(moe, meshes.tp, plan.sequence_parallel)


def _shard(experts: GroupedExperts, ep_rank: int, ep: int, etp_rank: int, etp: int) -> None:
    full = {n: tuple(getattr(experts, n).shape) for n in ("w1", "w2", "w3")}
    experts.shard = ExpertShard(ep_rank, ep, etp_rank, etp, full)
    for name, (e, a, b) in full.items():  # w1/w3 (E, F, H), w2 (E, H, F): F is split over etp
        shape = (e // ep, a, b // etp) if name == "w2" else (e // ep, a // etp, b)
        setattr(experts, name, nn.Parameter(torch.empty(shape, device=getattr(experts, name).device)))


def _replicate_dense_params(moe: MoE, tp_mesh, sequence_parallel: bool) -> None:
    """Router and shared expert as Replicate DTensors on the tp mesh (FSDP2 then treats them like the TP norms); the
    block computes with their local values, the gradients summed over tp under SP."""

    # not distribute_module: it would also replicate the routed experts, which stay plain local slices
    for module in moe.modules():
        if isinstance(module, GroupedExperts):
            continue
        for pname, p in list(module.named_parameters(recurse=False)):
            dt = nn.Parameter(distribute_tensor(p, tp_mesh, [Replicate()]), requires_grad=p.requires_grad)
            module.register_parameter(pname, dt)
    group = tp_mesh.get_group()
    moe.grad_sync = functools.partial(_local_weight, group=group if sequence_parallel else None)


def _local_weight(w: torch.Tensor, group) -> torch.Tensor:
    local = w.to_local() if isinstance(w, DTensor) else w
    return _SumGrad.apply(local, group) if group is not None else local


class _SumGrad(torch.autograd.Function):
    """Identity forward; backward sums the gradient over `group` (weights replicated over ranks with other tokens)."""

    @staticmethod
    def forward(ctx, w: torch.Tensor, group) -> torch.Tensor:
        ctx.group = group
        return w.view_as(w)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        grad = grad.contiguous()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


def _sum_no_grad(t: torch.Tensor, group) -> torch.Tensor:
    t = t.detach().clone()
    dist.all_reduce(t, group=group)
    return t


class _AllToAll(torch.autograd.Function):
    """Rows of x sent in `send` sized chunks, `recv` sized chunks received; backward the reverse exchange."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, send: list[int], recv: list[int], group) -> torch.Tensor:
        ctx.send, ctx.recv, ctx.group = send, recv, group
        out = x.new_empty((sum(recv), *x.shape[1:]))
        dist.all_to_all_single(out, x.contiguous(), recv, send, group=group)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        out = grad.new_empty((sum(ctx.send), *grad.shape[1:]))
        dist.all_to_all_single(out, grad.contiguous(), ctx.send, ctx.recv, group=ctx.group)
        return out, None, None, None


def _all_gather_rows(x: torch.Tensor, group) -> torch.Tensor:
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size(group))]
    dist.all_gather(parts, x.contiguous(), group=group)
    return torch.cat(parts)


class _GatherTokens(torch.autograd.Function):
    """(N, H) -> (n*N, H) rank-major over `group`; backward: the summed gradient of this rank's rows."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, group) -> torch.Tensor:
        ctx.group = group
        return _all_gather_rows(x, group)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return _reduce_scatter_rows(grad, ctx.group), None


def _reduce_scatter_rows(x: torch.Tensor, group) -> torch.Tensor:
    """Sum over `group` and keep this rank's 1/n of the rows (all-reduce + slice: gloo has no reduce-scatter)."""
    x = x.contiguous().clone()
    dist.all_reduce(x, group=group)
    return x.chunk(dist.get_world_size(group))[dist.get_rank(group)].clone()


class _ReduceScatterTokens(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, group) -> torch.Tensor:
        ctx.group = group
        return _reduce_scatter_rows(x, group)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return _all_gather_rows(grad, ctx.group), None


class AllToAllDispatch:
    """Replaces bench_model.moe.local_dispatch: same signature and result, experts spread over ep (and etp)."""

    def __init__(self, ep_group, etp_group, ep: int, etp: int):
        self.ep_group, self.etp_group, self.ep, self.etp = ep_group, etp_group, ep, etp
        self.ep_rank = dist.get_rank(ep_group)

    def __call__(self, x: torch.Tensor, topi: torch.Tensor, experts: GroupedExperts, balanced: bool) -> torch.Tensor:
        k, num_local = topi.shape[1], experts.w1.shape[0]
        counts = expert_counts(topi, num_local * self.ep, balanced)  # per global expert, this rank's copies
        if self.etp > 1:  # 1. the etp group's tokens on each of its ranks
            x = _GatherTokens.apply(x, self.etp_group)
            topi = _all_gather_rows(topi, self.etp_group)
            # balanced: every etp rank routed the same pattern over as many tokens
            counts = [c * self.etp for c in counts] if balanced else expert_counts(topi, len(counts), False)
        recv_counts = self._exchange_counts(counts, balanced, num_local, topi.device)  # [src][local expert]
        send = [sum(counts[r * num_local : (r + 1) * num_local]) for r in range(self.ep)]
        recv = [sum(row) for row in recv_counts]
        order = torch.argsort(topi.reshape(-1), stable=True)
        xs = _AllToAll.apply(x[order // k], send, recv, self.ep_group)  # 2. source-major, then expert
        per_src = [c for row in recv_counts for c in row]
        chunks = xs.split(per_src)
        by_expert = [chunks[r * num_local + e] for e in range(num_local) for r in range(self.ep)]
        ys = experts(torch.cat(by_expert), [sum(row[e] for row in recv_counts) for e in range(num_local)])  # 3.
        ychunks = ys.split([recv_counts[r][e] for e in range(num_local) for r in range(self.ep)])
        back = torch.cat([ychunks[e * self.ep + r] for r in range(self.ep) for e in range(num_local)])
        ys = _AllToAll.apply(back, recv, send, self.ep_group)  # 4. this rank's copies, sorted by expert
        out = torch.empty_like(ys).index_copy_(0, order, ys)
        if self.etp > 1:  # partial sums over the FFN columns -> this rank's tokens
            out = _ReduceScatterTokens.apply(out, self.etp_group)
        return out

    def _exchange_counts(self, counts: list[int], balanced: bool, num_local: int, device) -> list[list[int]]:
        """How many copies each ep rank sends to each of this rank's experts. Balanced routing gives every rank the
        same counts (same token count, same pattern), so no exchange; learned routing exchanges them (one
        all_to_all_single of E integers, as Megatron's dispatcher does before the tokens)."""
        mine = slice(self.ep_rank * num_local, (self.ep_rank + 1) * num_local)
        if balanced:
            return [counts[mine] for _ in range(self.ep)]
        send = torch.tensor(counts, dtype=torch.int64, device=device)
        recv = torch.empty_like(send)
        dist.all_to_all_single(recv, send, group=self.ep_group)
        flat = recv.tolist()
        return [flat[r * num_local : (r + 1) * num_local] for r in range(self.ep)]


@torch.no_grad()
def finalize_expert_grads(parts: list[nn.Module], meshes: Meshes, plan: ParallelPlan) -> None:
    """ZeRO 0/1: sum the routed experts' gradients over the edp group and divide by expert_grad_divisor (once per
    optimizer step, after the last micro-batch's backward and the pipeline's gradient scaling)."""
    edp = meshes.expert.edp
    divisor = expert_grad_divisor(plan)
    for part in parts:
        for moe in moe_modules(part):
            for p in moe.experts.parameters():
                if p.grad is None:
                    continue
                if edp.size() > 1:
                    dist.all_reduce(p.grad, group=edp.get_group())
                if divisor != 1:
                    p.grad.div_(divisor)
