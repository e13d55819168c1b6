"""Saved activation bytes of one nanotron Llama decoder layer at tensor parallel 2 over gloo (CPU), next to the nanotron
profile's per-layer term (autotune/predict/frameworks/nanotron.py `nanotron_layer_bytes_per_token`), and the peak of
its loss's forward per logit (`--vocab`)

Each of the `--world` ranks runs one decoder layer's forward (bf16, sequence parallel = nanotron's tp_mode
REDUCE_SCATTER as bench_cluster sets it, or ALL_REDUCE with --all-reduce) and counts what autograd keeps for backward
with saved_tensors_hooks: one entry per storage (a saved view keeps its whole storage alive), parameters excluded.

The layer is, by default, a line-for-line replica of huggingface/nanotron branch bench_cluster @ a27e8fe8 (Apache-2.0;
the commit bench_cluster checks out): models/llama.py `LlamaDecoderLayer._core_forward`, `CausalSelfAttention.forward`
(training branch), `MLP.forward`, `GLUActivation`; parallel/tensor_parallel/functional.py `column_linear` /
`row_linear` (synchronous path) and distributed_differentiable_primitives.py's all-gather / reduce-scatter / identity /
all-reduce. With `--nanotron-src DIR` (that commit's src/ folder, e.g. `git archive a27e8fe8 src` of the nanotron
repository; dacite from tests/vendor/nanotron) the upstream `LlamaDecoderLayer` itself runs instead.
MOCKS (CUDA-only kernels that cannot run here), each saving for backward what the flash-attn 2.5 kernel's autograd
function saves: flash-attn's triton rms_norm (LayerNormFn: the input and an fp32 rstd per row), its rotary embedding
(in place, saves only its cos/sin caches) and flash_attn_varlen_func (FlashAttnVarlenFunc: q, k, v, out, the fp32
log-sum-exp [heads, tokens], cu_seqlens and the RNG state).

Measured 2026-11-26 on the 2-core CI box (torch 2.13 CPU, h 256, f 512, 8 heads, seq 64, bf16), bytes per token,
replica / upstream / profile: tp 2 REDUCE_SCATTER MHA mbs 2 5396.22 / 5396.31 / 5396 (5140 before the o_proj copy);
mbs 1 5140.38 / 5140.50 / 5140; GQA (4 kv heads) 4628.22 / 4628.31 / 4628; ALL_REDUCE 5912.22 / 5912.31 / 5912; tp 4
3210.22 / 3210.31 / 3210. The remainder is cu_seqlens and the RNG state (upstream: + the sequence mask's sums).

With --vocab V the loss's forward runs too (cast to fp32 + _ShardedCrossEntropy, replica or upstream): its peak
resident bytes per local logit, sampled at the three all-reduces inside the loss, against the profile's 8
(`NanotronProfile.logits`). Measured (seq 512, mbs 2, V 65536 at tp 2): replica 8.087, upstream 8.085 (the rest:
per-token tensors and page rounding); the profile said 4 + c = 6 before issue 26 item 5.

Prints ONE JSON object (one line): shape, per rank the measured saved bytes per token and the profile's (and the
loss's bytes per logit with --vocab).
    PYTHONPATH=. python benchmarks/nanotron_layer_probe.py [--world 2 --hidden 256 --ffn 512 --heads 8 --kv-heads 8
                                                           --seq 64 --mbs 2] [--all-reduce] [--nanotron-src DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from autotune.core.model import ModelSpec  # noqa: E402
from autotune.predict.frameworks import get_profile  # noqa: E402
from autotune.predict.frameworks.nanotron import nanotron_layer_bytes_per_token  # noqa: E402


# ---- MOCKS of flash-attn's CUDA kernels: what each one's autograd function saves ----------------------------------
class _RMSNorm(torch.autograd.Function):  # MOCK: flash_attn/ops/triton/layer_norm.py LayerNormFn (is_rms_norm)
    @staticmethod
    def forward(ctx, x, weight, eps):
        x2 = x.reshape(-1, x.shape[-1])
        rstd = torch.rsqrt(x2.float().pow(2).mean(-1) + eps)  # fp32, one per row
        ctx.save_for_backward(x2, weight, rstd)
        return (x2.float() * rstd[:, None]).to(x.dtype).mul(weight).view_as(x)

    @staticmethod
    def backward(ctx, g):
        raise NotImplementedError("forward-only probe")


def layer_norm_fn(x, weight, bias, residual=None, eps=1e-6, **_):
    return _RMSNorm.apply(x, weight, eps)


class _Rotary(torch.autograd.Function):  # MOCK: flash_attn/layers/rotary.py ApplyRotaryEmb(inplace=True)
    @staticmethod
    def forward(ctx, x):
        return x  # the kernel writes into x's storage and returns x (no new tensor, nothing per token saved)

    @staticmethod
    def backward(ctx, g):
        return g


class RotaryEmbedding(torch.nn.Module):  # MOCK: flash_attn.layers.rotary.RotaryEmbedding, in place on q and k
    def __init__(self, dim, base=10000.0, interleaved=False, **_):
        super().__init__()

    def forward(self, q, kv=None, **_):
        return _Rotary.apply(q), _Rotary.apply(kv)


class _VarlenAttn(torch.autograd.Function):  # MOCK: flash_attn_interface.FlashAttnVarlenFunc
    @staticmethod
    def forward(ctx, q, k, v, cu_q, cu_k, max_q, causal):
        b, heads = cu_q.numel() - 1, q.shape[1]
        with torch.no_grad():
            qs, ks, vs = (t.reshape(b, max_q, t.shape[1], t.shape[2]).transpose(1, 2).float() for t in (q, k, v))
            reps = heads // ks.shape[1]
            ks, vs = ks.repeat_interleave(reps, 1), vs.repeat_interleave(reps, 1)
            out = F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal).transpose(1, 2).reshape(q.shape)
        out = out.to(q.dtype)
        lse = torch.empty(heads, q.shape[0], dtype=torch.float32)
        rng_state = torch.empty(2, dtype=torch.int64)
        ctx.save_for_backward(q, k, v, out, lse, cu_q, cu_k, rng_state)
        return out

    @staticmethod
    def backward(ctx, g):
        raise NotImplementedError("forward-only probe")


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal=False, **_):
    return _VarlenAttn.apply(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, causal)


def install_flash_attn_mocks() -> None:
    """Register the MOCKS as the `flash_attn` modules nanotron imports inside its forwards."""
    mods = {
        n: types.ModuleType(n) for n in ("flash_attn", "flash_attn.layers", "flash_attn.ops", "flash_attn.ops.triton")
    }
    mods["flash_attn.layers.rotary"] = types.ModuleType("flash_attn.layers.rotary")
    mods["flash_attn.layers.rotary"].RotaryEmbedding = RotaryEmbedding
    mods["flash_attn.ops.triton.layer_norm"] = types.ModuleType("flash_attn.ops.triton.layer_norm")
    mods["flash_attn.ops.triton.layer_norm"].layer_norm_fn = layer_norm_fn
    mods["flash_attn.flash_attn_interface"] = types.ModuleType("flash_attn.flash_attn_interface")
    mods["flash_attn.flash_attn_interface"].flash_attn_varlen_func = flash_attn_varlen_func
    mods["flash_attn.flash_attn_interface"].flash_attn_with_kvcache = None
    mods["flash_attn.bert_padding"] = types.ModuleType("flash_attn.bert_padding")
    mods["flash_attn"].bert_padding = mods["flash_attn.bert_padding"]
    sys.modules.update(mods)


# ---- the replica (nanotron branch bench_cluster @ a27e8fe8) ---------------------------------------------------------
class _AllGather(torch.autograd.Function):  # distributed_differentiable_primitives.py DifferentiableAllGather
    @staticmethod
    def forward(ctx, x, group):
        out = torch.empty(x.shape[0] * group.size(), *x.shape[1:], dtype=x.dtype)
        dist.all_gather_into_tensor(out, x.contiguous(), group=group)
        return out


class _ReduceScatter(torch.autograd.Function):  # DifferentiableReduceScatterSum
    @staticmethod
    def forward(ctx, x, group):
        out = torch.empty(x.shape[0] // group.size(), *x.shape[1:], dtype=x.dtype)
        dist.reduce_scatter_tensor(out, x.contiguous(), group=group)
        return out


class _AllReduce(torch.autograd.Function):  # DifferentiableAllReduceSum: in place, returns its input
    @staticmethod
    def forward(ctx, x, group):
        dist.all_reduce(x, group=group)
        return x


class _Identity(torch.autograd.Function):  # DifferentiableIdentity
    @staticmethod
    def forward(ctx, x, group):
        return x


class ReplicaLayer(torch.nn.Module):
    """models/llama.py LlamaDecoderLayer (training path, synchronous TP linears, recompute_layer false)."""

    def __init__(self, h: int, f: int, heads: int, kv_heads: int, group, reduce_scatter: bool):
        super().__init__()
        t, d = group.size(), h // heads
        self.g, self.rs, self.d, self.nq, self.nkv = group, reduce_scatter, d, heads // t, kv_heads // t
        w = lambda o, i: torch.nn.Parameter(torch.randn(o, i, dtype=torch.bfloat16) * 0.02)  # noqa: E731
        self.ln1, self.ln2 = (torch.nn.Parameter(torch.ones(h, dtype=torch.bfloat16)) for _ in range(2))
        self.qkv, self.o = w((heads + 2 * kv_heads) * d // t, h), w(h, heads * d // t)
        self.gate_up, self.down = w(2 * f // t, h), w(h, f // t)
        self.rotary = RotaryEmbedding(d)

    def col(self, x, w):  # functional.py:341-359 column_linear, async_communication false
        x = _AllGather.apply(x, self.g) if self.rs else _Identity.apply(x, self.g)
        return F.linear(x, w)

    def row(self, x, w):  # functional.py row_linear, async_communication false
        out = F.linear(x, w)
        return _ReduceScatter.apply(out, self.g) if self.rs else _AllReduce.apply(out, self.g)

    def attn(self, x, mask):  # CausalSelfAttention.forward, training branch (llama.py:555-600)
        qkv = self.col(x, self.qkv)
        s, b, _ = qkv.shape
        if self.nq != self.nkv:  # is_gqa
            q, k, v = torch.split(qkv, [self.nq * self.d, self.nkv * self.d, self.nkv * self.d], dim=-1)
            q = q.transpose(0, 1).contiguous().view(b, s, self.nq, self.d)
            k = k.transpose(0, 1).contiguous().view(b, s, self.nkv, self.d)
            v = v.transpose(0, 1).contiguous().view(b, s, self.nkv, self.d)
        else:
            q, k, v = qkv.view(s, b, 3, self.nq, self.d).permute(2, 1, 0, 3, 4).contiguous()
        kv = torch.cat([k.unsqueeze(0), v.unsqueeze(0)], dim=0).permute(1, 2, 0, 3, 4).contiguous()
        q, kv = self.rotary(q, kv=kv)
        k, v = torch.split(kv, 1, dim=2)
        cu = torch.zeros(b + 1, dtype=torch.int32)
        torch.cumsum(mask.sum(-1, dtype=torch.int32), dim=0, dtype=torch.int32, out=cu[1:])
        out = flash_attn_varlen_func(
            q.view(b * s, self.nq, self.d), k.view(b * s, self.nkv, self.d), v.view(b * s, self.nkv, self.d),
            cu, cu, s, s, causal=True,
        )  # fmt: skip
        return self.row(out.contiguous().view(b, s, self.nq * self.d).transpose(0, 1), self.o)

    def forward(self, hidden_states, sequence_mask):  # _core_forward
        residual = hidden_states
        hidden_states = self.attn(layer_norm_fn(hidden_states, self.ln1, None), sequence_mask) + residual
        residual = hidden_states
        merged = self.col(layer_norm_fn(hidden_states, self.ln2, None), self.gate_up)
        gate, up = torch.split(merged, merged.shape[-1] // 2, dim=-1)  # GLUActivation
        return self.row(F.silu(gate) * up, self.down) + residual


_RSS_SAMPLES: list[int] = []


def rss_bytes() -> int:
    """Resident set size. CPU tensors this large are mmap'd by glibc (above M_MMAP_THRESHOLD, at most 32 MiB) and
    unmapped when freed, so the resident bytes follow the live large tensors once they are written."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def sampling_all_reduce(tensor, *args, **kwargs):
    """torch.distributed.all_reduce, sampling the resident bytes first: _ShardedCrossEntropy.forward calls it three
    times, after the max-shift copy exists (functional.py:40-80 @ a27e8fe8)."""
    _RSS_SAMPLES.append(rss_bytes())
    return dist.all_reduce(tensor, *args, **kwargs)


class _ShardedCrossEntropy(torch.autograd.Function):  # functional.py:32-86 @ a27e8fe8, forward
    @staticmethod
    def forward(ctx, sharded_logits, target, group):
        logits_max = torch.max(sharded_logits, dim=-1)[0]
        sampling_all_reduce(logits_max, op=dist.ReduceOp.MAX, group=group)
        sharded_logits = sharded_logits - logits_max.unsqueeze(dim=-1)
        v = sharded_logits.shape[-1]
        start = dist.get_rank(group) * v
        target_mask = (target < start) | (target >= start + v)
        masked_target = target.clone() - start
        masked_target[target_mask] = 0
        logits_2d = sharded_logits.view(-1, v)
        masked_target_1d = masked_target.view(-1)
        predicted = logits_2d[torch.arange(logits_2d.shape[0]), masked_target_1d].clone().view_as(target)
        predicted[target_mask] = 0.0
        sampling_all_reduce(predicted, op=dist.ReduceOp.SUM, group=group)
        exp_logits = sharded_logits
        torch.exp(sharded_logits, out=exp_logits)
        sum_exp = exp_logits.sum(dim=-1)
        sampling_all_reduce(sum_exp, op=dist.ReduceOp.SUM, group=group)
        loss = torch.log(sum_exp) - predicted
        exp_logits.div_(sum_exp.unsqueeze(dim=-1))
        ctx.save_for_backward(exp_logits, target_mask, masked_target_1d)
        return loss.view_as(target)


def loss_peak_bytes_per_logit(a, group, upstream: bool) -> float:
    """The loss's forward on one rank, as LlamaForTraining.forward runs it (models/llama.py:808, 856-877, 905-921 @
    a27e8fe8): lm_head's bf16 logits [seq, batch, V/t], cast to fp32 (the bf16 gone once LlamaModel.forward returns,
    the fp32 kept by the caller), then the sharded cross entropy in fp32. Returns the resident bytes at its largest
    sample above those before the cast, per local logit."""
    n, v = a.seq * a.mbs, a.vocab // group.size()
    target = torch.randint(0, a.vocab, (a.mbs, a.seq))
    logits = torch.randn(a.seq, a.mbs, v, dtype=torch.bfloat16, requires_grad=True)
    before = rss_bytes()
    fp32 = logits.float()  # cast_to_fp32
    if upstream:
        import nanotron.distributed as ndist
        from nanotron.models.llama import Loss

        ndist.all_reduce = sampling_all_reduce
        loss = Loss(group)(sharded_logits=fp32, label_ids=target, label_mask=torch.ones_like(target))["loss"]
    else:
        loss = _ShardedCrossEntropy.apply(fp32, target.transpose(0, 1).contiguous(), group)
    assert loss.requires_grad
    return (max(_RSS_SAMPLES) - before) / (n * v)


def upstream_layer(src: str, a, group, reduce_scatter: bool) -> torch.nn.Module:
    """nanotron's own LlamaDecoderLayer from `src` (dacite from tests/vendor/nanotron)."""
    sys.path[:0] = [src, str(ROOT / "tests" / "vendor" / "nanotron" / "dacite" / "..")]
    from nanotron.config import LlamaConfig, ParallelismArgs
    from nanotron.models.llama import LlamaDecoderLayer
    from nanotron.parallel.tensor_parallel.enum import TensorParallelLinearMode

    cfg = LlamaConfig(
        hidden_size=a.hidden, intermediate_size=a.ffn, num_attention_heads=a.heads, num_key_value_heads=a.kv_heads,
        num_hidden_layers=1, vocab_size=256, max_position_embeddings=a.seq,
    )  # fmt: skip
    mode = TensorParallelLinearMode.REDUCE_SCATTER if reduce_scatter else TensorParallelLinearMode.ALL_REDUCE
    par = ParallelismArgs(dp=1, pp=1, tp=group.size(), tp_mode=mode, tp_linear_async_communication=False)
    layer = LlamaDecoderLayer(cfg, par, group, 0).to(torch.bfloat16)
    for p in layer.parameters():
        torch.nn.init.normal_(p, std=0.02)
    return layer


def _rank(rank: int, a, port: int, out_dir: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=a.world)
    torch.manual_seed(0)
    install_flash_attn_mocks()
    group, rs = dist.group.WORLD, not a.all_reduce
    if a.nanotron_src:
        layer = upstream_layer(a.nanotron_src, a, group, rs)
    else:
        layer = ReplicaLayer(a.hidden, a.ffn, a.heads, a.kv_heads, group, rs)
    s_local = a.seq // a.world if rs else a.seq  # nanotron's [seq, batch, hidden] layout, sequence-sharded under SP
    x = torch.randn(s_local, a.mbs, a.hidden, dtype=torch.bfloat16, requires_grad=True)
    mask = torch.ones(a.mbs, a.seq, dtype=torch.bool)
    params = {p.untyped_storage().data_ptr() for p in layer.parameters()}
    saved: dict[int, int] = {}

    def pack(t):
        st = t.untyped_storage()
        if st.data_ptr() not in params:
            saved[st.data_ptr()] = st.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = layer(x, mask)
    out = out["hidden_states"] if isinstance(out, dict) else out
    assert tuple(out.shape) == (s_local, a.mbs, a.hidden)
    del out
    loss_peak = loss_peak_bytes_per_logit(a, group, bool(a.nanotron_src)) if a.vocab else None
    row = {"rank": rank, "saved_bytes": sum(saved.values()), "loss_peak_bytes_per_logit": loss_peak}
    Path(out_dir, f"{rank}.json").write_text(json.dumps(row))
    dist.destroy_process_group()


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for name, default in (("world", 2), ("hidden", 256), ("ffn", 512), ("heads", 8), ("kv-heads", 8), ("seq", 64)):
        ap.add_argument(f"--{name}", type=int, default=default)
    ap.add_argument("--mbs", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=0, help="also run the loss with this vocabulary (0: skip)")
    ap.add_argument("--all-reduce", action="store_true", help="tp_mode ALL_REDUCE (no sequence parallelism)")
    ap.add_argument("--nanotron-src", default=None, help="run upstream nanotron's LlamaDecoderLayer from this src/")
    a = ap.parse_args(argv)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as d:
        # fork: the ranks share the already imported torch (a spawn re-imports it, ~5 s each on the CI box)
        torch.multiprocessing.start_processes(_rank, args=(a, port, d), nprocs=a.world, start_method="fork")
        ranks = [json.loads(Path(d, f"{r}.json").read_text()) for r in range(a.world)]
    spec = ModelSpec(
        name="probe", num_layers=1, hidden_size=a.hidden, ffn_hidden_size=a.ffn, num_heads=a.heads,
        num_kv_heads=a.kv_heads, vocab_size=a.vocab or 256,
    )  # fmt: skip
    tokens = a.seq * a.mbs
    predicted = float(nanotron_layer_bytes_per_token(spec, a.world, not a.all_reduce, 2, a.mbs))
    result = {
        "layer": "upstream" if a.nanotron_src else "replica",
        "shape": {k: getattr(a, k) for k in ("world", "hidden", "ffn", "heads", "kv_heads", "seq", "mbs")},
        "tp_mode": "ALL_REDUCE" if a.all_reduce else "REDUCE_SCATTER",
        "measured_bytes_per_token": [r["saved_bytes"] / tokens for r in ranks],
        "predicted_bytes_per_token": predicted,
    }
    result["max_rel_err"] = max(abs(m / predicted - 1) for m in result["measured_bytes_per_token"])
    if a.vocab:  # the profile's logits term per local logit (NanotronProfile.logits)
        result["loss_peak_bytes_per_logit"] = [r["loss_peak_bytes_per_logit"] for r in ranks]
        result["predicted_loss_bytes_per_logit"] = float(
            get_profile("nanotron").logits(spec, 1, 1, a.world, 2) / (a.vocab / a.world)
        )
    return result


if __name__ == "__main__":
    print(json.dumps(main()))
