"""The results store: atomic one-row Parquet files with RESULT_SCHEMA, temp files ignored, torn files reported and
never read as data, the folder readable by pandas and duckdb alike."""

from __future__ import annotations

import os

import pyarrow.parquet as pq
import pytest

from autotune.core.types import ParallelPlan
from autotune.results.schema import RESULT_COLUMNS, RESULT_SCHEMA, SCHEMA_VERSION, row_from_spec
from autotune.results.store import SweepStore, read_results, scan_trials, trial_id_for, write_row
from autotune.results.trialfile import make_spec
from autotune.spec.config import load_config


def _row(dp: int, status: str = "ok", **extra):
    cfg = load_config([])
    spec = make_spec(cfg, ParallelPlan(dp=dp, grad_accum_steps=16 // dp), sweep_id="s", trial_id="x")
    row = row_from_spec(spec)
    row.update(trial_id=trial_id_for(spec.candidate_id), status=status, **extra)
    return row


def test_row_file_has_schema_and_version(tmp_path):
    path = write_row(tmp_path, _row(2, tokens_per_s=100, timed_steps=3.0, losses=[2.5, 2.25]))
    assert path.name == f"{_row(2)['trial_id']}.parquet"
    table = pq.read_table(path)
    assert table.schema.equals(RESULT_SCHEMA) and table.num_rows == 1
    got = table.to_pylist()[0]
    assert got["schema_version"] == SCHEMA_VERSION
    assert got["tokens_per_s"] == 100.0 and got["timed_steps"] == 3 and got["losses"] == [2.5, 2.25]
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temp file left behind


def test_missing_numbers_are_null_not_nan(tmp_path):
    write_row(tmp_path, _row(2, mfu=float("nan"), losses=[1.0, float("inf")]))
    got = pq.read_table(tmp_path).to_pylist()[0]
    assert got["mfu"] is None and got["losses"] == [1.0, None]


def test_rewrite_of_same_trial_replaces_its_file(tmp_path):
    write_row(tmp_path, _row(2, status="crash"))
    write_row(tmp_path, _row(2, status="ok"))
    df = read_results(tmp_path)
    assert len(df) == 1 and df["status"].tolist() == ["ok"]


def test_unknown_column_and_status_rejected(tmp_path):
    with pytest.raises(ValueError, match="unknown columns"):
        write_row(tmp_path, {**_row(2), "tokens_per_sec": 1.0})
    with pytest.raises(ValueError, match="status='done'"):
        write_row(tmp_path, _row(2, status="done"))


def test_temp_and_torn_files_never_read_as_data(tmp_path):
    good = [write_row(tmp_path / "trials", _row(dp)) for dp in (1, 2, 4)]
    trials = tmp_path / "trials"
    # a writer killed before its rename leaves a dot temp file: invisible to every reader
    (trials / f".{good[0].name}.123.tmp").write_bytes(good[0].read_bytes()[:50])
    # a torn file under a final name (e.g. copied by hand, a disk fault): reported, skipped
    (trials / "ctorn.parquet").write_bytes(good[1].read_bytes()[:-30])
    (trials / "cempty.parquet").write_bytes(b"")
    files = scan_trials(trials)
    assert sorted(p.name for p in files.good) == sorted(p.name for p in good)
    assert sorted(p.name for p, _ in files.corrupt) == ["cempty.parquet", "ctorn.parquet"]
    df = read_results(tmp_path)
    assert len(df) == 3 and list(df.columns) == RESULT_COLUMNS
    assert sorted(os.path.basename(p) for p in df.attrs["corrupt_files"]) == ["cempty.parquet", "ctorn.parquet"]


def test_folder_is_one_table_for_pandas_and_duckdb(tmp_path):
    import duckdb
    import pandas as pd

    for dp in (1, 2, 4):
        write_row(tmp_path / "trials", _row(dp, tokens_per_s=10.0 * dp))
    (tmp_path / "trials" / ".c.parquet.9.tmp").write_bytes(b"junk")  # duckdb's glob skips dot files too
    via_pandas = pd.read_parquet(tmp_path / "trials")
    assert sorted(via_pandas["dp"]) == [1, 2, 4]
    got = duckdb.sql(f"SELECT dp, tokens_per_s FROM read_parquet('{tmp_path}/trials/*.parquet') ORDER BY dp").fetchall()
    assert got == [(1, 10.0), (2, 20.0), (4, 40.0)]


def test_sweep_store_meta_and_config_round_trip(tmp_path):
    cfg = load_config(["experiment=demo"])
    store = SweepStore(tmp_path / "s1").create(cfg.resolved_yaml, {"gpus": 4, "overrides": ["experiment=demo"]})
    for sub in ("trials", "logs", "plots"):
        assert (store.root / sub).is_dir()
    assert store.read_meta()["args"] == {"gpus": 4, "overrides": ["experiment=demo"]}
    again = store.config(["sweep.parallel=2"])  # from the saved resolved config, plus a new override
    assert again.model == cfg.model and again.train == cfg.train and again.space == cfg.space
    assert again.sweep.parallel == 2 and cfg.sweep.parallel == 1
    with pytest.raises(ValueError, match="not a sweep folder"):
        SweepStore(tmp_path / "nope").read_meta()


def test_pruned_rows_live_in_one_file_read_back_as_rows(tmp_path):
    """Issue 28 item 2: a sweep's pruned rows are one columnar pruned.parquet (was one file per row), read back as one
    row each next to the trials/ files; adding rows again replaces a trial id's row, never duplicates it; a trials/ row
    of the same trial wins; a folder of the older layout (pruned rows under trials/) reads unchanged."""
    from autotune.results.store import PRUNED_FILE

    store = SweepStore(tmp_path / "sweep").create("model: {}\n", {"gpus": 8})
    pruned = [_row(dp, status="pruned", reject_reason=f"r{dp}") for dp in (1, 2, 4)]
    store.add_pruned(pruned[:2])
    store.add_pruned([{**pruned[1], "reject_reason": "again"}, pruned[2]])  # a resume re-records one, adds one
    store.write_row(_row(8, tokens_per_s=5.0))
    assert sorted(p.name for p in store.trials_dir.iterdir()) == [f"{_row(8)['trial_id']}.parquet"]
    assert pq.ParquetFile(store.root / PRUNED_FILE).metadata.num_rows == 3
    df = read_results(store.root)
    assert len(df) == 4 and df["trial_id"].is_unique
    assert dict(zip(df["dp"], df["status"])) == {1: "pruned", 2: "pruned", 4: "pruned", 8: "ok"}
    assert dict(zip(df["dp"], df["reject_reason"]))[2] == "again"
    assert store.finished_candidates() == dict(zip(df["candidate_id"], df["status"]))
    assert len(read_results(store.trials_dir)) == 4  # a trials/ folder reads its sweep's pruned rows too
    store.write_row(_row(4, status="ok"))  # a pruned candidate run after all: its trials/ row is the one read
    assert dict(zip(*[read_results(store.root)[c] for c in ("dp", "status")]))[4] == "ok"
    old = tmp_path / "old" / "trials"  # the layout before pruned.parquet
    for row in pruned:
        write_row(old, row)
    assert sorted(read_results(old.parent)["status"]) == ["pruned"] * 3


def test_torn_pruned_file_is_reported_not_read(tmp_path):
    from autotune.results.store import PRUNED_FILE

    store = SweepStore(tmp_path / "sweep").create("model: {}\n", {"gpus": 8})
    store.write_row(_row(8))
    (store.root / PRUNED_FILE).write_bytes(b"PAR1 torn")
    df = read_results(store.root)
    assert df["status"].tolist() == ["ok"] and df.attrs["corrupt_files"] == [str(store.root / PRUNED_FILE)]
    store.add_pruned([_row(2, status="pruned", reject_reason="r")])  # a resume replaces it whole
    assert sorted(read_results(store.root)["status"]) == ["ok", "pruned"]
