"""The NeMo MXFP8 MoE rows take their own Megatron-Bridge release's dispatcher, EP overlap and DeepSeek-V3 CUDA graphs
(autotune/fitting/nemo_releases.py). Expected values read off NVIDIA-NeMo/Megatron-Bridge
scripts/performance/configs/{qwen,deepseek}/*workload_base_configs.py at the tags named per case."""

from __future__ import annotations

from autotune.fitting.nemo_releases import release_moe_recipe
from autotune.fitting.nemo_runs import load_nemo_rows


def test_ep_overlap_arrives_with_the_full_iteration_recipes() -> None:
    # v0.4.2 QWEN3_30B_A3B_PRETRAIN_CONFIG_GB300_FP8_MX_V1: moe_a2a_overlap False; v0.5.1: True (what 067f987d keeps)
    assert release_moe_recipe("Qwen3_30B_a3B", "GB300", "NeMo 26.04", "mxfp8", (1, 1, 8), 8) == (None, False, None)
    assert release_moe_recipe("Qwen3_30B_a3B", "GB300", "NeMo 26.06", "mxfp8", (1, 1, 8), 8) == (None, None, None)
    # v0.3.0 QWEN3_235B_A22B_PRETRAIN_CONFIG_B300_FP8_MX_V2 (pp8 vp4 ep8): overlap on, no flex backend
    assert release_moe_recipe("Qwen3_235B_a22B", "B300", "NeMo 26.02", "mxfp8", (8, 4, 8), 1) == (
        "alltoall",
        True,
        None,
    )


def test_release_dispatcher_and_deepseek_graphs() -> None:
    # v0.3.0 QWEN3_30B_A3B_PRETRAIN_CONFIG_B200_FP8_MX_V1: no moe_flex_dispatcher_backend (HybridEP from v0.3.1)
    assert release_moe_recipe("Qwen3_30B_a3B", "B200", "NeMo 26.02", "mxfp8", (1, 1, 8), 1)[0] == "alltoall"
    assert release_moe_recipe("Qwen3_30B_a3B", "B200", "NeMo 26.02.01", "mxfp8", (1, 1, 8), 4)[0] is None
    # DEEPSEEK_V3_PRETRAIN_CONFIG_GB200_FP8_MX_V2: scopes attn + moe_router + moe_preprocess @ v0.4.2, full @ v0.5.1
    assert release_moe_recipe("DeepSeekV3", "GB200", "NeMo 26.04", "mxfp8", (4, 4, 64), 1)[2] == "attn_moe"
    assert release_moe_recipe("DeepSeekV3", "GB200", "NeMo 26.06", "mxfp8", (4, 4, 64), 1)[2] == "full"
    # a layout that is not its release's config keeps the 067f987d mapping
    assert release_moe_recipe("DeepSeekV3", "GB300", "NeMo 26.06", "mxfp8", (2, 8, 32), 2)[2] is None
    # the tables hold the MXFP8 recipes only
    assert release_moe_recipe("Qwen3_30B_a3B", "GB300", "NeMo 26.04", "none", (1, 1, 8), 8) == (None, None, None)


def test_summary_rows_take_their_release() -> None:
    runs, _ = load_nemo_rows()
    by_row = {r.row: r for r in runs}
    # Qwen3-30B-A3B GB300 MXFP8: 26.06 (row 80) with the EP overlap and full-iteration graphs, 26.04 (row 176) without
    assert by_row[80].plan.ep_overlap and by_row[80].train.cuda_graphs == "full"
    assert not by_row[176].plan.ep_overlap and by_row[176].train.cuda_graphs == "moe"
    assert by_row[260].plan.moe_dispatcher == "alltoall"  # B200 26.02, mbs 1
    # H100 26.02 FP8-CS, the v0.3.0 config's layout: DeepEP with the overlap
    assert (by_row[261].plan.moe_dispatcher, by_row[261].plan.ep_overlap) == ("deepep", True)
    assert by_row[168].train.cuda_graphs == "attn_moe" and by_row[75].train.cuda_graphs == "full"  # DeepSeek GB200
