"""Running the engine tests against a site's SLURM instead of the local test cluster (docs/engines.md "Running the
engine tests against a real cluster"): `pytest -m engines --slurm-partition=PART [--slurm-gpus-per-node=G]`.

Every test under tests/engines, the SLURM fault suites and the contract suite's slurm/ray cases get the `engines`
marker. With a partition given, the partition (and ranks per node) reach the tests through the environment (the
engine fixtures and the sweeps they start read it), no local SLURM is started, and the tests that administer the
local test cluster are deselected: they set its only node DOWN, kill a node's namespace or check its loopback ports,
which a site's cluster is not there for."""

from __future__ import annotations

import os

import pytest

PARTITION_ENV, GPUS_ENV = "AUTOTUNE_TEST_SLURM_PARTITION", "AUTOTUNE_TEST_SLURM_GPUS_PER_NODE"
ENGINE_FILES = ("tests/engines/", "tests/reliability/test_faults_slurm")
# tests of the local test bed itself, by file or by name
LOCAL_CLUSTER_FILES = ("test_slurm_2node.py", "test_faults_slurm_2node.py", "test_faults_slurm.py")
LOCAL_CLUSTER_TESTS = ("test_slurm_engine_is_one_node_on_loopback", "test_node_failure_is_requeued_a_bounded_number")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("engines", "engine tests against a site's SLURM")
    group.addoption("--slurm-partition", help="run the SLURM engine tests on this partition of the site's cluster")
    group.addoption("--slurm-gpus-per-node", type=int, help="ranks per node there (default: the preset's)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "engines: real SLURM / Ray engines (-m engines; --slurm-partition for a site)")
    if config.getoption("--slurm-partition"):
        os.environ[PARTITION_ENV] = config.getoption("--slurm-partition")
        if config.getoption("--slurm-gpus-per-node"):
            os.environ[GPUS_ENV] = str(config.getoption("--slurm-gpus-per-node"))


def _is_engine_test(item: pytest.Item) -> bool:
    path = item.nodeid
    return path.startswith(ENGINE_FILES) or (path.startswith("tests/contract/") and ("slurm" in path or "ray" in path))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _is_engine_test(item):
            item.add_marker(pytest.mark.engines)
    if not config.getoption("--slurm-partition"):
        return
    local = [
        i for i in items if i.path.name in LOCAL_CLUSTER_FILES or any(i.name.startswith(n) for n in LOCAL_CLUSTER_TESTS)
    ]
    if local:
        config.hook.pytest_deselected(items=local)
        items[:] = [i for i in items if i not in local]


def site_partition() -> str | None:
    return os.environ.get(PARTITION_ENV) or None


def site_slurm_options() -> dict[str, object]:
    """Launcher options for the site's cluster (empty on the local test cluster)."""
    opts: dict[str, object] = {}
    if site_partition():
        opts["partition"] = site_partition()
    if os.environ.get(GPUS_ENV):
        opts["gpus_per_node"] = int(os.environ[GPUS_ENV])
    return opts


def site_slurm_overrides() -> list[str]:
    """The same as `sweep.slurm.*` overrides, for the tests that run `autotune sweep`."""
    return [f"sweep.slurm.{k}={v}" for k, v in site_slurm_options().items()]


def slurm_sweep_argv(
    autotune: str, sweep_id: str, results_dir, *overrides: str, parallel: int | None = None, fault: str | None = None
) -> list[str]:
    """The small SLURM sweep the engine and fault tests start: `autotune sweep --backend slurm --gpus 2 --max-trials 2
    --steps 2` (2 ranks per trial on the 2-core box), `--parallel` and `--inject-fault` where given, then the config
    overrides and the results folder."""
    argv = [autotune, "sweep", "--backend", "slurm", "--gpus", "2", "--max-trials", "2"]
    argv += ["--parallel", str(parallel)] if parallel else []
    argv += ["--steps", "2", "--sweep-id", sweep_id]
    argv += ["--inject-fault", fault] if fault else []
    return [*argv, *overrides, f"sweep.results_dir={results_dir}"]
