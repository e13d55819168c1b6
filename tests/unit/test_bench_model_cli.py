"""`autotune bench` argument checks (one-line errors, exit 2) and `probe-memory` on a fake process group, with the
optimizer bytes checked by hand: tiny Llama (search_spaces/model/tiny.yaml) has
  embedding 1024*128 + head 1024*128 + final norm 128
  + 8 layers * (wq 128*128 + wk 128*64 + wv 128*64 + wo 128*128 + 3 * 128*352 + 2 norms * 128) = 1,738,880 params,
AdamW keeps 2 fp32 states per element: 13,911,040 bytes unsharded, half of it per rank with ZeRO-3 over dp=2."""

from __future__ import annotations

import pytest

from autotune.cli.main import main

TINY_PARAMS = 1024 * 128 * 2 + 128 + 8 * (128 * 128 * 2 + 128 * 64 * 2 + 3 * 128 * 352 + 2 * 128)


def test_tiny_param_count_by_hand():
    from autotune.spec.config import load_config

    assert TINY_PARAMS == 1_738_880 == load_config(["model=tiny"]).model.num_params()


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["bench", "--nproc", "3", "model=tiny", "plan.tp=2"], "plan.tp*pp*cp=2 does not divide num_gpus=3"),
        (["bench", "--nproc", "2", "model=tiny", "plan.dp=1"], "= 1 != num_gpus(2)"),
    ],
)
def test_bench_rejects_mismatched_nproc_in_one_line(argv, needle, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1


def test_bench_rejects_zero_nproc(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["bench", "--nproc", "0"])
    assert exc.value.code == 2 and "--nproc='0' must be an integer >= 1" in capsys.readouterr().err


def _probe(zero: int) -> dict:
    from autotune.results.trialfile import make_spec
    from autotune.spec.config import load_config
    from bench_model.memory_probe import probe_memory

    cfg = load_config(["model=tiny", "train.precision=fp32", "train.global_batch_size=4", f"plan.zero_stage={zero}"])
    return probe_memory(make_spec(cfg, cfg.plan(2)))


def test_probe_memory_on_fake_process_group():
    z0, z3 = _probe(0), _probe(3)
    assert z0["mem_optimizer_bytes"] == 2 * 4 * TINY_PARAMS
    assert z3["mem_optimizer_bytes"] == 2 * 4 * TINY_PARAMS / 2
    assert z3["mem_params_bytes"] < z0["mem_params_bytes"]  # sharded at rest, one block gathered at a time
    assert z0["mem_params_bytes"] >= 4 * TINY_PARAMS  # replicated fp32 parameters
    assert z3["mem_activations_bytes"] > 0
    assert z0["mem_allocated_bytes"] == pytest.approx(
        sum(
            z0[k]
            for k in (
                "mem_params_bytes",
                "mem_grads_bytes",
                "mem_optimizer_bytes",
                "mem_activations_bytes",
                "mem_logits_bytes",
                "mem_buffers_bytes",
            )
        )
    )


def test_probe_memory_refuses_pipeline_with_reason():
    from autotune.results.trialfile import make_spec
    from autotune.spec.config import load_config
    from bench_model.memory_probe import probe_memory

    cfg = load_config(["model=tiny", "plan.pp=2"])
    with pytest.raises(ValueError, match="plan.pp=2: probe-memory supports pp=1 only"):
        probe_memory(make_spec(cfg, cfg.plan(2)))


def test_probe_memory_builds_the_hsdp_mesh_and_matches_the_model():
    """HSDP on a fake world of 8 (dp=8, zero_stage=3): the trainer's FSDP2 on the 2-D (replicate, shard) mesh leaves
    rank 0 with 1/dp_shard of every parameter, so AdamW holds 2 fp32 states of TINY_PARAMS/dp_shard elements (tiny's
    dims all divide by 2 and 4: no padding): 13,911,040/4 = 3,477,760 bytes at dp_shard=4, /2 = 6,955,520 at
    dp_shard=2, against 1,738,880 at full sharding (dp_shard=0 = 8 ranks). The memory model
    (autotune.predict.frameworks.bench_model.model_state_arrays with shard = dp_shard*cp) predicts the same bytes."""
    from autotune.predict.memory import estimate_memory
    from autotune.results.trialfile import make_spec
    from autotune.spec.config import load_config
    from bench_model.memory_probe import probe_memory

    for shard, want in ((4, 3_477_760), (2, 6_955_520), (0, 1_738_880)):
        cfg = load_config(
            ["model=tiny", "train.precision=fp32", "train.global_batch_size=8", "plan.zero_stage=3"]
            + [f"plan.dp_shard={shard}"]
        )
        plan = cfg.plan(8)
        probed = probe_memory(make_spec(cfg, plan))
        assert probed["mem_optimizer_bytes"] == want == 2 * 4 * TINY_PARAMS / (shard or 8), shard
        assert estimate_memory(plan, cfg.model, cfg.train, cfg.cluster).optimizer_bytes == want, shard
