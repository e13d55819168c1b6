"""Stage 7, interoperation: export one layout to the config another trainer reads (`autotune export --format ...`).

    render(fmt, model, train, cluster, plan) -> str     # pure: no I/O, no sweep needed
    FORMATS   = ("torchtitan", "megatron", "nanotron", "deepspeed", "accelerate")
    SUFFIXES  = {"torchtitan": ".toml", ...}             # file suffix the export CLI uses for `-o` defaults

One module per target; each names, in its docstring and in the file it writes, the project version whose key
names it follows, and lists in the file what did not map (TOML/YAML/Megatron args: a comment block; JSON, which has
no comments: the top-level keys "_autotune" and "_autotune_unmapped", which DeepSpeed ignores).
"""

from __future__ import annotations

import importlib

from autotune.core.errors import UsageError
from autotune.core.model import ModelSpec
from autotune.core.types import ClusterSpec, ParallelPlan, TrainSpec

FORMATS: tuple[str, ...] = ("torchtitan", "megatron", "nanotron", "deepspeed", "accelerate")
SUFFIXES: dict[str, str] = {
    "torchtitan": ".toml",
    "megatron": ".args",  # one `--flag value` per line, `#` comments: shlex.split(text, comments=True) -> argv
    "nanotron": ".yaml",
    "deepspeed": ".json",
    "accelerate": ".yaml",
}


def _module(fmt: str):
    if fmt not in FORMATS:
        raise UsageError(f"--format={fmt!r} is not an export format (choose from: {', '.join(FORMATS)})")
    return importlib.import_module(f"autotune.interop.{fmt}")


def render(fmt: str, model: ModelSpec, train: TrainSpec, cluster: ClusterSpec, plan: ParallelPlan) -> str:
    """The target's config file text for this layout; raises UsageError when the target cannot run the layout at all
    (DeepSpeed with tp > 1), ValueError on an unknown format or inconsistent inputs."""
    return _module(fmt).render(model, train, cluster, plan)


def unmapped(fmt: str, model: ModelSpec, train: TrainSpec, cluster: ClusterSpec, plan: ParallelPlan) -> list[str]:
    """The autotune settings the target cannot express (the same list the file carries)."""
    from autotune.interop._common import ExportContext

    return list(_module(fmt).translate(ExportContext(model, train, cluster, plan)).unmapped)


__all__ = ["FORMATS", "SUFFIXES", "render", "unmapped"]
