"""What crosses from prediction to a trial: the models' answer for one plan (`MemoryEstimate`, `PerfEstimate`) and
everything one trial needs (`TrialSpec`, JSON to the trainer). Plain data, like autotune/core/types.py."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from autotune.core.model import ModelSpec
from autotune.core.types import ClusterSpec, ParallelPlan, TrainSpec, candidate_id


@dataclass(frozen=True)
class MemoryEstimate:
    """Worst-rank bytes per component (docs/memory_model.md)."""

    params_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    logits_bytes: float
    buffers_bytes: float
    overhead_bytes: float
    fragmentation: float = 0.0
    host_bytes: float = 0.0  # host (CPU) memory per GPU: offloaded states and their buffers (plan.offload)

    @property
    def allocated_peak_bytes(self) -> float:
        return (
            self.params_bytes
            + self.grads_bytes
            + self.optimizer_bytes
            + self.activations_bytes
            + self.logits_bytes
            + self.buffers_bytes
        )

    @property
    def reserved_peak_bytes(self) -> float:
        return self.allocated_peak_bytes * (1.0 + self.fragmentation) + self.overhead_bytes

    @property
    def allocator_peak_bytes(self) -> float:
        """The caching allocator's peak: the reserved peak without the runtime overhead outside the allocator."""
        return self.reserved_peak_bytes - self.overhead_bytes

    def fits(self, device_bytes: float, headroom: float = 0.05) -> bool:
        return self.reserved_peak_bytes <= device_bytes * (1.0 - headroom)

    def as_columns(self) -> dict[str, float]:
        """The `mem_*` keys shared by `plan -o`, `estimate --json` and `probe-memory --json`."""
        return {
            "mem_params_bytes": self.params_bytes,
            "mem_grads_bytes": self.grads_bytes,
            "mem_optimizer_bytes": self.optimizer_bytes,
            "mem_activations_bytes": self.activations_bytes,
            "mem_logits_bytes": self.logits_bytes,
            "mem_buffers_bytes": self.buffers_bytes,
            "mem_overhead_bytes": self.overhead_bytes,
            "mem_allocated_bytes": self.allocated_peak_bytes,
            "mem_reserved_bytes": self.reserved_peak_bytes,
            # the two peaks kept apart (docs/memory_model.md "Two peaks"): what the framework prints
            # (torch.cuda.max_memory_reserved) and what decides `fits` (= mem_reserved_bytes)
            "mem_allocator_peak_bytes": self.allocator_peak_bytes,
            "mem_device_total_bytes": self.reserved_peak_bytes,
            "mem_host_bytes": self.host_bytes,
        }


def measured_peak_prediction(
    device_type: str, device_total: float | None, allocator_peak: float | None
) -> float | None:
    """The prediction of what a trial's `peak_mem_reserved_bytes` measures: on CUDA the caching allocator's peak
    (torch.cuda.max_memory_reserved, without the CUDA context and NCCL's buffers), on CPU ranks the device total (the
    process's ru_maxrss includes the Python / torch runtime; bench_model/metrics.py)."""
    if device_type == "cuda" and allocator_peak is not None:
        return allocator_peak
    return device_total


@dataclass(frozen=True)
class PerfEstimate:
    compute_s: float
    tp_comm_s: float
    cp_comm_s: float
    pp_comm_s: float
    dp_comm_s: float
    bubble_s: float
    step_s: float
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    mfu: float

    def as_columns(self) -> dict[str, float]:
        return {
            "pred_step_s": self.step_s,
            "pred_tokens_per_s": self.tokens_per_s,
            "pred_tokens_per_s_per_gpu": self.tokens_per_s_per_gpu,
            "pred_mfu": self.mfu,
        }


@dataclass(frozen=True)
class TrialSpec:
    """Everything one trial needs; serialised as JSON (never pickled) for every launcher."""

    sweep_id: str
    trial_id: str
    model: ModelSpec
    train: TrainSpec
    cluster: ClusterSpec
    plan: ParallelPlan
    backend: str = "local"
    warmup_steps: int = 2
    timed_steps: int = 3
    timeout_s: float = 600.0
    pred_mem_bytes: float | None = None  # the predicted device total, what decides `fits` (mem_device_total_bytes)
    # the predicted caching-allocator peak (mem_allocator_peak_bytes): what torch.cuda.max_memory_reserved measures
    pred_mem_allocator_peak_bytes: float | None = None
    pred_tokens_per_s_per_gpu: float | None = None
    pred_mfu: float | None = None
    # Test and benchmark knobs: a real rlimit on each rank's address space (drives a genuine MemoryError on CPU),
    # and a fault to inject ("" = none; "crash", "hang", "crash_rank1", "kill_rank1") for the reliability suites.
    memory_limit_bytes: int | None = None
    inject_fault: str = ""
    resources: dict[str, Any] = field(default_factory=dict)
    # `autotune netbench` only (entry autotune.fitting.netbench_rank): sizes_bytes, iters, warmup
    netbench: dict[str, Any] = field(default_factory=dict)
    # `autotune devbench` only (entry autotune.fitting.devbench_rank): iters, cap (largest dimension timed; CPU)
    devbench: dict[str, Any] = field(default_factory=dict)

    @property
    def candidate_id(self) -> str:
        return candidate_id(self.plan, self.model, self.train)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TrialSpec:
        d = dict(d)
        d["model"] = ModelSpec(**d["model"])
        d["train"] = TrainSpec(**d["train"])
        d["cluster"] = ClusterSpec(**d["cluster"])
        # trial files written before plan.compile was the one switch carry a top-level `compile` too: fold it in
        d["plan"] = ParallelPlan(**{**d["plan"], **({"compile": True} if d.pop("compile", False) else {})})
        return cls(**d)

    @property
    def pred_peak_mem_reserved_bytes(self) -> float | None:
        """What this trial's `peak_mem_reserved_bytes` measures, predicted (`measured_peak_prediction`)."""
        return measured_peak_prediction(
            self.cluster.device_type, self.pred_mem_bytes, self.pred_mem_allocator_peak_bytes
        )

    @classmethod
    def from_json(cls, text: str) -> TrialSpec:
        return cls.from_dict(json.loads(text))
