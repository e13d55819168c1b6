"""bench_model's loss: mean cross-entropy of the LM head's fp32 logits over all tokens, never with the logits of a whole
micro-batch in memory (pp=1; the pipeline schedule's loss_fn sees its stage's logits, `cross_entropy`).

- `fused_linear_cross_entropy` (the default without tensor parallelism): the tokens are cut into chunks of
  LOSS_CHUNK_TOKENS; for each chunk the forward computes the head matmul, the fp32 loss and, right away, the chunk's
  gradients (d loss / d logits = softmax - onehot, then grad_h = g W and grad_W += g^T h), so no chunk is recomputed
  in backward: the head costs its 3 GEMMs (2 n V h FLOPs each), as an unchunked loss does. Backward only scales the
  stored grad_h and grad_W by the incoming gradient. This is Liger-Kernel's FusedLinearCrossEntropy (Hsu et al. 2024,
  arXiv 2410.10989, Sec 3.2 "gradient-in-forward"); `benchmarks/loss_options.py` measured it against the others.
  With plan.compile the per-chunk function is compiled (Inductor fuses the softmax - onehot pass into one).
- `chunked_cross_entropy` (tensor parallelism: vocab-sharded logits under `loss_parallel`): each chunk's head + loss
  under non-reentrant checkpoint, recomputed in backward (one extra head GEMM per chunk: +33% of the head's FLOPs).

Memory of the fused loss (autotune/predict/frameworks/bench_model.py `logits`): one chunk's fp32 logits, turned into
its gradient in place, plus (c != fp32) the compute-dtype copy the GEMMs read: (4 + c) bytes per logit of one chunk,
4 in fp32; grad_h (the size of the head's input) replaces the head input the checkpointed loss kept, and grad_W is
the head's weight gradient, created at the end of forward instead of the start of backward (same peak)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

# Tokens per chunk: the fp32 logits of at most this many tokens exist at a time. 1024 keeps the head's GEMMs large
# (m = 1024) while the fp32 logits of Llama 3's 128k vocabulary stay at 0.5 GB per chunk; benchmarks/loss_options.py
# times the chunk sizes (CPU: 512-4096 within a few % of each other with the fused loss).
LOSS_CHUNK_TOKENS = 1024


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """logits (B, S, V) [vocab-sharded DTensor under TP], labels (B, S) -> mean over tokens, in fp32."""
    return F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(0, 1))


def _chunk_loss_sum(head: nn.Module, h: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(head(h).float(), labels, reduction="sum")


def chunked_cross_entropy(head: nn.Module, h: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of head(h) over all tokens, each chunk of LOSS_CHUNK_TOKENS tokens under non-reentrant
    checkpoint (nothing of it is saved; backward recomputes the chunk's logits), so at most one chunk's logits exist
    at a time (Wijmans et al. 2024, "Cut Your Losses"). Under TP + SP the sequence-sharded hidden states are gathered
    first (the gather the head does anyway)."""
    from torch.distributed.tensor import DTensor, Replicate

    if isinstance(h, DTensor):
        h = h.redistribute(placements=[Replicate()] * h.device_mesh.ndim)
    h, labels = h.flatten(0, 1), labels.flatten(0, 1)  # (B*S, H), (B*S,)
    total = sum(
        checkpoint(_chunk_loss_sum, head, hc, yc, use_reentrant=False)
        for hc, yc in zip(h.split(LOSS_CHUNK_TOKENS), labels.split(LOSS_CHUNK_TOKENS))
    )
    return total / labels.numel()


def chunk_loss_and_dlogits(h: torch.Tensor, w: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One chunk: h (n, H), w (V, H), labels (n,) -> (sum of the n losses in fp32, d sum / d logits in h's dtype).
    d loss_i / d z_i = softmax(z_i) - onehot(y_i) for the fp32 logits z_i (the log-softmax gradient); it is built in
    the fp32 logits' own storage (in place) and cast to the compute dtype for the two GEMMs."""
    z = (h @ w.t()).float()  # (n, V); a no-op cast in fp32
    z_label = z.gather(1, labels[:, None]).squeeze(1)
    zmax = z.amax(dim=-1)
    e = z.sub_(zmax[:, None]).exp_()  # in place: no second (n, V) fp32 tensor (logsumexp would allocate one)
    total = e.sum(dim=-1)
    loss = (zmax + total.log() - z_label).sum()  # log-sum-exp with the max taken out
    g = e.div_(total[:, None])  # softmax
    g[torch.arange(g.shape[0], device=g.device), labels] -= 1.0
    return loss, g.to(h.dtype)


def chunk_loss_and_dlogits_functional(
    h: torch.Tensor, w: torch.Tensor, labels: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The same without in-place ops, for torch.compile: Inductor fuses it into one pass over the logits (4 bytes per
    logit in fp32, measured), where the in-place form compiles to extra copies (12 bytes per logit and 1.3x the time
    on CPU: benchmarks/loss_options.py)."""
    z = (h @ w.t()).float()
    lse = torch.logsumexp(z, dim=-1)
    loss = (lse - z.gather(1, labels[:, None]).squeeze(1)).sum()
    g = (z - lse[:, None]).exp()
    g = g - F.one_hot(labels, z.shape[1]).to(g.dtype)
    return loss, g.to(h.dtype)


_compiled_chunk = None


def _chunk_fn(compiled: bool):
    global _compiled_chunk
    if not compiled:
        return chunk_loss_and_dlogits
    if _compiled_chunk is None:  # one compiled function per process; the shapes of a run repeat every step
        _compiled_chunk = torch.compile(chunk_loss_and_dlogits_functional)
    return _compiled_chunk


class _FusedLinearCrossEntropy(torch.autograd.Function):
    """out = mean loss; the gradients are computed in forward (module docstring) and only scaled in backward."""

    @staticmethod
    def forward(ctx, h, w, labels, chunk: int, compiled: bool):
        fn = _chunk_fn(compiled)
        grad_h = torch.empty_like(h) if ctx.needs_input_grad[0] else None
        grad_w = torch.zeros_like(w) if ctx.needs_input_grad[1] else None
        total = torch.zeros((), dtype=torch.float32, device=h.device)
        for start in range(0, h.shape[0], chunk):
            hc = h[start : start + chunk]
            loss, g = fn(hc, w, labels[start : start + chunk])
            total += loss
            if grad_h is not None:
                torch.mm(g, w, out=grad_h[start : start + chunk])  # rows of a contiguous tensor: a contiguous view
            if grad_w is not None:
                torch.addmm(
                    grad_w, g.t(), hc, out=grad_w
                )  # summed over chunks in w's dtype, as autograd sums per-chunk grads
            del g
        ctx.n, ctx.grads = h.shape[0], (grad_h, grad_w)  # consumed once, by backward
        return total / h.shape[0]

    @staticmethod
    def backward(ctx, grad_out):
        (grad_h, grad_w), n = ctx.grads, ctx.n
        ctx.grads = None
        scale = grad_out / n
        grad_h = grad_h.mul_(scale) if grad_h is not None else None
        grad_w = grad_w.mul_(scale) if grad_w is not None else None
        return grad_h, grad_w, None, None, None


def fused_linear_cross_entropy(
    head: nn.Module, h: torch.Tensor, labels: torch.Tensor, chunk: int | None = None, compiled: bool = False
) -> torch.Tensor:
    """Mean cross-entropy of head(h) (a bias-free nn.Linear) over all tokens, gradients computed in forward chunk by
    chunk (module docstring). h (B, S, H) or (N, H), labels (B, S) or (N,)."""
    h2, y = h.reshape(-1, h.shape[-1]), labels.reshape(-1)
    return _FusedLinearCrossEntropy.apply(h2, head.weight, y, chunk or LOSS_CHUNK_TOKENS, compiled)


def lm_loss(head: nn.Module, h: torch.Tensor, labels: torch.Tensor, compiled: bool = False) -> torch.Tensor:
    """The trainer's loss at pp=1: fused when the head and its input are plain tensors (no TP; FSDP2's gathered
    weight is one), the checkpointed chunked loss for vocab-sharded DTensors (loss_parallel)."""
    from torch.distributed.tensor import DTensor

    if isinstance(h, DTensor) or isinstance(head.weight, DTensor):
        return chunked_cross_entropy(head, h, labels)
    return fused_linear_cross_entropy(head, h, labels, compiled=compiled)
