"""Bad input -> one stderr line naming field, value and rule; exit 2; no traceback; the existing sweep folder unchanged.

The cases live in badinputs.py (shared with benchmarks/reliability.py). Most run in-process through
`autotune.cli.main.main(argv)` (same dispatcher, same error path, no 1-2 s interpreter start); the cases marked
`subprocess=True` run the real `.venv/bin/autotune` console script, including the file-permission cases, which run
without root's capability to read any file (harness.run_subprocess)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from badinputs import all_cases, prepare, runnable
from harness import available_commands, clean_error_problems, run_in_process, run_subprocess, snapshot

CASES = all_cases()
COMMANDS = available_commands()


@pytest.fixture(scope="module")
def root():
    path = Path(tempfile.mkdtemp(prefix="autotune-badinput-"))
    os.chmod(path, 0o755)
    prepare(path)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("case", runnable(CASES, COMMANDS), ids=lambda c: c.case_id)
def test_bad_input_gives_one_clean_line(case, root):
    results = root / "results"
    before = snapshot(results)
    if case.subprocess:
        outcome = run_subprocess(list(case.argv), root, case.env, unprivileged=case.unprivileged)
    else:
        outcome = run_in_process(list(case.argv), root, case.env)
    problems = clean_error_problems(outcome, case.expect)
    assert not problems, f"{case.case_id}: {' | '.join(problems)}\nstderr:\n{outcome.stderr[-2000:]}"
    assert snapshot(results) == before, f"{case.case_id} wrote into the results folder"
    assert not (root / "pwned-by-yaml").exists(), "a YAML python tag was executed"


def test_case_table_is_large_and_unique():
    ids = [c.case_id for c in CASES]
    assert len(ids) == len(set(ids))
    assert len(CASES) >= 50
    assert sum(c.subprocess for c in CASES) >= 8  # a solid subset through the real console script
    assert runnable(CASES, COMMANDS) == CASES  # every case runs: no command or `needs` file is missing
