"""The sweep controller SIGKILLed at random points and resumed: every candidate ends in the folder exactly once.

The kill points are chosen from the folder's progress (a seeded random number of trial files written, watched every
few ms), so they land in every phase: right after sweep.yaml, right after the planner's pruned rows (one pruned.parquet), among the
simulated trials, near the end. Each kill is real (SIGKILL of the `autotune` process, never a clean exit); each resume
is `autotune sweep --sweep-id ID --resume-if-exists` again. The final folder must equal an uninterrupted reference sweep
of the same config: the same candidates with the same statuses, one file each, every file readable. One more point
runs on the local backend: the controller is killed while a real torchrun trial is in flight.
"""

from __future__ import annotations

import random
import subprocess
import time
from pathlib import Path

from harness import AUTOTUNE, count_rows, final_state, kill_when, processes_mentioning

SIM = ["--gpus", "8", "--backend", "simulate", "--max-trials", "40", "experiment=demo"]
SEED = 20261122


def _start(cwd: Path, sweep_id: str, args: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        [AUTOTUNE, "sweep", "--sweep-id", sweep_id, "--resume-if-exists", *args],
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_simulate_controller_killed_at_random_points(tmp_path):
    ref = subprocess.run(
        [AUTOTUNE, "sweep", "--sweep-id", "reference", *SIM], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert ref.returncode == 0, ref.stderr[-2000:]
    expected = final_state(tmp_path / "results" / "reference")
    num_pruned = sum(s == "pruned" for s in expected.values())
    total = len(expected)
    assert sum(s == "simulated" for s in expected.values()) == 40

    rng = random.Random(SEED)
    # (phase, files-written threshold): one point per phase, each threshold drawn at random within its phase
    # the planner's pruned rows land in one write (pruned.parquet), then one file per trial
    points = [
        ("after sweep.yaml", None),
        ("pruned rows written", num_pruned),
        ("first simulated trials", rng.randint(num_pruned + 1, num_pruned + 10)),
        ("middle", rng.randint(num_pruned + 11, num_pruned + 25)),
        ("near the end", rng.randint(num_pruned + 26, total - 2)),
    ]
    sweep = tmp_path / "results" / "killed"
    kills = []
    for phase, threshold in points:
        proc = _start(tmp_path, "killed", SIM)
        if threshold is None:
            ready = lambda: (sweep / "sweep.yaml").exists()  # noqa: E731
        else:
            ready = lambda t=threshold: count_rows(sweep) >= t  # noqa: E731
        hit = kill_when(proc, ready)
        kills.append((phase, threshold, hit, count_rows(sweep)))
        assert hit, f"the sweep finished before the kill point {phase} ({threshold} files): {kills}"
    assert [k[3] for k in kills] == sorted(k[3] for k in kills)  # progress is kept across kills, never lost

    done = subprocess.run(
        [AUTOTUNE, "sweep", "--sweep-id", "killed", "--resume-if-exists", *SIM],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert final_state(sweep) == expected, kills  # every candidate exactly once, same outcome as without kills


def test_killed_between_mkdir_and_sweep_yaml_is_resumable(tmp_path):
    """The one state a kill inside SweepStore.create can leave: the folders, no sweep.yaml, no file."""
    for sub in ("trials", "logs", "plots", "work"):
        (tmp_path / "results" / "half" / sub).mkdir(parents=True)
    proc = subprocess.run(
        [
            AUTOTUNE,
            "sweep",
            "--sweep-id",
            "half",
            "--resume-if-exists",
            "--gpus",
            "8",
            "--backend",
            "simulate",
            "--max-trials",
            "5",
            "experiment=demo",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sum(s == "simulated" for s in final_state(tmp_path / "results" / "half").values()) == 5


def test_local_controller_killed_with_a_trial_in_flight(tmp_path):
    """Kill the controller while its first real trial runs; the resume must run that candidate (it has no row), and
    when everything ends nothing of the sweep is left running."""
    args = [
        "--gpus",
        "2",
        "--backend",
        "local",
        "--max-trials",
        "2",
        "--steps",
        "1",
        "experiment=demo",
        "sweep.warmup_steps=1",
    ]
    sweep = tmp_path / "results" / "lk"
    proc = _start(tmp_path, "lk", args)
    in_flight = lambda: any((sweep / "work").glob("*/SPEC.json"))  # noqa: E731 - the launcher wrote the trial's spec
    assert kill_when(proc, in_flight), "the controller ended before its first trial started"
    first = [p.parent.name for p in (sweep / "work").glob("*/SPEC.json")]
    state = final_state(sweep)
    assert all(state.get(t[1:]) in (None, "pruned") for t in first)  # the in-flight trial has no row yet

    done = subprocess.run(
        [AUTOTUNE, "sweep", "--sweep-id", "lk", "--resume-if-exists", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    state = final_state(sweep)
    ran = {c: s for c, s in state.items() if s != "pruned"}
    assert len(ran) == 2 and set(ran.values()) == {"ok"}, ran
    assert {t[1:] for t in first} <= set(ran)  # the killed trial's candidate was run again, once
    deadline = time.monotonic() + 60  # orphans of the killed controller's torchrun finish on their own
    while processes_mentioning(str(sweep)) and time.monotonic() < deadline:
        time.sleep(1)
    assert processes_mentioning(str(sweep)) == []
