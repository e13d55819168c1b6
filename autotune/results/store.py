"""The results store: one folder per sweep (docs/architecture.md "Store: the results table").

    results/<sweep_id>/
      sweep.yaml                  resolved config + the CLI arguments that started the sweep (resume reads it back)
      trials/<trial_id>.parquet   one row each, RESULT_SCHEMA, written atomically (temp + fsync + rename)
      pruned.parquet              every `pruned` row (planner-rejected and strategy-pruned candidates), one row
                                  each, in ONE columnar file: a 256-GPU MoE sweep rejects ~40k layouts, and a file
                                  per row made a folder of 40k files / 760 MB that took minutes to read back
      logs/                       one log per trial
      plots/                      `autotune report --plots`

Crash safety: a row is first written to `trials/.<trial_id>.parquet.<pid>.tmp` (a dot-name, which pyarrow's dataset
discovery and duckdb's glob below both skip), fsynced, then `os.replace`d over its final name, and the directory is
fsynced. A controller SIGKILLed at any instant leaves either the old file, the new file, or a stray temp file — never a
half-written `*.parquet`. Trial ids derive from candidate ids (`trial_id_for`), so running a candidate again replaces
its own file: the folder can never hold two rows for one trial. `pruned.parquet` is rewritten whole (old rows + new
ones, temp + fsync + rename) each time rows are added, so it too is either the old or the new file; a trial id in both
places (a folder written by an older version, or a pruned candidate later run) reads as its trials/ row. Folders
written before pruned.parquet existed (every row under trials/) read unchanged.
"""

from __future__ import annotations

import datetime as _dt
import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autotune.core.errors import InputFileError
from autotune.core.types import py_value
from autotune.results.schema import (
    LATER_COLUMNS,
    RESULT_COLUMNS,
    RESULT_FIELDS,
    RESULT_SCHEMA,
    SCHEMA_VERSION,
    normalize_row,
)

if TYPE_CHECKING:  # pandas is heavy: imported where used
    import pandas as pd

log = logging.getLogger(__name__)
SWEEP_FILE = "sweep.yaml"
PRUNED_FILE = "pruned.parquet"
# Statuses that settle a candidate: a resumed sweep never runs these again. (`invalid` too: it is a plan error.)
FINISHED = frozenset({"ok", "oom", "crash", "timeout", "pruned", "simulated", "invalid"})


def trial_id_for(candidate_id: str, rung: int = 0) -> str:
    """The trial id of a candidate (multi-fidelity strategies run one candidate at several rungs)."""
    return f"c{candidate_id}" if rung == 0 else f"c{candidate_id}-r{rung}"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _coerce(row: dict[str, Any]) -> dict[str, Any]:
    """JSON gives 3.0 for ints and NaN for missing; Arrow wants int64 and null."""
    out = {}
    for name, typ in RESULT_FIELDS:
        v = row.get(name)
        if isinstance(v, float) and not math.isfinite(v):
            v = None
        elif v is not None and str(typ) == "int64" and not isinstance(v, bool):
            v = int(v)
        elif v is not None and str(typ) == "double":
            v = float(v)
        elif name == "losses" and v is not None:
            v = [None if (x is None or not math.isfinite(float(x))) else float(x) for x in v]
        out[name] = py_value(v)
    return out


def _write_table_atomic(path: Path, table: Any, fsync: bool = True) -> Path:
    import pyarrow.parquet as pq

    tmp = path.parent / f".{path.name}.{os.getpid()}.tmp"
    with open(tmp, "wb") as fh:
        pq.write_table(table, fh)
        fh.flush()
        if fsync:
            os.fsync(fh.fileno())
    os.replace(tmp, path)
    if fsync:
        _fsync_dir(path.parent)
    return path


def _table(rows: list[dict[str, Any]]) -> Any:
    import pyarrow as pa

    out = []
    for row in rows:
        row = _coerce(normalize_row(row))
        row["schema_version"] = SCHEMA_VERSION
        if not row.get("trial_id"):
            raise ValueError("result row trial_id is empty: every row needs one")
        out.append(row)
    return pa.Table.from_pylist(out, schema=RESULT_SCHEMA)


def add_pruned_rows(sweep_dir: str | Path, rows: list[dict[str, Any]]) -> Path:
    """Add `rows` (status `pruned`) to the sweep's one columnar `pruned.parquet`: the old rows whose trial id is not
    among the new ones, then the new ones, written atomically. An unreadable old file is replaced (its rows are
    recorded again by the resume that reads the planner's rejects anew)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    path = Path(sweep_dir) / PRUNED_FILE
    table = _table(rows)
    if path.is_file():
        try:
            old = pq.read_table(path, schema=RESULT_SCHEMA)
        except Exception as e:  # torn footer, not Parquet, other columns
            log.warning("replacing unreadable %s (%s)", path, type(e).__name__)
        else:
            keep = pc.invert(pc.is_in(old["trial_id"], value_set=table["trial_id"]))
            table = pa.concat_tables([old.filter(keep), table])
    path.parent.mkdir(parents=True, exist_ok=True)
    return _write_table_atomic(path, table)


def _read_pruned(path: Path) -> tuple[Any, str | None]:
    """(the pruned rows as a DataFrame or None, why unreadable or None)."""
    import pyarrow.parquet as pq

    if not path.is_file():
        return None, None
    try:
        return pq.read_table(path, schema=RESULT_SCHEMA).to_pandas(), None
    except Exception as e:
        return None, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def write_row(trials_dir: str | Path, row: dict[str, Any], fsync: bool = True) -> Path:
    """Write one row as `trials_dir/<trial_id>.parquet`, atomically. `fsync=False` only for batches that the caller
    flushes once at the end (the rename is still atomic; only durability across a power cut is deferred)."""
    if not row.get("trial_id"):
        raise ValueError("result row trial_id is empty: every row needs one to name its file")
    table = _table([row])
    trials_dir = Path(trials_dir)
    trials_dir.mkdir(parents=True, exist_ok=True)
    return _write_table_atomic(trials_dir / f"{row['trial_id']}.parquet", table, fsync=fsync)


@dataclass(frozen=True)
class TrialFiles:
    good: tuple[Path, ...]
    corrupt: tuple[tuple[Path, str], ...]  # (path, why)


def scan_trials(trials_dir: str | Path) -> TrialFiles:
    """Every `*.parquet` under trials/ (temp dot-files skipped), split into readable ones and torn/corrupt ones.
    A file is good when its footer parses and its columns are the RESULT_SCHEMA's names."""
    import pyarrow.parquet as pq

    good, corrupt = [], []
    trials_dir = Path(trials_dir)
    if not trials_dir.is_dir():
        return TrialFiles((), ())
    for path in sorted(trials_dir.glob("*.parquet")):
        if path.name.startswith((".", "_")):
            continue
        try:
            names = pq.read_schema(path).names
        except Exception as e:  # torn footer, zero bytes, not Parquet: pyarrow raises ArrowInvalid/OSError
            corrupt.append((path, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"))
            continue
        missing = [c for c in RESULT_COLUMNS if c not in names and c not in LATER_COLUMNS]
        if missing:
            corrupt.append((path, f"missing columns {missing[:3]}"))
        else:
            good.append(path)
    return TrialFiles(tuple(good), tuple(corrupt))


def read_results(sweep_dir: str | Path) -> pd.DataFrame:
    """All rows of a sweep as one DataFrame (`pandas.read_parquet` over trials/, plus pruned.parquet). Torn or corrupt
    files are reported (logged, and listed in `df.attrs["corrupt_files"]`) and never read as data."""
    import pandas as pd

    sweep_dir = Path(sweep_dir)
    trials = sweep_dir / "trials" if (sweep_dir / "trials").is_dir() else sweep_dir  # a sweep folder or trials/
    if not trials.is_dir():
        raise FileNotFoundError(2, "no such sweep folder", str(sweep_dir))
    files = scan_trials(trials)
    root = sweep_dir if trials != sweep_dir else (sweep_dir.parent if sweep_dir.name == "trials" else None)
    pruned_path = root / PRUNED_FILE if root is not None else sweep_dir / f"({PRUNED_FILE} of no sweep)"
    pruned, why_pruned = _read_pruned(pruned_path)
    corrupt = list(files.corrupt) + ([(pruned_path, why_pruned)] if why_pruned else [])
    for path, why in corrupt:
        log.warning("skipping corrupt result file %s (%s)", path, why)
    if not files.good:
        df = pd.DataFrame({name: pd.Series(dtype=_pandas_dtype(str(t))) for name, t in RESULT_FIELDS})
    elif not files.corrupt:
        df = pd.read_parquet(trials, schema=RESULT_SCHEMA)
    else:
        df = pd.read_parquet([str(p) for p in files.good], schema=RESULT_SCHEMA)
    if pruned is not None and len(pruned):
        pruned = pruned[~pruned["trial_id"].isin(df["trial_id"])]  # a trials/ row wins over a pruned one
        df = pruned if df.empty else pd.concat([df, pruned], ignore_index=True)
    df = df.sort_values("trial_id", kind="stable").reset_index(drop=True)
    df.attrs["corrupt_files"] = [str(p) for p, _ in corrupt]
    return df


def _pandas_dtype(arrow_type: str) -> str:
    return {"int64": "Int64", "double": "float64", "bool": "boolean"}.get(arrow_type, "object")


class SweepStore:
    """One sweep's folder."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.trials_dir = self.root / "trials"
        self.logs_dir = self.root / "logs"
        self.plots_dir = self.root / "plots"
        self.work_dir = self.root / "work"  # SPEC.json / RESULT.json per trial (launcher scratch)

    @property
    def sweep_id(self) -> str:
        return self.root.name

    def exists(self) -> bool:
        return (self.root / SWEEP_FILE).is_file()

    def create(self, resolved_yaml: str, args: dict[str, Any]) -> SweepStore:
        """Make the folders and write sweep.yaml (atomically): the resolved config and the arguments to rerun it."""
        import yaml

        for d in (self.trials_dir, self.logs_dir, self.plots_dir, self.work_dir):
            d.mkdir(parents=True, exist_ok=True)
        doc = {
            "sweep_id": self.sweep_id,
            "schema_version": SCHEMA_VERSION,
            "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "args": args,
            "config": yaml.safe_load(resolved_yaml),
        }
        tmp = self.root / f".{SWEEP_FILE}.tmp"
        tmp.write_text(yaml.safe_dump(doc, sort_keys=False))
        os.replace(tmp, self.root / SWEEP_FILE)
        return self

    def read_meta(self) -> dict[str, Any]:
        import yaml

        path = self.root / SWEEP_FILE
        if not path.is_file():
            raise InputFileError(f"--resume={str(self.root)!r} is not a sweep folder (no {SWEEP_FILE})")
        doc = yaml.safe_load(path.read_text())
        if not isinstance(doc, dict) or "args" not in doc:
            raise InputFileError(f"{path}: not a sweep file (no `args` key)")
        return doc

    def config(self, overrides: tuple[str, ...] | list[str] = ()) -> Any:
        """The sweep's Config rebuilt from the resolved config saved in sweep.yaml (so later edits of the presets do
        not change what a resumed or exported sweep means), with `overrides` applied on top (e.g. sweep.parallel=2)."""
        import tempfile

        import yaml

        from autotune.spec.config import load_config

        resolved = self.read_meta().get("config")
        if not isinstance(resolved, dict):
            raise InputFileError(f"{self.root / SWEEP_FILE}: no resolved `config` mapping")
        with tempfile.TemporaryDirectory(prefix="autotune-sweepcfg-") as tmp:
            Path(tmp, "config.yaml").write_text(yaml.safe_dump(resolved, sort_keys=False))
            return load_config(list(overrides), config_dir=tmp)

    def write_row(self, row: dict[str, Any]) -> Path:
        return write_row(self.trials_dir, row)

    def add_pruned(self, rows: list[dict[str, Any]]) -> Path | None:
        """Record `pruned` rows in the sweep's one pruned.parquet (nothing to do for no rows)."""
        return add_pruned_rows(self.root, rows) if rows else None

    def read(self) -> pd.DataFrame:
        return read_results(self.root)

    def finished_candidates(self) -> dict[str, str]:
        """candidate_id -> status for every readable row whose status settles the candidate."""
        df = self.read()
        done = df[df["status"].isin(FINISHED)]
        return dict(zip(done["candidate_id"], done["status"]))
