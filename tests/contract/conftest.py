"""Fixtures of the contract suite; the registry of backends is launcher_cases.LAUNCHER_CASES."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engines"))  # engine_fixtures (real SLURM and Ray)

from engine_fixtures import ray_launcher_factory, ray_session, slurm_cluster, slurm_launcher_factory  # noqa: E402,F401
from launcher_cases import LAUNCHER_CASES, LauncherCase  # noqa: E402


def _launcher(request, tmp_path):
    case: LauncherCase = request.param
    launcher = case.make(tmp_path, request)
    yield case, launcher
    launcher.close()


@pytest.fixture(params=LAUNCHER_CASES, ids=lambda c: c.name)
def launcher_case(request, tmp_path) -> tuple[LauncherCase, Any]:
    """Every backend: the schema / success / cancel contract."""
    yield from _launcher(request, tmp_path)


@pytest.fixture(params=[c for c in LAUNCHER_CASES if c.starts_processes], ids=lambda c: c.name)
def process_launcher_case(request, tmp_path) -> tuple[LauncherCase, Any]:
    """The backends that start processes: a crash, a hang, a real OOM. A backend that starts none (simulate) gets no
    such test at all, rather than a skipped one (tests/conftest.py fails the run on an unexpected skip)."""
    yield from _launcher(request, tmp_path)
