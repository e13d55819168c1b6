"""The ZeRO-stage model states measured on bench_model itself: rank 0 of a dp=4 world on torch's "fake" process-group
backend (collectives are no-ops; only storages matter for a memory measurement), bench_model's build_meshes +
apply_data_parallel (FSDP2, bf16 mixed precision), torch's MemTracker after forward (params incl. the gathered bf16
copy) and after backward (gradients). Runs in a subprocess so the global process group stays private."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from autotune.core.model import ModelSpec
from autotune.core.plan_arrays import arrays_from_plans
from autotune.core.types import ClusterSpec, ParallelPlan, TrainSpec
from autotune.predict.memory import memory_arrays

SPEC = dict(name="t", num_layers=2, hidden_size=64, ffn_hidden_size=160, num_heads=8, num_kv_heads=2, vocab_size=128)
D, B, S = 4, 2, 32

_MEASURE = f"""
import json, torch, torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore
from torch.distributed._tools.mem_tracker import MemTracker
from autotune.core.types import ModelSpec, ParallelPlan
from bench_model.model import Llama
from bench_model.parallel.mesh import build_meshes
from bench_model.parallel.data_parallel import apply_data_parallel

dist.init_process_group("fake", store=FakeStore(), rank=0, world_size={D})
out = {{}}
for z in (0, 1, 2, 3):
    meshes = build_meshes(ParallelPlan(dp={D}, zero_stage=z, grad_accum_steps=1), "cpu", {D})
    model = Llama(ModelSpec(**{SPEC!r}), {S})
    model.init_buffers("cpu")
    apply_data_parallel(model, meshes, z, "bf16")
    tracker = MemTracker()
    tracker.track_external(model)
    with tracker:
        logits = model(torch.randint(0, 128, ({B}, {S})))
        fwd = next(iter(tracker.get_tracker_snapshot("current").values()))
        logits.float().sum().backward()
        bwd = next(iter(tracker.get_tracker_snapshot("current").values()))
    pick = lambda snap, kind: next(v for k, v in snap.items() if str(k).endswith(kind))
    out[z] = {{"params": pick(fwd, "PARAM"), "grads": pick(bwd, "GRAD")}}
print(json.dumps(out))
"""

CLUSTER = ClusterSpec(
    name="c",
    device_memory_bytes=10**9,
    peak_flops_bf16=1e12,
    peak_flops_fp32=1e11,
    gpus_per_node=8,
    intra_node_bw_bytes_per_s=1e10,
    intra_node_latency_s=1e-6,
    inter_node_bw_bytes_per_s=1e9,
    inter_node_latency_s=1e-5,
)


@pytest.fixture(scope="module")
def measured() -> dict:
    pytest.importorskip("torch.distributed._tools.mem_tracker")
    r = subprocess.run([sys.executable, "-c", _MEASURE], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return {int(k): v for k, v in json.loads(r.stdout.strip().splitlines()[-1]).items()}


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_zero_stage_params_and_grads_match_measurement(measured, stage):
    # 98,624 params. Stages 0-1: fp32 394,496 + bf16 copy 197,248; stage 2: 394,496/4 + 197,248;
    # stage 3: 98,624 + the root unit's bf16 copy (embedding + head + final norm = 16,448 params) 32,896.
    plan = ParallelPlan(dp=D, zero_stage=stage, micro_batch_size=B, grad_accum_steps=1)
    train = TrainSpec(seq_len=S, global_batch_size=D * B)
    m = memory_arrays(arrays_from_plans([plan]), ModelSpec(**SPEC), train, CLUSTER)
    assert measured[stage]["params"] == float(m["params"][0])
    assert measured[stage]["grads"] == float(m["grads"][0])
    assert np.isclose(float(m["params"][0]), {0: 591744, 1: 591744, 2: 295872, 3: 131520}[stage])
