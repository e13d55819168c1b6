"""Reliability figures: inject real faults and feed real bad inputs, then count what was lost, duplicated or unclear.

    .venv/bin/python benchmarks/reliability.py [--quick] [--slurm] [--slurm-2node] [--ray-2node] [--scenarios NAME,...]
        [-o FILE.json]

Runs the scenarios itself (not through pytest), each against a fresh folder, and prints one JSON object:
  faults_injected   faults actually delivered (a SIGKILL that found its process alive, a torn file written, ...)
  results_lost      expected rows missing from the results folder at the end (must be 0)
  duplicates        rows beyond one per candidate / trial (must be 0)
  misclassified     rows present but with the wrong status for the fault (expected 0)
  bad_inputs_tried  malformed inputs fed to the CLI (tests/reliability/badinputs.py)
  clean_errors      of those: exit 2, one stderr line naming field/value/rule, no traceback, results folder untouched
  scenarios         per-scenario detail, and wall_s

Scenarios: bad inputs; 8 concurrent store writers; torn/corrupt trial files; the controller SIGKILLed at 5 seeded points
(simulate backend) and resumed; [local backend, skipped by --quick] the controller SIGKILLed with a trial in flight,
kill_rank1 + hang + crash_rank1 in one sweep, a genuine RLIMIT_AS OOM; [--slurm] scancel of a job and a node set DOWN
and back, on a one-node SLURM started by launchers/scripts/slurm_local.sh; [--slurm-2node, root] on a 2-node SLURM in
network namespaces (tests/engines/slurm2.py): node2 killed under a trial twice (requeue, then crash/NodeFail); rank 1
(on node2) raising in one trial and hanging in another (crash at once, timeout; no rank left on either node); [--ray-2node, root] the worker node of a
2-node Ray cluster powered off mid-trial, then the sweep resumed (tests/engines/ray_node_faults.py).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "reliability"))
sys.path.insert(0, str(REPO))

from engine_scenarios import (  # tests/reliability, on sys.path
    Scenario,
    compare,
    ray_node_loss,
    slurm_2node_node_death,
    slurm_2node_rank_faults,
    slurm_faults,
)
from harness import (
    AUTOTUNE,
    TINY,
    available_commands,
    clean_error_problems,
    count_rows,  # noqa: E402
    kill_when,
    processes_mentioning,
    ranked_trial_ids,
    run_in_process,
    run_subprocess,
    snapshot,
    tally,
)

SIM = ["--gpus", "8", "--backend", "simulate", "--max-trials", "40", "experiment=demo"]


def _sweep(cwd: Path, *args: str, timeout_s: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([AUTOTUNE, "sweep", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout_s)


def bad_inputs(work: Path) -> tuple[Scenario, int, int, list[str]]:
    from badinputs import all_cases, prepare, runnable

    prepare(work)
    cases = runnable(all_cases(), available_commands())
    clean, unclear = 0, []
    for case in cases:
        before = snapshot(work / "results")
        run = run_subprocess if case.subprocess else run_in_process
        kwargs = {"unprivileged": case.unprivileged} if case.subprocess else {}
        outcome = run(list(case.argv), work, case.env, **kwargs)
        problems = clean_error_problems(outcome, case.expect)
        if snapshot(work / "results") != before:
            problems.append("wrote into the results folder")
        if problems:
            unclear.append(f"{case.case_id}: {problems[0]}")
        else:
            clean += 1
    return Scenario("bad_inputs", detail=f"{clean}/{len(cases)} clean"), len(cases), clean, unclear


WRITER = r"""
import sys
from autotune.results.schema import empty_row
from autotune.results.store import write_row
trials, w, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(n):
    for tid, cid in ((f"w{w}-{i:03d}", f"{w:02d}{i:010d}"), (f"shared-{i % 5}", f"ff{i % 5:010d}")):
        r = empty_row()
        r.update(sweep_id="cw", trial_id=tid, candidate_id=cid, backend="local", status="ok", num_gpus=2, dp=2)
        write_row(trials, r)
"""


def concurrent_writers(work: Path, writers: int = 8, rows: int = 20) -> Scenario:
    s = Scenario("concurrent_writers_8", faults=writers)
    trials = work / "cw" / "trials"
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(trials), str(w), str(rows)], cwd=REPO)
        for w in range(writers)
    ]
    rcs = [p.wait(timeout=600) for p in procs]
    expected = {f"{w:02d}{i:010d}": "ok" for w in range(writers) for i in range(rows)}
    expected.update({f"ff{i:010d}": "ok" for i in range(5)})
    compare(s, expected, work / "cw")
    s.detail = f"writer exit codes {sorted(set(rcs))}; temp files left: {sum(1 for p in trials.glob('.*'))}"
    return s


def torn_files(work: Path) -> Scenario:
    import pickle

    from autotune.results.schema import empty_row
    from autotune.results.store import SweepStore, write_row

    s = Scenario("torn_trial_files")
    store = SweepStore(work / "torn")

    def row(i: int) -> dict:
        r = empty_row()
        r.update(
            sweep_id="torn",
            trial_id=f"c{i:012d}",
            candidate_id=f"{i:012d}",
            backend="simulate",
            status="simulated",
            num_gpus=2,
            dp=2,
        )
        return r

    for i in range(6):
        write_row(store.trials_dir, row(i))
    whole = (store.trials_dir / "c000000000001.parquet").read_bytes()
    damage = [whole[: len(whole) // 2], b"", pickle.dumps({"not": "a row"}), whole[:-5] + b"XXXXX", whole[:8]]
    for i, data in enumerate(damage, start=1):
        (store.trials_dir / f"c{i:012d}.parquet").write_bytes(data)
    s.faults = len(damage)
    t = tally(store.root)
    detected = t.corrupt
    settled = store.finished_candidates()
    for i in range(1, 6):  # what a resumed sweep does: run the unsettled candidates again
        if f"{i:012d}" not in settled:
            write_row(store.trials_dir, row(i))
    compare(s, {f"{i:012d}": "simulated" for i in range(6)}, store.root)
    s.misclassified += len(damage) - detected  # a damaged file read as data would be a wrong row
    s.detail = f"{detected}/{len(damage)} damaged files detected and re-run"
    return s


def controller_kills_simulate(work: Path, seed: int = 20261122) -> Scenario:
    s = Scenario("controller_sigkill_simulate")
    ref = _sweep(work, "--sweep-id", "reference", *SIM)
    if ref.returncode != 0:
        s.detail = "reference sweep failed: " + ref.stderr[-300:]
        return s
    expected = tally(work / "results" / "reference").statuses
    pruned = sum(v == "pruned" for v in expected.values())
    rng = random.Random(seed)
    thresholds = [
        0,
        pruned,  # the planner's pruned rows land in one write (pruned.parquet), then one file per trial
        rng.randint(pruned + 1, pruned + 10),
        rng.randint(pruned + 11, pruned + 25),
        rng.randint(pruned + 26, len(expected) - 2),
    ]
    sweep = work / "results" / "killed"
    for t in thresholds:
        proc = subprocess.Popen(
            [AUTOTUNE, "sweep", "--sweep-id", "killed", "--resume-if-exists", *SIM],
            cwd=work,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        ready = (lambda: (sweep / "sweep.yaml").exists()) if t == 0 else (lambda t=t: count_rows(sweep) >= t)
        s.faults += kill_when(proc, ready)
    done = _sweep(work, "--sweep-id", "killed", "--resume-if-exists", *SIM)
    compare(s, expected, sweep)
    s.detail = f"kill thresholds {thresholds} (rows written); final resume rc={done.returncode}"
    return s


def controller_kill_local(work: Path) -> Scenario:
    s = Scenario("controller_sigkill_local_trial_in_flight")
    args = ["--gpus", "2", "--backend", "local", "--max-trials", "2", "--steps", "1", *TINY]
    sweep = work / "results" / "lk"
    proc = subprocess.Popen(
        [AUTOTUNE, "sweep", "--sweep-id", "lk", "--resume-if-exists", *args],
        cwd=work,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    s.faults = int(kill_when(proc, lambda: any((sweep / "work").glob("*/SPEC.json"))))
    done = _sweep(work, "--sweep-id", "lk", "--resume-if-exists", *args)
    expected = {t[1:]: "ok" for t in ranked_trial_ids(TINY, 2, 2)}
    expected.update({c: "pruned" for c, st in tally(sweep).statuses.items() if st == "pruned"})
    compare(s, expected, sweep)
    deadline = time.monotonic() + 60
    while processes_mentioning(str(sweep)) and time.monotonic() < deadline:
        time.sleep(1)
    s.detail = f"resume rc={done.returncode}; processes left: {len(processes_mentioning(str(sweep)))}"
    return s


def trial_faults_local(work: Path) -> Scenario:
    s = Scenario("trial_faults_local", faults=3)
    done = _sweep(
        work,
        "--gpus",
        "2",
        "--backend",
        "local",
        "--max-trials",
        "3",
        "--steps",
        "2",
        "--parallel",
        "2",
        "--sweep-id",
        "tf",
        "--inject-fault",
        "1:kill_rank1",
        "--inject-fault",
        "2:hang:30",
        "--inject-fault",
        "3:crash_rank1",
        *TINY,
    )
    sweep = work / "results" / "tf"
    killed, hung, crashed = (t[1:] for t in ranked_trial_ids(TINY, 2, 3))
    expected = {killed: "crash", hung: "timeout", crashed: "crash"}
    expected.update({c: "pruned" for c, st in tally(sweep).statuses.items() if st == "pruned"})
    compare(s, expected, sweep)
    s.detail = f"sweep rc={done.returncode}; processes left: {len(processes_mentioning(str(sweep)))}"
    return s


def genuine_oom(work: Path) -> Scenario:
    from autotune.results.store import SweepStore
    from autotune.results.trialfile import make_spec
    from autotune.spec.config import load_config
    from launchers.local import LocalLauncher

    s = Scenario("genuine_oom_rlimit", faults=1)
    cfg = load_config([*TINY, "model.hidden_size=2048", "model.ffn_hidden_size=5632", "model.vocab_size=32000"])
    store = SweepStore(work / "oom").create(cfg.resolved_yaml, {"gpus": 2, "overrides": []})
    spec = make_spec(
        cfg,
        cfg.plan(2),
        sweep_id="oom",
        trial_id="t-oom",
        warmup_steps=1,
        timed_steps=1,
        timeout_s=300.0,
        memory_limit_bytes=512 * 2**20,
    )
    row = LocalLauncher(workdir=store.work_dir, log_dir=store.logs_dir).submit(spec).result(timeout=400)
    store.write_row(row)
    compare(s, {spec.candidate_id: "oom"}, store.root)
    s.detail = f"status {row['status']} ({row['error_type']})"
    return s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="skip the local-backend trial scenarios (torchrun runs)")
    ap.add_argument("--slurm", action="store_true", help="also start a one-node SLURM and run its faults")
    ap.add_argument("--slurm-2node", action="store_true", help="also the faults across 2 SLURM nodes (needs root)")
    ap.add_argument("--ray-2node", action="store_true", help="also start a 2-node Ray cluster and kill node 2 (root)")
    ap.add_argument("-o", "--output", help="also write the JSON here")
    ap.add_argument(
        "--scenarios",
        help="comma-separated names of the scenarios to run (default: all that the flags select), e.g. "
        "torn_files,concurrent_writers for a smoke run",
    )
    args = ap.parse_args(argv)
    import logging

    logging.getLogger("autotune.results.store").setLevel(logging.ERROR)  # the torn files are damaged on purpose
    t0 = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="autotune-reliability-"))
    root.chmod(0o755)  # the permission bad inputs run as an unprivileged user inside it
    scenarios: list[Scenario] = []
    plan = [concurrent_writers, torn_files, controller_kills_simulate]
    if not args.quick:
        plan += [controller_kill_local, trial_faults_local, genuine_oom]
    if args.slurm:
        plan.append(slurm_faults)
    if args.slurm_2node:
        plan += [slurm_2node_node_death, slurm_2node_rank_faults]
    if args.ray_2node:
        plan.append(ray_node_loss)
    chosen = set(args.scenarios.split(",")) if args.scenarios else {"bad_inputs"} | {fn.__name__ for fn in plan}
    known = {"bad_inputs"} | {fn.__name__ for fn in ALL_SCENARIOS}
    if chosen - known:
        ap.error(f"--scenarios: unknown {sorted(chosen - known)}; known: {sorted(known)}")
    plan = [fn for fn in ALL_SCENARIOS if fn.__name__ in chosen]
    tried = clean = unclear = 0
    try:
        if "bad_inputs" in chosen:
            bad, tried, clean, unclear = _timed(bad_inputs, root / "bad")
            scenarios.append(bad)
        for fn in plan:
            scenarios.append(_timed(fn, root / fn.__name__))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    figures = {
        "faults_injected": sum(s.faults for s in scenarios),
        "results_lost": sum(s.lost for s in scenarios),
        "duplicates": sum(s.duplicates for s in scenarios),
        "misclassified": sum(s.misclassified for s in scenarios),
        "bad_inputs_tried": tried,
        "clean_errors": clean,
        "unclear_errors": unclear,
        "scenarios": [asdict(s) for s in scenarios],
        "wall_s": round(time.monotonic() - t0, 1),
    }
    text = json.dumps(figures, indent=2)
    print(text)
    if args.output:
        Path(args.output).write_text(text + "\n")
    return 0 if figures["results_lost"] == 0 and figures["duplicates"] == 0 else 1


ALL_SCENARIOS = (
    concurrent_writers,
    torn_files,
    controller_kills_simulate,
    controller_kill_local,
    trial_faults_local,
    genuine_oom,
    slurm_faults,
    slurm_2node_node_death,
    slurm_2node_rank_faults,
    ray_node_loss,
)


def _timed(fn, work: Path):
    work.mkdir(parents=True, exist_ok=True)
    work.chmod(0o755)
    t0 = time.monotonic()
    out = fn(work)
    s = out[0] if isinstance(out, tuple) else out
    s.wall_s = round(time.monotonic() - t0, 1)
    return out


if __name__ == "__main__":
    sys.exit(main())
