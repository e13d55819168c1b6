"""NeMo 1.x rows (NeMo 24.07): Nemotron-4 340B's grouped-K/V GPT block and the Apex DistributedFusedAdam dtypes its
launcher yamls set (autotune/fitting/nemo_runs.py NEMO1_OPTIM; [B16] in autotune/predict/frameworks/megatron.py)."""

from __future__ import annotations

import pytest

from autotune.core.plan_arrays import arrays_from_plans
from autotune.fitting.nemo_runs import _model, load_nemo_rows
from autotune.predict.memory import memory_arrays
from autotune.predict.rank_params import rank_params
from autotune.spec.config import load_config


def test_nemotron_340b_block_counts_grouped_kv():
    """launcher_scripts/conf/training/nemotron/nemotron_340b.yaml @ 24.07: h 18432, 4h MLP, 96 heads, 8 query groups.
    Per layer by hand (head dim 18432 / 96 = 192, K/V 8 x 192 = 1536 wide): QKV 18432 x (18432 + 2 x 1536) + proj
    18432 x 18432 = 736,100,352; MLP 2 x 18432 x 73728 = 2,717,908,992; QKV bias 21,504 + proj bias 18,432 + fc1 / fc2
    biases 73,728 + 18,432 + two LayerNorms 73,728."""
    m = _model("Nemotron-340B")
    assert m.layer_params() == 736_100_352 + 2_717_908_992 + 21_504 + 18_432 + 73_728 + 18_432 + 73_728
    # multi-head GPT blocks are unchanged: GPT-3 175B (Brown et al. 2020 Table 2.1) 12 h^2 per layer + biases
    g = _model("GPT3-175B")
    assert g.layer_params() == 12 * 12288**2 + 13 * 12288
    # the row's model TFLOP/s over tokens/s: 686e12 / 326 = 2.10 TFLOP per token (6N + attention, N = 341e9)
    assert m.flops_per_token(4096) == pytest.approx(686e12 / 326, rel=0.03)


def test_launcher_yaml_optimizer_dtypes():
    """Nemotron-4 340B: optim.dtype bf16, grad_sync_dtype bf16 -> no master, bf16 moments, bf16 grads; Nemotron-8B /
    22B leave Apex's defaults (grad_sync_dtype = dtype = fp32): fp32 grads, remainders for the master."""
    runs = {r.model.name: r for r in load_nemo_rows()[0]}  # one NeMo 24.07 row of each Nemotron
    big, small = runs["nemotron-340b"].train, runs["nemotron-8b"].train
    assert (big.optimizer_dtype, big.master_dtype, big.grad_dtype, big.master_remainders) == (
        "bf16",
        None,
        "bf16",
        False,
    )
    assert (small.grad_dtype, small.master_remainders) == ("fp32", True)
    run = runs["nemotron-340b"]
    cl = load_config(["cluster=h100-sxm-80gb"]).cluster
    mem = memory_arrays(arrays_from_plans([run.plan]), run.model, run.train, cl)
    psi = rank_params(run.model, run.plan.tp, run.plan.pp, run.plan.vpp)["first"]  # rank 0, the worst
    assert int(mem["worst_pp_rank"][0]) == 0
    assert float(mem["optimizer"][0]) == pytest.approx(psi * (2 + 2) / run.plan.dp)  # two bf16 moments over dp 2
    assert float(mem["grads"][0]) == pytest.approx(psi * 2)
    assert float(mem["device_total"][0]) < 0.95 * cl.device_memory_bytes  # the published layout fits
