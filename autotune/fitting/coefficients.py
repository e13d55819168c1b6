"""The step-time model's free coefficients: ONE table (name = the ClusterSpec / preset field the fit writes, scope,
prior, physical range, source). autotune/fitting/fit_reference.py fits exactly these; benchmarks/refit.py writes them
into the cluster presets; benchmarks/model_accuracy.py reports each with its range and flags one at a bound.

To add a coefficient (e.g. the MoE block's grouped-GEMM or dispatch terms): add a ClusterSpec field the model reads,
append a `Coefficient` here with its cited prior and range, and re-run `PYTHONPATH=. python benchmarks/refit.py`.
Nothing else needs to change.

Bounds are the physical range the source allows, not [0, 1] by default: a fit that lands on one says the rows want
a value the mechanism cannot have (another mechanism is missing), and model_accuracy.py flags it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Coefficient:
    name: str  # ClusterSpec field (the preset YAML key) the fit writes
    scope: str  # "family": one value per GPU family (FAMILIES in fit_reference); "shared": one for all presets
    prior: float  # where the fit starts, and the weak prior it pays PRIOR_WEIGHT * log(x / prior) to leave
    low: float  # physical range (bounds of the fit)
    high: float
    source: str  # why the prior and the range


COEFFICIENTS: tuple[Coefficient, ...] = (
    Coefficient(
        "matmul_efficiency",
        "family",
        0.7,
        0.4,
        0.95,
        "cuBLAS bf16 GEMMs of LLM shapes reach ~60-80% of dense peak (NVIDIA H100/A100 GEMM performance tables; "
        "Megatron-LM README 2024: 41-48% MFU end to end); above ~90% no kernel has been published",
    ),
    Coefficient(
        "attention_efficiency",
        "family",
        0.5,
        0.25,
        0.85,
        "asymptotic (long-sequence) causal fwd+bwd fraction of the dense peak of the family's best kernel (FLOPs "
        "counted as the FlashAttention papers do: backward = 2.5 forwards): FA2 on A100 ~189/312 = 0.61 at 16k, head "
        "dim 128 (Dao 2023 Fig. 4); FA3 / cuDNN on H100 ~0.5-0.6 fwd+bwd at 16k (Shah et al. 2024 Fig. 5-6); FA2 on "
        "Hopper runs at cluster.fa2_attention_ratio of it; the sequence dependence is attention_terms.attention_shape_factor",
    ),
    Coefficient(
        "memory_efficiency",
        "shared",
        0.8,
        0.3,
        0.95,
        "elementwise kernels on large tensors: ~70-90% of HBM bandwidth (STREAM-like copy on H100 ~2.6-3.0 of 3.35 "
        "TB/s); lower bound: small eager kernels dominated by launch gaps. Shared: per family it fitted better in "
        "sample (7.4% vs 9.3% median) but worse out of sample (LOSO p90 56.1% vs 53.0%, A100-80GB 15.6% vs 11.3%)",
    ),
    Coefficient(
        "stream_efficiency",
        "shared",
        0.8,
        0.5,
        0.95,
        "long streaming kernels over whole parameter-sized tensors (AdamW step, weight casts; perf_terms.streaming_s): "
        "a device-to-device copy reaches ~0.9 of the datasheet HBM bandwidth (H100 ~3.0 of 3.35 TB/s; autotune "
        "devbench times that copy); torch's multi-tensor AdamW kernels (foreach: 8 kernels over 64k-element chunks, "
        "torch/optim/adam.py _multi_tensor_adam) less, ~0.6-0.85; below 0.5 the kernels would be launch-bound, which "
        "tensors of 10^8 elements are not",
    ),
    Coefficient(
        "comm_efficiency",
        "shared",
        0.8,
        0.5,
        1.0,
        "nccl-tests all_reduce bus bandwidth / link bandwidth: ~360 of 450 GB/s NVLink 4 (0.8), ~0.9-0.95 of NIC "
        "line rate across nodes (NVIDIA DGX SuperPOD reference architecture)",
    ),
    Coefficient(
        "dp_overlap",
        "shared",
        0.8,
        0.5,
        1.0,
        "fraction of a collective that overlaps compute really hidden: 1 - the compute slowdown while NCCL kernels "
        "share SMs and HBM with it (NCCL uses 8-32 of 132 SMs by default: NCCL_MIN/MAX_NCHANNELS; Rashidi et al. "
        "2021 and Jangda et al. 2022 measure 10-30% slowdown of overlapped GEMMs): 0.7-0.95",
    ),
    Coefficient(
        "lowp_gemm_efficiency",
        "shared",
        1.0,
        0.6,
        1.1,
        "FP8/MXFP8/NVFP4 block GEMMs' fraction of their peak over the BF16 GEMMs' fraction of theirs: torchao's "
        "roofline gives both one achievable fraction, 0.78 on H100 ('based on experimental observation with sample "
        "large inputs', torchao/testing/training/roofline_utils.py @ 36027d8 pct_achievable_gemm_tops, also on "
        "B200/GB200), and DeepGEMM's FP8 GEMMs reach 1,550 of H800's 1,979 TFLOPS (0.78; deepseek-ai/DeepGEMM "
        "README): 1.0. Range: end-to-end FP8 speedups of 1.3-1.5x (Micikevicius et al. 2022 Sec 5) include the "
        "non-GEMM time, so the GEMMs alone are >= 0.65 of 2x; above 1.1 no measurement",
    ),
    Coefficient(
        "rowwise_gemm_efficiency",
        "shared",
        0.78,
        0.5,
        1.0,
        "rowwise-scaled FP8 GEMMs' fraction of the tensorwise FP8 rate: torchtitan Llama-3-8B on 8 H100 (commit "
        "7a04053) saved 10.3% of the bf16 step with rowwise and 19.8% with tensorwise; at a tensorwise GEMM speed-up "
        "of 1.6x, rowwise saving about half of it means ~1.24x, i.e. 1.24/1.6 = 0.78 of the tensorwise rate",
    ),
    Coefficient(
        "host_op_s",
        "family",
        1.0e-5,
        3.0e-6,
        5.0e-5,
        "host seconds per dispatched op of an eager training loop (Python + autograd + ATen dispatcher + "
        "cudaLaunchKernel; autotune/predict/host.py): ~1-3 us each for Python/pybind, autograd recording, dispatch "
        "and the driver launch, ~5-25 us per op in all (jiahuanglin.xyz 'From PyTorch op to kernel launch', lesson 18, "
        "per-layer table), 5-50 us per launch depending on the op and the dispatch path (mlhero.books.neutronlabs.ai "
        "ch. 22.1 'PyTorch eager vs compiled'): tutorial estimates, not a measurement on these systems. Per family: "
        "the host CPU and the software of each family's systems differ (DGX A100: EPYC 7742; DGX H100: Xeon 8480C; "
        "DGX B200: Xeon 8570; GB200/GB300: Grace), as do the framework releases of their rows (Megatron-LM 2021 on "
        "A100, Megatron-Core 2025-26 with Transformer Engine on Blackwell). Scope checked against the rows "
        "(2026-11-29, one value set everywhere): a per-host-CPU scope (x86 vs Grace) is contradicted by x86 DGX B200 "
        "rows wanting the Grace rows' ~3.7e-5 (NeMo Qwen3-30B mbs 1, rows 260/287: 2.95 -> 0.99 pred/meas; torchao's "
        "torchtitan FP8 Llama-3-8B, moe_public rows 1/4: 2.1 -> 1.0) while x86 H200 / H100 rows reject it "
        "(h200_bench_1125 rows 15/16, bench_model: 1.05 -> 0.48; Megatron-LM 2024 H100 gpt-1.7b: 1.12 -> 0.59); a "
        "per-framework scope is contradicted the same way (Megatron: H100 low, B200 high; torch eager: H200 low, B200 "
        "high). The rows group by GPU family, so the scope stays per family; only NeMo's Blackwell rows inform the "
        "Blackwell value (the B200 torchtitan rows are power-limited, scored not fitted), so it returns to the prior "
        "when NeMo is held out",
    ),
    Coefficient(
        "compile_memory_traffic_factor",
        "shared",
        0.36,
        0.15,
        0.8,
        "fused / eager elementwise bytes of bench_model's block counted kernel by kernel (perf_terms module doc)",
    ),
)

BY_NAME = {c.name: c for c in COEFFICIENTS}
PER_FAMILY = tuple(c.name for c in COEFFICIENTS if c.scope == "family")
SHARED = tuple(c.name for c in COEFFICIENTS if c.scope == "shared")
FREE = (*PER_FAMILY, *SHARED)
PRIORS = {c.name: c.prior for c in COEFFICIENTS}


def at_bound(name: str, value: float, rel: float = 0.01) -> str | None:
    """'low' / 'high' when `value` sits within `rel` of the coefficient's range ends, else None."""
    c = BY_NAME[name]
    span = c.high - c.low
    if value <= c.low + rel * span:
        return "low"
    if value >= c.high - rel * span:
        return "high"
    return None
