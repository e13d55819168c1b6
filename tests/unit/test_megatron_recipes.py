"""The megatron profile as NVIDIA's performance recipes run Megatron-Core (autotune/predict/frameworks/megatron.py):
the allocation pattern behind its reserved peak, the recipes' bf16 main_grad, and the published layouts it must
accept (benchmarks/published_fit.py)."""

from __future__ import annotations

import numpy as np
import pytest

from autotune.core.types import TrainSpec
from autotune.predict.frameworks import get_profile
from autotune.predict.reserved import ROUND_LARGE

MEG = get_profile("megatron")
PSI, D = 1.0e9, 8  # parameters on the rank, data-parallel group
ARR = {"zero_stage": np.array([1]), "dp": np.array([D]), "cp": np.array([1])}


def test_megatron_step_allocates_only_the_fp32_grad_shard_copy():
    fp32 = TrainSpec(4096, 8)  # --bf16 default: fp32 main_grad, nothing allocated by the step
    assert MEG.step_temporaries(PSI, 1, D, ARR, 2, train=fp32) == 0
    # grad_reduce_in_fp32=False: distrib_optimizer.py `shard_main_param.grad = shard_model_grad.float()`, 4 bytes x
    # Psi/D, rounded up to the allocator's 2 MiB
    bf16 = TrainSpec(4096, 8, param_dtype="bf16", grad_dtype="bf16", master_dtype="fp32")
    want = np.ceil(4 * PSI / D / ROUND_LARGE) * ROUND_LARGE
    assert float(MEG.step_temporaries(PSI, 1, D, ARR, 2, train=bf16)) == pytest.approx(want)
    whole = np.ceil(4 * PSI / ROUND_LARGE) * ROUND_LARGE
    assert float(MEG.step_temporaries(PSI, 0, D, ARR, 2, train=bf16)) == pytest.approx(whole)  # all of it without ZeRO
    # bench_model's ZeRO1AdamW: the foreach AdamW temporary over Psi/D plus the flat send (Psi/D) and receive (Psi)
    # buffers, 4 bytes each (autotune/predict/reserved.py), 9.5x Megatron's here
    bench = float(get_profile("bench_model").step_temporaries(PSI, 1, D, ARR, 2, train=fp32)[0])
    assert bench == pytest.approx(4 * PSI / D + 4 * (PSI + PSI / D), rel=1e-3)


def test_apex_distributed_fused_adam_step_holds_the_bf16_grad_shard_only():
    # NeMo 1.x (train.master_remainders): apex/contrib/optimizers/distributed_fused_adam.py @ f3f04924
    # `_local_step_with_param_remainders` reads grads_bucket.grads_shard in grad_sync_dtype (bf16 here), allocated by
    # `_start_bucket_grad_sync` (torch.empty([shard_size], dtype=grads_bucket.dtype)): 2 bytes x Psi/D, not the
    # Megatron distributed optimizer's fp32 copy (4 bytes x Psi/D)
    apex = TrainSpec(
        4096,
        8,
        param_dtype="bf16",
        grad_dtype="bf16",
        master_dtype="fp32",
        master_remainders=True,
        framework="megatron",
    )
    want = np.ceil(2 * PSI / D / ROUND_LARGE) * ROUND_LARGE
    assert float(MEG.step_temporaries(PSI, 1, D, ARR, 2, train=apex)) == pytest.approx(want)
    megatron = TrainSpec(4096, 8, param_dtype="bf16", grad_dtype="bf16", master_dtype="fp32")
    fp32_copy = np.ceil(4 * PSI / D / ROUND_LARGE) * ROUND_LARGE
    assert float(MEG.step_temporaries(PSI, 1, D, ARR, 2, train=megatron)) == pytest.approx(fp32_copy)


def test_megatron_main_grad_follows_grad_dtype():
    fp32 = MEG.model_states(PSI, 1, D, TrainSpec(4096, 8))
    bf16 = MEG.model_states(PSI, 1, D, TrainSpec(4096, 8, param_dtype="bf16", grad_dtype="bf16"))
    assert float(fp32["grads"]) == 4 * PSI and float(bf16["grads"]) == 2 * PSI


def test_megatron_fsdp_shards_params_and_grads_and_double_buffers_two_units():
    """Megatron-FSDP (zero_stage 3 = optim_grads_params, 2 = optim_grads) as NVIDIA's recipes run it (bf16
    main_grad, --fsdp-double-buffer): every state / D, plus one unit's unsharded gradient and two gathered units."""
    bf16 = TrainSpec(4096, 8, param_dtype="bf16", grad_dtype="bf16", master_dtype="fp32")
    z3 = MEG.model_states(PSI, 3, D, bf16)
    assert [float(z3[k]) for k in ("params", "grads", "optimizer")] == pytest.approx(
        [2 * PSI / D, 2 * PSI / D, 12 * PSI / D]
    )
    z2 = MEG.model_states(PSI, 2, D, bf16)
    assert [float(z2[k]) for k in ("params", "grads")] == pytest.approx([2 * PSI, 2 * PSI / D])
    layer = 1.0e8
    assert float(MEG.buffers(layer, 3, D, bf16)) == pytest.approx(2 * layer + 2 * 2 * layer)
    assert float(MEG.buffers(layer, 2, D, bf16)) == pytest.approx(2 * layer)
    assert float(MEG.buffers(layer, 1, D, bf16)) == 0  # distributed optimizer: the buffers are the states


def test_embedding_and_loss_take_a_layer_slot_of_the_end_stages():
    """Megatron's account_for_embedding/loss_in_pipeline_split (transformer_block.py get_num_layers_to_build): Llama
    3.1 405B's 126 layers + 2 over PP16 x VP8 = 128 slots, one per virtual stage; stage 0's slot is the embedding,
    stage 127's the loss. Rank 0 holds stages 0, 16, ..., 112: 7 layers; rank 1 eight; rank 15 (stage 127) seven."""
    from autotune.predict.moe import moe_layers_of_rank
    from autotune.predict.schedule import layers_of_rank
    from autotune.spec.config import load_config

    got = [int(layers_of_rank(126, 16, 8, r, True, True)) for r in (0, 1, 15)]
    assert got == [7, 8, 7]
    # one slot only: 125 layers + the embedding = 2 x 63 slots (rank 0: 62 layers); + the loss instead: mirrored
    assert [int(layers_of_rank(125, 2, 1, r, True, False)) for r in (0, 1)] == [62, 63]
    assert [int(layers_of_rank(125, 2, 1, r, False, True)) for r in (0, 1)] == [63, 62]
    # Qwen3-235B: 94 layers (all MoE) + 2 over PP32 x VP3 = 96 slots: rank 0 holds stages 0, 32, 64 -> 2 layers
    qwen = load_config(["model=qwen3-235b-a22b"]).model
    assert int(moe_layers_of_rank(qwen, 32, 3, 0, True, True)) == 2
    assert int(moe_layers_of_rank(qwen, 32, 3, 5, True, True)) == 3


def test_qwen3_235b_pp32_vp3_is_a_megatron_layout():
    """The published PP32 x VP3 layout of 94-layer Qwen3-235B (Megatron-MoE-ModelZoo, 256 H100) is accepted under
    the megatron profile with the accounting on, refused without it and under bench_model (no such split there)."""
    from autotune.core.plan_arrays import arrays_from_plans
    from autotune.core.types import ParallelPlan
    from autotune.layouts.rules import rejections
    from autotune.spec.config import load_config

    over = [
        "model=qwen3-235b-a22b",
        "cluster=h100-sxm-80gb",
        "train.framework=megatron",
        "train.global_batch_size=2048",
    ]
    cfg = load_config(over)
    kw = dict(
        dp=4, tp=2, pp=32, vpp=3, ep=8, sequence_parallel=True, grad_accum_steps=512, pp_schedule="interleaved_1f1b"
    )

    def rule(train, **extra):
        arr = arrays_from_plans([ParallelPlan(**kw, **extra)])
        return rejections(arr, cfg.model, train, cfg.cluster, cfg.space)[0][0]

    both = dict(pp_split_embedding=True, pp_split_loss=True)
    assert rule(cfg.train, **both) is None
    assert rule(cfg.train) == "vpp_within_layers"
    assert rule(cfg.train, pp_split_loss=True) == "vpp_within_layers"  # 95 slots for 96 stages
    kw.update(dp=8, pp=16, grad_accum_steps=256)  # 48 stages: 96 slots split evenly, 95 do not
    assert rule(cfg.train, **both) is None and rule(cfg.train, pp_split_loss=True) == "pp_split_divides"
    bench = TrainSpec(cfg.train.seq_len, cfg.train.global_batch_size)
    assert rule(bench, **both) == "pp_split_needs_megatron"


def test_moe_recompute_modules_drop_what_megatron_recomputes():
    """Megatron recompute_modules on Qwen3-30B-A3B's MoE layers (k=8 of 128 experts of width 768), tp 1, ep 8,
    4096 tokens, bf16: "moe_act" drops fc2's input (the SwiGLU output, 2 bytes x F per routed copy); "moe" the whole
    routed + shared term of `moe_layer_activations` (per copy: int64 index 8, the permuted token 2h, fc1's 2 x 2F, the
    probability 2, fc2's input 2F; router fp32 probabilities 4E per token). Only megatron runs it, under selective."""
    from autotune.core.plan_arrays import CODES, arrays_from_plans
    from autotune.core.types import ParallelPlan
    from autotune.layouts.rules import rejections
    from autotune.predict.perf import perf_arrays
    from autotune.spec.config import load_config

    cfg = load_config(["model=qwen3-30b-a3b", "cluster=h100-sxm-80gb", "train.framework=megatron"])
    m, T, k, F, h, E = cfg.model, 4096.0, 8, 768, 2048, 128
    codes = CODES["moe_recompute"]
    act = float(MEG.moe_recompute_saving(m, T, 1, False, 2, 0, 1, codes["moe_act"]))
    assert act == pytest.approx(T * k * 2 * F)
    layer = float(MEG.moe_recompute_saving(m, T, 1, False, 2, 0, 1, codes["moe"]))
    assert layer == pytest.approx(T * k * (8 + 2 * h + 6 * F + 2) + T * 4 * E)
    assert float(MEG.moe_recompute_saving(m, T, 1, False, 2, 0, 1, codes["none"])) == 0
    gbs = cfg.train.global_batch_size
    kw = dict(dp=8, ep=8, micro_batch_size=1, grad_accum_steps=gbs // 8, recompute="selective")
    arr = arrays_from_plans([ParallelPlan(**kw), ParallelPlan(**kw, moe_recompute="moe")])
    ids = rejections(arr, m, cfg.train, cfg.cluster, cfg.space)[0]
    assert list(ids) == [None, None]
    slower = perf_arrays(arr, m, cfg.train, cfg.cluster)["step_s"]
    assert slower[1] > slower[0]  # the MoE layer's forward (GEMMs, router, a dispatch + combine) runs again
    bench = TrainSpec(cfg.train.seq_len, gbs)
    assert rejections(arr, m, bench, cfg.cluster, cfg.space)[0][1] == "moe_recompute_needs_megatron"
    none_rc = arrays_from_plans([ParallelPlan(**{**kw, "recompute": "none"}, moe_recompute="moe")])
    assert rejections(none_rc, m, cfg.train, cfg.cluster, cfg.space)[0][0] == "moe_recompute_needs_selective"


def test_activation_offload_moves_n_of_l_layers_to_the_host():
    """Megatron --cpu-offloading-num-layers N at pp = 1 (Llama-3.1-70B, 80 layers, Megatron-FSDP as the GB200 preset
    runs it with N = 40): the per-layer activations drop by N/L, the host column gains exactly what left the device,
    and the layout is refused at pp > 1, with recompute, or for N >= L (Megatron's TransformerConfig checks)."""
    from autotune.core.plan_arrays import arrays_from_plans
    from autotune.core.types import ParallelPlan
    from autotune.layouts.rules import rejections
    from autotune.predict.memory import memory_arrays
    from autotune.spec.config import load_config

    over = ["model=llama-3.1-70b", "cluster=gb200-nvl72", "train.framework=megatron", "train.seq_len=8192"]
    cfg = load_config([*over, "train.global_batch_size=256"])
    kw = dict(dp=64, zero_stage=3, micro_batch_size=2, grad_accum_steps=2)
    plans = [ParallelPlan(**kw), ParallelPlan(**kw, act_offload_layers=40)]
    mem = memory_arrays(arrays_from_plans(plans), cfg.model, cfg.train, cfg.cluster)
    # pp = 1: one micro-batch in flight; the embedding's and the head's tensors are not per-layer and stay
    first = float(cfg.train.seq_len * 2 * (8 + cfg.model.hidden_size))  # [TMU] embedding input + dropout mask, tp 1
    head = float(get_profile("megatron").head_activations(cfg.model, 8192 * 2, 1, False, 2))
    per_layer = mem["activations"][0] - first - head
    assert mem["activations"][1] == pytest.approx(first + head + per_layer * 40 / 80)
    assert mem["host"][1] - mem["host"][0] == pytest.approx(per_layer / 2)
    bad = [dict(kw, act_offload_layers=80), dict(kw, recompute="full", act_offload_layers=4)]
    ids = rejections(arrays_from_plans([ParallelPlan(**b) for b in bad]), cfg.model, cfg.train, cfg.cluster, cfg.space)
    assert list(ids[0]) == ["act_offload_within_layers", "act_offload_no_recompute"]


def test_nemo_rows_carry_their_recipes_settings():
    """autotune/fitting/nemo_runs.py maps each summary row to what its recipe ran: bf16 main_grad
    (grad_reduce_in_fp32=False), the 405B / Qwen3-235B pipeline-split accounting wherever pp > 1, Megatron-FSDP with
    the presets' activation offloading (405B GB200, 128 GPUs, TP 2: cpu_offloading_num_layers=92)."""
    from autotune.fitting.nemo_runs import load_nemo_rows

    runs = {r.row: r for r in load_nemo_rows()[0]}
    # Nemotron-8B / 22B keep Apex's fp32 gradient sync (nemo_runs.NEMO1_OPTIM, tests/unit/test_nemo1_optim.py)
    assert all(
        r.train.grad_dtype == "bf16" for r in runs.values() if r.model.name not in ("nemotron-8b", "nemotron-22b")
    )
    split = [r for r in runs.values() if r.model.name in ("llama-3.1-405b", "qwen3-235b-a22b") and r.plan.pp > 1]
    assert split and all(r.plan.pp_split_embedding and r.plan.pp_split_loss for r in split)
    fsdp405 = runs[297].plan  # NeMo 25.09, GB200, LLAMA3.1_405B, 128 GPUs, GBS 64, FSDP 64, TP 2
    assert (fsdp405.zero_stage, fsdp405.tp, fsdp405.act_offload_layers) == (3, 2, 92)
    # hidden_dropout: 0.0 where the model config / bridge sets it (NeMo LlamaConfig, GPTConfig175B, Megatron-Bridge's
    # Llama / Qwen3 / GPT-OSS / DeepSeek / Kimi bridges); GPT-3 5B / 20B set none: Megatron-Core's 0.1
    by_model = {r.model.name: r.train.hidden_dropout for r in runs.values()}
    assert by_model["llama-3.1-70b"] == by_model["gpt3-175b"] == by_model["gpt-oss-120b"] == 0.0
    assert by_model["gpt3-5b"] == by_model["gpt3-20b"] == 0.1
    # Nemotron-4 8B / 22B (NeMo-Framework-Launcher conf/training/nemotron/nemotron_{8b,22b}.yaml @ 089b90e6:
    # hidden_dropout 0.0, ub_tp_comm_overlap true, sequence_parallel true); NeMo 24.07 H100 FP8 rows 7 and 8 (0-based) of the
    # summary (the 340B row has grouped-query attention the "gpt" block cannot express: skipped)
    assert by_model["nemotron-8b"] == by_model["nemotron-22b"] == 0.0
    n8, n22 = runs[7].plan, runs[8].plan
    assert (n8.dp, n8.tp, n8.pp, n8.micro_batch_size, n8.grad_accum_steps, n8.tp_overlap) == (32, 2, 1, 4, 2, True)
    assert (n22.dp, n22.tp, n22.pp, n22.vpp, n22.grad_accum_steps, n22.tp_overlap) == (8, 2, 4, 10, 16, True)
    assert runs[7].model.num_params() == pytest.approx(8.5e9, rel=0.02)  # 643 TFLOP/s / 12,507 tok/s / 6 (summary)
    # the other NeMo 24.07 rows with TP > 1 as the launcher yamls @ tag 24.07 set ub_tp_comm_overlap: gpt3/20b.yaml and
    # llama/llama2_70b.yaml True, gpt3/175b.yaml False
    assert runs[1].model.name == "gpt3-20b" and runs[1].plan.tp == 2 and runs[1].plan.tp_overlap
    assert runs[6].model.name == "llama2-70b" and runs[6].plan.tp == 4 and runs[6].plan.tp_overlap
    assert runs[2].model.name == "gpt3-175b" and runs[2].plan.tp == 4 and not runs[2].plan.tp_overlap
    # NVFP4 runs switch TP overlap off (Megatron-Bridge scripts/performance/configs/llama/llama31_llm_pretrain.py:
    # tp_comm_overlap = False if precision == "nvfp4"): the same 405B layout on GB200 keeps it under FP8-CS / MXFP8
    assert runs[71].plan.fp8 == "nvfp4" and runs[71].plan.tp == 4 and not runs[71].plan.tp_overlap
    assert runs[69].plan.fp8 == "tensorwise" and runs[69].plan.tp_overlap and runs[70].plan.tp_overlap


def test_nemo_rows_carry_the_launchers_expandable_segments():
    """PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True as Megatron-Bridge's perf launcher set it
    (autotune/fitting/nemo_runs.py EXPANDABLE_*): Llama 3.1 405B on GB200 with FP8-CS / MXFP8 from 25.11
    (setup_experiment.py @ cac49dcd7, perf_plugins.py @ 55f884376), every run from 26.05 (executors.py PERF_ENV_VARS @
    6f24c71f3) but Llama with Megatron-FSDP (`remove_allocator_env_vars`); NeMo 1.0 launcher rows are not read (None).
    Rows (0-based, the summary CSV): 277 = 25.11 405B GB200 FP8-CS; 206 = 26.02.01 405B GB200 NVFP4 (NVFP4 joined the
    405B rule on 2026-05-11); 108 = 26.04.01 70B GB300 MXFP8 (before the global default); 69 = 26.06 405B GB200 FP8;
    1 = NeMo 24.07 GPT-3 20B."""
    import dataclasses

    from autotune.core.types import ParallelPlan
    from autotune.fitting.nemo_runs import recipe_expandable_segments
    from autotune.fitting.published_runs import load_nemo

    lays = {int(lay.row): lay.expandable_segments for lay in load_nemo()[0]}
    assert (lays[277], lays[206], lays[108], lays[69], lays[1]) == (True, False, False, True, None)
    row = {"source": "NVIDIA-NeMo/Megatron-Bridge docs", "container": "NeMo 26.06", "model": "LLAMA3_70B"}
    row = type("Row", (), {**row, "gpu_type": "GB200"})
    assert recipe_expandable_segments(row, ParallelPlan(dp=64, zero_stage=1)) is True
    assert recipe_expandable_segments(row, dataclasses.replace(ParallelPlan(dp=64), zero_stage=3)) is False


def test_moe_offload_moves_the_experts_inputs_to_the_host():
    """Megatron fine-grained activation offloading (plan.moe_offload; transformer_config.py @ d98e8a64 offload_modules)
    on Qwen3-235B-A22B's MoE layers (h 4096, k 8, F 1536) as the ModelZoo GB200 recipe runs it (mbs 3 x seq 4096 =
    12,288 tokens, tp 1, ep 64): per layer and micro-batch 98,304 routed copies; "expert_fc1" moves fc1's saved input,
    98,304 x 4096 x g bytes (g = 2 in bf16, 1 under MXFP8: the quantized copy), "moe_act" fc1's output, 98,304 x 2 x
    1536 x 2 bytes, both their sum; a tensor under min_offloaded_tensor_size (2^20 elements) stays. On the device the
    activations drop by exactly what the host gains (Qwen3-30B-A3B, pp 1: one micro-batch in flight, 48 MoE layers)."""
    from autotune.core.plan_arrays import CODES, arrays_from_plans
    from autotune.core.types import ParallelPlan
    from autotune.layouts.rules import rejections
    from autotune.predict.memory import memory_arrays
    from autotune.spec.config import load_config

    q235 = load_config(["model=qwen3-235b-a22b", "cluster=gb200-nvl72", "train.framework=megatron"]).model
    c = CODES["moe_offload"]
    off = {mode: float(MEG.moe_offload_bytes(q235, 12288.0, 1, False, 2, 0, 1, c[mode])) for mode in c}
    assert off == {
        "none": 0.0,
        "expert_fc1": 98304 * 4096 * 2,
        "moe_act": 98304 * 2 * 1536 * 2,
        "expert_fc1+moe_act": 98304 * 4096 * 2 + 98304 * 2 * 1536 * 2,
    }
    mx = float(MEG.moe_offload_bytes(q235, 12288.0, 1, False, 2, 3, 1, c["expert_fc1"]))  # plan.fp8 code 3: mxfp8
    assert mx == 98304 * 4096 * 1
    assert float(MEG.moe_offload_bytes(q235, 8.0, 1, False, 2, 0, 1, c["expert_fc1+moe_act"])) == 0.0  # 64 copies

    cfg = load_config(["model=qwen3-30b-a3b", "cluster=gb200-nvl72", "train.framework=megatron"])
    kw = dict(dp=8, ep=8, micro_batch_size=1, grad_accum_steps=cfg.train.global_batch_size // 8)
    plans = [ParallelPlan(**kw), ParallelPlan(**kw, moe_offload="expert_fc1+moe_act")]
    mem = memory_arrays(arrays_from_plans(plans), cfg.model, cfg.train, cfg.cluster)
    moved = cfg.model.num_moe_layers * float(
        MEG.moe_offload_bytes(cfg.model, float(cfg.train.seq_len), 1, False, 2, 0, 1, c["expert_fc1+moe_act"])
    )
    assert moved > 0 and mem["host"][1] - mem["host"][0] == pytest.approx(moved)
    assert mem["activations"][0] - mem["activations"][1] == pytest.approx(moved)
    # Megatron asserts: not inside a recomputed MoE layer, not with --cpu-offloading; MoE models and megatron only
    bad = [
        ParallelPlan(**kw, recompute="selective", moe_recompute="moe", moe_offload="moe_act"),
        ParallelPlan(dp=8, micro_batch_size=1, grad_accum_steps=kw["grad_accum_steps"], moe_offload="moe_act"),
    ]
    ids = rejections(arrays_from_plans(bad), cfg.model, cfg.train, cfg.cluster, cfg.space)[0]
    assert list(ids) == ["moe_offload_not_with_layer_recompute", None]
    dense = load_config(["model=llama-3.1-8b", "train.framework=megatron"])
    assert rejections(arrays_from_plans(bad[1:]), dense.model, dense.train, dense.cluster, dense.space)[0][0] == (
        "moe_offload_needs_moe"
    )
    bench = TrainSpec(cfg.train.seq_len, cfg.train.global_batch_size)
    assert rejections(arrays_from_plans(plans), cfg.model, bench, cfg.cluster, cfg.space)[0][1] == (
        "moe_offload_needs_megatron"
    )
    from autotune.core.errors import SpecError
    from bench_model.parallel import parallelize

    with pytest.raises(SpecError, match="moe_offload=expert_fc1\\+moe_act"):  # the trainer refuses before building
        parallelize(None, None, plans[1], "bf16")


def test_moe_offload_is_exported_as_megatron_flags():
    """megatron/training/arguments.py --fine-grained-activation-offloading --offload-modules (nargs "+")."""
    from autotune.core.types import ParallelPlan
    from autotune.interop.megatron import render
    from autotune.spec.config import load_config

    cfg = load_config(["model=qwen3-30b-a3b", "cluster=gb200-nvl72", "train.framework=megatron"])
    plan = ParallelPlan(dp=8, ep=8, micro_batch_size=1, grad_accum_steps=64, moe_offload="expert_fc1+moe_act")
    lines = render(cfg.model, cfg.train, cfg.cluster, plan).splitlines()
    assert "--fine-grained-activation-offloading" in lines
    assert "--offload-modules expert_fc1 moe_act" in lines


def test_megatron_fsdp_gathers_fp8_params_in_uint8_units():
    """Megatron-FSDP with --fp8-param-gather (megatron_fsdp/param_and_grad_buffer.py @ d98e8a64: FP8 params' weight
    buffer is uint8; MXFP8 adds the transpose buffer): the two gathered units hold each layer's dense linears at 1 B
    (tensorwise) or 2 x (1 + 1/32) B (MXFP8) instead of bf16's 2. Llama-3.1-70B, tp 1: one layer's linears are
    8192 x (8192 + 2 x 1024) + 8192 x 8192 + 3 x 8192 x 28672 = 855,638,016 weights, so the units shrink by
    2 x 855,638,016 x (2 - 1) = 1,711,276,032 bytes under tensorwise and grow by 2 x 855,638,016 / 16 under MXFP8;
    nothing changes with the distributed optimizer (stage 1), whose param buffer is the model states'."""
    import dataclasses

    from autotune.core.plan_arrays import arrays_from_plans
    from autotune.core.types import ParallelPlan
    from autotune.predict.memory import memory_arrays
    from autotune.spec.config import load_config

    cfg = load_config(["model=llama-3.1-70b", "cluster=gb200-nvl72", "train.framework=megatron"])
    kw = dict(dp=64, micro_batch_size=1, grad_accum_steps=cfg.train.global_batch_size // 64)
    plans = [ParallelPlan(**kw, zero_stage=z, fp8=f) for z in (3, 1) for f in ("tensorwise", "mxfp8")]
    arr = arrays_from_plans(plans)
    on, off = (dataclasses.replace(cfg.train, fp8_param_gather=v) for v in (True, False))
    delta = (
        memory_arrays(arr, cfg.model, on, cfg.cluster)["buffers"]
        - memory_arrays(arr, cfg.model, off, cfg.cluster)["buffers"]
    )
    assert list(delta) == [-1_711_276_032, 2 * 855_638_016 / 16, 0.0, 0.0]
