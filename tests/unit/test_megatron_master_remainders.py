"""train.master_remainders ([REM] in autotune/predict/frameworks/megatron.py): Apex DistributedFusedAdam's
store_param_remainders, which NeMo 1.x sets for bf16 O2 models with an fp32 optimizer. Per parameter the optimizer
shard keeps an int16 remainder (2 B) and the fp32 exp_avg / exp_avg_sq (8 B) instead of an fp32 master (4 B) and the
moments (NVIDIA/apex apex/contrib/optimizers/distributed_fused_adam.py @ f3f04924, StateBucket: param_remainders_shard
dtype=torch.int16, exp_avg_shard / exp_avg_sq_shard dtype=self.dtype (fp32); NVIDIA/NeMo
nemo/collections/nlp/models/language_modeling/megatron_base_model.py @ r2.0.0rc1 `setup_optimization`).

Llama 3.1 8B has 8,030,261,248 parameters (meta-llama/Llama-3.1-8B: 32 layers of 218,112,000 + 2 x 128,256 x 4096
embedding / head + 4096 final norm). NeMo 24.07's row 10 (8 H100, TP1 PP1 CP2 DP4, distributed optimizer over
dp*cp = 8): 8,030,261,248 x (4 - 2) / 8 = 2,007,565,312 B = 1.8697 GiB less optimizer state.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from autotune.core.errors import SpecError
from autotune.core.plan_arrays import arrays_from_plans
from autotune.core.types import TrainSpec
from autotune.interop import unmapped
from autotune.predict.frameworks import get_profile
from autotune.predict.memory import memory_arrays
from autotune.spec.config import load_config

LLAMA31_8B_PARAMS = 8_030_261_248  # module doc
GIB = 2**30


def _megatron_train(remainders: bool) -> TrainSpec:
    return TrainSpec(
        seq_len=8,
        global_batch_size=8,
        param_dtype="bf16",
        grad_dtype="bf16",
        master_dtype="fp32",
        framework="megatron",
        master_remainders=remainders,
    )


def test_optimizer_state_per_parameter_with_remainders():
    """1e9 parameters, distributed optimizer over 8 ranks: (4 master + 8 Adam) / 8 = 1.5 B per parameter with the
    fp32 master, (2 remainder + 8 Adam) / 8 = 1.25 B with the remainders; params and grads unchanged (2 + 2)."""
    prof = get_profile("megatron")
    full = prof.model_states(1e9, np.array([1]), np.array([8.0]), _megatron_train(False))
    rem = prof.model_states(1e9, np.array([1]), np.array([8.0]), _megatron_train(True))
    assert float(full["optimizer"][0]) == pytest.approx(1.5e9)
    assert float(rem["optimizer"][0]) == pytest.approx(1.25e9)
    assert float(rem["params"][0]) == float(full["params"][0]) == pytest.approx(2e9)
    assert float(rem["grads"][0]) == float(full["grads"][0]) == pytest.approx(2e9)


def test_nemo_24_07_llama3_8b_row_saves_1_87_gib():
    """NeMo 24.07 row 10 as published_fit prices it: the optimizer term drops by N x 2 / 8 (module doc)."""
    from autotune.fitting.published_runs import load_nemo

    lay = next(x for x in load_nemo()[0] if x.row == "10")
    assert lay.train.master_remainders and lay.model.num_params() == LLAMA31_8B_PARAMS
    cluster = load_config([f"cluster={lay.cluster}"]).cluster
    arr = arrays_from_plans([lay.plan])
    on = memory_arrays(arr, lay.model, lay.train, cluster, lay.profile)
    off = memory_arrays(arr, lay.model, dataclasses.replace(lay.train, master_remainders=False), cluster, lay.profile)
    saved = float(off["optimizer"][0] - on["optimizer"][0])
    assert saved == pytest.approx(LLAMA31_8B_PARAMS * 2 / 8)
    assert saved / GIB == pytest.approx(1.8697, abs=1e-4)


def test_only_the_nemo_1x_rows_run_apex_remainders():
    """NeMo-Framework-Launcher containers (24.03.01, 24.07: distributed_fused_adam, megatron_amp_O2) store remainders;
    NeMo 2.0 (25.04) and Megatron-Bridge rows run Megatron-Core's distributed optimizer with an fp32 master. Nemotron-4
    340B's yaml sets a bf16 optimizer: no master at all (test_nemo1_optim.py)."""
    import pandas as pd

    from autotune.fitting.nemo_runs import DATA, NEMO1_CONTAINERS, load_nemo_rows

    container = pd.read_csv(DATA / "nemo_megatron_bridge_performance_summary.csv")["container"]
    runs = [r for r in load_nemo_rows()[0] if r.model.name != "nemotron-340b"]
    assert sum(r.train.master_remainders for r in runs) >= 10  # the 24.07 rows with a preset or stated shape
    assert all(r.train.master_remainders == (container[r.row] in NEMO1_CONTAINERS) for r in runs)
    assert not any(r.train.master_remainders for r in runs if container[r.row].startswith("NeMo25.04"))


def test_remainders_need_bf16_params_under_megatron():
    with pytest.raises(SpecError, match=r"train.master_remainders=True with framework=bench_model"):
        TrainSpec(seq_len=8, global_batch_size=8, master_remainders=True)
    with pytest.raises(SpecError, match=r"param_dtype=fp32"):
        TrainSpec(seq_len=8, global_batch_size=8, framework="megatron", master_dtype="fp32", master_remainders=True)


def test_megatron_export_reports_remainders_unmapped():
    cfg = load_config(["model=llama-3.1-8b", "cluster=h100-sxm-80gb"])
    train = _megatron_train(True)
    from autotune.core.types import ParallelPlan

    plan = ParallelPlan(dp=8, zero_stage=1, micro_batch_size=1, grad_accum_steps=1)
    notes = unmapped("megatron", cfg.model, train, cfg.cluster, plan)
    assert any(u.startswith("train.master_remainders=True") for u in notes)
    assert not any(u.startswith("train.master_remainders") for u in unmapped(
        "megatron", cfg.model, _megatron_train(False), cfg.cluster, plan))  # fmt: skip
