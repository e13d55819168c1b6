"""Synthetic, deterministic token stream. Sample i of step t depends only on (seed, t, i), so every layout trains on the
same global batch and loss curves are comparable. Each sample is an arithmetic progression modulo the vocabulary
(random start and stride) with 10% of positions replaced by random tokens: learnable in context, so the loss falls and
gradients are structured rather than noise."""

from __future__ import annotations

import hashlib

import torch

NOISE_FRACTION = 0.1


def sample_tokens(seed: int, step: int, index: int, seq_len: int, vocab_size: int) -> torch.Tensor:
    """(seq_len + 1,) int64 tokens: inputs are [:-1], labels [1:]."""
    digest = hashlib.sha256(f"{seed}:{step}:{index}".encode()).digest()
    gen = torch.Generator().manual_seed(int.from_bytes(digest[:8], "little") & ((1 << 63) - 1))
    start = torch.randint(vocab_size, (1,), generator=gen)
    stride = torch.randint(1, vocab_size, (1,), generator=gen)
    seq = (start + stride * torch.arange(seq_len + 1)) % vocab_size
    noise = torch.rand(seq_len + 1, generator=gen) < NOISE_FRACTION
    return torch.where(noise, torch.randint(vocab_size, (seq_len + 1,), generator=gen), seq)


def batch(
    seed: int, step: int, indices: range, seq_len: int, vocab_size: int, positions: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(tokens, labels), each (len(indices), S) or (len(indices), len(positions)) when context parallelism keeps only
    this rank's sequence positions."""
    seqs = torch.stack([sample_tokens(seed, step, i, seq_len, vocab_size) for i in indices])
    tokens, labels = seqs[:, :-1], seqs[:, 1:]
    if positions is not None:
        tokens, labels = tokens[:, positions], labels[:, positions]
    return tokens.contiguous(), labels.contiguous()


def rank_sample_range(dp_rank: int, micro_batch_size: int, grad_accum_steps: int) -> range:
    """Global sample indices of this dp rank for one optimizer step (micro-batch m = the m-th run of mbs samples)."""
    per_rank = micro_batch_size * grad_accum_steps
    return range(dp_rank * per_rank, (dp_rank + 1) * per_rank)
