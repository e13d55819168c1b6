"""The record every benchmarks/reliability.py scenario fills, its comparison with the expected statuses, and the
scenarios that need a real engine: a one-node SLURM (launchers/scripts/slurm_local.sh), two SLURM nodes and two Ray
nodes in network namespaces (tests/engines/slurm2.py, tests/engines/ray_cluster.py). reliability.py puts tests/ and
tests/reliability on sys.path before importing this module."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from harness import AUTOTUNE, TINY, ranked_trial_ids, tally
from site_cluster import slurm_sweep_argv

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Scenario:
    name: str
    faults: int = 0
    expected_rows: int = 0
    lost: int = 0
    duplicates: int = 0
    misclassified: int = 0
    detail: str = ""
    wall_s: float = 0.0


def compare(s: Scenario, expected: dict[str, str], sweep: Path) -> None:
    """Fill lost / duplicates / misclassified of `s` from the folder against candidate -> expected status."""
    t = tally(sweep)
    s.expected_rows = len(expected)
    s.lost = sum(1 for c in expected if c not in t.statuses) + t.corrupt
    s.duplicates = t.duplicates + sum(1 for c in t.statuses if c not in expected)
    s.misclassified = sum(1 for c, st in expected.items() if c in t.statuses and t.statuses[c] != st)


def slurm_faults(work: Path) -> Scenario:
    """scancel of a hung trial's job and a node DOWN/resume under a healthy one, on a fresh one-node SLURM."""
    sys.path.insert(0, str(REPO / "tests" / "engines"))
    from engine_fixtures import SlurmEngine

    s = Scenario("slurm_scancel_and_node_down")
    engine = SlurmEngine(work / "slurm").start()
    try:
        s = _slurm_run(engine, work, s)
    finally:
        engine.run("scontrol", "update", "nodename=localhost", "state=resume")
        engine.stop()
    return s


def _slurm_run(engine, work: Path, s: Scenario) -> Scenario:
    import os

    env = dict(os.environ, SLURM_CONF=str(engine.conf))
    slurm = ("sweep.slurm.poll_s=1", "sweep.slurm.max_requeues=2")
    argv = slurm_sweep_argv(AUTOTUNE, "sl", work, *TINY, *slurm, fault="1:hang:900")
    proc = subprocess.Popen(argv, cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def running(exclude: set[str]) -> str | None:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            out = engine.run("squeue", "-h", "-r", "-n", "autotune-sl", "-t", "RUNNING", "-o", "%i").stdout.split()
            new = [j for j in out if j not in exclude]
            if new:
                return new[0]
            time.sleep(0.5)
        return None

    hung = running(set())
    if hung:
        time.sleep(5)
        s.faults += engine.run("scancel", hung).returncode == 0
        healthy = running({hung})
        if healthy:
            s.faults += (
                engine.run("scontrol", "update", "nodename=localhost", "state=down", "reason=reliability").returncode
                == 0
            )
            time.sleep(3)
            engine.run("scontrol", "update", "nodename=localhost", "state=resume")
    proc.wait(timeout=900)
    first, second = (t[1:] for t in ranked_trial_ids(TINY, 2, 2))
    expected = {first: "crash", second: "ok"}
    expected.update({c: "pruned" for c, st in tally(work / "sl").statuses.items() if st == "pruned"})
    compare(s, expected, work / "sl")
    s.detail = f"sweep rc={proc.returncode}"
    return s


def _two_node(name: str, work: Path) -> Scenario:
    from slurm_scenarios import run_two_node

    r = run_two_node(name, work)
    s = Scenario(f"slurm_2node_{name}", faults=r["faults"], detail=r["detail"])
    compare(s, r["expected"], r["sweep"])
    return s


def slurm_2node_node_death(work: Path) -> Scenario:
    return _two_node("node_death", work)


def slurm_2node_rank_faults(work: Path) -> Scenario:
    return _two_node("rank_faults", work)


def ray_node_loss(work: Path) -> Scenario:
    """Node 2 of a fresh 2-node Ray cluster (network namespaces on a private bridge) killed under a sweep."""
    sys.path.insert(0, str(REPO / "tests" / "engines"))
    from ray_cluster import ray_cluster
    from ray_node_faults import node_loss_sweep, reliability_figures

    with ray_cluster() as cluster:
        return Scenario(**reliability_figures(node_loss_sweep(cluster, work)))
