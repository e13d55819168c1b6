"""The launcher registry of the contract suite. Every backend that can run a TrialSpec gets one `LauncherCase`; the
suite (test_launcher_contract.py) runs each test against each case.

To add a backend (slurm, ray), append one entry to LAUNCHER_CASES, e.g.

    LauncherCase("slurm", make=lambda tmp, request: request.getfixturevalue("slurm_launcher_factory")(tmp))

`make(tmp_path, request)` returns a ready launcher (use `request.getfixturevalue` to reach session fixtures that start
a real SLURM or Ray). `starts_processes=False` marks a backend that runs nothing (simulate): the suite then runs only
the tests that apply to it and says so in the skip reason.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest


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


LAUNCHER_CASES: list[LauncherCase] = [
    LauncherCase("local", _local),
    LauncherCase("simulate", _simulate, starts_processes=False),
]


def needs_processes(case: LauncherCase, what: str) -> None:
    if not case.starts_processes:
        pytest.skip(f"{case.name} starts no processes: {what} does not apply (its rows are model output)")
