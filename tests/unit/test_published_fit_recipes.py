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


def test_te_cross_entropy_keeps_the_bf16_logits_only():
    """train.cross_entropy_fusion="te" (Transformer Engine's parallel_cross_entropy, transformer_engine/pytorch/
    cross_entropy.py @ 5671fd36: the gradient is written into the bf16 logits, which are all it saves) against
    Megatron-Core's unfused / "native" loss (fp32 exp_logits, megatron/core/tensor_parallel/cross_entropy.py and
    fusions/fused_cross_entropy.py @ 55ac7082): Llama 3 70B (vocab 128,256) at mbs 2 x seq 8192, tp 1, pp 1 keeps
    16,384 x 128,256 logits: 2 bytes each under "te", 4 otherwise; "te" also leaves no fp32 logits block cached
    (allocator_reserved - allocated loses the reserved.py LOGITS_CACHED share of the fp32 block). Megatron-Bridge rows
    run "te" (scripts/performance/utils/overrides.py @ v0.3.1 `cross_entropy_fusion_impl = "te"`), NeMo 24.07 rows
    "native"; the Megatron export writes --cross-entropy-loss-fusion --cross-entropy-fusion-impl te."""
    import dataclasses

    import pytest

    from autotune.core.errors import SpecError
    from autotune.core.plan_arrays import arrays_from_plans
    from autotune.core.types import ParallelPlan, TrainSpec
    from autotune.fitting.nemo_runs import load_nemo_rows
    from autotune.interop import render
    from autotune.predict.memory import memory_arrays
    from autotune.spec.config import load_config

    cfg = load_config(["model=llama-3.1-70b", "cluster=gb200-nvl72", "train.framework=megatron", "train.seq_len=8192"])
    arr = arrays_from_plans([ParallelPlan(dp=64, zero_stage=3, micro_batch_size=2, grad_accum_steps=2)])
    mem = {}
    for impl in ("none", "native", "te"):
        train = dataclasses.replace(cfg.train, global_batch_size=256, cross_entropy_fusion=impl)
        mem[impl] = {k: float(v[0]) for k, v in memory_arrays(arr, cfg.model, train, cfg.cluster).items()}
    logits = 16384 * 128256
    assert mem["none"]["logits"] == mem["native"]["logits"] == pytest.approx(4 * logits)
    assert mem["te"]["logits"] == pytest.approx(2 * logits)
    assert mem["none"]["allocated"] - mem["te"]["allocated"] == pytest.approx(2 * logits)
    excess = {k: m["allocator_reserved"] - m["allocated"] for k, m in mem.items()}
    assert excess["te"] < excess["none"] - 0.4 * 4 * logits * 4 / 10  # the cached fp32 block (4/(8+c) share) is gone

    train = {r.row: r.train for r in load_nemo_rows()[0]}
    assert train[110].cross_entropy_fusion == "te" and train[10].cross_entropy_fusion == "native"
    with pytest.raises(SpecError, match="cross_entropy_fusion"):
        TrainSpec(seq_len=8192, global_batch_size=8, cross_entropy_fusion="te")  # bench_model runs its own loss
    te = dataclasses.replace(cfg.train, global_batch_size=256, cross_entropy_fusion="te")
    argv = render(
        "megatron",
        cfg.model,
        te,
        cfg.cluster,
        ParallelPlan(dp=64, zero_stage=1, micro_batch_size=2, grad_accum_steps=2),
    )
    assert "--cross-entropy-loss-fusion --cross-entropy-fusion-impl te" in " ".join(argv.split())


def test_issue_26_rows_that_ran_are_predicted_to_fit():
    """Rows (0-based, the summary CSV) that ran and were refused before issue 26's mechanisms, at the default 5%
    space.memory_headroom (benchmarks/published_fit.py `score`): 110 (Llama 3 70B, 64 GB200, Megatron-FSDP, 40
    layers' activations offloaded, mbs 2: the TE loss keeps 3.9 instead of 7.8 GiB of logits) and the 26.02.01 rows
    198, 200, 206 under their release's recipe layout (RECIPE_LAYOUT). None of them may need more than the device."""
    import importlib.util
    from pathlib import Path

    from autotune.fitting.published_runs import load_nemo

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "published_fit.py"
    spec = importlib.util.spec_from_file_location("published_fit", path)
    published_fit = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(published_fit)

    lays = {lay.row: lay for lay in load_nemo()[0]}
    for row in ("110", "198", "200", "206"):
        got = published_fit.score(lays[row])
        assert got["fits"], (row, got["reason"])
        assert got["reserved_gib"] <= got["usable_gib"]


def test_torchao_rows_run_torchtitans_launcher_allocator_setting():
    """The torchao B200 rows (moe_blackwell r010-r018, torchtitan) were launched through torchao's llama3.sh /
    llama4.sh, which call torchtitan's run_train.sh: PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True"
    (published_runs.TORCHTITAN_LAUNCH). The Megatron rows keep theirs (MB_EXPANDABLE, else the preset's: None)."""
    from autotune.fitting.published_runs import MB_EXPANDABLE, load_moe_blackwell

    lays = load_moe_blackwell()[0]
    titan = [lay for lay in lays if lay.framework == "torchtitan"]
    assert {lay.row for lay in titan} >= {f"r0{i}" for i in range(10, 19)}
    assert all(lay.expandable_segments is True for lay in titan)
    megatron = [lay for lay in lays if lay.framework == "megatron"]
    assert megatron and all(lay.expandable_segments is (True if lay.row in MB_EXPANDABLE else None) for lay in megatron)
