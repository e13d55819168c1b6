"""A real 2-node SLURM on one host, for the multi-node engine tests and `benchmarks/reliability.py --slurm-2node`.

tests/netns_nodes.py makes namespaces ats-n1, ats-n2 on a private bridge (10.201.0.1, 10.201.0.2; /etc/hosts there
names node1, node2); launchers/scripts/slurm_local.sh in its multi-node mode starts munged and slurmctld in node1's
namespace and `slurmd -N nodeK` in nodeK's (hostname nodeK), both nodes `Gres=gpu:4` of one partition. slurmctld
listens on node1's bridge address only, so every client (sbatch, squeue, scontrol, the sweep controller) runs inside
node1's namespace too (`TwoNodeSlurm.argv`). Nothing listens or gets an address in the root namespace.

One cluster per process (a module-level manager, like engine_fixtures' SLURM): both tests/engines and
tests/reliability register the fixture, and `close()` (a test may call it to check the teardown) leaves nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import netns_nodes
import pytest
from engine_fixtures import SLURM_SCRIPT, SlurmEngine
from proc_scan import processes_mentioning

PREFIX, SUBNET = "ats", "10.201.0"
AUTOTUNE = str(Path(sys.executable).with_name("autotune"))
# the tiny trials of the engine tests: demo model, one warm-up and two timed steps
TINY = ["experiment=demo", "train.global_batch_size=4", "sweep.warmup_steps=1"]
# exactly one layout of 4 GPUs: dp2 x tp2 (z0, mbs1, no recompute)
DP2_TP2 = [
    "space.tp=[2]",
    "space.pp=[1]",
    "space.cp=[1]",
    "space.zero_stage=[0]",
    "space.recompute=[none]",
    "space.micro_batch_size=[1]",
]
SLURMD_TIMEOUT_S = 6  # a killed node is DOWN (NODE_FAIL for its jobs) this long after its last answer
MSG_TIMEOUT_S = 5  # (default 10) the ping of a dead node fails this much sooner: NODE_FAIL ~12 s earlier


class TwoNodeSlurm(SlurmEngine):
    """slurm_local.sh in multi-node mode on the virtual nodes; `conf` is its slurm.conf."""

    def __init__(self, state_dir: Path, nodes: netns_nodes.VirtualNodes) -> None:
        super().__init__(state_dir)
        self.nodes = nodes
        spec = " ".join(f"{h}:{ns}:{a}" for h, ns, a in zip(nodes.hostnames, nodes.namespaces, nodes.addrs))
        self.env.update(
            AUTOTUNE_SLURM_NODES=spec,
            AUTOTUNE_SLURM_GPUS="4",
            AUTOTUNE_SLURM_SLURMD_TIMEOUT=str(SLURMD_TIMEOUT_S),
            AUTOTUNE_SLURM_MSG_TIMEOUT=str(MSG_TIMEOUT_S),
        )

    def argv(self, argv: list[str]) -> list[str]:
        """`argv` as a client of this cluster: inside node1's namespace (where slurmctld is reachable)."""
        return self.nodes.argv(0, argv)

    def client_env(self, **extra: str) -> dict[str, str]:
        return dict(os.environ, SLURM_CONF=str(self.conf), **extra)

    def run(self, *argv: str, timeout_s: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(
            self.argv(list(argv)), env=self.client_env(), capture_output=True, text=True, timeout=timeout_s
        )

    def kill_node(self, index: int) -> int:
        """A node dies: SIGKILL every process in its namespace (slurmd, step daemons, ranks). Returns how many."""
        pids = netns_nodes.pids_in(self.nodes.namespaces[index])
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return len(pids)

    def commands(self, index: int) -> set[str]:
        """Process names in node `index`'s namespace."""
        names = set()
        for pid in netns_nodes.pids_in(self.nodes.namespaces[index]):
            with contextlib.suppress(OSError):
                names.add(Path(f"/proc/{pid}/comm").read_text().strip())
        return names

    def start_node(self, index: int) -> None:
        """Bring a killed node's slurmd back (ReturnToService=2 returns it to service when it registers)."""
        out = subprocess.run(
            ["bash", str(SLURM_SCRIPT), "start-node", self.nodes.hostnames[index]],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr

    def node_states(self) -> dict[str, str]:
        out = self.run("sinfo", "-h", "-N", "-o", "%N %T").stdout.split()
        return dict(zip(out[::2], out[1::2]))

    def wait_nodes_idle(self, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            states = self.node_states()
            if len(states) == 2 and all(s.rstrip("*~#") in ("idle", "mixed", "allocated") for s in states.values()):
                return
            for name, s in states.items():
                if s.startswith("down") and not s.endswith("*"):  # answering again but still DOWN: resume it
                    self.run("scontrol", "update", f"nodename={name}", "state=resume")
            time.sleep(0.5)
        raise AssertionError(f"nodes not back: {self.node_states()}")


class TwoNodeCluster:
    """Starts the namespaces and the cluster on first `get()`, tears both down on `close()` (again on a later get)."""

    def __init__(self, state_root: Path) -> None:
        self.state_root = state_root
        self.engine: TwoNodeSlurm | None = None
        self.starts = 0

    def get(self) -> TwoNodeSlurm:
        if self.engine is None:
            netns_nodes.down(PREFIX)  # a previous run killed before its teardown
            nodes = netns_nodes.up(PREFIX, 2, SUBNET)
            self.starts += 1
            try:
                engine = TwoNodeSlurm(self.state_root / f"slurm2-{self.starts}", nodes)
                engine.start()
            except BaseException:
                netns_nodes.down(PREFIX)
                raise
            self.engine = engine
            print(f"\n[engines] 2-node SLURM started in {engine.start_s:.2f} s ({engine.conf})")
        return self.engine

    def close(self) -> Path | None:
        """Stop the daemons and remove the namespaces; returns the state folder of the cluster that was up."""
        engine, self.engine = self.engine, None
        if engine is not None:
            engine.stop()
        netns_nodes.down(PREFIX)
        return None if engine is None else engine.state_dir


_MANAGER: dict[str, TwoNodeCluster] = {}


@pytest.fixture(scope="session")
def two_node_manager(tmp_path_factory) -> Any:
    manager = _MANAGER.get("m")
    if manager is None:
        manager = _MANAGER["m"] = TwoNodeCluster(tmp_path_factory.mktemp("slurm2"))
    yield manager
    if _MANAGER.pop("m", None) is not None:  # the first teardown (session end) stops it
        manager.close()


@pytest.fixture
def slurm_2node(two_node_manager) -> TwoNodeSlurm:
    return two_node_manager.get()


def leaks(state_dir: Path) -> list[str]:
    """What a closed cluster left: namespaces / hosts folders of the prefix, and processes naming its state folder
    (slurmd, slurmctld, munged and step daemons all carry it on their command line or in SLURM_CONF)."""
    return netns_nodes.leftovers(PREFIX) + processes_mentioning(str(state_dir))


# ---------------------------------------------------------------- runs shared by the tests and the benchmark


def sweep(engine: TwoNodeSlurm, results: Path, sweep_id: str, gpus: int, *args: str, wait: bool = True) -> Any:
    """`autotune sweep --backend slurm` as a client inside node1's namespace, one trial per node-share of ranks
    (`sweep.slurm.gpus_per_node=gpus/2`: the job spans both nodes). Returns the CompletedProcess, or the Popen."""
    argv = engine.argv(
        [
            AUTOTUNE,
            "sweep",
            "--backend",
            "slurm",
            "--gpus",
            str(gpus),
            "--steps",
            "2",
            "--sweep-id",
            sweep_id,
            *args,
            *TINY,
            f"sweep.results_dir={results}",
            f"sweep.slurm.gpus_per_node={gpus // 2}",
            "sweep.slurm.poll_s=1",
        ]
    )
    if wait:
        return subprocess.run(argv, cwd=results, env=engine.client_env(), capture_output=True, text=True, timeout=900)
    return subprocess.Popen(
        argv, cwd=results, env=engine.client_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def jobs(engine: TwoNodeSlurm, name: str) -> dict[str, str]:
    """job id -> state of the jobs named `name` (autotune-<sweep_id>); finished ones stay visible for MinJobAge."""
    out = engine.run("squeue", "-h", "-r", "--states=all", "-n", name, "-o", "%i|%T")
    return dict(line.split("|", 1) for line in out.stdout.split() if "|" in line)


def wait_job(engine: TwoNodeSlurm, name: str, want: set[str], exclude: set[str], timeout_s: float = 300) -> str:
    """The first job named `name`, not in `exclude`, whose state is in `want`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        hit = [j for j, s in jobs(engine, name).items() if s in want and j not in exclude]
        if hit:
            return hit[0]
        time.sleep(0.5)
    raise AssertionError(f"no job {name} in {want} (excluding {exclude}): {jobs(engine, name)}")


def ranks_of(engine: TwoNodeSlurm, text: str) -> dict[str, list[int]]:
    """Per node namespace, the pids whose command line names `text` (a trial's folder: its ranks)."""
    out: dict[str, list[int]] = {}
    for ns in engine.nodes.namespaces:
        pids = []
        for pid in netns_nodes.pids_in(ns):
            with contextlib.suppress(OSError):
                if text in Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    pids.append(pid)
        out[ns] = pids
    return out


def node_fault_run(engine: TwoNodeSlurm, results: Path, max_requeues: int = 1) -> dict[str, Any]:
    """One 2-rank trial (a rank on each node, rank 0 hanging so it is mid-trial) whose node2 dies under every attempt:
    SIGKILL of everything in node2's namespace, slurmctld finds the node silent (SlurmdTimeout) -> NODE_FAIL, the
    launcher resubmits; node2's slurmd is started again for the next attempt. After max_requeues + 1 kills the row
    is crash/NodeFail. Returns what happened, for the test's asserts and the benchmark's figures."""
    name, killed, job_ids = "autotune-nodefail", 0, []
    proc = sweep(
        engine,
        results,
        "nodefail",
        2,
        "--max-trials",
        "1",
        "--inject-fault",
        "1:hang:900",
        f"sweep.slurm.max_requeues={max_requeues}",
        wait=False,
    )
    try:
        for _ in range(max_requeues + 1):
            job = wait_job(engine, name, {"RUNNING"}, set(job_ids))
            job_ids.append(job)
            deadline = time.monotonic() + 120  # mid-trial: the job's step daemon runs on node2
            while "slurmstepd" not in engine.commands(1):
                assert time.monotonic() < deadline, "the job never reached node2"
                time.sleep(0.2)
            killed += engine.kill_node(1) > 0
            wait_job(engine, name, {"NODE_FAIL"}, set(job_ids) - {job}, timeout_s=120)
            engine.start_node(1)
            engine.wait_nodes_idle()
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return {
        "rc": proc.returncode,
        "stderr": err[-3000:],
        "faults": killed,
        "job_ids": job_ids,
        "states": jobs(engine, name),
        "ranks_left": ranks_of(engine, str(results / "nodefail" / "work")),
        "sweep": results / "nodefail",
    }


def rank_faults_run(engine: TwoNodeSlurm, results: Path, timeout_s: float = 20.0) -> dict[str, Any]:
    """Two 2-rank trials at once (one job array), each with its rank 1 on node2: trial 1's rank 1 raises (srun
    --kill-on-bad-exit must end rank 0 on node1: job FAILED long before any timeout), trial 2's rank 1 hangs (the
    launcher's timeout cancels the job). Every rank on both nodes must be gone when the rows are written."""
    out = sweep(
        engine,
        results,
        "ranks2",
        2,
        "--max-trials",
        "2",
        "--parallel",
        "2",
        "--inject-fault",
        "1:crash_rank1:300",
        "--inject-fault",
        f"2:hang_rank1:{timeout_s}",
    )
    work = str(results / "ranks2" / "work")
    states = jobs(engine, "autotune-ranks2")
    return {
        "rc": out.returncode,
        "stderr": out.stderr[-3000:],
        "faults": len(states),  # each faulty trial's job ran
        "ranks_left": ranks_of(engine, work),
        "processes_left": processes_mentioning(work),
        "states": states,
        "sweep": results / "ranks2",
    }


def netbench_run(engine: TwoNodeSlurm, results: Path) -> tuple[dict[str, Any], Path]:
    """`autotune netbench --backend slurm --gpus 2`, one rank per node: the inter-node link class only (two ranks:
    a 4-rank run, which adds the intra class, cost 80 s on the loaded 2-core host)."""
    preset = results / "cpu-2node.yaml"
    argv = engine.argv(
        [
            AUTOTUNE,
            "netbench",
            "--backend",
            "slurm",
            "--gpus",
            "2",
            "--iters",
            "2",
            "--sizes",
            "4096,262144",
            "-o",
            str(preset),
            "--json",
            "cluster=cpu",
            f"sweep.results_dir={results}",
            "sweep.slurm.gpus_per_node=1",
            "sweep.slurm.poll_s=1",
        ]
    )
    proc = subprocess.run(argv, cwd=results, env=engine.client_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout), preset


__all__ = ["two_node_manager", "slurm_2node"]
