"""The MoE recipe of each Megatron-Bridge release for the NeMo performance-summary MXFP8 rows of Qwen3-30B-A3B,
Qwen3-235B-A22B and DeepSeek-V3 on Blackwell: the token dispatcher, the EP communication overlap and the CUDA graphs
the row's own release ran, where they differ from the 067f987d recipes nemo_recipes.DISPATCHER / EP_OVERLAP_ON read.

Read off NVIDIA-NeMo/Megatron-Bridge scripts/performance/configs/{qwen3,qwen}/*workload_base_configs.py and
configs/deepseek/*workload_base_configs.py at each release tag (the container -> release pairing of
nemo_cuda_graphs.py: NeMo 25.11 v0.2.0, 26.02 v0.3.0, 26.02.01 v0.3.1, 26.04 / 26.04.01 v0.4.2, 26.06 / 26.06.01
v0.5.1, 26.08 v0.6.0), fields moe_flex_dispatcher_backend, moe_a2a_overlap, cuda_graph_impl / cuda_graph_scope:
- v0.2.0 - v0.4.2: every FP8-MX config of these models on B200 / B300 / GB200 / GB300 sets moe_a2a_overlap=False
  (QWEN3_30B_A3B_PRETRAIN_CONFIG_{GB300,GB200,B300,B200}_FP8_MX_V1, QWEN3_235B_A22B_PRETRAIN_CONFIG_{GB300,GB200}_
  FP8_MX_V2, DEEPSEEK_V3_PRETRAIN_CONFIG_{GB300,GB200,B300}_FP8_MX_V1/V2, the pp16 / ep8 B200 DeepSeek-V3 V1), with
  two exceptions: QWEN3_235B_A22B_PRETRAIN_CONFIG_B300_FP8_MX_V2 @ v0.3.0 (pp8 vp4 ep8 mbs1: moe_a2a_overlap=True,
  no flex backend) and DEEPSEEK_V3_PRETRAIN_CONFIG_B200_FP8_MX_V2 @ v0.4.2 (pp8 vp2 ep32, DeepEP, overlap on: what
  067f987d maps already);
- v0.5.1 (qwen3_workload_base_configs.py, deepseek_workload_base_configs.py, "perf optimizations" of the MXFP8
  recipes): the same configs add moe_a2a_overlap=True with cuda_graph_impl="full_iteration" (+ cutedsl_fused_grouped_mlp
  and fp8_dot_product_attention, which the model does not price: see the report / NOT PRICED below). 067f987d keeps
  them, so EP_OVERLAP_ON holds from 26.06 on and, before it, overlaps the rows never ran.
Dispatcher where the release names another backend than 067f987d: Qwen3-30B-A3B B200 FP8-MX @ v0.2.0 / v0.3.0 no flex
backend (alltoall; HybridEP from v0.3.1); Qwen3-235B-A22B B300 FP8-MX @ v0.3.0 none (alltoall; the 26.02.01 row keeps
v0.3.0's pp8 vp4 mbs1 layout, where v0.3.1's config is pp8 ep8 DeepEP without virtual stages: v0.3.0's recipe taken);
Qwen3-235B-A22B B200 FP8-MX @ v0.3.0 and v0.4.2 none (alltoall), @ v0.3.1 DeepEP (HybridEP from v0.5.1); DeepSeek-V3 B200 FP8-MX pp16
ep8 @ v0.3.0 - v0.4.2 HybridEP (V1 / V2 configs; 067f987d's pp16 config names none).
CUDA graphs of DeepSeek-V3 FP8-MX (nemo_cuda_graphs.py leaves DeepSeek unmapped), only where the row's layout is its
release's config: GB200 (pp4 vp4 ep64 mbs1 in every release) v0.2.0 scope [moe_router, moe_preprocess] -> "moe",
v0.3.0 - v0.4.2 [attn, moe_router, moe_preprocess] -> "attn_moe", v0.5.1 on full_iteration -> "full"; GB300 pp2 vp8
ep32: v0.3.0 - v0.4.2 cuda_graph_impl None -> "none", v0.5.1 on (mbs1) "full"; B300 pp8 mbs2 @ v0.4.2 (V2) and B200
pp8 vp2 ep32 @ v0.4.2 (V2) "attn_moe".

NOT PRICED (no term yet): fp8_dot_product_attention (Transformer Engine FP8 attention) and cutedsl_fused_grouped_mlp
(CuTe-DSL grouped GEMM with the SwiGLU and the MXFP8 quantisation fused) of the v0.5.1 MXFP8 recipes, the paged
stashing / expert-rank capacity factor 1.5 they set with full-iteration graphs (qwen3_llm_pretrain.py
set_full_iter_cg_configs @ v0.5.1), DeepSeek-V3's per-release recompute modules.
"""

from __future__ import annotations

MOE_MODELS = ("Qwen3_30B_a3B", "Qwen3_235B_a22B", "DeepSeekV3", "DeepSeekV3 (w/o MTP)")
BLACKWELL = ("B200", "B300", "GB200", "GB300")
# containers whose release (v0.2.0 - v0.4.2) runs the MXFP8 MoE recipes without the EP overlap (module doc)
BEFORE_FULL_ITERATION = ("NeMo 25.11", "NeMo 26.02", "NeMo 26.02.01", "NeMo 26.04", "NeMo 26.04.01")
FULL_ITERATION = ("NeMo 26.06", "NeMo 26.06.01", "NeMo 26.08")
# (model, gpu, container, (pp, vp, ep)) -> plan.moe_dispatcher of that release's config (module doc)
_DS = ("DeepSeekV3", "DeepSeekV3 (w/o MTP)")
RELEASE_DISPATCHER = {
    **{("Qwen3_30B_a3B", "B200", c, (1, 1, 8)): "alltoall" for c in ("NeMo 25.11", "NeMo 26.02")},
    **{("Qwen3_235B_a22B", "B300", c, (8, 4, 8)): "alltoall" for c in ("NeMo 26.02", "NeMo 26.02.01")},
    **{("Qwen3_235B_a22B", "B200", c, (8, 1, 8)): "alltoall" for c in ("NeMo 26.02", "NeMo 26.04", "NeMo 26.04.01")},
    ("Qwen3_235B_a22B", "B200", "NeMo 26.02.01", (8, 1, 8)): "deepep",  # v0.3.1 B200_FP8_MX_V2: DeepEP
    **{(m, "B200", c, (16, 1, 8)): "hybridep" for m in _DS for c in ("NeMo 26.02", "NeMo 26.02.01", "NeMo 26.04")},
}
# (model, gpu, container, (pp, vp, ep)) -> plan.ep_overlap where the release's config sets moe_a2a_overlap=True
# before v0.5.1 (module doc)
RELEASE_EP_OVERLAP = {("Qwen3_235B_a22B", "B300", c, (8, 4, 8)) for c in ("NeMo 26.02", "NeMo 26.02.01")} | {
    (m, "B200", "NeMo 26.04.01", (8, 2, 32)) for m in _DS
}
# (model, gpu, container, (pp, vp, ep), mbs) -> train.cuda_graphs of DeepSeek-V3 FP8-MX (module doc)
DEEPSEEK_CUDA_GRAPHS = {
    **{(m, "GB200", "NeMo 25.11", (4, 4, 64), 1): "moe" for m in _DS},
    **{
        (m, "GB200", c, (4, 4, 64), 1): "attn_moe"
        for m in _DS
        for c in ("NeMo 26.02", "NeMo 26.02.01", "NeMo 26.04", "NeMo 26.04.01")
    },
    **{(m, "GB200", c, (4, 4, 64), 1): "full" for m in _DS for c in FULL_ITERATION},
    **{(m, "GB300", c, (2, 8, 32), 1): "full" for m in _DS for c in FULL_ITERATION},
    **{(m, "B300", "NeMo 26.04.01", (8, 1, 8), 2): "attn_moe" for m in _DS},
    **{(m, "B200", "NeMo 26.04.01", (8, 2, 32), 1): "attn_moe" for m in _DS},
}


# Outside the MXFP8 Blackwell recipes, rows whose layout is exactly their release's config, keyed by (model, gpu,
# container, plan.fp8, (pp, vp, ep)) -> (dispatcher, ep_overlap): NeMo 26.02's Qwen3-30B-A3B FP8-CS on 16 H100 (row
# pp2 vp12 ep8 mbs1 gbs1024 = QWEN3_30B_A3B_PRETRAIN_CONFIG_H100_FP8_CS_V1 @ v0.3.0: moe_flex_dispatcher_backend
# "deepep", moe_a2a_overlap=True; 067f987d's 16-GPU H100 config is pp1 ep16 HybridEP without the overlap)
RELEASE_OTHER = {("Qwen3_30B_a3B", "H100", "NeMo 26.02", "tensorwise", (2, 12, 8)): ("deepep", True)}


def release_moe_recipe(
    model: str, gpu: str, container: str, fp8: str, layout: tuple[int, int, int], mbs: int
) -> tuple[str | None, bool | None, str | None]:
    """(dispatcher, ep_overlap, cuda_graphs) of an MXFP8 MoE summary row as its own release ran it; None for each
    setting the release tables above do not state (the caller keeps the 067f987d mapping). layout = (pp, vp, ep)."""
    other = RELEASE_OTHER.get((model, gpu, container, fp8, layout))
    if other is not None:
        return other[0], other[1], None
    if fp8 != "mxfp8" or model not in MOE_MODELS or gpu not in BLACKWELL:
        return None, None, None
    dispatcher = RELEASE_DISPATCHER.get((model, gpu, container, layout))
    overlap = None
    if container in BEFORE_FULL_ITERATION:
        overlap = (model, gpu, container, layout) in RELEASE_EP_OVERLAP
    graphs = DEEPSEEK_CUDA_GRAPHS.get((model, gpu, container, layout, mbs))
    return dispatcher, overlap, graphs
