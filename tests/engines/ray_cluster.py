"""A real 2-node Ray cluster on one host, for the engine tests and benchmarks/reliability.py --ray-2node.

Two virtual nodes (tests/netns_nodes.py, prefix `atr`, subnet 10.202.0): `ray start --head` in atr-n1 on 10.202.0.1,
`ray start --address=10.202.0.1:6379` in atr-n2 on 10.202.0.2. Every Ray process gets `--node-ip-address` = its
namespace's bridge address; the namespaces hold only loopback and the bridge and have no route out, so nothing listens
on or connects to any other address (Ray left alone binds the external interface and probes a public DNS server).
Each node has its own TMPDIR and Ray temp dir under ROOT/n<i>/, so a rank's files on node 2 are in a folder the
driver (on node 1) never reads: the launcher must ship them back through Ray.

Never `ray stop` here: it kills every Ray process of the HOST (psutil over all processes, namespaces notwithstanding),
other sessions' included. A node is stopped by killing the processes of its namespace (`kill_node`), the cluster by
`netns_nodes.down`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: netns_nodes, proc_scan
import netns_nodes  # noqa: E402
from proc_scan import processes_mentioning  # noqa: E402

PREFIX, SUBNET = "atr", "10.202.0"
ROOT = Path("/tmp/autotune-atr")  # short on purpose: Ray's unix socket paths under it must stay < 108 bytes
GCS_PORT = 6379
CPUS_PER_NODE = 2  # a 4-rank trial (1 CPU per rank) must span both nodes; a 2-rank trial fits on one
RAY = str(Path(sys.executable).with_name("ray"))
ADDRESS_ENV = "AUTOTUNE_RAY_ADDRESS"  # tells a child pytest on the head node which cluster to join
# Whatever token a shared ~/.ray/auth_token holds (Ray turns token auth on when one exists and RAY_AUTH_MODE is
# unset), every process of this cluster agrees: no auth on a network that only these namespaces reach. The GCS
# declares a node dead after 3 missed 1 s health checks instead of 5 missed 3 s ones: a node-loss test waits 3 s.
RAY_ENV = {
    "RAY_AUTH_MODE": "disabled",
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
}

# No idle workers started ahead of demand (Ray starts one per CPU): on a 2-core box they compete with the ranks.
# The head's GCS hands this config to every raylet that joins.
SYSTEM_CONFIG = '{"enable_worker_prestart": false, "prestart_worker_first_driver": false}'


@dataclass
class RayCluster:
    nodes: netns_nodes.VirtualNodes
    root: Path = ROOT
    cpus_per_node: int = CPUS_PER_NODE
    start_s: dict[int, float] = field(default_factory=dict)

    @property
    def address(self) -> str:
        return f"{self.nodes.addrs[0]}:{GCS_PORT}"

    def env(self, node: int = 0) -> dict[str, str]:
        """The environment of a process on `node`: its own TMPDIR, the cluster's Ray settings and address."""
        tmp = self.root / f"n{node + 1}" / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
        return {**env, **RAY_ENV, "TMPDIR": str(tmp), ADDRESS_ENV: self.address}

    def argv(self, node: int, argv: Sequence[str]) -> list[str]:
        return self.nodes.argv(node, argv)

    def start_node(self, node: int) -> None:
        """`ray start` on `node` (0 = head); fails with Ray's output if it does not come up. Ray gives a raylet a
        fixed 30 s to register with the GCS; on an overloaded 2-core box that can pass, so one more try (after
        killing what the first left in the namespace), as the launcher does for its local Ray."""
        ip, temp = self.nodes.addrs[node], self.root / f"n{node + 1}" / "ray"
        head = ["--head", f"--port={GCS_PORT}", "--include-dashboard=false", f"--system-config={SYSTEM_CONFIG}"]
        role = head if node == 0 else [f"--address={self.address}"]
        argv = [RAY, "start", *role, f"--node-ip-address={ip}", f"--num-cpus={self.cpus_per_node}", "--num-gpus=0"]
        argv += ["--disable-usage-stats", f"--temp-dir={temp}"]
        t0 = time.monotonic()
        for _attempt in (1, 2):
            out = subprocess.run(self.argv(node, argv), env=self.env(node), capture_output=True, text=True, timeout=300)
            if out.returncode == 0:
                self.start_s[node] = time.monotonic() - t0
                return
            self.kill_node(node)
            shutil.rmtree(temp, ignore_errors=True)
        raise RuntimeError(f"ray start on {ip} failed twice (rc={out.returncode}):\n{out.stderr[-3000:]}")

    def kill_node(self, node: int) -> int:
        """SIGKILL every process of `node`'s namespace (raylet, workers, ranks): the host powered off. Returns how
        many processes were alive to kill."""
        pids = netns_nodes.pids_in(self.nodes.namespaces[node])
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return len(pids)

    def stop(self) -> None:
        netns_nodes.down(PREFIX, grace_s=1.0)  # nothing of a test cluster is worth a graceful Ray shutdown
        shutil.rmtree(self.root, ignore_errors=True)

    def leftovers(self) -> list[str]:
        """Namespaces, hosts files and processes (raylet, gcs_server, workers, ranks) of this cluster still there."""
        return netns_nodes.leftovers(PREFIX) + processes_mentioning(str(self.root))


def start_cluster(num_nodes: int = 2) -> RayCluster:
    netns_nodes.down(PREFIX)  # a previous run killed before its teardown
    shutil.rmtree(ROOT, ignore_errors=True)
    cluster = RayCluster(netns_nodes.up(PREFIX, num_nodes, SUBNET))
    try:
        for node in range(num_nodes):
            cluster.start_node(node)
    except BaseException:
        cluster.stop()
        raise
    return cluster


@contextlib.contextmanager
def ray_cluster(num_nodes: int = 2) -> Iterator[RayCluster]:
    cluster = start_cluster(num_nodes)
    try:
        yield cluster
    finally:
        cluster.stop()


def run_pytest_on_head(
    cluster: RayCluster, paths: list[str], timeout_s: float, extra: Sequence[str] = ()
) -> subprocess.CompletedProcess:
    """pytest on `paths` as a driver on the head node (its namespace, its TMPDIR), joining the cluster."""
    from engine_fixtures import IN_NETNS_ENV, REPO

    argv = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *extra, *paths]
    env = {**cluster.env(0), IN_NETNS_ENV: "1"}
    return subprocess.run(cluster.argv(0, argv), cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout_s)
