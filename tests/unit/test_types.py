"""Types: parameter counts against the public model cards, FLOPs formula by hand, plan validation messages."""

import pytest

from autotune.core.errors import SpecError
from autotune.core.model import ModelSpec
from autotune.core.types import ParallelPlan, TrainSpec, candidate_id
from autotune.spec.config import load_config


@pytest.mark.parametrize(
    "preset,expected_params",
    [
        # Hugging Face model cards / safetensors metadata: total parameter counts.
        ("llama-3.2-1b", 1_235_814_400),  # meta-llama/Llama-3.2-1B: 1.24B (tied embeddings)
        ("llama-3.2-3b", 3_212_749_824),  # meta-llama/Llama-3.2-3B: 3.21B (tied embeddings)
        ("llama-3.1-8b", 8_030_261_248),  # meta-llama/Llama-3.1-8B: 8.03B
        ("llama-3.1-70b", 70_553_706_496),  # meta-llama/Llama-3.1-70B: 70.6B
        ("llama-3.1-405b", 405_853_388_800),  # meta-llama/Llama-3.1-405B: 405.85B
    ],
)
def test_num_params_matches_model_cards(preset, expected_params):
    assert load_config([f"model={preset}"]).model.num_params() == expected_params


def test_flops_per_token_by_hand():
    # Tiny shapes so the terms can be checked by hand: h=8, f=16, heads=2 (head_dim 4), kv heads=1 (kv_dim 4), V=10, L=1.
    m = ModelSpec(name="t", num_layers=1, hidden_size=8, ffn_hidden_size=16, num_heads=2, num_kv_heads=1, vocab_size=10)
    # matmul params: wq 64 + wk 32 + wv 32 + wo 64 + 3*8*16=384 -> 576 per layer; head 10*8 = 80 -> 656
    assert m.matmul_params() == 656
    # 6*656 + causal attention 6*L*s*heads*head_dim = 6*1*32*2*4 = 1536 at s=32
    assert m.flops_per_token(32) == 6 * 656 + 1536


def test_tied_embeddings_count_once():
    untied = ModelSpec(
        name="a", num_layers=2, hidden_size=8, ffn_hidden_size=16, num_heads=2, num_kv_heads=2, vocab_size=10
    )
    tied = ModelSpec(
        name="a",
        num_layers=2,
        hidden_size=8,
        ffn_hidden_size=16,
        num_heads=2,
        num_kv_heads=2,
        vocab_size=10,
        tie_embeddings=True,
    )
    assert untied.num_params() - tied.num_params() == 10 * 8


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(tp=0), "plan.tp=0 must be an integer >= 1"),
        (dict(zero_stage=4), "plan.zero_stage=4 must be one of 0, 1, 2, 3"),
        (dict(recompute="some"), "plan.recompute='some' must be one of none, selective, full"),
    ],
)
def test_plan_validation_names_field_value_rule(kwargs, message):
    with pytest.raises(ValueError) as e:
        ParallelPlan(**kwargs)
    assert str(e.value) == message


@pytest.mark.parametrize(
    "kwargs,rule,message",
    [
        (dict(sequence_parallel=True), "sp_needs_tp", "plan.sequence_parallel=true requires plan.tp > 1 (tp=1)"),
        (dict(vpp=2), "vpp_needs_pp", "plan.vpp=2 requires plan.pp > 1 (pp=1)"),
        (
            dict(pp=2, vpp=2),
            "schedule_matches_vpp",
            "plan.pp_schedule='1f1b' with vpp=2: interleaved_1f1b is used exactly when vpp > 1",
        ),
        (
            dict(dp=3, grad_accum_steps=3),
            "batch_divisible",
            "train.global_batch_size=8 is not divisible by dp*micro_batch_size=3*1=3",
        ),
        (
            dict(dp=2, grad_accum_steps=3),
            "batch_product",
            "dp*micro_batch_size*grad_accum_steps=2*1*3=6 != train.global_batch_size=8",
        ),
    ],
)
def test_cross_field_rules_live_in_the_rule_table(kwargs, rule, message):
    """A plan checks each field alone; the rules across fields are one table (autotune.layouts.rules): the plan is
    built, `require_well_formed` (exporters, trainer) refuses it with the rule's message and `rejections` names the
    rule id. Batch: global_batch_size=8 sequences per step must equal dp*micro_batch_size*grad_accum_steps."""
    from autotune.core.plan_arrays import arrays_from_plans
    from autotune.layouts.rules import WELL_FORMED, rejections, require_well_formed

    plan = ParallelPlan(**kwargs)
    train = TrainSpec(seq_len=16, global_batch_size=8)
    with pytest.raises(SpecError) as e:
        require_well_formed(plan, train)
    assert str(e.value) == message
    ids, _ = rejections(arrays_from_plans([plan]), None, train, None, None, WELL_FORMED)
    assert ids.tolist() == [rule]


def test_model_validation_names_rule():
    with pytest.raises(ValueError, match=r"model.num_kv_heads=3 does not divide model.num_heads=8"):
        ModelSpec(name="x", num_layers=1, hidden_size=64, ffn_hidden_size=64, num_heads=8, num_kv_heads=3, vocab_size=8)


def test_candidate_id_is_stable_and_discriminating():
    cfg = load_config(["model=llama-3.1-8b"])
    a = ParallelPlan(dp=8, tp=2, pp=2, micro_batch_size=1, grad_accum_steps=64)
    b = ParallelPlan(dp=8, tp=2, pp=2, micro_batch_size=2, grad_accum_steps=32)
    assert candidate_id(a, cfg.model, cfg.train) == candidate_id(ParallelPlan(**a.to_dict()), cfg.model, cfg.train)
    assert candidate_id(a, cfg.model, cfg.train) != candidate_id(b, cfg.model, cfg.train)
    longer = TrainSpec(**{**cfg.train.__dict__, "seq_len": 8192})
    assert candidate_id(a, cfg.model, cfg.train) != candidate_id(a, cfg.model, longer)
