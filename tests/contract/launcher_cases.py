"""The launcher registry of the contract suite. Every backend that can run a TrialSpec gets one `LauncherCase`; the
suite (test_launcher_contract.py) runs each test against each case.

To add a backend (slurm, ray), append one entry to LAUNCHER_CASES, e.g.

    LauncherCase("slurm", make=lambda tmp, request: request.getfixturevalue("slurm_launcher_factory")(tmp))

`make(tmp_path, request)` returns a ready launcher (use `request.getfixturevalue` to reach session fixtures that start
a real SLURM or Ray). `starts_processes=False` marks a backend that runs nothing (simulate): the tests that need
processes (fixture `process_launcher_case` in conftest.py) are then not generated for it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engines"))  # engine_fixtures (real SLURM and Ray)
from engine_fixtures import ray_target_ready  # noqa: E402


@dataclass(frozen=True)
class LauncherCase:
    name: str
    make: Callable[[Path, Any], Any]
    starts_processes: bool = True
    world_size: int = 2  # ranks per contract trial (gloo on CPU)


def _local(tmp: Path, request: Any) -> Any:
    from launchers.local import LocalLauncher

    return LocalLauncher(workdir=tmp / "work", log_dir=tmp / "logs", kill_grace_s=3.0)


def _simulate(tmp: Path, request: Any) -> Any:
    from launchers.simulate import SimulateLauncher

    return SimulateLauncher(workdir=tmp / "work", log_dir=tmp / "logs")


def _slurm(tmp: Path, request: Any) -> Any:  # a real one-node SLURM on 127.0.0.1 (tests/engines/engine_fixtures.py)
    return request.getfixturevalue("slurm_launcher_factory")(tmp)


def _ray(tmp: Path, request: Any) -> Any:  # a real multi-node Ray (tests/engines/ray_cluster.py)
    return request.getfixturevalue("ray_launcher_factory")(tmp)


LAUNCHER_CASES: list[LauncherCase] = [
    LauncherCase("local", _local),
    LauncherCase("simulate", _simulate, starts_processes=False),
    LauncherCase("slurm", _slurm),
]
# Ray runs against the 2-node test cluster, from a pytest on its head node (tests/engines/test_ray_engine.py runs this
# suite's `ray` case there and fails if it fails), or against a real cluster named by AUTOTUNE_RAY_ADDRESS.
if ray_target_ready():
    LAUNCHER_CASES.append(LauncherCase("ray", _ray))
