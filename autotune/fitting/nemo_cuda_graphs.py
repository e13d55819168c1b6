"""CUDA graphs of the NeMo / Megatron-Bridge performance rows (train.cuda_graphs, autotune/predict/host.py), read off the
performance configs of the Megatron-Bridge release each container ships (NVIDIA-NeMo/Megatron-Bridge):

  container            release   configs
  NeMo 25.09           cac49dcd7 scripts/performance/configs/qwen3/qwen3_30b_a3b_llm_pretrain.yaml ("Malay/qwen3 2509",
                                 2025-09-27): `cuda_graphs: true` on GB200 and B200 (helpers.set_cuda_graph_overrides:
                                 model.enable_cuda_graph, Megatron's per-layer "local" graphs, which the token-drop
                                 recipe's static shapes allow), false on H100
  NeMo 25.11           v0.2.0    scripts/performance/configs/{qwen3,gpt_oss}/workload_base_configs.py
  NeMo 26.02           v0.3.0    scripts/performance/configs/{qwen,gpt_oss}/*_workload_base_configs.py
  NeMo 26.02.01        v0.3.1    (the same files)
  NeMo 26.04, 26.04.01 v0.4.2
  NeMo 26.06, 26.06.01 v0.5.1
  NeMo 26.08           v0.6.0    src/megatron/bridge/perf_recipes/<model>/<gpu>/*.py
The container -> release pairing is by release order and date (v0.3.0 2026-02-26 ... v0.6.0 2026-08-19; each tag's
docs/performance-summary.md lists its containers) and is an assumption: the table does not name the release. Per
config: cuda_graph_impl "transformer_engine" with scope [moe_router, moe_preprocess] -> "moe", with attn as well ->
"attn_moe"; "full_iteration" -> "full"; none set -> "none". Where a release has a V2 config it is the one taken (the
perf scripts' --config_variant defaults to v2, scripts/performance/argument_parser.py @ v0.5.1). The table was
generated from those files (every Qwen3-30B-A3B, Qwen3-235B-A22B and GPT-OSS-120B config per GPU and precision) and
is kept here so the package reads nothing outside the repository.

NOT MAPPED (train.cuda_graphs stays "none", which may be wrong): the dense models (Llama 3 / 3.1, Nemotron, GPT-3),
Kimi-K2 (its configs were not read; DeepSeek-V3's MXFP8 rows: nemo_releases.py), every container before 25.11 but the 25.09 token-drop rows, and
any (model, GPU, container, recipe) the table below lacks.
"""

from __future__ import annotations

# (summary model, GPU, container, then train.cuda_graphs of the BF16, FP8-CS (tensorwise) and FP8-MX (mxfp8) configs;
# None where the release has no such config), with the release it was read from: configs
# <MODEL>_<GPU>_<PRECISION>_BASE_CONFIG (v0.2.0), <MODEL>_PRETRAIN_CONFIG_<GPU>_<PRECISION>_V2 where the release has it,
# else _V1 (v0.3.0-v0.5.1), perf_recipes/<model>/<gpu>/*.py (v0.6.0)
_ROWS: tuple[tuple[str, str, str, str | None, str | None, str | None], ...] = (
    ("GPT OSS 120B", "B200", "NeMo 25.11", "none", None, None),  # v0.2.0
    ("GPT OSS 120B", "B200", "NeMo 26.02", "none", None, None),  # v0.3.0
    ("GPT OSS 120B", "B200", "NeMo 26.02.01", "none", None, None),  # v0.3.1
    ("GPT OSS 120B", "B200", "NeMo 26.04", "none", None, "none"),  # v0.4.2
    ("GPT OSS 120B", "B200", "NeMo 26.04.01", "none", None, "none"),  # v0.4.2
    ("GPT OSS 120B", "B200", "NeMo 26.06", "none", None, "none"),  # v0.5.1
    ("GPT OSS 120B", "B200", "NeMo 26.06.01", "none", None, "none"),  # v0.5.1
    ("GPT OSS 120B", "B300", "NeMo 26.02", "attn_moe", None, None),  # v0.3.0
    ("GPT OSS 120B", "B300", "NeMo 26.02.01", "attn_moe", None, None),  # v0.3.1
    ("GPT OSS 120B", "B300", "NeMo 26.04", "attn_moe", None, "attn_moe"),  # v0.4.2
    ("GPT OSS 120B", "B300", "NeMo 26.04.01", "attn_moe", None, "attn_moe"),  # v0.4.2
    ("GPT OSS 120B", "B300", "NeMo 26.06", "attn_moe", None, "attn_moe"),  # v0.5.1
    ("GPT OSS 120B", "B300", "NeMo 26.06.01", "attn_moe", None, "attn_moe"),  # v0.5.1
    ("GPT OSS 120B", "GB200", "NeMo 25.11", "none", None, None),  # v0.2.0
    ("GPT OSS 120B", "GB200", "NeMo 26.02", "none", None, None),  # v0.3.0
    ("GPT OSS 120B", "GB200", "NeMo 26.02.01", "none", None, None),  # v0.3.1
    ("GPT OSS 120B", "GB200", "NeMo 26.04", "none", None, "none"),  # v0.4.2
    ("GPT OSS 120B", "GB200", "NeMo 26.04.01", "none", None, "none"),  # v0.4.2
    ("GPT OSS 120B", "GB200", "NeMo 26.06", "none", None, "full"),  # v0.5.1
    ("GPT OSS 120B", "GB200", "NeMo 26.06.01", "none", None, "full"),  # v0.5.1
    ("GPT OSS 120B", "GB200", "NeMo 26.08", None, None, "full"),  # v0.6.0
    ("GPT OSS 120B", "GB300", "NeMo 25.11", "attn_moe", None, None),  # v0.2.0
    ("GPT OSS 120B", "GB300", "NeMo 26.02", "attn_moe", None, None),  # v0.3.0
    ("GPT OSS 120B", "GB300", "NeMo 26.02.01", "attn_moe", None, None),  # v0.3.1
    ("GPT OSS 120B", "GB300", "NeMo 26.04", "attn_moe", None, "attn_moe"),  # v0.4.2
    ("GPT OSS 120B", "GB300", "NeMo 26.04.01", "attn_moe", None, "attn_moe"),  # v0.4.2
    ("GPT OSS 120B", "GB300", "NeMo 26.06", "attn_moe", None, "full"),  # v0.5.1
    ("GPT OSS 120B", "GB300", "NeMo 26.06.01", "attn_moe", None, "full"),  # v0.5.1
    ("GPT OSS 120B", "GB300", "NeMo 26.08", None, None, "full"),  # v0.6.0
    ("GPT OSS 120B", "H100", "NeMo 25.11", "none", None, None),  # v0.2.0
    ("GPT OSS 120B", "H100", "NeMo 26.02", "none", None, None),  # v0.3.0
    ("GPT OSS 120B", "H100", "NeMo 26.02.01", "none", None, None),  # v0.3.1
    ("GPT OSS 120B", "H100", "NeMo 26.04", "none", "none", None),  # v0.4.2
    ("GPT OSS 120B", "H100", "NeMo 26.04.01", "none", "none", None),  # v0.4.2
    ("GPT OSS 120B", "H100", "NeMo 26.06", "none", "none", None),  # v0.5.1
    ("GPT OSS 120B", "H100", "NeMo 26.06.01", "none", "none", None),  # v0.5.1
    ("Qwen3_235B_a22B", "B200", "NeMo 25.11", "none", "none", "none"),  # v0.2.0
    ("Qwen3_235B_a22B", "B200", "NeMo 26.02", "none", "none", "none"),  # v0.3.0
    ("Qwen3_235B_a22B", "B200", "NeMo 26.02.01", "none", "none", "none"),  # v0.3.1
    ("Qwen3_235B_a22B", "B200", "NeMo 26.04", "none", "none", "none"),  # v0.4.2
    ("Qwen3_235B_a22B", "B200", "NeMo 26.04.01", "none", "none", "none"),  # v0.4.2
    ("Qwen3_235B_a22B", "B200", "NeMo 26.06", "none", "none", "full"),  # v0.5.1
    ("Qwen3_235B_a22B", "B200", "NeMo 26.06.01", "none", "none", "full"),  # v0.5.1
    ("Qwen3_235B_a22B", "B300", "NeMo 26.02", "none", "none", "none"),  # v0.3.0
    ("Qwen3_235B_a22B", "B300", "NeMo 26.02.01", "none", "none", "none"),  # v0.3.1
    ("Qwen3_235B_a22B", "B300", "NeMo 26.04", "none", "none", "none"),  # v0.4.2
    ("Qwen3_235B_a22B", "B300", "NeMo 26.04.01", "none", "none", "none"),  # v0.4.2
    ("Qwen3_235B_a22B", "B300", "NeMo 26.06", "none", "none", "full"),  # v0.5.1
    ("Qwen3_235B_a22B", "B300", "NeMo 26.06.01", "none", "none", "full"),  # v0.5.1
    ("Qwen3_235B_a22B", "GB200", "NeMo 25.11", "attn_moe", "attn_moe", "attn_moe"),  # v0.2.0
    ("Qwen3_235B_a22B", "GB200", "NeMo 26.02", "attn_moe", "attn_moe", "attn_moe"),  # v0.3.0
    ("Qwen3_235B_a22B", "GB200", "NeMo 26.02.01", "attn_moe", "attn_moe", "attn_moe"),  # v0.3.1
    ("Qwen3_235B_a22B", "GB200", "NeMo 26.04", "attn_moe", "attn_moe", "attn_moe"),  # v0.4.2
    ("Qwen3_235B_a22B", "GB200", "NeMo 26.04.01", "attn_moe", "attn_moe", "attn_moe"),  # v0.4.2
    ("Qwen3_235B_a22B", "GB200", "NeMo 26.06", "attn_moe", "attn_moe", "full"),  # v0.5.1
    ("Qwen3_235B_a22B", "GB200", "NeMo 26.06.01", "attn_moe", "attn_moe", "full"),  # v0.5.1
    ("Qwen3_235B_a22B", "GB200", "NeMo 26.08", None, None, "full"),  # v0.6.0
    ("Qwen3_235B_a22B", "GB300", "NeMo 25.11", "moe", "moe", "moe"),  # v0.2.0
    ("Qwen3_235B_a22B", "GB300", "NeMo 26.02", "moe", "attn_moe", "attn_moe"),  # v0.3.0
    ("Qwen3_235B_a22B", "GB300", "NeMo 26.02.01", "attn_moe", "attn_moe", "attn_moe"),  # v0.3.1
    ("Qwen3_235B_a22B", "GB300", "NeMo 26.04", "attn_moe", "attn_moe", "attn_moe"),  # v0.4.2
    ("Qwen3_235B_a22B", "GB300", "NeMo 26.04.01", "attn_moe", "attn_moe", "attn_moe"),  # v0.4.2
    ("Qwen3_235B_a22B", "GB300", "NeMo 26.06", "attn_moe", "attn_moe", "full"),  # v0.5.1
    ("Qwen3_235B_a22B", "GB300", "NeMo 26.06.01", "attn_moe", "attn_moe", "full"),  # v0.5.1
    ("Qwen3_235B_a22B", "GB300", "NeMo 26.08", None, None, "full"),  # v0.6.0
    ("Qwen3_235B_a22B", "H100", "NeMo 25.11", "none", "none", None),  # v0.2.0
    ("Qwen3_235B_a22B", "H100", "NeMo 26.02", "none", "none", None),  # v0.3.0
    ("Qwen3_235B_a22B", "H100", "NeMo 26.02.01", "none", "none", None),  # v0.3.1
    ("Qwen3_235B_a22B", "H100", "NeMo 26.04", "none", "none", None),  # v0.4.2
    ("Qwen3_235B_a22B", "H100", "NeMo 26.04.01", "none", "none", None),  # v0.4.2
    ("Qwen3_235B_a22B", "H100", "NeMo 26.06", "none", "none", None),  # v0.5.1
    ("Qwen3_235B_a22B", "H100", "NeMo 26.06.01", "none", "none", None),  # v0.5.1
    ("Qwen3_30B_a3B", "B200", "NeMo 25.11", "moe", "moe", "moe"),  # v0.2.0
    ("Qwen3_30B_a3B", "B200", "NeMo 26.02", "moe", "moe", "moe"),  # v0.3.0
    ("Qwen3_30B_a3B", "B200", "NeMo 26.02.01", "attn_moe", "attn_moe", "attn_moe"),  # v0.3.1
    ("Qwen3_30B_a3B", "B200", "NeMo 26.04", "attn_moe", "attn_moe", "attn_moe"),  # v0.4.2
    ("Qwen3_30B_a3B", "B200", "NeMo 26.04.01", "attn_moe", "attn_moe", "attn_moe"),  # v0.4.2
    ("Qwen3_30B_a3B", "B200", "NeMo 26.06", "attn_moe", "attn_moe", "full"),  # v0.5.1
    ("Qwen3_30B_a3B", "B200", "NeMo 26.06.01", "attn_moe", "attn_moe", "full"),  # v0.5.1
    ("Qwen3_30B_a3B", "B300", "NeMo 26.02", "moe", "moe", "moe"),  # v0.3.0
    ("Qwen3_30B_a3B", "B300", "NeMo 26.02.01", "moe", "moe", "moe"),  # v0.3.1
    ("Qwen3_30B_a3B", "B300", "NeMo 26.04", "moe", "moe", "moe"),  # v0.4.2
    ("Qwen3_30B_a3B", "B300", "NeMo 26.04.01", "moe", "moe", "moe"),  # v0.4.2
    ("Qwen3_30B_a3B", "B300", "NeMo 26.06", "moe", "moe", "full"),  # v0.5.1
    ("Qwen3_30B_a3B", "B300", "NeMo 26.06.01", "moe", "moe", "full"),  # v0.5.1
    ("Qwen3_30B_a3B", "GB200", "NeMo 25.11", "attn_moe", "attn_moe", "moe"),  # v0.2.0
    ("Qwen3_30B_a3B", "GB200", "NeMo 26.02", "attn_moe", "attn_moe", "moe"),  # v0.3.0
    ("Qwen3_30B_a3B", "GB200", "NeMo 26.02.01", "attn_moe", "attn_moe", "moe"),  # v0.3.1
    ("Qwen3_30B_a3B", "GB200", "NeMo 26.04", "attn_moe", "attn_moe", "moe"),  # v0.4.2
    ("Qwen3_30B_a3B", "GB200", "NeMo 26.04.01", "attn_moe", "attn_moe", "moe"),  # v0.4.2
    ("Qwen3_30B_a3B", "GB200", "NeMo 26.06", "attn_moe", "attn_moe", "full"),  # v0.5.1
    ("Qwen3_30B_a3B", "GB200", "NeMo 26.06.01", "attn_moe", "attn_moe", "full"),  # v0.5.1
    ("Qwen3_30B_a3B", "GB200", "NeMo 26.08", None, None, "full"),  # v0.6.0
    ("Qwen3_30B_a3B", "GB300", "NeMo 25.11", "moe", "moe", "moe"),  # v0.2.0
    ("Qwen3_30B_a3B", "GB300", "NeMo 26.02", "moe", "moe", "moe"),  # v0.3.0
    ("Qwen3_30B_a3B", "GB300", "NeMo 26.02.01", "moe", "moe", "moe"),  # v0.3.1
    ("Qwen3_30B_a3B", "GB300", "NeMo 26.04", "moe", "moe", "moe"),  # v0.4.2
    ("Qwen3_30B_a3B", "GB300", "NeMo 26.04.01", "moe", "moe", "moe"),  # v0.4.2
    ("Qwen3_30B_a3B", "GB300", "NeMo 26.06", "moe", "moe", "full"),  # v0.5.1
    ("Qwen3_30B_a3B", "GB300", "NeMo 26.06.01", "moe", "moe", "full"),  # v0.5.1
    ("Qwen3_30B_a3B", "GB300", "NeMo 26.08", None, None, "full"),  # v0.6.0
    ("Qwen3_30B_a3B", "H100", "NeMo 25.11", "moe", "none", None),  # v0.2.0
    ("Qwen3_30B_a3B", "H100", "NeMo 26.02", "moe", "none", None),  # v0.3.0
    ("Qwen3_30B_a3B", "H100", "NeMo 26.02.01", "moe", "none", None),  # v0.3.1
    ("Qwen3_30B_a3B", "H100", "NeMo 26.04", "moe", "none", None),  # v0.4.2
    ("Qwen3_30B_a3B", "H100", "NeMo 26.04.01", "moe", "none", None),  # v0.4.2
    ("Qwen3_30B_a3B", "H100", "NeMo 26.06", "moe", "none", None),  # v0.5.1
    ("Qwen3_30B_a3B", "H100", "NeMo 26.06.01", "moe", "none", None),  # v0.5.1
)
RECIPE_CUDA_GRAPHS: dict[tuple[str, str, str, str], str] = {
    (m, g, c, fp8): mode
    for m, g, c, *modes in _ROWS
    for fp8, mode in zip(("none", "tensorwise", "mxfp8"), modes, strict=True)
    if mode is not None
}
RECIPE_CUDA_GRAPHS.update(
    {  # cac49dcd7 qwen3_30b_a3b_llm_pretrain.yaml perf_matrix (module doc); the token-drop rows' recipe is not stated
        # in the table: tensorwise (nemo_runs.RECIPE["not stated in table"])
        ("Qwen3_30B_a3B (tokendrop)", "GB200", "NeMo 25.09", "tensorwise"): "full",
        ("Qwen3_30B_a3B (tokendrop)", "B200", "NeMo 25.09", "tensorwise"): "full",
        ("Qwen3_30B_a3B (tokendrop)", "H100", "NeMo 25.09", "tensorwise"): "none",
    }
)


def recipe_cuda_graphs(model: str, gpu: str, container: str, fp8: str) -> str:
    """train.cuda_graphs of one summary row: the table's value, "none" where it is silent (module doc)."""
    return RECIPE_CUDA_GRAPHS.get((model, gpu, container, fp8), "none")
