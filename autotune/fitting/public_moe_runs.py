"""Published MoE and Blackwell runs (benchmarks/data/measured/moe_blackwell_public_2026-11.csv, a copy of the shared
reference table; each row's `source` and `source_place` columns cite the document it comes from) as ReferenceRuns.

Sources in the table: the torchao float8/MXFP8 training docs (torchtitan Llama-3-8B on 8 *power-limited* B200, bf16 /
tensorwise / rowwise / MXFP8), torchao's MoE training README (Llama-4-Scout cut to 2 layers), Megatron-MoE-ModelZoo
(Qwen3-235B-A22B on H100 / GB200 / GB300 incl. 16k-128k context, Qwen3-Next, Mixtral-8x22B) and the Megatron-LM MoE
README (Mixtral-8x7B on 64 H100).

How a row becomes a layout (the columns give the degrees; where the table is silent the assumption is named):
- degrees tp, pp, vpp, cp, ep (blank = 1), etp = 1 (blank), dp from the table; micro-batch `micro_batch`, gradient
  accumulation global_batch / (dp * micro_batch).
- ZeRO: "FSDP (zero3)" / "Megatron-FSDP (zero3)" -> zero_stage 3, "distributed optimizer (zero1)" -> 1.
- recompute: the table's none / selective / full (blank -> none: the Megatron-LM MoE README states none).
- Megatron-Core rows: bf16 params and grads with an fp32 master (Megatron mixed precision), sequence parallelism
  whenever tp > 1 (Megatron requires it for MoE with TP), fused elementwise kernels (plan.compile, as nemo_runs.py
  argues), interleaved 1F1B when vpp > 1. torchtitan rows: torch.compile (the table's compile column), fp32 sharded
  params computed in bf16 and gradients reduced in fp32 (torchtitan's defaults mixed_precision_param = bfloat16,
  mixed_precision_reduce = float32): TrainSpec's defaults (bench_model keeps the same numerics).
- precision: bf16 -> none; fp8-tensorwise, fp8-rowwise, mxfp8 as named. Skipped: recipes split by layer type (MXFP8 on
  the dense linears or on the grouped GEMMs only) and fp8-blockwise (no such recipe in the model).
- routing: the table's moe_routing (blank on a MoE row: learned, the framework default).
- models: MODELS maps the table's name to a preset and a layer count; "llama4-scout-2layer" is torchao's run of
  torchtitan's llama4 17bx16e with n_layers 48 -> 2 (the row's model_shape: both layers MoE, as every Scout layer):
  the llama-4-scout preset with num_layers 2. Qwen3-Next-80B-A3B is skipped: 3 of every 4 layers are Gated DeltaNet
  (linear attention with a recurrent state), a mixer ModelSpec has no term for.
- Mixtral-8x22B (ModelZoo model_configs/benchmarking/Mixtral-8x22B.yaml: --tp-comm-overlap true, with sequence
  parallelism): plan.tp_overlap at TP > 1 (TP_OVERLAP_MODELS).
- token dropping: a row whose notes quote --moe-expert-capacity-factor F runs the preset with moe_capacity_factor F.
- a row whose notes say "excluded from scoring" (the transcriber's copy of a layout since removed from its source) is
  skipped.
- dispatcher (plan.moe_dispatcher): the table's dispatcher column as its source states it (Megatron-MoE-ModelZoo
  rows: DeepEP on H100, HybridEP on GB200 / GB300, A2A / alltoall; the Megatron-LM README's All-to-All): DeepEP and
  HybridEP (Megatron's flex dispatcher with either backend) -> deepep / hybridep, both priced as the hierarchical
  exchange (autotune/predict/moe_dispatch.py); the rest, and a blank cell, alltoall (FLEX_DISPATCHERS).
- MXFP8 on Megatron-MoE-ModelZoo rows: its sbatch_benchmarking.sh (@ 38ce2ed2, `PR == "mxfp8"`) adds
  --fp8-param-gather --reuse-grad-buf-for-mxfp8-param-ag (unless OPTIMIZER_OFFLOAD=1, which no row sets) and
  --use-precision-aware-optimizer --main-params-dtype fp32 --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16:
  train.fp8_param_gather and train.optimizer_dtype=bf16 (fp32 master, bf16 Adam moments) on those rows
  (MODELZOO_MXFP8).
- EP communication overlap (plan.ep_overlap): on for the rows whose cited command sets A2A_OVERLAP=1
  (EP_OVERLAP_ROWS), off elsewhere (the torchtitan rows: no such overlap).
- CUDA graphs (train.cuda_graphs): the scopes the row's cited command passes (CUDA_GRAPH_ROWS), else none.
- hidden dropout (train.hidden_dropout, megatron profile only): 0.0 where the recipe states it: Qwen3-235B-A22B
  (Megatron-MoE-ModelZoo model_configs/benchmarking/Qwen3-235B-A22B.yaml `--hidden-dropout: 0.0`) and Mixtral-8x22B
  (model_configs/benchmarking/Mixtral-8x22B.yaml `--hidden-dropout 0.0`); Megatron-Core's default 0.1 for the others
  (not stated).
"""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path
from typing import Any

import pandas as pd

from autotune.core.model import ModelSpec
from autotune.core.types import ParallelPlan, TrainSpec
from autotune.fitting.run_types import DATA, ReferenceRun, SkippedRow, preset_model

SOURCE = "moe_public"
FLEX_DISPATCHERS = {"DeepEP": "deepep", "HybridEP": "hybridep"}  # the dispatcher column's flex backends
FILE = "moe_blackwell_public_2026-11.csv"
GPU = {"H100": "h100-sxm-80gb", "B200": "b200", "GB200": "gb200-nvl72", "GB300": "gb300-nvl72"}
# the table's model -> (preset, num_layers override or None)
MODELS = {
    "llama-3.1-8b": ("llama-3.1-8b", None),
    "qwen3-235b-a22b": ("qwen3-235b-a22b", None),
    "mixtral-8x7b": ("mixtral-8x7b", None),
    "mixtral-8x22b": ("mixtral-8x22b", None),
    "llama4-scout-2layer": ("llama-4-scout", 2),
}
TP_OVERLAP_MODELS = {"mixtral-8x22b"}
# Megatron's EP communication overlap (plan.ep_overlap; module doc), per row, from the command each Megatron-MoE-ModelZoo
# row cites (yanring/Megatron-MoE-ModelZoo @ e865051; its interactive_benchmarking.sh turns A2A_OVERLAP=1 into
# --delay-wgrad-compute --overlap-moe-expert-parallel-comm, default 0):
#   r030 README H100 table "+1f1b overlap" (r029, the same layout without it: off); r048 best_practice/qwen3/
#   run_h100_235b.sh A2A_OVERLAP=1; r044 run_gb200_235b.sh (PP4 VPP6 EP64 MXFP8) A2A_OVERLAP=1; r046
#   run_gb300_235b.sh (EP64) A2A_OVERLAP=1.
# Off: the long-context rows r035-r042 (run_235b.sh SEQ_LEN 16k-128k: A2A_OVERLAP=0), r043 and r045
# (run_gb200_235b.sh A2A_OVERLAP=0), r031-r033 (README "Intra-node EP": no overlap noted; r031 full recompute,
# which Megatron refuses with it), Mixtral-8x22B (run_mixtral_8x22B.sh sets no A2A_OVERLAP: 0) and the Megatron-LM
# MoE README's Mixtral-8x7B (MCore v0.8/v0.9, before the flag, MCore v0.14).
EP_OVERLAP_ROWS = {"r030", "r044", "r046", "r048"}
# Megatron recompute modules (plan.moe_recompute), from each row's notes / recompute column (Megatron-MoE-ModelZoo
# best_practice/qwen3 readme and run scripts, cited in the CSV's source column): the H100 table's "norm, act" (r029,
# r030, r032; r034 "norm, act, shared_expert") and the GB200 / H100 scripts' "moe_act+layernorm" (r044, r045, r048)
# -> moe_act, the long-context H100 table's "layernorm+moe" -> moe; the layernorm module on every one of these rows
# (MB_NORM_RECOMPUTE: plan.norm_recompute); the shared_experts module is not a plan value (published_runs.MB_NOT_MODELLED)
MB_MOE_RECOMPUTE = {
    **{f"r0{i}": "moe" for i in range(35, 43)},
    **{r: "moe_act" for r in ("r029", "r030", "r032", "r034", "r044", "r045", "r048")},
}
MB_NORM_RECOMPUTE = frozenset(MB_MOE_RECOMPUTE)  # "norm" / "layernorm" is in every list above
# torchao's Llama-4-Scout table (pytorch/ao torchao/prototype/moe_training/README.md @ 838dcebb (2025-10-13), kept
# @ 5e79e5ed): the learned top-1 router had collapsed onto one EP rank's experts, train.moe_routing="collapsed"
# (autotune/predict/moe.py `collapsed_imbalance`: 4x the even share at EP 4). Its own figures say so: MXFP8 on the
# routed grouped GEMMs alone (r017) cut the step from 65536 / 49381 = 1.327 s to 65536 / 69350 = 0.945 s per rank,
# 0.382 s, while the README's single-MoE-layer benchmark (Llama4 16e shapes, total_M 131072: bf16 275.27 ms, MXFP8
# 192.42 ms) saves 0.632 us per routed token per layer: 0.382 s over 2 layers is 302k tokens per layer on the
# busiest rank, 4.6x its even share of 65536 (an even split would save 0.083 s, a 1.07x speedup, not 1.40x): the
# busiest rank receives about every token of the EP group (at most 4x). The run: torchtitan's llama4 debug config
# (benchmarks/float8/training/llama4.sh @ 572d8b3b: experiments/llama4/train_configs/debug_model.toml, lr 4e-3 with
# 2 warm-up steps), a dropless TokenChoiceTopKRouter (models/moe.py @ 9603872e: no capacity).
COLLAPSED_ROUTING_ROWS = {"r015", "r016", "r017", "r018"}
# CUDA graphs (train.cuda_graphs, autotune/predict/host.py) of the Megatron-MoE-ModelZoo rows whose cited command
# states them (yanring/Megatron-MoE-ModelZoo @ e8650517d best_practice/qwen3/): r043 (run_gb200_235b.sh BF16 PP8 EP8),
# r044 (run_gb200_235b.sh MXFP8 PP4 VPP6 EP64) and r046 (run_gb300_235b.sh EP64) pass `--cuda-graph-impl
# transformer_engine --cuda-graph-scope attn moe_router moe_preprocess` -> "attn_moe"; r048 (run_h100_235b.sh, the
# "H100 config, 320 TFLOPS" line) `--cuda-graph-scope moe_router moe_preprocess` -> "moe". Other rows: none stated,
# "none" (r045's command passes no graph flag; the README tables' rows name no command).
CUDA_GRAPH_ROWS = {"r043": "attn_moe", "r044": "attn_moe", "r046": "attn_moe", "r048": "moe"}
NO_DROPOUT = {"qwen3-235b-a22b", "mixtral-8x22b"}  # recipes that state --hidden-dropout 0.0 (module doc)
MODELZOO_MXFP8 = "Megatron-MoE-ModelZoo"  # source whose MXFP8 runs gather FP8 params with bf16 Adam moments (doc)
RECIPE = {"bf16": "none", "fp8-tensorwise": "tensorwise", "fp8-rowwise": "rowwise", "mxfp8": "mxfp8"}


def _int(v: Any, default: int = 1) -> int:
    return default if v is None or (isinstance(v, float) and math.isnan(v)) else int(v)


def _skip_reason(r: Any) -> str | None:
    if "excluded from scoring" in str(r.notes):  # the transcriber's duplicate of a row since removed from the source
        return f"notes={r.notes!r}"
    if str(r.model) not in MODELS:
        if str(r.model).startswith("qwen3-next"):
            return f"model={r.model}: hybrid Gated DeltaNet + attention layers (no linear-attention mixer in ModelSpec)"
        return f"model={r.model}: no preset"
    if str(r.precision) not in RECIPE:
        return f"precision={r.precision}: not one recipe of the model"
    if str(r.gpu_type) not in GPU:
        return f"gpu_type={r.gpu_type}: no cluster preset"
    return None


def public_layout(r: Any) -> tuple[TrainSpec, ParallelPlan]:
    """One table row as (train, plan); raises ValueError (SpecError) when the numbers do not split."""
    tp, pp, vpp, cp, ep, etp, dp = (_int(getattr(r, k)) for k in ("tp", "pp", "vpp", "cp", "ep", "etp", "dp"))
    mbs, gbs = _int(r.micro_batch), int(r.global_batch)
    if dp * tp * pp * cp != int(r.num_gpus) or gbs % (dp * mbs):
        raise ValueError(f"num_gpus={r.num_gpus} global_batch={gbs} do not split as dp={dp} tp={tp} pp={pp} cp={cp}")
    megatron = str(r.framework) == "megatron"
    rec = str(r.recompute) if str(r.recompute) in ("none", "selective", "full") else "none"
    plan = ParallelPlan(
        dp=dp,
        tp=tp,
        pp=pp,
        cp=cp,
        vpp=vpp,
        ep=ep,
        etp=etp,
        zero_stage=3 if "zero3" in str(r.zero_fsdp) else 1,
        micro_batch_size=mbs,
        grad_accum_steps=gbs // (dp * mbs),
        recompute=rec,
        moe_recompute=MB_MOE_RECOMPUTE.get(str(r.row_id), "none") if megatron and rec == "selective" else "none",
        norm_recompute=megatron and rec == "selective" and str(r.row_id) in MB_NORM_RECOMPUTE,
        sequence_parallel=tp > 1,
        tp_overlap=megatron and tp > 1 and str(r.model) in TP_OVERLAP_MODELS,
        pp_schedule="interleaved_1f1b" if vpp > 1 else "1f1b",
        fp8=RECIPE[str(r.precision)],
        compile=True if megatron else bool(r.compile),
        ep_overlap=megatron and str(r.row_id) in EP_OVERLAP_ROWS,
        moe_dispatcher=FLEX_DISPATCHERS.get(str(r.dispatcher).strip(), "alltoall") if ep > 1 else "alltoall",
    )
    routing = str(r.moe_routing) if str(r.moe_routing) in ("learned", "balanced") else "learned"
    routing = "collapsed" if str(r.row_id) in COLLAPSED_ROUTING_ROWS else routing
    zoo_mx = megatron and plan.fp8 == "mxfp8" and MODELZOO_MXFP8 in str(r.source)
    train = TrainSpec(
        seq_len=int(r.seq_len),
        global_batch_size=gbs,
        param_dtype="bf16" if megatron else "fp32",
        grad_dtype="bf16" if megatron else "fp32",
        master_dtype="fp32" if megatron else None,
        moe_routing=routing,
        hidden_dropout=0.0 if str(r.model) in NO_DROPOUT else 0.1,
        framework="megatron" if megatron else "torchtitan",  # whose overlaps price the DP communication
        fp8_param_gather=zoo_mx,
        optimizer_dtype="bf16" if zoo_mx else "fp32",
        cuda_graphs=CUDA_GRAPH_ROWS.get(str(r.row_id), "none") if megatron else "none",
    )
    return train, plan


def row_model(name: str) -> ModelSpec:
    """The table's model name as a ModelSpec: its preset, cut to the row's layer count where the run was."""
    preset, layers = MODELS[name]
    model = preset_model(preset)
    return model if layers is None else dataclasses.replace(model, num_layers=layers)


def _capacity(notes: str) -> float | None:
    """Token dropping: the capacity factor a row's notes quote (Megatron --moe-expert-capacity-factor), else None."""
    m = re.search(r"--moe-expert-capacity-factor ([0-9.]+)", notes)
    return float(m.group(1)) if m else None


POWER_LIMITED = "*power limited*"  # the torchao docs' words for their B200s (row notes, `source_place` cited)


def _fit_excluded(notes: str) -> str:
    """Why a row is scored but not fitted (run_types.ReferenceRun.fit_excluded), "" where it is fitted. torchao's
    training docs ran its Llama-3-8B table on "*power limited* B200" (pytorch/ao docs/source/workflows/training.md @
    36027d82, "Training e2e benchmarks on NVIDIA B200") and state neither the cap nor the clocks: the b200 preset's
    datasheet peaks (1,000 W HGX B200) do not describe those GPUs and no preset field can, so fitting them would
    teach the Blackwell coefficients a power cap as if it were kernel efficiency. They stay in every error figure."""
    if POWER_LIMITED in notes:
        return "GPU power limited (cap and clocks not stated): scored, not fitted"
    return ""


def load_public_moe(folder: Path = DATA) -> tuple[list[ReferenceRun], list[SkippedRow]]:
    df = pd.read_csv(folder / FILE)
    runs, skipped = [], []
    for i, r in df.iterrows():
        reason = _skip_reason(r)
        if reason is None:
            try:
                train, plan = public_layout(r)
            except ValueError as e:
                reason = str(e)
            else:
                model = row_model(str(r.model))
                if (cf := _capacity(str(r.notes))) is not None:
                    model = dataclasses.replace(model, moe_capacity_factor=cf)
                gpu, tok = GPU[str(r.gpu_type)], float(r.tokens_per_s_per_gpu)
                runs.append(ReferenceRun(SOURCE, i, model, train, gpu, plan, tok, _fit_excluded(str(r.notes))))
                continue
        skipped.append(SkippedRow(SOURCE, i, reason))
    return runs, skipped
