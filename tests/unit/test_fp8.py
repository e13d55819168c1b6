"""plan.fp8 (torchao float8 training of the block linears): perf terms against hand-computed numbers, the preset
rejection (A100 and cpu have no FP8 tensor cores), the unchanged memory model, planner enumeration and ids, and the
trainer's one-line errors. The real fp8 training runs are in tests/distributed/test_fp8_equivalence.py."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from autotune.core.errors import SpecError
from autotune.core.labels import layout_label
from autotune.core.plan_arrays import arrays_from_plans
from autotune.core.types import ParallelPlan
from autotune.layouts.planner import enumerate_candidates
from autotune.layouts.rules import check_plan, rejections
from autotune.predict.frameworks.bench_model import LOSS_CHUNK_TOKENS
from autotune.predict.memory import estimate_memory
from autotune.predict.perf import _layer_terms, estimate_perf
from autotune.predict.perf_terms import fp8_cast_bytes, fp8_linear_elements, streaming_s
from autotune.spec.config import load_config


def job(model: str = "llama-3.1-8b", cluster: str = "h100-sxm-80gb", *extra: str):
    cfg = load_config([f"model={model}", f"cluster={cluster}", *extra])
    return cfg.model, cfg.train, cfg.cluster


def plan8(**kw) -> ParallelPlan:  # llama-3.1-8b's 512-sequence batch on 8 GPUs
    return ParallelPlan(dp=8, zero_stage=3, micro_batch_size=2, grad_accum_steps=32, **kw)


def test_presets_state_the_datasheet_fp8_peak():
    # NVIDIA H100 / H200 datasheets: FP8 Tensor Core 3,958 TFLOPS with sparsity = 2 x 1,979 dense, twice BF16
    for name in ("h100-sxm-80gb", "h200-141gb"):
        c = job("tiny", name)[2]
        assert c.peak_flops_fp8 == pytest.approx(2 * c.peak_flops_bf16, rel=1e-3)
        assert c.peak_flops_fp8 == pytest.approx(1.979e15, rel=1e-3)
    for name in ("a100-80gb", "a100-40gb", "cpu"):
        assert job("tiny", name)[2].peak_flops_fp8 is None


def test_linear_elements_of_llama_8b_by_hand():
    # Llama 3.1 8B: h=4096, f=14336, kv=8*128=1024. Inputs: wq, wk, wv, w1, w3 read x (5h) + wo h + w2 f;
    # outputs: wq h + wk, wv 2kv + w1, w3 2f + wo h + w2 h; weights 2h^2 + 2h kv + 3hf.
    model = job()[0]
    x, y, w = fp8_linear_elements(model, 1)
    assert (float(x), float(y), float(w)) == (6 * 4096 + 14336, 3 * 4096 + 2 * 1024 + 2 * 14336, 218103808)
    # tp=2: column-parallel outputs and row-parallel inputs halve
    x2, y2, w2 = fp8_linear_elements(model, 2)
    assert float(x2) == 5 * 4096 + (4096 + 14336) / 2
    assert float(y2) == (4096 + 2 * 1024 + 2 * 14336) / 2 + 2 * 4096
    assert float(w2) == 218103808 / 2


def test_linear_elements_use_the_query_width_where_head_dim_is_decoupled():
    # Qwen3-235B-A22B (HF config.json: hidden 4096, 64 heads x head_dim 128 = q_dim 8192, 4 KV heads -> kv 512):
    # wq writes and wo reads 8192 per token, not 4096; its weights are h x q each. Only the attention side moves.
    model = job("qwen3-235b-a22b")[0]
    h, q, k, f = 4096, 8192, 512, model.ffn_hidden_size
    assert (model.hidden_size, model.q_dim, model.kv_dim) == (h, q, k)
    x, y, w = fp8_linear_elements(model, 4)
    assert float(x) == 5 * h + (q + f) / 4
    assert float(y) == (q + 2 * k + 2 * f) / 4 + 2 * h
    assert float(w) == (2 * h * q + 2 * h * k + 3 * h * f) / 4


def test_cast_bytes_by_hand():
    # 8192 tokens, bf16 (c=2): each cast reads c for amax, reads c and writes 1 byte -> 5 bytes per element;
    # 2 casts each of x (38912/token), grad_out (43008/token) and the weights (218103808):
    # 5 * (2*8192*(38912 + 43008) + 2*218103808) = 5 * 1778384896
    model = job()[0]
    assert float(fp8_cast_bytes(model, 2, 1, 8192, False)) == 5 * 1778384896
    # full recompute re-casts x and the weights once more
    extra = 5 * (8192 * 38912 + 218103808)
    assert float(fp8_cast_bytes(model, 2, 1, 8192, True)) == 5 * 1778384896 + extra


def test_layer_gemm_runs_at_the_fp8_peak_and_pays_the_casts():
    model, train, cluster = job()
    bf16 = _layer_terms(arrays_from_plans([plan8()]), model, train, cluster)
    fp8 = _layer_terms(arrays_from_plans([plan8(fp8="tensorwise")]), model, train, cluster)
    ratio = cluster.peak_flops_bf16 / cluster.peak_flops_fp8
    lowp = cluster.lowp_gemm_efficiency or 1.0  # the FP8 GEMMs' fraction of their peak over BF16's (the preset's fit)
    assert fp8["gemm"][0] == pytest.approx(bf16["gemm"][0] * ratio / lowp)
    assert fp8["attn"][0] == bf16["attn"][0]  # SDPA stays bf16
    tokens = 2 * train.seq_len
    casts = streaming_s(fp8_cast_bytes(model, 2, 1, tokens, False), cluster)  # a cast streams whole tensors
    assert fp8["mem"][0] - bf16["mem"][0] == pytest.approx(float(casts))
    # rowwise casts as many bytes (axiswise scales) and uses the same peak, its GEMMs at rowwise_gemm_efficiency of
    # the tensorwise rate (perf_terms.linear_efficiency_factor: the rowwise-scaled epilogue)
    row = _layer_terms(arrays_from_plans([plan8(fp8="rowwise")]), model, train, cluster)
    assert row["gemm"][0] == pytest.approx(fp8["gemm"][0] / cluster.rowwise_gemm_efficiency)
    assert row["mem"][0] == fp8["mem"][0] and 0.5 <= cluster.rowwise_gemm_efficiency < 1.0


def test_fp8_speeds_up_8b_on_h100_and_leaves_memory_unchanged():
    model, train, cluster = job()
    a, b = estimate_perf(plan8(), model, train, cluster), estimate_perf(plan8(fp8="tensorwise"), model, train, cluster)
    assert 1.0 < b.tokens_per_s_per_gpu / a.tokens_per_s_per_gpu < 2.0  # at most the 2x peak ratio
    # eager: torchao 0.18 Float8Linear saves its bf16 input and weight for backward (float8_linear.py
    # matmul_with_hp_or_float8_args) and FSDP gathers bf16 (no fp8 all-gather): same memory as bf16
    assert estimate_memory(plan8(), model, train, cluster) == estimate_memory(
        plan8(fp8="tensorwise"), model, train, cluster
    )


@pytest.mark.parametrize("preset", ["a100-80gb", "a100-40gb", "cpu"])
def test_fp8_rejected_on_presets_without_fp8_tensor_cores(preset):
    model, train, cluster = job("llama-3.1-8b", preset)
    reason = check_plan(plan8(fp8="rowwise"), model, train, cluster)
    assert reason == f"fp8=rowwise needs FP8 tensor cores: cluster preset {preset} has peak_flops_fp8=null"
    rules, _ = rejections(arrays_from_plans([plan8(fp8="tensorwise"), plan8()]), model, train, cluster)
    assert rules[0] == "fp8_needs_peak" and rules[1] is None
    assert check_plan(plan8(fp8="rowwise"), *job()) is None  # h100


def test_planner_enumerates_fp8_keeps_ids_and_labels():
    base = ["space.tp=[1,2]", "space.pp=[1]", "space.cp=[1]", "space.zero_stage=[1]", "space.micro_batch_size=[1]"]
    base += ["space.recompute=[none]", "space.vpp=[1]", "space.sequence_parallel=[false]", "cluster=h100-sxm-80gb"]
    df = enumerate_candidates(load_config([*base, "space.fp8=[none,tensorwise,rowwise]"]), 4)
    assert sorted(df["fp8"].tolist()) == ["none"] * 2 + ["rowwise"] * 2 + ["tensorwise"] * 2
    off = enumerate_candidates(load_config(base), 4)  # default space: fp8=[none]
    assert set(off["fp8"]) == {"none"}
    assert set(off.candidate_id) == set(df[df["fp8"] == "none"].candidate_id)
    assert len(set(df.candidate_id)) == 6
    # the default (tiny) model's 128-wide GEMMs gain less than its casts cost (torchao's float8 README: small
    # M,K,N shapes are slower in float8); llama-3.1-8b's GEMMs gain
    f8, bf = (df[df["fp8"] == r].set_index("tp")["pred_tokens_per_s_per_gpu"] for r in ("tensorwise", "none"))
    assert (f8 < bf).all()
    big = enumerate_candidates(load_config([*base, "model=llama-3.1-8b", "space.fp8=[none,tensorwise]"]), 4)
    f8, bf = (big[big["fp8"] == r].set_index("tp")["pred_tokens_per_s_per_gpu"] for r in ("tensorwise", "none"))
    assert (f8 > bf).all()
    a100 = enumerate_candidates(load_config([*base, "space.fp8=[none,tensorwise]", "cluster=a100-80gb"]), 4)
    assert set(a100[a100["fp8"] == "tensorwise"]["reject_rule"]) == {"fp8_needs_peak"}
    assert layout_label(plan8(fp8="rowwise")).endswith(" fp8=rowwise")
    assert "fp8" not in layout_label(plan8())


def test_device_without_fp8_gemm_is_an_error_not_a_bf16_run(monkeypatch):
    from bench_model.parallel import float8

    float8.check_fp8_device("tensorwise", torch.device("cpu"))  # torch 2.13 CPU runs torch._scaled_mm
    float8.check_fp8_device("rowwise", torch.device("cpu"))

    def scaled_mm_missing_mock(*a, **k):  # stands in for a build/device without fp8 GEMMs (none here)
        raise RuntimeError("_scaled_mm is not supported on this device\nsecond line")

    monkeypatch.setattr(torch, "_scaled_mm", scaled_mm_missing_mock)
    with pytest.raises(SpecError) as e:
        float8.check_fp8_device("tensorwise", torch.device("cpu"))
    assert str(e.value) == (
        "plan.fp8=tensorwise: device cpu cannot run fp8 GEMMs (torch._scaled_mm: _scaled_mm is not supported on "
        "this device)"
    )


def test_block_linears_only_are_converted():
    from bench_model.model import Llama
    from bench_model.parallel.float8 import apply_float8

    model = Llama(job("tiny", "h100-sxm-80gb")[0], 128)
    apply_float8(model, "tensorwise")
    kinds = {name: type(m).__name__ for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    assert kinds.pop("output") == "Linear"  # LM head stays in the compute dtype
    assert kinds and set(kinds.values()) == {"Float8Linear"}
    assert np.all([n.split(".")[-1] in {"wq", "wk", "wv", "wo", "w1", "w2", "w3"} for n in kinds])


@pytest.mark.parametrize(
    "framework,recipe,rule",
    [
        ("nanotron", "tensorwise", "nanotron_fp8"),  # nanotron 0.4 config: no FP8 option
        ("megatron", "rowwise", "megatron_fp8_rowwise"),  # --fp8-recipe: delayed, tensorwise, mxfp8, blockwise
        ("megatron", "tensorwise", None),
        ("torchtitan", "rowwise", None),  # Float8LinearConfig.from_recipe_name takes both
    ],
)
def test_framework_profiles_reject_the_fp8_recipes_they_lack(framework, recipe, rule):
    model, train, cluster = job("llama-3.1-8b", "h100-sxm-80gb", f"train.framework={framework}")
    p = ParallelPlan(dp=8, zero_stage=1, micro_batch_size=2, grad_accum_steps=32, fp8=recipe)
    if framework == "torchtitan":  # torchtitan has no ZeRO-1: FSDP
        p = plan8(fp8=recipe)
    rules, reasons = rejections(arrays_from_plans([p]), model, train, cluster)
    assert rules[0] == rule, reasons[0]
    if rule:
        assert reasons[0].startswith(f"{framework}: fp8={recipe}")


def test_blackwell_recipes_are_refused_in_one_line_where_they_cannot_run():
    """mxfp8 needs MX tensor cores (compute capability >= 10.0): refused on CPU; nvfp4 is modelled and exported but
    never trained by bench_model (torchao 0.18 has NVFP4 training only as a prototype). Never a silent bf16 run."""
    import torch

    from autotune.core.errors import SpecError
    from bench_model.parallel.float8 import apply_float8, check_fp8_device

    with pytest.raises(SpecError, match=r"plan.fp8=mxfp8 needs Blackwell MX tensor cores .* device cpu$"):
        check_fp8_device("mxfp8", torch.device("cpu"))
    for call in (
        lambda: check_fp8_device("nvfp4", torch.device("cpu")),
        lambda: apply_float8(torch.nn.Linear(16, 16), "nvfp4"),
    ):
        with pytest.raises(SpecError, match=r"plan.fp8=nvfp4 is modelled and exported but bench_model does not train"):
            call()


def test_recipe_peaks_and_cast_bytes_by_hand():
    """B200 preset: tensorwise/rowwise at peak_flops_fp8 (4.5e15), mxfp8 at peak_flops_mxfp8 (4.5e15), nvfp4 at
    peak_flops_nvfp4 (9e15), none at the bf16 peak (2.25e15). Bytes per cast element with c = 2: tensorwise 2c + 1 = 5
    (read, amax read, fp8 write); mxfp8 c + 1 + 1/32 = 3.03125 (one read, fp8 + E8M0 scale per 32); nvfp4
    2c + 0.5 + 1/16 = 4.5625 (read, global amax read, 4-bit + E4M3 scale per 16)."""
    import numpy as np

    from autotune.core.plan_arrays import FP8_CODE
    from autotune.predict.perf_terms import linear_peak_flops, recipe_cast_bytes
    from autotune.spec.config import load_config

    b200 = load_config(["cluster=b200"]).cluster
    codes = np.array([FP8_CODE[r] for r in ("none", "tensorwise", "rowwise", "mxfp8", "nvfp4")])
    assert linear_peak_flops(codes, b200, 2.25e15).tolist() == [2.25e15, 4.5e15, 4.5e15, 4.5e15, 9e15]
    assert recipe_cast_bytes(codes, 2, 1.0).tolist() == [0.0, 5.0, 5.0, 3.03125, 4.5625]


# H200 rows, ../shared/reference/measured/h200_bench_model_2026-11-25.csv (bench_model, torch 2.11, torchao 0.18, one
# GPU, seq 4096, compiled, recompute none): measured allocated peak GiB, bf16 vs fp8 tensorwise (rowwise: the same)
H200_FP8_ROWS = [("llama-3.2-1b", 4, 41.6, 35.6), ("llama-3.2-3b", 2, 75.69, 69.57)]


@pytest.mark.parametrize("model,mbs,bf16_gib,fp8_gib", H200_FP8_ROWS)
def test_compiled_fp8_saves_the_rebuildable_linear_inputs(model, mbs, bf16_gib, fp8_gib):
    """torchao float8 under torch.compile keeps neither the two RMSNorm outputs nor SwiGLU's product (4h + 2f bytes
    per token and layer at tp=1; measured on CPU, frameworks/bench_model.py `fp8_compiled_saving_per_token`): the
    allocated estimate drops by exactly that, and lands within 2% of the H200's fp8 peak where it was 8-15% over."""
    extra = ("train.seq_len=4096", f"plan.micro_batch_size={mbs}", f"train.global_batch_size={2 * mbs}")
    m, train, cluster = job(model, "h200-141gb", *extra)
    plan = ParallelPlan(dp=1, micro_batch_size=mbs, grad_accum_steps=2, compile=True)
    bf = estimate_memory(plan, m, train, cluster).allocated_peak_bytes
    for recipe in ("tensorwise", "rowwise"):
        f8 = estimate_memory(dataclasses.replace(plan, fp8=recipe), m, train, cluster).allocated_peak_bytes
        per_token = 4 * m.hidden_size + 2 * m.ffn_hidden_size  # 1B: 24,576 B; 3B: 28,672 B
        assert bf - f8 == pytest.approx(per_token * 4096 * mbs * m.num_layers)
        # the lease ran the chunked, checkpointed loss: (8 + c) bytes per logit of one chunk where today's fused loss
        # keeps (4 + c) (frameworks/bench_model.py `logits`): 4 bytes x LOSS_CHUNK_TOKENS x vocab more on that trainer
        old_loss = 4.0 * LOSS_CHUNK_TOKENS * m.vocab_size
        assert abs((f8 + old_loss) / 2**30 / fp8_gib - 1) < 0.02 and (bf + old_loss) / 2**30 / fp8_gib - 1 > 0.08
    # eager keeps the bf16 inputs (torchao saves input_hp): no saving
    eager = dataclasses.replace(plan, compile=False)
    assert estimate_memory(eager, m, train, cluster) == estimate_memory(
        dataclasses.replace(eager, fp8="tensorwise"), m, train, cluster
    )


def test_lowp_gemm_efficiency_is_a_ratio_bounded_by_the_fp8_peak():
    """cluster.lowp_gemm_efficiency is the FP8 GEMMs' fraction of their peak over matmul_efficiency (BF16's fraction):
    above 1 is allowed (torchao's roofline gives both 0.78 on H100: roofline_utils.py @ 36027d8), an FP8 GEMM above
    its own peak is not: 1.05 x 0.7 = 0.735 passes, 1.5 x 0.7 = 1.05 is refused with a one-line error."""
    import dataclasses

    from autotune.core.errors import SpecError

    _, _, cluster = job()
    base = dataclasses.replace(cluster, matmul_efficiency=0.7)
    assert dataclasses.replace(base, lowp_gemm_efficiency=1.05).lowp_gemm_efficiency == 1.05
    with pytest.raises(SpecError, match=r"cluster.lowp_gemm_efficiency=1.5 must be > 0 and, times matmul_efficiency"):
        dataclasses.replace(base, lowp_gemm_efficiency=1.5)
    with pytest.raises(SpecError, match=r"cluster.lowp_gemm_efficiency=0.0 must be > 0"):
        dataclasses.replace(base, lowp_gemm_efficiency=0.0)
