"""Faults on the SLURM backend, against the real one-node SLURM of tests/engines (slurmctld + slurmd on 127.0.0.1).

One real `autotune sweep --backend slurm --gpus 2` with two trials, while the test plays the cluster admin:
- trial 1 hangs (injected), and its job is killed from outside with `scancel` -> row `crash` / `Cancelled`, and the
  sweep goes on;
- trial 2 is healthy, but its node is set DOWN under it (`scontrol update nodename=localhost state=down`) and back
  (`state=resume`) -> NODE_FAIL, requeued by the launcher, then it runs to `ok`: one row, never two.
The final folder holds exactly those two trial rows (plus the planner's pruned ones), every file readable, and no
process of either job is left on the node.
"""

from __future__ import annotations

import os
import subprocess
import time

from harness import AUTOTUNE, TINY, final_state, processes_mentioning, ranked_trial_ids
from site_cluster import slurm_sweep_argv
from slurm2 import jobs as _jobs  # job id -> state of the jobs of one name (any SlurmEngine)


def _wait_running(cluster, name: str, exclude: set[str], proc: subprocess.Popen, timeout_s: float = 600) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read()[-3000:] if proc.stderr else "controller ended"
        running = [j for j, s in _jobs(cluster, name).items() if s == "RUNNING" and j not in exclude]
        if running:
            return running[0]
        time.sleep(0.5)
    raise AssertionError(f"no new RUNNING job named {name}: {_jobs(cluster, name)}")


def test_scancel_and_node_down_on_slurm(slurm_cluster, tmp_path):
    sweep_id = "slurmfaults"
    env = dict(os.environ, SLURM_CONF=str(slurm_cluster.conf))
    slurm = ("sweep.slurm.poll_s=1", "sweep.slurm.max_requeues=2")
    argv = slurm_sweep_argv(AUTOTUNE, sweep_id, tmp_path, *TINY, *slurm, parallel=1, fault="1:hang:900")
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    name = f"autotune-{sweep_id}"
    try:
        hung = _wait_running(slurm_cluster, name, set(), proc)
        time.sleep(5)  # let the ranks start and block
        assert slurm_cluster.run("scancel", hung).returncode == 0
        healthy = _wait_running(slurm_cluster, name, {hung}, proc)
        down = slurm_cluster.run("scontrol", "update", "nodename=localhost", "state=down", "reason=reliability")
        assert down.returncode == 0, down.stderr
        deadline = time.monotonic() + 120
        while _jobs(slurm_cluster, name).get(healthy) not in ("NODE_FAIL", None) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _jobs(slurm_cluster, name).get(healthy) in ("NODE_FAIL", None), _jobs(slurm_cluster, name)
    finally:
        slurm_cluster.run("scontrol", "update", "nodename=localhost", "state=resume")
    out, err = proc.communicate(timeout=900)
    assert proc.returncode == 0, out[-3000:] + err[-3000:]
    jobs = _jobs(slurm_cluster, name)  # finished jobs stay visible for MinJobAge
    assert jobs.get(hung) == "CANCELLED" and jobs.get(healthy) in ("NODE_FAIL", None), jobs
    assert [s for j, s in jobs.items() if j not in (hung, healthy)] == ["COMPLETED"], jobs  # the requeued run

    sweep = tmp_path / sweep_id
    state = final_state(sweep)  # one readable file per candidate
    first, second = ranked_trial_ids(TINY, 2, 2)
    ran = {c: s for c, s in state.items() if s != "pruned"}
    assert ran == {first[1:]: "crash", second[1:]: "ok"}, ran
    from autotune.results.store import read_results

    rows = read_results(sweep).set_index("trial_id")
    assert rows.loc[first, "error_type"] == "Cancelled" and "CANCELLED" in rows.loc[first, "error_message"]
    assert rows.loc[second, "backend"] == "slurm" and rows.loc[second, "tokens_per_s"] > 0
    assert processes_mentioning(str(sweep)) == []
