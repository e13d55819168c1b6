"""The deepspeed and nanotron profiles against their frameworks' documented formulas, and the feasibility rules of
every profile (ids stable, messages prefixed by the framework's name)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from autotune.core.errors import SpecError
from autotune.core.model import ModelSpec
from autotune.core.plan_arrays import arrays_from_plans
from autotune.core.types import ClusterSpec, ParallelPlan, TrainSpec
from autotune.layouts.rules import rejections
from autotune.predict.frameworks import FRAMEWORKS, PROFILES, get_profile
from autotune.predict.memory import memory_arrays

DATA = Path(__file__).parent / "data"
GiB = 2**30


def _rows(name):
    with open(DATA / name) as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


@pytest.mark.parametrize("row", _rows("deepspeed_estimator_rows.csv"), ids=lambda r: f"{r['model']}-z{r['zero_stage']}")
def test_deepspeed_model_states_match_its_estimator(row):
    """ZeRO-2: 4*params + 16*params/gpus; ZeRO-3: 4*largest_layer_params + 18*params/gpus (memory.rst)."""
    prof = get_profile("deepspeed")
    train = TrainSpec(seq_len=8, global_batch_size=8, framework="deepspeed")
    psi, z, d = float(row["params"]), int(row["zero_stage"]), int(row["gpus"])
    ms = prof.model_states(psi, z, d, train)
    total = sum(float(ms[k]) for k in ("params", "compute_copy", "grads", "optimizer"))
    total += float(prof.buffers(float(row["largest_layer_params"]), z, d, train))
    assert total / GiB == pytest.approx(float(row["per_gpu_gib"]), rel=0.01)


def test_deepspeed_zero_paper_table1_without_pipeline():
    """Rajbhandari et al. 2020 Table 1 (7.5B, N_d = 64): stage 0 120 GB, stage 1 31.4 GB (2 + 2 + 12/64 per param)."""
    prof = get_profile("deepspeed")
    train = TrainSpec(seq_len=8, global_batch_size=8, framework="deepspeed")
    ms0, ms1 = prof.model_states(7.5e9, 0, 64, train), prof.model_states(7.5e9, 1, 64, train)
    assert sum(float(v) for v in ms0.values()) == pytest.approx(120e9)
    # DeepSpeed's stage 1 also keeps the fp32 gradient partition its optimizer steps on (4/N_d): 31.4 + 0.47 GB
    assert sum(float(v) for v in ms1.values()) == pytest.approx(7.5e9 * (4 + 16 / 64))


def test_nanotron_model_states_follow_the_playbook():
    """Ultra-Scale Playbook (nanotron): 2 + 2 + 4 (fp32 grad accumulation) + 4 + 8 = 20 bytes per parameter;
    ZeRO-1 divides the 12 of master + Adam by N_d. With dp > 1 nanotron's source adds DistributedDataParallel's
    bf16 buckets (2 bytes; tests/unit/test_nanotron_profile.py), which the Playbook does not count."""
    prof = get_profile("nanotron")
    train = TrainSpec(seq_len=8, global_batch_size=8, framework="nanotron")
    for z, d, per in ((0, 1, 20.0), (0, 8, 20.0 + 2), (1, 8, 8 + 2 + 12 / 8)):
        assert sum(float(v) for v in prof.model_states(1e9, z, d, train).values()) == pytest.approx(per * 1e9)


TINY = ModelSpec(
    name="t", num_layers=8, hidden_size=256, ffn_hidden_size=688, num_heads=8, num_kv_heads=4, vocab_size=1000,
    tie_embeddings=True,
)  # fmt: skip
CLUSTER = ClusterSpec(
    name="c", device_memory_bytes=80 * GiB, peak_flops_bf16=1e15, peak_flops_fp32=1e14, gpus_per_node=8,
    intra_node_bw_bytes_per_s=1e11, intra_node_latency_s=1e-6, inter_node_bw_bytes_per_s=1e10, inter_node_latency_s=1e-5,
)  # fmt: skip


def _reject(framework, **plan):
    p = ParallelPlan(**plan)
    train = TrainSpec(
        seq_len=256, global_batch_size=p.dp * p.micro_batch_size * p.grad_accum_steps, framework=framework
    )
    rules, reasons = rejections(arrays_from_plans([p]), TINY, train, CLUSTER)
    return rules[0], reasons[0]


@pytest.mark.parametrize(
    "framework,plan,rule",
    [
        ("nanotron", dict(dp=4, zero_stage=2), "nanotron_zero_stage"),
        ("nanotron", dict(dp=2, cp=2), "nanotron_no_cp"),
        ("nanotron", dict(pp=2, vpp=2, grad_accum_steps=4, pp_schedule="interleaved_1f1b"), "nanotron_no_interleaved"),
        ("deepspeed", dict(tp=2), "deepspeed_no_tp"),
        ("deepspeed", dict(dp=2, pp=2, zero_stage=2, grad_accum_steps=2), "deepspeed_pp_zero"),
        ("deepspeed", dict(pp=2, grad_accum_steps=2, pp_schedule="gpipe"), "deepspeed_pp_schedule"),
        ("deepspeed", dict(cp=16), "deepspeed_ulysses_heads"),
    ],
)
def test_profile_rules_name_the_framework(framework, plan, rule):
    got, reason = _reject(framework, **plan)
    assert got == rule
    assert reason.startswith(f"{framework}: ")
    assert _reject("bench_model", **plan)[0] != rule  # a framework's limit, not a generic rule


def test_megatron_runs_fewer_microbatches_than_stages():
    """Megatron's 1F1B warm-up is min(pp - rank - 1, m) (schedules.py): m < pp runs; bench_model's torch 1F1B not."""
    plan = dict(pp=4, grad_accum_steps=2)
    assert _reject("megatron", **plan)[0] is None
    assert _reject("bench_model", **plan)[0] == "pp_microbatches"


def test_unknown_framework_is_a_spec_error():
    with pytest.raises(SpecError, match=r"train.framework='foo' must be one of bench_model, torchtitan"):
        TrainSpec(seq_len=8, global_batch_size=8, framework="foo")
    assert FRAMEWORKS == tuple(PROFILES) == ("bench_model", "torchtitan", "megatron", "nanotron", "deepspeed")


def test_bench_model_profile_is_the_default_accounting():
    """train.framework=bench_model and the profile passed explicitly give the same bytes as before profiles."""
    arr = arrays_from_plans([ParallelPlan(dp=2, tp=2, pp=2, zero_stage=3, grad_accum_steps=2, sequence_parallel=True)])
    train = TrainSpec(seq_len=256, global_batch_size=4)
    a = memory_arrays(arr, TINY, train, CLUSTER)
    b = memory_arrays(arr, TINY, train, CLUSTER, profile=PROFILES["bench_model"])
    assert all(np.array_equal(a[k], b[k]) for k in a)
    # Megatron's distributed optimizer (zero_stage 1) has no buffers beyond its states; at zero_stage 3 (Megatron-FSDP)
    # it has one unit's gradient and two gathered units, as FSDP2 has
    z1 = arrays_from_plans([ParallelPlan(dp=2, tp=2, pp=2, zero_stage=1, grad_accum_steps=2, sequence_parallel=True)])
    m = memory_arrays(z1, TINY, train, CLUSTER, profile=PROFILES["megatron"])
    assert float(m["buffers"][0]) == 0.0 and float(a["buffers"][0]) > 0.0
