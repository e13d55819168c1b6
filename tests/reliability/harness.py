"""Shared helpers of the reliability suites and `benchmarks/reliability.py`: run the real `autotune` console script (as
a subprocess, or in-process through `autotune.cli.main.main` where the process boundary adds nothing), judge its error
output, and snapshot a results folder so a test can prove nothing was written to it.

Imported by the tests (pytest puts this folder on sys.path) and by the benchmark (which adds it itself)."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from proc_scan import processes_mentioning  # noqa: F401 - part of the harness API (benchmarks/reliability.py)

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
AUTOTUNE = str(VENV_BIN / "autotune")
TINY = ["experiment=demo", "sweep.warmup_steps=1"]  # the fault runs: tiny model, one warm-up step


@dataclass(frozen=True)
class Outcome:
    rc: int
    stdout: str
    stderr: str


def snapshot(folder: Path) -> dict[str, str]:
    """sha256 of every file under `folder` and the name of every sub-folder (relative path -> digest or "dir"):
    equal snapshots = nothing written, created or removed."""
    out: dict[str, str] = {}
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            out[str(p.relative_to(folder))] = hashlib.sha256(p.read_bytes()).hexdigest()
        elif p.is_dir():
            out[str(p.relative_to(folder))] = "dir"
    return out


def run_subprocess(
    argv: list[str], cwd: Path, env: dict[str, str] | None = None, unprivileged: bool = False, timeout_s: float = 120.0
) -> Outcome:
    full_env = dict(os.environ)
    full_env.update(_absolute(env, cwd))
    full_env.pop("PYTHONWARNINGS", None)
    prefix = []
    if unprivileged and os.geteuid() == 0:
        # root reads any file: drop the two capabilities that let it (util-linux setpriv; the bounding set applies at
        # exec). Safer than switching to uid 65534, which may not reach the interpreter (a venv inside /root).
        prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"]
    proc = subprocess.run(
        [*prefix, AUTOTUNE, *argv], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout_s
    )
    return Outcome(proc.returncode, proc.stdout, proc.stderr)


def _absolute(env: dict[str, str] | None, cwd: Path) -> dict[str, str]:
    """Case env values naming folders are relative to the case's cwd."""
    return {k: str(cwd / v) if k == "AUTOTUNE_SEARCH_SPACES" else v for k, v in (env or {}).items()}


def run_in_process(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> Outcome:
    """`autotune.cli.main.main(argv)` with stdout/stderr captured, cwd and AUTOTUNE_SEARCH_SPACES applied."""
    from autotune.cli.main import main
    from autotune.spec import config

    out, err = io.StringIO(), io.StringIO()
    old_cwd, old_spaces = os.getcwd(), config.SEARCH_SPACES
    try:
        os.chdir(cwd)
        env = _absolute(env, cwd)
        if "AUTOTUNE_SEARCH_SPACES" in env:
            config.SEARCH_SPACES = Path(env["AUTOTUNE_SEARCH_SPACES"])
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(list(argv))
            except SystemExit as e:  # argparse errors
                rc = e.code if isinstance(e.code, int) else 1
            except BaseException:  # noqa: BLE001 - an escaping exception is exactly what we look for
                import traceback

                traceback.print_exc(file=err)
                rc = 1
    finally:
        os.chdir(old_cwd)
        config.SEARCH_SPACES = old_spaces
    return Outcome(int(rc or 0), out.getvalue(), err.getvalue())


# A clean error names the rule; these words are how our messages state one. A line without any of them is vague.
RULE_WORDS = (
    "must",
    "not ",
    "unknown",
    "no such",
    "exceed",
    "requires",
    "invalid",
    "expected",
    "denied",
    "choose",
    "required",
    "unrecognized",
    "cannot",
    "missing",
    "empty",
    "is a directory",
    "no valid",
    "no layout",
    "unsupported",
    "only",
    "already",
    "!=",
    "differs",
    "twice",
    "needs",
)


def clean_error_problems(outcome: Outcome, expect: tuple[str, ...]) -> list[str]:
    """What is wrong with a bad input's outcome: empty list = exit 2, exactly one stderr line naming every `expect`
    substring and a rule, no traceback."""
    problems = []
    lines = [ln for ln in outcome.stderr.splitlines() if ln.strip()]
    if outcome.rc != 2:
        problems.append(f"exit code {outcome.rc}, expected 2")
    if "Traceback" in outcome.stderr or "Traceback" in outcome.stdout:
        problems.append("traceback printed")
    if len(lines) != 1:
        problems.append(f"{len(lines)} stderr lines, expected 1: {lines[:4]!r}")
    text = " ".join(lines)
    missing = [s for s in expect if s.lower() not in text.lower()]
    if missing:
        problems.append(f"message {text[:300]!r} does not name {missing!r}")
    if lines and not any(w in text.lower() for w in RULE_WORDS):
        problems.append(f"message {text[:300]!r} states no rule")
    return problems


def available_commands() -> set[str]:
    """The subcommands the dispatcher registers (all of autotune.cli.main.COMMANDS; a missing one is an ImportError)."""
    from autotune.cli.main import build_parser

    parser = build_parser()
    for action in parser._actions:  # noqa: SLF001 - argparse has no public accessor for subparsers
        if getattr(action, "choices", None) and isinstance(action.choices, dict):
            return set(action.choices)
    return set()


def count_trial_files(trials: Path) -> int:
    try:
        return sum(1 for e in trials.iterdir() if e.name.endswith(".parquet") and not e.name.startswith("."))
    except FileNotFoundError:
        return 0


def count_rows(sweep: Path) -> int:
    """Rows a sweep folder holds so far: one file per trial under trials/ plus the rows of its one pruned.parquet."""
    import pyarrow.parquet as pq

    pruned = sweep / "pruned.parquet"
    try:
        n_pruned = pq.ParquetFile(pruned).metadata.num_rows if pruned.is_file() else 0
    except Exception:  # being replaced right now: count it on the next poll
        n_pruned = 0
    return count_trial_files(sweep / "trials") + n_pruned


def kill_when(proc: subprocess.Popen, ready, timeout_s: float = 300.0) -> bool:
    """SIGKILL `proc` as soon as `ready()` holds; True when the kill hit a live process (not one that had finished)."""
    import signal
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None and not ready():
        time.sleep(0.002)
    if proc.poll() is not None:
        return False
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    return True


@dataclass(frozen=True)
class FolderTally:
    statuses: dict[str, str]  # candidate_id -> status (the last one read when a candidate has several rows)
    rows: int
    files: int
    corrupt: int

    @property
    def duplicates(self) -> int:
        return self.rows - len(self.statuses)


def tally(sweep: Path) -> FolderTally:
    """What a sweep folder holds, read the way every consumer reads it (autotune.results.store)."""
    from autotune.results.store import read_results, scan_trials

    files = scan_trials(sweep / "trials")
    df = read_results(sweep)
    # corrupt: torn trials/ files and a torn pruned.parquet (read_results lists both)
    return FolderTally(
        dict(zip(df["candidate_id"], df["status"])), len(df), len(files.good), len(df.attrs["corrupt_files"])
    )


def ranked_trial_ids(overrides: list[str], num_gpus: int, n: int) -> list[str]:
    """The first n trials a topk sweep starts: the planner's ranking, best first."""
    from autotune.layouts.planner import enumerate_candidates
    from autotune.results.store import trial_id_for
    from autotune.spec.config import load_config

    frame = enumerate_candidates(load_config(overrides), num_gpus)
    ranked = frame[frame["rank"].notna()].sort_values("rank", kind="stable")
    return [trial_id_for(str(c)) for c in ranked["candidate_id"][:n]]


def final_state(sweep: Path) -> dict[str, str]:
    """candidate_id -> status, asserting every file is readable and no candidate has two rows."""
    from autotune.results.store import read_results, scan_trials

    files = scan_trials(sweep / "trials")
    assert files.corrupt == (), files.corrupt
    df = read_results(sweep)
    assert df.attrs["corrupt_files"] == [], df.attrs["corrupt_files"]  # pruned.parquet included
    assert df["candidate_id"].is_unique, df["candidate_id"][df["candidate_id"].duplicated()].tolist()
    assert len(files.good) == int((df["status"] != "pruned").sum()) + int(
        sum(1 for p in files.good if p.stem in set(df.loc[df["status"] == "pruned", "trial_id"]))
    )
    return dict(zip(df["candidate_id"], df["status"]))
