"""MLPerf Training's Llama 3.1 405B submissions as published layouts (autotune/fitting/mlperf_runs.py) and Megatron's
deferred output-layer weight gradient they run (train.embedding_wgrad_deferral, the megatron profile)."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import pytest

from autotune.core.errors import SpecError
from autotune.core.types import ParallelPlan, TrainSpec
from autotune.fitting.mlperf_runs import measured_tokens_per_s_per_gpu
from autotune.fitting.published_runs import load_mlperf
from autotune.fitting.run_types import preset_model
from autotune.predict.frameworks.megatron import MegatronProfile

GIB = 2**30


def _published_fit():
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "published_fit.py"
    spec = importlib.util.spec_from_file_location("published_fit", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_submissions_split_as_their_configs_say():
    lays = {lay.row: lay for lay in load_mlperf()[0]}
    # every Llama 3.1 405B result of v5.0 (14 submissions: NVIDIA, IBM+CoreWeave+NVIDIA, Nebius) and of v5.1 (6: NVIDIA,
    # University of Florida; its 2 Nebius results are v5.0's logs byte for byte), each the config its folder's README
    # names and its results ran (mlperf_runs.py)
    assert len(lays) == 20 and all(lay.ran and lay.framework == "megatron" for lay in lays.values())
    # eos-dfw_n1024 config_DGXH100_1024x8x24xtp8pp8cp2.sh: 8192 GPUs / (8 x 8 x 2) = dp 64, MINIBS 24 micro-batches;
    # its comment: "global batch size will be DGXNNODES*MINIBS/16" = 1024 x 24 / 16 = 1536
    h = lays["v50-h100-8192"]
    assert (h.plan.dp, h.plan.grad_accum_steps, h.train.global_batch_size, h.plan.vpp) == (64, 24, 1536, 8)
    # tyche_ngpu256 config_GB200_64x4x112xtp4pp8cp2_cg.sh: 256 / (4 x 8 x 2) = dp 4, 112 micro-batches, GBS 448
    g = lays["v50-gb200-256"]
    assert (g.plan.dp, g.plan.grad_accum_steps, g.train.global_batch_size, g.cluster) == (4, 112, 448, "gb200-nvl72")
    assert g.plan.pp_split_embedding and g.plan.pp_split_loss and g.train.embedding_wgrad_deferral == 50
    # v5.1 NVIDIA (theia GB300, tyche and hsg GB200): config_common_cg.sh, sourced last, sets
    # DEFER_EMBEDDING_WGRAD_COMPUTE=False over config_common.sh's True; config_common_fp4.sh sets FP8_PARAM_GATHER=False
    # and TP_COMM_OVERLAP=False
    for row in ("v51-gb300-512", "v51-gb200-512", "v51-gb200-2560", "v51-gb200-5120"):
        v51 = lays[row]
        assert v51.train.embedding_wgrad_deferral == 0 and not v51.train.fp8_param_gather, row
        assert v51.plan.fp8 == "nvfp4" and not v51.plan.tp_overlap, row
    # theia_ngpu512 (systems/theia_ngpu512_ngc25.09_nemo.json: 128 nodes x 4 GB300): config_GB300_128x4x72xtp2pp8cp2,
    # 512 / (2 x 8 x 2) = dp 16, 72 micro-batches, GBS 1152 as its result logs; Nebius n64: DGX H200, FP8 params
    g3, h2 = lays["v51-gb300-512"], lays["v50-h200-512"]
    assert (g3.plan.dp, g3.plan.tp, g3.plan.grad_accum_steps, g3.train.global_batch_size) == (16, 2, 72, 1152)
    assert (h2.cluster, h2.plan.tp_overlap, h2.train.fp8_param_gather, h2.train.embedding_wgrad_deferral) == (
        "h200-141gb",
        True,
        True,
        50,
    )
    # TP_PP_DP_MAPPING=True (custom.yaml use_tp_pp_dp_mapping): tyche_ngpu512's config_..._cg_dplast.sh, every
    # IBM+CoreWeave carina config, every v5.1 NVIDIA config_common.sh (:95) and University of Florida's
    # ../b200_nemo/config_common.sh (:93); tyche_ngpu256, eos-dfw (H100) and Nebius (H200) leave it False
    mapped = {row for row, lay in lays.items() if lay.plan.tp_pp_dp_mapping}
    assert "v50-gb200-512" in mapped and "v50-gb200-256" not in mapped
    assert {r for r in lays if r.startswith("v51-")} <= mapped
    assert not {r for r in lays if "-h100-" in r or "-h200-" in r} & mapped
    assert len(mapped) == 12


def test_measured_speed_is_the_logged_step_time():
    """tokens/s per GPU = global batch x 8192 / median train_step_time / GPUs, hand-computed from the cited logs:
    eos-dfw_n64 (v5.0, 512 H100, GBS 1152) 55.143 s; theia_ngpu512 (v5.1, 512 GB300, GBS 1152) 13.145 s."""
    got = measured_tokens_per_s_per_gpu()
    assert len(got) == 20
    assert got["v50-h100-512"] == pytest.approx(1152 * 8192 / 55.143 / 512)  # 334.3
    assert got["v51-gb300-512"] == pytest.approx(1152 * 8192 / 13.145 / 512)  # 1402.2


def test_every_submission_fits_the_device():
    """They ran, so none may need more than the device (no headroom). The tightest is v5.0 H100 512 GPUs (tp8, 288
    micro-batches): ~67 of 79.6 GiB; v5.1 GB300 (tp2, NVFP4 with bf16 weights kept) ~242 of 277.5 GiB."""
    pf = _published_fit()
    for lay in load_mlperf()[0]:
        got = pf.score(lay)
        assert got["fits_no_headroom"], (lay.row, got["reason"])


def test_deferred_wgrad_buffers_are_hand_computed():
    # per deferred micro-batch: the output layer's input as received (sequence-sharded under SP: h/t per token) and
    # its gradient (V/t per token), bf16. 405B at tp 4, cp 2 (4096 tokens a micro-batch), limit 50 of 112:
    # 50 x 4096 x (16384/4 + 128256/4) x 2 = 14,811,136,000 bytes
    m = preset_model("llama-3.1-405b")
    train = TrainSpec(seq_len=8192, global_batch_size=448, framework="megatron", embedding_wgrad_deferral=50)
    prof = MegatronProfile()
    assert float(prof.deferred_wgrad_buffers(m, 4096, 112, 4, True, 2, train)) == 14_811_136_000
    assert float(prof.deferred_wgrad_buffers(m, 4096, 20, 4, True, 2, train)) == 14_811_136_000 * 20 / 50
    # without SP the whole input: 4096 x (16384 + 32064) x 2 x 50
    assert float(prof.deferred_wgrad_buffers(m, 4096, 112, 4, False, 2, train)) == 4096 * (16384 + 32064) * 2 * 50


def test_deferral_lands_on_the_last_stage_only():
    """Llama-3.1-8B tp2 pp2 (SP), full recompute, 8 micro-batches of 4096 tokens, Megatron's native fused loss (fp32
    softmax: the last stage is the worst): allocated grows by exactly 8 x 4096 x (4096/2 + 128256/2) x 2 bytes; at pp = 1
    Megatron does not defer (the pipelined schedules drain the buffers), so nothing changes."""
    from autotune.core.plan_arrays import arrays_from_plans
    from autotune.predict.memory import memory_arrays
    from autotune.spec.config import load_config

    cfg = load_config(["model=llama-3.1-8b", "cluster=h100-sxm-80gb", "train.framework=megatron"])
    train = dataclasses.replace(cfg.train, global_batch_size=8, seq_len=4096, cross_entropy_fusion="native")
    deferred = dataclasses.replace(train, embedding_wgrad_deferral=8)
    plan = ParallelPlan(
        dp=1, tp=2, pp=2, micro_batch_size=1, grad_accum_steps=8, sequence_parallel=True, recompute="full"
    )
    for p, extra in ((plan, 8 * 4096 * (4096 / 2 + 128256 / 2) * 2), (dataclasses.replace(plan, pp=1), 0.0)):
        arr = arrays_from_plans([p])
        base, got = (
            memory_arrays(arr, cfg.model, train, cfg.cluster),
            memory_arrays(arr, cfg.model, deferred, cfg.cluster),
        )
        assert int(base["worst_pp_rank"][0]) == p.pp - 1
        assert float(got["allocated"][0] - base["allocated"][0]) == pytest.approx(extra, rel=1e-12)


def test_deferral_outside_megatron_is_one_line():
    with pytest.raises(SpecError, match="train.embedding_wgrad_deferral=50 with train.framework=torchtitan"):
        TrainSpec(seq_len=8192, global_batch_size=8, framework="torchtitan", embedding_wgrad_deferral=50)


def test_megatron_export_writes_the_deferral():
    """Megatron-LM's arguments.py: --defer-embedding-wgrad-compute and --wgrad-deferral-limit N (pp > 1)."""
    from autotune.interop import render

    lay = {lay.row: lay for lay in load_mlperf()[0]}["v50-h100-512"]
    cfg_cluster = _published_fit()._config(lay.cluster).cluster
    argv = " ".join(render("megatron", lay.model, lay.train, cfg_cluster, lay.plan).split())
    assert "--defer-embedding-wgrad-compute --wgrad-deferral-limit 50" in argv
