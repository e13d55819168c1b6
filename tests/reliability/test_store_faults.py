"""The results store under concurrent writers and with torn/corrupted trial files (autotune/results/store.py, real Parquet).

- 8 processes write into one trials/ folder at once, through the store API: every row lands exactly once, every file is
  readable, no temp file is left behind, and pandas and duckdb read the same table.
- torn, zero-byte, garbage, foreign-schema and pickle-payload files in trials/ are detected, never read as data, never
  unpickled, and their candidates are not counted as finished (so a resumed sweep runs them again).
"""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from harness import REPO

NUM_WRITERS = 8
ROWS_PER_WRITER = 20
SHARED_TRIALS = 5  # trial ids every writer writes (same candidate re-run concurrently): one file each at the end

WRITER = r"""
import sys
from autotune.results.schema import empty_row
from autotune.results.store import write_row
trials, writer, n, shared = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def row(trial_id, cand, loss):
    r = empty_row()
    r.update(sweep_id="concurrent", trial_id=trial_id, candidate_id=cand, backend="local", status="ok",
             dp=2, tp=1, pp=1, cp=1, num_gpus=2, tokens_per_s=1000.0 + writer, final_loss=loss, losses=[loss, loss])
    return r
for i in range(n):
    write_row(trials, row(f"w{writer}-{i:03d}", f"{writer:02d}{i:010d}", float(i)))
    if i < shared:
        write_row(trials, row(f"shared-{i}", f"ff{i:010d}", float(writer)))
"""


def test_eight_concurrent_writers(tmp_path):
    from autotune.results.store import read_results, scan_trials

    trials = tmp_path / "sweep" / "trials"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(trials), str(w), str(ROWS_PER_WRITER), str(SHARED_TRIALS)],
            cwd=REPO,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(NUM_WRITERS)
    ]
    errors = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * NUM_WRITERS, errors

    files = scan_trials(trials)
    assert files.corrupt == ()
    assert len(files.good) == NUM_WRITERS * ROWS_PER_WRITER + SHARED_TRIALS
    assert sorted(p.name for p in trials.iterdir() if p.name.startswith(".")) == []  # no temp file left
    df = read_results(tmp_path / "sweep")
    expected = {f"w{w}-{i:03d}" for w in range(NUM_WRITERS) for i in range(ROWS_PER_WRITER)}
    expected |= {f"shared-{i}" for i in range(SHARED_TRIALS)}
    assert set(df["trial_id"]) == expected and len(df) == len(expected)  # none lost, none duplicated
    for w in range(NUM_WRITERS):  # each private row carries what its writer wrote
        mine = df[df["trial_id"].str.startswith(f"w{w}-")]
        assert (mine["tokens_per_s"] == 1000.0 + w).all() and len(mine) == ROWS_PER_WRITER
    shared = df[df["trial_id"].str.startswith("shared-")]
    assert shared["final_loss"].between(0, NUM_WRITERS - 1).all()  # one whole row of one writer, not a mix

    import duckdb

    count = duckdb.sql(f"SELECT count(*) FROM read_parquet('{trials}/*.parquet')").fetchall()[0][0]
    assert count == len(expected)


class _Payload:
    """Unpickling this touches a marker file: proof that something loaded a pickle from the results folder."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def _good_row(trial_id: str, candidate_id: str) -> dict:
    from autotune.results.schema import empty_row

    row = empty_row()
    row.update(
        sweep_id="torn",
        trial_id=trial_id,
        candidate_id=candidate_id,
        backend="simulate",
        status="simulated",
        dp=1,
        tp=2,
        pp=1,
        cp=1,
        num_gpus=2,
        tokens_per_s=5.0,
    )
    return row


def test_torn_and_corrupt_files_are_detected_never_read(tmp_path):
    from autotune.results.store import SweepStore, read_results, scan_trials, write_row

    store = SweepStore(tmp_path / "torn")
    trials = store.trials_dir
    for i in range(6):
        write_row(trials, _good_row(f"c{i:012d}", f"{i:012d}"))
    marker = tmp_path / "unpickled"
    whole = (trials / "c000000000001.parquet").read_bytes()
    (trials / "c000000000001.parquet").write_bytes(whole[: len(whole) // 2])  # torn mid-write (no footer)
    (trials / "c000000000002.parquet").write_bytes(b"")  # zero bytes (crash before the first write reached disk)
    (trials / "c000000000003.parquet").write_bytes(pickle.dumps(_Payload(marker)))  # a pickle in disguise
    pq.write_table(pa.table({"trial_id": ["c000000000004"], "x": [1]}), trials / "c000000000004.parquet")  # foreign
    (trials / "c000000000005.parquet").write_bytes(whole[:-5] + b"XXXXX")  # footer magic clobbered

    files = scan_trials(trials)
    assert [p.name for p in files.good] == ["c000000000000.parquet"]
    assert sorted(p.name for p, _ in files.corrupt) == [f"c{i:012d}.parquet" for i in range(1, 6)]
    df = read_results(store.root)
    assert list(df["trial_id"]) == ["c000000000000"]  # the only row read as data
    assert sorted(Path(p).name for p in df.attrs["corrupt_files"]) == [f"c{i:012d}.parquet" for i in range(1, 6)]
    assert store.finished_candidates() == {"000000000000": "simulated"}  # the other 5 will be run again
    assert not marker.exists(), "a pickle in the results folder was unpickled"

    for i in range(1, 6):  # the re-run replaces each damaged file with its row, atomically
        write_row(trials, _good_row(f"c{i:012d}", f"{i:012d}"))
    assert scan_trials(trials).corrupt == ()
    assert sorted(read_results(store.root)["trial_id"]) == [f"c{i:012d}" for i in range(6)]
