"""Host operations of one bench_model block per micro-batch: every ATen op the PyTorch dispatcher runs in the forward
and the backward of a dense block and of an MoE block (bench_model/model.py TransformerBlock, bench_model/moe.py), counted
with a TorchDispatchMode on CPU at toy shapes (the op sequence does not depend on the shapes, only on the model's
structure: the MoE block's grouped GEMM is one op for any number of experts). Each dispatched op costs the host the
Python + dispatcher + (on CUDA) kernel-launch time the speed model prices per op (autotune/predict/host.py,
`cluster.host_op_s`); view ops (reshape, transpose, ...) launch no kernel and are counted apart. Prints JSON (last line):

    .venv/bin/python benchmarks/host_ops.py [--routing learned|balanced] [--no-fp8]

`fp8`: the extra ops per block when its linears run torchao's Float8Linear (tensorwise / rowwise: the dynamic casts,
amax and scale ops, torch._scaled_mm), counted the same way on CPU.

`compiled` (skipped with --no-compile): the same blocks under torch.compile (bench_model's `block.compile()`, bf16):
the kernel launches in the code Inductor generates for each graph's `call` (fused kernels, extern GEMMs, SDPA,
fallback ATen ops; torch._inductor.utils.run_and_get_code), per pass, and the graphs entered (forward graphs: those
without tangents). CPU Inductor stands for CUDA's (the same scheduler decides the fusion; its CPU fallback for
torch._grouped_mm loops over the experts, so the MoE block is counted at one expert: one GEMM per grouped GEMM, as
CUDA runs it). host.COMPILED_DENSE_OPS / COMPILED_MOE_OPS add one op per graph entered and per graph break.

The counts are what autotune/predict/host.py's BENCH_MODEL_OPS states (tests/unit/test_host.py checks they match).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from autotune.core.model import ModelSpec  # noqa: E402
from bench_model.model import TransformerBlock, rope_tables  # noqa: E402


class OpCounter(TorchDispatchMode):
    """Counts the ATen ops dispatched while active; `views` = those returning an alias of an input (no kernel)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops, self.views = 0, 0
        self.names: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        self.ops += 1
        name = str(func.overloadpacket.__name__)
        self.names[name] = self.names.get(name, 0) + 1
        if func.is_view:
            self.views += 1
        return func(*args, **(kwargs or {}))


def _spec(moe: bool) -> ModelSpec:
    extra = dict(num_experts=16, moe_router_topk=2, moe_ffn_hidden_size=16, moe_aux_loss_coeff=1e-3, moe_layer_freq=1)
    return ModelSpec("host-ops", 1, 32, 64, 4, 2, 128, **(extra if moe else {}))


def _to_float8(block: TransformerBlock, fp8: str | None) -> None:
    """The block's linears as bench_model converts them under plan.fp8 (bench_model/parallel/float8.py: torchao
    Float8Linear, dims multiples of 16: the router's h -> E gate too, the grouped experts not)."""
    if fp8 is not None:
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training

        from bench_model.parallel.float8 import _is_block_linear

        cfg = Float8LinearConfig.from_recipe_name(fp8)
        convert_to_float8_training(block, config=cfg, module_filter_fn=_is_block_linear)


def count_block(moe: bool, balanced: bool, seq: int = 16, fp8: str | None = None) -> dict:
    """Forward and backward op counts of one block at batch 1, sequence `seq`; with `fp8` its block linears converted
    as bench_model converts them (bench_model/parallel/float8.py: torchao Float8Linear, dims multiples of 16: the
    router's h -> E gate too, the grouped experts not)."""
    torch.manual_seed(0)
    spec = _spec(moe)
    block = TransformerBlock(spec, 0, seq)
    _to_float8(block, fp8)
    if moe:
        block.feed_forward.balanced = balanced
    rope = rope_tables(spec.head_dim, torch.arange(seq), 10000.0)
    x = torch.randn(1, seq, spec.hidden_size, requires_grad=True)
    block(x, rope).sum().backward()  # warm-up: lazy initialisations stay out of the count
    fwd, bwd = OpCounter(), OpCounter()
    scopes = _scope_hooks(block, fwd, moe)
    with fwd:
        out = block(x, rope).sum()
    for h in scopes.pop("_handles"):
        h.remove()
    with bwd:
        out.backward()
    return {
        "forward": fwd.ops,
        "forward_views": fwd.views,
        "backward": bwd.ops,
        "backward_views": bwd.views,
        "forward_scopes": scopes,
        "forward_ops": dict(sorted(fwd.names.items())),
    }


BLOCKS = (("dense_block", False), ("moe_block", True))
KERNEL_CALL = re.compile(r"^\s+(?:\w+ = )?((?:cpp_fused|triton|extern_kernels\.|aten\.|torch\.ops\.)[\w.]*)\(", re.M)


def count_compiled_block(moe: bool, fp8: str | None = None, seq: int = 16) -> dict:
    """Kernel launches of one bench_model block compiled with torch.compile (module doc), forward and backward, and
    the graphs each pass enters."""
    from torch._dynamo.utils import counters
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    spec = _spec(moe)
    if moe:  # one expert: the CPU fallback of torch._grouped_mm launches one GEMM per expert
        spec = dataclasses.replace(spec, num_experts=1, moe_router_topk=1)
    block = TransformerBlock(spec, 0, seq)
    _to_float8(block, fp8)
    block.to(torch.bfloat16).compile()
    rope = rope_tables(spec.head_dim, torch.arange(seq), 10000.0)
    x = torch.randn(1, seq, spec.hidden_size, dtype=torch.bfloat16, requires_grad=True)
    _, codes = run_and_get_code(lambda: block(x, rope).sum().backward())
    out = {"forward": 0, "backward": 0, "forward_graphs": 0, "backward_graphs": 0}
    for code in codes:
        body = code.split("def call(", 1)[1].split("\ndef ", 1)[0] if "def call(" in code else ""
        side = "backward" if "tangents" in code else "forward"
        out[side] += len(KERNEL_CALL.findall(body))
        out[side + "_graphs"] += 1
    out["graph_breaks"] = sum(counters["graph_break"].values())
    return out


def _scope_hooks(block: TransformerBlock, counter: OpCounter, moe: bool) -> dict:
    """Forward ops inside the scopes Megatron's CUDA graphs capture (cuda_graph_scope): `attn` (the attention norm
    and attention), `moe_router` (MoE.route, the aux loss) and `moe_preprocess` (the tokens-per-expert counts)."""
    out: dict = {"attn": 0, "moe_router": 0, "moe_preprocess": 0, "_handles": []}

    def wrap(mod: torch.nn.Module, key: str) -> None:
        start = {}
        out["_handles"].append(mod.register_forward_pre_hook(lambda m, a: start.__setitem__(0, counter.ops)))
        out["_handles"].append(
            mod.register_forward_hook(lambda m, a, o: out.__setitem__(key, out[key] + counter.ops - start[0]))
        )

    wrap(block.attention_norm, "attn")
    wrap(block.attention, "attn")
    if moe:
        ff = block.feed_forward
        route, aux = ff.route, ff.aux_loss

        def counted(fn, key):  # noqa: ANN001, ANN202
            def run(*a, **k):  # noqa: ANN002, ANN003, ANN202
                n = counter.ops
                r = fn(*a, **k)
                out[key] += counter.ops - n
                return r

            return run

        ff.route, ff.aux_loss = counted(route, "moe_router"), counted(aux, "moe_router")
        import bench_model.moe as bm

        bm_counts = bm.expert_counts
        bm.expert_counts = counted(bm_counts, "moe_preprocess")
        out["_handles"].append(_Restore(lambda: setattr(bm, "expert_counts", bm_counts)))
        out["_handles"].append(_Restore(lambda: (delattr(ff, "route"), delattr(ff, "aux_loss"))))
    return out


class _Restore:
    def __init__(self, fn) -> None:  # noqa: ANN001
        self.fn = fn

    def remove(self) -> None:
        self.fn()


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--routing", choices=("learned", "balanced"), default="learned")
    ap.add_argument("--no-fp8", action="store_true", help="skip the torchao float8 counts")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile counts")
    args = ap.parse_args(argv)
    dense = count_block(False, False)
    moe = count_block(True, args.routing == "balanced")
    fp8 = {}
    for recipe in () if args.no_fp8 else ("tensorwise", "rowwise"):  # extra ops of the Float8Linear casts
        d8, m8 = count_block(False, False, fp8=recipe), count_block(True, args.routing == "balanced", fp8=recipe)
        fp8[recipe] = {
            "dense_extra": [d8["forward"] - dense["forward"], d8["backward"] - dense["backward"]],
            "moe_extra": [m8["forward"] - moe["forward"], m8["backward"] - moe["backward"]],
        }
    compiled = {}
    recipes = (None,) if args.no_fp8 else (None, "tensorwise", "rowwise")
    for recipe in () if args.no_compile else recipes:
        compiled[recipe or "bf16"] = {key: count_compiled_block(moe, recipe) for key, moe in BLOCKS}
    out = {
        "torch": torch.__version__,
        "routing": args.routing,
        "dense_block": dense,
        "moe_block": moe,
        "moe_minus_dense": {k: moe[k] - dense[k] for k in ("forward", "backward")},
        "fp8": fp8,
        "compiled": compiled,
    }
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
