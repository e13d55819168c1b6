"""plan.tp_pp_dp_mapping: Megatron-Core's `--use-tp-pp-dp-mapping` rank order (megatron/training/initialize.py @
core_v0.16.1: 'tp-cp-ep-pp-dp' instead of 'tp-cp-ep-dp-pp'), what groups it moves between links, its rules and its
export. Figures hand-computed on the layout of NVIDIA's MLPerf v5.0 tyche_ngpu512 GB200 submission (tp 4, cp 2, pp 8,
dp 8: config_GB200_128x4x112xtp4pp8cp2_cg_dplast.sh)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from autotune.core.errors import SpecError
from autotune.core.plan_arrays import arrays_from_plans
from autotune.core.types import ParallelPlan, TrainSpec
from autotune.layouts.rules import rejections
from autotune.predict.collectives import _link, dp_group_geometry, pp_group_span
from autotune.predict.perf import perf_arrays
from autotune.spec.config import load_config

PLAN = ParallelPlan(
    dp=8, tp=4, pp=8, cp=2, vpp=8, zero_stage=1, grad_accum_steps=112, sequence_parallel=True,
    pp_schedule="interleaved_1f1b",
)  # fmt: skip
MEGATRON = TrainSpec(seq_len=8192, global_batch_size=8 * 112, framework="megatron")


def _arr(**kw):
    return arrays_from_plans([dataclasses.replace(PLAN, **kw)])


def test_group_geometry_under_both_orders():
    """Default tp-cp-ep-dp-pp: the dp*cp group spans tp*cp*dp = 64 ranks, replicas tp*cp = 8 apart; the pipeline
    spans the whole 512. Mapped tp-cp-ep-pp-dp: replicas tp*cp*pp = 64 apart over all 512; the pipeline 4*2*8 = 64."""
    span, stride = dp_group_geometry(_arr())
    assert (int(span[0]), int(stride[0]), int(pp_group_span(_arr())[0])) == (64, 8, 512)
    span, stride = dp_group_geometry(_arr(tp_pp_dp_mapping=True))
    assert (int(span[0]), int(stride[0]), int(pp_group_span(_arr(tp_pp_dp_mapping=True))[0])) == (512, 64, 64)
    # the experts' edp group: replicas ep*etp apart, ep*etp*pp apart when mapped (2 * 1 * 8 = 16)
    span, stride = dp_group_geometry(_arr(tp_pp_dp_mapping=True), np.array([2]))
    assert (int(span[0]), int(stride[0])) == (512, 16)


def test_links_on_an_nvl72_rack():
    """gb200-nvl72 (NVLink domain 72, 900 GB/s; one 50 GB/s NIC per GPU): default order, the data-parallel group
    (span 64) stays on NVLink and the pipeline p2p (span 512) crosses racks on one NIC; mapped, the reverse: the
    data-parallel ring has 72 // 64 = 1 rank per rack, so 1 NIC, and the pipeline's 64 ranks share one rack."""
    cl = load_config(["cluster=gb200-nvl72"]).cluster
    eff = cl.comm_efficiency
    for mapped, dp_bw, pp_bw in ((False, 900e9, 50e9), (True, 50e9, 900e9)):
        arr = _arr(tp_pp_dp_mapping=mapped)
        bw, _ = _link(cl, *dp_group_geometry(arr))
        assert float(bw[0]) == pytest.approx(dp_bw * eff), mapped
        bw, _ = _link(cl, pp_group_span(arr), cl.fast_domain)
        assert float(bw[0]) == pytest.approx(pp_bw * eff), mapped


def test_speed_moves_with_the_links():
    """The step's exposed data-parallel time grows with the replicas outermost; the compute does not move."""
    cfg = load_config(["cluster=gb200-nvl72", "model=llama-3.1-405b", "train.framework=megatron"])
    train = dataclasses.replace(cfg.train, seq_len=8192, global_batch_size=8 * 112)
    out = {m: perf_arrays(_arr(tp_pp_dp_mapping=m), cfg.model, train, cfg.cluster) for m in (False, True)}
    assert float(out[True]["dp_comm_s"][0]) > 10 * float(out[False]["dp_comm_s"][0])
    assert float(out[True]["compute_s"][0]) == float(out[False]["compute_s"][0])


def test_rules_megatron_only_and_not_with_megatron_fsdp():
    cfg = load_config(["model=llama-3.1-405b", "cluster=gb200-nvl72"])
    model, cl = cfg.model, cfg.cluster
    arr = _arr(tp_pp_dp_mapping=True)
    ids, reasons = rejections(arr, model, dataclasses.replace(MEGATRON, framework="torchtitan"), cl)
    assert ids[0] == "tp_pp_dp_mapping_needs_megatron" and "framework=torchtitan" in reasons[0]
    ids, _ = rejections(arr, model, MEGATRON, cl)
    assert ids[0] is None
    ids, reasons = rejections(_arr(tp_pp_dp_mapping=True, zero_stage=3), model, MEGATRON, cl)
    assert ids[0] == "megatron_tp_pp_dp_mapping_fsdp" and "zero_stage=3" in reasons[0]


def test_megatron_export_writes_the_flag_and_bench_model_refuses_it():
    """The Megatron export writes the bare flag (megatron/training/arguments.py @ core_v0.16.1 store_true); torchtitan's
    lists it as not mapped; bench_model refuses it in one line."""
    from autotune.interop import render

    cfg = load_config(["cluster=gb200-nvl72", "model=llama-3.1-405b", "train.framework=megatron"])
    train = dataclasses.replace(cfg.train, seq_len=8192, global_batch_size=8 * 112)
    plan = dataclasses.replace(PLAN, tp_pp_dp_mapping=True)
    argv = render("megatron", cfg.model, train, cfg.cluster, plan).split()
    assert "--use-tp-pp-dp-mapping" in argv
    assert "--use-tp-pp-dp-mapping" not in render("megatron", cfg.model, train, cfg.cluster, PLAN).split()
    from bench_model.parallel import parallelize

    with pytest.raises(SpecError, match="tp_pp_dp_mapping=true"):
        parallelize(None, None, plan, "bf16")
