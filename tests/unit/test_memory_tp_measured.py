"""The TP / sequence-parallel activation terms measured on bench_model itself: rank 0 of a tp=2 world on torch's
"fake" process-group backend (collectives are no-ops; only tensor shapes and storages matter here, which is all a
memory measurement needs), bench_model's apply_tensor_parallel + apply_recompute, torch's MemTracker after forward.
One layer's bytes = ACT(3 layers) - ACT(2 layers). Runs in a subprocess so the global process group stays private."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from autotune.core.model import ModelSpec
from autotune.predict.frameworks.bench_model import layer_activation_bytes

SPEC = dict(name="t", hidden_size=64, ffn_hidden_size=160, num_heads=8, num_kv_heads=2, vocab_size=128)
B, S, TP = 2, 32, 2

_MEASURE = f"""
import json, torch, torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed._tools.mem_tracker import MemTracker
from autotune.core.types import ModelSpec
from bench_model.model import Llama
from bench_model.parallel.tensor_parallel import apply_tensor_parallel
from bench_model.parallel.recompute import apply_recompute

dist.init_process_group("fake", store=FakeStore(), rank=0, world_size={TP})
mesh = init_device_mesh("cpu", ({TP},))

def act(num_layers, sp, mode):
    model = Llama(ModelSpec(num_layers=num_layers, **{SPEC!r}), {S})
    apply_tensor_parallel(model, mesh, sp)
    apply_recompute(model, mode)
    model = model.to(torch.bfloat16)
    model.init_buffers("cpu")
    tracker = MemTracker()
    tracker.track_external(model)
    with tracker:
        out = model(torch.randint(0, 128, ({B}, {S})))
        snap = next(iter(tracker.get_tracker_snapshot("current").values()))
    return next(v for k, v in snap.items() if str(k).endswith("ACT"))

res = {{f"{{sp}}-{{mode}}": act(3, sp, mode) - act(2, sp, mode)
       for sp in (False, True) for mode in ("none", "selective", "full")}}
print(json.dumps(res))
"""


@pytest.fixture(scope="module")
def measured() -> dict:
    pytest.importorskip("torch.distributed._tools.mem_tracker")
    r = subprocess.run([sys.executable, "-c", _MEASURE], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("sp", [False, True])
@pytest.mark.parametrize("mode,code", [("none", 0), ("selective", 1), ("full", 2)])
def test_tp_sp_layer_activations_match_measurement(measured, sp, mode, code):
    predicted = float(layer_activation_bytes(ModelSpec(num_layers=1, **SPEC), S, B, TP, sp, code, 2)["saved"])
    assert measured[f"{sp}-{mode}"] == predicted
