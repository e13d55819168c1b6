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


def test_every_phony_target_has_a_recipe_and_readme_lists_every_model_preset():
    """Issue 28 item 8: `make clean-demo` was declared .PHONY with no recipe; README's model list missed gpt-oss-120b,
    kimi-k2 and llama-2-7b."""
    import re

    text = (REPO / "Makefile").read_text()
    phony = re.search(r"^\.PHONY:(.*)$", text, re.M).group(1).split()
    for target in phony:  # a recipe, or prerequisites that do the work (venv: $(STAMP))
        m = re.search(rf"^{re.escape(target)}:([^#\n]*).*\n((?:\t.*\n?)*)", text, re.M)
        assert m and (m.group(1).strip() or m.group(2).strip()), f"make {target} does nothing"
    readme = (REPO / "README.md").read_text()
    tree = readme[readme.index("  model/ ") : readme.index("  cluster/ ")]
    for preset in sorted(p.stem for p in (REPO / "search_spaces" / "model").glob("*.yaml")):
        assert re.search(rf"\b{re.escape(preset)}\b", tree), f"README's model list misses {preset}"
