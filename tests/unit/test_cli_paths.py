"""Issue 28 item 5: `cluster=` and `model=` accept the path of a preset YAML (what `autotune calibrate -o` and
`autotune netbench -o` write; `cluster=/path/my-calibrated.yaml` used to be refused as "not a preset"), and `model=`
the path of a Hugging Face config.json."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from autotune.cli.main import main
from autotune.spec.config import SEARCH_SPACES

REPO = Path(__file__).resolve().parents[2]


def test_cluster_and_model_accept_a_path(tmp_path, capsys, monkeypatch):
    doc = yaml.safe_load((SEARCH_SPACES / "cluster" / "h100-sxm-80gb.yaml").read_text())
    doc.update(name="my-calibrated", gpus_per_node=4)
    (tmp_path / "my-calibrated.yaml").write_text(yaml.safe_dump(doc))
    model = yaml.safe_load((SEARCH_SPACES / "model" / "llama-3.2-1b.yaml").read_text())
    model.update(name="my-model", num_layers=4)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "m.yaml").write_text(yaml.safe_dump(model))
    monkeypatch.chdir(tmp_path)  # a relative path, as a user types it
    args = ["plan", "--gpus", "8", "cluster=my-calibrated.yaml", "model=sub/m.yaml", "space.tp=[4,8]", "--json"]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["cluster"] == "my-calibrated" and out["model"] == "my-model"
    assert {r["tp"] for r in out["top"]} == {4}  # the file's gpus_per_node=4 rules out tp=8 (the preset's is 8)
    assert main([*args[:-2], "space.tp=[2,4]", "cluster.gpus_per_node=2", "--json"]) == 0  # overrides on top
    assert {r["tp"] for r in json.loads(capsys.readouterr().out)["top"]} == {2}
    hf = REPO / "examples" / "hf_configs" / "mistral-7b-v0.1.json"
    assert main(["plan", "--gpus", "8", f"model={hf}", "cluster=h100-sxm-80gb", "--top", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["model"] == "mistral-7b-v0.1"  # model=hf model.config_path=FILE
    assert main(["plan", "--gpus", "8", "cluster=nothere.yaml"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err == "autotune: error: cluster='nothere.yaml': no such file (give a preset name or the path of a YAML file)"
    )
