"""Frozen dataclasses that cross stage boundaries (docs/architecture.md "Types that cross stage boundaries").

Everything here is plain data: no Hydra, no torch, no I/O. Validation raises `SpecError` (autotune/core/errors.py, a
ValueError) whose message names the field, the value and the rule, so the CLI can print it as one line.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any, Literal

from autotune.core.cluster import ClusterSpec as ClusterSpec  # re-exported: defined in autotune/core/cluster.py
from autotune.core.dims import Dim, dim_field
from autotune.core.errors import require
from autotune.core.model import ModelSpec
from autotune.core.train import (  # noqa: F401  (re-exported: defined in autotune/core/train.py)
    CUDA_GRAPHS,
    DTYPE_BYTES,
    FRAMEWORKS,
    MOE_ROUTINGS,
    TrainSpec,
)

Recompute = Literal["none", "selective", "full"]
RECOMPUTE_MODES: tuple[str, ...] = ("none", "selective", "full")
PP_SCHEDULES: tuple[str, ...] = ("1f1b", "gpipe", "interleaved_1f1b")
# CPU offload, in order of device memory saved (docs/memory_model.md "CPU offload"): optimizer = ZeRO-Offload (fp32
# master + Adam states on the host, step on the CPU); params = FSDP2 CPUOffloadPolicy (sharded params, grads and
# optimizer state on the host)
OFFLOAD_MODES: tuple[str, ...] = ("none", "optimizer", "params")
# low-precision linear recipes; "none" = compute-dtype linears. tensorwise / rowwise: torchao float8 training
# (`Float8LinearConfig.from_recipe_name`; Megatron's FP8 current scaling "FP8-CS" is tensorwise). mxfp8: block-scaled
# FP8 (OCP MX: 32-element blocks, E8M0 scales), Blackwell tensor cores. nvfp4: FP4 E2M1 with 16-element E4M3 block
# scales and a per-tensor fp32 scale, Blackwell tensor cores (docs/memory_model.md "FP8 linears")
FP8_RECIPES: tuple[str, ...] = ("none", "tensorwise", "rowwise", "mxfp8", "nvfp4")
# MoE token dispatchers (plan.moe_dispatcher): all-to-all of the routed copies (Megatron MoEAlltoAllTokenDispatcher,
# torchtitan "standard"), all-gather of the EP group's tokens + reduce-scatter of the outputs (Megatron
# MoEAllGatherTokenDispatcher), DeepEP's fused dispatch/combine kernels (Megatron --moe-token-dispatcher-type flex with
# DeepEP, torchtitan parallelism.expert_parallel_comm_backend=deepep; Zhao et al. 2025, deepseek-ai/DeepEP), NVIDIA's
# HybridEP (Megatron flex with --moe-flex-dispatcher-backend hybridep, torchtitan expert_parallel_comm_backend=hybridep:
# the TMA-based variant for NVL72 domains; DeepEP's hybrid-ep branch). Appended last: codes 0..3 stay stable
MOE_DISPATCHERS: tuple[str, ...] = ("alltoall", "allgather", "deepep", "hybridep")

# Megatron-Core's MoE recompute modules (TransformerConfig.recompute_modules with recompute_granularity="selective"):
# "moe_act" (the experts' activation function re-run in backward), "moe" (the whole MoE layer: router, dispatch,
# experts, combine re-run from its input); the names are Megatron's
MOE_RECOMPUTE_MODES: tuple[str, ...] = ("none", "moe_act", "moe")
# Megatron-Core's fine-grained activation offloading of the MoE experts (TransformerConfig
# fine_grained_activation_offloading with offload_modules, megatron/core/transformer/transformer_config.py @ d98e8a64):
# the input of the experts' fc1 ("expert_fc1": the permuted tokens), of their activation function ("moe_act": fc1's
# output), or both, copied to the host after the forward and back before the backward; the names are Megatron's
MOE_OFFLOAD_MODES: tuple[str, ...] = ("none", "expert_fc1", "moe_act", "expert_fc1+moe_act")


_DERIVED_GAS = "global_batch_size / (dp * micro_batch_size)"
_DERIVED_SCHEDULE = "interleaved_1f1b exactly when vpp > 1, else 1f1b"


@dataclass(frozen=True)
class ParallelPlan:
    """One parallel layout. Checks each field's domain on construction (type, range, choices); the rules across fields
    (sp needs tp, dp_shard | dp, the batch product, tp | heads, ...) are the table in autotune.layouts.rules, which
    `check_plan` and `require_well_formed` apply. Each field's `Dim` metadata
    says how the rest of the code treats it (PLAN_FIELDS, PLAN_DIMS below)."""

    dp: int = dim_field(1, mesh=True, optuna=True, oom="shape", tag="dp{}", tag_always=True)
    tp: int = dim_field(1, mesh=True, optuna=True, oom="shape", tag="·tp{}", tag_always=True)
    pp: int = dim_field(1, mesh=True, optuna=True, oom="shape", tag="·pp{}", tag_always=True)
    cp: int = dim_field(1, mesh=True, optuna=True, oom="shape", tag="·cp{}", tag_always=True)
    vpp: int = dim_field(1, optuna=True, oom="shape", tag="·vpp{}")
    zero_stage: int = dim_field(
        0, optuna=True, oom="lower", label="zero", count=False, maximum=3, tag=" z{}", tag_always=True
    )
    micro_batch_size: int = dim_field(1, optuna=True, oom="higher", label="mbs", tag=" mbs{}", tag_always=True)
    grad_accum_steps: int = dim_field(
        1, derived=_DERIVED_GAS, optuna=False, oom="derived", tag=" gas{}", tag_always=True
    )
    recompute: str = dim_field(
        "none", optuna=True, oom="lower", label="recompute", choices=RECOMPUTE_MODES, codes=("", " sel", " full")
    )
    sequence_parallel: bool = dim_field(False, optuna=True, oom="shape", tag=" sp")
    # labelled only when it is gpipe (the schedule the layout would not otherwise suggest)
    pp_schedule: str = dim_field(
        "1f1b", derived=_DERIVED_SCHEDULE, optuna=False, oom="shape", choices=PP_SCHEDULES, codes=("", " gpipe", "")
    )
    # torch.compile per transformer block (bench_model); fusion removes memory-bound time and activation buffers
    compile: bool = dim_field(False, opt_in=True, optuna=True, oom="shape", tag=" compile")
    # CPU offload (OFFLOAD_MODES); a later mode keeps less on the device, so a lower one needs at least the memory
    offload: str = dim_field(
        "none",
        opt_in=True,
        optuna=True,
        oom="lower",
        label="offload",
        choices=OFFLOAD_MODES,
        codes=("", " off-opt", " off-params"),
    )
    # HSDP: size of the FSDP sharding group inside dp (0 = all of dp, plain FSDP); replicate = dp / dp_shard.
    # A smaller group holds a bigger slice of the states (P/(dp_shard*cp)), so "lower" needs at least the memory.
    dp_shard: int = dim_field(
        0, opt_in=True, optuna=True, oom="lower", label="dp_shard", count=False, zero_is_all=True, tag=" hsdp{}"
    )
    # torchao float8 training of the transformer blocks' linears (bench_model); a throughput/numerics trade-off
    fp8: str = dim_field("none", opt_in=True, optuna=True, oom="shape", label="fp8", choices=FP8_RECIPES, tag=" fp8={}")
    # Expert parallelism (MoE models). Not mesh axes: Megatron-Core's "parallel folding" views the same W/pp ranks of
    # each pipeline stage as (edp, ep, etp), etp innermost, with edp = W/(pp*ep*etp) derived (MoE README, "MoE Parallel
    # Folding"). A larger ep or etp splits the experts over more ranks, so a lower value needs at least the memory.
    # space.ep/etp null (the default) = powers of two up to the experts for an MoE model, [1] for a dense one.
    ep: int = dim_field(1, optuna=True, oom="lower", label="ep", tag=" ep{}")
    etp: int = dim_field(1, optuna=True, oom="lower", label="etp", tag=" etp{}")
    # TP communication overlap (Megatron --tp-comm-overlap, torchtitan / torch async TP): the sequence-parallel
    # all-gathers and reduce-scatters are decomposed and run behind the GEMMs they feed (Wang et al. 2023, ASPLOS,
    # "Overlap Communication with Dependent Computation via Decomposition"; autotune/predict/perf_terms.py
    # tp_overlap_exposed_s). It changes the job (symmetric-memory / userbuffer kernels), so searched only when asked.
    tp_overlap: bool = dim_field(False, opt_in=True, optuna=True, oom="shape", tag=" tp-overlap")
    # How an MoE layer moves its tokens between the EP ranks (MOE_DISPATCHERS; autotune/predict/moe.py dispatch terms):
    # a framework choice with its own communication and buffers, so searched only when asked.
    moe_dispatcher: str = dim_field(
        "alltoall",
        opt_in=True,
        optuna=True,
        oom="shape",
        label="moe_dispatcher",
        choices=MOE_DISPATCHERS,
        tag=" disp={}",
    )
    # Megatron-Core's pipeline split counting the embedding (and the loss) as one layer of the first (last) pipeline
    # stage: `account_for_embedding_in_pipeline_split` / `account_for_loss_in_pipeline_split` (TransformerConfig;
    # NVIDIA's recipes set both, e.g. Qwen3-235B PP32 x VP3 over 94 + 2 layers). The first (last) virtual stage then
    # holds one transformer layer less; (L + embed + loss) must divide by pp*vpp. Megatron only (rule
    # pp_split_needs_megatron): searched only when asked. A stage with fewer layers holds less, so "shape".
    pp_split_embedding: bool = dim_field(False, opt_in=True, optuna=True, oom="shape", tag=" pp-embed")
    pp_split_loss: bool = dim_field(False, opt_in=True, optuna=True, oom="shape", tag=" pp-loss")
    # Megatron-Core's activation CPU offloading (`--cpu-offloading --cpu-offloading-num-layers N`, Transformer Engine's
    # CPU offload context): the saved activations of N of the L layers go to host memory after their forward and come
    # back before their backward. Megatron allows it with pp = 1, no recompute, N < L (TransformerConfig.__post_init__);
    # NVIDIA's Megatron-FSDP recipes set it (cpu_offloading_num_layers 5-92). More layers keep less on the device:
    # "lower" needs at least the memory. train.framework=megatron only (rule act_offload_needs_megatron).
    act_offload_layers: int = dim_field(
        0, opt_in=True, optuna=True, oom="lower", label="act_offload_layers", count=False, tag=" act-off{}"
    )
    # Megatron's selective recompute of the MoE layer (MOE_RECOMPUTE_MODES; `--recompute-granularity selective
    # --recompute-modules moe_act | moe`), as NVIDIA's long-context Qwen3-235B recipes run it. MoE models,
    # plan.recompute=selective, train.framework=megatron (rules moe_recompute_needs_moe / _needs_selective /
    # _needs_megatron); a later mode keeps less, so "lower" needs at least the memory.
    moe_recompute: str = dim_field(
        "none",
        opt_in=True,
        optuna=True,
        oom="lower",
        label="moe_recompute",
        choices=MOE_RECOMPUTE_MODES,
        codes=("", " rc-moe_act", " rc-moe"),
    )
    # Megatron's fine-grained activation offloading of the MoE experts' inputs (MOE_OFFLOAD_MODES;
    # `--fine-grained-activation-offloading --offload-modules expert_fc1 moe_act`), as the Megatron-MoE-ModelZoo
    # Qwen3-235B GB200 recipe runs it. MoE models, train.framework=megatron, not with moe_recompute=moe nor with
    # act_offload_layers (TransformerConfig asserts both; rules moe_offload_*). expert_fc1 and moe_act move
    # different tensors (either can be the larger), so "shape".
    moe_offload: str = dim_field(
        "none",
        opt_in=True,
        optuna=True,
        oom="shape",
        label="moe_offload",
        choices=MOE_OFFLOAD_MODES,
        codes=("", " off-fc1", " off-act", " off-fc1-act"),
    )
    # Megatron-Core's EP communication overlap (`--overlap-moe-expert-parallel-comm`, Megatron-Bridge
    # `comm_overlap.overlap_moe_expert_parallel_comm` / perf-script `moe_a2a_overlap`, MCore >= 0.14): the combined
    # 1F1B schedule (megatron/core/pipeline_parallel/combined_1f1b.py) runs the forward of one micro-batch with the
    # backward of another, so each one's dispatch/combine all-to-alls run on a communication stream behind the other's
    # compute (autotune/predict/moe.py ep_overlap_exposed_s). Megatron only (profile rules); it changes the job (the
    # schedule, two micro-batches in flight), so searched only when asked. Memory: not modelled (one more micro-batch
    # of activations in flight), hence "shape".
    ep_overlap: bool = dim_field(False, opt_in=True, optuna=True, oom="shape", tag=" ep-overlap")
    # Megatron-Core's rank order `--use-tp-pp-dp-mapping` (megatron/training/initialize.py @ core_v0.16.1:
    # order 'tp-cp-ep-pp-dp' instead of 'tp-cp-ep-dp-pp'): the pipeline stages become the inner neighbours and the
    # data-parallel replicas the outermost dimension, so on an NVL72 rack the pipeline's p2p stays on NVLink and the
    # data-parallel reduction crosses racks (autotune/predict/collectives.py `dp_group_geometry`). NVIDIA's MLPerf
    # Llama 3.1 405B GB200 / GB300 submissions set it (TP_PP_DP_MAPPING=True). Megatron only (rule
    # tp_pp_dp_mapping_needs_megatron). Memory: unchanged; a different job's topology, so searched only when asked.
    tp_pp_dp_mapping: bool = dim_field(False, opt_in=True, optuna=True, oom="shape", tag=" dp-last")
    # Megatron's selective recompute of multi-head latent attention's up projections (`--recompute-modules
    # mla_up_proj`; transformer_config.py @ core_v0.16.1: "recompute the MLA up projection and RoPE applying parts"):
    # the q, k, v they make are dropped after the core attention's forward and made again before its backward
    # (multi_latent_attention.py `CheckpointWithoutOutput`, `discard_output_and_register_recompute`). MLA models,
    # plan.recompute=selective, train.framework=megatron (rules mla_recompute_*); NVIDIA's DeepSeek-V3 and Kimi-K2
    # recipes run it. Keeps less, so "lower" needs at least the memory.
    mla_recompute: bool = dim_field(False, opt_in=True, optuna=True, oom="lower", label="mla_recompute", tag=" rc-mla")
    # Megatron's selective recompute of the norms that are modules of their own (`--recompute-modules layernorm`;
    # transformer_layer.py @ core_v0.16.1 `recompute_input_layernorm` / `recompute_pre_mlp_layernorm`: the norm runs in
    # a CheckpointWithoutOutput whose output is discarded once the next module has run and made again before its
    # backward). Under Transformer Engine's layer spec (gpt_layer_specs.py) only an MoE layer's pre-MLP norm and MLA's
    # input norm are separate modules; the others are fused into TELayerNormColumnParallelLinear (IdentityOp, which the
    # module skips). MoE or MLA models, plan.recompute=selective, train.framework=megatron (rules norm_recompute_*);
    # NVIDIA's GPT-OSS and the Megatron-MoE-ModelZoo's Qwen3 recipes run it. Keeps less, so "lower".
    norm_recompute: bool = dim_field(
        False, opt_in=True, optuna=True, oom="lower", label="norm_recompute", tag=" rc-norm"
    )
    # Megatron's selective recompute of the dense MLPs (`--recompute-modules mlp`; transformer_layer.py @ core_v0.16.1
    # `recompute_mlp`, set only where the layer is not an MoE layer: the MLP, with Transformer Engine's fused pre-MLP
    # norm, runs under tensor_parallel.checkpoint and keeps its input only). Every layer of a dense model, the dense
    # layers of an MoE model (DeepSeek-V3's first three); plan.recompute=selective, train.framework=megatron (rules
    # mlp_recompute_*); NVIDIA's DeepSeek-V3 GB200 FP8 presets of 26.04 run it. Keeps less, so "lower".
    mlp_recompute: bool = dim_field(False, opt_in=True, optuna=True, oom="lower", label="mlp_recompute", tag=" rc-mlp")
    # Partial full recompute: Megatron-Core's `--recompute-granularity full --recompute-method block
    # --recompute-num-layers N` (TransformerBlock._checkpointed_forward, megatron/core/transformer/transformer_block.py
    # @ core_r0.16.1): N layers of each pipeline model chunk (a virtual stage's TransformerBlock) re-run their forward
    # in backward and keep only their input; the chunk's other layers keep every activation (NeMo docs,
    # features/optimizations/activation_recomputation.rst: "recompute_num_layers indicates the layers per pipeline
    # stage ... per virtual pipeline stage"). 0 = every layer (`--recompute-method uniform --recompute-num-layers 1`,
    # what plan.recompute=full always meant). plan.recompute=full only (rule recompute_layers_needs_full); bench_model
    # runs it (bench_model/parallel/recompute.py: the first N blocks of each stage chunk). More layers keep less on
    # the device, but 0 (all) is the least: "shape".
    recompute_layers: int = dim_field(
        0, opt_in=True, optuna=True, oom="shape", label="recompute_layers", count=False, tag=" rc-layers{}"
    )

    def __post_init__(self) -> None:
        for name in PLAN_FIELDS:  # each field's domain, from its Dim; rules across fields: autotune.layouts.rules
            problem = domain_problem(name, getattr(self, name))
            require(problem is None, f"plan.{name}={getattr(self, name)!r} must be {problem}")
        if self.dp_shard == self.dp:  # the whole of dp is the sharding group: plain FSDP, stored as the default
            object.__setattr__(self, "dp_shard", 0)

    @property
    def world_size(self) -> int:
        return math.prod(getattr(self, axis) for axis in MESH_AXES)

    @property
    def edp(self) -> int:
        """Expert data parallel: the ranks of one pipeline stage that hold the same expert shard, W/(pp*ep*etp)
        (a fraction when ep*etp does not divide the stage; autotune.layouts.moe_rules rejects that)."""
        return self.world_size // (self.pp * self.ep * self.etp)

    @property
    def dp_shard_size(self) -> int:
        """The FSDP sharding group inside dp (dp_shard, 0 meaning all of dp); dp_replicate = dp / dp_shard_size."""
        return self.dp_shard or self.dp

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def candidate_id(self, model: ModelSpec, train: TrainSpec) -> str:
        return candidate_id(self, model, train)


PLAN_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(ParallelPlan))
# a field declared without dim_field() gets an undecided Dim (the completeness test names what to decide)
PLAN_DIMS: dict[str, Dim] = {f.name: f.metadata.get("dim", Dim()) for f in dataclasses.fields(ParallelPlan)}
PLAN_DEFAULTS: dict[str, Any] = {f.name: f.default for f in dataclasses.fields(ParallelPlan)}
PLAN_KINDS: dict[str, str] = {f.name: str(f.type) for f in dataclasses.fields(ParallelPlan)}  # "int", "str", "bool"
INT_FIELDS: tuple[str, ...] = tuple(n for n in PLAN_FIELDS if PLAN_KINDS[n] == "int")
COUNT_FIELDS: tuple[str, ...] = tuple(n for n in INT_FIELDS if PLAN_DIMS[n].count)
MESH_AXES: tuple[str, ...] = tuple(n for n in PLAN_FIELDS if PLAN_DIMS[n].mesh)
# searched only when asked (Dim.opt_in): the default space holds them at their default
OPT_IN_FIELDS: tuple[str, ...] = tuple(n for n in PLAN_FIELDS if PLAN_DIMS[n].opt_in)


def domain_problem(name: str, value: Any) -> str | None:
    """What plan field `name` must be when `value` is outside its domain ("an integer >= 1", "one of none, ..."),
    from its type and Dim; None when the value is fine. One definition for ParallelPlan and the search space."""
    dim, kind = PLAN_DIMS[name], PLAN_KINDS[name]
    if kind == "bool":
        return None if isinstance(value, bool) else "true or false"
    if kind == "str":
        return None if value in dim.choices else f"one of {', '.join(dim.choices)}"
    if dim.maximum is not None:
        ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= dim.maximum
        return None if ok else f"one of {', '.join(str(i) for i in range(dim.maximum + 1))}"
    low = 1 if dim.count else 0
    if isinstance(value, int) and not isinstance(value, bool) and value >= low:
        return None
    return f"an integer >= {low}" + (" (0 = all of dp)" if dim.zero_is_all else "")


def py_value(v: Any) -> Any:
    """A plain Python scalar from a numpy/pandas cell (`np.int64(2)` -> 2); anything else as it is."""
    return v.item() if hasattr(v, "item") else v


def plan_value(name: str, v: Any) -> Any:
    """A frame cell of plan field `name` as the Python type the field declares."""
    return {"int": int, "str": str, "bool": bool}[PLAN_KINDS[name]](py_value(v))


def _json_cells(name: str, values: list[Any]) -> list[Any]:
    """The JSON text of each value of one plan field (ints stay ints, for "%d"), without a json.dumps per row."""
    kind = PLAN_KINDS[name]
    if kind == "int":
        return values
    if kind == "bool":
        return ["true" if v else "false" for v in values]
    text = {v: json.dumps(str(v)) for v in set(values)}
    return [text[v] for v in values]


# The plan fields every candidate id has hashed since ids were introduced. A field added later enters the id only
# where it differs from its default, so the ids of existing results (and resume) survive adding a dimension.
_ID_FIELDS_ALWAYS = frozenset(
    {
        "dp",
        "tp",
        "pp",
        "cp",
        "vpp",
        "zero_stage",
        "micro_batch_size",
        "grad_accum_steps",
        "recompute",
        "sequence_parallel",
        "pp_schedule",
    }
)
# the fields added since (results files written before them lack their columns)
LATER_FIELDS: tuple[str, ...] = tuple(n for n in PLAN_FIELDS if n not in _ID_FIELDS_ALWAYS)


def candidate_ids(columns: dict[str, list[Any]], model: ModelSpec, train: TrainSpec) -> list[str]:
    """Stable 12-hex ids of (plan, model shape, train shape), one per row of `columns` (plan field -> Python values):
    sha1 of the sorted-key JSON of {"plan", "model", "train"}, so the same layout of the same job keeps its id across
    runs. The one implementation behind `candidate_id` and the planner (built as text, no dataclass per row)."""
    model_json = json.dumps(model.identity(), sort_keys=True)
    train_json = json.dumps(
        {"seq_len": train.seq_len, "global_batch_size": train.global_batch_size, "precision": train.precision},
        sort_keys=True,
    )
    head, tail = '{"model": ' + model_json + ', "plan": {', '}, "train": ' + train_json + "}"
    pieces, cells, seen_always = [], [], False
    for n in sorted(PLAN_FIELDS):
        values = columns[n]
        texts = _json_cells(n, values)
        if n in _ID_FIELDS_ALWAYS:
            pieces.append((", " if seen_always else "") + f'"{n}": ' + ("%d" if PLAN_KINDS[n] == "int" else "%s"))
            seen_always = True
        else:  # present only off its default, carrying its own separator
            form = f', "{n}": %s' if seen_always else f'"{n}": %s, '
            texts = [form % t if v != PLAN_DEFAULTS[n] else "" for t, v in zip(texts, values)]
            pieces.append("%s")
        cells.append(texts)
    fmt = head.replace("%", "%%") + "".join(pieces) + tail.replace("%", "%%")
    sha1 = hashlib.sha1
    return [sha1((fmt % row).encode()).hexdigest()[:12] for row in zip(*cells)]


def candidate_id(plan: ParallelPlan, model: ModelSpec, train: TrainSpec) -> str:
    """Stable 12-hex id of (plan, model shape, train shape): same layout of the same job -> same id, across runs."""
    return candidate_ids({n: [getattr(plan, n)] for n in PLAN_FIELDS}, model, train)[0]
