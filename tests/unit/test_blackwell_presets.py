"""Blackwell presets (search_spaces/cluster/{b200,gb200-nvl72,b300,gb300-nvl72}.yaml) and the NVLink domain field."""

from __future__ import annotations

import dataclasses

import pytest

from autotune.core.errors import SpecError
from autotune.spec.config import load_config

PRESETS = ("b200", "gb200-nvl72", "b300", "gb300-nvl72")


@pytest.mark.parametrize("name", PRESETS)
def test_presets_load_with_the_datasheet_ratios(name):
    """Dense FP8 = 2 x BF16 and MXFP8 = FP8 on every Blackwell part (DGX B200/B300 datasheets: 72 PFLOPS FP8 sparse
    per 8 GPUs = 4.5 dense = 2 x 2.25 BF16); FP4 >= 2 x FP8; the NVL72 racks hold 4 GPUs per tray, 72 per domain."""
    c = load_config([f"cluster={name}"]).cluster
    assert c.peak_flops_fp8 == 2 * c.peak_flops_bf16 == c.peak_flops_mxfp8
    assert c.peak_flops_nvfp4 >= 2 * c.peak_flops_fp8
    nvl72 = name.endswith("nvl72")
    assert (c.gpus_per_node, c.fast_domain) == ((4, 72) if nvl72 else (8, 8))


def test_hopper_presets_have_no_blackwell_recipes_and_a_node_sized_domain():
    c = load_config(["cluster=h100-sxm-80gb"]).cluster
    assert c.peak_flops_mxfp8 is None and c.peak_flops_nvfp4 is None and c.fast_domain == c.gpus_per_node == 8


@pytest.mark.parametrize(
    "change, message",
    [
        ({"nvlink_domain_size": 6}, "cluster.nvlink_domain_size=6 must be a multiple of cluster.gpus_per_node=4"),
        ({"nvlink_domain_size": 0}, "cluster.nvlink_domain_size=0 must be an integer >= 1"),
        ({"peak_flops_nvfp4": -1.0}, "cluster.peak_flops_nvfp4=-1.0 must be null or > 0"),
    ],
)
def test_bad_domain_and_peaks_are_one_line_errors(change, message):
    c = load_config(["cluster=gb200-nvl72"]).cluster
    with pytest.raises(SpecError, match=message.replace(".", r"\.").replace("(", r"\(")):
        dataclasses.replace(c, **change)


def test_tp8_is_legal_and_on_nvlink_in_an_nvl72_rack():
    """GB200 NVL72: a node (tray) holds 4 GPUs but 72 share the NVLink domain, so TP8 is inside the fast link: legal
    under tp_within_node and its all-reduces priced at NVLink bandwidth, exactly as TP8 in one 8-GPU B200 node with
    the same link numbers. The same preset with nvlink_domain_size=4 (a node-sized domain) rejects it and would price
    it on the NIC."""
    from autotune.core.plan_arrays import arrays_from_plans
    from autotune.core.types import ParallelPlan
    from autotune.layouts.rules import check_plan
    from autotune.predict.perf import _link

    cfg = load_config(["model=llama-3.1-70b", "cluster=gb200-nvl72"])
    plan = ParallelPlan(dp=8, tp=8, sequence_parallel=True, micro_batch_size=1, grad_accum_steps=128)  # batch 1024
    assert check_plan(plan, cfg.model, cfg.train, cfg.cluster) is None
    bw, _ = _link(cfg.cluster, arrays_from_plans([plan])["tp"])
    assert float(bw[0]) == cfg.cluster.intra_node_bw_bytes_per_s * cfg.cluster.comm_efficiency
    node_only = dataclasses.replace(cfg.cluster, nvlink_domain_size=4)
    assert (
        check_plan(plan, cfg.model, cfg.train, node_only)
        == "tp=8 exceeds nvlink_domain_size=4 (space.tp_within_node=true)"
    )
    bw4, _ = _link(node_only, arrays_from_plans([plan])["tp"])
    assert float(bw4[0]) < float(bw[0])


@pytest.mark.parametrize("name, mib", [("b200", 183359), ("gb200-nvl72", 189471), ("gb300-nvl72", 284208)])
def test_device_memory_is_the_total_nvidia_smi_reports(name, mib):
    """device_memory_bytes is what nvidia-smi reports as the GPU's total (as the H100 / H200 / A100 presets do), read
    from public nvidia-smi transcripts: B200 183359 MiB, GB200 189471 MiB, GB300 284208 MiB. The datasheets' "180 GB" /
    "186 GB" are these in binary units: taken as 1e9 bytes they under-stated the device by 11.5 / 11.8 GiB."""
    assert load_config([f"cluster={name}"]).cluster.device_memory_bytes == mib * 2**20
