"""The megatron profile as NVIDIA's performance recipes run Megatron-Core (autotune/predict/frameworks/megatron.py):
the allocation pattern behind its reserved peak, the recipes' bf16 main_grad, and the published layouts it must
accept (benchmarks/published_fit.py)."""

from __future__ import annotations

import numpy as np
import pytest

from autotune.core.types import TrainSpec
from autotune.predict.frameworks import get_profile
from autotune.predict.reserved import ROUND_LARGE

MEG = get_profile("megatron")
PSI, D = 1.0e9, 8  # parameters on the rank, data-parallel group
ARR = {"zero_stage": np.array([1]), "dp": np.array([D]), "cp": np.array([1])}


def test_megatron_step_allocates_only_the_fp32_grad_shard_copy():
    fp32 = TrainSpec(4096, 8)  # --bf16 default: fp32 main_grad, nothing allocated by the step
    assert MEG.step_temporaries(PSI, 1, D, ARR, 2, fp32) == 0
    # grad_reduce_in_fp32=False: distrib_optimizer.py `shard_main_param.grad = shard_model_grad.float()`, 4 bytes x
    # Psi/D, rounded up to the allocator's 2 MiB
    bf16 = TrainSpec(4096, 8, param_dtype="bf16", grad_dtype="bf16", master_dtype="fp32")
    want = np.ceil(4 * PSI / D / ROUND_LARGE) * ROUND_LARGE
    assert float(MEG.step_temporaries(PSI, 1, D, ARR, 2, bf16)) == pytest.approx(want)
    whole = np.ceil(4 * PSI / ROUND_LARGE) * ROUND_LARGE
    assert float(MEG.step_temporaries(PSI, 0, D, ARR, 2, bf16)) == pytest.approx(whole)  # all of it without ZeRO
    # bench_model's ZeRO1AdamW: the foreach AdamW temporary over Psi/D plus the flat send (Psi/D) and receive (Psi)
    # buffers, 4 bytes each (autotune/predict/reserved.py), 9.5x Megatron's here
    bench = float(get_profile("bench_model").step_temporaries(PSI, 1, D, ARR, 2, fp32)[0])
    assert bench == pytest.approx(4 * PSI / D + 4 * (PSI + PSI / D), rel=1e-3)


def test_megatron_main_grad_follows_grad_dtype():
    fp32 = MEG.model_states(PSI, 1, D, TrainSpec(4096, 8))
    bf16 = MEG.model_states(PSI, 1, D, TrainSpec(4096, 8, param_dtype="bf16", grad_dtype="bf16"))
    assert float(fp32["grads"]) == 4 * PSI and float(bf16["grads"]) == 2 * PSI


def test_megatron_fsdp_shards_params_and_grads_and_double_buffers_two_units():
    """Megatron-FSDP (zero_stage 3 = optim_grads_params, 2 = optim_grads) as NVIDIA's recipes run it (bf16
    main_grad, --fsdp-double-buffer): every state / D, plus one unit's unsharded gradient and two gathered units."""
    bf16 = TrainSpec(4096, 8, param_dtype="bf16", grad_dtype="bf16", master_dtype="fp32")
    z3 = MEG.model_states(PSI, 3, D, bf16)
    assert [float(z3[k]) for k in ("params", "grads", "optimizer")] == pytest.approx(
        [2 * PSI / D, 2 * PSI / D, 12 * PSI / D]
    )
    z2 = MEG.model_states(PSI, 2, D, bf16)
    assert [float(z2[k]) for k in ("params", "grads")] == pytest.approx([2 * PSI, 2 * PSI / D])
    layer = 1.0e8
    assert float(MEG.buffers(layer, 3, D, bf16)) == pytest.approx(2 * layer + 2 * 2 * layer)
    assert float(MEG.buffers(layer, 2, D, bf16)) == pytest.approx(2 * layer)
    assert float(MEG.buffers(layer, 1, D, bf16)) == 0  # distributed optimizer: the buffers are the states
