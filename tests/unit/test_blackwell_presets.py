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
