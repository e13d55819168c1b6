"""Ray backend checks. NOT collected directly (no test_ prefix): they run as a driver on the head node of the 2-node
test cluster (tests/engines/ray_cluster.py), so tests/engines/test_ray_engine.py starts the cluster, runs this file
there (with the launcher contract suite's `ray` case) and fails if it fails.

A 4-rank trial of the tiny model spans both nodes, its files come back without a shared folder and its losses match
a 1-rank run; a failing rank tears its peers down and the placement group is released; `autotune sweep --backend ray
--gpus 2` (starting its own local Ray, the default) and `autotune netbench --backend ray` (joining the cluster)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from engine_fixtures import net_interfaces, ray_address, run_netbench_cli

from autotune.results.schema import RESULT_COLUMNS

AUTOTUNE = str(Path(sys.executable).with_name("autotune"))
TINY = ["experiment=demo", "train.global_batch_size=4"]


@pytest.fixture(autouse=True, scope="module")
def _only_against_a_cluster():
    ray_address()  # fails outside the test cluster's head node (or without a real cluster's address)


def spec_for(trial_id: str, backend: str, world: int, overrides=(), **extra):
    from autotune.results.trialfile import make_spec
    from autotune.spec.config import load_config

    cfg = load_config(TINY + list(overrides))
    fields = dict(warmup_steps=1, timed_steps=2, timeout_s=300.0)
    fields.update(extra)
    return make_spec(cfg, cfg.plan(world), sweep_id="engines", trial_id=trial_id, backend=backend, **fields)


def test_two_raylets_on_bridge_addresses(ray_session):
    import ray

    assert net_interfaces() == ["eth0", "lo"]  # the head node's namespace: the bridge and loopback, no route out
    nodes = [n for n in ray.nodes() if n["Alive"]]
    assert sorted(n["NodeManagerAddress"] for n in nodes) == ["10.202.0.1", "10.202.0.2"]
    assert ray.cluster_resources()["CPU"] == 4 and all(n["Resources"]["CPU"] == 2 for n in nodes)
    assert ray_session.address == ray_address() == "10.202.0.1:6379"


def test_four_rank_trial_spans_both_nodes_and_matches_one_rank(ray_launcher_factory, tmp_path):
    """dp2 x tp2 on 2 + 2 CPUs: the placement group must put two ranks on each node. The row, the rank logs and
    RESULT.json reach the driver's folder although the node-2 ranks wrote into node 2's own temp folder, and the
    losses equal a 1-rank run of the same global batch (1e-4: gloo's all-reduce order vs one device's sums)."""
    import json

    from launchers.local import LocalLauncher
    from launchers.ray_launcher import PLACEMENT_FILE

    row_r = ray_launcher_factory(tmp_path / "ray").submit(spec_for("t4-ray", "ray", 4, ["plan.tp=2"])).result(600)
    local = LocalLauncher(workdir=tmp_path / "local" / "work", log_dir=tmp_path / "local" / "logs")
    row_1 = local.submit(spec_for("t1-local", "local", 1)).result(timeout=600)
    assert row_r["status"] == row_1["status"] == "ok", (row_r["error_message"], row_1["error_message"])
    assert list(row_r) == RESULT_COLUMNS and (row_r["backend"], row_r["dp"], row_r["tp"]) == ("ray", 2, 2)
    assert row_r["global_batch_tokens"] == row_1["global_batch_tokens"] and row_r["num_params"] == row_1["num_params"]
    assert len(row_r["losses"]) == 3 and row_r["losses"] == pytest.approx(row_1["losses"], rel=1e-4, abs=1e-4)

    trial_dir = tmp_path / "ray" / "work" / "t4-ray"
    placement = json.loads((trial_dir / PLACEMENT_FILE).read_text())
    by_ip = {ip: [p["rank"] for p in placement if p["ip"] == ip] for ip in {p["ip"] for p in placement}}
    assert sorted(by_ip) == ["10.202.0.1", "10.202.0.2"] and sorted(map(len, by_ip.values())) == [2, 2], placement
    scratch = {p["ip"]: p["scratch"] for p in placement}  # each node's own TMPDIR (ray_cluster.RayCluster.env)
    assert scratch["10.202.0.2"].startswith("/tmp/autotune-atr/n2/tmp/")
    assert scratch["10.202.0.1"].startswith("/tmp/autotune-atr/n1/tmp/")
    assert not any(str(trial_dir).startswith(s) for s in scratch.values())  # the driver never reads a node's folder
    assert json.loads((trial_dir / "RESULT.json").read_text())["losses"] == row_r["losses"]
    for rank in range(4):  # every rank's log came back, node 2's included, each a file of the driver's folder
        assert (trial_dir / f"rank{rank}.log").is_file(), sorted(p.name for p in trial_dir.iterdir())
        assert f"===== rank {rank} =====" in Path(row_r["log_path"]).read_text()
    assert [list(Path(s).iterdir()) for s in scratch.values()] == [[], []]  # node folders emptied after the trial


def test_failing_rank_tears_down_and_releases_the_group(ray_launcher_factory, tmp_path):
    import ray
    from ray.util.placement_group import placement_group_table

    launcher = ray_launcher_factory(tmp_path)
    row = launcher.submit(spec_for("r-crash1", "ray", 2, inject_fault="crash_rank1")).result(timeout=600)
    assert (row["status"], row["error_type"]) == ("crash", "RuntimeError"), row["error_message"]
    assert row["error_message"].startswith("rank 1:"), row["error_message"]
    states = {pg["state"] for pg in placement_group_table().values()}
    assert states <= {"REMOVED"}, states
    deadline = time.monotonic() + 60  # Ray hands a removed group's CPUs back asynchronously
    while ray.available_resources().get("CPU") != ray.cluster_resources()["CPU"] and time.monotonic() < deadline:
        time.sleep(0.5)
    assert ray.available_resources().get("CPU") == ray.cluster_resources()["CPU"]


def test_sweep_backend_ray_starts_its_own_ray(tmp_path):
    """`autotune sweep --backend ray --gpus 2` with no address: the default, a local Ray of its own (address=local,
    bound to 127.0.0.1 of this node), started and stopped by the CLI. One trial: the 2-node cluster's sweep
    (ray_node_faults.py) covers several trials in flight, and the 4-rank check compares a row with a 1-rank run."""
    argv = [AUTOTUNE, "sweep", "--backend", "ray", "--gpus", "2", "--max-trials", "1", "--steps", "2"]
    argv += ["--sweep-id", "r1", *TINY, "sweep.warmup_steps=1", f"sweep.results_dir={tmp_path}"]
    out = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    from autotune.results.store import read_results

    rows = read_results(tmp_path / "r1")
    ran = rows[rows["status"] != "pruned"]
    assert list(ran["status"]) == ["ok"] and list(ran["backend"]) == ["ray"], ran[["status", "error_message"]]
    assert (ran["tokens_per_s"] > 0).all() and (ran["num_gpus"] == 2).all()
    assert ran["trial_id"].iloc[0] in out.stdout  # the ranked table the sweep printed from its Parquet rows


def test_netbench_backend_ray_measures_through_actors(ray_session, tmp_path):
    """`autotune netbench --backend ray --gpus 2`: one actor per rank in a placement group; the samples come back
    from the actors (no shared filesystem) and the fit lands in a preset. It joins the 2-node cluster by address
    (sweep.ray.address=host:port, as on a real cluster); its 2 ranks fit on one node (PACK), so only the intra-node
    class is measured."""
    import ray

    address = ray.get_runtime_context().gcs_address
    assert address == ray_address(), address
    run_netbench_cli("ray", tmp_path, overrides=(f"sweep.ray.address={address}",))
    # the session's Ray outlived the CLI that joined it, and got every CPU of the CLI's placement group back
    deadline = time.monotonic() + 60  # Ray hands a removed group's CPUs back asynchronously
    while ray.available_resources().get("CPU") != ray.cluster_resources()["CPU"] and time.monotonic() < deadline:
        time.sleep(0.5)
    assert ray.available_resources().get("CPU") == ray.cluster_resources()["CPU"]
