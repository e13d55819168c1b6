"""Measure the device: time the model's GEMMs (bf16 and, where the device has FP8 tensor cores, FP8), the routed
experts' grouped GEMM, causal attention at the configured sequence length and HBM bandwidth on the user's own
accelerator, turn the times into the efficiencies the speed model uses (fractions of the preset's datasheet peaks) and
write them into a cluster preset. The device twin of `autotune netbench` (autotune/fitting/netbench.py): same
launchers, same trial protocol, same preset writer.

What each fitted number means there (autotune/predict/perf.py, perf_terms.py), and so how it is taken here:
  matmul_efficiency     the model prices a layer's GEMMs at peak * matmul_efficiency * m/(m+M0) * n/(n+N0)
                        (predict/gemm.py gemm_efficiency): the measured fraction of peak of the fwd + dgrad + wgrad GEMMs, divided
                        by that shape factor at the measured (tokens, hidden) — so the model gives back the measured
                        time at the measured shape, and scales it by its own shape term elsewhere.
  lowp_gemm_efficiency  FP8 GEMMs' fraction of their own peak over the BF16 GEMMs' fraction of theirs, same shapes
                        (perf_terms.linear_efficiency_factor). Tensorwise scaling (torch._scaled_mm); CUDA only.
  attention_efficiency  causal FLOPs of forward + backward, 3.5 forward-equivalents of 4 s d per token per head halved
                        by the mask (attention_terms.attention_s), over the time of F.scaled_dot_product_attention forward
                        + backward, over peak.
  stream_efficiency     bytes read + written by a device copy of one long tensor over hbm_bw_bytes_per_s: the
                        streaming fraction long kernels reach (perf_terms.streaming_s: the AdamW step, the experts'
                        weight casts). Short elementwise kernels' `memory_efficiency` is not measured here (the
                        preset keeps its fitted value).
Grouped GEMM (the experts, torch._grouped_mm where the build runs it, else one GEMM per expert) is reported next to the
shape factor the model applies at its rows per expert and width, `grouped_vs_model`: 1 = the model prices it right.

CPU (CI, `device_type: cpu`): the same code path with every dimension capped (`cap`), the compute dtype the trainer
uses there; FP8 is not measured (no FP8 tensor cores) and the preset keeps its lowp_gemm_efficiency.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autotune.core.errors import UsageError

SIDECAR_SUFFIX = ".devbench.json"  # rank 0's samples next to the trial's result file
CPU_DIM_CAP = 256  # largest GEMM / attention dimension timed on CPU: a 2-core CI box times every shape in ~1 s


@dataclass(frozen=True)
class GemmShape:
    name: str
    m: int
    k: int
    n: int


@dataclass(frozen=True)
class DevbenchShapes:
    """What the ranks time. Dense GEMMs: one micro-batch of `m` tokens through each distinct linear of a block and
    the LM head (no TP: the shapes of one GPU's share are the user's to pick via the model override). Experts:
    `groups` local experts of `rows` rows each (tokens x top-k / experts), h -> F. Attention: one sequence."""

    gemms: tuple[GemmShape, ...]
    expert_groups: int
    expert_rows: int
    expert_k: int
    expert_n: int
    attn_heads: int
    attn_seq: int
    attn_head_dim: int
    hbm_bytes: int


def _c(x: int, cap: int | None) -> int:
    return int(x if cap is None else max(8, min(x, cap)))


def devbench_shapes(model: Any, seq_len: int, micro_batch: int = 1, cap: int | None = None) -> DevbenchShapes:
    """The model's shapes, every dimension capped at `cap` (CPU) and kept a multiple of 8 (FP8/grouped-GEMM
    alignment: cuBLASLt FP8 wants multiples of 16 in k and n, torch._grouped_mm 16-byte rows)."""

    def c(x: int) -> int:
        return max(16, _c(x, cap) // 16 * 16)

    h, f, tokens = model.hidden_size, model.ffn_hidden_size, micro_batch * seq_len
    m = c(tokens)
    gemms = [
        GemmShape("qkv", m, c(h), c(model.q_dim + 2 * model.kv_dim)),
        GemmShape("out_proj", m, c(model.q_dim), c(h)),
        GemmShape("lm_head", m, c(h), c(model.vocab_size)),
    ]
    if not model.is_moe or model.moe_first_k_dense > 0 or model.moe_layer_freq > 1:
        gemms += [GemmShape("mlp_up", m, c(h), c(2 * f)), GemmShape("mlp_down", m, c(f), c(h))]
    groups = rows = fe = 0
    if model.is_moe:
        e, k, fe = model.num_experts, model.moe_router_topk, model.moe_ffn_hidden_size
        groups = min(e, 8) if cap is not None else e
        rows = c(max(16, tokens * k // e))
        fe = c(fe)
    hd = model.head_dim
    heads = model.num_heads if cap is None else max(1, min(model.num_heads, cap // hd))
    seq = seq_len if cap is None else max(16, min(seq_len, 4 * cap))
    hbm = (1 << 30) if cap is None else (64 << 20)
    return DevbenchShapes(tuple(gemms), groups, rows, c(h) if model.is_moe else 0, fe, heads, seq, hd, hbm)


@dataclass(frozen=True)
class DevbenchFit:
    """Efficiencies fitted from the samples; None where nothing was measured (the preset keeps its value)."""

    matmul_efficiency: float
    attention_efficiency: float
    stream_efficiency: float
    lowp_gemm_efficiency: float | None
    grouped_vs_model: float | None
    raw: dict[str, float]  # measured fractions of peak before shape factors and clamping
    notes: tuple[str, ...]


def _fraction(samples: list[dict[str, Any]], kind: str, peak: float) -> float | None:
    rows = [s for s in samples if s["kind"] == kind]
    if not rows:
        return None
    return sum(s["flops"] for s in rows) / sum(s["time_s"] for s in rows) / peak


def _clamp(name: str, value: float, notes: list[str]) -> float:
    if value > 1.0:
        notes.append(
            f"{name}: measured {value:.3f} of the preset's peak, above 1: the preset's peak is too low; kept 1.0"
        )
        return 1.0
    return value


def fit_devbench(samples: list[dict[str, Any]], cluster: Any, compute_dtype: str) -> DevbenchFit:
    """Efficiencies of `samples` (dicts: kind, flops or bytes, time_s, m, n) against `cluster`'s peaks (module doc)."""
    from autotune.predict.gemm import gemm_efficiency

    notes: list[str] = []
    peak = cluster.peak_flops(compute_dtype)
    dense = [s for s in samples if s["kind"] == "gemm"]
    if not dense:
        raise UsageError("devbench: no GEMM was timed (every shape failed); see the rank log")
    raw_mm = _fraction(samples, "gemm", peak)
    m = statistics.median(s["m"] for s in dense)
    shape = float(gemm_efficiency(1.0, m, dense[0]["k"]))  # the model's factor at (tokens, hidden)
    matmul = _clamp("matmul_efficiency", raw_mm / shape, notes)
    raw = {"gemm": raw_mm, "gemm_shape_factor": shape}
    lowp = None
    fp8 = _fraction(samples, "gemm_fp8", cluster.peak_flops_fp8 or 0.0) if cluster.peak_flops_fp8 else None
    if fp8 is not None:
        raw["gemm_fp8"] = fp8
        lowp = _clamp("lowp_gemm_efficiency", fp8 / raw_mm, notes)
    else:
        notes.append(
            "FP8 GEMMs not timed (no FP8 peak in the preset or no FP8 tensor cores): lowp_gemm_efficiency kept"
        )
    attn = _fraction(samples, "attention", peak)
    raw["attention"] = attn if attn is not None else float("nan")
    hbm = [s for s in samples if s["kind"] == "hbm"]
    mem_bw = sum(s["bytes"] for s in hbm) / sum(s["time_s"] for s in hbm)
    raw["hbm_bytes_per_s"] = mem_bw
    grouped = [s for s in samples if s["kind"] == "grouped_gemm"]
    ratio = None
    if grouped:
        g = grouped[0]
        raw["grouped_gemm"] = _fraction(samples, "grouped_gemm", peak) or 0.0
        ratio = raw["grouped_gemm"] / float(gemm_efficiency(matmul, g["m"], g["n"]))
    return DevbenchFit(
        matmul_efficiency=matmul,
        attention_efficiency=_clamp("attention_efficiency", attn or 0.0, notes),
        stream_efficiency=_clamp("stream_efficiency", mem_bw / cluster.hbm_bw_bytes_per_s, notes),
        lowp_gemm_efficiency=lowp,
        grouped_vs_model=ratio,
        raw=raw,
        notes=tuple(notes),
    )


def apply_to_cluster(cluster: Any, fit: DevbenchFit) -> Any:
    """The ClusterSpec with the measured efficiencies (lowp_gemm_efficiency only where FP8 was timed)."""
    changes: dict[str, Any] = {
        "matmul_efficiency": round(fit.matmul_efficiency, 4),
        "attention_efficiency": round(fit.attention_efficiency, 4),
        "stream_efficiency": round(fit.stream_efficiency, 4),
    }
    if fit.lowp_gemm_efficiency is not None:
        changes["lowp_gemm_efficiency"] = round(fit.lowp_gemm_efficiency, 4)
    return dataclasses.replace(cluster, **changes)


class DevbenchFailed(RuntimeError):
    """The measurement itself failed (a rank crashed, the job timed out): not bad input, one line all the same."""


def run_devbench(
    num_ranks: int,
    *,
    cfg: Any,
    backend: str = "local",
    iters: int = 5,
    cap: int | None = None,
    workdir: str | Path | None = None,
    timeout_s: float = 600.0,
) -> tuple[list[dict[str, Any]], str]:
    """Start `num_ranks` ranks of `autotune.fitting.devbench_rank` through the sweep's launchers (as netbench does);
    every rank times the shapes on its own device at once (as in training: shared power and host); the samples are
    each shape's median time over the ranks. Returns (samples, device name)."""
    from autotune.fitting.netbench import run_measurement_trial

    raw = run_measurement_trial(
        cfg,
        num_ranks,
        what="devbench",
        measures="a real device",
        sidecar_suffix=SIDECAR_SUFFIX,
        failure=DevbenchFailed,
        backend=backend,
        workdir=workdir,
        timeout_s=timeout_s,
        devbench={"iters": iters, "cap": cap},
    )
    return raw["samples"], raw["device"]
