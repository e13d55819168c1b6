"""Hydra config tree: presets compose, override keys users rely on exist, mistakes give one-line errors."""

import pytest

from autotune.core.trial import TrialSpec
from autotune.results.trialfile import dump_trialfile, load_trialfile, make_spec
from autotune.spec.config import ConfigError, load_config

PRESETS = {
    "model": ["tiny", "llama-3.2-1b", "llama-3.2-3b", "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b"],
    "cluster": ["h100-sxm-80gb", "h200-141gb", "a100-80gb", "a100-40gb", "cpu"],
}


@pytest.mark.parametrize("group,name", [(g, n) for g, names in PRESETS.items() for n in names])
def test_every_preset_composes(group, name):
    cfg = load_config([f"{group}={name}"])
    assert getattr(cfg, group).name == name


def test_override_keys_users_rely_on():
    cfg = load_config(
        [
            "model=llama-3.1-8b",
            "model.num_layers=16",
            "model.hidden_size=2048",
            "model.ffn_hidden_size=4096",
            "model.num_heads=16",
            "model.num_kv_heads=4",
            "model.vocab_size=32000",
            "model.tie_embeddings=true",
            "train.seq_len=2048",
            "train.global_batch_size=64",
            "cluster=a100-40gb",
            "cluster.gpus_per_node=4",
            "space.dp=[1,2]",
            "space.tp=[1,2]",
            "space.pp=[1]",
            "space.cp=[1]",
            "space.vpp=[1]",
            "space.zero_stage=[1,3]",
            "space.micro_batch_size=[2]",
            "space.recompute=[full]",
            "space.sequence_parallel=[false]",
            "space.tp_within_node=false",
            "plan.tp=2",
            "plan.zero_stage=3",
            "plan.micro_batch_size=2",
            "plan.recompute=selective",
            "plan.sequence_parallel=true",
        ]
    )
    assert (cfg.model.num_layers, cfg.model.num_kv_heads, cfg.model.tie_embeddings) == (16, 4, True)
    assert (cfg.train.seq_len, cfg.train.global_batch_size, cfg.cluster.gpus_per_node) == (2048, 64, 4)
    assert cfg.space.dp == (1, 2) and cfg.space.zero_stage == (1, 3) and cfg.space.tp_within_node is False
    plan = cfg.plan(8)
    assert (plan.dp, plan.tp, plan.zero_stage, plan.grad_accum_steps) == (4, 2, 3, 8)  # 64 / (4*2)


def test_global_batch_tokens_sets_sequences():
    cfg = load_config(["model=llama-3.1-8b", "train.seq_len=4096", "train.global_batch_tokens=4194304"])
    assert cfg.train.global_batch_size == 1024  # 4M tokens / 4096


def test_precision_sets_dtypes_and_explicit_dtypes_win():
    assert load_config(["train.precision=fp32"]).train.compute_dtype == "fp32"
    t = load_config(["train.param_dtype=bf16", "train.grad_dtype=bf16", "train.master_dtype=fp32"]).train
    assert (t.param_dtype, t.compute_dtype, t.grad_dtype, t.master_dtype) == ("bf16", "bf16", "bf16", "fp32")


@pytest.mark.parametrize(
    "overrides,message",
    [
        (["model=llama-9"], "model='llama-9' is not a preset (choose from:"),
        (["cluster=tpu"], "cluster='tpu' is not a preset (choose from:"),
        (["model.num_layers=abc"], "model.num_layers='abc' must be an integer"),
        (["model.num_layers=0"], "model.num_layers=0 must be an integer >= 1"),
        (["model.num_kv_heads=3"], "model.num_kv_heads=3 does not divide model.num_heads=8"),
        (["model.colour=red"], "model.colour"),
        (["train.precision=fp8"], "train.precision='fp8' must be one of bf16, fp32"),
        (["train.global_batch_tokens=1000"], "train.global_batch_tokens=1000 is not a multiple of train.seq_len=128"),
        (["space.tp=[1,0]"], "space.tp=[1, 0] must list integers >= 1"),
        (["space.recompute=[half]"], "space.recompute='half' must be one of none, selective, full"),
        (["plan.tp=two"], "plan.tp='two' must be an integer"),
    ],
)
def test_bad_overrides_give_one_line_errors(overrides, message):
    with pytest.raises(ConfigError) as e:
        load_config(overrides)
    text = str(e.value)
    assert message in text and "\n" not in text


def test_plan_arithmetic_in_message():
    cfg = load_config(["plan.dp=2", "plan.tp=2"])
    with pytest.raises(ConfigError, match=r"plan.dp\(2\) \* tp\(2\) \* pp\(1\) \* cp\(1\) = 4 != num_gpus\(8\)"):
        cfg.plan(8)
    with pytest.raises(
        ConfigError, match="train.global_batch_size=16 is not divisible by dp\\*micro_batch_size=3\\*1=3"
    ):
        load_config(["plan.dp=3"]).plan(3)


def test_trialfile_round_trip(tmp_path):
    cfg = load_config(["experiment=demo", "plan.tp=2"])
    plan = cfg.plan(4)
    path = dump_trialfile(cfg.model, cfg.train, cfg.cluster, plan, tmp_path / "best.yaml", comment="winner")
    assert path.read_text().startswith("# winner\n")
    assert load_trialfile(path) == (cfg.model, cfg.train, cfg.cluster, plan)
    spec = make_spec(cfg, plan, sweep_id="s", trial_id="t1")
    assert TrialSpec.from_json(spec.to_json()) == spec


def test_trialfile_refuses_python_tags(tmp_path):
    bad = tmp_path / "evil.yaml"
    bad.write_text("autotune_trialfile: 1\nmodel: !!python/object/apply:os.system ['echo pwned']\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_trialfile(bad)
