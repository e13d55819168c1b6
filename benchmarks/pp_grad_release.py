"""Unsharded fp32 gradient accumulators a pipeline rank holds at its peak, Schedule1F1B against
ScheduleInterleaved1F1B, measured with torch.distributed.pipelining + FSDP2 on 4 gloo CPU processes (pp 2 x dp 2).

In torch 2.13 every micro-batch backward of a stage runs with gradient sync off
(torch/distributed/pipelining/stage.py `backward_maybe_with_nosync`: set_requires_gradient_sync(False)), so FSDP2's
post-backward upcasts the stage's bf16 gradients into unsharded fp32 accumulators from the stage's first micro-batch
backward on (torch/distributed/fsdp/_fully_shard/_fsdp_param.py `to_accumulated_grad_if_needed`, kept in
`FSDPParam.unsharded_accumulated_grad`); they are reduce-scattered and freed by the stage's REDUCE_GRAD action after
its last micro-batch backward (schedules.py `_add_reduce_grad`, stage.py `perform_reduce_grad`). Under
Interleaved1F1B with n_microbatches == pp (one round) a rank runs one chunk's backwards, then the other's, so at its
peak only the running chunk's accumulator exists; 1F1B (one stage per rank) holds all of the rank's parameters' x 4
bytes. With more micro-batches than pp the chunks' backwards interleave and the saving shrinks.

Model: a tiny Llama (RMSNorm, RoPE, MHA, SwiGLU), split torchtitan-style by hand into stages (4 blocks per pp rank;
embedding on stage 0, norm + output on the last), full activation checkpointing per block, fully_shard per block and
per stage module (reshard_after_forward=False, bf16 params, fp32 reduce), AdamW, cross_entropy on logits.float().
Live bytes are counted per storage by a TorchDispatchMode (UntypedStorage.resize_ patched, as FSDP2 frees and
re-allocates its unsharded parameters with it); at each new peak of the measured step (after warm-up steps) the
bytes of every FSDPParam's `unsharded_accumulated_grad` are read. Measured 2026-11-29 on the 2-core CI box (torch
2.13, the SHAPE below, ~11 s): at n_mb = pp each interleaved rank's peak (the backward of its chunk with the embedding
/ the norm + output) holds 0.623 of its accumulator bytes (that chunk's: embedding or output + 2 of 4 blocks), 1F1B
1.0; the peak itself is 2.5-3.7% lower (the interleaved rank stashes more activations); at n_mb = 2 pp both hold 1.0
and the interleaved peak is 6-10% higher. The share is read AT the peak and moves with it (first rank, one round):
4x the tokens move the interleaved peak into the other chunk's backward (0.377), 8x the 1F1B peak into micro-batch 0's
backward (accumulators partly built: 0.19), 4x the vocabulary both into REDUCE_GRAD (the embedding group's
reduce-scatter copy: 0.43 / 0.22; the last rank's output chunk is then 0.78 of its accumulators).

Run: PYTHONPATH=. python benchmarks/pp_grad_release.py [--smoke] [--threads 1]
(--smoke: n_microbatches = pp only, one warm-up step). Last line of stdout: ONE JSON object: per case (schedule,
n_microbatches) and rank the peak_bytes, the phase at the peak, accumulated_grad_bytes_at_peak (also by stage),
all_accumulator_bytes, stage_accumulator_bytes; the max over ranks of the accumulator share at the peak for
Interleaved1F1B at n_mb = pp and for 1F1B, the interleaved / 1F1B peak per rank at n_mb = pp; torch version, wall
seconds.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import queue
import socket
import time
import weakref

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleInterleaved1F1B
from torch.utils._python_dispatch import TorchDispatchMode, is_traceable_wrapper_subclass
from torch.utils._pytree import tree_flatten

PP, DP, LAYERS_PER_RANK = 2, 2, 4
SHAPE = {"dim": 64, "heads": 4, "ffn": 176, "vocab": 1024, "seq": 128, "mbs": 2}


class LiveBytes(TorchDispatchMode):
    """Bytes of every storage an op (or UntypedStorage.resize_) produced while the mode is on, until it is freed."""

    def __init__(self, on_peak) -> None:
        super().__init__()
        self.live: dict[int, int] = {}
        self.refs: dict[int, weakref.ref] = {}
        self.cur = self.peak = 0
        self.recording, self.on_peak = False, on_peak

    def _set(self, st: torch.UntypedStorage) -> None:
        key, n = st._cdata, st.nbytes()
        if key not in self.live:
            if n == 0:
                return
            self.refs[key] = weakref.ref(st, lambda _, k=key: self._free(k))
        self.cur += n - self.live.get(key, 0)
        self.live[key] = n
        if self.recording and self.cur > self.peak:
            self.peak = self.cur
            self.on_peak()

    def _free(self, key: int) -> None:
        self.cur -= self.live.pop(key, 0)
        self.refs.pop(key, None)

    def _register(self, t: torch.Tensor) -> None:
        if is_traceable_wrapper_subclass(t):  # DTensor: its local tensor
            for inner in (getattr(t, name) for name in t.__tensor_flatten__()[0]):
                if isinstance(inner, torch.Tensor):
                    self._register(inner)
        elif t.device.type != "meta" and t.untyped_storage()._cdata not in self.live:
            self._set(t.untyped_storage())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self._register(t)
        return out

    def __enter__(self):
        self._resize, mode = torch.UntypedStorage.resize_, self

        def resize_(st, size):
            r = mode._resize(st, size)
            mode._set(st)
            return r

        torch.UntypedStorage.resize_ = resize_
        return super().__enter__()

    def __exit__(self, *exc):
        torch.UntypedStorage.resize_ = self._resize
        return super().__exit__(*exc)


def rope(dim: int, seq: int) -> torch.Tensor:
    freqs = 1.0 / (10000.0 ** (torch.arange(0, dim, 2).float() / dim))
    return torch.polar(torch.ones(seq, dim // 2), torch.outer(torch.arange(seq).float(), freqs))


def apply_rope(x: torch.Tensor, fc: torch.Tensor) -> torch.Tensor:
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(xc * fc[None, :, None]).flatten(3).type_as(x)


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, ffn: int) -> None:
        super().__init__()
        self.heads = heads
        self.attention_norm, self.ffn_norm = nn.RMSNorm(dim, eps=1e-5), nn.RMSNorm(dim, eps=1e-5)
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(dim, dim, bias=False) for _ in range(4))
        self.w1, self.w3 = nn.Linear(dim, ffn, bias=False), nn.Linear(dim, ffn, bias=False)
        self.w2 = nn.Linear(ffn, dim, bias=False)

    def forward(self, x, fc):
        b, s, d = x.shape
        h = self.attention_norm(x)
        q, k, v = (w(h).view(b, s, self.heads, -1) for w in (self.wq, self.wk, self.wv))
        q, k = apply_rope(q, fc), apply_rope(k, fc)
        o = F.scaled_dot_product_attention(*(t.transpose(1, 2) for t in (q, k, v)), is_causal=True)
        x = x + self.wo(o.transpose(1, 2).reshape(b, s, d))
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class Stage(nn.Module):
    """torchtitan's manual split: the full model's modules a stage keeps (the others are None / absent)."""

    def __init__(self, stage: int, n_stages: int, cfg: dict) -> None:
        super().__init__()
        per = PP * LAYERS_PER_RANK // n_stages
        d, v = cfg["dim"], cfg["vocab"]
        self.tok_embeddings = nn.Embedding(v, d) if stage == 0 else None
        ids = range(stage * per, (stage + 1) * per)
        self.layers = nn.ModuleDict({str(i): Block(d, cfg["heads"], cfg["ffn"]) for i in ids})
        last = stage == n_stages - 1
        self.norm, self.output = (nn.RMSNorm(d, eps=1e-5), nn.Linear(d, v, bias=False)) if last else (None, None)
        self.register_buffer("freqs_cis", rope(d // cfg["heads"], cfg["seq"]), persistent=False)

    def forward(self, h):
        h = self.tok_embeddings(h) if self.tok_embeddings is not None else h
        for layer in self.layers.values():
            h = layer(h, self.freqs_cis)
        return self.output(self.norm(h)) if self.output is not None else h


def loss_fn(pred, labels):
    return F.cross_entropy(pred.flatten(0, 1).float(), labels.flatten(0, 1))


def shard(mod: Stage, dp_mesh) -> list:
    """AC + fully_shard per block, then per stage module; returns the stage's FSDPParams."""
    mp_policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    kw = dict(mesh=dp_mesh, mp_policy=mp_policy, reshard_after_forward=False)
    blocks = [fully_shard(checkpoint_wrapper(b, preserve_rng_state=False), **kw) for b in mod.layers.values()]
    for name, blk in zip(list(mod.layers), blocks):
        mod.layers[name] = blk
    fully_shard(mod, **kw)
    return [fp for m in (*blocks, mod) for pg in fully_shard.state(m)._fsdp_param_groups for fp in pg.fsdp_params]


def instrument(stage, phase: list) -> None:
    """Name the running action (F/B/REDUCE_GRAD, stage, micro-batch) in phase[0] for the peak's label."""
    for attr, tag in (("forward_one_chunk", "F"), ("backward_one_chunk", "B"), ("perform_reduce_grad", "REDUCE")):
        orig = getattr(stage, attr)

        def wrapped(*a, _orig=orig, _tag=tag, **k):
            mb = f" mb{a[0]}" if _tag != "REDUCE" else ""
            phase[0] = f"{_tag} s{stage.stage_index}{mb}"
            return _orig(*a, **k)

        setattr(stage, attr, wrapped)


def run_case(schedule: str, n_mb: int, mesh, steps: int, cfg: dict) -> dict:
    pp_rank = mesh["pp"].get_local_rank()
    stage_ids = [pp_rank] if schedule == "1F1B" else [pp_rank, pp_rank + PP]
    n_stages = PP * len(stage_ids)
    at_peak: dict = {}
    fsdp_params: dict[int, list] = {}
    phase = ["init"]

    def on_peak() -> None:
        at_peak["phase"] = phase[0]
        at_peak["acc"] = {
            s: sum(fp.unsharded_accumulated_grad.untyped_storage().nbytes() for fp in fps
                   if fp.unsharded_accumulated_grad is not None)
            for s, fps in fsdp_params.items()
        }  # fmt: skip

    tracker = LiveBytes(on_peak)
    with tracker:
        torch.manual_seed(pp_rank)
        mods = [Stage(s, n_stages, cfg) for s in stage_ids]
        stage_acc = {s: 4 * sum(p.numel() for p in m.parameters()) for s, m in zip(stage_ids, mods)}
        for s, m in zip(stage_ids, mods):
            fsdp_params[s] = shard(m, mesh["dp"])
        group = mesh["pp"].get_group()
        stages = [PipelineStage(m, s, n_stages, torch.device("cpu"), group=group) for s, m in zip(stage_ids, mods)]
        for st in stages:
            instrument(st, phase)
        sched = (
            Schedule1F1B(stages[0], n_microbatches=n_mb, loss_fn=loss_fn)
            if schedule == "1F1B"
            else ScheduleInterleaved1F1B(stages, n_microbatches=n_mb, loss_fn=loss_fn)
        )
        opt = torch.optim.AdamW([p for m in mods for p in m.parameters()], lr=1e-4)
        gen = torch.Generator().manual_seed(0)
        for step in range(steps):
            tokens, labels = torch.randint(0, cfg["vocab"], (2, cfg["mbs"] * n_mb, cfg["seq"]), generator=gen)
            dist.barrier()
            if step == steps - 1:  # the measured step: the peak from the live bytes at its start
                tracker.recording, tracker.peak, phase[0] = True, tracker.cur, "step start"
                on_peak()
            t0 = time.perf_counter()
            if any(s.is_first for s in stages):
                sched.step(tokens)
            else:
                sched.step(target=labels, losses=[])
            phase[0] = "optimizer"
            opt.step()
            opt.zero_grad()
        step_s = time.perf_counter() - t0
        tracker.recording = False
    acc = sum(at_peak["acc"].values())
    all_acc = sum(stage_acc.values())
    fsdp_params.clear()
    del sched, stages, mods, opt
    gc.collect()
    return {"rank": dist.get_rank(), "pp_rank": pp_rank, "stages": stage_ids, "peak_bytes": tracker.peak,
            "peak_phase": at_peak["phase"], "accumulated_grad_bytes_at_peak": acc,
            "accumulated_grad_bytes_at_peak_by_stage": {str(s): b for s, b in at_peak["acc"].items()},
            "all_accumulator_bytes": all_acc, "stage_accumulator_bytes": {str(s): b for s, b in stage_acc.items()},
            "accumulator_share": acc / all_acc, "step_s": round(step_s, 3)}  # fmt: skip


def worker(rank: int, port: int, cases: list, steps: int, threads: int, q) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(threads)
    dist.init_process_group("gloo", rank=rank, world_size=PP * DP)
    try:
        mesh = init_device_mesh("cpu", (PP, DP), mesh_dim_names=("pp", "dp"))
        q.put((rank, [run_case(s, n, mesh, steps, SHAPE) for s, n in cases]))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(cases: list, steps: int, threads: int, timeout: float) -> dict[int, list]:
    ctx = mp.get_context("fork")  # the children inherit the imported torch: seconds less
    q, port = ctx.Queue(), free_port()
    procs = [ctx.Process(target=worker, args=(r, port, cases, steps, threads, q)) for r in range(PP * DP)]
    for p in procs:
        p.start()
    results, deadline = {}, time.time() + timeout
    try:
        while len(results) < len(procs):
            try:
                results.update([q.get(timeout=1)])
            except queue.Empty:
                if any(p.exitcode not in (None, 0) for p in procs) or time.time() > deadline:
                    raise RuntimeError(f"failed or timed out: exit codes {[p.exitcode for p in procs]}") from None
        for p in procs:
            p.join(timeout=max(1.0, deadline - time.time()))
    finally:  # a failed run: the others wait in a collective; end them
        for p in (p for p in procs if p.is_alive()):
            p.kill()
            p.join()
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="n_microbatches = pp only, one warm-up step")
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads per process")
    a = ap.parse_args()
    t0 = time.time()
    n_mbs = [PP] if a.smoke else [PP, 2 * PP]
    cases = [(s, n) for n in n_mbs for s in ("1F1B", "Interleaved1F1B")]
    steps = 2 if a.smoke else 3  # warm-up steps + the measured one
    results = launch(cases, steps, a.threads, timeout=600.0)
    out = [{"schedule": s, "n_microbatches": n, "ranks": [results[r][i] for r in sorted(results)]}
           for i, (s, n) in enumerate(cases)]  # fmt: skip
    one_round = {c["schedule"]: c["ranks"] for c in out if c["n_microbatches"] == PP}
    inter, onef1b = one_round["Interleaved1F1B"], one_round["1F1B"]
    print(json.dumps({
        "torch": torch.__version__, "pp": PP, "dp": DP, "layers_per_pp_rank": LAYERS_PER_RANK, "shape": SHAPE,
        "steps": steps, "threads": a.threads, "smoke": a.smoke, "cases": out,
        "interleaved_one_round_accumulator_share": max(r["accumulator_share"] for r in inter),
        "onef1b_accumulator_share": max(r["accumulator_share"] for r in onef1b),
        "one_round_peak_ratio_by_rank": [round(i["peak_bytes"] / o["peak_bytes"], 4) for i, o in zip(inter, onef1b)],
        "wall_s": round(time.time() - t0, 2),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
