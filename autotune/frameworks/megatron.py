"""The megatron profile (docs/frameworks.md)."""

from __future__ import annotations

from dataclasses import dataclass

from autotune.frameworks.base import FrameworkProfile


@dataclass(frozen=True)
class MegatronProfile(FrameworkProfile):
    name: str = "megatron"
