"""Faults across hosts, on the real 2-node SLURM of tests/engines/slurm2.py (one slurmd per network namespace), each
a 2-rank trial with one rank per node run by `autotune sweep --backend slurm` (the same runs are the `--slurm-2node`
scenarios of benchmarks/reliability.py):
- node2 dies under the trial (every process in its namespace SIGKILLed): slurmctld finds it silent -> NODE_FAIL, the
  launcher resubmits it once (max_requeues=1), node2 dies again -> one crash/NodeFail row, never lost or duplicated;
- the rank on node2 hangs: the launcher's timeout cancels the job and no rank is left on either node."""

from __future__ import annotations

from harness import final_state
from slurm2 import hang_run, node_fault_run


def test_node_death_is_requeued_then_node_fail(slurm_2node, tmp_path):
    out = node_fault_run(slurm_2node, tmp_path, max_requeues=1)
    assert out["rc"] == 0, out["stderr"]
    assert out["faults"] == 2 and len(out["job_ids"]) == 2, out
    assert {out["states"][j] for j in out["job_ids"]} == {"NODE_FAIL"}, out["states"]
    state = final_state(out["sweep"])  # one readable row per candidate
    assert [s for s in state.values() if s != "pruned"] == ["crash"], state
    from autotune.results.store import read_results

    rows = read_results(out["sweep"])
    row = rows[rows["status"] == "crash"].iloc[0]
    assert row["error_type"] == "NodeFail" and "after 1 requeue" in row["error_message"], row["error_message"]
    # NODE_FAIL ended the surviving rank on node1 too
    assert out["ranks_left"] == {"ats-n1": [], "ats-n2": []}, out["ranks_left"]


def test_rank_hanging_on_node2_times_out_and_no_rank_is_left(slurm_2node, tmp_path):
    out = hang_run(slurm_2node, tmp_path)
    assert out["rc"] == 0, out["stderr"]
    state = final_state(out["sweep"])
    assert [s for s in state.values() if s != "pruned"] == ["timeout"], state
    assert list(out["states"].values()) == ["CANCELLED"], out["states"]  # our scancel, on both nodes
    assert out["ranks_left"] == {"ats-n1": [], "ats-n2": []} and out["processes_left"] == [], out
    # the hanging rank was rank 1 on node2, and it had met rank 0 (node1) before it hung
    (task1_log,) = (out["sweep"] / "logs").glob("*/*_1_log.out")
    assert "autotune rank 1/2 on node2: rendezvous 10.201.0.1:" in task1_log.read_text()
