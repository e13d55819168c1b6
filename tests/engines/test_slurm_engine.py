"""The SLURM backend against a real slurmctld/slurmd (one node on 127.0.0.1, 8 fake GPUs): a wave leaves as one job
array whose elements end ok / crash / timeout, a node failure is requeued a bounded number of times, and `autotune
sweep --backend slurm` finishes a sweep. Contract behaviour (crash, timeout, cancel, oom, no process left) is covered
by tests/contract for `slurm` too; the 4-rank trial against a 1-rank run and netbench run on the 2-node cluster
(test_slurm_2node.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from site_cluster import site_slurm_overrides, slurm_sweep_argv

REPO = Path(__file__).resolve().parents[2]
AUTOTUNE = str(Path(sys.executable).with_name("autotune"))
TINY = ["experiment=demo", "train.global_batch_size=4"]


def spec_for(trial_id: str, backend: str, world: int, overrides=(), **extra):
    from autotune.results.trialfile import make_spec
    from autotune.spec.config import load_config

    cfg = load_config(TINY + list(overrides))
    fields = dict(warmup_steps=1, timed_steps=2, timeout_s=300.0)
    fields.update(extra)
    return make_spec(cfg, cfg.plan(world), sweep_id="engines", trial_id=trial_id, backend=backend, **fields)


def listening_addresses(port: int) -> set[str]:
    """IPv4 addresses with a LISTEN socket on `port`, from /proc/net/tcp (state 0A = LISTEN)."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        addr_hex, port_hex = local.split(":")
        if state == "0A" and int(port_hex, 16) == port:
            found.add(".".join(str(int(addr_hex[i : i + 2], 16)) for i in (6, 4, 2, 0)))
    return found


def test_slurm_engine_is_one_node_on_loopback(slurm_cluster):
    out = slurm_cluster.run("sinfo", "-h", "-N", "-o", "%N %T %c %G")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["localhost", "idle", "16", "gpu:8"]
    for key in ("AUTOTUNE_SLURM_CTLD_PORT", "AUTOTUNE_SLURM_SLURMD_PORT"):
        assert listening_addresses(int(slurm_cluster.env[key])) == {"127.0.0.1"}, key
    assert slurm_cluster.start_s < 60


def test_wave_is_one_job_array_with_mapped_states(slurm_launcher_factory, slurm_cluster, tmp_path):
    launcher = slurm_launcher_factory(tmp_path, max_in_flight=2)
    specs = [
        spec_for("w-ok", "slurm", 2),
        spec_for("w-crash", "slurm", 2, inject_fault="crash"),
        spec_for("w-hang", "slurm", 2, inject_fault="hang", timeout_s=15.0),
    ]
    handles = launcher.submit_many(specs)
    ids = [h.job_ids[0] for h in handles]
    array_id = ids[0].split("_")[0]
    assert ids == [f"{array_id}_{i}" for i in range(3)], ids
    script = next(Path(handles[0].log_path).parent.parent.glob(f"{array_id}/*_submission.sh"), None) or next(
        (tmp_path / "logs").rglob("*_submission.sh")
    )
    text = script.read_text()
    assert "#SBATCH --array=0-2%2" in text and "#SBATCH --gres=gpu:2" in text and "--kill-on-bad-exit=1" in text
    rows = [h.result(timeout=600) for h in handles]
    assert [(r["status"], r["error_type"]) for r in rows] == [
        ("ok", None),
        ("crash", "RuntimeError"),
        ("timeout", "Timeout"),
    ], [r["error_message"] for r in rows]
    states = slurm_cluster.run("squeue", "--states=all", "-h", "-r", "-o", "%i %T", "-j", array_id).stdout.split()
    assert dict(zip(states[::2], states[1::2])) == {ids[0]: "COMPLETED", ids[1]: "FAILED", ids[2]: "CANCELLED"}
    launcher.close()


def _wait_state(engine, job_id: str, want: set[str], timeout_s: float = 120) -> str:
    deadline = time.monotonic() + timeout_s
    state = ""
    while time.monotonic() < deadline:
        state = engine.run("squeue", "--states=all", "-h", "-r", "-o", "%T", "-j", job_id).stdout.strip()
        if state in want:
            return state
        time.sleep(0.5)
    raise AssertionError(f"job {job_id} stayed {state!r}, wanted {want}")


def _resume(engine, timeout_s: float = 60) -> None:
    """Bring the node back (ReturnToService=2 may already have done it when slurmd re-registered)."""
    deadline = time.monotonic() + timeout_s
    state = ""
    while time.monotonic() < deadline:
        state = engine.run("sinfo", "-h", "-n", "localhost", "-o", "%T").stdout.strip()
        if state.rstrip("*~#") in ("idle", "mixed", "allocated"):
            return
        engine.run("scontrol", "update", "nodename=localhost", "state=resume")
        time.sleep(0.5)
    raise AssertionError(f"node stayed {state!r}")


def test_node_failure_is_requeued_a_bounded_number_of_times(slurm_launcher_factory, slurm_cluster, tmp_path):
    """A real NODE_FAIL (the node set DOWN under a running job): resubmitted once (max_requeues=1), the second failure
    becomes a crash row naming the state."""
    launcher = slurm_launcher_factory(tmp_path, max_requeues=1)
    handle = launcher.submit(spec_for("nf", "slurm", 2, inject_fault="hang", timeout_s=300.0))
    try:
        for attempt in range(2):
            while len(handle.job_ids) < attempt + 1:
                time.sleep(0.5)
            job_id = handle.job_ids[attempt]
            _wait_state(slurm_cluster, job_id, {"RUNNING"})
            down = slurm_cluster.run("scontrol", "update", "nodename=localhost", "state=down", "reason=engine-test")
            assert down.returncode == 0, down.stderr
            _wait_state(slurm_cluster, job_id, {"NODE_FAIL"})
            _resume(slurm_cluster)
        row = handle.result(timeout=300)
    finally:
        _resume(slurm_cluster)
    assert (row["status"], row["error_type"]) == ("crash", "NodeFail"), row["error_message"]
    assert "NODE_FAIL" in row["error_message"] and "after 1 requeue" in row["error_message"]
    assert len(handle.job_ids) == 2 and handle.requeues == 1
    launcher.close()


def test_sweep_backend_slurm_finishes_with_parquet_rows_and_report(slurm_cluster, tmp_path):
    """`autotune sweep --backend slurm --gpus 2`: two real trials leave as one job array (--parallel 2). Two ranks per
    trial: two parallel trials of 4 would time-share 8 ranks on a 2-core box, and a 4-rank trial through SLURM is
    already compared with a 1-rank run on the 2-node cluster (test_slurm_2node.py)."""
    env = dict(os.environ, SLURM_CONF=str(slurm_cluster.conf))
    overrides = (*TINY, "sweep.warmup_steps=1", *site_slurm_overrides())
    argv = slurm_sweep_argv(AUTOTUNE, "s1", tmp_path, *overrides, parallel=2)
    out = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    from autotune.results.store import read_results

    rows = read_results(tmp_path / "s1")
    ran = rows[rows["status"] != "pruned"]
    assert len(ran) == 2 and set(ran["status"]) == {"ok"} and set(ran["backend"]) == {"slurm"}, ran[
        ["status", "error_message"]
    ]
    assert (ran["tokens_per_s"] > 0).all() and (ran["num_gpus"] == 2).all()
    report = subprocess.run(
        [AUTOTUNE, "report", str(tmp_path / "s1")], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert report.returncode == 0, report.stderr
    assert all(t in report.stdout for t in ran["trial_id"]), report.stdout
