"""Megatron's interleaved-schedule p2p overlap (autotune/predict/pp_overlap.py [OVL]): a pipeline send shows only where
it outlasts the model chunk's compute beside it (megatron/core/pipeline_parallel/schedules.py @ 00611e6e,
pp_post_forward / pp_pre_backward), on only with vpp > 1 (Megatron-LM --no-overlap-p2p-communication; Megatron-Bridge
comm_overlap.py; NeMo-Framework-Launcher 24.07 llama2_13b.yaml overlap_p2p_comm: true)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from autotune.core.model import ModelSpec
from autotune.core.plan_arrays import arrays_from_plans
from autotune.core.types import ParallelPlan, TrainSpec
from autotune.fitting.fit_reference import load_preset
from autotune.predict.collectives import _link
from autotune.predict.frameworks import PROFILES
from autotune.predict.perf import perf_arrays
from autotune.predict.pp_overlap import exposed_transfer_s, p2p_overlapped


def test_overlapped_send_shows_only_what_outlasts_the_chunk():
    # hand: 1.0 ms transfer beside a 0.4 ms forward chunk and a 0.8 ms backward chunk: 0.6 + 0.2 = 0.8 ms exposed
    assert exposed_transfer_s(1.0e-3, 0.4e-3, 0.8e-3, True) == pytest.approx(0.8e-3)
    assert exposed_transfer_s(1.0e-3, 0.4e-3, 0.8e-3, False) == pytest.approx(2.0e-3)  # blocking: both sends
    assert exposed_transfer_s(1.0e-3, 2.0e-3, 3.0e-3, True) == 0.0  # fully hidden
    with pytest.raises(ValueError, match="xfer_s"):
        exposed_transfer_s(-1.0, 0.0, 0.0, True)


def test_only_megatron_interleaved_pipelines_overlap():
    # only the megatron profile states overlap_p2p_comm ([OVL]); it acts with pp > 1 and vpp > 1 only
    assert {n for n, p in PROFILES.items() if p.overlaps().interleaved_p2p} == {"megatron"}
    got = p2p_overlapped(True, np.array([4, 4, 1]), np.array([10, 1, 1]))
    assert got.tolist() == [True, False, False]
    assert not p2p_overlapped(False, 4, 10)


LLAMA2_13B = ModelSpec("llama2-13b", 40, 5120, 13824, 40, 40, 32000, block="llama")


@pytest.mark.parametrize("vpp", [10, 1])
def test_llama2_13b_pp4_p2p_by_hand(vpp):
    # NeMo 24.07's Llama2-13B row: tp1 pp4 dp4, mbs 1, m = 128 / 4 = 32, seq 4096, on 16 H100 (two nodes)
    cluster = load_preset("h100-sxm-80gb")
    train = TrainSpec(seq_len=4096, global_batch_size=128, framework="megatron")
    plan = ParallelPlan(dp=4, pp=4, vpp=vpp, micro_batch_size=1, grad_accum_steps=32, zero_stage=1)
    plan = dataclasses.replace(plan, pp_schedule="interleaved_1f1b" if vpp > 1 else "1f1b")
    got = float(perf_arrays(arrays_from_plans([plan]), LLAMA2_13B, train, cluster)["pp_comm_s"][0])
    boundaries = 32 * vpp + 4 - 1  # Narayanan et al. 2021 Sec 2.2.2
    bw, lat = _link(cluster, 16, cluster.gpus_per_node)
    xfer = 4096 * 5120 * 2 / float(bw) + float(lat)  # one bf16 activation of a micro-batch: 42 MB
    overhead = cluster.pp_microbatch_overhead_s
    # interleaved: one chunk (one layer of 13B, ~4 ms forward on H100) outlasts the ~1 ms transfer: only the launch gap
    want = boundaries * overhead if vpp > 1 else boundaries * (2 * xfer + overhead)
    assert got == pytest.approx(want, rel=1e-6)
