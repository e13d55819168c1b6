"""Issue 28 item 3: no silently ignored input. Every command acts on every override key family it is given or refuses
it in one line (autotune/cli/keys.py has the table): `plan ... plan.tp=2` pins tp (it used to print the same table as
without it), `estimate ... space.tp=[2,4]` is refused (it used to estimate the default layout)."""

from __future__ import annotations

import json

import pytest

from autotune.cli.keys import check_overrides
from autotune.cli.main import main
from autotune.core.errors import UsageError

# command -> family -> "acts" (passes through), "pins" (rewritten into the space) or "refuses"
MATRIX = {
    "plan": {"model.num_layers=4": "acts", "space.tp=[1,2]": "acts", "space.memory_headroom=0.1": "acts",
             "plan.tp=2": "pins", "plan.grad_accum_steps=4": "refuses", "sweep.max_trials=3": "refuses"},
    "sweep": {"model.num_layers=4": "acts", "space.tp=[1,2]": "acts", "plan.tp=2": "pins",
              "plan.grad_accum_steps=4": "refuses", "sweep.max_trials=3": "acts"},
    "submit": {"space.tp=[1,2]": "acts", "plan.tp=2": "pins", "sweep.max_trials=3": "acts"},
    "estimate": {"model.num_layers=4": "acts", "space.tp=[2,4]": "refuses", "space.memory_headroom=0.1": "acts",
                 "plan.tp=2": "acts", "plan.grad_accum_steps=4": "acts", "sweep.max_trials=3": "refuses"},
    "probe-memory": {"space.tp=[2,4]": "refuses", "plan.tp=2": "acts", "sweep.timeout_s=5": "refuses"},
    "bench": {"space.zero_stage=[1]": "refuses", "plan.tp=2": "acts", "sweep.timed_steps=2": "acts"},
    "calibrate": {"model=tiny": "acts", "train.seq_len=64": "acts", "cluster.gpus_per_node=4": "acts",
                  "experiment=demo": "acts", "space.tp=[2]": "refuses", "plan.tp=2": "refuses",
                  "sweep.parallel=2": "refuses"},
    "netbench": {"cluster=h100-sxm-80gb": "acts", "sweep.timeout_s=9": "acts", "model=tiny": "refuses",
                 "plan.tp=2": "refuses", "train.seq_len=64": "refuses"},
}  # fmt: skip


@pytest.mark.parametrize("command,override,want", [(c, o, w) for c, fam in MATRIX.items() for o, w in fam.items()])
def test_every_command_acts_on_or_refuses_each_key_family(command, override, want):
    if want == "refuses":
        with pytest.raises(UsageError, match=rf"^{override.split('=')[0]}="):
            check_overrides(command, [override])
        return
    got = check_overrides(command, [override])
    key, _, value = override.partition("=")
    assert got == ([f"space.{key.split('.')[1]}=[{value}]"] if want == "pins" else [override])


def test_plan_pins_plan_keys_and_estimate_refuses_space_lists(capsys):
    assert main(["plan", "--gpus", "4", "plan.tp=2", "plan.zero_stage=1", "--top", "50", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["top"] and {(r["tp"], r["zero_stage"]) for r in out["top"]} == {(2, 1)}
    assert out["enumerated"] < 200  # the unpinned space of tiny on 4 GPUs is larger
    assert main(["estimate", "space.tp=[2,4]"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "space.tp=[2,4]" in err and "plan.tp=" in err
    assert main(["plan", "--gpus", "4", "plan.tp=[1,2]"]) == 2
    assert "space.tp=[1,2]" in capsys.readouterr().err


def test_a_bad_pinned_value_names_the_key_typed(capsys):
    assert main(["plan", "--gpus", "4", "plan.tp=two"]) == 2
    assert capsys.readouterr().err.strip() == "autotune: error: plan.tp=two must be an integer (it pins space.tp)"
    assert main(["plan", "--gpus", "4", "plan.tp=0"]) == 2
    assert capsys.readouterr().err.startswith("autotune: error: plan.tp=0 (pins space.tp): space.tp=[0] must list")
