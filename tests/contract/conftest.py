"""Fixtures of the contract suite; the registry of backends is launcher_cases.LAUNCHER_CASES."""

from __future__ import annotations

from typing import Any

import pytest
from engine_fixtures import ray_launcher_factory, ray_session, slurm_cluster, slurm_launcher_factory  # noqa: F401
from launcher_cases import LAUNCHER_CASES, LauncherCase


@pytest.fixture(params=LAUNCHER_CASES, ids=lambda c: c.name)
def launcher_case(request, tmp_path) -> tuple[LauncherCase, Any]:
    case: LauncherCase = request.param
    launcher = case.make(tmp_path, request)
    yield case, launcher
    launcher.close()
