"""bench_model/ends_timing.py: the embedding's and the head + loss's CPU seconds, timed apart from the blocks between
them (forward hooks, gradient hooks, the loss call), so a scale-down composition can give a target pipeline stage only
the end it holds (docs/scale_down.md "The composition", `E`). One process, no process group: plain modules."""

from __future__ import annotations

import time

import torch
import torch.nn.functional as F
from torch import nn

from bench_model.ends_timing import EndsClock, backward, install_embedding_timer, timed_loss_fn
from bench_model.host_cost import OpCounter


def _heavy(x: torch.Tensor, w: torch.Tensor, reps: int) -> torch.Tensor:
    for _ in range(reps):  # the "blocks": many GEMMs in forward and backward, none inside an end's window
        x = torch.tanh(x @ w)
    return x


def test_windows_hold_the_ends_and_not_the_blocks_between_them():
    torch.manual_seed(0)
    emb, head = nn.Embedding(64, 256), nn.Linear(256, 64, bias=False)
    w = (torch.randn(256, 256) / 16).requires_grad_()
    clock = EndsClock()
    install_embedding_timer(emb, clock)
    tokens, labels = torch.randint(0, 64, (8, 32)), torch.randint(0, 64, (8, 32))

    def loss_fn(hd, h):
        return F.cross_entropy(hd(h).flatten(0, 1), labels.flatten())

    for _ in range(2):  # the first pass is a warm-up (the trainer times no warm-up step): the dispatch mode's and
        # the first operations' lazy initialisation falls into whichever window is open first
        clock.reset()
        c0 = time.process_time()
        with OpCounter() as counter:
            clock.counter = counter
            h = _heavy(emb(tokens), w, reps=40)
            loss = timed_loss_fn(loss_fn, clock)(head, h)
            backward(loss, clock)
        total = time.process_time() - c0
    # both ends ran (forward and backward) and their windows closed; the 40 GEMM layers (80 GEMMs forward and
    # backward on 256 x 256 tiles, the bulk of the CPU) lie outside both windows
    assert clock.embed_s > 0 and clock.head_s > 0 and not clock._open
    assert clock.embed_s + clock.head_s < 0.5 * total
    assert emb.weight.grad is not None and w.grad is not None  # the hooks pass gradients through unchanged
    # the counted operations inside the windows are a part of all of them; none is open after the step
    assert 0 < counter.ends_plain_ops < counter.plain_ops and not counter.in_ends


def test_gradients_are_unchanged_by_the_timers():
    torch.manual_seed(1)
    emb, head = nn.Embedding(32, 16), nn.Linear(16, 32, bias=False)
    tokens, labels = torch.randint(0, 32, (2, 8)), torch.randint(0, 32, (2, 8))

    def loss_fn(hd, h):
        return F.cross_entropy(hd(h).flatten(0, 1), labels.flatten())

    loss_fn(head, emb(tokens)).backward()
    ref = emb.weight.grad.clone(), head.weight.grad.clone()
    emb.weight.grad, head.weight.grad = None, None
    clock = EndsClock()
    install_embedding_timer(emb, clock)
    backward(timed_loss_fn(loss_fn, clock)(head, emb(tokens)), clock)
    assert torch.equal(emb.weight.grad, ref[0]) and torch.equal(head.weight.grad, ref[1])
