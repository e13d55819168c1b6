"""`Dim`: every fact the code needs about one `ParallelPlan` field (autotune/core/types.py), declared once next to it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True)
class Dim:
    """Every fact the code needs about one `ParallelPlan` field, declared once next to it (like torchtitan's
    `MeshAxisName` + `ParallelDims`); every list of layout fields elsewhere derives from these (the search-space
    schema and its checks, the planner's enumeration, plan arrays, labels, the Optuna dimensions, the OOM-pruning
    order, the `plan` command's per-option table). docs/extending.md lists the places a new field must touch.

    mesh: a device-mesh axis (their product is the world size). derived: empty for a field the search space lists
    (search_spaces/space/), else how the planner computes it from the others. opt_in: searched only when asked: the
    default search space holds it at its default (it changes the job, not only the layout: compile, offload, HSDP,
    FP8), and `autotune plan` shows the best layout of each value when the space lists several. optuna: sampled as one
    categorical by the Optuna strategy (False for derived fields). oom: how the field enters the OOM-pruning partial
    order (autotune.search.oom_pruning): "shape" (must be equal), "higher" (a higher value needs at least the memory),
    "lower" (a lower value, in `choices` order for strings, needs at least the memory) or "derived" (fixed by the
    other fields). `optuna` and `oom` have no default: None means "not decided yet" (the code treats the field as not
    sampled and as shape, the safe side) and tests/unit/test_layout_completeness.py fails until it is decided.
    label: the field's name in OOM-pruning reasons. choices: the values of a string field, in order (the index is its
    code in plan arrays). count: an integer that counts something (a degree, a size, a number of steps), so it must be
    >= 1 (else >= 0). maximum: the largest value of a bounded integer (zero_stage). zero_is_all: 0 means "all of dp"
    (the largest group: ranked after every size in the OOM order). tag: the field's piece of the layout label
    (autotune.core.labels), "{}" standing for the value; shown off the default only unless `tag_always`; a boolean's
    tag is shown when true. codes: a string field's label text per choice ("" = not shown)."""

    mesh: bool = False
    derived: str = ""
    opt_in: bool = False
    optuna: bool | None = None
    oom: Literal["shape", "higher", "lower", "derived"] | None = None
    label: str = ""
    choices: tuple[str, ...] = ()
    count: bool = True
    maximum: int | None = None
    zero_is_all: bool = False
    tag: str = ""
    tag_always: bool = False
    codes: tuple[str, ...] = ()


def dim_field(default: Any, **meta: Any) -> Any:
    """A ParallelPlan field with its Dim: `x: int = dim_field(1, mesh=True, optuna=True, oom="shape")`."""
    return field(default=default, metadata={"dim": Dim(**meta)})
