"""`autotune submit` (dry run and a real controller job on the test SLURM), hostile config values, job shapes, time
limits, SLURM-state mapping and the rank environments both launchers build."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from launchers.sbatch import SlurmOptions, controller_script, extra_sbatch_parameters, job_shape, time_limit_min

AUTOTUNE = str(Path(sys.executable).with_name("autotune"))
HOSTILE = "x'; touch /tmp/autotune-pwned; echo 'a b; rm -rf /"


def spec_for(world: int, overrides=(), **extra):
    from autotune.results.trialfile import make_spec
    from autotune.spec.config import load_config

    cfg = load_config(["experiment=demo", "train.global_batch_size=4", *overrides])
    return make_spec(cfg, cfg.plan(world), sweep_id="shapes", trial_id="t0", backend="slurm", **extra)


@pytest.mark.parametrize(
    "field, value",
    [
        ("partition", "a b; rm -rf /"),
        ("account", "$(reboot)"),
        ("qos", "x`id`"),
        ("constraint", "a\n#SBATCH --wrap=id"),
    ],
)
def test_hostile_names_are_refused_with_one_line(field, value):
    with pytest.raises(ValueError) as e:
        SlurmOptions.from_mapping({field: value})
    msg = str(e.value)
    assert f"sweep.slurm.{field}=" in msg and repr(value) in msg and "\n" not in msg


def test_extra_sbatch_lines_are_parsed_not_pasted():
    assert extra_sbatch_parameters(["--reservation=big", "--exclusive", "--comment=a100&ib"]) == {
        "reservation": "big",
        "exclusive": True,
        "comment": "a100&ib",
    }
    for bad in ["--comment=x\n#SBATCH --wrap=id", "rm -rf /", "--comment=a b", "--nodes=4", "--array=0-9"]:
        with pytest.raises(ValueError, match="extra_sbatch"):
            extra_sbatch_parameters([bad])


def test_cli_refuses_a_hostile_partition_with_exit_2():
    out = subprocess.run(
        [AUTOTUNE, "submit", "--gpus", "4", "--dry-run", "sweep.slurm.partition='a b; rm -rf /'"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines() == [
        "autotune: error: sweep.slurm.partition='a b; rm -rf /' must be a plain SLURM name or expression "
        "(no spaces, quotes, backslash, $, backtick or ;)"
    ]


def test_controller_script_quotes_every_argument(tmp_path):
    """Run the generated script with a stand-in "python" that records its argv: the hostile value arrives as one
    argument, and nothing it contains was executed."""
    dump, record = tmp_path / "argv.sh", tmp_path / "argv.txt"
    dump.write_text(f'#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done > {shlex.quote(str(record))}\n')
    dump.chmod(0o755)
    argv = ["--gpus", "4", f"model.name={HOSTILE}", "space.tp=[1,2]"]
    text = controller_script(
        argv,
        python=str(dump),
        workdir=str(tmp_path),
        log_path=str(tmp_path / "c-%j.log"),
        job_name="autotune-q",
        opts=SlurmOptions(partition="gpu", account="proj-1"),
    )
    assert "#SBATCH --partition=gpu" in text and "#SBATCH --account=proj-1" in text
    Path("/tmp/autotune-pwned").unlink(missing_ok=True)
    out = subprocess.run(["bash", "-c", text], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert record.read_text().splitlines() == ["-m", "autotune.cli.main", "sweep", *argv]
    assert not Path("/tmp/autotune-pwned").exists()


def test_dry_run_writes_the_scripts_and_submits_nothing(slurm_cluster, tmp_path):
    argv = [
        AUTOTUNE,
        "submit",
        "--dry-run",
        "--gpus",
        "4",
        "--backend",
        "slurm",
        "--max-trials",
        "3",
        "--parallel",
        "2",
        "--sweep-id",
        "dry",
        "experiment=demo",
        f"sweep.results_dir={tmp_path}",
        "sweep.slurm.partition=debug",
        f'model.name="{HOSTILE}"',
    ]
    out = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    folder = tmp_path / "dry" / "sbatch"
    controller = (folder / "controller.sbatch").read_text()
    exec_line = next(line for line in controller.splitlines() if line.startswith("exec "))
    words = shlex.split(exec_line)
    assert Path(words[1]).parent == Path(sys.executable).parent  # the venv's python (console script's spelling)
    assert words[2:] == [
        "-m",
        "autotune.cli.main",
        "sweep",
        "--gpus",
        "4",
        "--backend",
        "slurm",
        "--max-trials",
        "3",
        "--parallel",
        "2",
        "--sweep-id",
        "dry",
        *argv[-4:],
    ]
    trials = sorted(folder.glob("trials-wave0-*.sbatch"))
    assert trials, out.stdout
    wave = "".join(p.read_text() for p in trials)
    assert "#SBATCH --partition=debug" in wave and "--ntasks-per-node=4" in wave and "--gres=gpu:4" in wave
    jobs = slurm_cluster.run("squeue", "--states=all", "-h", "-n", "autotune-dry", "-o", "%i").stdout.split()
    assert jobs == []


def test_submit_runs_the_controller_as_a_slurm_job(slurm_cluster, tmp_path):
    """A real submission: the controller (here with the simulate backend, no ranks) runs as a batch job and writes
    its rows; submit prints the job id and the results folder."""
    argv = [
        AUTOTUNE,
        "submit",
        "--gpus",
        "4",
        "--backend",
        "simulate",
        "--max-trials",
        "2",
        "--sweep-id",
        "sub",
        "experiment=demo",
        f"sweep.results_dir={tmp_path}",
    ]
    out = subprocess.run(
        argv,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, SLURM_CONF=str(slurm_cluster.conf)),
    )
    assert out.returncode == 0, out.stderr
    job_id = out.stdout.split("submitted controller job ")[1].split()[0]
    assert f"results: {tmp_path / 'sub'}" in out.stdout
    deadline, state = time.monotonic() + 300, ""
    while time.monotonic() < deadline and state not in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"):
        time.sleep(1)
        state = slurm_cluster.run("squeue", "--states=all", "-h", "-j", job_id, "-o", "%T").stdout.strip()
    log = next((tmp_path / "sub.submit").glob("controller-*.log")).read_text()
    assert state == "COMPLETED", log[-3000:]
    from autotune.results.store import read_results

    rows = read_results(tmp_path / "sub")
    assert (rows["status"] == "simulated").sum() == 2, log[-3000:]


def test_job_shape_and_time_limit():
    """nodes = ceil(N / gpus_per_node), one task per GPU; time = max(floor, startup + factor x predicted run),
    capped at timeout_s + startup. Hand-computed: global batch 4 x 128 = 512 tokens per step; at 1 token/s/GPU on 4
    GPUs a step is 512 / 4 = 128 s; warmup 1 + timed 2 = 3 steps = 384 s; 180 + 3 x 384 = 1332 s -> 23 min."""

    def shape(spec, opts):
        s = job_shape(spec, opts)
        return s.nodes, s.tasks_per_node, s.gpus_per_node

    opts = SlurmOptions(gpus_per_node=8)
    assert shape(spec_for(4), opts) == (1, 4, 4)
    assert shape(spec_for(16, ["plan.tp=4"]), opts) == (2, 8, 8)
    assert shape(spec_for(12, ["train.global_batch_size=48"]), SlurmOptions(gpus_per_node=8, use_gres=False)) == (
        2,
        6,
        0,
    )
    with pytest.raises(ValueError, match="cannot be spread evenly"):
        job_shape(spec_for(9, ["train.global_batch_size=36"]), opts)
    spec = spec_for(4, warmup_steps=1, timed_steps=2, timeout_s=3600.0, pred_tokens_per_s_per_gpu=1.0)
    assert time_limit_min(spec, SlurmOptions(time_limit_floor_min=1)) == 23
    assert time_limit_min(spec, SlurmOptions(time_limit_floor_min=30)) == 30
    capped = spec_for(4, warmup_steps=1, timed_steps=2, timeout_s=600.0, pred_tokens_per_s_per_gpu=1.0)
    assert time_limit_min(capped, SlurmOptions(time_limit_floor_min=1)) == 13  # (600 + 180) / 60
    assert time_limit_min(spec_for(4, timeout_s=600.0), SlurmOptions(time_limit_floor_min=1)) == 13  # no prediction


def test_slurm_states_map_to_row_statuses():
    from launchers.slurm import slurm_status

    assert slurm_status("OUT_OF_MEMORY") == ("oom", "SlurmOutOfMemory")
    assert slurm_status("TIMEOUT") == ("timeout", "Timeout") == slurm_status("DEADLINE")
    assert slurm_status("FAILED") == ("crash", "SlurmFailed")
    assert slurm_status("CANCELLED") == ("crash", "Cancelled")
    assert slurm_status("NODE_FAIL") == ("crash", "NodeFail") and slurm_status("PREEMPTED") == ("crash", "Preempted")
    assert slurm_status("COMPLETED") == ("crash", "NoResult")  # completed, yet no rank wrote a result


def test_rank_env_from_slurm(slurm_cluster):
    from launchers.sbatch import rank_env

    env = rank_env(
        {
            "SLURM_JOB_NODELIST": "localhost",
            "SLURM_PROCID": "5",
            "SLURM_NTASKS": "8",
            "SLURM_LOCALID": "1",
            "SLURM_STEP_TASKS_PER_NODE": "4(x2)",
            "SLURM_NODEID": "1",
            "SLURM_JOB_ID": "40123",
            "PATH": os.environ["PATH"],
            "SLURM_CONF": str(slurm_cluster.conf),
        }
    )
    assert env == {
        "RANK": "5",
        "WORLD_SIZE": "8",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "4",
        "GROUP_RANK": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(20000 + 40123 % 20000),
        "GLOO_SOCKET_IFNAME": "lo",
        "NCCL_SOCKET_IFNAME": "lo",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
    }


def test_ray_rank_envs_share_gpus_per_node():
    from launchers.ray_launcher import ray_rank_envs

    infos = [
        {"node_id": "A", "ip": "10.0.0.1", "gpu_ids": ["3"]},
        {"node_id": "A", "ip": "10.0.0.1", "gpu_ids": ["1"]},
        {"node_id": "B", "ip": "10.0.0.2", "gpu_ids": ["0"]},
        {"node_id": "B", "ip": "10.0.0.2", "gpu_ids": ["10"]},
    ]
    envs = ray_rank_envs(infos, "10.0.0.1", 29500)
    assert [e["CUDA_VISIBLE_DEVICES"] for e in envs] == ["1,3", "1,3", "0,10", "0,10"]
    assert [e["LOCAL_RANK"] for e in envs] == ["1", "0", "0", "1"]
    assert [e["GROUP_RANK"] for e in envs] == ["0", "0", "1", "1"]
    assert {e["MASTER_ADDR"] for e in envs} == {"10.0.0.1"} and "GLOO_SOCKET_IFNAME" not in envs[0]
    assert all(e["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1" for e in envs)  # the SLURM launcher's NCCL env too
    assert ray_rank_envs(infos, "10.0.0.1", 29500, tp=2)[0]["CUDA_DEVICE_MAX_CONNECTIONS"] == "1"
    cpu = ray_rank_envs([{"node_id": "A", "ip": "127.0.0.1", "gpu_ids": []}] * 2, "127.0.0.1", 1234)
    assert [(e["LOCAL_RANK"], e["LOCAL_WORLD_SIZE"]) for e in cpu] == [("0", "2"), ("1", "2")]
    assert "CUDA_VISIBLE_DEVICES" not in cpu[0] and cpu[0]["GLOO_SOCKET_IFNAME"] == "lo"


def test_ray_rank_envs_name_the_gloo_interface_and_lost_nodes(monkeypatch):
    """A rank's GLOO_SOCKET_IFNAME is the interface holding its node's Ray address (a site's own setting wins); a
    trial whose actors stopped answering names the dead node and its ranks (NodeLost), or says the node lives on."""
    from launchers.ray_launcher import ActorLost, NodeLost, lost_ranks_error, ray_rank_envs

    monkeypatch.delenv("GLOO_SOCKET_IFNAME", raising=False)
    infos = [
        {"node_id": "A", "ip": "10.202.0.1", "ifname": "eth0", "gpu_ids": []},
        {"node_id": "B", "ip": "10.202.0.2", "ifname": "ens5", "gpu_ids": []},
    ]
    assert [e["GLOO_SOCKET_IFNAME"] for e in ray_rank_envs(infos, "10.202.0.1", 29500)] == ["eth0", "ens5"]
    assert "NCCL_SOCKET_IFNAME" not in ray_rank_envs(infos, "10.202.0.1", 29500)[0]  # NCCL picks its own NICs
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "ib0")
    assert "GLOO_SOCKET_IFNAME" not in ray_rank_envs(infos, "10.202.0.1", 29500)[1]  # the rank inherits ib0

    err = lost_ranks_error(infos * 2, alive=[0, 2], dead_nodes={"B"}, error=RuntimeError("actor died\nmore"))
    assert isinstance(err, NodeLost)
    assert str(err) == "node 10.202.0.2 left the cluster mid-trial (ranks [1, 3] lost): actor died"
    err = lost_ranks_error(infos, alive=[0], dead_nodes=set(), error=RuntimeError("worker killed"))
    assert isinstance(err, ActorLost) and str(err).startswith("the actors of ranks [1] died")
