"""The `--slurm-2node` scenarios of benchmarks/reliability.py: the runs of tests/engines/slurm2.py (the same ones
tests/reliability/test_faults_slurm_2node.py asserts on), each on a 2-node SLURM of its own that is torn down after,
reduced to what the figures count: faults delivered, the status each candidate must end with, and a detail line."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engines"))  # slurm2, engine_fixtures

from harness import ranked_trial_ids, tally  # noqa: E402
from slurm2 import TINY, TwoNodeCluster, hang_run, leaks, node_fault_run  # noqa: E402

# scenario -> (the run, the status its one trial must end with)
TWO_NODE_RUNS = {"node_death": (node_fault_run, "crash"), "rank_hang": (hang_run, "timeout")}


def run_two_node(name: str, work: Path) -> dict[str, Any]:
    run, status = TWO_NODE_RUNS[name]
    manager = TwoNodeCluster(work / "cluster")
    try:
        out = run(manager.get(), work)
    finally:
        state_dir = manager.close()
    first = ranked_trial_ids(TINY, 2, 1)[0][1:]  # trial id "t<candidate id>" -> candidate id
    expected = {c: "pruned" for c, st in tally(out["sweep"]).statuses.items() if st == "pruned"}
    expected[first] = status
    left = sum(len(pids) for pids in out["ranks_left"].values())
    return {
        "faults": int(out.get("faults", 1)),
        "expected": expected,
        "sweep": out["sweep"],
        "detail": f"sweep rc={out['rc']}, jobs {out['states']}, ranks left {left}, "
        f"cluster leftovers {len(leaks(state_dir)) if state_dir else 0}",
    }
