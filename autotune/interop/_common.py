"""What every exporter shares: the derived numbers of one layout, the "not mapped" list, and the comment header.

An exporter never drops an autotune setting silently: whatever the target cannot express is appended to
`Export.unmapped` as "<autotune field>=<value>: <why / what the target does instead>", and the file says so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

from autotune import __version__
from autotune.core.model import ModelSpec
from autotune.core.types import PLAN_DEFAULTS, ClusterSpec, ParallelPlan, TrainSpec
from autotune.interop.train_keys import DROPOUT_LISTED
from autotune.layouts.rules import require_well_formed


@dataclass(frozen=True)
class ExportContext:
    """One winning layout of one job, plus the numbers every target spells differently."""

    model: ModelSpec
    train: TrainSpec
    cluster: ClusterSpec
    plan: ParallelPlan

    def __post_init__(self) -> None:
        require_well_formed(self.plan, self.train)  # the batch product and the plan's cross-field rules

    @property
    def world_size(self) -> int:
        return self.plan.world_size

    @property
    def num_nodes(self) -> int:
        return -(-self.world_size // self.cluster.gpus_per_node)

    @property
    def gpus_per_node(self) -> int:
        return min(self.world_size, self.cluster.gpus_per_node)

    @property
    def global_batch_size(self) -> int:
        """Sequences per optimizer step = dp * micro_batch_size * grad_accum_steps."""
        return self.train.global_batch_size

    @property
    def layers_per_virtual_stage(self) -> int | None:
        """num_layers / (pp * vpp) when it divides evenly (Megatron and torchtitan want an integer), else None."""
        chunks = self.plan.pp * self.plan.vpp
        return self.model.num_layers // chunks if self.model.num_layers % chunks == 0 else None

    @property
    def stage_layers(self) -> tuple[int, ...]:
        """Layers of each of the pp*vpp pipeline stages, in stage order, under bench_model's split (the split
        autotune's memory and speed models assume: autotune/predict/schedule.py layers_of_rank): floor(L/S) each, the
        L mod S extra layers to stages 1..S-2 first, then stage 0."""
        s, n = self.plan.pp * self.plan.vpp, self.model.num_layers
        base, extra = divmod(n, s)
        return tuple(
            base + int((1 <= j <= s - 2 and j <= extra) or (j == 0 and s > 1 and extra >= s - 1)) for j in range(s)
        )

    @property
    def bf16(self) -> bool:
        return self.train.precision == "bf16"

    def summary(self) -> str:
        from autotune.core.labels import layout_label

        return f"{layout_label(self.plan)} (pp_schedule={self.plan.pp_schedule})"


@dataclass
class Export:
    """A target's document (dict for TOML/YAML/JSON, list of argv tokens for Megatron) and what did not map."""

    target: str  # e.g. "torchtitan 0.2.2 (torchtitan/config/job_config.py)"
    body: object
    unmapped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # how to use the file; one line each

    def skip(self, setting: str, why: str) -> None:
        self.unmapped.append(f"{setting}: {why}")


def window_label(m: ModelSpec) -> str:
    """`model.sliding_window=W on K of L layers` (the setting as an unmapped line names it)."""
    return f"model.sliding_window={m.sliding_window} on {m.sliding_window_layers} of {m.num_layers} layers"


def window_skip_freq(m: ModelSpec) -> int | None:
    """Megatron-LM's --window-attn-skip-freq N for this model: N - 1 sliding-window layers then one full-attention
    layer, repeated (megatron/training/arguments.py @d98e8a6: "An integer N: Represents a (N-1):1 ratio"); 1 would
    mean no window, so every layer sliding gives None with no skip flag needed. None too when K of L layers slide in
    no such period (the caller says it cannot express it). GPT-OSS: 18 of 36 -> 2 (HF layer_types start sliding)."""
    full = m.num_layers - m.sliding_window_layers
    if full == 0 or m.num_layers % full:
        return None
    return m.num_layers // full


NOT_MAPPED = "NOT MAPPED: "
SET = "SET "


def _shown(value: object) -> str:
    """A setting's value as the config tree spells it: booleans lower-case, null for None."""
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def _setting(plan: ParallelPlan, name: str) -> str:
    """`plan.<name>=<value>` as the config tree spells it (booleans lower-case)."""
    return f"plan.{name}={_shown(getattr(plan, name))}"


def skip_not_mapped(
    ex: Export, plan: ParallelPlan, plan_keys: Mapping[str, str], handled: tuple[str, ...] = ()
) -> None:
    """One `ex.skip` per field that the exporter's PLAN_KEYS table marks "NOT MAPPED: why" and this layout sets off
    its default, with the table's why: the reason is written once, in the table. `handled`: NOT MAPPED fields whose
    skip translate() words itself (several fields in one line, or a condition other than "off its default")."""
    for name, target in plan_keys.items():
        if target.startswith(NOT_MAPPED) and name not in handled and getattr(plan, name) != PLAN_DEFAULTS[name]:
            ex.skip(_setting(plan, name), target[len(NOT_MAPPED) :])


TRAIN_DEFAULTS = {f.name: f.default for f in dataclasses.fields(TrainSpec) if f.default is not dataclasses.MISSING}
RUNS = "RUNS "


def skip_train(ex: Export, ctx: ExportContext, train_keys: Mapping[str, str], maps_moe_routing: bool = False) -> None:
    """One `ex.skip` per train field this job sets off TrainSpec's default that the exporter's TRAIN_KEYS table
    (autotune/interop/train_keys.py) marks "NOT MAPPED: why", or "RUNS v: why" with another value than v; then
    train.moe_routing other than the learned router on an MoE model unless the target maps it itself
    (`maps_moe_routing`), and the dropout a megatron-profile estimate priced where the table says the target's model
    makes none. Named, never dropped."""
    t = ctx.train
    for name, entry in train_keys.items():
        value = getattr(t, name)
        if name not in TRAIN_DEFAULTS or value == TRAIN_DEFAULTS[name]:
            continue
        if entry.startswith(NOT_MAPPED):
            ex.skip(f"train.{name}={_shown(value)}", entry[len(NOT_MAPPED) :])
        elif entry.startswith(RUNS) and value is not None:
            runs, why = entry[len(RUNS) :].split(": ", 1)
            runs = ("bf16" if ctx.bf16 else "fp32") if runs == "precision" else runs
            if _shown(value) != runs:
                ex.skip(f"train.{name}={_shown(value)}", f"{ex.target.split(' (')[0]} runs {runs} ({why})")
    if not maps_moe_routing and ctx.model.is_moe and t.moe_routing != "learned":
        ex.skip(f"train.moe_routing={t.moe_routing}", f"{ex.target} has no routing override: the learned router")
    if train_keys.get("hidden_dropout") == DROPOUT_LISTED and t.framework == "megatron" and t.hidden_dropout > 0:
        ex.skip(
            f"train.hidden_dropout={t.hidden_dropout}",
            f"{ex.target}'s model has no dropout; the megatron-profile estimate priced its 1-byte masks",
        )


def header_lines(ctx: ExportContext, export: Export) -> list[str]:
    """The comment block (without comment markers) that opens every exported file."""
    lines = [
        f"Written by autotune {__version__} for model {ctx.model.name} on {ctx.world_size} GPU(s) "
        f"({ctx.num_nodes} node(s) of {ctx.cluster.name}).",
        f"Layout: {ctx.summary()}",
        f"Batch: global_batch_size={ctx.global_batch_size} sequences x seq_len={ctx.train.seq_len} "
        f"({ctx.global_batch_size * ctx.train.seq_len} tokens) per optimizer step; precision={ctx.train.precision}.",
        f"Key names follow {export.target}.",
    ]
    from autotune.analyse.target import expected_memory_line, profile_for_target

    fw = profile_for_target(export.target, ctx.train)
    lines.append(expected_memory_line(ctx.model, ctx.train, ctx.cluster, ctx.plan, fw))
    lines += export.notes
    if export.unmapped:
        lines.append("NOT MAPPED (the target cannot express these autotune settings; the file does not apply them):")
        lines += [f"  - {u}" for u in export.unmapped]
    else:
        lines.append("NOT MAPPED: nothing; every autotune setting of this layout is expressed below.")
    return lines


def comment_block(lines: list[str], marker: str = "#") -> str:
    return "".join(f"{marker} {line}\n" if line else f"{marker}\n" for line in lines)


def apply_set_keys(ex: Export, spec: ParallelPlan | TrainSpec, keys: Mapping[str, str]) -> Export:
    """Write every field the table (a PLAN_KEYS or TRAIN_KEYS table) maps as "SET <key>" and the plan / train spec
    `spec` sets off its default: a Megatron flag (`--name value`) onto an argv body, a dotted path into a document
    body. Returns `ex`."""
    defaults = PLAN_DEFAULTS if isinstance(spec, ParallelPlan) else TRAIN_DEFAULTS
    for name, target in keys.items():
        if not target.startswith(SET) or getattr(spec, name) == defaults[name]:
            continue
        key, value = target[len(SET) :], getattr(spec, name)
        if isinstance(ex.body, list):  # a boolean Megatron flag is a bare switch (`--tp-comm-overlap`)
            ex.body.append([key] if value is True else [key, str(value)])
            continue
        node = ex.body
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return ex


def apply_tables(ex: Export, ctx: ExportContext, plan_keys: Mapping[str, str], train_keys: Mapping[str, str]) -> Export:
    """A translate's last step: the PLAN_KEYS and TRAIN_KEYS tables' direct "SET" keys (`apply_set_keys`)."""
    return apply_set_keys(apply_set_keys(ex, ctx.plan, plan_keys), ctx.train, train_keys)
