"""The Ray worker node dies under a sweep: one real `autotune sweep --backend ray --gpus 2 --parallel 2 --max-trials 3`
on the 2-node cluster (tests/engines/ray_cluster.py), driven from the head node, while the test pulls node 2's plug.

Trials 1 and 2 hang (injected, `hang_s` timeout), so both are running when the node dies; 2 + 2 CPUs put one on each
node (a 2-rank trial fills a node). Every process of node 2 is SIGKILLed (raylet, workers, ranks: a host that lost
power). Expected: the node-2 trial's row is crash / NodeLost naming 10.202.0.2, the head trial times out as injected,
trial 3 runs on the head node alone to `ok`, and `--resume` of the finished sweep runs nothing again.

Shared by tests/engines/test_ray_engine.py (asserts it) and benchmarks/reliability.py --ray-2node (counts it)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reliability"))  # harness
from harness import AUTOTUNE, TINY, ranked_trial_ids, tally  # noqa: E402
from proc_scan import processes_mentioning  # noqa: E402
from ray_cluster import RayCluster  # noqa: E402

SWEEP_ID = "raynode"
WORKER_IP = "10.202.0.2"


@dataclass(frozen=True)
class NodeLossOutcome:
    sweep_dir: Path
    expected: dict[str, str]  # candidate id -> the status its row must have
    lost_trial: str  # the trial whose ranks ran on node 2
    faults: int  # 1 when node 2 still had processes to kill
    sweep_rc: int
    resume_rc: int
    files_before_resume: dict[str, int]  # trial file -> mtime_ns after the first run
    files_after_resume: dict[str, int]
    processes_left: list[str]  # processes still mentioning the sweep's trials, after both runs
    resume_out: str  # what `autotune sweep --resume` printed
    log: str  # the two runs' output tails, for failure messages


def _files(sweep: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in sorted((sweep / "trials").glob("*.parquet"))}


def _placement(work: Path, trial: str) -> list[dict]:
    path = work / trial / "PLACEMENT.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):  # not written yet (or being written)
        return []


def _wait(cond, proc: subprocess.Popen, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"sweep ended or {timeout_s:.0f} s passed before {what} (rc={proc.poll()})")
        time.sleep(0.2)


def node_loss_sweep(cluster: RayCluster, results: Path, hang_s: int = 10) -> NodeLossOutcome:
    sweep, work = results / SWEEP_ID, results / SWEEP_ID / "work"
    argv = [AUTOTUNE, "sweep", "--backend", "ray", "--gpus", "2", "--max-trials", "3", "--parallel", "2"]
    argv += ["--steps", "2", "--sweep-id", SWEEP_ID, "--inject-fault", f"1:hang:{hang_s}"]
    argv += ["--inject-fault", f"2:hang:{hang_s}", *TINY, f"sweep.results_dir={results}"]
    argv += [f"sweep.ray.address={cluster.address}"]
    env = cluster.env(0)
    proc = subprocess.Popen(
        cluster.argv(0, argv), cwd=results, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    first, second, third = ranked_trial_ids(TINY, 2, 3)
    try:
        _wait(lambda: _placement(work, first) and _placement(work, second), proc, 300, "trials 1 and 2 were placed")
        on_worker = [t for t in (first, second) if {p["ip"] for p in _placement(work, t)} == {WORKER_IP}]
        if len(on_worker) != 1:
            raise RuntimeError(f"expected one trial on {WORKER_IP}: {[_placement(work, t) for t in (first, second)]}")
        lost = on_worker[0]
        # the node-2 ranks are up (their command lines name the trial) and hung: pull the plug now
        _wait(lambda: len(processes_mentioning(f"-{lost}-")) >= 2, proc, 120, "the node-2 ranks started")
        time.sleep(1.0)
        faults = int(cluster.kill_node(1) > 0)
        out, _ = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    before = _files(sweep)
    resume = subprocess.run(
        cluster.argv(0, [AUTOTUNE, "sweep", "--resume", str(sweep)]),
        cwd=results,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    expected = {lost[1:]: "crash", ({first, second} - {lost}).pop()[1:]: "timeout", third[1:]: "ok"}
    expected.update({c: "pruned" for c, st in tally(sweep).statuses.items() if st == "pruned"})
    left = [p for t in (first, second, third) for p in processes_mentioning(f"-{t}-")]
    return NodeLossOutcome(
        sweep_dir=sweep,
        expected=expected,
        lost_trial=lost,
        faults=faults,
        sweep_rc=proc.returncode,
        resume_rc=resume.returncode,
        files_before_resume=before,
        files_after_resume=_files(sweep),
        processes_left=left,
        resume_out=resume.stdout + resume.stderr,
        log=out[-3000:] + "\n--- resume ---\n" + resume.stdout[-1500:] + resume.stderr[-1500:],
    )


def reliability_figures(r: NodeLossOutcome) -> dict[str, object]:
    """The scenario in benchmarks/reliability.py's terms (its `Scenario` fields): a row missing or unreadable is
    lost; a second row of a candidate, a row nobody expected, or a trial file the resume rewrote is a duplicate; a row
    with another status, or a node-2 row that is not crash / NodeLost, is misclassified."""
    from autotune.results.store import read_results

    t = tally(r.sweep_dir)
    rows = read_results(r.sweep_dir).set_index("trial_id")
    lost_type = rows["error_type"].get(r.lost_trial)
    rewritten = sum(1 for name, mtime in r.files_after_resume.items() if r.files_before_resume.get(name) != mtime)
    return {
        "name": "ray_worker_node_lost",
        "faults": r.faults,
        "expected_rows": len(r.expected),
        "lost": sum(1 for c in r.expected if c not in t.statuses) + t.corrupt,
        "duplicates": t.duplicates + sum(1 for c in t.statuses if c not in r.expected) + rewritten,
        "misclassified": sum(1 for c, s in r.expected.items() if t.statuses.get(c, s) != s) + (lost_type != "NodeLost"),
        "detail": f"sweep rc={r.sweep_rc}, resume rc={r.resume_rc}; node-2 trial {r.lost_trial}: {lost_type}; "
        f"processes left: {len(r.processes_left)}",
    }
