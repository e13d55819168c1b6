"""Every shared published layout as what its framework ran, for the feasibility and memory check
(benchmarks/published_fit.py): one `PublishedLayout` per row, with the framework profile that prices it, whether it
ran (every published run did; the H200 OOM cases did not) and the allocator-visible peak the source printed (GiB, or
None where the source gives none).

Sources (copies in benchmarks/data/measured/, each row's `source` / `notes` columns cite where it comes from):
- `nemo`: NVIDIA NeMo / Megatron-Bridge performance summaries, mapped by autotune/fitting/nemo_runs.py (megatron
  profile; no memory column);
- `moe_blackwell`: moe_blackwell_public_2026-11.csv (/work/shared/reference/measured/, copied 2026-11-25):
  Megatron-MoE-ModelZoo and Megatron-LM MoE README rows (megatron profile, no memory), torchao/torchtitan B200 rows
  (torchtitan profile; "peak memory (torchtitan max reserved)" = torch.cuda.max_memory_reserved, GiB);
- `mlperf`: MLPerf Training v5.0 / v5.1 Llama 3.1 405B submissions' configs (mlperf_llama31_405b_configs.csv,
  autotune/fitting/mlperf_runs.py; megatron profile; no memory);
- `torchtitan`: torchtitan's own benchmark pages (torchtitan_benchmarks.csv, autotune/fitting/torchtitan_runs.py;
  torchtitan profile; "Memory(GiB)" = max_memory_reserved, GiB);
- `h200`: autotune's own trainer on one H200 (bench_model profile): h200_bench_model_2026-11-25.csv (today's trainer;
  max_memory_reserved compared) and the OOM / probe rows of h200_bench_model_2026-11.csv (fit only: the 2026-11-23
  trainer's memory differs from today's by its chunked loss, measured README "What the second H200 lease showed").
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from autotune.core.model import ModelSpec
from autotune.core.types import ParallelPlan, TrainSpec
from autotune.fitting.nemo_runs import NEMO_GPU, load_nemo_rows, recipe_expandable_segments
from autotune.fitting.public_moe_runs import (
    COLLAPSED_ROUTING_ROWS,
    MB_MOE_RECOMPUTE,
    MB_NORM_RECOMPUTE,
    MODELZOO_MXFP8,
    row_model,
)
from autotune.fitting.public_moe_runs import MODELS as MOE_MODELS
from autotune.fitting.reference_runs import H200_LEASES, h200_layout_key, h200_remeasured
from autotune.fitting.run_types import DATA, preset_model
from autotune.predict.frameworks.torchtitan import TORCHTITAN_DEFAULT


@dataclass(frozen=True)
class PublishedLayout:
    source: str  # nemo | moe_blackwell | h200
    row: str  # the source's row id (CSV row number or row_id / case)
    framework: str  # train.framework whose profile prices it
    model: ModelSpec
    train: TrainSpec
    cluster: str  # search_spaces/cluster/<cluster>.yaml
    plan: ParallelPlan
    ran: bool  # False: the source reports an out-of-memory
    measured_gib: float | None  # allocator-visible peak (max_memory_reserved) the source printed, GiB
    recipe: str = ""  # what the recipe ran that the plan cannot express yet (named with a miss)
    profile: Any = None  # the framework version's profile where it differs from train.framework's (None: that one)
    # PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True as the recipe's launcher set it (cluster.expandable_segments for
    # this run; None: the cluster preset's)
    expandable_segments: bool | None = None


MB_GPU = {**NEMO_GPU, "H200": "h200-141gb"}
# Megatron recompute modules of moe_blackwell rows: public_moe_runs.MB_MOE_RECOMPUTE and MB_NORM_RECOMPUTE (the speed
# rows run them too); what the plan cannot express yet (the shared_experts module) is named with the row
# (MB_NOT_MODELLED).
MB_NOT_MODELLED = {"r034": "recompute_modules shared_experts"}
# Megatron fine-grained activation offloading (plan.moe_offload) and PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True as
# the ModelZoo run scripts set them (yanring/Megatron-MoE-ModelZoo @ e8650517 best_practice/qwen3/run_gb200_235b.sh
# lines 36 (r043: PP8 EP8 MBS 1), 42 (r044: PP4 VP6 EP64 MBS 3: "--fine-grained-activation-offloading --offload-modules
# expert_fc1 moe_act"), 45 (r045: seq 131072 CP4 TP4 PP4 VP12 EP32); run_gb300_235b.sh line 35 (r046: PP1 EP64)). The
# H100 script's layout (TP2 PP8 VP4 EP32) is shared by three rows and is not mapped: the preset's setting.
MB_MOE_OFFLOAD = {"r044": "expert_fc1+moe_act"}
MB_EXPANDABLE = {"r043", "r044", "r045", "r046"}
# The torchao rows (torchtitan): torchao's benchmarks/float8/training/llama3.sh and llama4.sh (the README's commands)
# launch ${TORCHTITAN_ROOT}/run_train.sh, which exports PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True"
# (pytorch/torchtitan run_train.sh at 6fc499f6 and cd304c7b, the commits those rows ran, line 19)
TORCHTITAN_LAUNCH = "run_train.sh: expandable_segments:True"
# precision column -> plan.fp8. Megatron's blockwise FP8 (DeepSeek-style 128x128 scales) keeps the same FP8 operand
# bytes as tensorwise; torchao's "mxfp8 (dense linears only / grouped GEMMs only)" are partial MXFP8 recipes priced
# as mxfp8 (the closest recipe autotune has).
MB_FP8 = {
    "bf16": "none",
    "fp8-tensorwise": "tensorwise",
    "fp8-rowwise": "rowwise",
    "mxfp8": "mxfp8",
    "mxfp8 (dense linears only)": "mxfp8",
    "mxfp8 (routed-expert grouped GEMMs only)": "mxfp8",
    "fp8-blockwise": "tensorwise",
}


def _int(v: Any, default: int = 1) -> int:
    return default if v is None or (isinstance(v, float) and math.isnan(v)) else int(v)


def _moe_blackwell_row(r: Any) -> PublishedLayout | str:
    """One moe_blackwell row as a layout, or the reason it cannot be expressed."""
    name = str(r.model)
    if name in MOE_MODELS:  # the presets the speed loader maps (Llama-4-Scout cut to 2 layers, Mixtral-8x22B, ...)
        model = row_model(name)
    elif (DATA.parents[1].parent / "search_spaces" / "model" / f"{name}.yaml").exists():
        model = preset_model(name)
    else:
        return f"model={name}: no preset or stated shape (hybrid gated-DeltaNet attention is not modelled)"
    tp, pp, cp, vpp = _int(r.tp), _int(r.pp), _int(r.cp), _int(r.vpp)
    ep, etp, mbs, gbs, n = _int(r.ep), _int(r.etp), _int(r.micro_batch), _int(r.global_batch), _int(r.num_gpus)
    dp = n // (tp * pp * cp)
    zero = 3 if "zero3" in str(r.zero_fsdp) else 1
    megatron = r.framework == "megatron"
    recompute = str(r.recompute) if str(r.recompute) in ("selective", "full") else "none"
    # Qwen3-235B: the embedding and the loss counted in the pipeline split, as Megatron-Bridge's recipe does
    # (autotune/fitting/nemo_runs.py); every ModelZoo layout of it splits 94 + 2 layers evenly (PP8 x VP4,
    # PP4 x VP6 / 12, PP32 x VP3), none 94
    accounted = megatron and pp > 1 and name == "qwen3-235b-a22b"
    plan = ParallelPlan(
        dp=dp,
        tp=tp,
        pp=pp,
        cp=cp,
        vpp=vpp,
        pp_split_embedding=accounted,
        pp_split_loss=accounted,
        ep=ep,
        etp=etp,
        zero_stage=zero,
        micro_batch_size=mbs,
        grad_accum_steps=gbs // (dp * mbs),
        sequence_parallel=tp > 1,
        recompute=recompute,
        moe_recompute=MB_MOE_RECOMPUTE.get(str(r.row_id), "none"),
        norm_recompute=str(r.row_id) in MB_NORM_RECOMPUTE,
        moe_offload=MB_MOE_OFFLOAD.get(str(r.row_id), "none"),
        pp_schedule="interleaved_1f1b" if vpp > 1 else "1f1b",
        fp8=MB_FP8[str(r.precision)],
        compile=True,  # Megatron: fused kernels (nemo_runs module doc); torchtitan rows: torch.compile (row notes)
    )
    mem = float(r.mem_per_gpu) if not pd.isna(r.mem_per_gpu) and "reserved" in str(r.mem_kind) else None
    # ModelZoo MXFP8 runs: FP8 params, bf16 Adam moments (autotune/fitting/public_moe_runs.py module doc)
    zoo_mx = megatron and plan.fp8 == "mxfp8" and MODELZOO_MXFP8 in str(r.source)
    train = TrainSpec(
        seq_len=int(r.seq_len),
        global_batch_size=gbs,
        # the torchao Scout rows' router had collapsed (public_moe_runs.COLLAPSED_ROUTING_ROWS, the table's own figures)
        moe_routing="balanced" if megatron else ("collapsed" if str(r.row_id) in COLLAPSED_ROUTING_ROWS else "learned"),
        framework=str(r.framework),
        **({"param_dtype": "bf16", "grad_dtype": "bf16", "master_dtype": "fp32"} if megatron else {}),
        **({"fp8_param_gather": True, "optimizer_dtype": "bf16"} if zoo_mx else {}),
    )
    rid = str(r.row_id)
    gpu = MB_GPU[str(r.gpu_type)]
    # the torchao/torchtitan B200 rows ran torchtitan after #1094 (6fc499f6, 2026) with its "default" reshard policy
    profile = None if megatron else TORCHTITAN_DEFAULT
    return PublishedLayout(
        "moe_blackwell",
        rid,
        str(r.framework),
        model,
        train,
        gpu,
        plan,
        True,
        mem,
        MB_NOT_MODELLED.get(rid, ""),
        profile,
        True if rid in MB_EXPANDABLE or not megatron else None,  # MB_EXPANDABLE; torchtitan rows: TORCHTITAN_LAUNCH
    )


def load_moe_blackwell(folder: Path = DATA) -> tuple[list[PublishedLayout], list[tuple[str, str]]]:
    df = pd.read_csv(folder / "moe_blackwell_public_2026-11.csv")
    out, skipped = [], []
    for r in df.itertuples():
        got = _moe_blackwell_row(r)
        (skipped.append((str(r.row_id), got)) if isinstance(got, str) else out.append(got))
    return out, skipped


OLD_COMPILED_SELECTIVE = "selective recompute of the trainer before 1fb4933 (RecomputeInBackward; priced as none)"


def _h200_layout(
    case: str, layout: str, compile_: bool, status: str, reserved: Any, before_1fb4933: bool = True
) -> PublishedLayout:
    kv = dict(tok.split("=", 1) for tok in layout.split())
    model = preset_model(kv.pop("model"))
    if "model.num_layers" in kv:
        model = dataclasses.replace(model, num_layers=int(kv.pop("model.num_layers")))
    seq, gbs = int(kv.pop("train.seq_len")), int(kv.pop("train.global_batch_size"))
    routing = kv.pop("train.moe_routing", "learned")
    p = {k.removeprefix("plan."): v for k, v in kv.items()}
    dp, mbs = int(p.pop("dp", 1)), int(p.pop("micro_batch_size"))
    # The first two H200 leases predate commit 1fb4933 (2026-11-25 18:46): their compiled selective was the eager
    # RecomputeInBackward regions, which under torch.compile saved nothing (Dynamo graph-breaks on them and the
    # partitioner already recomputes what they drop; docs/memory_model.md "Under torch.compile (issue 29)": CPU peak
    # 0.9998 of none's). The files show it: peak_alloc_gib of 1b_mbs4_sel_c / 3b_mbs2_sel_c equals none's (41.6 /
    # 75.69). Today's compiled selective (one checkpoint around SwiGLU) saves c*f per token: so price what ran, none.
    old_sel = before_1fb4933 and compile_ and p.get("recompute") == "selective"
    if old_sel:
        p["recompute"] = "none"
    plan = ParallelPlan(
        dp=dp,
        tp=int(p.pop("tp", 1)),
        cp=int(p.pop("cp", 1)),
        zero_stage=int(p.pop("zero_stage", 0)),
        micro_batch_size=mbs,
        grad_accum_steps=gbs // (dp * mbs),
        recompute=p.pop("recompute", "none"),
        sequence_parallel=p.pop("sequence_parallel", "false") == "true",
        fp8=p.pop("fp8", "none"),
        compile=compile_,
    )
    p.pop("compile", None)
    assert not p, f"{case}: layout fields not mapped: {sorted(p)}"
    mem = None if pd.isna(reserved) else float(reserved)
    return PublishedLayout(
        "h200", case, "bench_model", model, TrainSpec(seq, gbs, moe_routing=routing), "h200-141gb", plan,
        status == "ok", mem, OLD_COMPILED_SELECTIVE if old_sel else "",
    )  # fmt: skip


def load_h200(folder: Path = DATA) -> tuple[list[PublishedLayout], list[tuple[str, str]]]:
    """The 2026-11-29 lease's rows (today's trainer) and the 2026-11-25 rows it did not measure again (memory
    compared), plus the 2026-11-23 file's OOM and probe rows (fit only)."""
    out, skipped = [], []
    for file in H200_LEASES:
        again, lease = h200_remeasured(folder, file), file.removeprefix("h200_bench_model_").removesuffix(".csv")
        for r in pd.read_csv(folder / file).itertuples():
            case = r.case if lease == "2026-11-25" else f"{r.case}@{lease}"
            if not str(r.kind).startswith("bench_model trainer"):
                skipped.append((case, f"kind={r.kind}: not today's trainer"))
            elif h200_layout_key(str(r.layout), bool(r.compile)) in again:
                skipped.append((case, "measured again on a later H200 lease (the trainer since changed)"))
            else:
                old = lease == "2026-11-25"
                out.append(_h200_layout(case, r.layout, bool(r.compile), r.status, r.peak_reserved_gib, old))
    old = pd.read_csv(folder / "h200_bench_model_2026-11.csv")
    for r in old.itertuples():
        if str(r.status) == "oom" or str(r.kind).startswith("autotune probe-memory") and r.status == "ok":
            out.append(dataclasses.replace(_h200_layout(r.case, r.layout, bool(r.compile), r.status, None)))
        else:
            skipped.append((r.case, f"status={r.status}: the 2026-11-23 trainer's run (memory since changed)"))
    return out, skipped


def load_nemo(folder: Path = DATA) -> tuple[list[PublishedLayout], list[tuple[str, str]]]:
    runs, skipped = load_nemo_rows(folder)
    df = pd.read_csv(folder / "nemo_megatron_bridge_performance_summary.csv")
    out = [
        PublishedLayout(
            "nemo",
            str(r.row),
            "megatron",
            r.model,
            dataclasses.replace(r.train, framework="megatron"),
            r.cluster,
            r.plan,
            True,
            None,
            "",
            expandable_segments=recipe_expandable_segments(df.loc[r.row], r.plan),
        )
        for r in runs
    ]
    return out, [(str(s.row), s.reason) for s in skipped]


def load_torchtitan(folder: Path = DATA) -> tuple[list[PublishedLayout], list[tuple[str, str]]]:
    """torchtitan's benchmark pages (torchtitan_benchmarks.csv, autotune/fitting/torchtitan_runs.py): every layout
    ran; "Memory(GiB)" is the peak torchtitan logs, max_memory_reserved in GiB (torchtitan/metrics.py @9dec370
    DeviceMemoryMonitor.get_peak_stats: max_reserved_gib), the maximum over all ranks on the PP pages (footnote 1).
    The asyncTP page prints none (None)."""
    from autotune.fitting.torchtitan_runs import load_torchtitan as load
    from autotune.predict.frameworks.torchtitan import TORCHTITAN_2024_12, TORCHTITAN_2025_06

    runs, skipped = load(folder)
    df = pd.read_csv(folder / "torchtitan_benchmarks.csv")
    mem = df["memory_gib"]
    # torchtitan 9dec370 (the Dec 2024 page) did not compile the loss (train.py: "TODO: compiling loss function
    # causes CUDA errors, turning off for now"; every later commit here does, components/loss.py) and its pipeline
    # kept the last stage's outputs; all these commits predate #1094, so torchtitan's "default" reshard policy kept
    # the root unit and the last block gathered (autotune/predict/frameworks/torchtitan.py [CLOSS], [PPOUT], [RAF])
    version = {"9dec370": TORCHTITAN_2024_12, "820504e": TORCHTITAN_2025_06, "e7c0cae": TORCHTITAN_2025_06}
    out = [
        PublishedLayout(
            "torchtitan", str(r.row), "torchtitan", r.model, r.train, r.cluster, r.plan, True,
            None if pd.isna(mem[r.row]) else float(mem[r.row]),
            # the 405B toml and the H200 CLI turn on FSDP's float8 all-gather (not a plan field)
            "float8 all-gather (FSDP)" if r.plan.fp8 != "none" and (r.model.num_layers == 126 or r.cluster == "h200-141gb") else "",
            version[str(df["torchtitan_commit"][r.row])],
        )
        for r in runs
    ]  # fmt: skip
    return out, [(str(s.row), s.reason) for s in skipped]


def load_mlperf(folder: Path = DATA) -> tuple[list[PublishedLayout], list[tuple[str, str]]]:
    """MLPerf Training's Llama 3.1 405B submissions (autotune/fitting/mlperf_runs.py): every one ran; none publishes
    its memory."""
    from autotune.fitting.mlperf_runs import load_mlperf_rows

    out = [
        PublishedLayout("mlperf", rid, "megatron", model, train, cluster, plan, True, None, expandable_segments=exp)
        for rid, model, cluster, train, plan, exp in load_mlperf_rows(folder)
    ]
    return out, []


LOADERS = {
    "nemo": load_nemo,
    "mlperf": load_mlperf,
    "moe_blackwell": load_moe_blackwell,
    "h200": load_h200,
    "torchtitan": load_torchtitan,
}
