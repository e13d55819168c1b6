"""Per-trial overhead of the SLURM and Ray backends against the local one, and engine start-up times; prints JSON.

The same 2-rank trial of the tiny model (1 warmup + 1 timed step) runs `--repeats` times through each backend, one
at a time; overhead = median(submit -> row) of the backend - median of local. SLURM runs on a one-node SLURM started
by launchers/scripts/slurm_local.sh in a temporary folder; Ray runs inside a private network namespace (this script
re-runs itself there with --only ray). Usage: python benchmarks/engine_overhead.py [--repeats 3]
[--backends slurm,ray] (`--backends ''`: local alone)
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def _spec(trial_id: str, backend: str, world_size: int = 2):
    from autotune.results.trialfile import make_spec
    from autotune.spec.config import load_config

    cfg = load_config(["experiment=demo", "train.global_batch_size=4"])
    return make_spec(
        cfg,
        cfg.plan(world_size),
        sweep_id="bench",
        trial_id=trial_id,
        backend=backend,
        warmup_steps=1,
        timed_steps=1,
        timeout_s=600.0,
    )


def _time_trials(launcher, backend: str, repeats: int, world_size: int = 2) -> list[float]:
    times = []
    for i in range(repeats):
        t0 = time.monotonic()
        row = launcher.submit(_spec(f"{backend}-{i}", backend, world_size)).result(timeout=900)
        times.append(time.monotonic() - t0)
        assert row["status"] == "ok", row["error_message"]
    return times


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bench_local(repeats: int, tmp: Path, world_size: int = 2) -> dict:
    from launchers.local import LocalLauncher

    return {"local_trial_s": _time_trials(LocalLauncher(workdir=tmp / "local"), "local", repeats, world_size)}


def bench_slurm(repeats: int, tmp: Path, world_size: int = 2) -> dict:
    from launchers.slurm import SlurmLauncher

    out = {}
    env = dict(
        os.environ,
        AUTOTUNE_SLURM_DIR=str(tmp / "slurm"),
        AUTOTUNE_SLURM_CTLD_PORT=str(_free_port()),
        AUTOTUNE_SLURM_SLURMD_PORT=str(_free_port()),
    )
    script = REPO / "launchers" / "scripts" / "slurm_local.sh"
    t0 = time.monotonic()
    subprocess.run(["bash", str(script), "start"], env=env, check=True, capture_output=True)
    out["slurm_start_s"] = time.monotonic() - t0
    os.environ["SLURM_CONF"] = str(tmp / "slurm" / "etc" / "slurm.conf")
    try:
        launcher = SlurmLauncher(workdir=tmp / "slurm-work", poll_s=1.0, time_limit_floor_min=5)
        out["slurm_trial_s"] = _time_trials(launcher, "slurm", repeats, world_size)
    finally:
        subprocess.run(["bash", str(script), "stop"], env=env, capture_output=True)
    return out


def bench_ray(repeats: int, tmp: Path, world_size: int = 2) -> dict:
    from launchers.ray_launcher import RayLauncher

    launcher = RayLauncher(workdir=tmp / "ray-work")
    t0 = time.monotonic()
    launcher._ensure_ray()
    out = {"ray_start_s": time.monotonic() - t0, "ray_trial_s": _time_trials(launcher, "ray", repeats, world_size)}
    launcher.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--backends",
        default="slurm,ray",
        help="backends compared with local (comma-separated; empty: local alone, the smoke test's run)",
    )
    parser.add_argument("--world-size", type=int, default=2, help="ranks per trial, every backend (the smoke test: 1)")
    parser.add_argument("--only", choices=("ray",), help=argparse.SUPPRESS)
    args = parser.parse_args()
    backends = [b for b in args.backends.split(",") if b]
    if set(backends) - {"slurm", "ray"}:
        parser.error(f"--backends={args.backends}: each must be slurm or ray")
    with tempfile.TemporaryDirectory(prefix="engine-bench-") as tmp:
        if args.only == "ray":
            print(json.dumps(bench_ray(args.repeats, Path(tmp), args.world_size)))
            return
        result = bench_local(args.repeats, Path(tmp), args.world_size)
        if "slurm" in backends:
            result.update(bench_slurm(args.repeats, Path(tmp), args.world_size))
        if "ray" in backends:
            result.update(_ray_in_private_netns(args.repeats, args.world_size))
    local = statistics.median(result["local_trial_s"])
    for backend in backends:
        result[f"{backend}_overhead_s"] = statistics.median(result[f"{backend}_trial_s"]) - local
    result.update(
        repeats=args.repeats, world_size=args.world_size, cpu_count=os.cpu_count(), load_avg_1m=os.getloadavg()[0]
    )
    print(json.dumps(result, indent=2))


def _ray_in_private_netns(repeats: int, world_size: int) -> dict:
    ray = subprocess.run(
        [
            "unshare",
            "--net",
            "sh",
            "-c",
            'ip link set lo up && exec "$@"',
            "sh",
            sys.executable,
            __file__,
            "--only",
            "ray",
            "--repeats",
            str(repeats),
            "--world-size",
            str(world_size),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(ray.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
