"""Issue 28 item 8: `make demo` explored one layout (dp4·tp1·pp1·cp1: a one-cell TP x PP heatmap). The Makefile's own
demo sweep command, run here with `--backend simulate` (same candidates and order, no trainer), must reach several
dp/tp/pp/cp layouts and TP x PP cells."""

from __future__ import annotations

import shlex
from pathlib import Path

from autotune.cli.main import main
from autotune.results.store import read_results

REPO = Path(__file__).resolve().parents[2]


def test_make_demo_sweep_covers_the_layout_space(tmp_path, monkeypatch, capsys):
    line = next(x for x in (REPO / "Makefile").read_text().splitlines() if "autotune sweep" in x and "demo" in x)
    argv = shlex.split(line.split("/autotune", 1)[1])  # the arguments after $(BIN)/autotune
    assert argv[0] == "sweep"
    monkeypatch.chdir(tmp_path)
    assert main([*argv, "--backend", "simulate"]) == 0
    capsys.readouterr()
    ran = read_results(tmp_path / "results" / "demo").query("status == 'simulated'")
    assert len(ran) == 8  # experiment=demo's sweep.max_trials
    assert len(set(zip(ran["dp"], ran["tp"], ran["pp"], ran["cp"]))) >= 4
    assert len(set(zip(ran["tp"], ran["pp"]))) >= 3  # the TP x PP heatmap has more than one cell
