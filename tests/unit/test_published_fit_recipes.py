"""What the published NeMo / Megatron-Bridge layouts ran (issue 26): the summary rows whose cells contradict their
release's recipe take the recipe's layout (autotune/fitting/nemo_recipes.py RECIPE_LAYOUT)."""

from __future__ import annotations


def test_nemo_26_02_01_rows_take_their_release_recipe_layout():
    """Rows (0-based, the summary CSV) of the NeMo 26.02.01 table whose cells contradict Megatron-Bridge r0.3.1's
    presets (scripts/performance/configs/llama/llama3_workload_base_configs.py, llama31_workload_base_configs.py @
    v0.3.1 9c9dd8489): 198 = 70B GB300 NVFP4 and 200 = 70B GB300 MXFP8 (LLAMA3_70B_PRETRAIN_CONFIG_GB300_{NVFP4,FP8_MX}
    _V2: mbs 1, TP 1, PP 4, VP 5; the cells say mbs 2 with PP 1 / PP 4 and no VP), 206 = 405B GB200 NVFP4 (_GB200_NVFP4
    _V2: TP 4, PP 16, VP 8; the cell says VP 4), 209 = 405B GB300 FP8 (_GB300_FP8_CS_V2: TP 4, CP 1; the cell says TP 2
    CP 2). The same release's other rows keep their cells (199 = 70B GB200 NVFP4: TP 2 PP 4 VP 5, mbs 1)."""
    from autotune.fitting.nemo_runs import load_nemo_rows

    runs = {r.row: r.plan for r in load_nemo_rows()[0]}

    def shape(p):
        return (p.micro_batch_size, p.tp, p.pp, p.cp, p.vpp, p.dp, p.grad_accum_steps)

    assert shape(runs[198]) == shape(runs[200]) == (1, 1, 4, 1, 5, 16, 16)  # gbs 256 = 16 x 1 x 16
    assert shape(runs[206]) == (1, 4, 16, 1, 8, 4, 384)  # gbs 1536 = 4 x 1 x 384
    assert shape(runs[209]) == (1, 4, 8, 1, 4, 8, 192)
    assert shape(runs[199]) == (1, 2, 4, 1, 5, 8, 32)
    assert runs[198].fp8 == "nvfp4" and runs[200].fp8 == "mxfp8"
