"""The cluster/hardware spec (search_spaces/cluster/*.yaml), one of the frozen dataclasses that cross stage boundaries
(docs/architecture.md "Types that cross stage boundaries"); re-exported by autotune.core.types. Plain data: validation
raises `SpecError` naming the field, the value and the rule."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from autotune.core.errors import positive_int, require

# the CPU-time link fits a preset may store (ClusterSpec; autotune/fitting/netbench.py store_cpu_fits)
CPU_COMM_FIELDS = ("cpu_comm_latency_s", "cpu_comm_bw_bytes_per_s", "fsdp_cpu_latency_s", "fsdp_cpu_bw_bytes_per_s")
CPU_COMM_FIELDS += ("fsdp_tp_cpu_latency_s", "fsdp_tp_cpu_bw_bytes_per_s")


@dataclass(frozen=True)
class ClusterSpec:
    """One hardware preset. Bandwidths are per GPU, one direction, bytes/s; latencies are seconds (α of an α-β model).
    Efficiency coefficients start from documented defaults and are refitted from measured rows (calibration)."""

    name: str
    device_memory_bytes: int
    peak_flops_bf16: float
    peak_flops_fp32: float
    gpus_per_node: int
    intra_node_bw_bytes_per_s: float
    intra_node_latency_s: float
    inter_node_bw_bytes_per_s: float
    inter_node_latency_s: float
    num_nodes: int | None = None
    # Performance-model coefficients (fraction of peak / of link bandwidth actually reached), calibrated later.
    matmul_efficiency: float = 0.6
    comm_efficiency: float = 0.8
    dp_overlap: float = 0.5
    # Memory-model runtime terms: CUDA context + NCCL + workspace, and allocator fragmentation (reserved/allocated - 1).
    runtime_overhead_bytes: int = 0
    allocator_fragmentation: float = 0.0
    # PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True on the training job (autotune/predict/reserved.py; torchtitan sets it)
    expandable_segments: bool = False
    device_type: Literal["cuda", "cpu"] = "cuda"
    # Step-time terms of autotune/predict/perf_terms.py; every preset states them (the perf model refuses a None by name).
    hbm_bw_bytes_per_s: float | None = None
    memory_efficiency: float | None = None
    attention_efficiency: float | None = None
    pp_microbatch_overhead_s: float | None = None
    # fraction of HBM bandwidth a long streaming kernel over whole parameter-sized tensors reaches: the AdamW step's
    # (multi-tensor) kernels and bench_model's expert weight casts (perf_terms.streaming_s); None = memory_efficiency
    # (the fitted fraction of the eager elementwise mix of the blocks)
    stream_efficiency: float | None = None
    # torch.compile per block (autotune/predict/perf_terms.py compiled_elementwise_factor, compile_time_s): fraction of the
    # eager elementwise time left once Inductor fuses it, and the seconds one distinct block graph takes to compile
    compile_memory_traffic_factor: float | None = None
    compile_s_per_graph: float | None = None
    # low-precision GEMMs (plan.fp8): the recipe's GEMMs' fraction of the recipe's own peak over matmul_efficiency (the
    # BF16 GEMMs' fraction of theirs; may exceed 1 while the product stays <= 1); autotune/predict/perf_terms.py
    # linear_efficiency_factor; None = 1 (the same fraction as BF16)
    lowp_gemm_efficiency: float | None = None
    # rowwise-scaled FP8 GEMMs' fraction of the tensorwise FP8 GEMM rate (perf_terms.linear_efficiency_factor); None = 1
    rowwise_gemm_efficiency: float | None = None
    # FlashAttention-2-class kernels' fraction of the family's best attention rate (attention_efficiency is the FA3 /
    # cuDNN kernel's) on this GPU (attention_terms.attention_s); None = 1 (FA2 is the best kernel, or no figure published)
    fa2_attention_ratio: float | None = None
    # softmax exponentials per second of the GPU's special-function units (MUFU.EX2) where the attention kernel's
    # exponentials do not hide behind its matmuls (perf_terms.softmax_exp_s: Blackwell); None = hidden (Hopper:
    # FlashAttention-3's ping-pong overlap) or not published
    softmax_exp_per_s: float | None = None
    # CPU offload (plan.offload): host memory per GPU (bytes), host<->device bandwidth (bytes/s, one direction, per
    # GPU) and the CPU AdamW throughput per GPU's share of host cores (parameters/s; benchmarks/cpu_adam.py)
    host_memory_bytes_per_gpu: int | None = None
    host_device_bw_bytes_per_s: float | None = None
    cpu_adam_params_per_s: float | None = None
    # dense FP8 tensor-core peak (FLOP/s); None = the device has no FP8 tensor cores (plan.fp8 is rejected)
    peak_flops_fp8: float | None = None
    # dense block-scaled FP8 (MXFP8, 32-element blocks with E8M0 scales) and FP4 (NVFP4) tensor-core peaks: Blackwell
    # only; None = the device cannot run that recipe
    peak_flops_mxfp8: float | None = None
    peak_flops_nvfp4: float | None = None
    # FP8 GEMMs take any operand layout (compute capability 10.x/11.x/>=13: Blackwell data-centre parts), so Transformer
    # Engine writes one tensorwise FP8 copy instead of rowwise + transposed (autotune/predict/te_fp8.py te_cast_layouts)
    fp8_non_tn_gemm: bool = False
    # GPUs that share one NVLink domain (the fast link); None = gpus_per_node. On GB200/GB300 NVL72 a node (compute
    # tray) holds 4 GPUs but 72 share one NVLink switch fabric; it must be a multiple of gpus_per_node
    nvlink_domain_size: int | None = None
    # host seconds per dispatched op (Python + PyTorch dispatcher + CUDA launch) of the training loop's eager ops
    # (autotune/predict/host.py); None = the host term is off (CPU presets: the host is the device)
    host_op_s: float | None = None
    # CPU ranks only: a collective's CPU seconds per rank as `autotune netbench` fits them (ring alpha per step, bytes
    # per CPU-second; autotune/fitting/netbench.py cpu_fits, netbench_fsdp.py fsdp_cpu_fits): bare collectives, and
    # FSDP2-issued all-gathers / reduce-scatters of plain and of tp-sharded (2-D FSDP + TP) parameters. They price
    # the collectives a scale-down replica did not run, in its CPU-seconds basis (docs/scale_down.md); None = not
    # measured (the composition then prices with the transfer-time links above)
    cpu_comm_latency_s: float | None = None
    cpu_comm_bw_bytes_per_s: float | None = None
    fsdp_cpu_latency_s: float | None = None
    fsdp_cpu_bw_bytes_per_s: float | None = None
    fsdp_tp_cpu_latency_s: float | None = None
    fsdp_tp_cpu_bw_bytes_per_s: float | None = None

    def __post_init__(self) -> None:
        positive_int("cluster.gpus_per_node", self.gpus_per_node)
        if self.nvlink_domain_size is not None:
            positive_int("cluster.nvlink_domain_size", self.nvlink_domain_size)
            require(
                self.nvlink_domain_size % self.gpus_per_node == 0,
                f"cluster.nvlink_domain_size={self.nvlink_domain_size} must be a multiple of "
                f"cluster.gpus_per_node={self.gpus_per_node} (a domain is made of whole nodes)",
            )
        for f in ("peak_flops_fp8", "peak_flops_mxfp8", "peak_flops_nvfp4"):
            v = getattr(self, f)
            require(v is None or (not isinstance(v, bool) and float(v) > 0), f"cluster.{f}={v!r} must be null or > 0")
        for f in (
            "host_memory_bytes_per_gpu",
            "host_device_bw_bytes_per_s",
            "cpu_adam_params_per_s",
            "host_op_s",
            "softmax_exp_per_s",
        ):
            v = getattr(self, f)
            require(v is None or (not isinstance(v, bool) and float(v) > 0), f"cluster.{f}={v!r} must be null or > 0")
        for f in CPU_COMM_FIELDS:
            v = getattr(self, f)
            require(v is None or (not isinstance(v, bool) and float(v) > 0), f"cluster.{f}={v!r} must be null or > 0")
        positive_int("cluster.device_memory_bytes", self.device_memory_bytes)
        for f in ("peak_flops_bf16", "peak_flops_fp32", "intra_node_bw_bytes_per_s", "inter_node_bw_bytes_per_s"):
            require(float(getattr(self, f)) > 0, f"cluster.{f}={getattr(self, f)!r} must be > 0")
        for f in (
            "matmul_efficiency",
            "comm_efficiency",
            "dp_overlap",
            "memory_efficiency",
            "stream_efficiency",
            "attention_efficiency",
            "compile_memory_traffic_factor",
            "rowwise_gemm_efficiency",
            "fa2_attention_ratio",
        ):
            if getattr(self, f) is not None:
                v = float(getattr(self, f))
                require(0.0 <= v <= 1.0, f"cluster.{f}={v!r} must be within [0, 1]")
        if self.lowp_gemm_efficiency is not None:  # a ratio of fractions of peak: the FP8 GEMMs' own must stay <= 1
            lowp, mm = float(self.lowp_gemm_efficiency), float(self.matmul_efficiency or 1.0)
            require(
                0.0 < lowp and lowp * mm <= 1.0,
                f"cluster.lowp_gemm_efficiency={lowp!r} must be > 0 and, times matmul_efficiency={mm!r}, <= 1 "
                "(an FP8 GEMM faster than its peak)",
            )
        require(
            isinstance(self.expandable_segments, bool),
            f"cluster.expandable_segments={self.expandable_segments!r} must be true or false",
        )
        require(
            self.hbm_bw_bytes_per_s is None or float(self.hbm_bw_bytes_per_s) > 0,
            f"cluster.hbm_bw_bytes_per_s={self.hbm_bw_bytes_per_s!r} must be > 0",
        )
        require(
            self.compile_s_per_graph is None or float(self.compile_s_per_graph) >= 0,
            f"cluster.compile_s_per_graph={self.compile_s_per_graph!r} must be >= 0",
        )
        require(
            self.pp_microbatch_overhead_s is None or float(self.pp_microbatch_overhead_s) >= 0,
            f"cluster.pp_microbatch_overhead_s={self.pp_microbatch_overhead_s!r} must be >= 0",
        )
        require(
            self.peak_flops_fp8 is None or float(self.peak_flops_fp8) > 0,
            f"cluster.peak_flops_fp8={self.peak_flops_fp8!r} must be null or > 0",
        )

    @property
    def fast_domain(self) -> int:
        """GPUs reachable over NVLink from any GPU: the NVLink domain, a node unless the preset says more."""
        return self.nvlink_domain_size or self.gpus_per_node

    def peak_flops(self, compute_dtype: str) -> float:
        return self.peak_flops_fp32 if compute_dtype == "fp32" else self.peak_flops_bf16
