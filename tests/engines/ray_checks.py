"""Ray backend checks. NOT collected directly (no test_ prefix): Ray may only run inside a private network namespace,
so tests/engines/test_ray_engine.py runs this file there (`unshare --net`, loopback up) and fails if it fails.

A 4-rank trial of the tiny model through Ray matches the local backend's row and losses; a failing rank tears its
peers down and the placement group is released; `autotune sweep --backend ray --gpus 2` finishes a small sweep."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from engine_fixtures import net_interfaces, require_private_netns, run_netbench_cli

from autotune.results.schema import RESULT_COLUMNS

AUTOTUNE = str(Path(sys.executable).with_name("autotune"))
TINY = ["experiment=demo", "train.global_batch_size=4"]
LAYOUT = (
    "num_gpus",
    "dp",
    "tp",
    "pp",
    "cp",
    "zero_stage",
    "micro_batch_size",
    "grad_accum_steps",
    "seq_len",
    "global_batch_tokens",
    "num_params",
    "candidate_id",
)


@pytest.fixture(autouse=True, scope="module")
def _only_in_private_netns():
    require_private_netns()


def spec_for(trial_id: str, backend: str, world: int, overrides=(), **extra):
    from autotune.results.trialfile import make_spec
    from autotune.spec.config import load_config

    cfg = load_config(TINY + list(overrides))
    fields = dict(warmup_steps=1, timed_steps=2, timeout_s=300.0)
    fields.update(extra)
    return make_spec(cfg, cfg.plan(world), sweep_id="engines", trial_id=trial_id, backend=backend, **fields)


def test_ray_runs_on_loopback_only(ray_session):
    import ray

    assert net_interfaces() == ["lo"]
    nodes = [n for n in ray.nodes() if n["Alive"]]
    assert [n["NodeManagerAddress"] for n in nodes] == ["127.0.0.1"]
    assert ray.cluster_resources()["CPU"] == ray_session.num_cpus >= 8
    assert ray_session.start_s < 120


def test_four_rank_trial_matches_local(ray_launcher_factory, tmp_path):
    """Same layout (dp=2 x tp=2), same seed: the Ray row has the local row's columns, layout and per-step losses."""
    from launchers.local import LocalLauncher

    overrides = ["plan.tp=2"]
    row_r = ray_launcher_factory(tmp_path / "ray").submit(spec_for("t4-ray", "ray", 4, overrides)).result(timeout=600)
    local = LocalLauncher(workdir=tmp_path / "local" / "work", log_dir=tmp_path / "local" / "logs")
    row_l = local.submit(spec_for("t4-local", "local", 4, overrides)).result(timeout=600)
    assert row_r["status"] == row_l["status"] == "ok", (row_r["error_message"], row_l["error_message"])
    assert list(row_r) == list(row_l) == RESULT_COLUMNS
    assert (row_r["backend"], row_r["dp"], row_r["tp"]) == ("ray", 2, 2)
    for key in LAYOUT:
        assert row_r[key] == row_l[key], key
    assert len(row_r["losses"]) >= 2 and row_r["losses"] == pytest.approx(row_l["losses"], rel=1e-6, abs=1e-6)
    log = Path(row_r["log_path"]).read_text()
    assert all(f"===== rank {r} =====" in log for r in range(4))  # every rank's log came back to the driver


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


def test_sweep_backend_ray_finishes_with_parquet_rows_and_report(tmp_path):
    """`autotune sweep --backend ray --gpus 2` in this namespace: it starts its own local Ray (address=local). Two
    ranks per trial: two parallel trials of 4 would time-share 8 ranks on a 2-core box, and a 4-rank trial through Ray
    is already compared row for row with the local backend (test_four_rank_trial_matches_local)."""
    argv = [
        AUTOTUNE,
        "sweep",
        "--backend",
        "ray",
        "--gpus",
        "2",
        "--max-trials",
        "2",
        "--parallel",
        "2",
        "--steps",
        "2",
        "--sweep-id",
        "r1",
        *TINY,
        "sweep.warmup_steps=1",
        f"sweep.results_dir={tmp_path}",
    ]
    out = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    from autotune.results.store import read_results

    rows = read_results(tmp_path / "r1")
    ran = rows[rows["status"] != "pruned"]
    assert len(ran) == 2 and set(ran["status"]) == {"ok"} and set(ran["backend"]) == {"ray"}, ran[
        ["status", "error_message"]
    ]
    assert (ran["tokens_per_s"] > 0).all() and (ran["num_gpus"] == 2).all()
    report = subprocess.run(
        [AUTOTUNE, "report", str(tmp_path / "r1")], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert report.returncode == 0, report.stderr
    assert all(t in report.stdout for t in ran["trial_id"]), report.stdout


def test_netbench_backend_ray_measures_through_actors(ray_session, tmp_path):
    """`autotune netbench --backend ray --gpus 2`: one actor per rank in a placement group; the samples come back
    from the actors (no shared filesystem assumed) and the fit lands in a preset. It joins the session's running Ray
    by address (sweep.ray.address=host:port, as on a real cluster) instead of starting a second one: the sweep test
    above already covers a CLI that starts its own, and a Ray start costs tens of seconds on a loaded 2-core box."""
    import ray

    address = ray.get_runtime_context().gcs_address
    assert address.startswith("127.0.0.1:"), address
    run_netbench_cli("ray", tmp_path, overrides=(f"sweep.ray.address={address}",))
    # the session's Ray outlived the CLI that joined it, and got every CPU of the CLI's placement group back
    deadline = time.monotonic() + 60  # Ray hands a removed group's CPUs back asynchronously
    while ray.available_resources().get("CPU") != ray.cluster_resources()["CPU"] and time.monotonic() < deadline:
        time.sleep(0.5)
    assert ray.available_resources().get("CPU") == ray.cluster_resources()["CPU"]
