"""Hostile strings never reach a shell unquoted; a results folder is never unpickled.

- `autotune submit --dry-run` run from a folder whose name holds `$(...)`, backticks, `;`, spaces and a newline, with a
  model name full of the same: the generated controller sbatch script is then executed by bash exactly as SLURM would
  (its `#SBATCH` lines are comments to bash). It runs the sweep controller, which starts a real local torchrun trial
  through the local launcher's command line. Nothing may be executed (no marker file appears), and the hostile model name
  must come back byte for byte in the trial's row: proof it travelled as one quoted word through every command.
- the job-array script for the SLURM backend, from the same hostile folder, parses with `bash -n` and keeps each
  hostile path inside one shell word.
- a sweep folder seeded with pickle payloads (disguised as a trial file and as submitit result pickles) is read by
  `report`, `export` and a resumed `sweep`; none of them may unpickle anything.
"""

from __future__ import annotations

import os
import pickle
import shlex
import shutil
import subprocess
import uuid
from pathlib import Path

from harness import AUTOTUNE, REPO

# `touch TOKEN...` creates a file in whatever folder a shell would run it in: the markers are searched for there.
PAYLOAD = "; touch {m}1 && echo $(touch {m}2) `touch {m}3` | sh -c 'touch {m}4' #"


def _hostile_dir(tmp_path: Path, newline: bool = False) -> tuple[Path, str]:
    token = f"pwned-{uuid.uuid4().hex[:8]}-"
    sep = "\n" if newline else " "
    cwd = tmp_path / f"run a b; $(touch {token}dir1){sep}`touch {token}dir2` & touch {token}dir3 'q\"x"
    cwd.mkdir()
    return cwd, token


def _executed(tmp_path: Path, token: str) -> list[str]:
    """Marker files a shell would have created (in the test's folders, the repo, the home folder or /tmp)."""
    found = [str(p) for p in tmp_path.rglob(f"{token}*")]
    for folder in (REPO, Path.home(), Path("/tmp"), Path(os.getcwd())):
        found += [str(p) for p in folder.glob(f"{token}*")]
    return found


def test_submit_script_and_local_launch_quote_everything(tmp_path):
    from autotune.results.store import read_results

    cwd, token = _hostile_dir(tmp_path)
    name = PAYLOAD.format(m=token + "name")
    override = "model.name='" + name.replace("'", "\\'") + "'"  # Hydra's quoted-string syntax
    dry = subprocess.run(
        [
            AUTOTUNE,
            "submit",
            "--dry-run",
            "--gpus",
            "1",
            "--backend",
            "local",
            "--max-trials",
            "1",
            "--steps",
            "1",
            "--sweep-id",
            "hostile",
            "experiment=demo",
            "sweep.warmup_steps=1",
            override,
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert dry.returncode == 0, dry.stderr[-2000:]
    sbatch_dir = cwd / "results" / "hostile" / "sbatch"
    script = tmp_path / "controller.sbatch"
    shutil.copy(sbatch_dir / "controller.sbatch", script)
    shutil.rmtree(cwd / "results")  # a dry run's folder is not a sweep folder; the job would start from none
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0

    job = subprocess.run(["bash", str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert job.returncode == 0, job.stdout[-2000:] + job.stderr[-3000:]
    assert _executed(tmp_path, token) == [], "a hostile string was executed by a shell"
    df = read_results(cwd / "results" / "hostile")
    trial = df[df["status"] != "pruned"]
    assert list(trial["status"]) == ["ok"], trial[["status", "error_type", "error_message"]].to_dict("records")
    assert set(df["model_name"]) == {name}  # the same bytes, through Hydra, the script, torchrun and the trainer


def test_slurm_trial_script_keeps_hostile_paths_in_one_word(tmp_path):
    cwd, token = _hostile_dir(tmp_path)
    dry = subprocess.run(
        [AUTOTUNE, "submit", "--dry-run", "--gpus", "2", "--backend", "slurm", "--sweep-id", "h", "experiment=demo"],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert dry.returncode == 0, dry.stderr[-2000:]
    scripts = sorted((cwd / "results" / "h" / "sbatch").glob("*.sbatch"))
    assert len(scripts) >= 2  # the controller and at least one job-array script
    hostile_root = str(cwd.resolve())
    for script in scripts:
        text = script.read_text()
        assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0, script
        words = shlex.split(text, comments=False, posix=True)
        mentions = [w for w in words if "touch" in w]
        assert mentions, f"{script.name} does not mention the sweep folder at all"
        assert all(hostile_root in w for w in mentions), (script.name, [w for w in mentions if hostile_root not in w])
    assert _executed(tmp_path, token) == []


def test_newline_in_a_path_bound_for_sbatch_is_refused(tmp_path):
    """A newline ends a `#SBATCH` comment line whatever the quoting, and the rest of the path would run as a command
    (found by this suite: `cd '/x\n`touch y`'` then ran `touch y`). Both script writers now refuse it in one line."""
    cwd, token = _hostile_dir(tmp_path, newline=True)
    for backend in ("local", "slurm"):
        proc = subprocess.run(
            [
                AUTOTUNE,
                "submit",
                "--dry-run",
                "--gpus",
                "2",
                "--backend",
                backend,
                "--sweep-id",
                "n",
                "experiment=demo",
            ],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=300,
        )
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and "newline" in lines[0], proc.stderr[-2000:]
        assert not (cwd / "results" / "n").exists()  # refused before anything was written (no empty sbatch/ left)
    assert _executed(tmp_path, token) == []


class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_results_folder_is_never_unpickled(tmp_path):
    sim = ["--gpus", "4", "--backend", "simulate", "--max-trials", "3", "experiment=demo"]
    first = subprocess.run(
        [AUTOTUNE, "sweep", "--sweep-id", "p", *sim], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert first.returncode == 0, first.stderr[-2000:]
    sweep = tmp_path / "results" / "p"
    marker = tmp_path / "unpickled"
    evil = pickle.dumps(_Payload(marker))
    (sweep / "trials" / "cffffffffffff.parquet").write_bytes(evil)
    (sweep / "logs" / "1234").mkdir(parents=True)
    for name in ("1234_0_result.pkl", "1234_submitted.pkl"):  # what submitit leaves beside a job's logs
        (sweep / "logs" / "1234" / name).write_bytes(evil)
    (sweep / "work" / "cffffffffffff").mkdir(parents=True)
    (sweep / "work" / "cffffffffffff" / "RESULT.json").write_bytes(evil)

    for argv in (
        ["report", str(sweep)],
        ["export", str(sweep), "--best", "-o", str(tmp_path / "best.yaml")],
        ["sweep", "--resume", str(sweep), "--max-trials", "4"],
    ):
        proc = subprocess.run([AUTOTUNE, *argv], cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, (argv, proc.stderr[-2000:])
        assert not marker.exists(), f"`autotune {argv[0]}` unpickled a file from the results folder"
