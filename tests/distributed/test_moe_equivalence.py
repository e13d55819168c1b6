"""Expert parallelism trains the same mixture-of-experts model: every layout's per-step loss curve (5 AdamW steps,
tiny-moe, fp32, gloo) reproduces the 1-rank curve within 1e-4 relative, as tests/distributed/test_equivalence.py
does for the dense layouts. All layouts are world 4 and run in the suite's one world-4 launch.

Why the curves must match: routing is dropless (moe_capacity_factor null), so every token reaches its top-2 experts
whichever rank holds them; the layouts differ only in fp32 summation order (measured: within 1e-7 relative of the
1-rank curve). The load-balancing loss is on (tiny-moe: coefficient 0.01): DeepSeek-V3's sequence-wise loss, whose
value does not depend on how sequences are batched, with the per-sequence counts summed over CP/SP ranks
(bench_model.moe). The reported loss is the language-model loss; the balance loss enters the gradients.

What a loss curve cannot see, test_moe_grads.py checks on the gradients themselves: leaving out the experts' edp
all-reduce moved this 5-step curve by only 1.3e-5 relative (measured), and a constant factor on one parameter
group's gradients does not move it at all (AdamW divides it out). CP layouts are also checked there only, which keeps
this file near a minute on 2 cores."""

from __future__ import annotations

import uuid

import pytest
from conftest import POOL, STEPS, max_rel_diff, run_in_process
from moe_shapes import TINY_MLA

FP32_TOL = 1e-4
pytestmark = pytest.mark.timeout(1200)
BASE = ("model=tiny-moe", "train.global_batch_size=4", "train.precision=fp32")
MLA = TINY_MLA
BALANCED = ("train.moe_routing=balanced",)


def _spec(num_gpus: int, overrides: tuple[str, ...] = ()):
    from autotune.results.trialfile import make_spec
    from autotune.spec.config import load_config

    cfg = load_config([*BASE, *overrides])
    return make_spec(cfg, cfg.plan(num_gpus), trial_id=f"t{uuid.uuid4().hex[:8]}", timeout_s=1200.0, **STEPS)


def _plan(**kw) -> tuple[str, ...]:
    return tuple(f"plan.{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in kw.items())


# name -> (model/train overrides, plan overrides); every layout has world size 4
WORLD4 = {
    "dp4_ep2_zero0": ((), _plan(ep=2)),  # edp 2: experts all-reduced over their replicas
    "dp4_ep4_zero2": ((), _plan(ep=4, zero_stage=2)),  # edp 1: FSDP on a 1-rank mesh, divided by dp
    "dp2_tp2_sp_ep2_zero1": ((), _plan(tp=2, sequence_parallel=True, ep=2, zero_stage=1)),
    "pp2_dp2_ep2": ((), _plan(pp=2, ep=2)),
    "dp4_ep2_zero3": ((), _plan(ep=2, zero_stage=3)),  # ZeRO-3 on the dense part, experts FSDP over edp 2
    "dp4_ep2_etp2": ((), _plan(ep=2, etp=2)),
    "mla_dp4_ep2": (MLA, _plan(ep=2)),
    "balanced_dp4_ep2": (BALANCED, _plan(ep=2)),  # no count exchange: every rank's counts are known
}


# in the suite's one world-4 launch (conftest.LayoutPool); the last model= override wins over the pool's base model
POOL.register(4, {f"moe_{name}": (*BASE, *model, *plan) for name, (model, plan) in WORLD4.items()})


@pytest.fixture(scope="module")
def world4(pool_rows):
    rows = pool_rows(4)
    return {name: rows[f"moe_{name}"] for name in WORLD4}


@pytest.fixture(scope="module")
def references() -> dict[tuple[str, ...], list[float]]:
    """1-rank curves (in-process) of each model variant the layouts use."""
    return {extra: run_in_process(_spec(1, extra))["losses"] for extra in {m for m, _ in WORLD4.values()}}


@pytest.mark.parametrize("name", list(WORLD4))
def test_moe_layout_matches_one_rank(name, world4, references):
    row = world4[name]
    assert row["status"] == "ok" and len(row["losses"]) == 5
    ref = references[WORLD4[name][0]]
    rel = max_rel_diff(ref, row["losses"])
    assert rel < FP32_TOL, f"max relative loss difference {rel:.2e} (ref {ref}, got {row['losses']})"


def test_reference_curves_learn_and_differ(references):
    # ln(512) = 6.238: a uniform predictor over the vocabulary (the synthetic tokens are uniform); the steps move it
    for curve in references.values():
        assert abs(curve[0] - 6.24) < 0.1 and max(curve) - min(curve) > 1e-3
    # MLA and balanced routing are different computations: their curves are not the learned-GQA one
    assert max_rel_diff(references[()], references[MLA]) > 1e-3
    assert max_rel_diff(references[()], references[BALANCED]) > 1e-4
