"""What torchtitan's op-level selective AC keeps per token and layer, eager and with compiled blocks, measured on CPU
against the torchtitan profile's account (autotune/predict/frameworks/torchtitan.py `layer_activations`, [AC]).

torchtitan 0.2.2's Llama 3 `Transformer` blocks under its `apply_ac` (mode "selective", option "op": save every
other mm, the SDPA outputs, reduce-scatter outputs; models/llama3/infra/parallelize.py `_op_sac_save_list`, here with
the CPU flash SDPA op added, which the GPU list names as `_scaled_dot_product_flash_attention`), eager or each block
`torch.compile(block, fullgraph=True)` as torchtitan's `apply_compile` does. Measured: the bytes the blocks' forward
leaves allocated (torch.profiler's CPU memory events, which see Inductor's buffers too), less the output, plus the
first block's input (allocated before the measurement; every later block's input is the previous block's output),
per token and layer. tp = 1: no sequence parallelism, no reduce-scatter.

Why: torchtitan's published 8B rows (benchmarks/data/measured/torchtitan_benchmarks.csv, Dec 2024) measure 5.4 / 5.0
GiB less with compiled blocks than eager at FSDP 8 / 128 (2.64 h bytes per token and layer), while the profile prices
both the same (docs/frameworks.md). The compiled graph's partitioner saves only what the backward reads; eager SAC
also keeps saved ops' outputs no backward reads.
Run: PYTHONPATH=. python benchmarks/torchtitan_sac_saved.py [--no-compile] [--hidden H --ffn F --seq S]
Last line: one JSON object {"rows": [{"mode", "bytes_per_token_layer", "profile_bytes_per_token_layer",
"rel_err"}], "compiled_minus_eager_per_h"} (the last null with --no-compile).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autotune.core.model import ModelSpec  # noqa: E402
from autotune.core.plan_arrays import RECOMPUTE_CODE  # noqa: E402
from autotune.predict.frameworks.torchtitan import TorchtitanProfile  # noqa: E402
from bench_model.metrics import cpu_memory_events  # noqa: E402

LAYERS = 2


def saved_per_token_layer(spec: ModelSpec, seq: int, mbs: int, compiled: bool) -> float:
    """Bytes the blocks keep for backward per token and layer (module docstring)."""
    from torchtitan.config.job_config import ActivationCheckpoint
    from torchtitan.distributed.activation_checkpoint import apply_ac
    from torchtitan.models.llama3 import Transformer, TransformerModelArgs
    from torchtitan.models.llama3.infra.parallelize import _op_sac_save_list

    torch.manual_seed(0)
    base = int(2 * 4 * spec.hidden_size / 3)  # FeedForward's width = int(mult * base) with multiple_of = 1: exactly f
    args = TransformerModelArgs(
        dim=spec.hidden_size, n_layers=LAYERS, n_heads=spec.num_heads, n_kv_heads=spec.num_kv_heads,
        vocab_size=spec.vocab_size, max_seq_len=seq, multiple_of=1,
        ffn_dim_multiplier=(spec.ffn_hidden_size + 0.5) / base,
    )  # fmt: skip
    model = Transformer(args).to(torch.bfloat16)
    with torch.no_grad():
        model.init_weights()
    save = set(_op_sac_save_list) | {torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default}
    apply_ac(model, ActivationCheckpoint(mode="selective", selective_ac_option="op"), op_sac_save_list=save,
             model_compile_enabled=compiled)  # fmt: skip
    if compiled:
        for name, block in model.layers.named_children():
            model.layers.register_module(name, torch.compile(block, fullgraph=True))
    x = torch.randn(mbs, seq, spec.hidden_size, dtype=torch.bfloat16, requires_grad=True)
    rope = model.freqs_cis[:seq]

    def forward() -> torch.Tensor:
        y = x
        for block in model.layers.values():
            y = block(y, rope, None)
        return y

    forward().sum().backward()  # compile / warm up outside the measurement
    events, out = cpu_memory_events(forward)
    net = sum(nbytes for _, nbytes in events)
    out.sum().backward()
    kept = net - out.numel() * out.element_size() + x.numel() * x.element_size()
    return kept / (mbs * seq * LAYERS)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--ffn", type=int, default=768)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--mbs", type=int, default=2)
    ap.add_argument("--no-compile", action="store_true", help="eager only (seconds instead of a minute)")
    a = ap.parse_args()
    spec = ModelSpec("sac-probe", LAYERS, a.hidden, a.ffn, a.heads, a.kv_heads, 512)
    sel = TorchtitanProfile().layer_activations(spec, a.seq, a.mbs, 1, False, RECOMPUTE_CODE["selective"], 2)
    profile = float(sel["saved"]) / (a.seq * a.mbs)
    rows = []
    for compiled in [False] if a.no_compile else [False, True]:
        got = saved_per_token_layer(spec, a.seq, a.mbs, compiled)
        rows.append({"mode": "compiled" if compiled else "eager", "bytes_per_token_layer": round(got, 1),
                     "profile_bytes_per_token_layer": profile, "rel_err": round(profile / got - 1.0, 4)})  # fmt: skip
    gap = (rows[0]["bytes_per_token_layer"] - rows[1]["bytes_per_token_layer"]) / a.hidden if len(rows) > 1 else None
    print(json.dumps({"rows": rows, "compiled_minus_eager_per_h": None if gap is None else round(gap, 3)}))


if __name__ == "__main__":
    main()
