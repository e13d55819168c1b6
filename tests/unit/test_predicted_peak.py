"""The prediction a trial row sets beside its measured peak (issue 26, "two numbers kept apart"): the measured
`peak_mem_reserved_bytes` is torch.cuda.max_memory_reserved on CUDA (the caching allocator's segments: no CUDA context,
no NCCL buffers) and ru_maxrss on CPU ranks (the whole process), so the row's `pred_peak_mem_reserved_bytes` is the
predicted allocator peak on CUDA and the predicted device total on CPU; `pred_mem_bytes` stays the device total that
decides `fits`."""

from __future__ import annotations

import pandas as pd

from autotune.layouts.candidate import Candidate
from autotune.layouts.planner import enumerate_candidates
from autotune.results.schema import predicted_peak, row_from_spec
from autotune.run.rows import candidate_spec
from autotune.spec.config import load_config
from launchers.simulate import simulate_row


def _cand(cfg):
    frame = enumerate_candidates(cfg, 8)
    return Candidate.from_row(frame[frame["rank"].notna()].iloc[0]), frame


def test_cuda_rows_predict_the_allocator_peak_and_cpu_rows_the_device_total():
    cuda = load_config(["model=llama-3.1-8b", "cluster=h100-sxm-80gb"])
    cand, frame = _cand(cuda)
    row = row_from_spec(candidate_spec(cuda, cand, sweep_id="s", backend="local"))
    hit = frame[frame["candidate_id"] == cand.candidate_id].iloc[0]
    assert row["pred_mem_bytes"] == hit["mem_device_total_bytes"]
    assert row["pred_peak_mem_reserved_bytes"] == hit["mem_allocator_peak_bytes"]
    # the H100 preset's runtime overhead (2 GiB) is the difference between the two
    assert row["pred_mem_bytes"] - row["pred_peak_mem_reserved_bytes"] == cuda.cluster.runtime_overhead_bytes

    cpu = load_config(["experiment=demo"])
    cand, _ = _cand(cpu)
    row = row_from_spec(candidate_spec(cpu, cand, sweep_id="s", backend="local"))
    assert row["pred_peak_mem_reserved_bytes"] == row["pred_mem_bytes"]


def test_simulated_rows_carry_both_and_old_files_fall_back():
    cuda = load_config(["model=llama-3.1-8b", "cluster=h100-sxm-80gb"])
    cand, _ = _cand(cuda)
    row = simulate_row(candidate_spec(cuda, cand, sweep_id="s", backend="simulate"), "simulate")
    assert row["pred_mem_bytes"] - row["pred_peak_mem_reserved_bytes"] == cuda.cluster.runtime_overhead_bytes
    old = pd.DataFrame({"pred_mem_bytes": [3.0, 5.0]})  # a file written before the column: its device total
    assert predicted_peak(old).tolist() == [3.0, 5.0] and predicted_peak({"pred_mem_bytes": 4.0}) == 4.0
    new = pd.DataFrame({"pred_mem_bytes": [3.0, 5.0], "pred_peak_mem_reserved_bytes": [1.0, None]})
    assert predicted_peak(new).tolist() == [1.0, 5.0]
