"""The torchtitan profile (docs/frameworks.md): torchtitan's Llama trainer.

A placeholder that inherits bench_model's accounting, which was built to follow torchtitan's FSDP2 + DTensor
parallelisms (FSDP2 MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32), DTensor sequence parallel, which
saves the all-gathered input of the column-parallel linears, torch.distributed.pipelining schedules). Overrides that
are torchtitan's own go here, each validated against torchtitan's code.
"""

from __future__ import annotations

from dataclasses import dataclass

from autotune.frameworks.base import FrameworkProfile


@dataclass(frozen=True)
class TorchtitanProfile(FrameworkProfile):
    name: str = "torchtitan"
