"""The CLI's error boundary: a user mistake (an `AutotuneError`) is one line and exit 2; any other exception, a
`ValueError` from numpy or pandas included, is a bug and keeps its traceback (docs/architecture.md "Errors")."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from autotune.core.errors import AutotuneError, InputFileError, SpecError, UsageError
from autotune.core.types import ParallelPlan
from autotune.layouts.planner import NoValidLayoutError
from autotune.spec.config import ConfigError


def test_user_facing_errors_share_one_root_that_is_a_value_error():
    for cls in (ConfigError, NoValidLayoutError, SpecError, UsageError, InputFileError):
        assert issubclass(cls, AutotuneError)
    assert issubclass(AutotuneError, ValueError)  # callers catching ValueError keep working
    with pytest.raises(AutotuneError, match="tp"):
        ParallelPlan(dp=1, tp=0)  # a frozen dataclass validating itself raises the user-facing family


def _run_estimate_raising(exc: str) -> subprocess.CompletedProcess:
    """`autotune estimate` in a real interpreter, with the estimator replaced by one that raises `exc`."""
    code = textwrap.dedent(f"""
        import sys
        import numpy as np
        import autotune.cli.estimate as est
        from autotune.core.errors import UsageError

        def broken(cfg, num_gpus):
            raise {exc}

        est.estimate = broken
        from autotune.cli.main import main
        sys.exit(main(["estimate"]))
    """)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)


def test_internal_value_error_keeps_its_traceback_and_is_not_exit_2():
    # a genuine numpy ValueError (shape mismatch), as an internal bug would raise it
    r = _run_estimate_raising("np.ones((2, 3)) + np.ones((4, 5)) and None")
    assert r.returncode not in (0, 2), r.stderr
    assert "Traceback (most recent call last)" in r.stderr
    assert "ValueError: operands could not be broadcast" in r.stderr
    assert "autotune: error:" not in r.stderr


def test_autotune_error_is_one_line_exit_2():
    r = _run_estimate_raising("UsageError('--flag=3 must be even')")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == ["autotune: error: --flag=3 must be even"]


def test_missing_command_module_is_an_import_error_not_a_silently_missing_command(monkeypatch):
    from autotune.cli import main as cli_main

    monkeypatch.setitem(cli_main.COMMANDS, "ghost", "ghost_command_that_does_not_exist")
    with pytest.raises(ModuleNotFoundError, match="ghost_command_that_does_not_exist"):
        cli_main.build_parser()
