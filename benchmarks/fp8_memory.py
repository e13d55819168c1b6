"""Saved activation bytes of one bench_model block with torchao float8 linears (plan.fp8) against bf16, eager and under
torch.compile, on CPU (torch 2.13's CPU build runs torch._scaled_mm), next to the bench_model profile's prediction.

What autograd keeps for backward is counted with saved_tensors_hooks (one entry per storage, parameters and the RoPE
table excluded), as tests/unit/test_memory.py does for the bf16 block. The H200 rows (h200_bench_model_2026-11-25.csv)
are the GPU check of the same term (docs/memory_model.md "FP8 linears"). Measured 2026-11-25 on the 2-core CI box
(torch 2.13, torchao 0.18, h 256, f 1024, 4 heads, 2 KV heads, seq 128, mbs 2): eager 55.09h bytes per token for
bf16, tensorwise and rowwise; compiled 38.59h bf16, 26.59h tensorwise and rowwise: 12.0h = 4h + 2f less, the
prediction (`fp8_compiled_saving_per_token`) exactly. Compiling the six variants takes ~4 minutes on that box.

Prints ONE JSON object (one line): shape, per variant the saved bytes and bytes per token in units of h, the saving
against bf16 of the same mode, and the predicted saving.
    PYTHONPATH=. python benchmarks/fp8_memory.py [--hidden 256 --ffn 1024 --heads 4 --kv-heads 2 --seq 128 --mbs 2]
                                                 [--no-compile] [--recipes tensorwise,rowwise]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from autotune.core.model import ModelSpec  # noqa: E402
from autotune.predict.frameworks.bench_model import fp8_compiled_saving_per_token  # noqa: E402
from bench_model.model import TransformerBlock, rope_tables  # noqa: E402
from bench_model.parallel.float8 import apply_float8  # noqa: E402


def saved_bytes(spec: ModelSpec, recipe: str, compiled: bool, seq: int, mbs: int) -> int:
    """Bytes autograd saves in the forward of one block (bf16), deduplicated by storage."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    block = TransformerBlock(spec).to(torch.bfloat16)
    for p in block.parameters():
        torch.nn.init.normal_(p, std=0.02)
    if recipe != "none":
        apply_float8(block, recipe)
    fwd = torch.compile(block) if compiled else block
    rope = rope_tables(spec.head_dim, torch.arange(seq), 1e4)
    skip = {p.untyped_storage().data_ptr() for p in block.parameters()} | {rope.untyped_storage().data_ptr()}
    saved: dict[int, int] = {}

    def pack(t):
        ptr = t.untyped_storage().data_ptr()
        if ptr not in skip:
            saved[ptr] = t.untyped_storage().nbytes()
        return t

    x = torch.randn(mbs, seq, spec.hidden_size, dtype=torch.bfloat16, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = fwd(x, rope)
    y.float().sum().backward()  # the graph ran through: nothing left half-built
    return sum(saved.values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--ffn", type=int, default=1024)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--mbs", type=int, default=2)
    ap.add_argument("--recipes", default="tensorwise,rowwise")
    ap.add_argument("--no-compile", action="store_true", help="eager only (seconds instead of minutes)")
    a = ap.parse_args()
    spec = ModelSpec(
        name="block", num_layers=1, hidden_size=a.hidden, ffn_hidden_size=a.ffn, num_heads=a.heads,
        num_kv_heads=a.kv_heads, vocab_size=128,
    )  # fmt: skip
    tokens = a.seq * a.mbs
    modes = [False] if a.no_compile else [False, True]
    variants = []
    for compiled in modes:
        base = saved_bytes(spec, "none", compiled, a.seq, a.mbs)
        for recipe in ["none", *a.recipes.split(",")]:
            got = base if recipe == "none" else saved_bytes(spec, recipe, compiled, a.seq, a.mbs)
            pred = float(fp8_compiled_saving_per_token(spec, 1, False, 2)) if compiled and recipe != "none" else 0.0
            variants.append(
                {
                    "recipe": recipe,
                    "compiled": compiled,
                    "saved_bytes": got,
                    "bytes_per_token_h": round(got / (tokens * a.hidden), 4),
                    "saving_bytes_per_token": (base - got) / tokens,
                    "predicted_saving_bytes_per_token": pred,
                }
            )
    shape = {"hidden": a.hidden, "ffn": a.ffn, "heads": a.heads, "kv_heads": a.kv_heads, "seq": a.seq, "mbs": a.mbs}
    print(json.dumps({"shape": shape, "torch": torch.__version__, "variants": variants}))


if __name__ == "__main__":
    main()
