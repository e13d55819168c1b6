"""Shared by the sweep tests: run the CLI as a subprocess (the console entry point), list the planner's ranking."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from proc_scan import processes_mentioning  # noqa: F401 - re-exported to the sweep tests

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "autotune.cli.main"]


def autotune(args: list[str], cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run(CLI + args, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def planner_frame(overrides: list[str], num_gpus: int):
    from autotune.layouts.planner import enumerate_candidates
    from autotune.spec.config import load_config

    return enumerate_candidates(load_config(overrides), num_gpus)


def ranked_trial_ids(overrides: list[str], num_gpus: int, n: int) -> list[str]:
    """The first n trials a grid/topk sweep starts: the planner's ranking, best first."""
    from autotune.results.store import trial_id_for

    frame = planner_frame(overrides, num_gpus)
    ranked = frame[frame["rank"].notna()].sort_values("rank", kind="stable")
    return [trial_id_for(str(c)) for c in ranked["candidate_id"][:n]]
