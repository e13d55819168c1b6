"""`autotune export --best --format X` for a real sweep's winner: a one-trial local sweep (the tiny model on 2 gloo
ranks, the bench trainer really runs), then every interop format written by the export CLI and parsed back."""

import json
import shlex
import subprocess
import sys

import pytest
import yaml

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from autotune.analyse.report import best_row
from autotune.cli.main import main
from autotune.interop import FORMATS, SUFFIXES
from autotune.results.store import read_results


@pytest.fixture(scope="module")
def real_sweep(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "autotune.cli.main",
            "sweep",
            "--gpus",
            "2",
            "--backend",
            "local",
            "--max-trials",
            "1",
            "--steps",
            "1",
            "--sweep-id",
            "interop",
            "experiment=demo",
            f"sweep.results_dir={root}",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=root,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    sweep_dir = root / "interop"
    row = best_row(read_results(sweep_dir))
    assert row["status"] == "ok" and row["tokens_per_s"] > 0  # a measured winner, not a prediction
    return sweep_dir, row


def test_every_format_exports_the_measured_winner(real_sweep, tmp_path, capsys):
    sweep_dir, row = real_sweep
    dp, mbs, gas = int(row["dp"]), int(row["micro_batch_size"]), int(row["grad_accum_steps"])
    docs = {}
    for fmt in FORMATS:
        out = tmp_path / f"best{SUFFIXES[fmt]}.{fmt}"
        assert main(["export", str(sweep_dir), "--best", "--format", fmt, "-o", str(out)]) == 0
        assert f"wrote {out} ({fmt})" in capsys.readouterr().err
        text = out.read_text()
        docs[fmt] = {
            "torchtitan": tomllib.loads,
            "nanotron": yaml.safe_load,
            "accelerate": yaml.safe_load,
            "deepspeed": json.loads,
            "megatron": lambda t: shlex.split(t, comments=True),
        }[fmt](text)
        assert f"dp{dp}·tp{int(row['tp'])}·pp{int(row['pp'])}·cp{int(row['cp'])}" in text  # the header's layout label
    gbs = dp * mbs * gas
    tt = docs["torchtitan"]
    assert tt["training"]["global_batch_size"] == gbs and tt["training"]["seq_len"] == int(row["seq_len"])
    assert tt["parallelism"]["tensor_parallel_degree"] == int(row["tp"])
    argv = docs["megatron"]
    assert argv[argv.index("--global-batch-size") + 1] == str(gbs)
    assert argv[argv.index("--micro-batch-size") + 1] == str(mbs)
    assert docs["nanotron"]["parallelism"]["dp"] == dp
    assert docs["nanotron"]["tokens"]["batch_accumulation_per_replica"] == gas
    ds = docs["deepspeed"]
    assert (ds["train_batch_size"], ds["train_micro_batch_size_per_gpu"], ds["gradient_accumulation_steps"]) == (
        gbs,
        mbs,
        gas,
    )
    assert ds["zero_optimization"]["stage"] == int(row["zero_stage"])
    assert docs["accelerate"]["num_processes"] == dp * int(row["tp"]) * int(row["cp"])


def test_ok_rows_and_launcher_rows_share_one_code_version(real_sweep):
    """issue 28 item 9: the trainer wrote `git describe` ("bde0b7b") into ok rows, the launcher "0.1.0+gbde0b7b"."""
    from launchers.protocol import code_version

    _, row = real_sweep
    assert row["status"] == "ok" and row["code_version"] == code_version()


def test_export_rejects_an_unknown_format(real_sweep, capsys):
    sweep_dir, _ = real_sweep
    assert main(["export", str(sweep_dir), "--best", "--format", "titan"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--format='titan'" in err and "torchtitan" in err
