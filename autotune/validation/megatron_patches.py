"""The CPU stand-ins autotune/validation/megatron_probe.py needs to run Megatron-Core's local layer spec without a
GPU (patches 1-4, 8, 9 of that module's docstring, which says why each is faithful)."""

from __future__ import annotations

import contextlib
from typing import Any

import torch
import torch.nn.functional as F


def _to_cpu(device: Any) -> Any:
    if isinstance(device, str) and device.startswith("cuda"):
        return torch.device("cpu")
    if isinstance(device, torch.device) and device.type == "cuda":
        return torch.device("cpu")
    return device


class _CudaOnCpu(torch.overrides.TorchFunctionMode):
    """Patch 1: every `device="cuda"` and `.cuda()` lands on the CPU."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func is torch.Tensor.cuda:
            return args[0]
        if func is F.dropout:  # patch 9: CUDA's native_dropout keeps a 1-byte mask
            x, p = args[0], kwargs.get("p", args[1] if len(args) > 1 else 0.5)
            training = kwargs.get("training", args[2] if len(args) > 2 else True)
            return torch.native_dropout(x, p, training)[0] if training and p > 0 else x
        if "device" in kwargs:
            kwargs["device"] = _to_cpu(kwargs["device"])
        if func is torch.Tensor.to and len(args) > 1:
            args = (args[0], _to_cpu(args[1]), *args[2:])
        return func(*args, **kwargs)


@contextlib.contextmanager
def cuda_on_cpu():
    """Patches 1, 2 and 5 for the duration of the probe; restored on exit."""
    saved_device, saved_type = torch.cuda.current_device, torch.Tensor.type

    def cuda_type(self, *args, **kwargs):
        out = saved_type(self, *args, **kwargs)
        if args or kwargs or self.device.type != "cpu" or out.startswith("torch.cuda."):
            return out
        return out.replace("torch.", "torch.cuda.", 1)

    torch.cuda.current_device = lambda: torch.device("cpu")
    torch.Tensor.type = cuda_type
    try:
        with _CudaOnCpu(), torch._dynamo.config.patch(disable=True):  # patch 5
            yield
    finally:
        torch.cuda.current_device, torch.Tensor.type = saved_device, saved_type


def _rotate_half(x: torch.Tensor, sign: float = 1.0) -> torch.Tensor:
    x1, x2 = torch.chunk(x, 2, dim=-1)
    return torch.cat((-sign * x2, sign * x1), dim=-1)


class _FusedRope(torch.autograd.Function):
    """Patch 8: TE's FusedRoPEFunc semantics, non-interleaved bshd/sbhd: saves the frequencies only."""

    @staticmethod
    def forward(ctx, t, freqs):
        ctx.save_for_backward(freqs)
        cos, sin = torch.cos(freqs).to(t.dtype), torch.sin(freqs).to(t.dtype)
        return t * cos + _rotate_half(t) * sin

    @staticmethod
    def backward(ctx, grad):
        (freqs,) = ctx.saved_tensors
        cos, sin = torch.cos(freqs).to(grad.dtype), torch.sin(freqs).to(grad.dtype)
        return grad * cos + _rotate_half(grad * sin, -1.0), None  # the transpose of rotate_half


def fused_rope(t, freqs, config=None, cu_seqlens=None, mscale=1.0, **_unused):
    assert cu_seqlens is None and mscale == 1.0 and freqs.shape[-1] == t.shape[-1], "plain RoPE only"
    return _FusedRope.apply(t, freqs)


class _RMSNormFn(torch.autograd.Function):
    """Patch 3: Apex's FusedRMSNormAffineFunction saves (input, weight, invvar); so does this."""

    @staticmethod
    def forward(ctx, x, weight, eps):
        rstd = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)  # (s, b, 1) fp32
        ctx.save_for_backward(x, weight, rstd)
        return (x.float() * rstd).to(x.dtype) * weight

    @staticmethod
    def backward(ctx, grad):
        x, weight, rstd = ctx.saved_tensors
        xhat = x.float() * rstd
        gw = (grad.float() * xhat).flatten(0, -2).sum(0).to(weight.dtype)
        gx_hat = grad.float() * weight.float()
        gx = rstd * (gx_hat - xhat * (gx_hat * xhat).mean(-1, keepdim=True))
        return gx.to(x.dtype), gw, None


class SequenceParallelRMSNorm(torch.nn.Module):
    """Patch 3: an RMSNorm the local spec can use with sequence parallelism (see the module docstring)."""

    def __init__(self, config, hidden_size: int, eps: float = 1e-5, **_unused):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden_size, dtype=config.params_dtype))
        self.weight.sequence_parallel = (
            config.sequence_parallel
        )  # Megatron all-reduces it over TP (finalize_model_grads)
        self.eps = eps

    def forward(self, x):
        return _RMSNormFn.apply(x, self.weight, self.eps)


class FlashCoreAttention(torch.nn.Module):
    """Patch 4: Transformer Engine's flash attention in Megatron's core_attention slot (causal, GQA), as torch SDPA.
    Megatron layout: q (s, b, heads, d), k and v (s, b, groups, d) -> (s, b, heads * d)."""

    def __init__(self, config, layer_number, attn_mask_type, attention_type, attention_dropout=None, **_unused):
        super().__init__()
        self.config = config

    def forward(self, query, key, value, attention_mask, attn_mask_type=None, attention_bias=None, **_unused):
        q, k, v = (t.permute(1, 2, 0, 3) for t in (query, key, value))  # (b, heads, s, d)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=k.shape[1] != q.shape[1])
        s, b = query.shape[0], query.shape[1]
        return out.permute(2, 0, 1, 3).reshape(s, b, -1)


@contextlib.contextmanager
def balanced_moe(topk: int):
    """Patches 10-12, for running Megatron-Core's MoE layers on real CPU tensors under the fake process group:
    10. `--moe-router-force-load-balancing` (what NVIDIA's MoE benchmarks run) replaces the router's logits
        (moe/router.py `apply_random_logits`); here by a round-robin top-k (token t -> experts (t*k + j) mod E), so
        every rank routes its tokens identically and every expert gets the same count (the random logits are
        balanced only on average). Like Megatron's, the replaced logits carry no gradient: the router keeps nothing.
    11. The all-gather token dispatcher gathers tokens and routing over the expert tp x ep group; the fake group
        returns uninitialised memory, so the gather repeats this rank's tensor instead: with patch 10 the other ranks'
        routing is this rank's, so every count and shape is the real one.
    12. megatron-core 0.16.1 moe_utils.py refers to `te_general_gemm` without Transformer Engine (a NameError in
        RouterGatingLinearFunction); it is set to None, the branch Megatron takes when TE is absent."""
    import megatron.core.transformer.moe.moe_utils as mu
    import megatron.core.transformer.moe.router as router
    import megatron.core.transformer.moe.token_dispatcher as td
    import torch.distributed as dist

    def round_robin(logits: torch.Tensor) -> torch.Tensor:
        flat = logits.reshape(-1, logits.shape[-1])
        idx = (torch.arange(flat.shape[0] * topk, device=flat.device) % flat.shape[1]).view(-1, topk)
        return torch.zeros_like(flat).scatter_(1, idx, 10.0).view_as(logits)

    def repeat_gather(x: torch.Tensor, group=None, *args, **kwargs) -> torch.Tensor:
        n = dist.get_world_size(group) if group is not None else 1
        return torch.cat([x] * n, dim=0) if n > 1 else x

    saved = (router.apply_random_logits, td.gather_from_sequence_parallel_region, getattr(mu, "te_general_gemm", 0))
    router.apply_random_logits, td.gather_from_sequence_parallel_region = round_robin, repeat_gather
    mu.te_general_gemm = getattr(mu, "te_general_gemm", None)
    try:
        yield
    finally:
        router.apply_random_logits, td.gather_from_sequence_parallel_region = saved[0], saved[1]
        if saved[2] == 0:
            del mu.te_general_gemm
