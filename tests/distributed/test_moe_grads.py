"""The gradients one step of expert-parallel layouts hands the optimizer equal the single-device model's (fp32,
gloo, world 4, one torchrun launch of tests/distributed/moe_grads.py). This is the direct check of the experts'
gradient reduction (edp all-reduce or FSDP2 over edp, divided by dp*cp) and of the router's (summed over tp under SP,
the balance loss scaled by cp): the loss curves of test_moe_equivalence.py barely see either, since AdamW divides a
constant gradient factor out. Measured: at most 6e-7 relative on every layout; dropping the edp all-reduce or the
balance loss's CP scaling fails it (checked by editing them out), and it found torch's double division on a 1-rank
FSDP2 mesh with a divide factor (relative error 0.75, bench_model.parallel.data_parallel)."""

from __future__ import annotations

import json

import pytest
from conftest import DRIVER, torchrun
from test_moe_equivalence import MLA, _plan, _spec

pytestmark = pytest.mark.timeout(900)
GRAD_TOL = 1e-5
LAYOUTS = {
    "dp4_ep2_zero0": _plan(ep=2),  # experts all-reduced over edp=2 by hand, divided by dp=4
    "dp4_ep4_zero2": _plan(ep=4, zero_stage=2),  # FSDP2 on a 1-rank edp mesh with divide factor 4
    "dp4_ep2_zero3": _plan(ep=2, zero_stage=3),
    "dp2_tp2_sp_ep2_zero1": _plan(tp=2, sequence_parallel=True, ep=2, zero_stage=1),  # router summed over tp
    "dp4_ep2_etp2": _plan(ep=2, etp=2),
    "dp2_cp2_ep2": _plan(cp=2, ep=2, micro_batch_size=2),  # the balance loss's counts summed over cp
    "dp2_tp2_sp_etp2_zero3": _plan(tp=2, sequence_parallel=True, etp=2, zero_stage=3),
    "pp2_dp2_ep2": _plan(pp=2, ep=2),  # the schedule's 1/n_microbatches scaling, then the edp all-reduce
    "mla_sigmoid_dp4_ep2": (*MLA, "model.moe_router=sigmoid", *_plan(ep=2)),
    # recompute: selective re-runs the experts' SwiGLU, full re-runs the dispatch's collectives in backward
    "dp4_ep2_etp2_recompute_selective": _plan(ep=2, etp=2, recompute="selective"),
    "dp4_ep2_zero3_recompute_full": _plan(ep=2, zero_stage=3, recompute="full"),
}


@pytest.fixture(scope="module")
def errors(tmp_path_factory) -> dict[str, dict[str, float]]:
    work = tmp_path_factory.mktemp("moe_grads")
    paths = []
    for name, plan in LAYOUTS.items():
        path = work / f"{name}.json"
        path.write_text(_spec(4, plan).to_json())
        paths.append(str(path))
    out, log = work / "errors.json", work / "torchrun.log"
    code, _ = torchrun(4, [str(DRIVER.with_name("moe_grads.py")), str(out), *paths], log)
    if code != 0 or not out.exists():
        pytest.fail(f"gradient launch failed (exit {code}); log tail:\n{log.read_text(errors='replace')[-4000:]}")
    return json.loads(out.read_text())


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_expert_and_router_gradients_match_one_device(name, errors):
    got = errors[name]
    # 3 MoE layers (1-3) x (w1, w2, w3, gate)
    assert len(got) == 12 and all(k.startswith(("layers.1.", "layers.2.", "layers.3.")) for k in got)
    bad = {k: v for k, v in got.items() if not v < GRAD_TOL}
    assert not bad, f"relative gradient errors above {GRAD_TOL}: {bad}"
