"""train.pp_layout (Megatron's --pipeline-model-parallel-layout) and train.mtp_num_layers (--mtp-num-layers): the
parser against Megatron's own example, the ranks' layers and MTP modules, the MTP FLOPs against the published
DeepSeek-V3 rows, the memory an MTP module adds, the rules, the NeMo mapping and the export."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from autotune.core.errors import AutotuneError, SpecError
from autotune.core.plan_arrays import arrays_from_plans
from autotune.core.pp_layout import Stage, check_pp_layout, parse_pp_layout, rank_counts
from autotune.core.types import ParallelPlan, TrainSpec
from autotune.fitting.run_types import DATA
from autotune.layouts.rules import rejections
from autotune.predict.memory import memory_arrays
from autotune.predict.perf import train_flops_per_token
from autotune.predict.rank_params import rank_params
from autotune.spec.config import load_config

DSV3 = "Et*4|(t*4|)*14tmL"  # Megatron-Bridge perf_recipes/deepseek/gb300/deepseek_v3.py @ 067f987d, 16 stages
MEGATRON = TrainSpec(seq_len=4096, global_batch_size=256, framework="megatron")


def test_parser_matches_megatrons_docstring_example():
    """pipeline_parallel_layer_layout.py @ core_v0.16.1 parse_str_to_list: "Ettt|(tt|)*29,m|L" ->
    [["E","t","t","t"]] + [["t","t"]]*29 + [["m"],["L"]]."""
    st = parse_pp_layout("Ettt|(tt|)*29,m|L")
    assert len(st) == 32
    assert st[0] == Stage(3, 0, True, False) and st[1:30] == (Stage(2, 0, False, False),) * 29
    assert st[30] == Stage(0, 1, False, False) and st[31] == Stage(0, 0, False, True)


def test_deepseek_layout_ranks():
    """16 stages of 61 layers: E + 4, fourteen of 4, 1 + MTP + loss. pp 16: rank 0 holds 4, rank 15 holds 1 and the
    MTP module; pp 2 x vpp 8: rank 0 the even stages (8 x 4 = 32), rank 1 the odd ones (7 x 4 + 1 = 29) and MTP."""
    st = check_pp_layout(DSV3, 61, 1)
    assert [len(rank_counts(st, 16, r)[0]) for r in (0, 1, 15)] == [4, 4, 1]
    assert rank_counts(st, 16, 15)[1] == 1 and rank_counts(st, 16, 0)[1] == 0
    ids0, m0 = rank_counts(st, 2, 0)
    ids1, m1 = rank_counts(st, 2, 1)
    assert (len(ids0), m0, len(ids1), m1) == (32, 0, 29, 1)
    assert ids0[:4] == [0, 1, 2, 3] and ids1[:4] == [4, 5, 6, 7] and ids1[-1] == 60  # global layer ids
    # NeMo 25.09's H100 layout at pp 8 x vpp 4: rank 0 = 1 + 2 + 2 + 2, rank 7 = 2 + 2 + 2 + 0 and the MTP stage
    h100 = check_pp_layout("Et|(tt|)*30mL", 61, 1)
    assert (len(rank_counts(h100, 8, 0)[0]), rank_counts(h100, 8, 7)) == (
        7,
        (list(range(13, 15)) + [29, 30, 45, 46], 1),
    )


@pytest.mark.parametrize(
    "text, layers, mtp, match",
    [
        ("Et*4|(t*4|)*14tL", 61, 1, "places 0 MTP modules"),
        (DSV3, 60, 1, "places 61 decoder layers"),
        ("tE*4|(t*4|)*14tmL", 61, 1, "embedding .E. must come first"),
        ("Et*4|(t*4|)*14mtL", 61, 1, "decoder layers .t. must come before"),
        ("Et*4|(t*4|)*14txL", 61, 0, "unknown layer character 'x'"),
    ],
)
def test_layout_errors_are_one_line(text, layers, mtp, match):
    with pytest.raises(SpecError, match=match):
        check_pp_layout(text, layers, mtp)


def test_mtp_flops_against_the_published_deepseek_rows():
    """Megatron-Bridge's performance summary (benchmarks/data/measured/nemo_megatron_bridge_performance_summary.csv):
    model TFLOP/s over tokens/s is 249.7 GFLOP per token on the DeepSeek-V3 "(w/o MTP)" rows and 260.0 on every
    other DeepSeek-V3 row (seq 4096). One MTP module (a MoE layer, eh_proj, norms, the head again) in Megatron's count
    (training.py num_floating_point_operations) gives that ratio."""
    df = pd.read_csv(DATA / "nemo_megatron_bridge_performance_summary.csv", dtype=str)
    ds = df[df.model.str.startswith("DeepSeekV3")]
    gflop = pd.to_numeric(ds.model_tflops_per_gpu) * 1e3 / pd.to_numeric(ds.tokens_per_sec_per_gpu)
    without = ds.model.str.contains("w/o MTP")
    assert gflop[without].between(249.0, 250.0).all() and gflop[~without].between(259.5, 260.7).all()
    cfg = load_config(["model=deepseek-v3"])
    base = train_flops_per_token(cfg.model, MEGATRON)
    mtp = train_flops_per_token(cfg.model, dataclasses.replace(MEGATRON, mtp_num_layers=1))
    assert base / 1e9 == pytest.approx(249.7, rel=0.005)
    assert mtp / base == pytest.approx(260.0 / 249.7, rel=0.001)


def test_an_mtp_module_on_the_last_rank():
    """Llama-3.1-8B, tp 1, pp 4: one MTP module puts on the last rank one more layer, eh_proj (2h x h), three
    RMSNorms (3h) and an embedding copy (V x h) (gpt_model.py @ core_v0.16.1: the MTP stage builds `self.embedding`);
    the first rank is untouched. At pp 1 the loss rank keeps two heads' logits."""
    m = load_config(["model=llama-3.1-8b"]).model
    h, V = m.hidden_size, m.vocab_size
    a, b = rank_params(m, 1, 4, 1), rank_params(m, 1, 4, 1, mtp_num_layers=1)
    assert b["last"] - a["last"] == m.layer_params() + 2 * h * h + 3 * h + V * h
    assert b["first"] == a["first"] and int(b["layers_last"]) == int(a["layers_last"]) + 1
    plan = ParallelPlan(dp=8, zero_stage=1, micro_batch_size=1, grad_accum_steps=1)
    cl = load_config(["cluster=h100-sxm-80gb"]).cluster
    train = dataclasses.replace(MEGATRON, global_batch_size=8)
    one = memory_arrays(arrays_from_plans([plan]), m, train, cl)["logits"][0]
    two = memory_arrays(arrays_from_plans([plan]), m, dataclasses.replace(train, mtp_num_layers=1), cl)["logits"][0]
    assert two == pytest.approx(2 * one)


def test_layout_places_the_layers():
    """DeepSeek-V3 at pp 2 x vpp 8 under the recipe's layout: rank 0 holds 32 layers (3 dense + 29 MoE), rank 1 29
    + the MTP module (an MoE layer): 30 layers, 30 MoE; the even split would give 30 / 31."""
    m = load_config(["model=deepseek-v3"]).model
    st = parse_pp_layout(DSV3)
    even = rank_params(m, 1, 2, 8, 32)
    lay = rank_params(m, 1, 2, 8, 32, mtp_num_layers=1, layout=st)
    assert (int(even["layers_first"]), int(even["layers_last"])) == (30, 31)
    assert (int(lay["layers_first"]), int(lay["moe_layers_first"])) == (32, 29)
    assert (int(lay["layers_last"]), int(lay["moe_layers_last"]), int(lay["mtp_last"])) == (30, 30, 1)


def test_rules_and_config_checks():
    cfg = load_config(["model=deepseek-v3", "cluster=gb300-nvl72"])
    train = dataclasses.replace(MEGATRON, global_batch_size=4096, mtp_num_layers=1, pp_layout=DSV3)
    plan = ParallelPlan(dp=128, pp=2, vpp=8, ep=32, zero_stage=1, grad_accum_steps=32, pp_schedule="interleaved_1f1b")
    ids, _ = rejections(arrays_from_plans([plan]), cfg.model, train, cfg.cluster)
    assert ids[0] is None
    ids, why = rejections(arrays_from_plans([dataclasses.replace(plan, vpp=4)]), cfg.model, train, cfg.cluster)
    assert ids[0] == "pp_layout_stages" and "16 stages; pp*vpp=8" in why[0]
    split = dataclasses.replace(plan, pp_split_embedding=True)
    assert rejections(arrays_from_plans([split]), cfg.model, train, cfg.cluster)[0][0] == "pp_layout_no_split"
    with pytest.raises(SpecError, match="mtp_num_layers=1 with train.framework=torchtitan"):
        TrainSpec(seq_len=4096, global_batch_size=8, framework="torchtitan", mtp_num_layers=1)
    with pytest.raises(AutotuneError, match="places 61 decoder layers"):  # exit 2 in the CLI
        load_config(["model=llama-3.1-8b", "train.framework=megatron", f"train.pp_layout='{DSV3}'"])


def test_nemo_rows_run_the_recipes_mtp_and_layout():
    from autotune.fitting.nemo_runs import load_nemo_rows

    runs, skipped = load_nemo_rows()
    ds = {r.row: r for r in runs if r.model.name == "deepseek-v3"}
    assert not [s for s in skipped if "MTP" in s.reason and "DeepSeekV3" in s.reason]
    df = pd.read_csv(DATA / "nemo_megatron_bridge_performance_summary.csv", dtype=str)
    for row, run in ds.items():
        assert run.train.mtp_num_layers == (0 if "w/o MTP" in df.model[row] else 1), row
        stages = run.plan.pp * run.plan.vpp
        if (run.cluster, run.plan.pp, run.plan.vpp) == ("h100-sxm-80gb", 8, 4):
            assert run.train.pp_layout == "Et|(tt|)*30mL"
        elif stages == 16:
            assert run.train.pp_layout == ("Et*4|(t*4|)*14tmL" if run.train.mtp_num_layers else "Et*4|(t*4|)*14tL")
    kimi = [r for r in runs if r.model.name == "kimi-k2"]
    assert kimi and all(r.train.pp_layout == "Et*4|(t*4|)*14tL" and not r.train.mtp_num_layers for r in kimi)


def test_megatron_export_writes_both():
    from autotune.interop import render

    cfg = load_config(["model=deepseek-v3", "cluster=gb300-nvl72"])
    train = dataclasses.replace(MEGATRON, global_batch_size=4096, mtp_num_layers=1, pp_layout=DSV3)
    plan = ParallelPlan(dp=128, pp=2, vpp=8, ep=32, zero_stage=1, grad_accum_steps=32, pp_schedule="interleaved_1f1b")
    text = render("megatron", cfg.model, train, cfg.cluster, plan)
    assert "--mtp-num-layers 1" in text and DSV3 in text


def test_interleaved_chunks_of_unequal_size():
    """schedule.interleaved_chunk_weight, by hand from Megatron's order (virtual micro-batch v on chunk
    (v mod pp vpp) div pp; W + 1 = (pp - r - 1) 2 + (vpp - 1) pp + 1 held at the peak): Llama 3.1 405B, PP16 VP4, the
    embedding and loss accounted: rank 0's chunks 1, 2, 2, 2 hold 31 x 1 + 16 x 6 = 127 layer-micro-batches against
    79 x 7/4 = 138.25; torchtitan's 126 layers over PP8 VP2 (7, 8, ..., 8, 7), rank 7 at m = 8: 8 x 8 + 1 x 7 = 71
    against 9 x 15/2 = 67.5; equal chunks and 1F1B: 1."""
    import numpy as np

    from autotune.core.plan_arrays import SCHEDULE_CODE
    from autotune.predict.schedule import chunk_layers_of_rank, interleaved_chunk_weight

    inter, one = SCHEDULE_CODE["interleaved_1f1b"], SCHEDULE_CODE["1f1b"]
    c405 = chunk_layers_of_rank(126, np.array([16]), np.array([4]), np.array([0]), True, True)
    assert [int(c[0]) for c in c405] == [1, 2, 2, 2]
    assert float(interleaved_chunk_weight(c405, 16, 4, 384, inter, 0)[0]) == pytest.approx(127 / 138.25)
    ctt = chunk_layers_of_rank(126, np.array([8]), np.array([2]), np.array([7]))
    assert [int(c[0]) for c in ctt] == [8, 7]
    assert float(interleaved_chunk_weight(ctt, 8, 2, 8, inter, 7)[0]) == pytest.approx(71 / 67.5)
    assert float(interleaved_chunk_weight([np.array([2])] * 4, 16, 4, 384, inter, 0)[0]) == 1.0
    assert float(interleaved_chunk_weight(c405, 16, 4, 384, one, 0)[0]) == 1.0


def test_estimate_names_the_layout_and_mtp(capsys):
    """The layout label carries plan fields only; estimate's title names the job's MTP modules and layout."""
    from autotune.cli.main import main

    args = ["estimate", "--gpus", "256", "model=deepseek-v3", "cluster=gb300-nvl72", "train.framework=megatron"]
    args += ["plan.pp=2", "plan.vpp=8", "plan.ep=32", "plan.zero_stage=1", "plan.micro_batch_size=2"]
    args += [
        "train.seq_len=4096",
        "train.global_batch_size=4096",
        "train.mtp_num_layers=1",
        f"train.pp_layout='{DSV3}'",
    ]
    assert main(args) == 0
    title = " ".join(capsys.readouterr().out.split())
    assert "1 MTP module(s), counted as a layer on their rank" in title and f"layout {DSV3}" in title
