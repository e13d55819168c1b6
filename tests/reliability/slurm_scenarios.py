"""The `--slurm-2node` scenarios of benchmarks/reliability.py: the runs of tests/engines/slurm2.py (the same ones
tests/reliability/test_faults_slurm_2node.py asserts on), each on a 2-node SLURM of its own that is torn down after,
reduced to what the figures count: faults delivered, the status each candidate must end with, and a detail line."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engines"))  # slurm2, engine_fixtures

from harness import ranked_trial_ids, tally  # noqa: E402
from slurm2 import TINY, TwoNodeCluster, leaks, node_fault_run, rank_faults_run  # noqa: E402

# scenario -> (the run, the statuses its trials must end with, in the order they start)
TWO_NODE_RUNS = {"node_death": (node_fault_run, ("crash",)), "rank_faults": (rank_faults_run, ("crash", "timeout"))}


def run_two_node(name: str, work: Path) -> dict[str, Any]:
    run, statuses = TWO_NODE_RUNS[name]
    manager = TwoNodeCluster(work / "cluster")
    try:
        out = run(manager.get(), work)
    finally:
        state_dir = manager.close()
    expected = {c: "pruned" for c, st in tally(out["sweep"]).statuses.items() if st == "pruned"}
    for trial_id, status in zip(ranked_trial_ids(TINY, 2, len(statuses)), statuses):
        expected[trial_id[1:]] = status  # trial id "t<candidate id>" -> candidate id
    left = sum(len(pids) for pids in out["ranks_left"].values())
    return {
        "faults": int(out["faults"]),
        "expected": expected,
        "sweep": out["sweep"],
        "detail": f"sweep rc={out['rc']}, jobs {out['states']}, ranks left {left}, "
        f"cluster leftovers {len(leaks(state_dir)) if state_dir else 0}",
    }
