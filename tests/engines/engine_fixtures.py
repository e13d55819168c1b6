"""Real engines for tests: a one-node SLURM on 127.0.0.1 (launchers/scripts/slurm_local.sh: munged, slurmctld,
slurmd, 8 fake GPUs) and a 2-node Ray on virtual nodes (tests/engines/ray_cluster.py): the fixtures here join it from
a pytest that runs on its head node.

Each pytest session gets its own SLURM (own state folder, own free ports), so concurrent sessions do not meet. When an
engine cannot start, the fixture FAILS with the daemons' log tail: a missing engine is a broken CI, never a skip.

Import these fixtures into a conftest (`from engine_fixtures import *`): tests/engines/conftest.py does, and
tests/contract/launcher_cases.py reaches them through `request.getfixturevalue`.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SLURM_SCRIPT = REPO / "launchers" / "scripts" / "slurm_local.sh"
IN_NETNS_ENV = "AUTOTUNE_IN_NETNS"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class SlurmEngine:
    """A running one-node SLURM: `conf` is its slurm.conf (SLURM_CONF), `start_s` how long start-up took."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir
        self.env = dict(
            os.environ,
            AUTOTUNE_SLURM_DIR=str(state_dir),
            AUTOTUNE_SLURM_CTLD_PORT=str(_free_port()),
            AUTOTUNE_SLURM_SLURMD_PORT=str(_free_port()),
        )
        self.conf = state_dir / "etc" / "slurm.conf"
        self.start_s = float("nan")

    def _script(self, action: str, timeout_s: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", str(SLURM_SCRIPT), action], env=self.env, capture_output=True, text=True, timeout=timeout_s
        )

    def start(self) -> SlurmEngine:
        missing = [
            b
            for b in ("munged", "slurmctld", "slurmd", "sbatch", "srun", "squeue")
            if shutil.which(b) is None and not Path("/usr/sbin", b).exists()
        ]
        if missing:
            pytest.fail(
                f"SLURM engine: {', '.join(missing)} not installed (bash .ci/run apt-installs slurm-wlm munge)",
                pytrace=False,
            )
        t0 = time.monotonic()
        out = self._script("start")
        self.start_s = time.monotonic() - t0
        if out.returncode != 0:
            logs = "".join(p.read_text()[-2000:] for p in sorted((self.state_dir / "log").glob("*.log")))
            pytest.fail(
                f"SLURM engine did not start (rc={out.returncode}):\n{out.stdout}\n{out.stderr}\n{logs}", pytrace=False
            )
        return self

    def stop(self) -> None:
        self._script("stop", timeout_s=60)

    def run(self, *argv: str, timeout_s: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(
            list(argv),
            env=dict(os.environ, SLURM_CONF=str(self.conf)),
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )


_SHARED: dict[str, Any] = {}


class SiteSlurm(SlurmEngine):
    """The site's SLURM (`pytest --slurm-partition`, tests/site_cluster.py): started and stopped by nobody here."""

    def __init__(self) -> None:
        self.state_dir = Path(os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf")).parent
        self.env = dict(os.environ)
        self.conf = self.state_dir / Path(os.environ.get("SLURM_CONF", "slurm.conf")).name
        self.start_s = 0.0

    def stop(self) -> None:
        pass


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory) -> Any:
    """A real SLURM for this session; SLURM_CONF points every sbatch/squeue (and every child process) at it. One
    engine per process even when several conftests register this fixture (tests/contract and tests/engines).
    With `--slurm-partition` it is the site's cluster, as configured in the environment."""
    from site_cluster import site_partition

    if site_partition():
        yield SiteSlurm()
        return
    engine = _SHARED.get("slurm")
    if engine is None:
        engine = _SHARED["slurm"] = SlurmEngine(tmp_path_factory.mktemp("slurm")).start()
        _SHARED["old_conf"] = os.environ.get("SLURM_CONF")
        os.environ["SLURM_CONF"] = str(engine.conf)
        print(f"\n[engines] SLURM started in {engine.start_s:.2f} s ({engine.conf})")
    yield engine
    if _SHARED.pop("slurm", None) is not None:  # the first teardown (session end) stops it
        engine.stop()
        old = _SHARED.pop("old_conf", None)
        if old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old


@pytest.fixture(scope="session")
def slurm_launcher_factory(slurm_cluster) -> Callable[..., Any]:
    """`factory(tmp_path, **options)` -> a SlurmLauncher on the session's SLURM, polling every second."""
    from site_cluster import site_slurm_options

    from launchers.slurm import SlurmLauncher

    def make(tmp: Path, **options: Any) -> Any:
        options = {"poll_s": 1.0, "time_limit_floor_min": 5, **site_slurm_options(), **options}
        return SlurmLauncher(workdir=tmp / "work", log_dir=tmp / "logs", **options)

    return make


# ------------------------------------------- Ray: only on the virtual nodes of tests/engines/ray_cluster.py


def net_interfaces() -> list[str]:
    """Interfaces of this process's network namespace (/proc/net/dev is per namespace; /sys/class/net is not: it shows
    the namespace that mounted sysfs)."""
    lines = Path("/proc/net/dev").read_text().splitlines()[2:]
    return sorted(line.split(":")[0].strip() for line in lines)


def has_route_out() -> bool:
    """Does this namespace have a default route (IPv4 or IPv6)? /proc/net/route and ipv6_route are per namespace."""
    v4 = Path("/proc/net/route").read_text().splitlines()[1:]
    v6 = Path("/proc/net/ipv6_route").read_text().splitlines() if Path("/proc/net/ipv6_route").exists() else []
    default4 = any(line.split()[1] == "00000000" for line in v4 if len(line.split()) > 1)
    default6 = any(line.split()[0] == "0" * 32 and line.split()[1] == "00" and line.split()[-1] != "lo" for line in v6)
    return default4 or default6


def in_private_netns() -> bool:
    """True on a virtual node of the test cluster: marked by the env, loopback and the private bridge only, and no
    route out of it."""
    return os.environ.get(IN_NETNS_ENV) == "1" and set(net_interfaces()) <= {"lo", "eth0"} and not has_route_out()


def require_private_netns() -> None:
    if not in_private_netns():
        pytest.fail(
            "Ray tests must run on the head node of tests/engines/ray_cluster.py (run_pytest_on_head); "
            f"interfaces here: {net_interfaces()}, route out: {has_route_out()}",
            pytrace=False,
        )


TEST_CLUSTER_ADDRESS = "10.202.0.1:6379"  # tests/engines/ray_cluster.py's head


def ray_target_ready() -> bool:
    """Is there a Ray cluster to test against: the 2-node test cluster from its head node (run_pytest_on_head), or a
    real cluster named by AUTOTUNE_RAY_ADDRESS (docs/engines.md "Against a real multi-node Ray cluster")."""
    address = os.environ.get("AUTOTUNE_RAY_ADDRESS", "")
    return bool(address) and (address != TEST_CLUSTER_ADDRESS or in_private_netns())


def ray_address() -> str:
    """The cluster's GCS address; on the test cluster, only from inside its head node's namespace."""
    address = os.environ.get("AUTOTUNE_RAY_ADDRESS", "")
    if not address:
        pytest.fail("AUTOTUNE_RAY_ADDRESS is not set: run the Ray tests through tests/engines/test_ray_engine.py")
    if address == TEST_CLUSTER_ADDRESS:
        require_private_netns()
    return address


@pytest.fixture(scope="session")
def ray_session(tmp_path_factory) -> Any:
    """The session's driver connection to the 2-node cluster (sweep.ray.address=<head>:6379, as on a real
    cluster); every RayLauncher of the session shares it."""
    from launchers.ray_launcher import RayLauncher

    owner = RayLauncher(workdir=tmp_path_factory.mktemp("ray-owner"), ray={"address": ray_address()})
    t0 = time.monotonic()
    try:
        owner._ensure_ray()
    except Exception as e:  # noqa: BLE001 - any failure to join is a failed engine
        pytest.fail(f"Ray engine: cannot join {owner.address}: {e}", pytrace=False)
    owner.start_s = time.monotonic() - t0
    print(f"\n[engines] joined Ray at {owner.address} in {owner.start_s:.2f} s")
    yield owner
    owner.close()


@pytest.fixture(scope="session")
def ray_launcher_factory(ray_session) -> Callable[..., Any]:
    from launchers.ray_launcher import RayLauncher

    def make(tmp: Path, **options: Any) -> Any:
        options = {"address": ray_session.address, **options}
        return RayLauncher(workdir=tmp / "work", log_dir=tmp / "logs", **options)

    return make


__all__ = [
    "slurm_cluster",
    "slurm_launcher_factory",
    "ray_session",
    "ray_launcher_factory",
    "SlurmEngine",
    "has_route_out",
    "in_private_netns",
    "net_interfaces",
    "ray_address",
    "ray_target_ready",
    "require_private_netns",
]


def run_netbench_cli(
    backend: str, tmp_path: Path, env: dict[str, str] | None = None, overrides: tuple[str, ...] = ()
) -> dict[str, Any]:
    """`autotune netbench --backend BACKEND --gpus 2 [overrides]` on the tiny `cpu` preset; checks what every backend
    must deliver and returns the --json result."""
    import json

    import yaml

    from autotune.spec.config import load_config

    out = tmp_path / f"cpu-{backend}.yaml"
    argv = [
        str(Path(sys.executable).with_name("autotune")),
        "netbench",
        "--backend",
        backend,
        "--gpus",
        "2",
        "--iters",
        "2",
        "--sizes",
        "4096,262144",
        "-o",
        str(out),
        "--json",
        "cluster=cpu",
        f"sweep.results_dir={tmp_path}",
        *overrides,
    ]
    proc = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert "only the intra-node link class is measurable" in result["notes"][0]
    # 5 collectives (netbench_rank.COLLECTIVES: all_reduce, all_gather, reduce_scatter, all_to_all, p2p) x 2 sizes on the one group
    # of 2 ranks, each a positive time measured by the ranks
    assert len(result["samples"]) == 10 and all(s["time_s"] > 0 for s in result["samples"]), result["samples"]
    # the plumbing, not the fit (tests/search/test_netbench.py checks that): 2 small sizes x 2 iterations on a loaded
    # 2-core box fit loosely (latency may sit on its bound 0; bandwidth seen as low as 0.7 MB/s), but they are measured
    preset = yaml.safe_load(out.read_text())
    base = load_config(["cluster=cpu"]).cluster
    assert 0 <= preset["intra_node_latency_s"] < 1 and 0 < preset["intra_node_bw_bytes_per_s"] < 1e12
    assert preset["intra_node_bw_bytes_per_s"] != base.intra_node_bw_bytes_per_s
    assert out.read_text().startswith(f"# Measured by `autotune netbench --backend {backend} --gpus 2`")
    return result
