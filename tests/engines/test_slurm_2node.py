"""The SLURM backend across hosts: a real slurmctld and two real slurmd, each in its own network namespace with its own
address on a private bridge (tests/engines/slurm2.py, tests/netns_nodes.py). A dp2 x tp2 trial with 2 ranks per node
runs through `autotune sweep --backend slurm` and reproduces the 1-rank loss curve; netbench measures the inter-node
link class; closing the cluster leaves no namespace, bridge or daemon. The node-failure and hang faults across nodes
are in tests/reliability/test_faults_slurm_2node.py."""

from __future__ import annotations

from pathlib import Path

import netns_nodes
import pytest
import yaml
from slurm2 import DP2_TP2, TINY, leaks, netbench_run, sweep


def test_two_nodes_of_one_partition_in_their_namespaces(slurm_2node):
    states = slurm_2node.run("sinfo", "-h", "-N", "-o", "%N %P %T %G").stdout.split()
    assert states == ["node1", "debug*", "idle", "gpu:4", "node2", "debug*", "idle", "gpu:4"], states
    # slurmctld answers on node1's bridge address; the root namespace has no such address (the network rule)
    ping = slurm_2node.run("scontrol", "ping")
    assert "node1 is UP" in ping.stdout, ping.stdout + ping.stderr
    root_addrs = Path("/proc/net/fib_trie").read_text()
    assert "10.201.0." not in root_addrs
    # each slurmd runs in its node's namespace (slurmctld and munged in node1's)
    comm = {
        ns: {Path(f"/proc/{p}/comm").read_text().strip() for p in netns_nodes.pids_in(ns)}
        for ns in ("ats-n1", "ats-n2")
    }
    assert {"slurmctld", "slurmd", "munged"} <= comm["ats-n1"] and "slurmd" in comm["ats-n2"], comm


def _one_rank_losses(trial_spec: Path, tmp_path: Path) -> list[float]:
    """The same trial (steps, batch, seed) on one local rank."""
    import dataclasses

    from autotune.core.trial import TrialSpec
    from autotune.spec.config import load_config
    from launchers.local import LocalLauncher

    spec = TrialSpec.from_json(trial_spec.read_text())
    spec = dataclasses.replace(spec, plan=load_config(TINY).plan(1), backend="local", trial_id="t1-local")
    row = LocalLauncher(workdir=tmp_path / "work", log_dir=tmp_path / "logs").submit(spec).result(timeout=600)
    assert row["status"] == "ok", row["error_message"]
    return row["losses"]


def test_dp2_tp2_across_two_nodes_matches_one_rank(slurm_2node, tmp_path):
    """4 ranks, 2 per node: MASTER_ADDR is node1's bridge address (from SLURM_JOB_NODELIST via `scontrol show
    hostnames`, resolved on each node), ranks 2 and 3 run on node2, and the per-step losses equal a 1-rank run's
    (fp32: 1e-4 relative, the suite's tolerance in tests/distributed)."""
    out = sweep(slurm_2node, tmp_path, "two", 4, "--max-trials", "1", *DP2_TP2)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    from autotune.results.store import read_results

    rows = read_results(tmp_path / "two")
    assert len(rows) == 1, rows[["status", "error_message"]]
    row = rows.iloc[0]
    assert (row["status"], row["backend"], row["dp"], row["tp"]) == ("ok", "slurm", 2, 2), row["error_message"]
    assert row["hostname"] == "node1"  # rank 0 wrote the row on node1
    logs = {p.name.split("_")[1]: p.read_text() for p in Path(row["log_path"]).parent.glob("*_log.out")}
    assert sorted(logs) == ["0", "1", "2", "3"], sorted(logs)  # one SLURM task (one log) per rank
    assert "autotune rank 0/4 on node1: rendezvous 10.201.0.1:" in logs["0"], logs["0"][-2000:]
    for task in ("2", "3"):  # the ranks of node2 ran there and met rank 0 on node1
        assert f"autotune rank {task}/4 on node2: rendezvous 10.201.0.1:" in logs[task], logs[task][-2000:]
        assert "Job completed successfully" in logs[task]
    (trial_spec,) = (tmp_path / "two" / "work").glob("*/SPEC.json")
    one_rank = _one_rank_losses(trial_spec, tmp_path / "local")
    assert len(one_rank) == len(row["losses"]) >= 2
    assert list(row["losses"]) == pytest.approx(one_rank, rel=1e-4)


def test_netbench_slurm_measures_the_inter_node_link(slurm_2node, tmp_path):
    """netbench with one rank per node: the group of the two ranks is an inter-node group (its ranks report
    different hostnames), its collectives are timed and the fit lands in the preset's inter-node fields."""
    result, preset_path = netbench_run(slurm_2node, tmp_path)
    assert result["notes"] == [], result["notes"]
    links = {s["link_class"] for s in result["samples"]}
    assert links == {"inter"}, links
    inter = [s for s in result["samples"] if s["link_class"] == "inter"]
    # 5 collectives x 2 sizes on the one inter-node group (ranks 0 and 1), each measured
    assert len(inter) == 10 and all(s["time_s"] > 0 and s["group_size"] == 2 for s in inter), inter
    from autotune.spec.config import load_config

    preset = yaml.safe_load(preset_path.read_text())
    base = load_config(["cluster=cpu"]).cluster
    assert 0 < preset["inter_node_bw_bytes_per_s"] < 1e12
    assert preset["inter_node_bw_bytes_per_s"] != base.inter_node_bw_bytes_per_s
    assert 0 <= preset["inter_node_latency_s"] < 1


def test_closing_the_cluster_leaves_nothing(two_node_manager):
    """Runs last in this file: stop the daemons and remove the namespaces; no namespace, hosts file, slurmd,
    slurmctld, munged or step daemon of the cluster is left (a later test that needs the cluster starts it again)."""
    two_node_manager.get()
    state_dir = two_node_manager.close()
    assert state_dir is not None and leaks(state_dir) == []
