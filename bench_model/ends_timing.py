"""The CPU seconds a rank spends in the model's two ends, the token embedding and the LM head with its loss, timed
apart from the transformer blocks so that a scale-down composition can give each target pipeline stage only the end it
holds (docs/scale_down.md "The composition", part `E`).

Why: a scale-down replica runs one stage (pp = 1), so it holds the embedding AND the head, while a target pipeline
stage holds one of them (rank 0 the embedding, rank pp-1 the head and loss; Narayanan et al. 2021 Sec 2.2). On CPU
ranks, and under tensor parallelism (a vocab-parallel embedding's all-reduce, `loss_parallel`'s collectives, every
operation dispatched through DTensor) they are far from the FLOP share the step model gives them.

Windows, on a pp = 1 rank, each measured with `time.process_time` (every thread: gloo's collective threads included)
and `time.thread_time` (this thread: the difference is the collectives' own CPU, as the trainer's
`comm_thread_cpu_time_mean_s`), less the FSDP2 collectives' CPU timed inside them (comm_timing.py, `T_d`):
- embedding forward: forward pre-hook (prepended: before DTensor's input redistribution) to forward hook (after the
  output redistribution, which parallelize_module registered first);
- embedding backward: the gradient hook on the embedding's output to the end of `loss.backward()`;
- head + loss forward: the call of the loss function (final norm excluded: it runs before);
- head + loss backward: `loss.backward()`'s start to the gradient hook on the loss function's input.
The four do not overlap. While the trainer counts the warm-up step's operations (host_cost.py `OpCounter`), the
operations inside the windows are counted apart (`in_ends`), so the host part of the ends can leave the host term.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch


@dataclass
class EndsClock:
    """CPU seconds per step in the embedding and in the head + loss (all threads, FSDP2 collectives excluded), and of
    both ends together the part on the collectives' threads, since the last reset."""

    embed_s: float = 0.0
    head_s: float = 0.0
    comm_thread_s: float = 0.0
    dp_clock: object | None = None  # comm_timing.DpCommClock: its CPU inside a window is not the window's
    counter: object | None = None  # host_cost.OpCounter while the warm-up step is counted
    _open: dict = field(default_factory=dict)

    def reset(self) -> None:
        self.embed_s, self.head_s, self.comm_thread_s = 0.0, 0.0, 0.0
        self._open.clear()

    def start(self, which: str) -> None:
        dp = self.dp_clock.cpu_s if self.dp_clock is not None else 0.0
        self._open[which] = (time.process_time(), time.thread_time(), dp)
        if self.counter is not None:
            self.counter.in_ends = True

    def stop(self, which: str) -> None:
        if which not in self._open:
            return
        c0, h0, d0 = self._open.pop(which)
        dp = (self.dp_clock.cpu_s if self.dp_clock is not None else 0.0) - d0
        cpu, main = time.process_time() - c0 - dp, time.thread_time() - h0
        if which == "embed":
            self.embed_s += cpu
        else:
            self.head_s += cpu
        self.comm_thread_s += max(cpu - main, 0.0)
        if self.counter is not None:
            self.counter.in_ends = False


def install_embedding_timer(embedding: torch.nn.Module, clock: EndsClock) -> None:
    """Times the embedding's forward (hooks) and backward (its output's gradient hook to the end of backward)."""

    def pre(_module, _args):
        clock.start("embed")

    def post(_module, _args, out):
        clock.stop("embed")
        if out.requires_grad:
            out.register_hook(_mark(clock.start, "embed"))
        return None

    embedding.register_forward_pre_hook(pre, prepend=True)
    embedding.register_forward_hook(post)


def timed_loss_fn(loss_fn, clock: EndsClock):
    """`loss_fn(head, h)` with its forward timed as the head's, and the gradient hook on `h` that ends the head's
    backward window (started by `backward`)."""

    def wrapped(head, h):
        if h.requires_grad:
            h.register_hook(_mark(clock.stop, "head"))
        clock.start("head")
        out = loss_fn(head, h)
        clock.stop("head")
        return out

    return wrapped


def backward(loss: torch.Tensor, clock: EndsClock) -> None:
    """`loss.backward()` with the head's backward window opened at its start and the embedding's closed at its end."""
    clock.start("head")
    loss.backward()
    clock.stop("head")  # no-op when the hook on h closed it
    clock.stop("embed")


def _mark(fn, which: str):
    def hook(grad):
        fn(which)
        return grad

    return hook
