"""The one short label of a layout, used by `plan`, `estimate`, the sweep's progress lines, `report`, the plots and
the exports' header: `dp8·tp2·pp4·cp1 z1 mbs2 gas8 sel sp` (vpp shown when > 1, the pipeline schedule when it is
not the one derived from the layout: gpipe / interleaved_1f1b are named only with pp > 1; CPU offload as off-opt /
off-params)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autotune.core.types import ParallelPlan

_RECOMPUTE = {"none": "", "selective": " sel", "full": " full"}


def _getter(row: Mapping[str, Any] | ParallelPlan):
    if isinstance(row, ParallelPlan):
        return lambda k, default=None: getattr(row, k, default)
    return row.get  # a row from before a field existed lacks its key: the label reads the default


def layout_label(row: Mapping[str, Any] | ParallelPlan) -> str:
    """`row`: a plan-shaped mapping (a candidate or result row, a pandas Series) or a ParallelPlan."""
    g = _getter(row)
    text = f"dp{int(g('dp'))}·tp{int(g('tp'))}·pp{int(g('pp'))}·cp{int(g('cp'))}"
    if int(g("vpp", 1) or 1) > 1:
        text += f"·vpp{int(g('vpp'))}"
    text += f" z{int(g('zero_stage'))} mbs{int(g('micro_batch_size'))}"
    gas = g("grad_accum_steps", None)
    if gas is not None:
        text += f" gas{int(gas)}"
    text += _RECOMPUTE.get(str(g("recompute", "none")), f" {g('recompute')}")
    if bool(g("sequence_parallel", False)):
        text += " sp"
    if int(g("pp")) > 1 and g("pp_schedule", None) == "gpipe":
        text += " gpipe"
    if bool(g("compile", False)):
        text += " compile"
    if str(g("offload", "none") or "none") != "none":
        text += f" off-{'opt' if g('offload') == 'optimizer' else g('offload')}"
    shard = g("dp_shard", 0)
    if shard is not None and shard == shard and int(shard) > 0:  # HSDP (NaN/None: a row from before the field)
        text += f" hsdp{int(shard)}"
    if str(g("fp8", "none") or "none") != "none":
        text += f" fp8={g('fp8')}"
    return text
