"""Faults across hosts, on the real 2-node SLURM of tests/engines/slurm2.py (one slurmd per network namespace), each
with 2-rank trials, one rank per node, run by `autotune sweep --backend slurm` (the same runs are the `--slurm-2node`
scenarios of benchmarks/reliability.py):
- node2 dies under the trial (every process in its namespace SIGKILLed): slurmctld finds it silent -> NODE_FAIL, the
  launcher resubmits it once (max_requeues=1), node2 dies again -> one crash/NodeFail row, never lost or duplicated;
- in two trials at once, rank 1 (on node2) raises in one and hangs in the other: srun --kill-on-bad-exit ends rank 0
  on node1 of the first at once, the launcher's timeout cancels the second, and no rank is left on either node."""

from __future__ import annotations

from harness import final_state, ranked_trial_ids
from slurm2 import TINY, node_fault_run, rank_faults_run


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


def test_rank_faults_on_node2_end_every_rank_on_both_nodes(slurm_2node, tmp_path):
    out = rank_faults_run(slurm_2node, tmp_path, timeout_s=20.0)
    assert out["rc"] == 0, out["stderr"]
    from autotune.results.store import read_results

    rows = read_results(out["sweep"])
    rows = rows[rows["status"] != "pruned"].sort_values("trial_id")
    first, second = ranked_trial_ids(TINY, 2, 2)  # the controller started them in this order: faults 1 and 2
    got = {r.trial_id: (r.status, r.error_type, r.wall_s) for r in rows.itertuples()}
    assert set(got) == {first, second}, got
    # the crash on node2 ended rank 0 on node1 at once (kill-on-bad-exit), not at the 300 s timeout
    assert got[first][:2] == ("crash", "RuntimeError") and got[first][2] < 120, got
    assert got[second][:2] == ("timeout", "Timeout"), got
    assert sorted(out["states"].values()) == ["CANCELLED", "FAILED"], out["states"]
    assert out["ranks_left"] == {"ats-n1": [], "ats-n2": []} and out["processes_left"] == [], out
    # the faulty ranks were rank 1 on node2, and each had met rank 0 (node1) first
    task1_logs = list((out["sweep"] / "logs").rglob("*_1_log.out"))
    assert len(task1_logs) == 2, task1_logs
    for log in task1_logs:
        assert "autotune rank 1/2 on node2: rendezvous 10.201.0.1:" in log.read_text()
