"""Ray engine tests on a real 2-node Ray cluster on this host (tests/engines/ray_cluster.py: a head raylet + GCS in
network namespace atr-n1 on 10.202.0.1, a worker raylet in atr-n2 on 10.202.0.2, one private bridge, no route out).

A process outside the namespaces cannot reach that cluster (nor should it), so the Ray checks (ray_checks.py) and the
launcher contract suite's `ray` case run in a child pytest on the head node; the node-loss sweep is driven from here
(it needs to kill node 2); the last test tears the cluster down and proves nothing of it is left."""

from __future__ import annotations

import os
import re
import subprocess

import pytest
from engine_fixtures import REPO
from ray_cluster import PREFIX, RayCluster, run_pytest_on_head, start_cluster
from ray_node_faults import WORKER_IP, node_loss_sweep, reliability_figures

_CLUSTER: dict[str, RayCluster] = {}


@pytest.fixture(scope="module")
def cluster() -> RayCluster:
    """One cluster for the module; stopped by test_teardown_leaves_nothing (or here, if a test before it failed)."""
    try:
        c = _CLUSTER["c"] = start_cluster()
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        pytest.fail(f"2-node Ray cluster did not start: {e}", pytrace=False)
    print(f"\n[engines] Ray head up in {c.start_s[0]:.1f} s, worker in {c.start_s[1]:.1f} s")
    yield c
    if _CLUSTER.pop("c", None) is not None:
        c.stop()


def test_nodes_see_only_loopback_and_the_bridge(cluster):
    for node, ip in enumerate(("10.202.0.1", "10.202.0.2")):
        out = subprocess.run(
            cluster.argv(node, ["sh", "-c", "ip -4 -o addr show; echo ROUTES; ip route; ip -6 route"]),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        addrs, routes = out.stdout.split("ROUTES")
        assert sorted(line.split()[3] for line in addrs.strip().splitlines()) == sorted(["127.0.0.1/8", f"{ip}/24"])
        assert "default" not in routes, routes  # nothing a Ray process does can leave the bridge


@pytest.mark.timeout(1800)  # one test holding ten (each under the default 900 s in the child)
def test_ray_checks_and_contract_suite_on_two_nodes(cluster):
    paths = [
        str(REPO / "tests" / "contract" / "test_launcher_contract.py"),
        str(REPO / "tests" / "engines" / "ray_checks.py"),
    ]
    out = run_pytest_on_head(
        cluster, paths, timeout_s=1500, extra=["-k", "ray_checks or ray", "-s", "-rA", "--durations=0"]
    )
    tail = out.stdout[-8000:] + out.stderr[-3000:]
    assert out.returncode == 0, tail
    passed = re.search(r"(\d+) passed", out.stdout)
    # 5 Ray checks + the 5 contract tests of the `ray` case, all run (none skipped, none deselected by accident)
    assert passed and int(passed.group(1)) >= 10, tail
    assert " skipped" not in out.stdout.splitlines()[-1], tail
    print(tail[-2500:], file=os.sys.stderr)


@pytest.mark.timeout(900)
def test_worker_node_lost_mid_sweep(cluster, tmp_path):
    """tests/engines/ray_node_faults.py: node 2 powered off under a running trial (its last test: node 2 stays dead)."""
    from autotune.results.store import read_results

    tmp_path.chmod(0o755)
    r = node_loss_sweep(cluster, tmp_path)
    assert r.faults == 1 and r.sweep_rc == 0, r.log
    rows = read_results(r.sweep_dir)
    assert rows["candidate_id"].is_unique and dict(zip(rows["candidate_id"], rows["status"])) == r.expected, r.log
    lost = rows.set_index("trial_id").loc[r.lost_trial]
    assert (lost["status"], lost["error_type"]) == ("crash", "NodeLost"), lost["error_message"]
    assert lost["error_message"].startswith(f"ray: node {WORKER_IP} left the cluster mid-trial"), lost["error_message"]
    ok = rows[rows["status"] == "ok"]
    assert len(ok) == 1 and ok["tokens_per_s"].iloc[0] > 0  # the sweep went on, on the head node alone
    assert r.resume_rc == 0 and "3 trial(s) already done" in r.resume_out, r.resume_out[-3000:]
    assert r.files_after_resume == r.files_before_resume  # resume ran nothing again, rewrote nothing
    assert r.processes_left == []
    figures = reliability_figures(r)  # what benchmarks/reliability.py --ray-2node reports
    assert (figures["faults"], figures["lost"], figures["duplicates"], figures["misclassified"]) == (1, 0, 0, 0)


def test_teardown_leaves_nothing(cluster):
    """Namespaces, bridge, hosts files, raylets, GCS, workers and ranks of the cluster: all gone after stop()."""
    assert cluster.leftovers() != []  # what stop() must remove is really there: this check can fail
    _CLUSTER.pop("c", None)
    cluster.stop()
    import netns_nodes

    assert netns_nodes.leftovers(PREFIX) == []
    assert cluster.leftovers() == []
